//! Coder's Tasks through the real API: a task's workspace is built by a real daemon whose
//! echo engine logs the task and prompt coderd handed it (the terraform path is covered by the
//! CLI's tests); its status follows the build, the agent and the app; only those who may see
//! the workspace see the task; deleting it deletes the workspace.

use chrono::Utc;
use codersdk::agentsdk::{AgentConnection, LifecycleChange, LifecycleState, Request};
use codersdk::proto::{
    Agent, AgentAuth, AiTask, App, Devcontainer, Resource, RichParameter, TemplateFeatures,
};
use codersdk::tasks::{CreateTaskRequest, Task, TaskStatus, TasksFilter};
use codersdk::workspaces::CreateWorkspaceBuildRequest;
use codersdk::{Client, ClientError};
use provisionerd::engines::echo::{BuildStage, EchoTemplate, ImportStage};
use reqwest::Method;
use testutil::{TestApp, wait_build};
use uuid::Uuid;

const PROMPT: &str = "Fix the flaky test in crates/cli";

/// A template with an agent, a chat app and a `coder_ai_task` naming the app, which still
/// declares Coder's legacy `AI Prompt` parameter.
fn task_template(token: &str) -> EchoTemplate {
    EchoTemplate {
        import: Some(ImportStage {
            rich_parameters: vec![RichParameter {
                name: "AI Prompt".into(),
                kind: "string".into(),
                ..Default::default()
            }],
            ..Default::default()
        }),
        start: Some(BuildStage {
            resources: vec![Resource {
                name: "dev".into(),
                kind: "null_resource".into(),
                agents: vec![Agent {
                    name: "main".into(),
                    operating_system: "linux".into(),
                    architecture: "amd64".into(),
                    auth: AgentAuth::Token(token.into()),
                    apps: vec![App {
                        id: "chat-app".into(),
                        slug: "chat".into(),
                        url: "http://localhost:3284".into(),
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            }],
            features: Some(TemplateFeatures {
                has_ai_tasks: true,
                ai_tasks: vec![AiTask {
                    id: "task".into(),
                    app_id: "chat-app".into(),
                }],
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn status(e: &ClientError) -> u16 {
    e.status().unwrap_or_default()
}

fn validation_fields(e: &ClientError) -> Vec<String> {
    match e {
        ClientError::Api { response, .. } => response
            .validations
            .iter()
            .map(|v| v.field.clone())
            .collect(),
        _ => Vec::new(),
    }
}

async fn build_logs(client: &Client, build: Uuid) -> anyhow::Result<String> {
    Ok(client
        .workspace_build_logs(build)
        .await?
        .iter()
        .map(|l| format!("{}\n", l.output))
        .collect())
}

async fn latest_build_done(client: &Client, task: &Task) -> anyhow::Result<Uuid> {
    let ws = client
        .workspace(task.workspace_id.unwrap_or_default())
        .await?;
    Ok(wait_build(client, ws.latest_build.id).await?.id)
}

async fn transition(client: &Client, task: &Task, to: &str) -> anyhow::Result<Uuid> {
    let build = client
        .create_workspace_build(
            task.workspace_id.unwrap_or_default(),
            &CreateWorkspaceBuildRequest {
                transition: to.into(),
                ..Default::default()
            },
        )
        .await?;
    Ok(wait_build(client, build.id).await?.id)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_runs_its_prompt_and_only_those_who_see_its_workspace_see_it() -> anyhow::Result<()>
{
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let (alice, _) = app.user(&owner, "alice", &[]).await?;
    let (bob, _) = app.user(&owner, "bob", &[]).await?;
    let token = Uuid::new_v4().to_string();
    let template = app
        .echo_template(&owner, "agentic", &task_template(&token), &[])
        .await?;

    let task = alice
        .create_task(
            "me",
            &CreateTaskRequest {
                template_version_id: template.active_version_id,
                input: PROMPT.into(),
                ..Default::default()
            },
        )
        .await?;
    assert!(
        task.name.starts_with("fix-the-flaky-test-in-"),
        "{}",
        task.name
    );
    assert_eq!(task.display_name, PROMPT);
    assert_eq!(task.initial_prompt, PROMPT);
    assert_eq!(task.owner_name, "alice");
    assert_eq!(task.template_name, "agentic");
    assert_eq!(task.template_version_id, template.active_version_id);
    assert_eq!(task.workspace_name, task.name);
    assert!(
        matches!(task.status, TaskStatus::Pending | TaskStatus::Initializing),
        "{:?}",
        task.status
    );

    // The build received the task and its prompt, and the legacy parameter got it too.
    let first = latest_build_done(&alice, &task).await?;
    let logs = build_logs(&alice, first).await?;
    assert!(
        logs.contains(&format!("task {} prompt {PROMPT:?}", task.id)),
        "{logs}"
    );
    assert!(
        logs.contains(&format!("parameter AI Prompt={PROMPT}")),
        "{logs}"
    );

    // Built, its agent not yet connected: initialising, and saying why.
    let by_name = alice.task("me", &task.name).await?;
    let by_id = alice.task("alice", &task.id.to_string()).await?;
    assert_eq!(by_name, by_id);
    assert_eq!(by_id.status, TaskStatus::Initializing);
    assert_eq!(by_id.workspace_agent_lifecycle.as_deref(), Some("created"));
    assert_eq!(
        by_id.current_state.as_ref().map(|s| s.message.as_str()),
        Some("Agent is connecting")
    );
    let ws = alice
        .workspace(task.workspace_id.unwrap_or_default())
        .await?;
    assert_eq!(
        by_id.workspace_app_id,
        ws.latest_build.ai_task_sidebar_app_id
    );
    assert!(by_id.workspace_app_id.is_some());
    assert_eq!(
        by_id.workspace_agent_id,
        Some(ws.latest_build.resources[0].agents[0].id)
    );
    assert_eq!(by_id.workspace_build_number, 1);

    // Coder's field names, all of them.
    let raw: serde_json::Value = alice.get(&format!("/api/v2/tasks/me/{}", task.id)).await?;
    for key in [
        "id",
        "organization_id",
        "owner_id",
        "owner_name",
        "name",
        "display_name",
        "template_id",
        "template_version_id",
        "template_name",
        "template_display_name",
        "template_icon",
        "workspace_id",
        "workspace_name",
        "workspace_status",
        "workspace_build_number",
        "workspace_agent_id",
        "workspace_agent_lifecycle",
        "workspace_agent_health",
        "workspace_app_id",
        "initial_prompt",
        "status",
        "current_state",
        "created_at",
        "updated_at",
    ] {
        assert!(raw.get(key).is_some(), "{key} missing from {raw}");
    }
    assert_eq!(raw["status"], "initializing");
    assert_eq!(raw["current_state"]["state"], "working");
    let listed: serde_json::Value = alice.get("/api/v2/tasks").await?;
    assert_eq!(listed["count"], 1);
    assert_eq!(listed["tasks"][0]["id"], task.id.to_string());

    // The agent comes up; the app has no health check: active.
    let conn = AgentConnection::connect(&app.url, &token).await?;
    conn.call(Request::UpdateLifecycle {
        changes: vec![
            LifecycleChange {
                state: LifecycleState::Starting,
                changed_at: Utc::now(),
            },
            LifecycleChange {
                state: LifecycleState::Ready,
                changed_at: Utc::now(),
            },
        ],
    })
    .await?;
    let active = alice.task("me", &task.name).await?;
    assert_eq!(active.status, TaskStatus::Active);
    assert_eq!(active.current_state, None);
    assert!(active.workspace_agent_health.is_some_and(|h| h.healthy));
    drop(conn);

    // The search: by status, owner and organization, refusing what it does not know.
    let search = |owner: &str, status: Option<TaskStatus>| TasksFilter {
        owner: owner.into(),
        status,
        ..Default::default()
    };
    assert_eq!(
        alice
            .tasks(&search("me", Some(TaskStatus::Active)))
            .await?
            .len(),
        1
    );
    assert_eq!(
        alice
            .tasks(&search("", Some(TaskStatus::Paused)))
            .await?
            .len(),
        0
    );
    assert_eq!(alice.tasks(&search("bob", None)).await?.len(), 0);
    assert_eq!(owner.tasks(&search("alice", None)).await?.len(), 1);
    let org = TasksFilter {
        organization: "coder".into(),
        ..Default::default()
    };
    assert_eq!(owner.tasks(&org).await?.len(), 1);
    let bare: serde_json::Value = owner.get_query("/api/v2/tasks", &[("q", "alice")]).await?;
    assert_eq!(bare["count"], 1, "a bare word is an owner");
    for q in ["color:red", "status:sleeping"] {
        let err = alice
            .get_query::<serde_json::Value, _>("/api/v2/tasks", &[("q", q)])
            .await
            .expect_err(q);
        assert_eq!(status(&err), 400, "{q}");
        assert_eq!(validation_fields(&err).len(), 1, "{q}: {err}");
    }

    // Bob sees nothing of it, by any name, and can neither send it input nor read its logs.
    let more = codersdk::tasks::TaskSendRequest {
        input: "more".into(),
    };
    assert!(bob.tasks(&TasksFilter::default()).await?.is_empty());
    for (user, ident) in [
        ("alice", task.id.to_string()),
        ("alice", task.name.clone()),
        ("me", task.id.to_string()),
    ] {
        let err = bob.task(user, &ident).await.expect_err("hidden");
        assert_eq!(status(&err), 404, "{user}/{ident}");
        let err = bob.delete_task(user, &ident).await.expect_err("hidden");
        assert_eq!(status(&err), 404, "{user}/{ident}");
        let err = bob
            .task_send(user, &ident, &more)
            .await
            .expect_err("hidden");
        assert_eq!(status(&err), 404, "{user}/{ident}");
        let err = bob.task_logs(user, &ident).await.expect_err("hidden");
        assert_eq!(status(&err), 404, "{user}/{ident}");
    }
    // The site owner sees it.
    assert_eq!(owner.task("alice", &task.name).await?.id, task.id);

    // Stopped, it is paused; started again, the new build gets the prompt again.
    transition(&alice, &task, "stop").await?;
    assert_eq!(
        alice.task("me", &task.name).await?.status,
        TaskStatus::Paused
    );
    // A paused task takes no input, and has no live conversation (nor a stored snapshot).
    let err = alice
        .task_send("me", &task.name, &more)
        .await
        .expect_err("paused");
    assert_eq!(status(&err), 409);
    assert!(err.to_string().contains("Task is paused."), "{err}");
    let logs = alice.task_logs("me", &task.name).await?;
    assert!(logs.snapshot && logs.logs.is_empty(), "{logs:?}");
    let again = transition(&alice, &task, "start").await?;
    let logs = build_logs(&alice, again).await?;
    assert!(
        logs.contains(&format!("task {} prompt {PROMPT:?}", task.id)),
        "{logs}"
    );

    // A second task of the same name is the same workspace name: refused.
    let err = alice
        .create_task(
            "me",
            &CreateTaskRequest {
                template_version_id: template.active_version_id,
                input: "another".into(),
                name: task.name.clone(),
                ..Default::default()
            },
        )
        .await
        .expect_err("taken");
    assert_eq!(status(&err), 409);

    // Deleted: gone from the API at once, its workspace deleted by a delete build.
    let response = alice
        .request(Method::DELETE, &format!("/api/v2/tasks/me/{}", task.id))?
        .send()
        .await?;
    assert_eq!(response.status(), 202);
    assert_eq!(
        status(&alice.task("me", &task.name).await.expect_err("gone")),
        404
    );
    assert!(alice.tasks(&TasksFilter::default()).await?.is_empty());
    let builds = alice
        .workspace_builds(task.workspace_id.unwrap_or_default())
        .await?;
    let delete = builds
        .iter()
        .max_by_key(|b| b.build_number)
        .expect("builds");
    assert_eq!(delete.transition, "delete");
    wait_build(&alice, delete.id).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_needs_a_template_with_an_ai_task_and_a_prompt() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let (member, _) = app.user(&owner, "member", &[]).await?;
    let plain = app
        .echo_template(&owner, "plain", &EchoTemplate::default(), &[])
        .await?;
    let tasked = app
        .echo_template(
            &owner,
            "tasked",
            &task_template(&Uuid::new_v4().to_string()),
            &[],
        )
        .await?;
    let create = |version: Uuid, input: &str, name: &str| CreateTaskRequest {
        template_version_id: version,
        input: input.into(),
        name: name.into(),
        ..Default::default()
    };
    for (req, field) in [
        (
            create(plain.active_version_id, "do it", ""),
            "template_version_id",
        ),
        (create(Uuid::new_v4(), "do it", ""), "template_version_id"),
        (create(tasked.active_version_id, "  ", ""), "input"),
        (
            create(tasked.active_version_id, "do it", "Not Valid!"),
            "name",
        ),
    ] {
        let err = member.create_task("me", &req).await.expect_err(field);
        assert_eq!(status(&err), 400, "{err}");
        assert_eq!(validation_fields(&err), [field], "{err}");
    }
    let err = member
        .create_task("me", &create(plain.active_version_id, "do it", ""))
        .await
        .expect_err("no ai task");
    assert!(err.to_string().contains("coder_ai_task"), "{err}");
    // Nothing was created on the way.
    assert_eq!(member.workspaces("").await?.count, 0);
    assert!(member.tasks(&TasksFilter::default()).await?.is_empty());
    // Another user's task cannot be made by a member.
    let err = member
        .create_task("owner", &create(tasked.active_version_id, "do it", ""))
        .await
        .expect_err("not theirs");
    assert_eq!(status(&err), 404);
    Ok(())
}

/// A task whose app runs in a dev container: the container's sub-agent never starts here (no
/// container engine), so the task is in error with the reason instead of initialising for good.
#[tokio::test(flavor = "multi_thread")]
async fn a_task_whose_app_is_in_a_dev_container_fails_clearly() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let (alice, _) = app.user(&owner, "alice", &[]).await?;
    let mut template = task_template(&Uuid::new_v4().to_string());
    if let Some(agent) = template
        .start
        .as_mut()
        .and_then(|s| s.resources.first_mut())
        .and_then(|r| r.agents.first_mut())
    {
        let apps = std::mem::take(&mut agent.apps);
        agent.devcontainers = vec![Devcontainer {
            name: "repo".into(),
            workspace_folder: "/repo".into(),
            apps,
            ..Default::default()
        }];
    }
    let template = app
        .echo_template(&owner, "contained", &template, &[])
        .await?;
    let task = alice
        .create_task(
            "me",
            &CreateTaskRequest {
                template_version_id: template.active_version_id,
                input: PROMPT.into(),
                ..Default::default()
            },
        )
        .await?;
    latest_build_done(&alice, &task).await?;
    let task = alice.task("me", &task.name).await?;
    let ws = alice
        .workspace(task.workspace_id.unwrap_or_default())
        .await?;
    let sub = ws.latest_build.resources[0]
        .agents
        .iter()
        .find(|a| a.parent_id.is_some())
        .cloned()
        .ok_or_else(|| anyhow::anyhow!("no sub-agent: {:#?}", ws.latest_build.resources))?;
    assert_eq!(task.workspace_agent_id, Some(sub.id));
    assert_eq!(task.status, TaskStatus::Error);
    let reason = task
        .workspace_agent_health
        .map(|h| h.reason)
        .unwrap_or_default();
    assert!(reason.contains("container engine"), "{reason}");
    Ok(())
}
