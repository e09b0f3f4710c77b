//! The workspace agent end to end: the `local-process` example through the real binaries and
//! the real terraform, so the agent is the one the template's init script downloads from coderd
//! and starts inside the workspace.

use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use codersdk::workspaces::{Workspace, WorkspaceAgent};
use futures::StreamExt as _;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use testutil::eventually;
use uuid::Uuid;

use crate::harness::{Deployment, command_with_config, start_with, stop_gracefully};
use crate::terraform::{Reaper, alive, pid_in, push_local_process, terraform};

/// How long a workspace's agent may take to download `coder`, connect and run its scripts.
const AGENT_START: Duration = Duration::from_secs(60);
/// What crates/agent/README.md promises for an agent killed with -9 (its socket closes, so
/// coderd records the disconnect at once); the margin is for a loaded CI machine.
const KILLED_AGENT_DISCONNECTED: Duration = Duration::from_secs(10);

/// A deployment with the `local-process` template pushed, its workspaces under the test's
/// directory (so nothing outlives the test).
pub(crate) async fn local_process() -> anyhow::Result<Option<(Deployment, PathBuf)>> {
    if terraform()?.is_none() {
        return Ok(None);
    }
    let d = Deployment::new(&["--provisioner-daemons=1"]).await?;
    let workspaces = d.dir.path().join("workspaces");
    push_local_process(&d, &workspaces)?;
    Ok(Some((d, workspaces)))
}

/// The one agent of a workspace's latest build.
fn agent_of(ws: &Workspace) -> anyhow::Result<WorkspaceAgent> {
    ws.latest_build
        .resources
        .iter()
        .flat_map(|r| r.agents.iter())
        .next()
        .cloned()
        .with_context(|| format!("no agent in {:#?}", ws.latest_build.resources))
}

/// Polls the agent until `check` holds, tolerating a coderd that is not answering yet.
async fn wait_agent(
    d: &Deployment,
    id: Uuid,
    within: Duration,
    what: &str,
    check: impl Fn(&WorkspaceAgent) -> bool,
) -> anyhow::Result<WorkspaceAgent> {
    eventually(within, what, || async {
        Ok(d.owner.workspace_agent(id).await.is_ok_and(|a| check(&a)))
    })
    .await?;
    Ok(d.owner.workspace_agent(id).await?)
}

async fn log_lines(d: &Deployment, id: Uuid) -> anyhow::Result<Vec<String>> {
    Ok(d.owner
        .workspace_agent_logs(id)
        .await?
        .into_iter()
        .map(|l| l.output)
        .collect())
}

/// A variable of a running process's environment.
fn environ(pid: i32, name: &str) -> anyhow::Result<Option<String>> {
    let raw = std::fs::read(format!("/proc/{pid}/environ"))?;
    Ok(raw
        .split(|b| *b == 0)
        .filter_map(|entry| std::str::from_utf8(entry).ok())
        .find_map(|entry| {
            entry
                .strip_prefix(name)
                .and_then(|rest| rest.strip_prefix('='))
        })
        .map(str::to_owned))
}

