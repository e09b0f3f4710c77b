//! The agent against the real coderd (in-process, with a fresh database): echo templates whose
//! resource declares an agent with a known token, so the test can start that agent.

use std::time::Duration;

use codersdk::Client;
use codersdk::proto::{Agent, AgentAuth, AgentMetadata, Resource, Script};
use codersdk::workspaces::{
    CreateWorkspaceBuildRequest, CreateWorkspaceRequest, Workspace, WorkspaceAgent,
};
use provisionerd::engines::echo::{BuildStage, EchoTemplate};
use testutil::{TestApp, eventually, wait_build};
use uuid::Uuid;

use crate::harness::TestAgent;

pub(crate) const PATIENCE: Duration = Duration::from_secs(30);

pub(crate) struct Deployment {
    pub(crate) app: TestApp,
    pub(crate) owner: Client,
}

pub(crate) async fn deployment() -> anyhow::Result<Deployment> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    Ok(Deployment { app, owner })
}

pub(crate) fn agent(token: &str, scripts: Vec<Script>) -> Agent {
    Agent {
        name: "main".into(),
        operating_system: "linux".into(),
        architecture: "amd64".into(),
        directory: "~/src".into(),
        auth: AgentAuth::Token(token.into()),
        scripts,
        connection_timeout_seconds: 120,
        ..Default::default()
    }
}

fn start_script(body: &str, timeout_seconds: i32) -> Script {
    Script {
        display_name: "Startup".into(),
        script: body.into(),
        run_on_start: true,
        timeout_seconds,
        ..Default::default()
    }
}

impl Deployment {
    /// A running workspace (named `name`) whose resource carries `agent`; returns its agent id.
    pub(crate) async fn workspace(
        &self,
        name: &str,
        agent: Agent,
    ) -> anyhow::Result<(Workspace, Uuid)> {
        let template = EchoTemplate {
            start: Some(BuildStage {
                resources: vec![Resource {
                    name: "dev".into(),
                    kind: "docker_container".into(),
                    agents: vec![agent],
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        };
        let template = self
            .app
            .echo_template(&self.owner, name, &template, &[])
            .await?;
        let ws = self
            .owner
            .create_workspace(
                "me",
                &CreateWorkspaceRequest {
                    template_id: Some(template.id),
                    name: name.into(),
                    ..Default::default()
                },
            )
            .await?;
        wait_build(&self.owner, ws.latest_build.id).await?;
        let ws = self.owner.workspace(ws.id).await?;
        let id = ws.latest_build.resources[0].agents[0].id;
        Ok((ws, id))
    }

    async fn wait_agent(
        &self,
        id: Uuid,
        what: &str,
        check: impl Fn(&WorkspaceAgent) -> bool,
    ) -> anyhow::Result<WorkspaceAgent> {
        eventually(PATIENCE, what, || async {
            Ok(check(&self.owner.workspace_agent(id).await?))
        })
        .await?;
        Ok(self.owner.workspace_agent(id).await?)
    }

    /// The agent's log lines as (level, output).
    async fn logs(&self, id: Uuid) -> anyhow::Result<Vec<(String, String)>> {
        Ok(self
            .owner
            .workspace_agent_logs(id)
            .await?
            .into_iter()
            .map(|l| (l.level, l.output))
            .collect())
    }

    async fn wait_log(&self, id: Uuid, level: &str, output: &str) -> anyhow::Result<()> {
        let wanted = (level.to_string(), output.to_string());
        eventually(PATIENCE, &format!("log line {output:?}"), || async {
            Ok(self.logs(id).await?.contains(&wanted))
        })
        .await
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn coderd_sees_the_agent_start_report_and_shut_down() -> anyhow::Result<()> {
    let d = deployment().await?;
    let token = Uuid::new_v4().to_string();
    let mut spec = agent(
        &token,
        vec![
            start_script("echo from-start; echo to-stderr >&2", 60),
            Script {
                display_name: "Shutdown".into(),
                script: "echo from-stop".into(),
                run_on_stop: true,
                timeout_seconds: 60,
                ..Default::default()
            },
        ],
    );
    spec.metadata = vec![AgentMetadata {
        key: "answer".into(),
        display_name: "Answer".into(),
        script: "echo 42".into(),
        interval: 1,
        timeout: 1,
        order: 0,
    }];
    let (_, id) = d.workspace("dev", spec).await?;
    assert_eq!(d.owner.workspace_agent(id).await?.status, "connecting");

    let mut agent = TestAgent::connect_with(&d.app.url, &token)?;
    let ready = d
        .wait_agent(id, "a connected, ready agent", |a| {
            a.status == "connected" && a.lifecycle_state == "ready"
        })
        .await?;
    assert!(ready.version.starts_with('v'), "{}", ready.version);
    assert_eq!(ready.operating_system, "linux");
    assert_eq!(
        ready.expanded_directory,
        agent.home().join("src").to_string_lossy()
    );
    assert!(ready.started_at.is_some() && ready.ready_at.is_some());
    d.wait_log(id, "info", "from-start").await?;
    d.wait_log(id, "error", "to-stderr").await?;

    eventually(PATIENCE, "the metadata value", || async {
        let values = d.owner.workspace_agent_metadata(id).await?;
        Ok(values
            .iter()
            .any(|m| m.description.key == "answer" && m.result.value == "42"))
    })
    .await?;

    agent.stop().await?;
    d.wait_agent(id, "lifecycle off", |a| a.lifecycle_state == "off")
        .await?;
    assert!(
        d.logs(id)
            .await?
            .contains(&("info".into(), "from-stop".into())),
        "the stop script's output reached coderd before the agent exited"
    );
    d.wait_agent(id, "a disconnected agent", |a| a.status == "disconnected")
        .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn failing_and_slow_start_scripts_show_in_the_lifecycle() -> anyhow::Result<()> {
    let d = deployment().await?;
    for (name, script, expected) in [
        ("slow", start_script("sleep 30", 1), "start_timeout"),
        (
            "failing",
            start_script("echo failing; exit 3", 60),
            "start_error",
        ),
    ] {
        let token = Uuid::new_v4().to_string();
        let (_, id) = d.workspace(name, agent(&token, vec![script])).await?;
        let _agent = TestAgent::connect_with(&d.app.url, &token)?;
        d.wait_agent(id, expected, |a| a.lifecycle_state == expected)
            .await?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn wrong_tokens_and_agents_of_old_builds_are_refused_and_keep_trying() -> anyhow::Result<()> {
    let d = deployment().await?;
    let token = Uuid::new_v4().to_string();
    let (ws, id) = d
        .workspace("dev", agent(&token, vec![start_script("true", 60)]))
        .await?;

    let mut stranger = TestAgent::connect_with(&d.app.url, &Uuid::new_v4().to_string())?;
    // The build is replaced: the agent of build #1 is refused from now on.
    let stop = d
        .owner
        .create_workspace_build(
            ws.id,
            &CreateWorkspaceBuildRequest {
                transition: "stop".into(),
                ..Default::default()
            },
        )
        .await?;
    wait_build(&d.owner, stop.id).await?;
    let mut stale = TestAgent::connect_with(&d.app.url, &token)?;

    tokio::time::sleep(Duration::from_secs(2)).await;
    let old = d.owner.workspace_agent(id).await?;
    assert_eq!(
        (old.status.as_str(), old.lifecycle_state.as_str()),
        ("connecting", "created"),
        "the refused agent never got in"
    );
    assert!(
        !stranger.is_finished() && !stale.is_finished(),
        "both keep retrying"
    );
    stranger.stop().await?;
    stale.stop().await?;
    Ok(())
}
