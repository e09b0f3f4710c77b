//! P11: `coder create --wait` of the `local-process` example template, from the CLI's start to
//! its exit once the agent is `ready`: real terraform (one external daemon, the provider plugin
//! cache warm from a first, unmeasured create), the agent downloaded by the template's init
//! script from this coderd and started on this machine.
//!
//! Where the time goes comes from the build's own record (`GET /workspacebuilds/{id}/timings`,
//! what users see) and the job's timestamps, laid on one timeline per create: the CLI and the
//! API until the job exists, the queue, terraform's stages (each stage's first start to its
//! last end), the result until the job completes, the agent's download and connection, its
//! startup script, and the CLI noticing `ready`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use chrono::{DateTime, Utc};
use codersdk::workspaces::WorkspaceBuildTimings;

use crate::deploy::Deployment;
use crate::procs::{Cluster, coder};

const MAIN_TF: &str = include_str!("../../../../examples/templates/local-process/main.tf");
const TEMPLATE: &str = "local-process";

/// One create's timeline, in ms between consecutive marks.
#[derive(Debug, Clone)]
pub struct Create {
    /// CLI start → CLI exit (agent ready).
    pub total: f64,
    pub parts: Vec<(&'static str, f64)>,
}

/// The parts of a create, in timeline order (the names `Create::parts` uses).
pub const PARTS: [&str; 9] = [
    "CLI and API (CLI start → job queued)",
    "queue (job queued → daemon started it)",
    "daemon setup (started → terraform init)",
    "terraform init",
    "terraform plan (and graph)",
    "terraform apply",
    "result (apply end → job completed)",
    "agent download, start and connect (job completed → connected)",
    "startup script and `ready` seen by the CLI (connected → CLI exit)",
];

/// The example with its workspaces' homes under `workspaces` (the template's variable
/// default; the API has no variable values to pass at import).
fn archive(workspaces: &Path) -> anyhow::Result<Vec<u8>> {
    let default = r#"default     = "/tmp/coder-workspaces""#;
    ensure!(
        MAIN_TF.contains(default),
        "the local-process example no longer has its workspaces_dir default"
    );
    super::terraform::archive_of(&MAIN_TF.replace(
        default,
        &format!(r#"default     = "{}""#, workspaces.display()),
    ))
}

/// Kills the agents the template started (their pid files), whatever state the run ended in.
struct Reaper(PathBuf);

impl Drop for Reaper {
    fn drop(&mut self) {
        let Ok(homes) = std::fs::read_dir(&self.0) else {
            return;
        };
        for home in homes.flatten() {
            let pid = std::fs::read_to_string(home.path().join(".coder-workspace.pid"))
                .ok()
                .and_then(|s| s.trim().parse::<i32>().ok());
            if let Some(pid) = pid.filter(|p| *p > 1) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
}

/// `creates` measured creates after one warm-up, each deleted before the next.
pub async fn run(
    coder_bin: &Path,
    work: &Path,
    creates: usize,
    timeout: Duration,
    progress: &dyn Fn(&str),
) -> anyhow::Result<Vec<Create>> {
    let workspaces = work.join("workspaces");
    std::fs::create_dir_all(&workspaces)?;
    let _reaper = Reaper(workspaces.clone());
    let cluster = Cluster::start(&work.join("pg")).await?;
    let measured = async {
        let deploy = Deployment::start(coder_bin, &cluster, &work.join("server"), timeout).await?;
        let daemon = deploy.terraform_daemon(coder_bin).await?;
        let result = async {
            progress("P11: importing the local-process template (terraform init + plan)");
            deploy
                .template_of(TEMPLATE, "terraform", archive(&workspaces)?, &[], true)
                .await?;
            let cli = work.join("cli");
            std::fs::create_dir_all(&cli)?;
            std::fs::write(cli.join("url"), deploy.server.url.as_str())?;
            std::fs::write(cli.join("session"), &deploy.token)?;
            let mut out = Vec::with_capacity(creates);
            for i in 0..=creates {
                progress(&format!("P11: create {i} of {creates} (0 is the warm-up)"));
                let name = format!("p11-{i}");
                let create = once(&deploy, coder_bin, &cli, &name, timeout).await?;
                if i > 0 {
                    out.push(create);
                }
                let status = coder(coder_bin, &cli)
                    .args(["delete", &name, "--yes"])
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .status()
                    .await?;
                ensure!(status.success(), "coder delete {name}: {status}");
            }
            Ok(out)
        }
        .await;
        daemon.stop(Duration::from_secs(10)).await?;
        deploy.stop().await?;
        result
    }
    .await;
    let stopped = cluster.stop().await;
    let out = measured?;
    stopped?;
    Ok(out)
}

fn ms(from: DateTime<Utc>, to: DateTime<Utc>) -> f64 {
    (to - from).num_microseconds().unwrap_or_default() as f64 / 1e3
}

async fn once(
    deploy: &Deployment,
    coder_bin: &Path,
    cli: &Path,
    name: &str,
    timeout: Duration,
) -> anyhow::Result<Create> {
    let started_at = Utc::now();
    let started = Instant::now();
    let output = tokio::time::timeout(
        timeout,
        coder(coder_bin, cli)
            .args(["create", name, "-t", TEMPLATE, "--wait", "--yes"])
            .output(),
    )
    .await
    .with_context(|| format!("coder create {name} took over {timeout:?}"))??;
    let total = started.elapsed();
    let ended_at = started_at + chrono::Duration::from_std(total)?;
    ensure!(
        output.status.success(),
        "coder create {name}: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let ws = deploy.owner.workspace_by_owner_and_name("me", name).await?;
    let job = &ws.latest_build.job;
    let timings = deploy
        .owner
        .workspace_build_timings(ws.latest_build.id)
        .await?;
    let marks = marks(&timings, job, started_at, ended_at)?;
    let parts = PARTS
        .iter()
        .zip(marks.windows(2))
        .map(|(name, w)| (*name, ms(w[0], w[1]).max(0.0)))
        .collect();
    Ok(Create {
        total: total.as_secs_f64() * 1e3,
        parts,
    })
}

/// The timeline's ten marks (nine parts between them).
fn marks(
    timings: &WorkspaceBuildTimings,
    job: &codersdk::provisioners::ProvisionerJob,
    started_at: DateTime<Utc>,
    ended_at: DateTime<Utc>,
) -> anyhow::Result<Vec<DateTime<Utc>>> {
    let stage = |names: &[&str]| -> Option<(DateTime<Utc>, DateTime<Utc>)> {
        let of: Vec<_> = timings
            .provisioner_timings
            .iter()
            .filter(|t| names.contains(&t.stage.as_str()))
            .collect();
        Some((
            of.iter().map(|t| t.started_at).min()?,
            of.iter().map(|t| t.ended_at).max()?,
        ))
    };
    let (init_start, init_end) = stage(&["init"]).context("no terraform init timing")?;
    let (_, plan_end) = stage(&["plan", "graph"]).context("no terraform plan timing")?;
    let (_, apply_end) = stage(&["apply"]).context("no terraform apply timing")?;
    let created = job.created_at;
    let started = job.started_at.context("the job never started")?;
    let completed = job.completed_at.context("the job never completed")?;
    let connected = timings
        .agent_connection_timings
        .iter()
        .map(|c| c.ended_at)
        .max()
        .context("the agent never connected")?;
    Ok(vec![
        started_at, created, started, init_start, init_end, plan_end, apply_end, completed,
        connected, ended_at,
    ])
}
