//! Ending a job: its result (or failure) and everything that follows from it, in one
//! transaction — a result that was acknowledged to the daemon is in the database.

use codersdk::proto;
use codersdk::provisionerd::{JobFailure, Timing};
use uuid::Uuid;

use codersdk::provisionerd::JobLog;

use super::external_agents::{SealedAgentToken, record_external_tokens};
use super::jobs::{Claimant, JobRow, MAX_JOB_LOGS_BYTES, fit_logs};
use super::lifecycle::{ScheduleFacts, schedule_of};
use super::prebuilds::{PREBUILDS_USER_ID, carry_claimed_agents};
use super::prepared_completion::{CompletionFacts, PreparedBuild};
use super::presets::insert_presets;
use super::resource_rows::TreeRows;
use super::templates::{ImportResult, record_import};
use super::version_facts::record_version_facts;
use super::{Error, Result, Store, timed};
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
    pub quiet_hours: coderd_schedule::Schedule,
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

/// A job closed for completion, and the daemon's last lines that fit under its cap (inserted
/// by [`record_tail`]; its length is already counted).
struct Closed<'l> {
    kind: String,
    logs: &'l [JobLog],
    /// A build's schedule facts, read by the statement that closed it.
    facts: Option<ScheduleFacts>,
    /// The build before this one was the prebuilds user's start: this build claims a prebuilt
    /// workspace, whose agents its own carry on.
    follows_prebuild: bool,
}

