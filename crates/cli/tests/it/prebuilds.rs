//! Prebuilt workspaces through the real binaries: the `local-process` example with two presets,
//! one keeping two prebuilt workspaces. The reconciler builds them with the real terraform and
//! their real agents get ready; `coder create --preset` hands one to a member, and its claim
//! build keeps the running agent (terraform is given the agent's running token), which
//! reconnects as the claim build's agent; the pool refills. The template declares a dev
//! container too: its sub-agent, which never runs here, keeps neither a prebuild from being
//! ready nor a claim from handing the agent over.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use codersdk::provisioners::ProvisionerJobStatus;
use codersdk::users::LoginWithPasswordRequest;
use codersdk::workspaces::{Workspace, WorkspaceAgent};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use crate::harness::Deployment;
use crate::terraform::{alive, example, pid_in, terraform};

const PRESETS: &str = r#"
data "coder_workspace_preset" "pooled" {
  name = "pooled"
  parameters = {
    greeting = "hi"
  }
  prebuilds {
    instances = 2
  }
}

data "coder_workspace_preset" "plain" {
  name = "plain"
  parameters = {
    greeting = "hey"
  }
}

resource "coder_devcontainer" "repo" {
  agent_id         = coder_agent.main.id
  workspace_folder = "/workspace/repo"
}
"#;

/// The longest wait for builds with real terraform (two prebuilds at once, then a claim beside
/// a refill) and their agents. It bounds the wait only: what is waited for is the same, and
/// on a machine shared with compilers a minute was not always enough.
const BUILD_WAIT: Duration = Duration::from_secs(300);

