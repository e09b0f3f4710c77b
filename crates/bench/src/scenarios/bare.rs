//! P2b: bare jobs through the daemons. `count` pending first builds of an empty echo template
//! are committed at once (cloned from one the API created, each announced on coderd's posting
//! channel in the same transaction, as coderd's own insert does); the clock runs from that
//! commit to the last completion commit. Each job still makes the full trip: dispatch, acquire,
//! payload, WebSocket, work directory, echo, logs, result, completion transaction.

use std::time::Instant;

use crate::deploy::Deployment;
use crate::seed::{self, Jobs, Source};

pub struct DrainRun {
    pub jobs: usize,
    pub per_second: f64,
}

pub async fn run(
    deploy: &Deployment,
    source: Source,
    count: usize,
    prefix: &str,
) -> anyhow::Result<DrainRun> {
    let jobs = seed::workspaces(
        &deploy.pool,
        source,
        count,
        prefix,
        Jobs::Pending { tags: None },
    )
    .await?;
    let committed = Instant::now();
    let mut last = committed;
    for job in &jobs {
        last = last.max(deploy.completions.wait(*job, deploy.timeout).await?);
    }
    deploy.completions.forget(&jobs);
    super::all_succeeded(&deploy.pool, &jobs).await?;
    Ok(DrainRun {
        jobs: jobs.len(),
        per_second: jobs.len() as f64 / (last - committed).as_secs_f64(),
    })
}