/// Claims the job for completion: marks it completed if `worker` holds it and it is still open,
/// and counts the daemon's last log lines against the job's cap — in the same statement when
/// they all fit, the usual case. The same statement reads a build's schedule facts (what its
/// deadlines follow from) and whether it follows a prebuild. Returns the job type and the lines
/// to insert, or how to answer when it cannot be claimed.
async fn close_job<'l>(
    tx: &mut sqlx::PgConnection,
    job: Uuid,
    worker: Uuid,
    error: Option<&str>,
    error_code: Option<&str>,
    logs: &'l [JobLog],
) -> Result<std::result::Result<Closed<'l>, FinishOutcome>> {
    let total: i64 = logs.iter().map(|l| l.output.len() as i64).sum();
    // The sub-select locks the row and reads the length before this statement adds to it.
    let closed = sqlx::query!(
        r#"UPDATE provisioner_jobs j
           SET completed_at = now(), updated_at = now(), error = $3, error_code = $4,
               logs_length = CASE
                   WHEN NOT o.logs_overflowed AND o.logs_length::int8 + $5::int8 <= $6::int8
                   THEN (o.logs_length + $5::int8)::int4
                   ELSE o.logs_length END
           FROM (SELECT id, logs_length, logs_overflowed FROM provisioner_jobs
                 WHERE id = $1 FOR UPDATE) o
           LEFT JOIN workspace_builds b ON b.job_id = o.id
           LEFT JOIN workspaces w ON w.id = b.workspace_id
           LEFT JOIN templates t ON t.id = w.template_id
           WHERE j.id = o.id AND j.worker_id = $2 AND j.completed_at IS NULL
           RETURNING j.type, o.logs_length, o.logs_overflowed,
                     b.transition AS "transition?", b.workspace_id AS "workspace_id?",
                     w.ttl_ms AS "ttl_ms?", w.autostart_schedule AS "autostart_schedule?",
                     t.default_ttl_ms AS "default_ttl_ms?",
                     t.allow_user_autostop AS "allow_user_autostop?",
                     t.allow_user_autostart AS "allow_user_autostart?",
                     t.autostop_requirement_days_of_week AS "autostop_requirement_days_of_week?",
                     t.autostop_requirement_weeks AS "autostop_requirement_weeks?",
                     t.autostart_allowed_days AS "autostart_allowed_days?",
                     EXISTS (SELECT 1 FROM workspace_builds ob
                             WHERE ob.workspace_id = b.workspace_id
                               AND ob.build_number = b.build_number - 1
                               AND ob.initiator_id = $7 AND ob.transition = 'start')
                         AS "follows_prebuild!""#,
        job,
        worker,
        error,
        error_code,
        total,
        i64::from(MAX_JOB_LOGS_BYTES),
        PREBUILDS_USER_ID
    )
    .fetch_optional(&mut *tx)
    .await?;
    if let Some(closed) = closed {
        let (kept, bytes, overflowed) = fit_logs(logs, closed.logs_length, closed.logs_overflowed);
        let counted = !closed.logs_overflowed && !overflowed && kept.len() == logs.len();
        if !counted && (bytes != 0 || overflowed != closed.logs_overflowed) {
            sqlx::query!(
                "UPDATE provisioner_jobs SET logs_length = logs_length + $2, logs_overflowed = $3 WHERE id = $1",
                job,
                bytes,
                overflowed
            )
            .execute(&mut *tx)
            .await?;
        }
        let facts = match (
            closed.transition,
            closed.workspace_id,
            closed.default_ttl_ms,
        ) {
            (Some(transition), Some(workspace_id), Some(default_ttl_ms)) => Some(ScheduleFacts {
                transition,
                workspace_id,
                ttl_ms: closed.ttl_ms,
                autostart_schedule: closed.autostart_schedule,
                default_ttl_ms,
                allow_user_autostop: closed.allow_user_autostop.unwrap_or_default(),
                allow_user_autostart: closed.allow_user_autostart.unwrap_or_default(),
                autostop_requirement_days_of_week: closed
                    .autostop_requirement_days_of_week
                    .unwrap_or_default(),
                autostop_requirement_weeks: closed.autostop_requirement_weeks.unwrap_or_default(),
                autostart_allowed_days: closed.autostart_allowed_days.unwrap_or_default(),
            }),
            _ => None,
        };
        return Ok(Ok(Closed {
            kind: closed.r#type,
            logs: kept,
            facts,
            follows_prebuild: closed.follows_prebuild,
        }));
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

/// A successful build's own write: its state, facts and deadlines, and its workspace's next
/// start (or deletion).
struct BuildWrite<'a> {
    state: &'a [u8],
    has_ai_task: bool,
    task_app: Option<Uuid>,
    has_external_agent: bool,
    /// A start's deadline and max deadline; other transitions keep theirs.
    deadlines: Option<coderd_schedule::Autostop>,
    delete: bool,
    next_start_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// The end of every completion in one statement: a successful build's write, the daemon's last
/// log lines, the job's timings, the notifications (`notes`: channel and payload, sent in
/// order, then the job's own update and logs announcements) and, for a daemon whose result
/// said it is idle, the claim of its next job.
async fn record_tail(
    tx: &mut sqlx::PgConnection,
    job: Uuid,
    logs: &[JobLog],
    timings: &[Timing],
    mut notes: Vec<(&str, String)>,
    build: Option<BuildWrite<'_>>,
    next: Option<&Claimant<'_>>,
) -> Result<Option<JobRow>> {
    let log_created: Vec<chrono::DateTime<chrono::Utc>> =
        logs.iter().map(|l| l.created_at).collect();
    let log_sources: Vec<String> = logs.iter().map(|l| l.source.as_str().to_string()).collect();
    let log_levels: Vec<String> = logs.iter().map(|l| l.level.as_str().to_string()).collect();
    let log_stages: Vec<String> = logs.iter().map(|l| l.stage.clone()).collect();
    // PostgreSQL text cannot hold NUL; a daemon's output may.
    let log_outputs: Vec<String> = logs.iter().map(|l| l.output.replace('\0', "")).collect();
    let stages: Vec<String> = timings.iter().map(|t| t.stage.clone()).collect();
    let sources: Vec<String> = timings.iter().map(|t| t.source.clone()).collect();
    let actions: Vec<String> = timings.iter().map(|t| t.action.clone()).collect();
    let resources: Vec<String> = timings.iter().map(|t| t.resource.clone()).collect();
    let started: Vec<chrono::DateTime<chrono::Utc>> =
        timings.iter().map(|t| t.started_at).collect();
    let ended: Vec<chrono::DateTime<chrono::Utc>> = timings.iter().map(|t| t.ended_at).collect();
    notes.push((channels::JOB_UPDATED, job.to_string()));
    notes.push((channels::JOB_LOGS, job.to_string()));
    let (note_channels, note_payloads): (Vec<String>, Vec<String>) = notes
        .into_iter()
        .map(|(channel, payload)| (channel.to_string(), payload))
        .unzip();
    let deadlines = build.as_ref().and_then(|b| b.deadlines);
    // Without a claimant no (provisioner, tag key) pair exists, so nothing is claimed.
    let (org, provisioners, tag_keys, worker) = match next {
        Some(c) => (Some(c.org), c.provisioners, c.tag_keys, Some(c.worker)),
        None => (None, &[][..], &[][..], None),
    };
    // The result is one row whether or not a job is claimed, so the notifications (a
    // sub-select of it) are sent either way. The claimed job comes back as JSON for the same
    // reason: a row of its own would be absent when nothing is claimed. Its claim time is the
    // claim's own (`clock_timestamp()`): `now()` is when the completion's transaction began.
    // `w` skips a write that would change nothing (a start without autostart): a no-op update
    // still writes a new row version and, on a full page, an entry in each of its indexes.
    // Safe: UPDATE re-checks its condition on the newest version of a row changed since the
    // snapshot, so the row ends as the unconditional write left it; a skipped write only
    // leaves the row unlocked, and a writer that would have waited for it finds it unchanged.
    let row = sqlx::query!(
        r#"WITH b AS (
               UPDATE workspace_builds
               SET provisioner_state = $16, updated_at = now(),
                   has_ai_task = $17, ai_task_sidebar_app_id = $18,
                   has_external_agent = $19,
                   deadline = CASE WHEN $20 THEN $21 ELSE deadline END,
                   max_deadline = CASE WHEN $20 THEN $22 ELSE max_deadline END
               WHERE job_id = $1 AND $15
               RETURNING workspace_id
           ), w AS (
               UPDATE workspaces w
               SET next_start_at = CASE WHEN $23 THEN w.next_start_at ELSE $24 END,
                   deleted = w.deleted OR $23,
                   updated_at = CASE WHEN $23 THEN now() ELSE w.updated_at END
               FROM b WHERE w.id = b.workspace_id AND ($23 OR w.next_start_at IS DISTINCT FROM $24)
           ), logs AS (
               INSERT INTO provisioner_job_logs (job_id, created_at, source, level, stage, output)
               SELECT $1, * FROM unnest($2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::text[])
           ), timings AS (
               INSERT INTO provisioner_job_timings (job_id, stage, source, action, resource, started_at, ended_at)
               SELECT $1, * FROM unnest($7::text[], $8::text[], $9::text[], $10::text[], $11::timestamptz[], $12::timestamptz[])
           ), candidate AS (
               SELECT head.id
               FROM unnest($26::text[]) AS p(provisioner)
               CROSS JOIN unnest($27::text[]) AS k(tags_key)
               CROSS JOIN LATERAL (
                   SELECT j.id, j.created_at
                   FROM provisioner_jobs j
                   WHERE j.organization_id = $25
                     AND j.provisioner = p.provisioner
                     AND j.tags_key = k.tags_key
                     AND j.started_at IS NULL
                     AND j.canceled_at IS NULL
                   ORDER BY j.created_at, j.id
                   LIMIT 1
                   FOR UPDATE SKIP LOCKED
               ) head
               ORDER BY head.created_at, head.id
               LIMIT 1
           ), claimed AS (
               UPDATE provisioner_jobs
               SET started_at = clock_timestamp(), updated_at = clock_timestamp(), worker_id = $28
               WHERE id = (SELECT id FROM candidate)
               RETURNING *
           )
           SELECT (SELECT count(pg_notify(n.channel, n.payload))
                   FROM unnest($13::text[], $14::text[]) AS n(channel, payload)) AS "sent!",
                  (SELECT to_jsonb(c) FROM claimed c) AS claimed"#,
        job,
        &log_created,
        &log_sources,
        &log_levels,
        &log_stages,
        &log_outputs,
        &stages,
        &sources,
        &actions,
        &resources,
        &started,
        &ended,
        &note_channels,
        &note_payloads,
        build.is_some(),
        build.as_ref().map(|b| b.state),
        build.as_ref().is_some_and(|b| b.has_ai_task),
        build.as_ref().and_then(|b| b.task_app),
        build.as_ref().is_some_and(|b| b.has_external_agent),
        deadlines.is_some(),
        deadlines.and_then(|d| d.deadline),
        deadlines.and_then(|d| d.max_deadline),
        build.as_ref().is_some_and(|b| b.delete),
        build.as_ref().and_then(|b| b.next_start_at),
        org,
        provisioners,
        tag_keys,
        worker
    )
    .fetch_one(&mut *tx)
    .await?;
    debug_assert_eq!(row.sent, note_channels.len() as i64);
    row.claimed
        .map(serde_json::from_value)
        .transpose()
        .map_err(|e| Error::Database(sqlx::Error::Decode(Box::new(e))))
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
        Ok(self
            .complete_job_and_claim(job, worker, completion, timings, logs, None)
            .await?
            .0)
    }

    /// [`Self::complete_job`], and when `next` is given and the result is recorded now, claims
    /// the next job for the same daemon in the same transaction: one commit and one round trip
    /// to the daemon for a result and the next job instead of two each.
    pub async fn complete_job_and_claim(
        &self,
        job: Uuid,
        worker: Uuid,
        completion: &Completion,
        timings: &[Timing],
        logs: &[JobLog],
        next: Option<&Claimant<'_>>,
    ) -> Result<(FinishOutcome, Option<JobRow>)> {
        self.complete_prepared_and_claim(job, worker, completion, timings, logs, next, None)
            .await
    }

    /// [`Self::complete_job_and_claim`] for a build whose schedule facts were read with its
    /// payload (`facts`): a build without resources or external agents is recorded by one
    /// statement, guarded on those facts (`prepared_completion`); anything else, or a guard
    /// that does not hold, goes through the transaction, which reads the facts again.
    #[expect(clippy::too_many_arguments)]
    pub async fn complete_prepared_and_claim(
        &self,
        job: Uuid,
        worker: Uuid,
        completion: &Completion,
        timings: &[Timing],
        logs: &[JobLog],
        next: Option<&Claimant<'_>>,
        facts: Option<&CompletionFacts>,
    ) -> Result<(FinishOutcome, Option<JobRow>)> {
        if let (
            Some(facts),
            Completion::Build {
                state,
                resources,
                features,
                external_tokens,
                schedule,
            },
        ) = (facts, completion)
            && resources.is_empty()
            && external_tokens.is_empty()
            && !features.has_external_agents
        {
            let build = PreparedBuild {
                state,
                features,
                facts,
                schedule,
            };
            let prepared = timed(
                "complete_job_prepared",
                self.complete_prepared(job, worker, &build, timings, logs, next),
            )
            .await?;
            if let Some(claimed) = prepared {
                return Ok((FinishOutcome::Recorded, claimed));
            }
        }
        timed("complete_job", async {
            let mut tx = self.jobs.begin().await?;
            let closed = match close_job(&mut tx, job, worker, None, None, logs).await? {
                Ok(closed) => closed,
                Err(outcome) => return Ok((outcome, None)),
            };
            let mut notes = Vec::new();
            let build = match completion {
                Completion::Import {
                    result,
                    start_resources,
                    stop_resources,
                    features,
                } => {
                    record_import(&mut tx, job, result).await?;
                    record_version_facts(&mut tx, job, features).await?;
                    insert_presets(&mut tx, job, &features.presets).await?;
                    let now = chrono::Utc::now();
                    // The stop rows after the start ones are in: a sub-agent id the start
                    // resources took is taken for the stop ones.
                    let start = TreeRows::of(&mut tx, start_resources).await?;
                    start.insert(&mut tx, job, "start", now).await?;
                    let stop = TreeRows::of(&mut tx, stop_resources).await?;
                    stop.insert(&mut tx, job, "stop", now).await?;
                    None
                }
                Completion::Build {
                    state,
                    resources,
                    features,
                    external_tokens,
                    schedule,
                } => {
                    let facts = closed.facts.ok_or(Error::NotFound)?;
                    let rows = TreeRows::of(&mut tx, resources).await?;
                    rows.insert(&mut tx, job, &facts.transition, chrono::Utc::now())
                        .await?;
                    record_external_tokens(&mut tx, job, external_tokens).await?;
                    if closed.follows_prebuild {
                        for agent in carry_claimed_agents(&mut tx, job).await? {
                            notes.push((channels::AGENT_UPDATED, agent.to_string()));
                        }
                    }
                    notes.push((channels::WORKSPACE_UPDATED, facts.workspace_id.to_string()));
                    let (deadlines, next_start_at) = schedule_of(&facts, schedule);
                    Some(BuildWrite {
                        state,
                        has_ai_task: !features.ai_tasks.is_empty(),
                        // The app an AI task names, as the provider knows it (it may be an
                        // app of a dev container's sub-agent).
                        task_app: features
                            .ai_tasks
                            .first()
                            .and_then(|task| rows.app_id(&task.app_id)),
                        has_external_agent: features.has_external_agents,
                        deadlines,
                        delete: facts.transition == "delete",
                        next_start_at,
                    })
                }
            };
            let claimed =
                record_tail(&mut tx, job, closed.logs, timings, notes, build, next).await?;
            tx.commit().await?;
            Ok((FinishOutcome::Recorded, claimed))
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
        Ok(self
            .fail_job_and_claim(job, worker, failure, logs, None)
            .await?
            .0)
    }

    /// [`Self::fail_job`], claiming the daemon's next job in the same transaction as
    /// [`Self::complete_job_and_claim`] does.
    pub async fn fail_job_and_claim(
        &self,
        job: Uuid,
        worker: Uuid,
        failure: &JobFailure,
        logs: &[JobLog],
        next: Option<&Claimant<'_>>,
    ) -> Result<(FinishOutcome, Option<JobRow>)> {
        timed("fail_job", async {
            let mut tx = self.jobs.begin().await?;
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
            let closed = match close_job(&mut tx, job, worker, error, code, logs).await? {
                Ok(closed) => closed,
                Err(outcome) => return Ok((outcome, None)),
            };
            let mut notes = Vec::new();
            if closed.kind == "workspace_build"
                && let Some(state) = &failure.state
            {
                let workspace = sqlx::query_scalar!(
                    "UPDATE workspace_builds SET provisioner_state = $2, updated_at = now() WHERE job_id = $1 RETURNING workspace_id",
                    job,
                    state
                )
                .fetch_one(&mut *tx)
                .await?;
                notes.push((channels::WORKSPACE_UPDATED, workspace.to_string()));
            }
            let claimed =
                record_tail(&mut tx, job, closed.logs, &failure.timings, notes, None, next)
                    .await?;
            tx.commit().await?;
            Ok((FinishOutcome::Recorded, claimed))
        })
        .await
    }
}
