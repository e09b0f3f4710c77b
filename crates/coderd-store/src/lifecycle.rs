//! Workspace schedules and dormancy, and the lifecycle executor's queries: which workspaces are
//! due, and the conditional writes that make its decisions safe with several replicas.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::completion::BuildSchedule;
use super::jobs::notify;
use super::{NewAuditLog, Result, Store, audit, timed};
use crate::pubsub::channels;
use coderd_schedule::{Autostop, Schedule, TemplatePolicy, autostop};

/// p50 and p95 of a template's recent build times for one transition, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuildTimes {
    pub p50: i64,
    pub p95: i64,
}

/// Builds counted for `build_time_stats`: the most recent successful ones of each transition
/// within this window.
const BUILD_TIME_SAMPLE: i64 = 100;

impl Store {
    /// Workspaces with something for the executor to decide at `now`: an autostart due, a
    /// deadline passed, a failed start past the template's failure TTL, unused past the
    /// dormancy threshold, dormant but running, or dormant past the deletion threshold. Only
    /// workspaces whose latest build has finished; the executor re-reads each one before
    /// acting.
    pub async fn lifecycle_candidates(&self, now: DateTime<Utc>) -> Result<Vec<Uuid>> {
        timed("lifecycle_candidates", async {
            Ok(sqlx::query_scalar!(
                r#"SELECT w.id
                   FROM workspaces w
                   JOIN templates t ON t.id = w.template_id
                   JOIN LATERAL (
                       SELECT b.transition, b.deadline, j.completed_at, j.error, j.canceled_at
                       FROM workspace_builds b JOIN provisioner_jobs j ON j.id = b.job_id
                       WHERE b.workspace_id = w.id ORDER BY b.build_number DESC LIMIT 1
                   ) lb ON true
                   -- Prebuilds are the prebuilds reconciler's until claimed.
                   WHERE NOT w.deleted AND w.owner_id <> $2 AND lb.completed_at IS NOT NULL AND (
                       (lb.transition = 'stop' AND lb.error IS NULL AND lb.canceled_at IS NULL
                        AND w.dormant_at IS NULL AND w.next_start_at <= $1)
                    OR (lb.transition = 'start' AND lb.error IS NULL AND lb.canceled_at IS NULL
                        AND (lb.deadline <= $1 OR w.dormant_at IS NOT NULL))
                    OR (lb.transition = 'start' AND lb.error IS NOT NULL AND t.failure_ttl_ms > 0
                        AND lb.completed_at + t.failure_ttl_ms * interval '1 millisecond' <= $1)
                    OR (w.dormant_at IS NULL AND t.time_til_dormant_ms > 0
                        AND w.last_used_at + t.time_til_dormant_ms * interval '1 millisecond' <= $1)
                    OR (w.dormant_at IS NOT NULL AND t.time_til_dormant_autodelete_ms > 0
                        AND w.dormant_at + t.time_til_dormant_autodelete_ms * interval '1 millisecond' <= $1
                        AND (lb.transition <> 'delete'
                             OR lb.completed_at + interval '1 day' <= $1))
                   )
                   ORDER BY w.id"#,
                now,
                super::PREBUILDS_USER_ID
            )
            .fetch_all(&self.pool)
            .await?)
        })
        .await
    }

