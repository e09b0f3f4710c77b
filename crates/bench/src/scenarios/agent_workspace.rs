//! A workspace whose agent is a real `coder agent` process on this machine, for the scenarios
//! that measure the paths into a workspace (the relay, the app proxy).

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use codersdk::workspaces::Workspace;
use provisionerd::engines::echo::EchoTemplate;
use uuid::Uuid;

use crate::deploy::Deployment;
use crate::scenarios::relay::ssh::{Killed, coder};

pub struct AgentWorkspace {
    /// As its finished first build left it (with its resources).
    pub workspace: Workspace,
    pub agent: Uuid,
    /// The agent's process; killed when dropped.
    pub process: Killed,
}

/// Runs `coder agent` with `token` against the deployment, with `work/home` as its home.
pub fn spawn_agent(
    deploy: &Deployment,
    coder_bin: &Path,
    work: &Path,
    token: &str,
) -> anyhow::Result<Killed> {
    // The agent starts in its own home, where a relative `--coder-bin` would not resolve.
    let coder_bin = std::fs::canonicalize(coder_bin)
        .with_context(|| format!("locating {}", coder_bin.display()))?;
    let home = work.join("home");
    std::fs::create_dir_all(&home)?;
    Ok(Killed(
        coder(&coder_bin, &work.join("agent-cli"))
            .args(["agent", "--log-dir"])
            .arg(work.join("agent-logs"))
            .env("CODER_AGENT_URL", deploy.server.url.as_str())
            .env("CODER_AGENT_TOKEN", token)
            .env("HOME", &home)
            .current_dir(&home)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?,
    ))
}

/// Creates a workspace named after `name` from `template` (an echo template whose one agent
/// authenticates with `token`), runs its agent with `work/home` as its home, and waits until
/// the agent is connected and ready.
pub async fn start(
    deploy: &Deployment,
    coder_bin: &Path,
    work: &Path,
    name: &str,
    template: &EchoTemplate,
    token: &str,
    timeout: Duration,
) -> anyhow::Result<AgentWorkspace> {
    let (_, tpl) = deploy
        .template(&format!("bench-{name}"), template, &[], true)
        .await?;
    let tpl = tpl.with_context(|| format!("the {name} template was not created"))?;
    let created = deploy
        .workspaces(tpl.id, name, 1)
        .await?
        .into_iter()
        .next()
        .with_context(|| format!("the {name} workspace"))?;
    // As created it has no resources yet; its finished build has.
    let workspace = deploy.owner.workspace(created.id).await?;
    let agent = workspace
        .latest_build
        .resources
        .iter()
        .flat_map(|r| &r.agents)
        .next()
        .with_context(|| format!("the {name} workspace's agent"))?
        .id;
    let process = spawn_agent(deploy, coder_bin, work, token)?;
    let deadline = Instant::now() + timeout;
    loop {
        let a = deploy.owner.workspace_agent(agent).await?;
        if a.status == "connected" && a.lifecycle_state == "ready" {
            break;
        }
        ensure!(
            Instant::now() < deadline,
            "the {name} bench's agent is {} / {} after {timeout:?}",
            a.status,
            a.lifecycle_state,
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(AgentWorkspace {
        workspace,
        agent,
        process,
    })
}
