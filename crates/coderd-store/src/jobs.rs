//! `provisioner_jobs` and their logs: the queue.
//!
//! Acquisition is one statement: for each tag set the daemon accepts (its canonical key) and
//! each provisioner it runs, take the oldest pending job of that key through the partial
//! pending index, skip rows another daemon has locked, and claim the oldest of those heads.
//! Jobs whose tags nobody matches are never touched, however many there are.

use chrono::{DateTime, Utc};
use codersdk::provisionerd::JobLog;
use serde_json::Value;
use uuid::Uuid;

use super::{Result, Store, timed};
use crate::pubsub::channels;

/// Queue positions and sizes are counted up to this many jobs.
pub const QUEUE_COUNT_CAP: i64 = 10_000;

/// Most bytes of log output kept per job; later lines are dropped and the job flagged.
pub const MAX_JOB_LOGS_BYTES: i32 = 1 << 20;

/// Deserialize: a completion's claim returns the claimed row as JSON.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
pub struct JobRow {
    pub id: Uuid,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub canceled_at: Option<DateTime<Utc>>,
    pub completed_at: Option<DateTime<Utc>>,
    pub error: Option<String>,
    pub error_code: Option<String>,
    pub organization_id: Uuid,
    pub initiator_id: Uuid,
    pub provisioner: String,
    pub storage_method: String,
    pub file_id: Uuid,
    pub r#type: String,
    pub input: Value,
    pub worker_id: Option<Uuid>,
    pub tags: Value,
    pub tags_key: String,
    pub logs_length: i32,
    pub logs_overflowed: bool,
}

#[cfg(any(test, feature = "testing"))]
impl JobRow {
    /// A pending echo build job created at `at`, for unit tests (here and in the crates above)
    /// to adjust.
    pub fn pending_build(at: DateTime<Utc>) -> Self {
        Self {
            id: Uuid::new_v4(),
            created_at: at,
            updated_at: at,
            started_at: None,
            canceled_at: None,
            completed_at: None,
            error: None,
            error_code: None,
            organization_id: Uuid::new_v4(),
            initiator_id: Uuid::new_v4(),
            provisioner: "echo".into(),
            storage_method: "file".into(),
            file_id: Uuid::new_v4(),
            r#type: "workspace_build".into(),
            input: Value::Null,
            worker_id: None,
            tags: Value::Null,
            tags_key: String::new(),
            logs_length: 0,
            logs_overflowed: false,
        }
    }
}

/// A job to enqueue.
#[derive(Debug, Clone)]
pub struct NewJob {
    pub id: Uuid,
    pub organization_id: Uuid,
    pub initiator_id: Uuid,
    pub provisioner: String,
    pub file_id: Uuid,
    pub job_type: &'static str,
    pub input: Value,
    pub tags: Value,
    pub tags_key: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRow {
    pub id: i64,
    pub job_id: Uuid,
    pub created_at: DateTime<Utc>,
    pub source: String,
    pub level: String,
    pub stage: String,
    pub output: String,
}

/// What became of an update from a daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateOutcome {
    /// Recorded; `canceled` says whether cancellation was requested.
    Accepted { canceled: bool },
    /// The job is not (or no longer) this daemon's to update.
    Gone,
}

/// What became of a job its daemon handed back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReleaseOutcome {
    /// Pending again, at its old place in the queue, and announced (`JOB_REQUEUED`).
    Requeued,
    /// Cancelled meanwhile: the caller ends it as cancelled instead.
    Canceled,
    /// Not this daemon's (any more).
    NotHeld,
}

/// Inserts a job row and announces it, inside the caller's transaction.
pub(crate) async fn insert_job(
    tx: &mut sqlx::PgConnection,
    job: &NewJob,
    now: DateTime<Utc>,
) -> Result<JobRow> {
    let row = sqlx::query_as!(
        JobRow,
        r#"INSERT INTO provisioner_jobs (id, created_at, updated_at, organization_id, initiator_id,
               provisioner, file_id, type, input, tags, tags_key)
           VALUES ($1, $2, $2, $3, $4, $5, $6, $7, $8, $9, $10)
           RETURNING *"#,
        job.id,
        now,
        job.organization_id,
        job.initiator_id,
        job.provisioner,
        job.file_id,
        job.job_type,
        job.input,
        job.tags,
        job.tags_key,
    )
    .fetch_one(&mut *tx)
    .await?;
    let payload = format!(
        "{}:{}:{}:{}",
        job.organization_id, job.id, job.provisioner, job.tags_key
    );
    sqlx::query!("SELECT pg_notify($1, $2)", channels::JOB_POSTED, payload)
        .execute(&mut *tx)
        .await?;
    Ok(row)
}