    /// Sets (or clears) the autostart schedule and the next autostart it gives.
    pub async fn set_autostart(
        &self,
        workspace: Uuid,
        schedule: Option<&str>,
        next_start_at: Option<DateTime<Utc>>,
        log: Option<&NewAuditLog>,
    ) -> Result<()> {
        timed("set_autostart", async {
            let mut tx = self.pool.begin().await?;
            sqlx::query!(
                r#"UPDATE workspaces SET autostart_schedule = $2, next_start_at = $3,
                       updated_at = now()
                   WHERE id = $1 AND NOT deleted"#,
                workspace,
                schedule,
                next_start_at
            )
            .execute(&mut *tx)
            .await?;
            audit::append(&mut tx, log).await?;
            notify(&mut tx, channels::WORKSPACE_UPDATED, workspace.to_string()).await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    /// Sets (or clears) the time to live. Clearing it also clears the running build's
    /// deadline, down to its max deadline (which the template imposes, not the user).
    pub async fn set_ttl(
        &self,
        workspace: Uuid,
        ttl_ms: Option<i64>,
        log: Option<&NewAuditLog>,
    ) -> Result<()> {
        timed("set_ttl", async {
            let mut tx = self.pool.begin().await?;
            sqlx::query!(
                "UPDATE workspaces SET ttl_ms = $2, updated_at = now() WHERE id = $1 AND NOT deleted",
                workspace,
                ttl_ms
            )
            .execute(&mut *tx)
            .await?;
            if ttl_ms.is_none() {
                sqlx::query!(
                    r#"UPDATE workspace_builds SET deadline = max_deadline, updated_at = now()
                       WHERE id = (SELECT id FROM workspace_builds WHERE workspace_id = $1
                                   ORDER BY build_number DESC LIMIT 1)
                         AND transition = 'start'"#,
                    workspace
                )
                .execute(&mut *tx)
                .await?;
            }
            audit::append(&mut tx, log).await?;
            notify(&mut tx, channels::WORKSPACE_UPDATED, workspace.to_string()).await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    /// Moves a build's deadline, if it is still its workspace's latest build. Returns whether
    /// it was.
    pub async fn set_deadline(
        &self,
        workspace: Uuid,
        build: Uuid,
        deadline: DateTime<Utc>,
    ) -> Result<bool> {
        timed("set_deadline", async {
            let mut tx = self.pool.begin().await?;
            let updated = sqlx::query!(
                r#"UPDATE workspace_builds SET deadline = $3, updated_at = now()
                   WHERE id = $2 AND id = (SELECT id FROM workspace_builds WHERE workspace_id = $1
                                           ORDER BY build_number DESC LIMIT 1)"#,
                workspace,
                build,
                deadline
            )
            .execute(&mut *tx)
            .await?
            .rows_affected();
            notify(&mut tx, channels::WORKSPACE_UPDATED, workspace.to_string()).await?;
            tx.commit().await?;
            Ok(updated == 1)
        })
        .await
    }

    /// Makes a workspace dormant (`Some(at)`) or active (`None`); activating counts as a use,
    /// so the workspace does not fall dormant again on the next tick. Returns whether anything
    /// changed.
    pub async fn set_dormant(
        &self,
        workspace: Uuid,
        at: Option<DateTime<Utc>>,
        log: Option<&NewAuditLog>,
    ) -> Result<bool> {
        timed("set_dormant", async {
            let mut tx = self.pool.begin().await?;
            let changed = sqlx::query!(
                r#"UPDATE workspaces
                   SET dormant_at = $2,
                       last_used_at = CASE WHEN $2::timestamptz IS NULL THEN now() ELSE last_used_at END,
                       updated_at = now()
                   WHERE id = $1 AND NOT deleted AND (dormant_at IS NULL) = ($2::timestamptz IS NOT NULL)"#,
                workspace,
                at
            )
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if changed == 1 {
                audit::append(&mut tx, log).await?;
            }
            notify(&mut tx, channels::WORKSPACE_UPDATED, workspace.to_string()).await?;
            tx.commit().await?;
            Ok(changed == 1)
        })
        .await
    }

    /// The executor's dormancy mark: only if the workspace is still active and still unused
    /// since `unused_since`, so two replicas (or a use in between) cannot both decide it.
    pub async fn mark_dormant(
        &self,
        workspace: Uuid,
        at: DateTime<Utc>,
        unused_since: DateTime<Utc>,
    ) -> Result<bool> {
        timed("mark_dormant", async {
            let mut tx = self.pool.begin().await?;
            let changed = sqlx::query!(
                r#"UPDATE workspaces SET dormant_at = $2, updated_at = now()
                   WHERE id = $1 AND NOT deleted AND dormant_at IS NULL AND last_used_at <= $3"#,
                workspace,
                at,
                unused_since
            )
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if changed == 1 {
                notify(&mut tx, channels::WORKSPACE_UPDATED, workspace.to_string()).await?;
            }
            tx.commit().await?;
            Ok(changed == 1)
        })
        .await
    }

    pub async fn set_automatic_updates(
        &self,
        workspace: Uuid,
        value: &str,
        log: Option<&NewAuditLog>,
    ) -> Result<()> {
        timed("set_automatic_updates", async {
            let mut tx = self.pool.begin().await?;
            sqlx::query!(
                r#"UPDATE workspaces SET automatic_updates = $2, updated_at = now()
                   WHERE id = $1 AND NOT deleted"#,
                workspace,
                value
            )
            .execute(&mut *tx)
            .await?;
            audit::append(&mut tx, log).await?;
            notify(&mut tx, channels::WORKSPACE_UPDATED, workspace.to_string()).await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    /// Records that the autostart due at `next_start_at`'s predecessor could not be created,
    /// and moves `next_start_at` on, so it is not retried on every tick.
    pub async fn record_autostart_failure(
        &self,
        workspace: Uuid,
        at: DateTime<Utc>,
        reason: &str,
        next_start_at: Option<DateTime<Utc>>,
    ) -> Result<()> {
        timed("record_autostart_failure", async {
            sqlx::query!(
                r#"UPDATE workspaces SET autostart_failed_at = $2, autostart_failure = $3,
                       next_start_at = $4
                   WHERE id = $1"#,
                workspace,
                at,
                reason,
                next_start_at
            )
            .execute(&self.pool)
            .await?;
            Ok(())
        })
        .await
    }

    /// Stores recomputed next autostarts.
    pub async fn set_next_starts(&self, next: &[(Uuid, Option<DateTime<Utc>>)]) -> Result<()> {
        timed("set_next_starts", async {
            let ids: Vec<Uuid> = next.iter().map(|(id, _)| *id).collect();
            let times: Vec<Option<DateTime<Utc>>> = next.iter().map(|(_, t)| *t).collect();
            sqlx::query!(
                r#"UPDATE workspaces w SET next_start_at = n.at
                   FROM unnest($1::uuid[], $2::timestamptz[]) AS n(id, at)
                   WHERE w.id = n.id"#,
                &ids,
                &times as &[Option<DateTime<Utc>>]
            )
            .execute(&self.pool)
            .await?;
            Ok(())
        })
        .await
    }

    /// The autostart schedules of a template's workspaces (to recompute their next starts when
    /// the template's allowed days change).
    pub async fn template_autostart_schedules(
        &self,
        template: Uuid,
    ) -> Result<Vec<(Uuid, String)>> {
        timed("template_autostart_schedules", async {
            let rows = sqlx::query!(
                r#"SELECT id, autostart_schedule AS "schedule!" FROM workspaces
                   WHERE template_id = $1 AND NOT deleted AND autostart_schedule IS NOT NULL"#,
                template
            )
            .fetch_all(&self.pool)
            .await?;
            Ok(rows.into_iter().map(|r| (r.id, r.schedule)).collect())
        })
        .await
    }

    /// p50/p95 build times of every template per transition, over each one's latest
    /// [`BUILD_TIME_SAMPLE`] successful builds of the last 30 days.
    pub async fn build_time_stats(&self) -> Result<HashMap<Uuid, BTreeMap<String, BuildTimes>>> {
        timed("build_time_stats", async {
            let rows = sqlx::query!(
                r#"SELECT template_id AS "template_id!", transition AS "transition!",
                          percentile_disc(0.5) WITHIN GROUP (ORDER BY ms) AS "p50!",
                          percentile_disc(0.95) WITHIN GROUP (ORDER BY ms) AS "p95!"
                   FROM (
                       SELECT w.template_id, b.transition,
                              (extract(epoch FROM j.completed_at - j.started_at) * 1000)::bigint AS ms,
                              row_number() OVER (PARTITION BY w.template_id, b.transition
                                                 ORDER BY j.completed_at DESC) AS n
                       FROM workspace_builds b
                       JOIN workspaces w ON w.id = b.workspace_id
                       JOIN provisioner_jobs j ON j.id = b.job_id
                       WHERE j.started_at IS NOT NULL
                         AND j.completed_at > now() - interval '30 days'
                         AND j.error IS NULL AND j.canceled_at IS NULL
                   ) recent
                   WHERE n <= $1
                   GROUP BY template_id, transition"#,
                BUILD_TIME_SAMPLE
            )
            .fetch_all(&self.pool)
            .await?;
            let mut stats: HashMap<Uuid, BTreeMap<String, BuildTimes>> = HashMap::new();
            for r in rows {
                stats.entry(r.template_id).or_default().insert(
                    r.transition,
                    BuildTimes {
                        p50: r.p50,
                        p95: r.p95,
                    },
                );
            }
            Ok(stats)
        })
        .await
    }
}

/// The activity bump, inside the stats flush: the running builds of `used` workspaces get
/// `deadline = now + the template's activity bump` (the TTL instead when the bump would reach
/// past the next autostart, as if the workspace had autostarted), never past `max_deadline`
/// and never earlier than it was. A deadline moves only by a minute or more, so a workspace in
/// constant use costs at most one write a minute however often its agent reports.
pub(crate) async fn bump_deadlines(tx: &mut sqlx::PgConnection, used: &[Uuid]) -> Result<u64> {
    Ok(sqlx::query!(
        r#"WITH latest AS (
               SELECT DISTINCT ON (b.workspace_id) b.id, b.transition, b.deadline, b.max_deadline,
                      b.job_id, w.next_start_at, t.activity_bump_ms,
                      CASE WHEN t.allow_user_autostop THEN COALESCE(w.ttl_ms, 0)
                           ELSE t.default_ttl_ms END AS ttl_ms
               FROM workspace_builds b
               JOIN workspaces w ON w.id = b.workspace_id
               JOIN templates t ON t.id = w.template_id
               WHERE b.workspace_id = ANY($1)
               ORDER BY b.workspace_id, b.build_number DESC
           ), bumped AS (
               SELECT l.id, LEAST(
                          now() + (CASE WHEN l.next_start_at IS NOT NULL AND l.ttl_ms > 0
                                         AND l.next_start_at <= now() + l.activity_bump_ms * interval '1 millisecond'
                                    THEN l.ttl_ms ELSE l.activity_bump_ms END) * interval '1 millisecond',
                          COALESCE(l.max_deadline, 'infinity'::timestamptz)) AS deadline
               FROM latest l JOIN provisioner_jobs j ON j.id = l.job_id
               WHERE l.transition = 'start' AND j.completed_at IS NOT NULL AND j.error IS NULL
                 AND j.canceled_at IS NULL AND l.deadline IS NOT NULL AND l.activity_bump_ms > 0
           )
           UPDATE workspace_builds b SET deadline = bumped.deadline, updated_at = now()
           FROM bumped
           WHERE b.id = bumped.id AND bumped.deadline >= b.deadline + interval '1 minute'"#,
        used
    )
    .execute(&mut *tx)
    .await?
    .rows_affected())
}

/// What a completing build's schedule follows from: the build's transition and workspace, and
/// the workspace's and its template's schedule settings. Read by the statement that closes the
/// job in the completion transaction, before its one write of the build and the workspace, or
/// with the build's payload when its completion is prepared ahead (`prepared_completion`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScheduleFacts {
    pub transition: String,
    pub workspace_id: Uuid,
    pub ttl_ms: Option<i64>,
    pub autostart_schedule: Option<String>,
    pub default_ttl_ms: i64,
    pub allow_user_autostop: bool,
    pub allow_user_autostart: bool,
    pub autostop_requirement_days_of_week: i16,
    pub autostop_requirement_weeks: i64,
    pub autostart_allowed_days: i16,
}

/// A successful build's consequences for the schedule: a start gets its deadline and max
/// deadline (`Some`); every build but a delete moves `next_start_at` to the schedule's next
/// allowed time after it.
pub(crate) fn schedule_of(
    facts: &ScheduleFacts,
    at: &BuildSchedule,
) -> (Option<Autostop>, Option<DateTime<Utc>>) {
    let deadlines = (facts.transition == "start").then(|| {
        let policy = TemplatePolicy {
            default_ttl_ms: facts.default_ttl_ms,
            allow_user_autostop: facts.allow_user_autostop,
            autostop_requirement_days: day_bits(facts.autostop_requirement_days_of_week),
            autostop_requirement_weeks: facts.autostop_requirement_weeks,
        };
        autostop(at.now, facts.ttl_ms, &policy, &at.quiet_hours)
    });
    let next_start_at = facts
        .autostart_schedule
        .as_deref()
        .filter(|_| facts.allow_user_autostart)
        .and_then(|s| Schedule::weekly(s).ok())
        .and_then(|s| s.next_allowed_after(at.now, day_bits(facts.autostart_allowed_days)));
    (deadlines, next_start_at)
}

/// A stored day bitmap (smallint) as the schedule module's `u8`; only the low seven bits mean
/// anything.
pub fn day_bits(stored: i16) -> u8 {
    u8::try_from(stored & 0x7f).unwrap_or_default()
}
