//! Workspaces and their builds on real (built-in and WebSocket) daemons with the echo engine:
//! lifecycle, state hand-over, parameters, conflicts, cancellation, logs, daemon death.

use std::time::Duration;

use codersdk::proto::{Agent, AgentAuth, App, Resource, RichParameter, RichParameterOption};
use codersdk::provisioners::ProvisionerJobStatus;
use codersdk::workspaces::{
    CreateWorkspaceBuildRequest, CreateWorkspaceRequest, WorkspaceBuildParameter, WorkspaceStatus,
};
use codersdk::{Client, ClientError};
use futures::StreamExt;
use provisionerd::DaemonAuth;
use provisionerd::engines::echo::{
    BuildStage, EchoError, EchoLog, EchoState, EchoTemplate, Flood, ImportStage,
};
use testutil::{DaemonSpec, TestApp, eventually, wait_build};
use uuid::Uuid;

fn status(e: &ClientError) -> u16 {
    e.status().unwrap_or_default()
}

fn dev_resource() -> Resource {
    Resource {
        name: "dev".into(),
        kind: "docker_container".into(),
        agents: vec![Agent {
            name: "main".into(),
            operating_system: "linux".into(),
            architecture: "amd64".into(),
            auth: AgentAuth::Token(Uuid::new_v4().to_string()),
            apps: vec![App {
                slug: "code".into(),
                display_name: "VS Code".into(),
                url: "http://localhost:8080".into(),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn lifecycle_template() -> EchoTemplate {
    EchoTemplate {
        import: Some(ImportStage {
            rich_parameters: vec![
                RichParameter {
                    name: "region".into(),
                    kind: "string".into(),
                    default_value: "eu".into(),
                    mutable: false,
                    options: vec![
                        RichParameterOption {
                            name: "EU".into(),
                            value: "eu".into(),
                            ..Default::default()
                        },
                        RichParameterOption {
                            name: "US".into(),
                            value: "us".into(),
                            ..Default::default()
                        },
                    ],
                    ..Default::default()
                },
                RichParameter {
                    name: "cpus".into(),
                    kind: "number".into(),
                    default_value: "2".into(),
                    mutable: true,
                    validation_min: Some(1),
                    validation_max: Some(8),
                    ..Default::default()
                },
            ],
            ..Default::default()
        }),
        start: Some(BuildStage {
            logs: vec![EchoLog::info("starting the container")],
            resources: vec![dev_resource()],
            ..Default::default()
        }),
        stop: Some(BuildStage {
            resources: vec![Resource {
                name: "home".into(),
                kind: "docker_volume".into(),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

async fn create(
    client: &Client,
    template: Uuid,
    name: &str,
    params: &[(&str, &str)],
) -> Result<codersdk::workspaces::Workspace, ClientError> {
    client
        .create_workspace(
            "me",
            &CreateWorkspaceRequest {
                template_id: Some(template),
                name: name.into(),
                rich_parameter_values: params
                    .iter()
                    .map(|(n, v)| WorkspaceBuildParameter {
                        name: n.to_string(),
                        value: v.to_string(),
                    })
                    .collect(),
                ..Default::default()
            },
        )
        .await
}

async fn build(
    client: &Client,
    workspace: Uuid,
    transition: &str,
) -> Result<codersdk::workspaces::WorkspaceBuild, ClientError> {
    client
        .create_workspace_build(
            workspace,
            &CreateWorkspaceBuildRequest {
                transition: transition.into(),
                ..Default::default()
            },
        )
        .await
}

fn echo_state(state: &[u8]) -> EchoState {
    EchoState::parse(state).expect("an echo state")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_workspace_lives_and_dies_with_state_handed_from_build_to_build() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let template = app
        .echo_template(&owner, "lifecycle", &lifecycle_template(), &[])
        .await?;
    let ws = create(&owner, template.id, "dev", &[("region", "us")]).await?;
    assert_eq!(ws.latest_build.build_number, 1);
    assert_eq!(ws.template_name, "lifecycle");

    let first = wait_build(&owner, ws.latest_build.id).await?;
    assert_eq!(first.status, WorkspaceStatus::Running);
    assert_eq!(first.resources.len(), 1);
    let agent = &first.resources[0].agents[0];
    assert_eq!(
        (agent.name.as_str(), agent.status.as_str()),
        ("main", "connecting")
    );
    assert_eq!(agent.apps[0].slug, "code");
    let params = owner.workspace_build_parameters(first.id).await?;
    assert!(params.contains(&WorkspaceBuildParameter {
        name: "region".into(),
        value: "us".into()
    }));
    assert!(
        params.contains(&WorkspaceBuildParameter {
            name: "cpus".into(),
            value: "2".into()
        }),
        "defaults filled in"
    );
    let logs = owner.workspace_build_logs(first.id).await?;
    assert!(
        logs.iter().any(|l| l.output == "parameter region=us"),
        "parameter values reach the engine"
    );
    let s1 = echo_state(&owner.workspace_build_state(first.id).await?);
    assert_eq!((s1.generation, s1.previous.is_none()), (1, true));

    let stop = wait_build(&owner, build(&owner, ws.id, "stop").await?.id).await?;
    assert_eq!(
        (stop.status, stop.build_number),
        (WorkspaceStatus::Stopped, 2)
    );
    assert_eq!(
        stop.resources
            .iter()
            .map(|r| r.name.as_str())
            .collect::<Vec<_>>(),
        ["home"]
    );
    let s2 = echo_state(&owner.workspace_build_state(stop.id).await?);
    assert_eq!(s2.generation, 2);
    assert_eq!(
        s2.previous.map(|p| p.workspace_build_id),
        Some(first.id),
        "the previous build's state reached the engine"
    );

    let start = wait_build(&owner, build(&owner, ws.id, "start").await?.id).await?;
    assert_eq!(start.status, WorkspaceStatus::Running);
    assert_eq!(
        echo_state(&owner.workspace_build_state(start.id).await?).generation,
        3
    );
    assert!(
        owner
            .workspace_build_parameters(start.id)
            .await?
            .contains(&WorkspaceBuildParameter {
                name: "region".into(),
                value: "us".into()
            }),
        "values carried over"
    );

    let delete = wait_build(&owner, build(&owner, ws.id, "delete").await?.id).await?;
    assert_eq!(delete.status, WorkspaceStatus::Deleted);
    assert_eq!(
        status(&owner.workspace(ws.id).await.expect_err("deleted")),
        410
    );
    assert!(
        owner
            .workspace_with_deleted(ws.id)
            .await?
            .latest_build
            .status
            == WorkspaceStatus::Deleted
    );
    assert_eq!(owner.workspaces("owner:me").await?.count, 0);
    create(&owner, template.id, "dev", &[]).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn only_one_build_at_a_time() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let mut tpl = lifecycle_template();
    if let Some(start) = tpl.start.as_mut() {
        start.delay_ms = 1000;
    }
    let template = app.echo_template(&owner, "slow", &tpl, &[]).await?;
    let ws = create(&owner, template.id, "dev", &[]).await?;
    let busy = build(&owner, ws.id, "stop")
        .await
        .expect_err("active build");
    assert_eq!(status(&busy), 409);
    assert_eq!(
        owner.workspace_builds(ws.id).await?.len(),
        1,
        "nothing written"
    );
    wait_build(&owner, ws.latest_build.id).await?;
    build(&owner, ws.id, "stop").await?;
    Ok(())
}

/// Builds of one workspace asked for at the same moment: one is created, every other one is
/// told a build is active. The statement that writes a build checks the latest build after the
/// workspace's row lock is granted; checked under the snapshot from before the wait, the losers
/// would miss the winner's build and fail on its build number (500) instead.
#[tokio::test(flavor = "multi_thread")]
async fn builds_asked_for_at_once_make_one_build_and_conflicts() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let mut tpl = lifecycle_template();
    if let Some(stop) = tpl.stop.as_mut() {
        stop.delay_ms = 1000;
    }
    let template = app.echo_template(&owner, "racy", &tpl, &[]).await?;
    let ws = create(&owner, template.id, "dev", &[]).await?;
    wait_build(&owner, ws.latest_build.id).await?;
    let asks = (0..8).map(|_| build(&owner, ws.id, "stop"));
    let answers = futures::future::join_all(asks).await;
    let created: Vec<_> = answers.iter().filter_map(|a| a.as_ref().ok()).collect();
    let refused: Vec<u16> = answers
        .iter()
        .filter_map(|a| a.as_ref().err())
        .map(status)
        .collect();
    assert_eq!(created.len(), 1, "one build created: {refused:?}");
    assert_eq!(refused, vec![409; 7]);
    assert_eq!(created[0].build_number, 2);
    assert_eq!(owner.workspace_builds(ws.id).await?.len(), 2);
    wait_build(&owner, created[0].id).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_parameters_are_refused_and_write_nothing() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let template = app
        .echo_template(&owner, "params", &lifecycle_template(), &[])
        .await?;
    for bad in [
        [("region", "mars")],
        [("cpus", "64")],
        [("cpus", "many")],
        [("nope", "1")],
    ] {
        let err = create(&owner, template.id, "dev", &bad)
            .await
            .expect_err("invalid");
        let ClientError::Api { status, response } = err else {
            panic!("not an API error")
        };
        assert_eq!(status, 400, "{bad:?}");
        assert!(
            response.validations[0]
                .field
                .starts_with("rich_parameter_values."),
            "{response:?}"
        );
    }
    assert_eq!(owner.workspaces("").await?.count, 0, "nothing written");

    let ws = create(&owner, template.id, "dev", &[("region", "eu")]).await?;
    wait_build(&owner, ws.latest_build.id).await?;
    let immutable = owner
        .create_workspace_build(
            ws.id,
            &CreateWorkspaceBuildRequest {
                transition: "start".into(),
                rich_parameter_values: vec![WorkspaceBuildParameter {
                    name: "region".into(),
                    value: "us".into(),
                }],
                ..Default::default()
            },
        )
        .await
        .expect_err("immutable");
    assert_eq!(status(&immutable), 400);
    assert!(immutable.to_string().contains("Validation failed"));
    assert_eq!(owner.workspace_builds(ws.id).await?.len(), 1);
    let bad_transition = build(&owner, ws.id, "explode")
        .await
        .expect_err("transition");
    assert_eq!(status(&bad_transition), 400);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_templates_and_names_are_clear_errors() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let unknown = create(&owner, Uuid::new_v4(), "dev", &[])
        .await
        .expect_err("unknown template");
    assert_eq!(status(&unknown), 400);
    assert!(unknown.to_string().contains("Template does not exist"));
    let template = app
        .echo_template(&owner, "t", &EchoTemplate::default(), &[])
        .await?;
    assert_eq!(
        status(
            &create(&owner, template.id, "bad_name", &[])
                .await
                .expect_err("name")
        ),
        400
    );
    let ws = create(&owner, template.id, "dev", &[]).await?;
    assert_eq!(
        status(
            &create(&owner, template.id, "DEV", &[])
                .await
                .expect_err("dup")
        ),
        409
    );
    wait_build(&owner, ws.latest_build.id).await?;
    assert_eq!(owner.workspaces("").await?.count, 1);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn members_see_only_their_own_workspaces() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let (alice, _) = app.user(&owner, "alice", &[]).await?;
    let (bob, _) = app.user(&owner, "bob", &[]).await?;
    let template = app
        .echo_template(&owner, "t", &lifecycle_template(), &[])
        .await?;
    let ws = create(&alice, template.id, "mine", &[]).await?;
    wait_build(&alice, ws.latest_build.id).await?;
    assert_eq!(bob.workspaces("").await?.count, 0);
    assert_eq!(
        status(&bob.workspace(ws.id).await.expect_err("hidden")),
        404
    );
    assert_eq!(
        status(
            &bob.workspace_build(ws.latest_build.id)
                .await
                .expect_err("hidden")
        ),
        404
    );
    assert_eq!(
        status(
            &bob.workspace_build_logs(ws.latest_build.id)
                .await
                .expect_err("hidden")
        ),
        404
    );
    assert_eq!(
        status(&build(&bob, ws.id, "stop").await.expect_err("hidden")),
        404
    );
    assert_eq!(
        status(
            &alice
                .workspace_build_state(ws.latest_build.id)
                .await
                .expect_err("state is for template admins")
        ),
        403
    );
    assert_eq!(owner.workspaces("owner:alice").await?.count, 1);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn cancelling_a_pending_build_is_immediate() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    let daemon = app.daemon(DaemonSpec::new(
        "only",
        DaemonAuth::SessionToken(owner.token().unwrap_or_default().into()),
    ))?;
    let template = app
        .echo_template(&owner, "t", &lifecycle_template(), &[])
        .await?;
    let ws = create(&owner, template.id, "dev", &[]).await?;
    wait_build(&owner, ws.latest_build.id).await?;
    daemon.stop().await??;
    // No daemon left: the build stays pending until cancelled.
    let pending = build(&owner, ws.id, "stop").await?;
    assert_eq!(pending.job.status, ProvisionerJobStatus::Pending);
    owner.cancel_workspace_build(pending.id).await?;
    let canceled = owner.workspace_build(pending.id).await?;
    assert_eq!(
        (canceled.status, canceled.job.status),
        (WorkspaceStatus::Canceled, ProvisionerJobStatus::Canceled)
    );
    assert_eq!(
        status(
            &owner
                .cancel_workspace_build(pending.id)
                .await
                .expect_err("done")
        ),
        400
    );
    // A cancelled pending job is never picked up later.
    let _late = app.daemon(DaemonSpec::new(
        "late",
        DaemonAuth::SessionToken(owner.token().unwrap_or_default().into()),
    ))?;
    let next = wait_build(&owner, build(&owner, ws.id, "stop").await?.id).await?;
    assert_eq!(next.status, WorkspaceStatus::Stopped);
    assert_eq!(
        owner.workspace_build(pending.id).await?.job.status,
        ProvisionerJobStatus::Canceled
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn cancelling_a_running_build_tells_the_engine() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let mut tpl = lifecycle_template();
    tpl.stop = Some(BuildStage {
        hang: true,
        ..Default::default()
    });
    let template = app.echo_template(&owner, "hangs", &tpl, &[]).await?;
    let ws = create(&owner, template.id, "dev", &[]).await?;
    let started = wait_build(&owner, ws.latest_build.id).await?;
    let running = build(&owner, ws.id, "stop").await?;
    eventually(
        Duration::from_secs(10),
        "the stop build running",
        || async {
            Ok(
                owner.workspace_build(running.id).await?.job.status
                    == ProvisionerJobStatus::Running,
            )
        },
    )
    .await?;
    owner.cancel_workspace_build(running.id).await?;
    let done = wait_build(&owner, running.id).await?;
    assert_eq!(done.status, WorkspaceStatus::Canceled, "{}", done.job.error);
    let logs = owner.workspace_build_logs(running.id).await?;
    assert!(
        logs.iter()
            .any(|l| l.output.contains("Hanging until canceled"))
    );
    // A cancelled build keeps the state it ran from (here the hang returns the stage's state).
    let state = echo_state(&owner.workspace_build_state(done.id).await?);
    assert!(
        state.generation >= echo_state(&owner.workspace_build_state(started.id).await?).generation
    );
    build(&owner, ws.id, "start").await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_build_keeps_the_state_the_engine_reported() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let mut tpl = lifecycle_template();
    tpl.stop = Some(BuildStage {
        error: Some(EchoError {
            message: "apply failed halfway".into(),
            code: String::new(),
            state: Some("partial-state".into()),
        }),
        ..Default::default()
    });
    let template = app.echo_template(&owner, "fails", &tpl, &[]).await?;
    let ws = create(&owner, template.id, "dev", &[]).await?;
    wait_build(&owner, ws.latest_build.id).await?;
    let failed = wait_build(&owner, build(&owner, ws.id, "stop").await?.id).await?;
    assert_eq!(failed.status, WorkspaceStatus::Failed);
    assert_eq!(failed.job.error, "apply failed halfway");
    assert_eq!(
        owner.workspace_build_state(failed.id).await?,
        b"partial-state"
    );
    let next = wait_build(&owner, build(&owner, ws.id, "start").await?.id).await?;
    let logs = owner.workspace_build_logs(next.id).await?;
    assert!(
        logs.iter().any(|l| l.output.contains("partial-state")),
        "the next build starts from the failed build's state"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn logs_follow_live_from_any_point_without_gaps_or_duplicates() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 2).await?;
    let (owner, _) = app.owner().await?;
    let tpl = EchoTemplate {
        start: Some(BuildStage {
            flood: Some(Flood {
                lines: 300,
                line_bytes: 40,
                ..Default::default()
            }),
            delay_ms: 300,
            ..Default::default()
        }),
        ..Default::default()
    };
    let template = app.echo_template(&owner, "chatty", &tpl, &[]).await?;
    let a = create(&owner, template.id, "a", &[]).await?;
    let b = create(&owner, template.id, "b", &[]).await?;
    // Followers join at once, so they see lines as they are written.
    let mut followers = Vec::new();
    for ws in [&a, &b] {
        let path = format!("/api/v2/workspacebuilds/{}/logs", ws.latest_build.id);
        followers.push(owner.follow_logs(&path, 0).await?);
    }
    let mut streams = Vec::new();
    for f in followers {
        streams.push(tokio::spawn(async move { f.collect::<Vec<_>>().await }));
    }
    for (ws, stream) in [&a, &b].into_iter().zip(streams) {
        let live: Vec<_> = stream.await?.into_iter().collect::<Result<_, _>>()?;
        let stored = owner.workspace_build_logs(ws.latest_build.id).await?;
        assert_eq!(
            live, stored,
            "the live stream is the stored log, in order, ending at completion"
        );
        assert!(
            live.iter()
                .filter(|l| l.output.starts_with("flood line"))
                .count()
                == 300
        );
        assert!(live.windows(2).all(|w| w[0].id < w[1].id));
        // A late follower starting from the middle gets exactly the rest.
        let middle = stored[stored.len() / 2].id;
        let path = format!("/api/v2/workspacebuilds/{}/logs", ws.latest_build.id);
        let rest: Vec<_> = owner
            .follow_logs(&path, middle)
            .await?
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect::<Result<_, _>>()?;
        assert_eq!(
            rest,
            stored
                .into_iter()
                .filter(|l| l.id > middle)
                .collect::<Vec<_>>()
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn logs_are_capped_per_job() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let tpl = EchoTemplate {
        start: Some(BuildStage {
            flood: Some(Flood {
                lines: 3000,
                line_bytes: 500,
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let template = app.echo_template(&owner, "flood", &tpl, &[]).await?;
    let ws = create(&owner, template.id, "dev", &[]).await?;
    let done = wait_build(&owner, ws.latest_build.id).await?;
    assert_eq!(
        done.status,
        WorkspaceStatus::Running,
        "an overflow does not fail the build"
    );
    assert!(done.job.logs_overflowed);
    let logs = owner.workspace_build_logs(done.id).await?;
    let bytes: usize = logs.iter().map(|l| l.output.len()).sum();
    assert!(bytes <= 1 << 20, "{bytes} bytes kept");
    assert!(bytes > 900 << 10, "the cap is about 1 MiB, not much less");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_daemon_that_dies_mid_job_has_its_job_failed_and_the_workspace_builds_again()
-> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    let token = DaemonAuth::SessionToken(owner.token().unwrap_or_default().into());
    let builder = app.daemon(DaemonSpec::new("builder", token.clone()))?;
    let mut tpl = lifecycle_template();
    tpl.stop = Some(BuildStage {
        hang: true,
        ..Default::default()
    });
    let template = app.echo_template(&owner, "t", &tpl, &[]).await?;
    let ws = create(&owner, template.id, "dev", &[]).await?;
    let first = wait_build(&owner, ws.latest_build.id).await?;
    let stop = build(&owner, ws.id, "stop").await?;
    eventually(
        Duration::from_secs(10),
        "the stop build running",
        || async {
            Ok(owner.workspace_build(stop.id).await?.job.status == ProvisionerJobStatus::Running)
        },
    )
    .await?;
    let died_at = std::time::Instant::now();
    builder.abort();
    let failed = wait_build(&owner, stop.id).await?;
    let took = died_at.elapsed();
    assert_eq!(failed.status, WorkspaceStatus::Failed);
    assert!(took < Duration::from_secs(30), "failed after {took:?}");
    assert!(
        failed.job.error.contains("stopped sending heartbeats"),
        "{}",
        failed.job.error
    );
    let logs = owner.workspace_build_logs(stop.id).await?;
    assert!(
        logs.last().is_some_and(|l| l.output.contains("heartbeats")),
        "the reason is in the logs"
    );
    assert_eq!(
        owner.workspace_build_state(failed.id).await?,
        owner.workspace_build_state(first.id).await?,
        "the previous state is kept"
    );
    let _replacement = app.daemon(DaemonSpec::new("builder-2", token))?;
    let again = wait_build(&owner, build(&owner, ws.id, "start").await?.id).await?;
    assert_eq!(again.status, WorkspaceStatus::Running);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn long_workspace_lists_are_streamed_in_chunks_and_complete() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| {
        o.provisioner_daemons = 2;
        o.http.workspace_list_chunk = 2;
    })
    .await?;
    let (owner, _) = app.owner().await?;
    let template = app
        .echo_template(&owner, "t", &lifecycle_template(), &[])
        .await?;
    for i in 0..5 {
        let ws = create(&owner, template.id, &format!("ws{i}"), &[]).await?;
        wait_build(&owner, ws.latest_build.id).await?;
    }
    let all = owner.workspaces("").await?;
    assert_eq!(all.count, 5);
    let names: Vec<_> = all.workspaces.iter().map(|w| w.name.as_str()).collect();
    assert_eq!(
        names,
        ["ws0", "ws1", "ws2", "ws3", "ws4"],
        "complete and in order across chunks"
    );
    assert!(
        all.workspaces
            .iter()
            .all(|w| w.latest_build.status == WorkspaceStatus::Running)
    );
    let page = owner
        .get_query::<codersdk::workspaces::WorkspacesResponse, _>(
            "/api/v2/workspaces",
            &[("limit", "2"), ("offset", "2")],
        )
        .await?;
    assert_eq!((page.count, page.workspaces.len()), (5, 2));
    assert_eq!(page.workspaces[0].name, "ws2");
    assert_eq!(owner.workspaces("status:running").await?.count, 5);
    assert_eq!(owner.workspaces("status:stopped").await?.count, 0);
    assert_eq!(owner.workspaces("name:ws3").await?.count, 1);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn an_owners_page_is_in_name_order_counted_and_only_what_the_caller_may_see()
-> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let (alice, _) = app.user(&owner, "alice", &[]).await?;
    let (bob, _) = app.user(&owner, "bob", &[]).await?;
    let template = app
        .echo_template(&owner, "t", &lifecycle_template(), &[])
        .await?;
    // Names whose case and byte order disagree: the page is ordered case-insensitively.
    for name in ["b-dev", "A-dev", "c-dev"] {
        let ws = create(&alice, template.id, name, &[]).await?;
        wait_build(&alice, ws.latest_build.id).await?;
    }
    let bobs = create(&bob, template.id, "a-bob", &[]).await?;
    wait_build(&bob, bobs.latest_build.id).await?;

    let page = |client: &Client, q: &'static str, limit: &'static str, offset: &'static str| {
        let client = client.clone();
        async move {
            let page = client
                .get_query::<codersdk::workspaces::WorkspacesResponse, _>(
                    "/api/v2/workspaces",
                    &[("q", q), ("limit", limit), ("offset", offset)],
                )
                .await?;
            let names: Vec<String> = page.workspaces.into_iter().map(|w| w.name).collect();
            anyhow::Ok((names, page.count))
        }
    };
    assert_eq!(
        page(&owner, "owner:alice", "2", "0").await?,
        (vec!["A-dev".to_string(), "b-dev".into()], 3)
    );
    assert_eq!(
        page(&owner, "owner:alice", "2", "2").await?,
        (vec!["c-dev".to_string()], 3)
    );
    assert_eq!(
        page(&alice, "owner:me", "25", "0").await?,
        (vec!["A-dev".to_string(), "b-dev".into(), "c-dev".into()], 3)
    );
    assert_eq!(
        page(&alice, "owner:me b-", "25", "0").await?,
        (vec!["b-dev".to_string()], 1),
        "with a name filter"
    );
    assert_eq!(
        page(&bob, "owner:alice", "25", "0").await?,
        (Vec::<String>::new(), 0),
        "another member's workspaces stay hidden, and uncounted"
    );
    // Without `owner:`, owners in name order and each one's workspaces in name order, however
    // the page cuts across them.
    assert_eq!(
        page(&owner, "", "2", "2").await?,
        (vec!["c-dev".to_string(), "a-bob".into()], 4)
    );
    assert_eq!(
        page(&owner, "", "25", "1").await?,
        (vec!["b-dev".to_string(), "c-dev".into(), "a-bob".into()], 4)
    );
    assert_eq!(
        page(&bob, "", "25", "0").await?,
        (vec!["a-bob".to_string()], 1)
    );
    Ok(())
}