pub(crate) async fn notify(
    tx: &mut sqlx::PgConnection,
    channel: &str,
    payload: String,
) -> Result<()> {
    sqlx::query!("SELECT pg_notify($1, $2)", channel, payload)
        .execute(&mut *tx)
        .await?;
    Ok(())
}

impl Store {
    pub async fn job_by_id(&self, id: Uuid) -> Result<JobRow> {
        timed("job_by_id", async {
            Ok(
                sqlx::query_as!(JobRow, "SELECT * FROM provisioner_jobs WHERE id = $1", id)
                    .fetch_one(&self.pool)
                    .await?,
            )
        })
        .await
    }

    pub async fn jobs_by_ids(&self, ids: &[Uuid]) -> Result<Vec<JobRow>> {
        timed("jobs_by_ids", async {
            Ok(sqlx::query_as!(
                JobRow,
                "SELECT * FROM provisioner_jobs WHERE id = ANY($1)",
                ids
            )
            .fetch_all(&self.pool)
            .await?)
        })
        .await
    }

    /// Claims the oldest pending job `worker` may take, if any (on the job path's pool: its
    /// array parameters get the generic plan).
    pub async fn acquire_job(
        &self,
        org: Uuid,
        provisioners: &[String],
        tag_keys: &[String],
        worker: Uuid,
    ) -> Result<Option<JobRow>> {
        timed("acquire_job", async {
            claim_job(
                &self.jobs,
                &Claimant {
                    org,
                    provisioners,
                    tag_keys,
                    worker,
                },
            )
            .await
        })
        .await
    }

    /// Records a running job's progress: its heartbeat and any new log lines (up to the cap),
    /// serialised per job by the row lock so log ids grow in commit order.
    pub async fn update_job(
        &self,
        job: Uuid,
        worker: Uuid,
        logs: &[JobLog],
    ) -> Result<UpdateOutcome> {
        timed("update_job", async {
            let mut tx = self.pool.begin().await?;
            let Some(row) = sqlx::query!(
                r#"SELECT logs_length, logs_overflowed, canceled_at IS NOT NULL AS "canceled!"
                   FROM provisioner_jobs
                   WHERE id = $1 AND worker_id = $2 AND completed_at IS NULL
                   FOR UPDATE"#,
                job,
                worker
            )
            .fetch_optional(&mut *tx)
            .await?
            else {
                return Ok(UpdateOutcome::Gone);
            };
            let (kept, bytes, overflowed) = fit_logs(logs, row.logs_length, row.logs_overflowed);
            if !kept.is_empty() {
                insert_logs(&mut tx, job, kept).await?;
            }
            sqlx::query!(
                r#"UPDATE provisioner_jobs
                   SET updated_at = now(), logs_length = logs_length + $2, logs_overflowed = $3
                   WHERE id = $1"#,
                job,
                bytes,
                overflowed
            )
            .execute(&mut *tx)
            .await?;
            if !kept.is_empty() {
                notify(&mut tx, channels::JOB_LOGS, job.to_string()).await?;
            }
            tx.commit().await?;
            Ok(UpdateOutcome::Accepted {
                canceled: row.canceled,
            })
        })
        .await
    }

    /// Puts a job that `worker` holds back in the queue, untouched by the attempt but for its
    /// log lines: the daemon stopped before the job changed anything. It keeps its creation
    /// time, so it is the next job for a matching daemon. The notification wakes daemons of
    /// processes that never saw the job; one that did (every process that heard its first
    /// posting) drops it as a repeat, so the caller dispatches it here too.
    pub async fn release_job(
        &self,
        job: Uuid,
        worker: Uuid,
        logs: &[JobLog],
    ) -> Result<ReleaseOutcome> {
        timed("release_job", async {
            let mut tx = self.pool.begin().await?;
            let Some(row) = sqlx::query!(
                r#"SELECT organization_id, provisioner, tags_key, logs_length, logs_overflowed,
                          canceled_at IS NOT NULL AS "canceled!"
                   FROM provisioner_jobs
                   WHERE id = $1 AND worker_id = $2 AND completed_at IS NULL
                   FOR UPDATE"#,
                job,
                worker
            )
            .fetch_optional(&mut *tx)
            .await?
            else {
                return Ok(ReleaseOutcome::NotHeld);
            };
            if row.canceled {
                return Ok(ReleaseOutcome::Canceled);
            }
            let (kept, bytes, overflowed) = fit_logs(logs, row.logs_length, row.logs_overflowed);
            if !kept.is_empty() {
                insert_logs(&mut tx, job, kept).await?;
            }
            sqlx::query!(
                r#"UPDATE provisioner_jobs
                   SET started_at = NULL, worker_id = NULL, updated_at = now(),
                       logs_length = logs_length + $2, logs_overflowed = $3
                   WHERE id = $1"#,
                job,
                bytes,
                overflowed
            )
            .execute(&mut *tx)
            .await?;
            let posted = format!(
                "{}:{}:{}:{}",
                row.organization_id, job, row.provisioner, row.tags_key
            );
            notify(&mut tx, channels::JOB_REQUEUED, posted).await?;
            notify(&mut tx, channels::JOB_UPDATED, job.to_string()).await?;
            notify(&mut tx, channels::JOB_LOGS, job.to_string()).await?;
            tx.commit().await?;
            Ok(ReleaseOutcome::Requeued)
        })
        .await
    }

