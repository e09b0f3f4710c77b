//! Baseline (a), the raw SQL ceiling: the statements every job must pass — coderd's own
//! `Store::complete_job_and_claim` (a result recorded in the transaction that claims the
//! daemon's next job, as a daemon's session does) — run directly on the same database with the
//! same concurrency as the daemons, over the same kind of seeded jobs, with the result a bare
//! echo build really returns (its state and timing, copied from one). No HTTP, no WebSocket,
//! no payload reads, no log inserts: what is left is PostgreSQL and the durable commits.
//!
//! The seeded jobs carry a tag no daemon has, so the running daemons cannot take them; the
//! acquire statement then probes one tag key, exactly as an untagged daemon's does.

use std::time::Instant;

use anyhow::{Context, ensure};
use chrono::{DateTime, Utc};
use coderd_core::provisioners::tags;
use coderd_store::{Claimant, Completion, FinishOutcome, Store};
use codersdk::provisionerd::Timing;
use uuid::Uuid;

use super::bare::DrainRun;
use crate::deploy::Deployment;
use crate::seed::{self, Jobs, Source};

/// stage, source, action, resource, started_at, ended_at.
type TimingRow = (String, String, String, String, DateTime<Utc>, DateTime<Utc>);

/// What the daemon would report for a bare build: copied from a real one.
pub struct BareResult {
    state: Vec<u8>,
    timings: Vec<Timing>,
}

impl BareResult {
    pub async fn of(pool: &sqlx::PgPool, source: Source) -> anyhow::Result<Self> {
        let state: Option<Vec<u8>> =
            sqlx::query_scalar("SELECT provisioner_state FROM workspace_builds WHERE id = $1")
                .bind(source.build)
                .fetch_one(pool)
                .await?;
        let rows: Vec<TimingRow> = sqlx::query_as(
            "SELECT stage, source, action, resource, started_at, ended_at
                 FROM provisioner_job_timings WHERE job_id = $1",
        )
        .bind(source.job)
        .fetch_all(pool)
        .await?;
        Ok(Self {
            state: state.context("the source build has no state")?,
            timings: rows
                .into_iter()
                .map(
                    |(stage, source, action, resource, started_at, ended_at)| Timing {
                        stage,
                        started_at,
                        ended_at,
                        source,
                        action,
                        resource,
                    },
                )
                .collect(),
        })
    }
}

pub async fn run(
    deploy: &Deployment,
    source: Source,
    result: &BareResult,
    count: usize,
    concurrency: usize,
    prefix: &str,
) -> anyhow::Result<DrainRun> {
    let mut ceiling_tags = codersdk::provisionerd::Tags::new();
    ceiling_tags.insert("coder-bench".into(), "sql-ceiling".into());
    let ceiling_tags = tags::normalize(ceiling_tags, None);
    let key = tags::key(&ceiling_tags);
    let jobs = seed::workspaces(
        &deploy.pool,
        source,
        count,
        prefix,
        Jobs::Pending {
            tags: Some((serde_json::to_value(&ceiling_tags)?, key.clone())),
        },
    )
    .await?;
    let org: Uuid =
        sqlx::query_scalar("SELECT organization_id FROM provisioner_jobs WHERE id = $1")
            .bind(source.job)
            .fetch_one(&deploy.pool)
            .await?;
    let store = Store::new(deploy.pool.clone());
    let completion = Completion::Build {
        state: result.state.clone(),
        resources: Vec::new(),
        features: Default::default(),
        external_tokens: Vec::new(),
        schedule: Box::new(coderd_store::BuildSchedule {
            now: chrono::Utc::now(),
            quiet_hours: coderd_core::state::default_quiet_hours(),
        }),
    };
    let started = Instant::now();
    let workers = (0..concurrency).map(|_| {
        let (store, key, completion) = (&store, &key, &completion);
        async move {
            let worker = Uuid::new_v4();
            let provisioners = ["echo".to_string()];
            let keys = [key.clone()];
            let claimant = Claimant {
                org,
                provisioners: &provisioners,
                tag_keys: &keys,
                worker,
            };
            let mut done = 0usize;
            // As a daemon's session does: one acquire when idle, then each result is recorded
            // in the transaction that claims the next job.
            let mut next = store.acquire_job(org, &provisioners, &keys, worker).await?;
            while let Some(job) = next {
                let (outcome, claimed) = store
                    .complete_job_and_claim(
                        job.id,
                        worker,
                        completion,
                        &result.timings,
                        &[],
                        Some(&claimant),
                    )
                    .await?;
                ensure!(
                    outcome == FinishOutcome::Recorded,
                    "completing {}: {outcome:?}",
                    job.id
                );
                done += 1;
                next = claimed;
            }
            anyhow::Ok(done)
        }
    });
    let done: usize = futures::future::try_join_all(workers)
        .await?
        .into_iter()
        .sum();
    let elapsed = started.elapsed();
    ensure!(
        done == count,
        "the SQL ceiling completed {done} of {count} jobs"
    );
    super::all_succeeded(&deploy.pool, &jobs).await?;
    deploy.completions.forget(&jobs);
    Ok(DrainRun {
        jobs: done,
        per_second: done as f64 / elapsed.as_secs_f64(),
    })
}
