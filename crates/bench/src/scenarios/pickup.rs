//! P1: pickup latency. Idle daemons wait; builds are created through the API at a steady rate
//! (each on a workspace whose previous build is done, so every job finds an idle daemon).
//!
//! Measured per job, from the database afterwards:
//! - **pickup** = the job's first log line − its `created_at`. coderd stamps `created_at` just
//!   before the transaction that inserts and announces the job (so the commit is included, as
//!   in graphile-worker's add→start); the daemon stamps its first line ("Reading the template
//!   archive" for echo) the moment its job task starts, after the job arrived over the WebSocket.
//!   Both stamps come from the same host clock.
//! - **claim** = `started_at` − `created_at`: the part up to the acquire statement (commit,
//!   NOTIFY, dispatch, wake-up); the rest is payload assembly and the WebSocket hop.

use std::time::{Duration, Instant};

use anyhow::Context;
use chrono::{DateTime, Utc};
use tokio::task::JoinSet;
use uuid::Uuid;

use super::{Cycling, Driver};
use crate::deploy::Deployment;
use crate::stats::between;

/// A job's id, created_at, started_at and first log line's stamp.
type StampRow = (
    Uuid,
    DateTime<Utc>,
    Option<DateTime<Utc>>,
    Option<DateTime<Utc>>,
);

pub struct PickupRun {
    pub pickup: Vec<Duration>,
    pub claim: Vec<Duration>,
}

pub async fn run(
    deploy: &Deployment,
    workspaces: &mut [Cycling],
    jobs: usize,
    rate: f64,
) -> anyhow::Result<PickupRun> {
    let period = Duration::from_secs_f64(1.0 / rate);
    let start = Instant::now();
    let mut tasks = JoinSet::new();
    // Each workspace's builds are created in order by one task; ticks are spread over them.
    let count = workspaces.len();
    for (w, ws) in workspaces.iter().enumerate() {
        let mut ws = ws.clone();
        let driver = Driver::of(deploy);
        let ticks: Vec<usize> = (w..jobs).step_by(count).collect();
        tasks.spawn(async move {
            let mut created = Vec::with_capacity(ticks.len());
            for tick in ticks {
                tokio::time::sleep_until((start + period * tick as u32).into()).await;
                created.push(ws.next_build(&driver).await?);
            }
            anyhow::Ok((w, ws, created))
        });
    }
    let mut job_ids = Vec::with_capacity(jobs);
    while let Some(done) = tasks.join_next().await {
        let (w, ws, created) = done??;
        workspaces[w] = ws;
        job_ids.extend(created);
    }
    for job in &job_ids {
        deploy.completions.wait(*job, deploy.timeout).await?;
    }
    super::all_succeeded(&deploy.pool, &job_ids).await?;
    super::forget_finished(&Driver::of(deploy), &job_ids, workspaces);
    let rows: Vec<StampRow> = sqlx::query_as(
        "SELECT j.id, j.created_at, j.started_at,
                    (SELECT min(l.created_at) FROM provisioner_job_logs l WHERE l.job_id = j.id)
             FROM provisioner_jobs j WHERE j.id = ANY($1)",
    )
    .bind(&job_ids)
    .fetch_all(&deploy.pool)
    .await?;
    let mut result = PickupRun {
        pickup: Vec::with_capacity(rows.len()),
        claim: Vec::with_capacity(rows.len()),
    };
    for (id, created, started, first_log) in rows {
        let started = started.with_context(|| format!("job {id} has no started_at"))?;
        let first_log = first_log.with_context(|| format!("job {id} logged nothing"))?;
        result.pickup.push(between(created, first_log));
        result.claim.push(between(created, started));
    }
    Ok(result)
}
