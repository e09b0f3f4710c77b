//! Ending a job: its result (or failure) and everything that follows from it, in one
//! transaction — a result that was acknowledged to the daemon is in the database.

use codersdk::proto;
use codersdk::provisionerd::{JobFailure, Timing};
use uuid::Uuid;

use codersdk::provisionerd::JobLog;

use super::external_agents::{SealedAgentToken, record_external_tokens};
use super::jobs::{append_logs, notify};
use super::lifecycle::record_schedule;
use super::prebuilds::carry_claimed_agents;
use super::presets::insert_presets;
use super::resources::insert_resources;
use super::templates::{ImportResult, record_import};
use super::version_facts::{record_build_facts, record_version_facts};
use super::{Result, Store, timed};
use crate::pubsub::channels;

/// What a successful job produced, as the store records it.
#[derive(Debug, Clone)]
pub enum Completion {
    Import {
        result: ImportResult,
        start_resources: Vec<proto::Resource>,
        stop_resources: Vec<proto::Resource>,
        features: proto::TemplateFeatures,
    },
    Build {
        state: Vec<u8>,
        resources: Vec<proto::Resource>,
        features: proto::TemplateFeatures,
        /// The sealed tokens of its agents, when it has external agents.
        external_tokens: Vec<SealedAgentToken>,
        /// The time and quiet hours a start build's deadlines are computed from (boxed: a
        /// parsed schedule is large).
        schedule: Box<BuildSchedule>,
    },
}

/// What a completed build's schedule is computed from: coderd's clock (injectable, so tests
/// control deadlines) and the deployment's quiet hours.
#[derive(Debug, Clone)]
pub struct BuildSchedule {
    pub now: chrono::DateTime<chrono::Utc>,
    pub quiet_hours: crate::schedule::Schedule,
}

/// What became of a daemon's final report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinishOutcome {
    /// Recorded now.
    Recorded,
    /// This daemon's report was recorded before (a resend after a reconnect).
    AlreadyRecorded,
    /// The job is not this daemon's (any more); the reason says why.
    Gone(String),
}

