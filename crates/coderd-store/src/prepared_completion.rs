//! A build's completion as one autocommit statement, prepared from the schedule facts read with
//! its payload: the job's close, the build's and the workspace's write (with the deadlines
//! coderd computed from those facts), the daemon's last log lines, the timings, the
//! notifications and the claim of the daemon's next job. One round trip instead of the
//! transaction's four (BEGIN, the close that reads the facts, the rest, COMMIT). Builds with
//! resources keep the transaction: measured in a transaction with the tree's insert (4 round
//! trips instead of 5), P2 came out no better and the statement waited on row locks (jobs6 notes).
//!
//! The statement is guarded: it writes nothing unless the job is this worker's and open, its
//! last lines fit under the log cap, the build does not follow a prebuild (whose agents it
//! would carry on) and the facts are still what the deadlines were computed from. Otherwise it
//! says so and the caller records the result with the transaction of `completion`, which reads
//! the facts again and knows every other case.
//!
//! Why the guard is exact under concurrency (READ COMMITTED, one statement):
//! - The workspace's facts (`ttl_ms`, `autostart_schedule`) are compared on its row locked
//!   `FOR NO KEY UPDATE` first thing: a writer that committed after the statement's snapshot is
//!   waited for and its row re-checked (PostgreSQL re-evaluates the conditions on the newest
//!   version), and no writer can change them until this statement commits. A TTL or autostart
//!   change is therefore either seen (the guard fails and the transaction uses the new facts) or
//!   ordered after this completion, as with the transaction path, which locks the same row.
//! - The template's settings are compared on the statement's snapshot, unlocked, exactly as the
//!   transaction path reads them in its close: a template change committed later is ordered
//!   after this build, in both paths (a template change does not touch builds' deadlines).
//! - A cancel, the hang detector's failure or a resend of the result race on the job's row:
//!   the close re-checks `worker_id` and `completed_at` on the newest version, and without the
//!   close nothing else is written (every other part depends on it).
//! - A concurrent build request sees this job open (and answers 409) or completed (and takes the
//!   next build number), never a half-written completion: the statement commits as a whole.
//! - The workspace row is locked before the job's and the build's; `set_ttl` locks the
//!   workspace before the latest build too, so the two cannot deadlock.

use chrono::{DateTime, Utc};
use codersdk::proto;
use codersdk::provisionerd::{JobLog, Timing};
use uuid::Uuid;

use super::completion::BuildSchedule;
use super::jobs::{Claimant, JobRow, MAX_JOB_LOGS_BYTES};
use super::lifecycle::{ScheduleFacts, schedule_of};
use super::prebuilds::PREBUILDS_USER_ID;
use super::{Error, Result, Store};
use crate::pubsub::channels;

/// The schedule facts a build's completion was prepared from (read with its payload).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompletionFacts(ScheduleFacts);

impl CompletionFacts {
    pub(super) fn of(facts: ScheduleFacts) -> Self {
        Self(facts)
    }
}

/// A successful build without resources or external agents, as the statement writes it.
pub(super) struct PreparedBuild<'a> {
    pub state: &'a [u8],
    pub features: &'a proto::TemplateFeatures,
    pub facts: &'a CompletionFacts,
    pub schedule: &'a BuildSchedule,
}

impl Store {
    /// Records a build's completion from the facts it was prepared from, and claims the
    /// daemon's next job when `next` is given, in one autocommit statement. `Ok(None)`: the
    /// guard did not hold and nothing was written.
    pub(super) async fn complete_prepared(
        &self,
        job: Uuid,
        worker: Uuid,
        build: &PreparedBuild<'_>,
        timings: &[Timing],
        logs: &[JobLog],
        next: Option<&Claimant<'_>>,
    ) -> Result<Option<Option<JobRow>>> {
        complete(&self.jobs, job, worker, build, None, timings, logs, next).await
    }
}

