//! Prebuilt workspaces: what the reconciler reads (the presets that want prebuilds, the
//! prebuilds that exist, their recent failures), its replica lock, the system user owning the
//! pool, and the claim that hands one prebuild to one user.

use chrono::{DateTime, Utc};
use sqlx::{Postgres, Transaction};
use uuid::Uuid;

use super::{Result, Store, timed};

/// Coder's id for the system user that owns prebuilt workspaces.
pub const PREBUILDS_USER_ID: Uuid = Uuid::from_u128(0xc42fdf75_3097_4459_8f3c_7e4f7ec0bd92);
/// The advisory lock key one reconciliation pass holds, so replicas take turns.
const RECONCILE_LOCK: i64 = 0x7072_6562_7569_6c64; // "prebuild"

/// A preset of a template's active version that asks for prebuilds.
#[derive(Debug, Clone)]
pub struct WantedPreset {
    pub preset_id: Uuid,
    pub preset_name: String,
    pub template_version_id: Uuid,
    pub template_id: Uuid,
    pub template_name: String,
    pub organization_id: Uuid,
    /// The count when no schedule applies.
    pub desired_instances: i32,
    pub expiration_ttl: Option<i32>,
    /// The `scheduling` block as recorded (see `coderd_executors::prebuilds`).
    pub scheduling: Option<serde_json::Value>,
}

/// A live prebuilt workspace and its latest build.
#[derive(Debug, Clone)]
pub struct PrebuildRow {
    pub workspace_id: Uuid,
    pub created_at: DateTime<Utc>,
    pub template_id: Uuid,
    pub template_version_id: Uuid,
    /// `None` once the preset was deleted with its version.
    pub preset_id: Option<Uuid>,
    pub build_id: Uuid,
    pub transition: String,
    /// The latest build's job has ended.
    pub done: bool,
    /// ...and failed or was cancelled.
    pub failed: bool,
    /// Started successfully and every agent is ready (dev containers' sub-agents aside: no
    /// container engine runs them here, so they never would be).
    pub ready: bool,
}

/// Failed prebuild starts of a preset since its last successful one.
#[derive(Debug, Clone)]
pub struct PresetFailures {
    pub preset_id: Uuid,
    pub failures: i64,
    pub last_failure: Option<DateTime<Utc>>,
}

/// Held for one reconciliation pass; dropping it (rolling back) releases the lock.
pub struct ReconcileLock {
    _held: Transaction<'static, Postgres>,
}

impl Store {
    /// The reconciliation lock, unless another replica holds it.
    pub async fn try_reconcile_lock(&self) -> Result<Option<ReconcileLock>> {
        timed("try_reconcile_lock", async {
            let mut tx = self.pool.begin().await?;
            let got = sqlx::query_scalar!(
                r#"SELECT pg_try_advisory_xact_lock($1) AS "got!""#,
                RECONCILE_LOCK
            )
            .fetch_one(&mut *tx)
            .await?;
            Ok(got.then_some(ReconcileLock { _held: tx }))
        })
        .await
    }