/// Claims the job for completion: marks it completed if `worker` holds it and it is still open,
/// and appends the daemon's last log lines. Returns the job type, or how to answer when it
/// cannot be claimed.
async fn close_job(
    tx: &mut sqlx::PgConnection,
    job: Uuid,
    worker: Uuid,
    error: Option<&str>,
    error_code: Option<&str>,
    logs: &[JobLog],
) -> Result<std::result::Result<String, FinishOutcome>> {
    let closed = sqlx::query!(
        r#"UPDATE provisioner_jobs
           SET completed_at = now(), updated_at = now(), error = $3, error_code = $4
           WHERE id = $1 AND worker_id = $2 AND completed_at IS NULL
           RETURNING type, logs_length, logs_overflowed"#,
        job,
        worker,
        error,
        error_code
    )
    .fetch_optional(&mut *tx)
    .await?;
    if let Some(closed) = closed {
        append_logs(
            &mut *tx,
            job,
            logs,
            closed.logs_length,
            closed.logs_overflowed,
        )
        .await?;
        return Ok(Ok(closed.r#type));
    }
    let current = sqlx::query!(
        "SELECT worker_id, completed_at IS NOT NULL AS \"done!\", error FROM provisioner_jobs WHERE id = $1",
        job
    )
    .fetch_optional(&mut *tx)
    .await?;
    Ok(Err(match current {
        Some(c) if c.worker_id == Some(worker) && c.done && c.error.is_none() => {
            FinishOutcome::AlreadyRecorded
        }
        Some(c) if c.worker_id == Some(worker) && c.done => {
            FinishOutcome::Gone(c.error.unwrap_or_default())
        }
        Some(_) => FinishOutcome::Gone("the job belongs to another provisioner daemon".into()),
        None => FinishOutcome::Gone("the job does not exist".into()),
    }))
}

async fn insert_timings(tx: &mut sqlx::PgConnection, job: Uuid, timings: &[Timing]) -> Result<()> {
    if timings.is_empty() {
        return Ok(());
    }
    let stages: Vec<String> = timings.iter().map(|t| t.stage.clone()).collect();
    let sources: Vec<String> = timings.iter().map(|t| t.source.clone()).collect();
    let actions: Vec<String> = timings.iter().map(|t| t.action.clone()).collect();
    let resources: Vec<String> = timings.iter().map(|t| t.resource.clone()).collect();
    let started: Vec<chrono::DateTime<chrono::Utc>> =
        timings.iter().map(|t| t.started_at).collect();
    let ended: Vec<chrono::DateTime<chrono::Utc>> = timings.iter().map(|t| t.ended_at).collect();
    sqlx::query!(
        r#"INSERT INTO provisioner_job_timings (job_id, stage, source, action, resource, started_at, ended_at)
           SELECT $1, * FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::timestamptz[])"#,
        job,
        &stages,
        &sources,
        &actions,
        &resources,
        &started,
        &ended
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}

async fn announce(tx: &mut sqlx::PgConnection, job: Uuid) -> Result<()> {
    notify(tx, channels::JOB_UPDATED, job.to_string()).await?;
    notify(tx, channels::JOB_LOGS, job.to_string()).await
}

impl Store {
    /// Records a job's result and its consequences: a version's parameters and resources, or a
    /// build's new state and resources (and, for a delete, the workspace's deletion).
    pub async fn complete_job(
        &self,
        job: Uuid,
        worker: Uuid,
        completion: &Completion,
        timings: &[Timing],
        logs: &[JobLog],
    ) -> Result<FinishOutcome> {
        timed("complete_job", async {
            let mut tx = self.pool.begin().await?;
            if let Err(outcome) = close_job(&mut tx, job, worker, None, None, logs).await? {
                return Ok(outcome);
            }
            match completion {
                Completion::Import {
                    result,
                    start_resources,
                    stop_resources,
                    features,
                } => {
                    record_import(&mut tx, job, result).await?;
                    record_version_facts(&mut tx, job, features).await?;
                    insert_presets(&mut tx, job, &features.presets).await?;
                    insert_resources(&mut tx, job, "start", start_resources).await?;
                    insert_resources(&mut tx, job, "stop", stop_resources).await?;
                }
                Completion::Build {
                    state,
                    resources,
                    features,
                    external_tokens,
                    schedule,
                } => {
                    let build = sqlx::query!(
                        r#"UPDATE workspace_builds SET provisioner_state = $2, updated_at = now()
                           WHERE job_id = $1 RETURNING transition, workspace_id"#,
                        job,
                        state
                    )
                    .fetch_one(&mut *tx)
                    .await?;
                    insert_resources(&mut tx, job, &build.transition, resources).await?;
                    record_build_facts(&mut tx, job, resources, features).await?;
                    record_external_tokens(&mut tx, job, external_tokens).await?;
                    for agent in carry_claimed_agents(&mut tx, job).await? {
                        notify(&mut tx, channels::AGENT_UPDATED, agent.to_string()).await?;
                    }
                    if build.transition != "delete" {
                        record_schedule(&mut tx, job, build.workspace_id, &build.transition, schedule)
                            .await?;
                    }
                    if build.transition == "delete" {
                        sqlx::query!(
                            "UPDATE workspaces SET deleted = true, updated_at = now() WHERE id = $1",
                            build.workspace_id
                        )
                        .execute(&mut *tx)
                        .await?;
                    }
                    notify(&mut tx, channels::WORKSPACE_UPDATED, build.workspace_id.to_string()).await?;
                }
            }
            insert_timings(&mut tx, job, timings).await?;
            announce(&mut tx, job).await?;
            tx.commit().await?;
            Ok(FinishOutcome::Recorded)
        })
        .await
    }

    /// Records a failure. A job that stopped because it was cancelled ends as cancelled (no
    /// error); a build keeps the state the failure reported (a failed apply may have created
    /// resources) or, without one, the state it started from.
    pub async fn fail_job(
        &self,
        job: Uuid,
        worker: Uuid,
        failure: &JobFailure,
        logs: &[JobLog],
    ) -> Result<FinishOutcome> {
        timed("fail_job", async {
            let mut tx = self.pool.begin().await?;
            let was_canceled = sqlx::query_scalar!(
                r#"SELECT canceled_at IS NOT NULL AS "c!" FROM provisioner_jobs WHERE id = $1"#,
                job
            )
            .fetch_optional(&mut *tx)
            .await?
            .unwrap_or(false);
            let as_cancel = failure.canceled && was_canceled;
            let error = (!as_cancel).then_some(failure.error.as_str());
            let code = (!as_cancel && !failure.error_code.is_empty()).then_some(failure.error_code.as_str());
            let kind = match close_job(&mut tx, job, worker, error, code, logs).await? {
                Ok(kind) => kind,
                Err(outcome) => return Ok(outcome),
            };
            if kind == "workspace_build"
                && let Some(state) = &failure.state
            {
                let workspace = sqlx::query_scalar!(
                    "UPDATE workspace_builds SET provisioner_state = $2, updated_at = now() WHERE job_id = $1 RETURNING workspace_id",
                    job,
                    state
                )
                .fetch_one(&mut *tx)
                .await?;
                notify(&mut tx, channels::WORKSPACE_UPDATED, workspace.to_string()).await?;
            }
            insert_timings(&mut tx, job, &failure.timings).await?;
            announce(&mut tx, job).await?;
            tx.commit().await?;
            Ok(FinishOutcome::Recorded)
        })
        .await
    }
}
