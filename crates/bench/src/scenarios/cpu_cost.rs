//! What a read costs in CPU, by process: the CPU time `coder server` and the PostgreSQL
//! cluster spend over a window of requests at a fixed rate, divided by the requests answered.
//! Latency moves with whatever else shares the machine; CPU per request barely does, so this
//! says where the capacity goes (and what bounds P4b) even on a busy host.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::Context;
use uuid::Uuid;

use super::api::{self, Mix};
use crate::deploy::Deployment;
use crate::procs::cpu_time;

/// CPU per answered request, in microseconds.
#[derive(Debug, Clone, Copy)]
pub struct CpuCost {
    pub coderd_us: f64,
    pub postgres_us: f64,
}

impl CpuCost {
    pub fn total_us(&self) -> f64 {
        self.coderd_us + self.postgres_us
    }
}

/// Sends `mix` at `rate` for `duration` and charges the CPU coderd and PostgreSQL used to the
/// requests that succeeded.
pub async fn measure(
    deploy: &Deployment,
    workspaces: &[Uuid],
    template: Uuid,
    mix: Mix,
    rate: f64,
    duration: Duration,
) -> anyhow::Result<CpuCost> {
    let pg_before = postgres_cpu(&deploy.pool).await?;
    let coderd_before = deploy.server.cpu()?;
    let run = api::run(&deploy.owner, workspaces, template, mix, rate, duration).await?;
    let coderd = deploy.server.cpu()?.saturating_sub(coderd_before);
    let pg_after = postgres_cpu(&deploy.pool).await?;
    // A backend that started during the window is charged all it used; one that ended is lost
    // (coderd's pool keeps its connections, so neither happens at these rates).
    let postgres: Duration = pg_after
        .iter()
        .map(|(pid, after)| after.saturating_sub(pg_before.get(pid).copied().unwrap_or_default()))
        .sum();
    let answered = run.samples.len();
    anyhow::ensure!(
        answered > 0 && run.errors == 0,
        "costing reads: {} of {} requests failed (first: {})",
        run.errors,
        answered + run.errors,
        run.first_error.unwrap_or_default()
    );
    let per_request = |d: Duration| d.as_secs_f64() * 1e6 / answered as f64;
    Ok(CpuCost {
        coderd_us: per_request(coderd),
        postgres_us: per_request(postgres),
    })
}

/// CPU used so far by every process of the cluster that PostgreSQL lists (client backends and
/// its background workers). The bench runs the cluster on this host, so `/proc` has them.
async fn postgres_cpu(pool: &sqlx::PgPool) -> anyhow::Result<HashMap<i32, Duration>> {
    let pids: Vec<i32> = sqlx::query_scalar("SELECT pid FROM pg_stat_activity")
        .fetch_all(pool)
        .await
        .context("listing PostgreSQL's processes")?;
    Ok(pids
        .into_iter()
        .filter_map(|pid| {
            // A backend may exit between the listing and the read.
            cpu_time(nix::unistd::Pid::from_raw(pid))
                .ok()
                .map(|t| (pid, t))
        })
        .collect())
}
