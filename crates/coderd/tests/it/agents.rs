//! coderd's side of the workspace agent, driven through the real endpoint with the protocol's
//! client (`codersdk::agentsdk::AgentConnection`): authentication, manifest, lifecycle,
//! connection status, logs, metadata, stats.

use std::time::Duration;

use chrono::Utc;
use codersdk::Client;
use codersdk::agentsdk::{
    AgentConnection, AgentLog, LifecycleChange, LifecycleState, LogBatch, MetadataValue, Request,
    Response, StartupInfo, Stats,
};
use codersdk::proto::{
    Agent, AgentAuth, AgentMetadata, App, Devcontainer, Env, Resource, Script, ScriptDependency,
    ScriptRequirement,
};
use codersdk::workspaces::{CreateWorkspaceBuildRequest, CreateWorkspaceRequest, Workspace};
use futures::StreamExt;
use provisionerd::engines::echo::{BuildStage, EchoTemplate};
use testutil::{TestApp, eventually, wait_build};
use uuid::Uuid;

pub(crate) fn agent_template(token: &str) -> EchoTemplate {
    let resource = Resource {
        name: "dev".into(),
        kind: "docker_container".into(),
        agents: vec![Agent {
            name: "main".into(),
            operating_system: "linux".into(),
            architecture: "amd64".into(),
            directory: "~/src".into(),
            auth: AgentAuth::Token(token.into()),
            env: [("EDITOR".to_string(), "vim".to_string())].into(),
            extra_envs: vec![Env {
                name: "GREETING".into(),
                value: "hello".into(),
                ..Default::default()
            }],
            scripts: vec![Script {
                display_name: "Startup Script".into(),
                script: "echo started".into(),
                run_on_start: true,
                timeout_seconds: 60,
                ..Default::default()
            }],
            metadata: vec![AgentMetadata {
                key: "load".into(),
                display_name: "Load".into(),
                script: "cat /proc/loadavg".into(),
                interval: 10,
                timeout: 2,
                order: 0,
            }],
            apps: vec![App {
                slug: "code".into(),
                display_name: "VS Code".into(),
                url: "http://localhost:8080".into(),
                ..Default::default()
            }],
            connection_timeout_seconds: 120,
            ..Default::default()
        }],
        ..Default::default()
    };
    EchoTemplate {
        start: Some(BuildStage {
            resources: vec![resource],
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A running workspace whose agent uses `token`.
async fn workspace(app: &TestApp, owner: &Client, token: &str) -> anyhow::Result<Workspace> {
    workspace_for(app, owner, "me", "dev", token).await
}

/// A running workspace `name` of `user`, created by `admin` from a template of its own whose
/// agent uses `token`.
pub(crate) async fn workspace_for(
    app: &TestApp,
    admin: &Client,
    user: &str,
    name: &str,
    token: &str,
) -> anyhow::Result<Workspace> {
    workspace_with(app, admin, user, name, &agent_template(token)).await
}

/// A started workspace of a new template made of `template`.
pub(crate) async fn workspace_with(
    app: &TestApp,
    admin: &Client,
    user: &str,
    name: &str,
    template: &EchoTemplate,
) -> anyhow::Result<Workspace> {
    let template = app
        .echo_template(admin, &testutil::unique("agents"), template, &[])
        .await?;
    let ws = admin
        .create_workspace(
            user,
            &CreateWorkspaceRequest {
                template_id: Some(template.id),
                name: name.into(),
                ..Default::default()
            },
        )
        .await?;
    wait_build(admin, ws.latest_build.id).await?;
    Ok(admin.workspace(ws.id).await?)
}

pub(crate) fn agent_id(ws: &Workspace) -> Uuid {
    ws.latest_build.resources[0].agents[0].id
}

#[tokio::test(flavor = "multi_thread")]
async fn the_manifest_carries_script_dependencies_and_dev_containers() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let token = Uuid::new_v4().to_string();
    let mut template = agent_template(&token);
    if let Some(agent) = template
        .start
        .as_mut()
        .and_then(|s| s.resources.first_mut())
        .and_then(|r| r.agents.first_mut())
    {
        let script = |address: &str, after: Option<&str>| Script {
            display_name: address.into(),
            script: "true".into(),
            run_on_start: true,
            resource_address: address.into(),
            dependencies: after
                .map(|a| ScriptDependency {
                    prerequisite_resource_address: a.into(),
                    requirement: ScriptRequirement::Completion,
                })
                .into_iter()
                .collect(),
            ..Default::default()
        };
        agent.scripts = vec![
            script("coder_script.clone", None),
            script("coder_script.install", Some("coder_script.clone")),
        ];
        agent.devcontainers = vec![Devcontainer {
            name: "repo".into(),
            workspace_folder: "/repo".into(),
            config_path: "/repo/.devcontainer/devcontainer.json".into(),
            ..Default::default()
        }];
    }
    let template = app.echo_template(&owner, "ordered", &template, &[]).await?;
    let ws = testutil::running_workspace(&owner, template.id, "dev").await?;
    let id = agent_id(&ws);

    let conn = AgentConnection::connect(&app.url, &token).await?;
    let Response::Manifest(manifest) = conn.call(Request::GetManifest).await? else {
        panic!("expected a manifest");
    };
    let install = manifest
        .scripts
        .iter()
        .find(|s| s.resource_address == "coder_script.install")
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        install.dependencies,
        [ScriptDependency {
            prerequisite_resource_address: "coder_script.clone".into(),
            requirement: ScriptRequirement::Completion,
        }]
    );
    let [container] = manifest.devcontainers.as_slice() else {
        panic!("one dev container: {:?}", manifest.devcontainers);
    };
    assert_eq!(
        (container.name.as_str(), container.workspace_folder.as_str()),
        ("repo", "/repo")
    );
    assert_eq!(
        container.config_path,
        "/repo/.devcontainer/devcontainer.json"
    );
    // Its log source is the agent's, so what the agent reports there shows with its logs.
    let agent = owner.workspace_agent(id).await?;
    let source = agent
        .log_sources
        .iter()
        .find(|s| s.id == container.log_source_id)
        .map(|s| s.display_name.as_str());
    assert_eq!(source, Some("Dev container repo"));
    // And the sub-agent the build recorded for it, under this agent.
    let subagent = owner
        .workspace_agent(container.subagent_id.unwrap_or_default())
        .await?;
    assert_eq!(subagent.parent_id, Some(id));
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_connects_fetches_its_manifest_and_reports_its_lifecycle() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let token = Uuid::new_v4().to_string();
    let ws = workspace(&app, &owner, &token).await?;
    let id = agent_id(&ws);
    assert_eq!(owner.workspace_agent(id).await?.status, "connecting");

    let conn = AgentConnection::connect(&app.url, &token).await?;
    let Response::Manifest(manifest) = conn.call(Request::GetManifest).await? else {
        panic!("expected a manifest");
    };
    assert_eq!(
        (manifest.agent_id, manifest.agent_name.as_str()),
        (id, "main")
    );
    assert_eq!(manifest.workspace_name, "dev");
    assert_eq!(manifest.owner_name, "owner");
    assert_eq!(manifest.directory, "~/src");
    assert_eq!(
        manifest
            .environment_variables
            .get("GREETING")
            .map(String::as_str),
        Some("hello")
    );
    assert_eq!(
        manifest
            .environment_variables
            .get("EDITOR")
            .map(String::as_str),
        Some("vim")
    );
    assert_eq!(manifest.scripts.len(), 1);
    assert_eq!(manifest.scripts[0].script, "echo started");
    assert_eq!(manifest.metadata[0].key, "load");
    assert_eq!(manifest.apps[0].slug, "code");

    conn.call(Request::UpdateStartup(StartupInfo {
        version: "v0.1.0".into(),
        expanded_directory: "/home/owner/src".into(),
        ..Default::default()
    }))
    .await?;
    let at = Utc::now();
    conn.call(Request::UpdateLifecycle {
        changes: vec![
            LifecycleChange {
                state: LifecycleState::Starting,
                changed_at: at,
            },
            LifecycleChange {
                state: LifecycleState::Ready,
                changed_at: at + chrono::Duration::seconds(1),
            },
        ],
    })
    .await?;
    let agent = owner.workspace_agent(id).await?;
    assert_eq!(
        (agent.status.as_str(), agent.lifecycle_state.as_str()),
        ("connected", "ready")
    );
    assert_eq!(agent.version, "v0.1.0");
    assert_eq!(agent.expanded_directory, "/home/owner/src");
    assert!(agent.started_at.is_some() && agent.ready_at > agent.started_at);
    assert_eq!(agent.scripts[0].log_source_id, agent.log_sources[0].id);
    assert!(agent.first_connected_at.is_some());

    // Lifecycle only moves forward, whatever arrives late.
    conn.call(Request::UpdateLifecycle {
        changes: vec![LifecycleChange {
            state: LifecycleState::Starting,
            changed_at: Utc::now(),
        }],
    })
    .await?;
    assert_eq!(owner.workspace_agent(id).await?.lifecycle_state, "ready");

    drop(conn);
    eventually(Duration::from_secs(10), "agent disconnected", || async {
        Ok(owner.workspace_agent(id).await?.status == "disconnected")
    })
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn wrong_tokens_and_agents_of_old_builds_are_refused() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let token = Uuid::new_v4().to_string();
    let ws = workspace(&app, &owner, &token).await?;
    for bad in [Uuid::new_v4().to_string(), "not-a-token".to_string()] {
        let err = AgentConnection::connect(&app.url, &bad)
            .await
            .err()
            .expect("refused");
        assert_eq!(err.status(), Some(401), "{err}");
        assert!(
            err.to_string().contains("Invalid agent token"),
            "same answer whether or not it exists: {err}"
        );
    }
    // A new build (with a new agent) makes the old agent's token stale.
    let stop = owner
        .create_workspace_build(
            ws.id,
            &CreateWorkspaceBuildRequest {
                transition: "stop".into(),
                ..Default::default()
            },
        )
        .await?;
    wait_build(&owner, stop.id).await?;
    let err = AgentConnection::connect(&app.url, &token)
        .await
        .err()
        .expect("old build");
    assert_eq!(err.status(), Some(403));
    assert!(
        err.to_string().contains("build #1") && err.to_string().contains("#2"),
        "{err}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn agent_logs_are_stored_followed_and_capped() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let token = Uuid::new_v4().to_string();
    let ws = workspace(&app, &owner, &token).await?;
    let id = agent_id(&ws);
    let source = owner.workspace_agent(id).await?.log_sources[0].id;
    let conn = AgentConnection::connect(&app.url, &token).await?;
    let line = |output: &str| AgentLog {
        created_at: Utc::now(),
        level: "info".into(),
        output: output.into(),
    };
    conn.call(Request::BatchCreateLogs(LogBatch {
        log_source_id: source,
        logs: vec![line("one"), line("two")],
    }))
    .await?;
    let mut follower = owner.follow_agent_logs(id, 0).await?;
    let first = follower
        .next()
        .await
        .ok_or_else(|| anyhow::anyhow!("stream ended"))??;
    assert_eq!(first.output, "one");
    let second = follower
        .next()
        .await
        .ok_or_else(|| anyhow::anyhow!("stream ended"))??;
    assert_eq!((second.output.as_str(), second.source_id), ("two", source));
    conn.call(Request::BatchCreateLogs(LogBatch {
        log_source_id: source,
        logs: vec![line("three")],
    }))
    .await?;
    let live = tokio::time::timeout(Duration::from_secs(10), follower.next())
        .await?
        .ok_or_else(|| anyhow::anyhow!("stream ended"))??;
    assert_eq!(live.output, "three", "new lines arrive live");

    let big = "x".repeat(64 << 10);
    let mut exceeded = false;
    for _ in 0..20 {
        let logs = (0..4).map(|_| line(&big)).collect();
        match conn
            .call(Request::BatchCreateLogs(LogBatch {
                log_source_id: source,
                logs,
            }))
            .await?
        {
            Response::Logs { limit_exceeded } => exceeded |= limit_exceeded,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(exceeded, "the 1 MiB cap was reported");
    let agent = owner.workspace_agent(id).await?;
    assert!(agent.logs_overflowed);
    assert!(agent.logs_length <= 1 << 20);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn metadata_and_stats_are_batched_into_the_database() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let token = Uuid::new_v4().to_string();
    let ws = workspace(&app, &owner, &token).await?;
    let id = agent_id(&ws);
    let conn = AgentConnection::connect(&app.url, &token).await?;
    conn.call(Request::BatchUpdateMetadata {
        values: vec![MetadataValue {
            key: "load".into(),
            collected_at: Utc::now(),
            age: 0,
            value: "0.42".into(),
            error: String::new(),
        }],
    })
    .await?;
    eventually(Duration::from_secs(5), "metadata flushed", || async {
        let values = owner.workspace_agent_metadata(id).await?;
        Ok(values
            .iter()
            .any(|m| m.description.key == "load" && m.result.value == "0.42"))
    })
    .await?;
    conn.call(Request::BatchUpdateMetadata {
        values: vec![MetadataValue {
            key: "load".into(),
            collected_at: Utc::now(),
            age: 0,
            value: "y".repeat(5000),
            error: String::new(),
        }],
    })
    .await?;
    eventually(Duration::from_secs(5), "long value truncated", || async {
        let values = owner.workspace_agent_metadata(id).await?;
        Ok(values
            .iter()
            .any(|m| m.result.value.len() == 2048 && m.result.error.contains("truncated")))
    })
    .await?;
    let before = owner.workspace(ws.id).await?.last_used_at;
    let reply = conn
        .call(Request::UpdateStats(Stats {
            session_count_ssh: 1,
            rx_bytes: 100,
            ..Default::default()
        }))
        .await?;
    assert_eq!(
        reply,
        Response::Stats {
            report_interval_seconds: 30
        }
    );
    eventually(
        Duration::from_secs(15),
        "last_used_at bumped by a session",
        || async { Ok(owner.workspace(ws.id).await?.last_used_at > before) },
    )
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn members_cannot_see_other_users_agents() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let (member, _) = app.user(&owner, "member", &[]).await?;
    let ws = workspace(&app, &owner, &Uuid::new_v4().to_string()).await?;
    let id = agent_id(&ws);
    for err in [
        member.workspace_agent(id).await.err(),
        member.workspace_agent_logs(id).await.err(),
        member.workspace_agent_metadata(id).await.err(),
    ] {
        assert_eq!(err.and_then(|e| e.status()), Some(404));
    }
    Ok(())
}

fn own_binary_path() -> String {
    format!(
        "/bin/coder-{}-{}",
        std::env::consts::OS,
        match std::env::consts::ARCH {
            "x86_64" => "amd64",
            "aarch64" => "arm64",
            other => other,
        }
    )
}

#[tokio::test]
async fn the_agent_binary_is_served_for_this_platform_only() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let client = app.client();
    let resp = client
        .request(reqwest::Method::GET, &own_binary_path())?
        .send()
        .await?;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers().get("content-encoding"), None);
    let expected = std::fs::read(std::env::current_exe()?)?;
    assert!(resp.bytes().await? == expected, "the running executable");
    let other = client
        .request(reqwest::Method::GET, "/bin/coder-plan9-mips")?
        .send()
        .await?;
    assert_eq!(other.status(), 404);
    Ok(())
}

#[tokio::test]
async fn the_agent_binary_is_compressed_on_request_and_not_sent_again_when_current()
-> anyhow::Result<()> {
    use sha2::Digest as _;
    use std::io::Read as _;

    let app = TestApp::new().await?;
    let client = app.client();
    let expected = std::fs::read(std::env::current_exe()?)?;
    let etag = format!("\"{}\"", hex::encode(sha1::Sha1::digest(&expected)));
    let sha256 = format!("W/\"{}\"", hex::encode(sha2::Sha256::digest(&expected)));
    let get = |headers: &[(&str, &str)]| -> anyhow::Result<reqwest::RequestBuilder> {
        let mut request = client.request(reqwest::Method::GET, &own_binary_path())?;
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        Ok(request)
    };

    let zstd = get(&[("accept-encoding", "zstd")])?.send().await?;
    assert_eq!(zstd.status(), 200);
    assert_eq!(zstd.headers()["content-encoding"], "zstd");
    assert_eq!(zstd.headers()["etag"], etag.as_str());
    assert_eq!(zstd.headers()["vary"], "accept-encoding");
    let body = zstd.bytes().await?;
    assert!(body.len() < expected.len(), "{} bytes", body.len());
    assert!(zstd::decode_all(&body[..])? == expected);

    let gzip = get(&[("accept-encoding", "gzip")])?.send().await?;
    assert_eq!(gzip.headers()["content-encoding"], "gzip");
    let mut decoded = Vec::new();
    flate2::read::GzDecoder::new(&gzip.bytes().await?[..]).read_to_end(&mut decoded)?;
    assert!(decoded == expected);

    // An IDE holding this binary sends its SHA-1 (the tag); a bootstrap script its SHA-256,
    // quoted, weak or strong.
    let weak = format!("W/{etag}");
    let strong_sha256 = sha256.trim_start_matches("W/");
    for if_none_match in [
        etag.as_str(),
        weak.as_str(),
        sha256.as_str(),
        strong_sha256,
        &format!("\"other\", {etag}"),
    ] {
        let cached = get(&[
            ("accept-encoding", "zstd"),
            ("if-none-match", if_none_match),
        ])?
        .send()
        .await?;
        assert_eq!(cached.status(), 304, "{if_none_match}");
        assert_eq!(cached.headers()["etag"], etag.as_str());
        assert!(cached.bytes().await?.is_empty());
    }
    let stale = get(&[("if-none-match", "W/\"0123\"")])?.send().await?;
    assert_eq!(stale.status(), 200);
    assert_eq!(stale.bytes().await?.len(), expected.len());
    Ok(())
}
