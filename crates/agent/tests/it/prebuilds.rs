//! A claimed prebuild's agent: the process that readied the prebuild keeps running, and after
//! the claim build its connection re-authenticates as the claim build's agent, ready at once.

use std::time::{Duration, Instant};

use codersdk::proto::{Prebuild, Preset, Resource};
use codersdk::workspaces::CreateWorkspaceRequest;
use provisionerd::engines::echo::{BuildStage, EchoTemplate, ImportStage};
use testutil::{TestApp, eventually, wait_build};
use uuid::Uuid;

use crate::coderd::{PATIENCE, agent};
use crate::harness::TestAgent;

#[tokio::test(flavor = "multi_thread")]
async fn a_claimed_prebuild_keeps_its_running_agent_under_the_new_owner() -> anyhow::Result<()> {
    // The test runs the reconciler's passes itself: an echo template gives every prebuild the
    // same agent token, so a refill would hold this agent's token too.
    let app = TestApp::with_options(|o| {
        o.provisioner_daemons = 1;
        o.prebuilds = None;
    })
    .await?;
    let (owner, _) = app.owner().await?;
    let (member, me) = app.user(&owner, "member", &[]).await?;
    let token = Uuid::new_v4().to_string();
    let template = EchoTemplate {
        import: Some(ImportStage {
            presets: vec![Preset {
                name: "warm".into(),
                prebuild: Some(Prebuild {
                    instances: 1,
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        start: Some(BuildStage {
            resources: vec![Resource {
                name: "dev".into(),
                kind: "docker_container".into(),
                agents: vec![agent(&token, Vec::new())],
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    let t = app.echo_template(&owner, "warm", &template, &[]).await?;
    let report = coderd_executors::prebuilds::pass(&app.state, Duration::from_secs(1)).await?;
    assert_eq!(report.created, 1);
    eventually(PATIENCE, "the prebuild built", || async {
        Ok(app.state.store.prebuilds().await?.iter().any(|p| p.done))
    })
    .await?;
    let _agent = TestAgent::connect_with(&app.url, &token)?;
    eventually(PATIENCE, "the prebuild's agent ready", || async {
        Ok(app.state.store.prebuilds().await?.iter().any(|p| p.ready))
    })
    .await?;
    let prebuild = app.state.store.prebuilds().await?.remove(0);
    let old_agent = owner
        .workspace(prebuild.workspace_id)
        .await?
        .latest_build
        .resources[0]
        .agents[0]
        .id;

    let preset = member.template_version_presets(t.active_version_id).await?[0].id;
    let started = Instant::now();
    let ws = member
        .create_workspace(
            "me",
            &CreateWorkspaceRequest {
                template_version_id: Some(t.active_version_id),
                name: "mine".into(),
                template_version_preset_id: Some(preset),
                ..Default::default()
            },
        )
        .await?;
    assert_eq!((ws.id, ws.owner_id), (prebuild.workspace_id, me.id));
    wait_build(&member, ws.latest_build.id).await?;
    let new_agent = member.workspace(ws.id).await?.latest_build.resources[0].agents[0].clone();
    assert_ne!(
        new_agent.id, old_agent,
        "the claim build has its own agent row"
    );
    eventually(PATIENCE, "the claimed workspace's agent ready", || async {
        let a = member.workspace_agent(new_agent.id).await?;
        Ok(a.status == "connected" && a.lifecycle_state == "ready")
    })
    .await?;
    let ready = started.elapsed();
    // The running agent re-authenticated as the claim build's agent: its old row is left.
    eventually(
        PATIENCE,
        "the prebuild's agent row disconnected",
        || async { Ok(owner.workspace_agent(old_agent).await?.status == "disconnected") },
    )
    .await?;
    eventually(PATIENCE, "the agent connected as the new row", || async {
        let a = member.workspace_agent(new_agent.id).await?;
        Ok(a.status == "connected" && a.last_connected_at > new_agent.last_connected_at)
    })
    .await?;
    println!("claim -> ready: {ready:?}");
    Ok(())
}