    /// Lines a job logged after `after`, in order.
    pub async fn job_logs_after(&self, job: Uuid, after: i64) -> Result<Vec<LogRow>> {
        timed("job_logs_after", async {
            Ok(sqlx::query_as!(
                LogRow,
                "SELECT * FROM provisioner_job_logs WHERE job_id = $1 AND id > $2 ORDER BY id",
                job,
                after
            )
            .fetch_all(&self.pool)
            .await?)
        })
        .await
    }

    /// Requests cancellation: a pending job is cancelled at once (never picked afterwards), a
    /// running one is flagged and its daemon told. Returns the job as it now is, or `None` when
    /// it had already completed.
    pub async fn cancel_job(&self, job: Uuid) -> Result<Option<JobRow>> {
        timed("cancel_job", async {
            let mut tx = self.pool.begin().await?;
            let row = sqlx::query_as!(
                JobRow,
                r#"UPDATE provisioner_jobs
                   SET canceled_at = COALESCE(canceled_at, now()),
                       completed_at = CASE WHEN started_at IS NULL THEN now() ELSE completed_at END,
                       updated_at = now()
                   WHERE id = $1 AND completed_at IS NULL
                   RETURNING *"#,
                job
            )
            .fetch_optional(&mut *tx)
            .await?;
            if row.is_some() {
                notify(&mut tx, channels::JOB_UPDATED, job.to_string()).await?;
                notify(&mut tx, channels::JOB_LOGS, job.to_string()).await?;
            }
            tx.commit().await?;
            Ok(row)
        })
        .await
    }

    /// Fails running jobs whose heartbeat is older than `stale_after`, writing `reason` into
    /// each job's logs. Builds keep the state they started with. Safe to run on every replica:
    /// each job is failed once.
    pub async fn fail_stale_jobs(
        &self,
        stale_after: std::time::Duration,
        reason: &str,
    ) -> Result<Vec<JobRow>> {
        timed("fail_stale_jobs", async {
            let seconds = stale_after.as_secs_f64();
            let mut tx = self.pool.begin().await?;
            // `worker_id IS NOT NULL` adds nothing to `started_at IS NOT NULL` (the two are set
            // and cleared together) but matches the predicate of `provisioner_jobs_running`, so
            // the scan reads the running jobs' entries only, not the table.
            let rows = sqlx::query_as!(
                JobRow,
                r#"UPDATE provisioner_jobs
                   SET completed_at = now(), updated_at = now(), error = $2, error_code = 'daemon_lost'
                   WHERE id IN (
                       SELECT id FROM provisioner_jobs
                       WHERE started_at IS NOT NULL AND completed_at IS NULL
                         AND worker_id IS NOT NULL
                         AND updated_at < now() - make_interval(secs => $1)
                       FOR UPDATE SKIP LOCKED)
                   RETURNING *"#,
                seconds,
                reason
            )
            .fetch_all(&mut *tx)
            .await?;
            for job in &rows {
                let line = JobLog {
                    created_at: Utc::now(),
                    source: codersdk::provisionerd::LogSource::ProvisionerDaemon,
                    level: codersdk::provisionerd::LogLevel::Error,
                    stage: "Cleaning Up".into(),
                    output: reason.into(),
                };
                insert_logs(&mut tx, job.id, std::slice::from_ref(&line)).await?;
                notify(&mut tx, channels::JOB_UPDATED, job.id.to_string()).await?;
                notify(&mut tx, channels::JOB_LOGS, job.id.to_string()).await?;
            }
            tx.commit().await?;
            Ok(rows)
        })
        .await
    }