/// Records the build's completion and claims the daemon's next job (when `next` is given) in
/// one statement. `Ok(None)`: the guard did not hold and nothing was written. `task_app` is the
/// sidebar app of an AI task (always `None` without resources).
#[expect(clippy::too_many_arguments)]
async fn complete<'e, E: sqlx::PgExecutor<'e>>(
    executor: E,
    job: Uuid,
    worker: Uuid,
    build: &PreparedBuild<'_>,
    task_app: Option<Uuid>,
    timings: &[Timing],
    logs: &[JobLog],
    next: Option<&Claimant<'_>>,
) -> Result<Option<Option<JobRow>>> {
    let facts = &build.facts.0;
    let (deadlines, next_start_at) = schedule_of(facts, build.schedule);
    let log_bytes: i64 = logs.iter().map(|l| l.output.len() as i64).sum();
    let log_created: Vec<DateTime<Utc>> = logs.iter().map(|l| l.created_at).collect();
    let log_sources: Vec<String> = logs.iter().map(|l| l.source.as_str().to_string()).collect();
    let log_levels: Vec<String> = logs.iter().map(|l| l.level.as_str().to_string()).collect();
    let log_stages: Vec<String> = logs.iter().map(|l| l.stage.clone()).collect();
    // PostgreSQL text cannot hold NUL; a daemon's output may.
    let log_outputs: Vec<String> = logs.iter().map(|l| l.output.replace('\0', "")).collect();
    let stages: Vec<String> = timings.iter().map(|t| t.stage.clone()).collect();
    let sources: Vec<String> = timings.iter().map(|t| t.source.clone()).collect();
    let actions: Vec<String> = timings.iter().map(|t| t.action.clone()).collect();
    let resources: Vec<String> = timings.iter().map(|t| t.resource.clone()).collect();
    let started: Vec<DateTime<Utc>> = timings.iter().map(|t| t.started_at).collect();
    let ended: Vec<DateTime<Utc>> = timings.iter().map(|t| t.ended_at).collect();
    // The transaction path's notifications, in its order (their payloads are in the SQL).
    let note_channels = [
        channels::WORKSPACE_UPDATED,
        channels::JOB_UPDATED,
        channels::JOB_LOGS,
    ]
    .map(str::to_string);
    let (org, provisioners, tag_keys, next_worker) = match next {
        Some(c) => (Some(c.org), c.provisioners, c.tag_keys, Some(c.worker)),
        None => (None, &[][..], &[][..], None),
    };
    // `guard` runs first (`closed` reads it) and locks the workspace row; every write reads
    // `closed`, so a guard that fails, or a job that is not this worker's open one, writes
    // nothing, sends no notification and claims nothing. The claim is the acquire statement's
    // (`jobs::claim_job`): keep the two alike. `w` writes the workspace only when something
    // changes: an update that changes nothing still writes a new row version, and on a full
    // page a new entry in each of the table's indexes (seven WAL records for a no-op). The
    // row is locked by `guard`, so the test reads its newest version.
    let row = sqlx::query!(
        r#"WITH guard AS (
               SELECT b.id
               FROM workspace_builds b
               JOIN workspaces w ON w.id = b.workspace_id
               JOIN templates t ON t.id = w.template_id
               WHERE b.job_id = $1 AND b.workspace_id = $16 AND b.transition = $17
                 AND w.ttl_ms IS NOT DISTINCT FROM $18
                 AND w.autostart_schedule IS NOT DISTINCT FROM $19
                 AND t.default_ttl_ms = $20 AND t.allow_user_autostop = $21
                 AND t.allow_user_autostart = $22 AND t.autostop_requirement_days_of_week = $23
                 AND t.autostop_requirement_weeks = $24 AND t.autostart_allowed_days = $25
                 AND NOT EXISTS (SELECT 1 FROM workspace_builds ob
                                 WHERE ob.workspace_id = b.workspace_id
                                   AND ob.build_number = b.build_number - 1
                                   AND ob.initiator_id = $26 AND ob.transition = 'start')
               FOR NO KEY UPDATE OF w
           ), closed AS (
               UPDATE provisioner_jobs j
               SET completed_at = now(), updated_at = now(), error = NULL, error_code = NULL,
                   logs_length = (j.logs_length + $14::int8)::int4
               FROM guard
               WHERE j.id = $1 AND j.worker_id = $2 AND j.completed_at IS NULL
                 AND NOT j.logs_overflowed AND j.logs_length::int8 + $14::int8 <= $15::int8
               RETURNING j.id, guard.id AS build_id
           ), b AS (
               UPDATE workspace_builds b
               SET provisioner_state = $27, updated_at = now(), has_ai_task = $28,
                   ai_task_sidebar_app_id = $39, has_external_agent = false,
                   deadline = CASE WHEN $29 THEN $30 ELSE b.deadline END,
                   max_deadline = CASE WHEN $29 THEN $31 ELSE b.max_deadline END
               FROM closed
               WHERE b.id = closed.build_id
               RETURNING b.workspace_id
           ), w AS (
               UPDATE workspaces w
               SET next_start_at = CASE WHEN $32 THEN w.next_start_at ELSE $33 END,
                   deleted = w.deleted OR $32,
                   updated_at = CASE WHEN $32 THEN now() ELSE w.updated_at END
               FROM b WHERE w.id = b.workspace_id AND ($32 OR w.next_start_at IS DISTINCT FROM $33)
           ), logs AS (
               INSERT INTO provisioner_job_logs (job_id, created_at, source, level, stage, output)
               SELECT closed.id, l.* FROM closed
               CROSS JOIN unnest($3::timestamptz[], $4::text[], $5::text[], $6::text[], $7::text[]) l
           ), timings AS (
               INSERT INTO provisioner_job_timings (job_id, stage, source, action, resource, started_at, ended_at)
               SELECT closed.id, t.* FROM closed
               CROSS JOIN unnest($8::text[], $9::text[], $10::text[], $11::text[], $12::timestamptz[], $13::timestamptz[]) t
           ), candidate AS (
               SELECT head.id
               FROM unnest($36::text[]) AS p(provisioner)
               CROSS JOIN unnest($37::text[]) AS k(tags_key)
               CROSS JOIN LATERAL (
                   SELECT j.id, j.created_at
                   FROM provisioner_jobs j
                   WHERE j.organization_id = $35
                     AND j.provisioner = p.provisioner
                     AND j.tags_key = k.tags_key
                     AND j.started_at IS NULL
                     AND j.canceled_at IS NULL
                   ORDER BY j.created_at, j.id
                   LIMIT 1
                   FOR UPDATE SKIP LOCKED
               ) head
               WHERE EXISTS (SELECT 1 FROM closed)
               ORDER BY head.created_at, head.id
               LIMIT 1
           ), claimed AS (
               UPDATE provisioner_jobs
               SET started_at = clock_timestamp(), updated_at = clock_timestamp(), worker_id = $38
               WHERE id = (SELECT id FROM candidate)
               RETURNING *
           )
           SELECT EXISTS (SELECT 1 FROM closed) AS "recorded!",
                  (SELECT count(pg_notify(n.channel, n.payload))
                   FROM unnest($34::text[], ARRAY[$16::uuid::text, $1::uuid::text, $1::uuid::text])
                        AS n(channel, payload)
                   WHERE EXISTS (SELECT 1 FROM closed)) AS "sent!",
                  (SELECT to_jsonb(c) FROM claimed c) AS claimed"#,
        job,
        worker,
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
        log_bytes,
        i64::from(MAX_JOB_LOGS_BYTES),
        facts.workspace_id,
        facts.transition,
        facts.ttl_ms,
        facts.autostart_schedule,
        facts.default_ttl_ms,
        facts.allow_user_autostop,
        facts.allow_user_autostart,
        facts.autostop_requirement_days_of_week,
        facts.autostop_requirement_weeks,
        facts.autostart_allowed_days,
        PREBUILDS_USER_ID,
        build.state,
        !build.features.ai_tasks.is_empty(),
        deadlines.is_some(),
        deadlines.and_then(|d| d.deadline),
        deadlines.and_then(|d| d.max_deadline),
        facts.transition == "delete",
        next_start_at,
        &note_channels,
        org,
        provisioners,
        tag_keys,
        next_worker,
        task_app
    )
    .fetch_one(executor)
    .await?;
    if !row.recorded {
        return Ok(None);
    }
    debug_assert_eq!(row.sent, note_channels.len() as i64);
    let claimed = row
        .claimed
        .map(serde_json::from_value)
        .transpose()
        .map_err(|e| Error::Database(sqlx::Error::Decode(Box::new(e))))?;
    Ok(Some(claimed))
}
