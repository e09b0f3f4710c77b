//! Finding the agent a connection goes to: `[owner/]workspace[.agent]`, starting the workspace
//! when it is stopped and waiting for its agent (as `--wait` says), every wait bounded. All
//! progress goes to stderr: `coder ssh --stdio` owns stdout for the SSH protocol.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use codersdk::Client;
use codersdk::workspaces::{
    CreateWorkspaceBuildRequest, Workspace, WorkspaceAgent, WorkspaceStatus,
};
use futures::StreamExt;
use uuid::Uuid;

/// How long an agent that was connected may stay away before giving up.
const RECONNECT_WAIT: Duration = Duration::from_secs(30);
/// The longest wait for an agent that never connected, when its template sets no timeout.
const FIRST_CONNECT_WAIT: Duration = Duration::from_secs(300);
/// The longest wait for a start build.
const BUILD_WAIT: Duration = Duration::from_secs(600);
/// The longest wait for startup scripts with `--wait=yes`.
const STARTUP_WAIT: Duration = Duration::from_secs(1800);

/// When to wait for the agent's startup scripts before connecting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Wait {
    /// Until the agent is ready.
    Yes,
    /// Connect as soon as the agent is connected.
    No,
    /// Wait when a startup script blocks login (`start_blocks_login`).
    Auto,
}

/// `[owner/]workspace[.agent]` split up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Name {
    pub owner: String,
    pub workspace: String,
    pub agent: Option<String>,
}

impl Name {
    pub fn parse(arg: &str) -> anyhow::Result<Self> {
        let (owner, rest) = arg.split_once('/').unwrap_or(("me", arg));
        let (workspace, agent) = match rest.split_once('.') {
            Some((w, a)) => (w, Some(a.to_string())),
            None => (rest, None),
        };
        if owner.is_empty() || workspace.is_empty() || agent.as_deref() == Some("") {
            bail!("{arg:?} is not a workspace: use [owner/]workspace[.agent]");
        }
        Ok(Self {
            owner: owner.into(),
            workspace: workspace.into(),
            agent,
        })
    }
}

/// The workspace `name` names.
pub async fn find_workspace(client: &Client, name: &Name) -> anyhow::Result<Workspace> {
    client
        .workspace_by_owner_and_name(&name.owner, &name.workspace)
        .await
        .with_context(|| format!("workspace {:?}", name.workspace))
}

/// What `coder ssh` makes of a host name (OpenSSH's `%h` through a ProxyCommand): without
/// `prefix` (or `.suffix`), then Coder's forms normalised to `owner/workspace.agent`:
/// `owner--ws`, `owner--ws--agent`, `owner--ws.agent`, `ws.agent`, `owner/ws--agent`.
/// Workspace and user names never hold `--` or `.`, so the forms cannot be confused.
pub fn from_host(host: &str, prefix: Option<&str>, suffix: Option<&str>) -> String {
    let host = match (
        prefix.filter(|p| !p.is_empty()),
        suffix.filter(|s| !s.is_empty()),
    ) {
        (Some(prefix), _) if host.starts_with(prefix) => &host[prefix.len()..],
        (_, Some(suffix)) => host
            .strip_suffix(suffix)
            .and_then(|h| h.strip_suffix('.'))
            .unwrap_or(host),
        _ => host,
    };
    let parts: Vec<&str> = host
        .split("--")
        .flat_map(|p| p.split(['/', '.']))
        .filter(|p| !p.is_empty())
        .collect();
    match parts.as_slice() {
        [workspace] => (*workspace).to_string(),
        [owner, workspace] if host.contains('/') || host.contains("--") => {
            format!("{owner}/{workspace}")
        }
        [workspace, agent] => format!("{workspace}.{agent}"),
        [owner, workspace, agent] => format!("{owner}/{workspace}.{agent}"),
        _ => host.to_string(),
    }
}

/// The agent to connect to, in its workspace.
pub struct Reached {
    pub workspace: Workspace,
    pub agent: WorkspaceAgent,
}

fn agents(ws: &Workspace) -> Vec<WorkspaceAgent> {
    ws.latest_build
        .resources
        .iter()
        .flat_map(|r| r.agents.iter().cloned())
        .collect()
}