    /// Jobs of `org`, newest first, optionally only those with the given derived statuses.
    pub async fn list_jobs(
        &self,
        org: Uuid,
        statuses: &[String],
        limit: i64,
    ) -> Result<Vec<JobRow>> {
        timed("list_jobs", async {
            Ok(sqlx::query_as!(
                JobRow,
                r#"SELECT * FROM provisioner_jobs
                   WHERE organization_id = $1
                     AND (cardinality($2::text[]) = 0 OR (CASE
                            WHEN completed_at IS NOT NULL AND error IS NOT NULL THEN 'failed'
                            WHEN completed_at IS NOT NULL AND canceled_at IS NOT NULL THEN 'canceled'
                            WHEN completed_at IS NOT NULL THEN 'succeeded'
                            WHEN canceled_at IS NOT NULL THEN 'canceling'
                            WHEN started_at IS NULL THEN 'pending'
                            ELSE 'running' END) = ANY($2))
                   ORDER BY created_at DESC
                   LIMIT $3"#,
                org,
                statuses,
                limit
            )
            .fetch_all(&self.pool)
            .await?)
        })
        .await
    }

    /// (position, size) of a pending job among pending jobs with the same tags and provisioner,
    /// each counted up to [`QUEUE_COUNT_CAP`]. Both counts walk the pending index in its order and
    /// stop at the cap: a plain count let the cached generic plan (which cannot tell a key with
    /// three pending jobs from one with fifty thousand) choose a sequential scan of all jobs.
    pub async fn queue_position(&self, job: &JobRow) -> Result<(i64, i64)> {
        timed("queue_position", async {
            let r = sqlx::query!(
                r#"SELECT
                     (SELECT count(*) FROM (
                        SELECT 1 FROM provisioner_jobs
                        WHERE organization_id = $1 AND provisioner = $2 AND tags_key = $3
                          AND started_at IS NULL AND canceled_at IS NULL
                          AND (created_at, id) < ($4, $5)
                        ORDER BY created_at, id
                        LIMIT $6) ahead) AS "ahead!",
                     (SELECT count(*) FROM (
                        SELECT 1 FROM provisioner_jobs
                        WHERE organization_id = $1 AND provisioner = $2 AND tags_key = $3
                          AND started_at IS NULL AND canceled_at IS NULL
                        ORDER BY created_at, id
                        LIMIT $6) size) AS "size!""#,
                job.organization_id,
                job.provisioner,
                job.tags_key,
                job.created_at,
                job.id,
                QUEUE_COUNT_CAP
            )
            .fetch_one(&self.pool)
            .await?;
            Ok((r.ahead + 1, r.size))
        })
        .await
    }

    /// The job a daemon holds, if any.
    pub async fn current_job_of(&self, worker: Uuid) -> Result<Option<JobRow>> {
        timed("current_job_of", async {
            Ok(sqlx::query_as!(
                JobRow,
                "SELECT * FROM provisioner_jobs WHERE worker_id = $1 AND completed_at IS NULL",
                worker
            )
            .fetch_optional(&self.pool)
            .await?)
        })
        .await
    }

    /// The last job a daemon finished.
    pub async fn previous_job_of(&self, worker: Uuid) -> Result<Option<JobRow>> {
        timed("previous_job_of", async {
            Ok(sqlx::query_as!(
                JobRow,
                r#"SELECT * FROM provisioner_jobs WHERE worker_id = $1 AND completed_at IS NOT NULL
                   ORDER BY completed_at DESC LIMIT 1"#,
                worker
            )
            .fetch_optional(&self.pool)
            .await?)
        })
        .await
    }
}

/// Who claims a job, and which jobs it can take.
#[derive(Debug, Clone, Copy)]
pub struct Claimant<'a> {
    pub org: Uuid,
    pub provisioners: &'a [String],
    pub tag_keys: &'a [String],
    pub worker: Uuid,
}

