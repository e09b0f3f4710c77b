//! P11c: claiming a prebuilt workspace — from the create request naming a preset to the
//! claimed workspace's agent connected and ready (beside P11's cold create). Each claim uses
//! its own template, because an echo template gives every prebuild the same agent token and a
//! real `coder agent` runs per token.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use codersdk::workspaces::CreateWorkspaceRequest;
use provisionerd::engines::echo::EchoTemplate;
use uuid::Uuid;

use super::agent_workspace::spawn_agent;
use crate::deploy::Deployment;
use crate::procs::Cluster;

/// How often the scenario looks: the figure's resolution.
const POLL: Duration = Duration::from_millis(10);

fn template(token: &str) -> anyhow::Result<EchoTemplate> {
    Ok(serde_json::from_value(serde_json::json!({
        "import": {"presets": [{"name": "warm", "prebuild": {"instances": 1}}]},
        "start": {
            "resources": [{
                "name": "dev", "type": "bench_instance",
                "agents": [{
                    "name": "main", "operating_system": "linux", "architecture": "amd64",
                    "auth": {"token": token}
                }]
            }]
        },
        "stop": {"resources": [{"name": "dev", "type": "bench_instance"}]}
    }))?)
}

/// Claim → ready times of `claims` claims, each of a fresh prebuild with a running agent.
pub async fn run(
    coder_bin: &Path,
    work: &Path,
    claims: usize,
    timeout: Duration,
    progress: &dyn Fn(&str),
) -> anyhow::Result<Vec<Duration>> {
    let cluster = Cluster::start(&work.join("pg")).await?;
    let measured = async {
        let mut deploy =
            Deployment::start(coder_bin, &cluster, &work.join("server"), timeout).await?;
        deploy.start_daemons(coder_bin, 1).await?;
        let mut times = Vec::with_capacity(claims);
        let mut result = Ok(());
        for i in 0..claims {
            progress(&format!("prebuilds: claim {} of {claims}", i + 1));
            match claim(
                &deploy,
                coder_bin,
                &work.join(format!("claim-{i}")),
                i,
                timeout,
            )
            .await
            {
                Ok(t) => times.push(t),
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        deploy.stop().await?;
        result.map(|()| times)
    }
    .await;
    let stopped = cluster.stop().await;
    let times = measured?;
    stopped?;
    Ok(times)
}

async fn wait<F, Fut>(timeout: Duration, what: &str, mut check: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<bool>>,
{
    let deadline = Instant::now() + timeout;
    while !check().await? {
        ensure!(
            Instant::now() < deadline,
            "prebuilds: {what} after {timeout:?}"
        );
        tokio::time::sleep(POLL).await;
    }
    Ok(())
}

async fn claim(
    deploy: &Deployment,
    coder_bin: &Path,
    work: &Path,
    i: usize,
    timeout: Duration,
) -> anyhow::Result<Duration> {
    let token = Uuid::new_v4().to_string();
    let name = format!("bench-prebuild-{i}");
    let (_, tpl) = deploy
        .template(&name, &template(&token)?, &[], true)
        .await?;
    let tpl = tpl.context("the prebuild template was not created")?;
    let owner = &deploy.owner;
    // The reconciler's first pass after the template exists makes the prebuild.
    let query = format!("owner:prebuilds template:{name}");
    let deadline = Instant::now() + timeout + Duration::from_secs(30);
    let agent = loop {
        let found = owner.workspaces(&query).await?.workspaces;
        let agent = found
            .first()
            .filter(|w| w.latest_build.job.status.as_str() == "succeeded")
            .and_then(|w| w.latest_build.resources.first())
            .and_then(|r| r.agents.first())
            .map(|a| a.id);
        if let Some(agent) = agent {
            break agent;
        }
        ensure!(Instant::now() < deadline, "prebuilds: no prebuild built");
        tokio::time::sleep(POLL * 10).await;
    };
    std::fs::create_dir_all(work)?;
    let _process = spawn_agent(deploy, coder_bin, work, &token)?;
    wait(timeout, "the prebuild's agent is not ready", || async {
        let a = owner.workspace_agent(agent).await?;
        Ok(a.status == "connected" && a.lifecycle_state == "ready")
    })
    .await?;
    let preset = owner
        .template_version_presets(tpl.active_version_id)
        .await?
        .first()
        .context("the template's preset")?
        .id;

    let started = Instant::now();
    let ws = owner
        .create_workspace(
            "me",
            &CreateWorkspaceRequest {
                template_version_id: Some(tpl.active_version_id),
                name: format!("claimed-{i}"),
                template_version_preset_id: Some(preset),
                ..Default::default()
            },
        )
        .await?;
    ensure!(
        ws.latest_build.build_number > 1,
        "the create built a new workspace instead of claiming the prebuild"
    );
    wait(timeout, "the claimed workspace is not ready", || async {
        let w = owner.workspace(ws.id).await?;
        let ready = w.latest_build.job.status.as_str() == "succeeded"
            && w.latest_build
                .resources
                .iter()
                .flat_map(|r| &r.agents)
                .all(|a| a.status == "connected" && a.lifecycle_state == "ready");
        Ok(ready)
    })
    .await?;
    Ok(started.elapsed())
}
