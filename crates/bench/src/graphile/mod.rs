//! Baseline (b): graphile-worker, a widely used PostgreSQL job queue (Node), on the same
//! database in the same run. It is installed with npm into the run's directory; without
//! `node`/`npm`, or when the install fails, the rows that compare against it say why.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use serde::Deserialize;
use tokio::process::Command;

use crate::procs::{Cluster, DATABASE};

const SCRIPT: &str = include_str!("bench.cjs");
const INSTALL_TIMEOUT: Duration = Duration::from_secs(300);

#[derive(Debug, Clone, Deserialize)]
pub struct GraphileResults {
    pub version: String,
    /// Per run: add → start of each job, ms.
    pub latency_ms: Vec<Vec<f64>>,
    pub drain_jobs_per_s: Vec<f64>,
}

pub struct Plan {
    pub version: String,
    pub concurrency: usize,
    pub rate: f64,
    pub latency_jobs: usize,
    pub drain_jobs: usize,
    pub runs: usize,
    pub warmup: bool,
    pub timeout: Duration,
}

/// Installs and runs the baseline; `Err` carries the reason it was skipped.
pub async fn run(plan: &Plan, cluster: &Cluster, dir: &Path) -> Result<GraphileResults, String> {
    measure(plan, cluster, dir)
        .await
        .map_err(|e| format!("{e:#}"))
}

async fn measure(plan: &Plan, cluster: &Cluster, dir: &Path) -> anyhow::Result<GraphileResults> {
    for tool in ["node", "npm"] {
        let found = Command::new(tool)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .await
            .map(|s| s.success())
            .unwrap_or(false);
        if !found {
            bail!("`{tool}` is not installed");
        }
    }
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("package.json"), r#"{"private": true}"#)?;
    let install = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--loglevel=error"])
        .arg(format!("graphile-worker@{}", plan.version))
        .current_dir(dir)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let install = tokio::time::timeout(INSTALL_TIMEOUT, install)
        .await
        .with_context(|| format!("npm install took longer than {INSTALL_TIMEOUT:?}"))??;
    if !install.status.success() {
        bail!(
            "npm install graphile-worker@{} failed: {}",
            plan.version,
            String::from_utf8_lossy(&install.stderr).trim()
        );
    }
    std::fs::write(dir.join("bench.cjs"), SCRIPT)?;
    let options = cluster.options();
    let settings = serde_json::json!({
        "socket_dir": cluster.socket_dir()?,
        "port": options.get_port(),
        "user": options.get_username(),
        "database": DATABASE,
        "concurrency": plan.concurrency,
        "rate": plan.rate,
        "latency_jobs": plan.latency_jobs,
        "drain_jobs": plan.drain_jobs,
        "runs": plan.runs,
        "warmup": plan.warmup,
        "timeout_ms": plan.timeout.as_millis() as u64,
    });
    let child = Command::new("node")
        .arg("bench.cjs")
        .current_dir(dir)
        .env("BENCH_CONFIG", settings.to_string())
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    // Bounded: every wait inside the script is bounded too; this catches a hung process.
    let limit = plan.timeout * (2 + 2 * plan.runs as u32);
    let out = tokio::time::timeout(limit, child)
        .await
        .with_context(|| format!("the graphile-worker run took longer than {limit:?}"))??;
    if !out.status.success() {
        bail!(
            "the graphile-worker run failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .last()
        .context("the graphile-worker run printed nothing")?;
    serde_json::from_str(line).context("reading the graphile-worker results")
}