/// The acquire statement: for each (provisioner, tag key) the daemon accepts, the oldest
/// pending job of that key through the partial pending index (locked rows skipped), and of
/// those heads the oldest, claimed for `worker`. A completion whose daemon said it is idle after
/// it claims with the same query in its last statement (`completion::record_tail`): keep the
/// two alike. `started_at` is the claim's own time (`clock_timestamp()`): inside a transaction
/// `now()` is when the transaction began, which may be before the claimed job was even created.
pub(super) async fn claim_job<'e, E: sqlx::PgExecutor<'e>>(
    executor: E,
    claimant: &Claimant<'_>,
) -> Result<Option<JobRow>> {
    Ok(sqlx::query_as!(
        JobRow,
        r#"WITH candidate AS (
                       SELECT head.id
                       FROM unnest($2::text[]) AS p(provisioner)
                       CROSS JOIN unnest($3::text[]) AS k(tags_key)
                       CROSS JOIN LATERAL (
                           SELECT j.id, j.created_at
                           FROM provisioner_jobs j
                           WHERE j.organization_id = $1
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
                   )
                   UPDATE provisioner_jobs
                   SET started_at = clock_timestamp(), updated_at = clock_timestamp(), worker_id = $4
                   WHERE id = (SELECT id FROM candidate)
                   RETURNING *"#,
        claimant.org,
        claimant.provisioners,
        claimant.tag_keys,
        claimant.worker,
    )
    .fetch_optional(executor)
    .await?)
}

/// Which of `logs` fit under the per-job cap, their size, and whether the job now overflows.
pub(super) fn fit_logs(logs: &[JobLog], length: i32, overflowed: bool) -> (&[JobLog], i32, bool) {
    if overflowed {
        return (&[], 0, true);
    }
    let mut total = 0i32;
    for (i, log) in logs.iter().enumerate() {
        let size = i32::try_from(log.output.len()).unwrap_or(i32::MAX);
        if length.saturating_add(total).saturating_add(size) > MAX_JOB_LOGS_BYTES {
            return (&logs[..i], total, true);
        }
        total += size;
    }
    (logs, total, false)
}

async fn insert_logs(tx: &mut sqlx::PgConnection, job: Uuid, logs: &[JobLog]) -> Result<()> {
    let created: Vec<DateTime<Utc>> = logs.iter().map(|l| l.created_at).collect();
    let sources: Vec<String> = logs.iter().map(|l| l.source.as_str().to_string()).collect();
    let levels: Vec<String> = logs.iter().map(|l| l.level.as_str().to_string()).collect();
    let stages: Vec<String> = logs.iter().map(|l| l.stage.clone()).collect();
    // PostgreSQL text cannot hold NUL; a daemon's output may.
    let outputs: Vec<String> = logs.iter().map(|l| l.output.replace('\0', "")).collect();
    sqlx::query!(
        r#"INSERT INTO provisioner_job_logs (job_id, created_at, source, level, stage, output)
           SELECT $1, * FROM unnest($2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::text[])"#,
        job,
        &created,
        &sources,
        &levels,
        &stages,
        &outputs
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(n: usize) -> JobLog {
        JobLog {
            created_at: Utc::now(),
            source: Default::default(),
            level: Default::default(),
            stage: String::new(),
            output: "x".repeat(n),
        }
    }

    #[test]
    fn logs_are_cut_at_the_cap() {
        let logs = vec![line(10), line(10), line(10)];
        assert_eq!(fit_logs(&logs, 0, false), (&logs[..], 30, false));
        let (kept, bytes, over) = fit_logs(&logs, MAX_JOB_LOGS_BYTES - 25, false);
        assert_eq!((kept.len(), bytes, over), (2, 20, true));
        assert_eq!(
            fit_logs(&logs, 0, true).0.len(),
            0,
            "nothing after overflow"
        );
    }
}

/// The template a job belongs to: (name, display name, icon).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobTemplate {
    pub name: String,
    pub display_name: String,
    pub icon: String,
}

impl Store {
    pub async fn job_template(&self, job: Uuid) -> Result<JobTemplate> {
        timed("job_template", async {
            let row = sqlx::query!(
                r#"SELECT t.name AS "name?", t.display_name AS "display_name?", t.icon AS "icon?"
                   FROM provisioner_jobs j
                   LEFT JOIN template_versions v ON v.job_id = j.id
                   LEFT JOIN workspace_builds b ON b.job_id = j.id
                   LEFT JOIN template_versions bv ON bv.id = b.template_version_id
                   LEFT JOIN templates t ON t.id = COALESCE(v.template_id, bv.template_id)
                   WHERE j.id = $1"#,
                job
            )
            .fetch_optional(&self.pool)
            .await?;
            Ok(row
                .map(|r| JobTemplate {
                    name: r.name.unwrap_or_default(),
                    display_name: r.display_name.unwrap_or_default(),
                    icon: r.icon.unwrap_or_default(),
                })
                .unwrap_or_default())
        })
        .await
    }
}
