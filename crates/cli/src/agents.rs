//! Waiting for a workspace's agents: connection, startup scripts (their logs streamed), and the
//! lifecycle's outcome.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::bail;
use codersdk::Client;
use codersdk::workspaces::{WorkspaceAgent, WorkspaceAgentLog};
use futures::StreamExt;
use uuid::Uuid;

/// Follows every agent of `build` until it is ready; fails when one cannot start. Dev
/// containers' sub-agents are named, not waited for: coderd runs no container engine, so they
/// never connect, and their health says why.
pub async fn wait_ready(client: &Client, build: Uuid) -> anyhow::Result<()> {
    let build = client.workspace_build(build).await?;
    let (subagents, agents): (Vec<WorkspaceAgent>, Vec<WorkspaceAgent>) = build
        .resources
        .into_iter()
        .flat_map(|r| r.agents)
        .partition(|a| a.parent_id.is_some());
    for agent in agents {
        wait_agent(client, agent).await?;
    }
    for sub in subagents {
        println!(
            "==> Not waiting for dev container agent {}: {}",
            sub.name, sub.health.reason
        );
    }
    // The agents report their scripts' runs before `ready`: the timeline is complete now.
    let timings = client.workspace_build_timings(build.id).await?;
    println!("==> Timeline");
    for line in crate::timings::lines(&timings) {
        println!("  {line}");
    }
    Ok(())
}

const STATE_POLL: Duration = Duration::from_millis(200);

fn finished(lifecycle: &str) -> bool {
    matches!(
        lifecycle,
        "ready" | "start_error" | "start_timeout" | "shutting_down" | "off"
    )
}

async fn wait_agent(client: &Client, agent: WorkspaceAgent) -> anyhow::Result<()> {
    println!("==> Waiting for agent {} to start", agent.name);
    let sources: HashMap<Uuid, String> = agent
        .log_sources
        .iter()
        .map(|s| (s.id, s.display_name.clone()))
        .collect();
    let print = |line: &WorkspaceAgentLog, printed: &mut i64| {
        if line.id > *printed {
            let source = sources.get(&line.source_id).map_or("agent", String::as_str);
            println!("  {source}: {}", line.output);
            *printed = line.id;
        }
    };
    let mut printed = 0;
    let mut logs = client.follow_agent_logs(agent.id, 0).await?;
    // The state is polled (a GET per tick, cheap); the tick is most of what a user waits
    // between the agent reporting `ready` and the command returning.
    let mut check = tokio::time::interval(STATE_POLL);
    let mut warned_connecting = false;
    loop {
        tokio::select! {
            line = logs.next() => match line {
                Some(Ok(line)) => print(&line, &mut printed),
                Some(Err(e)) => return Err(e.into()),
                None => logs = client.follow_agent_logs(agent.id, printed).await?,
            },
            _ = check.tick() => {
                let now = client.workspace_agent(agent.id).await?;
                match now.status.as_str() {
                    "timeout" => {
                        let hint = if now.troubleshooting_url.is_empty() {
                            String::new()
                        } else {
                            format!("; see {}", now.troubleshooting_url)
                        };
                        bail!(
                            "agent {} did not connect within {} s: the workspace's init script may not be running or cannot reach coderd{hint}",
                            now.name, now.connection_timeout_seconds
                        );
                    }
                    "connecting" if !warned_connecting => {
                        println!("  (the agent has not connected yet)");
                        warned_connecting = true;
                    }
                    _ => {}
                }
                if finished(&now.lifecycle_state) {
                    // The agent delivers its logs before its lifecycle changes, so every line
                    // is stored by now; the stream may not have brought the last ones yet.
                    for line in client.agent_logs_after(agent.id, printed).await? {
                        print(&line, &mut printed);
                    }
                    return match now.lifecycle_state.as_str() {
                        "ready" => {
                            println!("✔ Agent {} is ready", now.name);
                            Ok(())
                        }
                        "start_error" => bail!("agent {}: a startup script failed (see the logs above)", now.name),
                        "start_timeout" => bail!("agent {}: a startup script timed out", now.name),
                        other => bail!("agent {} is {other}", now.name),
                    };
                }
            }
        }
    }
}
