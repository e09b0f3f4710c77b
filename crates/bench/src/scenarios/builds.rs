//! P2 (and P3): echo builds end to end. A closed loop per workspace: create the next build
//! through the API (stop if running, start if stopped), wait until the completion is committed,
//! repeat. With several workspaces per daemon the queue never runs dry, so the figure is the
//! deployment's capacity. A build counts when its completion lands inside the window.

use std::time::{Duration, Instant};

use tokio::task::JoinSet;

use super::{Cycling, Driver};
use crate::deploy::Deployment;

pub struct BuildsRun {
    pub per_second: f64,
    /// Builds completed inside the window.
    pub completed: usize,
    /// API create request sent → completion committed, for builds inside the window.
    pub latencies: Vec<Duration>,
}

pub async fn run(
    deploy: &Deployment,
    workspaces: &mut [Cycling],
    window: Duration,
) -> anyhow::Result<BuildsRun> {
    let start = Instant::now();
    let end = start + window;
    let mut tasks = JoinSet::new();
    for (w, ws) in workspaces.iter().enumerate() {
        let mut ws = ws.clone();
        let driver = Driver::of(deploy);
        tasks.spawn(async move {
            let mut done = Vec::new();
            let mut jobs = Vec::new();
            while Instant::now() < end {
                let sent = Instant::now();
                let job = ws.next_build(&driver).await?;
                let at = driver.completions.wait(job, driver.timeout).await?;
                jobs.push(job);
                if at <= end {
                    done.push(at - sent);
                }
            }
            anyhow::Ok((w, ws, done, jobs))
        });
    }
    let mut latencies = Vec::new();
    let mut jobs = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        let (w, ws, done, created) = joined??;
        workspaces[w] = ws;
        latencies.extend(done);
        jobs.extend(created);
    }
    super::all_succeeded(&deploy.pool, &jobs).await?;
    super::forget_finished(&Driver::of(deploy), &jobs, workspaces);
    Ok(BuildsRun {
        per_second: latencies.len() as f64 / window.as_secs_f64(),
        completed: latencies.len(),
        latencies,
    })
}