/// Kills a process the test started, should the test fail before stopping it.
struct Guard(Option<Child>);

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_workspaces_agent_starts_reports_stops_and_is_replaced_by_the_next_build()
-> anyhow::Result<()> {
    let Some((d, workspaces)) = local_process().await? else {
        return Ok(());
    };

    // `--wait` follows the agent: its startup script's output, then ready.
    let out = d.ok(&[
        "create",
        "dev",
        "-t",
        "local-process",
        "--parameter",
        "greeting=howdy",
        "--wait",
        "--yes",
    ])?;
    let ws = d.workspace("dev").await?;
    let home = workspaces.join(ws.id.to_string());
    let pid_file = home.join(".coder-workspace.pid");
    let _reaper = Reaper(pid_file.clone());
    assert!(out.contains("==> Waiting for agent main to start"), "{out}");
    assert!(out.contains("Startup Script: howdy from "), "{out}");
    assert!(out.contains("Startup Script: started 1 time(s)"), "{out}");
    assert!(out.contains("✔ Agent main is ready"), "{out}");

    // coderd's view: connected, ready, with what the agent told it.
    let first = agent_of(&ws)?;
    let agent = d.owner.workspace_agent(first.id).await?;
    assert_eq!(
        (agent.status.as_str(), agent.lifecycle_state.as_str()),
        ("connected", "ready")
    );
    assert!(agent.started_at.is_some() && agent.ready_at.is_some());
    assert!(agent.version.starts_with('v'), "{}", agent.version);
    assert_eq!(agent.expanded_directory, home.display().to_string());
    let sources: Vec<&str> = agent
        .log_sources
        .iter()
        .map(|s| s.display_name.as_str())
        .collect();
    assert!(sources.contains(&"Startup Script"), "{sources:?}");
    assert!(sources.contains(&"Shutdown Script"), "{sources:?}");
    // The startup logs after the fact.
    let lines = log_lines(&d, first.id).await?;
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("howdy from ") && l.ends_with(", workspace dev")),
        "{lines:?}"
    );

    // Both metadata items report values.
    eventually(AGENT_START, "both metadata values", || async {
        let values = d.owner.workspace_agent_metadata(first.id).await?;
        Ok(["load", "home"].iter().all(|key| {
            values.iter().any(|m| {
                m.description.key == *key && !m.result.value.is_empty() && m.result.error.is_empty()
            })
        }))
    })
    .await?;

    // The agent is the binary the init script downloaded into the home's cache; it runs with
    // its token and none of the build's other CODER_* variables.
    let pid = pid_in(&pid_file)?;
    let exe = std::fs::read_link(format!("/proc/{pid}/exe"))?;
    assert!(
        exe.starts_with(home.join(".cache/coder")),
        "{}",
        exe.display()
    );
    let old_token = environ(pid, "CODER_AGENT_TOKEN")?.context("the agent's token")?;
    assert_eq!(environ(pid, "CODER_WORKSPACE_OWNER_SESSION_TOKEN")?, None);
    assert_eq!(
        environ(pid, "HOME")?.as_deref(),
        Some(home.to_str().context("utf-8 path")?)
    );

    // Live: a follower attached now sees the shutdown script's output as it happens.
    let seen = lines.len();
    let after = d
        .owner
        .workspace_agent_logs(first.id)
        .await?
        .last()
        .map_or(0, |l| l.id);
    let mut follow = d.owner.follow_agent_logs(first.id, after).await?;
    let follower = tokio::spawn(async move {
        let mut got = Vec::new();
        while let Ok(Some(Ok(line))) = tokio::time::timeout(AGENT_START, follow.next()).await {
            let done = line.output == "saying goodbye to dev";
            got.push(line.output);
            if done {
                break;
            }
        }
        got
    });

    // Stop: the agent runs its shutdown script, reports off and disconnects.
    d.ok(&["stop", "dev", "--yes"])?;
    let followed = follower.await?;
    assert_eq!(
        followed.last().map(String::as_str),
        Some("saying goodbye to dev"),
        "{followed:?}"
    );
    let stopped = wait_agent(&d, first.id, Duration::from_secs(10), "off", |a| {
        a.lifecycle_state == "off" && a.status == "disconnected"
    })
    .await?;
    assert!(stopped.disconnected_at.is_some());
    assert!(home.join(".coder-last-stop").exists());
    assert!(!alive(pid), "the agent exited");
    let lines = log_lines(&d, first.id).await?;
    assert!(lines.len() > seen, "{lines:?}");
    assert!(
        lines.iter().any(|l| l == "saying goodbye to dev"),
        "{lines:?}"
    );

    // Start again: a new agent, in the same home.
    let out = d.ok(&["start", "dev", "--wait", "--yes"])?;
    assert!(out.contains("Startup Script: started 2 time(s)"), "{out}");
    assert!(out.contains("✔ Agent main is ready"), "{out}");
    let ws = d.workspace("dev").await?;
    let second = agent_of(&ws)?;
    assert_ne!(second.id, first.id);
    let second = d.owner.workspace_agent(second.id).await?;
    assert_eq!(
        (second.status.as_str(), second.lifecycle_state.as_str()),
        ("connected", "ready")
    );

    // The first build's agent, started again by hand, is refused.
    let logs = d.dir.path().join("stale-agent");
    let stale = command_with_config(d.dir.path().join("stale-cli"))
        .args(["agent", "--log-dir"])
        .arg(&logs)
        .env("CODER_AGENT_URL", d.url())
        .env("CODER_AGENT_TOKEN", &old_token)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let mut stale = Guard(Some(stale));
    let log = logs.join("coder-agent.log");
    eventually(
        Duration::from_secs(20),
        "the stale agent's refusal",
        || async {
            Ok(std::fs::read_to_string(&log).is_ok_and(|l| {
                l.contains("coderd refused this agent")
                    && l.contains(
                        "belongs to build #1 of its workspace, but the latest build is #3",
                    )
            }))
        },
    )
    .await?;
    let old = d.owner.workspace_agent(first.id).await?;
    assert_eq!(
        (old.status.as_str(), old.lifecycle_state.as_str()),
        ("disconnected", "off")
    );
    if let Some(child) = stale.0.take() {
        stop_gracefully(child)?;
    }

    // Delete: the agent stops and the home (with the downloaded binary) goes.
    let second_pid = pid_in(&pid_file)?;
    d.ok(&["delete", "dev", "--yes"])?;
    assert!(!alive(second_pid));
    assert!(!home.exists());
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_outlives_a_coderd_restart_and_shows_disconnected_once_killed()
-> anyhow::Result<()> {
    let Some((mut d, workspaces)) = local_process().await? else {
        return Ok(());
    };
    d.ok(&["create", "dev", "-t", "local-process", "--yes"])?;
    let ws = d.workspace("dev").await?;
    let home = workspaces.join(ws.id.to_string());
    let pid_file = home.join(".coder-workspace.pid");
    let _reaper = Reaper(pid_file.clone());
    let id = agent_of(&ws)?.id;
    wait_agent(&d, id, AGENT_START, "a connected, ready agent", |a| {
        a.status == "connected" && a.lifecycle_state == "ready"
    })
    .await?;
    let pid = pid_in(&pid_file)?;

    // coderd restarts on the same address and database; the agent finds it again by itself.
    let address = d
        .owner
        .url()
        .host_str()
        .zip(d.owner.url().port())
        .map(|(host, port)| format!("{host}:{port}"))
        .context("the server's address")?;
    let database = d._db.url();
    d.server.take().context("the server")?.stop()?;
    let restarted = chrono::Utc::now();
    d.server = Some(
        start_with(
            d.dir.path(),
            &[
                "--postgres-url",
                &database,
                "--provisioner-daemons=1",
                "--http-address",
                &address,
            ],
        )
        .await?,
    );
    let back = wait_agent(&d, id, AGENT_START, "the agent to reconnect", |a| {
        a.status == "connected" && a.last_connected_at.is_some_and(|t| t >= restarted)
    })
    .await?;
    assert_eq!(back.lifecycle_state, "ready");
    assert!(alive(pid) && pid_in(&pid_file)? == pid, "the same agent");
    let starts = std::fs::read_to_string(home.join(".coder-starts"))?;
    assert_eq!(starts.lines().count(), 1, "no second startup: {starts}");

    // Killed with -9: no shutdown, but coderd notices the connection is gone.
    kill(Pid::from_raw(pid), Signal::SIGKILL)?;
    let killed = Instant::now();
    let gone = wait_agent(
        &d,
        id,
        KILLED_AGENT_DISCONNECTED,
        "the killed agent to show disconnected",
        |a| a.status == "disconnected",
    )
    .await?;
    eprintln!("disconnected {:?} after the kill", killed.elapsed());
    assert_eq!(gone.lifecycle_state, "ready", "nobody reported a shutdown");
    Ok(())
}