/// The agent `name` asks for. Without an agent name, only agents of resources count: Coder
/// prefers a dev container's sub-agent, but here none ever runs (no container engine), so
/// choosing one would only wait for nothing. Naming a sub-agent fails at once, saying why.
pub fn pick(ws: &Workspace, name: &Name) -> anyhow::Result<WorkspaceAgent> {
    let (subagents, all): (Vec<WorkspaceAgent>, Vec<WorkspaceAgent>) =
        agents(ws).into_iter().partition(|a| a.parent_id.is_some());
    match &name.agent {
        Some(wanted) => {
            if let Some(agent) = all.into_iter().find(|a| &a.name == wanted) {
                return Ok(agent);
            }
            match subagents.into_iter().find(|a| &a.name == wanted) {
                Some(sub) => bail!(
                    "agent {wanted:?} of workspace {} is a dev container's agent and cannot be \
                     reached: {}",
                    name.workspace,
                    sub.health.reason
                ),
                None => bail!("workspace {} has no agent named {wanted:?}", name.workspace),
            }
        }
        None => match all.len() {
            0 => bail!(
                "workspace {} has no agent: its template defines none",
                name.workspace
            ),
            1 => Ok(all.into_iter().next().context("one agent")?),
            _ => bail!(
                "workspace {} has several agents ({}); name one as {}.<agent>",
                name.workspace,
                all.iter()
                    .map(|a| a.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                name.workspace
            ),
        },
    }
}

/// Resolves `arg`, starting the workspace when it is stopped (if `start`) and waiting for the
/// agent as `wait` says.
pub async fn reach(client: &Client, arg: &str, start: bool, wait: Wait) -> anyhow::Result<Reached> {
    let name = Name::parse(arg)?;
    let mut ws = find_workspace(client, &name).await?;
    match ws.latest_build.status {
        WorkspaceStatus::Running => {}
        WorkspaceStatus::Stopped | WorkspaceStatus::Failed | WorkspaceStatus::Canceled
            if start && ws.latest_build.transition != "delete" =>
        {
            eprintln!(
                "Workspace was stopped, starting workspace to allow connecting to {:?}...",
                ws.name
            );
            let build = client
                .create_workspace_build(
                    ws.id,
                    &CreateWorkspaceBuildRequest {
                        transition: "start".into(),
                        ..Default::default()
                    },
                )
                .await
                .context("starting the workspace")?;
            ws = wait_build(client, ws.id, build.id).await?;
        }
        WorkspaceStatus::Pending | WorkspaceStatus::Starting => {
            eprintln!("Waiting for workspace {:?} to start...", ws.name);
            ws = wait_build(client, ws.id, ws.latest_build.id).await?;
        }
        other => bail!(
            "workspace {:?} is {}: start it with 'coder start {}'",
            ws.name,
            other.as_str(),
            ws.name
        ),
    }
    let agent = pick(&ws, &name)?;
    let agent = wait_agent(client, agent, wait).await?;
    Ok(Reached {
        workspace: ws,
        agent,
    })
}

/// Follows a build to its end (logs are not shown: its outcome is).
async fn wait_build(client: &Client, workspace: Uuid, build: Uuid) -> anyhow::Result<Workspace> {
    let deadline = Instant::now() + BUILD_WAIT;
    loop {
        let ws = client.workspace(workspace).await?;
        let latest = &ws.latest_build;
        if latest.id == build {
            match latest.status {
                WorkspaceStatus::Running => return Ok(ws),
                WorkspaceStatus::Pending | WorkspaceStatus::Starting => {}
                other => bail!(
                    "the workspace's start build ended {}: {}",
                    other.as_str(),
                    latest.job.error
                ),
            }
        }
        if Instant::now() > deadline {
            bail!(
                "the workspace did not start within {} s; see 'coder show {}'",
                BUILD_WAIT.as_secs(),
                ws.name
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn ready(agent: &WorkspaceAgent) -> bool {
    !matches!(agent.lifecycle_state.as_str(), "created" | "starting")
}

fn blocks_login(agent: &WorkspaceAgent) -> bool {
    agent.scripts.iter().any(|s| s.start_blocks_login)
}

/// Waits until the agent is connected and, if asked to, done with its startup scripts
/// (streaming their logs to stderr).
async fn wait_agent(
    client: &Client,
    mut agent: WorkspaceAgent,
    wait: Wait,
) -> anyhow::Result<WorkspaceAgent> {
    let wait_startup = match wait {
        Wait::Yes => true,
        Wait::No => false,
        Wait::Auto => blocks_login(&agent),
    };
    if agent.status == "connected" && (!wait_startup || ready(&agent)) {
        return Ok(agent);
    }
    let started = Instant::now();
    let sources: HashMap<Uuid, String> = agent
        .log_sources
        .iter()
        .map(|s| (s.id, s.display_name.clone()))
        .collect();
    let mut logs = if wait_startup {
        Some(client.follow_agent_logs(agent.id, 0).await?)
    } else {
        None
    };
    let mut said = String::new();
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    loop {
        tokio::select! {
            line = async {
                match logs.as_mut() {
                    Some(l) => l.next().await,
                    None => std::future::pending().await,
                }
            } => match line {
                Some(Ok(line)) => {
                    let source = sources.get(&line.source_id).map_or("agent", String::as_str);
                    eprintln!("  {source}: {}", line.output);
                }
                _ => logs = None,
            },
            _ = tick.tick() => {
                agent = client.workspace_agent(agent.id).await?;
                let waited = started.elapsed();
                match agent.status.as_str() {
                    "connected" if !wait_startup || ready(&agent) => {
                        if !wait_startup || agent.lifecycle_state == "ready" {
                            return Ok(agent);
                        }
                        eprintln!(
                            "warning: agent {} is {}: a startup script failed or timed out; connecting anyway",
                            agent.name, agent.lifecycle_state
                        );
                        return Ok(agent);
                    }
                    "connected" => say(&mut said, "==> Waiting for the startup scripts to finish (--wait=no to connect now)"),
                    "connecting" => {
                        say(&mut said, &format!("==> Waiting for agent {} to connect...", agent.name));
                        if agent.connection_timeout_seconds == 0 && waited > FIRST_CONNECT_WAIT {
                            bail!("agent {} has not connected after {} s; is the workspace's init script running?", agent.name, waited.as_secs());
                        }
                    }
                    "timeout" => bail!(
                        "agent {} did not connect within {} s: the workspace's init script may not be running or cannot reach coderd",
                        agent.name, agent.connection_timeout_seconds
                    ),
                    _ => {
                        say(&mut said, &format!("==> Agent {} is disconnected; waiting for it to come back...", agent.name));
                        if waited > RECONNECT_WAIT {
                            bail!(
                                "agent {} has been disconnected for {} s: the workspace may have stopped or lost its connection to coderd",
                                agent.name, waited.as_secs()
                            );
                        }
                    }
                }
                if wait_startup && waited > STARTUP_WAIT {
                    bail!("agent {} is still starting after {} s", agent.name, waited.as_secs());
                }
            }
        }
    }
}

/// Prints a status line once, not on every poll.
fn say(said: &mut String, line: &str) {
    if said != line {
        eprintln!("{line}");
        *said = line.to_string();
    }
}

#[cfg(test)]
mod host_tests {
    use super::from_host;

    #[test]
    fn coder_host_forms_become_owner_workspace_agent() {
        let prefix = Some("coder-vscode.coder.example.com--");
        for (host, name) in [
            ("coder-vscode.coder.example.com--alice--dev", "alice/dev"),
            (
                "coder-vscode.coder.example.com--alice--dev--main",
                "alice/dev.main",
            ),
            (
                "coder-vscode.coder.example.com--alice--dev.main",
                "alice/dev.main",
            ),
            ("dev", "dev"),
            ("dev.main", "dev.main"),
            ("alice/dev", "alice/dev"),
            ("alice/dev--main", "alice/dev.main"),
            ("alice/dev.main", "alice/dev.main"),
            ("a--b--c--d", "a--b--c--d"),
        ] {
            assert_eq!(from_host(host, prefix, None), name, "{host}");
        }
        assert_eq!(
            from_host("alice--dev.coder", None, Some("coder")),
            "alice/dev"
        );
        assert_eq!(from_host("dev.main.coder", None, Some("coder")), "dev.main");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_split_into_owner_workspace_and_agent() {
        let n = Name::parse("dev").expect("plain");
        assert_eq!(
            (n.owner.as_str(), n.workspace.as_str(), n.agent),
            ("me", "dev", None)
        );
        let n = Name::parse("alice/dev.main").expect("full");
        assert_eq!(
            (n.owner.as_str(), n.workspace.as_str(), n.agent.as_deref()),
            ("alice", "dev", Some("main"))
        );
        assert!(Name::parse("dev.").is_err());
        assert!(Name::parse("/dev").is_err());
        assert!(Name::parse("").is_err());
    }
}