    /// Creates the `prebuilds` system user (no login) and makes it a member of `org`.
    pub async fn ensure_prebuilds_user(&self, org: Uuid) -> Result<()> {
        timed("ensure_prebuilds_user", async {
            let mut tx = self.pool.begin().await?;
            sqlx::query!(
                r#"INSERT INTO users (id, email, username, name, hashed_password, login_type,
                       created_at, updated_at, last_seen_at)
                   VALUES ($1, 'prebuilds@system', 'prebuilds', 'Prebuilds', '', 'none',
                       now(), now(), now())
                   ON CONFLICT (id) DO NOTHING"#,
                PREBUILDS_USER_ID
            )
            .execute(&mut *tx)
            .await?;
            sqlx::query!(
                r#"INSERT INTO organization_members (organization_id, user_id, created_at, updated_at)
                   VALUES ($1, $2, now(), now()) ON CONFLICT DO NOTHING"#,
                org,
                PREBUILDS_USER_ID
            )
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    pub async fn wanted_presets(&self) -> Result<Vec<WantedPreset>> {
        timed("wanted_presets", async {
            Ok(sqlx::query_as!(
                WantedPreset,
                r#"SELECT p.id AS preset_id, p.name AS preset_name,
                          p.template_version_id, t.id AS template_id, t.name AS template_name,
                          t.organization_id, p.desired_instances AS "desired_instances!",
                          p.expiration_ttl, p.scheduling
                   FROM template_version_presets p
                   JOIN templates t ON t.active_version_id = p.template_version_id
                   WHERE NOT t.deleted AND p.desired_instances IS NOT NULL
                   ORDER BY p.id"#
            )
            .fetch_all(&self.pool)
            .await?)
        })
        .await
    }

    pub async fn prebuilds(&self) -> Result<Vec<PrebuildRow>> {
        timed("prebuilds", async {
            Ok(sqlx::query_as!(
                PrebuildRow,
                r#"SELECT w.id AS workspace_id, w.created_at, w.template_id,
                          b.template_version_id, b.template_version_preset_id AS preset_id,
                          b.id AS build_id, b.transition,
                          j.completed_at IS NOT NULL AS "done!",
                          (j.completed_at IS NOT NULL
                              AND (j.error IS NOT NULL OR j.canceled_at IS NOT NULL)) AS "failed!",
                          (b.transition = 'start' AND j.completed_at IS NOT NULL
                              AND j.error IS NULL AND j.canceled_at IS NULL
                              AND NOT EXISTS (
                                  SELECT 1 FROM workspace_resources r
                                  JOIN workspace_agents a ON a.resource_id = r.id
                                  WHERE r.job_id = j.id AND a.parent_id IS NULL
                                    AND a.lifecycle_state <> 'ready'))
                              AS "ready!"
                   FROM workspaces w
                   JOIN LATERAL (SELECT * FROM workspace_builds lb WHERE lb.workspace_id = w.id
                                 ORDER BY lb.build_number DESC LIMIT 1) b ON true
                   JOIN provisioner_jobs j ON j.id = b.job_id
                   WHERE w.owner_id = $1 AND NOT w.deleted
                   ORDER BY w.created_at"#,
                PREBUILDS_USER_ID
            )
            .fetch_all(&self.pool)
            .await?)
        })
        .await
    }

    /// Per preset, the prebuild starts that failed since its last successful one.
    pub async fn preset_failures(&self) -> Result<Vec<PresetFailures>> {
        timed("preset_failures", async {
            Ok(sqlx::query_as!(
                PresetFailures,
                r#"WITH starts AS (
                       SELECT b.template_version_preset_id AS preset_id, j.completed_at,
                              (j.error IS NOT NULL OR j.canceled_at IS NOT NULL) AS failed
                       FROM workspace_builds b
                       JOIN provisioner_jobs j ON j.id = b.job_id
                       WHERE b.initiator_id = $1 AND b.transition = 'start'
                         AND b.template_version_preset_id IS NOT NULL
                         AND j.completed_at IS NOT NULL)
                   SELECT s.preset_id AS "preset_id!", count(*) AS "failures!",
                          max(s.completed_at) AS last_failure
                   FROM starts s
                   WHERE s.failed AND s.completed_at > coalesce(
                       (SELECT max(o.completed_at) FROM starts o
                        WHERE o.preset_id = s.preset_id AND NOT o.failed), '-infinity')
                   GROUP BY s.preset_id"#,
                PREBUILDS_USER_ID
            )
            .fetch_all(&self.pool)
            .await?)
        })
        .await
    }

    /// Hands a ready prebuild of `preset` (on `version`) to `owner` under `name`, in one
    /// transaction; two claims never take the same one (`SKIP LOCKED`). `None`: none is ready.
    pub async fn claim_prebuild(
        &self,
        preset: Uuid,
        version: Uuid,
        owner: Uuid,
        name: &str,
    ) -> Result<Option<Uuid>> {
        timed("claim_prebuild", async {
            let mut tx = self.pool.begin().await?;
            let found = sqlx::query_scalar!(
                r#"SELECT w.id FROM workspaces w
                   JOIN LATERAL (SELECT * FROM workspace_builds lb WHERE lb.workspace_id = w.id
                                 ORDER BY lb.build_number DESC LIMIT 1) b ON true
                   JOIN provisioner_jobs j ON j.id = b.job_id
                   WHERE w.owner_id = $1 AND NOT w.deleted
                     AND b.template_version_preset_id = $2 AND b.template_version_id = $3
                     AND b.transition = 'start' AND j.completed_at IS NOT NULL
                     AND j.error IS NULL AND j.canceled_at IS NULL
                     AND NOT EXISTS (
                         SELECT 1 FROM workspace_resources r
                         JOIN workspace_agents a ON a.resource_id = r.id
                         WHERE r.job_id = j.id AND a.parent_id IS NULL
                           AND a.lifecycle_state <> 'ready')
                   ORDER BY w.created_at
                   LIMIT 1
                   FOR UPDATE OF w SKIP LOCKED"#,
                PREBUILDS_USER_ID,
                preset,
                version
            )
            .fetch_optional(&mut *tx)
            .await?;
            let Some(id) = found else {
                return Ok(None);
            };
            sqlx::query!(
                r#"UPDATE workspaces SET owner_id = $2, name = $3, updated_at = now(),
                       last_used_at = now()
                   WHERE id = $1"#,
                id,
                owner,
                name
            )
            .execute(&mut *tx)
            .await?;
            super::jobs::notify(
                &mut tx,
                crate::pubsub::channels::WORKSPACE_UPDATED,
                id.to_string(),
            )
            .await?;
            tx.commit().await?;
            Ok(Some(id))
        })
        .await
    }
}

/// After a claim build (the previous build was the prebuilds user's start): the new build's
/// agents that hold the same token as the prebuild's carry on where those were — connected,
/// started, ready — because the agent process is the same and keeps running. Returns the
/// prebuild's agent ids, whose connections must re-authenticate as the new agents. Inside the
/// completion transaction.
pub(crate) async fn carry_claimed_agents(
    tx: &mut sqlx::PgConnection,
    job: Uuid,
) -> Result<Vec<Uuid>> {
    Ok(sqlx::query_scalar!(
        r#"WITH nb AS (SELECT workspace_id, build_number FROM workspace_builds WHERE job_id = $1),
                old AS (
                    SELECT a.* FROM workspace_builds ob
                    JOIN nb ON ob.workspace_id = nb.workspace_id
                           AND ob.build_number = nb.build_number - 1
                    JOIN workspace_resources r ON r.job_id = ob.job_id
                    JOIN workspace_agents a ON a.resource_id = r.id
                    WHERE ob.initiator_id = $2 AND ob.transition = 'start')
           UPDATE workspace_agents n
           SET lifecycle_state = old.lifecycle_state, started_at = old.started_at,
               ready_at = old.ready_at, first_connected_at = old.first_connected_at,
               last_connected_at = old.last_connected_at, version = old.version,
               api_version = old.api_version, expanded_directory = old.expanded_directory
           FROM old, workspace_resources nr
           WHERE nr.job_id = $1 AND n.resource_id = nr.id AND n.name = old.name
             AND n.parent_id IS NULL AND old.parent_id IS NULL
             AND n.auth_token_hash = old.auth_token_hash
           RETURNING old.id"#,
        job,
        PREBUILDS_USER_ID
    )
    .fetch_all(&mut *tx)
    .await?)
}