/// Polls `check` every quarter second until it holds, failing after [`BUILD_WAIT`]. Each poll
/// lists whole workspaces; polling faster would only load the server the test waits on.
async fn wait_for<F, Fut>(what: &str, mut check: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<bool>>,
{
    let deadline = Instant::now() + BUILD_WAIT;
    loop {
        if check().await? {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "timed out after {BUILD_WAIT:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Kills every workspace process under the directory when the test ends, however it ends:
/// the prebuilt workspaces outlive the test's own workspace.
struct ReapAll(PathBuf);

impl Drop for ReapAll {
    fn drop(&mut self) {
        let Ok(homes) = std::fs::read_dir(&self.0) else {
            return;
        };
        for home in homes.flatten() {
            if let Ok(pid) = pid_in(&home.path().join(".coder-workspace.pid")) {
                let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
            }
        }
    }
}

fn agent_of(ws: &Workspace) -> Option<&WorkspaceAgent> {
    ws.latest_build
        .resources
        .iter()
        .flat_map(|r| r.agents.iter())
        .next()
}

fn ready(ws: &Workspace) -> bool {
    agent_of(ws).is_some_and(|a| a.status == "connected" && a.lifecycle_state == "ready")
}

/// The template's prebuilt workspaces, and how many have a ready agent.
async fn pool(d: &Deployment) -> anyhow::Result<(usize, usize)> {
    let found = d.owner.workspaces("owner:prebuilds").await?.workspaces;
    Ok((found.len(), found.iter().filter(|w| ready(w)).count()))
}

fn push(d: &Deployment, workspaces: &Path) -> anyhow::Result<()> {
    let dir = d.dir.path().join("template");
    std::fs::create_dir_all(&dir)?;
    let main = std::fs::read_to_string(Path::new(&example("local-process")).join("main.tf"))?;
    std::fs::write(dir.join("main.tf"), format!("{main}\n{PRESETS}"))?;
    d.ok(&[
        "templates",
        "push",
        "pooled",
        "-d",
        &dir.display().to_string(),
        "--variable",
        &format!("workspaces_dir={}", workspaces.display()),
        "--yes",
    ])?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_claimed_prebuild_keeps_its_agent_process_and_the_pool_refills() -> anyhow::Result<()> {
    if terraform()?.is_none() {
        return Ok(());
    }
    let d = Deployment::new(&[
        "--provisioner-daemons=2",
        "--workspace-prebuilds-reconciliation-interval=1s",
    ])
    .await?;
    let workspaces = d.dir.path().join("workspaces");
    let _reaper = ReapAll(workspaces.clone());
    push(&d, &workspaces)?;

    wait_for("two prebuilt workspaces with ready agents", || async {
        Ok(pool(&d).await? == (2, 2))
    })
    .await?;
    let prebuilt = d.owner.workspaces("owner:prebuilds").await?.workspaces;
    let pid_file = |id: uuid::Uuid| workspaces.join(id.to_string()).join(".coder-workspace.pid");
    // Read before the claim: `coder create` returns once the claim build is done.
    let pids = prebuilt
        .iter()
        .map(|p| Ok((p.id, pid_in(&pid_file(p.id))?)))
        .collect::<anyhow::Result<Vec<_>>>()?;

    d.ok(&[
        "users",
        "create",
        "--username",
        "member",
        "--email",
        "member@example.com",
        "--password",
        testutil::PASSWORD,
    ])?;
    let member = d
        .owner
        .clone()
        .with_token("")
        .login_with_password(&LoginWithPasswordRequest {
            email: "member@example.com".into(),
            password: testutil::PASSWORD.into(),
        })
        .await?
        .session_token;
    let started = Instant::now();
    let out = d.ok_as(
        &member,
        &["create", "--preset", "pooled", "-t", "pooled", "mine", "-y"],
    )?;
    let ws = d
        .owner
        .workspace_by_owner_and_name("member", "mine")
        .await
        .with_context(|| format!("the claimed workspace; create said {out}"))?;
    assert_eq!(ws.owner_name, "member");
    let claimed = prebuilt
        .iter()
        .find(|p| p.id == ws.id)
        .with_context(|| format!("{} is not one of the prebuilt workspaces", ws.id))?;
    let before = agent_of(claimed).context("the prebuild's agent")?.id;
    let pid = pids
        .iter()
        .find(|(id, _)| *id == ws.id)
        .map(|(_, pid)| *pid)
        .context("the claimed prebuild's process")?;

    wait_for("the claimed workspace's agent ready", || async {
        let ws = d.owner.workspace(ws.id).await?;
        Ok(ws.latest_build.build_number == 2
            && ws.latest_build.job.status == ProvisionerJobStatus::Succeeded
            && ready(&ws))
    })
    .await?;
    let claim_ready = started.elapsed();
    let ws = d.owner.workspace(ws.id).await?;
    let after = agent_of(&ws).context("the claim build's agent")?.id;
    assert_ne!(after, before, "the claim build has its own agent row");
    let sub = ws
        .latest_build
        .resources
        .iter()
        .flat_map(|r| r.agents.iter())
        .find(|a| a.name == "repo")
        .context("the claim build's dev container agent")?;
    assert_eq!(sub.parent_id, Some(after));
    assert!(ws.health.healthy, "{:?}", ws.health);
    assert_eq!(
        pid_in(&pid_file(ws.id))?,
        pid,
        "the claim build did not replace the workspace's process"
    );
    assert!(alive(pid), "the prebuild's agent process still runs");

    wait_for("the pool refilled to two ready prebuilds", || async {
        Ok(pool(&d).await? == (2, 2))
    })
    .await?;
    let refilled = d.owner.workspaces("owner:prebuilds").await?.workspaces;
    assert!(refilled.iter().all(|w| w.id != ws.id));
    println!("claim -> agent ready: {claim_ready:?}");
    // Where the claim's time goes (docs/benchmarks.md, P11c): the claim job's queue wait and
    // run, and the terraform stages inside the run.
    let job = &ws.latest_build.job;
    let ms = |a: chrono::DateTime<chrono::Utc>, b: chrono::DateTime<chrono::Utc>| {
        (b - a).num_milliseconds()
    };
    if let (Some(start), Some(end)) = (job.started_at, job.completed_at) {
        println!(
            "claim job: queued {} ms, ran {} ms",
            ms(job.created_at, start),
            ms(start, end)
        );
    }
    let mut stages: Vec<(String, i64)> = Vec::new();
    for t in d
        .owner
        .workspace_build_timings(ws.latest_build.id)
        .await?
        .provisioner_timings
    {
        let took = ms(t.started_at, t.ended_at);
        match stages.iter_mut().find(|(s, _)| *s == t.stage) {
            Some((_, longest)) => *longest = (*longest).max(took),
            None => stages.push((t.stage, took)),
        }
    }
    println!("claim stages (longest resource per stage, ms): {stages:?}");
    Ok(())
}
