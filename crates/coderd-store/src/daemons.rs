//! `provisioner_daemons` and `provisioner_keys`.

use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

use super::jobs::{JobRow, QUEUE_COUNT_CAP};
use super::{Error, NewAuditLog, Result, Store, audit, timed};

#[derive(Debug, Clone, PartialEq)]
pub struct DaemonRow {
    pub id: Uuid,
    pub organization_id: Uuid,
    pub name: String,
    pub owner_key: String,
    pub provisioners: Vec<String>,
    pub tags: Value,
    pub version: String,
    pub api_version: String,
    pub key_id: Option<Uuid>,
    pub created_at: DateTime<Utc>,
    pub last_seen_at: DateTime<Utc>,
    pub key_name: Option<String>,
}

#[derive(Debug, Clone)]
pub struct NewDaemon {
    pub organization_id: Uuid,
    pub name: String,
    /// The owner tag: empty for organization-scoped daemons.
    pub owner_key: String,
    pub provisioners: Vec<String>,
    pub tags: Value,
    pub version: String,
    pub api_version: String,
    pub key_id: Option<Uuid>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct KeyRow {
    pub id: Uuid,
    pub organization_id: Uuid,
    pub name: String,
    pub hashed_secret: Vec<u8>,
    pub tags: Value,
    pub created_at: DateTime<Utc>,
}

impl Store {
    /// Registers a daemon, or refreshes the registration of the one with the same organization,
    /// name and owner, so a reconnecting daemon keeps its id.
    pub async fn upsert_daemon(&self, d: &NewDaemon) -> Result<DaemonRow> {
        timed("upsert_daemon", async {
            let id = sqlx::query_scalar!(
                r#"INSERT INTO provisioner_daemons (id, organization_id, name, owner_key, provisioners,
                       tags, version, api_version, key_id, created_at, last_seen_at)
                   VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, now(), now())
                   ON CONFLICT (organization_id, name, owner_key) DO UPDATE SET
                       provisioners = EXCLUDED.provisioners, tags = EXCLUDED.tags,
                       version = EXCLUDED.version, api_version = EXCLUDED.api_version,
                       key_id = EXCLUDED.key_id, last_seen_at = now()
                   RETURNING id"#,
                Uuid::new_v4(),
                d.organization_id,
                d.name,
                d.owner_key,
                &d.provisioners,
                d.tags,
                d.version,
                d.api_version,
                d.key_id
            )
            .fetch_one(&self.pool)
            .await?;
            self.daemons(Some(d.organization_id), Some(id))
                .await?
                .pop()
                .ok_or(Error::NotFound)
        })
        .await
    }

    /// Daemons of `org` (or all), optionally just one.
    pub async fn daemons(&self, org: Option<Uuid>, id: Option<Uuid>) -> Result<Vec<DaemonRow>> {
        timed("daemons", async {
            let mut conn = self.pool.acquire().await?;
            daemons_in(&mut conn, org, id).await
        })
        .await
    }

    /// Marks connected daemons as seen now, in one statement for all of them.
    pub async fn touch_daemons(&self, ids: &[Uuid]) -> Result<()> {
        timed("touch_daemons", async {
            sqlx::query!(
                "UPDATE provisioner_daemons SET last_seen_at = now() WHERE id = ANY($1)",
                ids
            )
            .execute(&self.pool)
            .await?;
            Ok(())
        })
        .await
    }

    pub async fn insert_provisioner_key(
        &self,
        key: &KeyRow,
        log: Option<&NewAuditLog>,
    ) -> Result<KeyRow> {
        timed("insert_provisioner_key", async {
            let mut tx = self.pool.begin().await?;
            let row = sqlx::query_as!(
                KeyRow,
                r#"INSERT INTO provisioner_keys (id, organization_id, name, hashed_secret, tags, created_at)
                   VALUES ($1, $2, $3, $4, $5, now()) RETURNING *"#,
                key.id,
                key.organization_id,
                key.name,
                key.hashed_secret,
                key.tags
            )
            .fetch_one(&mut *tx)
            .await?;
            audit::append(&mut tx, log).await?;
            tx.commit().await?;
            Ok(row)
        })
        .await
    }

    pub async fn provisioner_keys(&self, org: Uuid) -> Result<Vec<KeyRow>> {
        timed("provisioner_keys", async {
            Ok(sqlx::query_as!(
                KeyRow,
                "SELECT * FROM provisioner_keys WHERE organization_id = $1 ORDER BY lower(name)",
                org
            )
            .fetch_all(&self.pool)
            .await?)
        })
        .await
    }

    pub async fn provisioner_key_by_secret(&self, hashed_secret: &[u8]) -> Result<KeyRow> {
        timed("provisioner_key_by_secret", async {
            Ok(sqlx::query_as!(
                KeyRow,
                "SELECT * FROM provisioner_keys WHERE hashed_secret = $1",
                hashed_secret
            )
            .fetch_one(&self.pool)
            .await?)
        })
        .await
    }

    pub async fn delete_provisioner_key(
        &self,
        org: Uuid,
        name: &str,
        log: Option<&NewAuditLog>,
    ) -> Result<()> {
        timed("delete_provisioner_key", async {
            let mut tx = self.pool.begin().await?;
            let deleted = sqlx::query!(
                "DELETE FROM provisioner_keys WHERE organization_id = $1 AND lower(name) = lower($2)",
                org,
                name
            )
            .execute(&mut *tx)
            .await?;
            if deleted.rows_affected() == 0 {
                return Err(Error::NotFound);
            }
            audit::append(&mut tx, log).await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }
}

/// The daemons of `org` (all when `None`), or the one `id` names, by name.
pub(super) async fn daemons_in(
    conn: &mut sqlx::PgConnection,
    org: Option<Uuid>,
    id: Option<Uuid>,
) -> Result<Vec<DaemonRow>> {
    Ok(sqlx::query_as!(
        DaemonRow,
        r#"SELECT d.*, k.name AS "key_name?"
           FROM provisioner_daemons d LEFT JOIN provisioner_keys k ON k.id = d.key_id
           WHERE ($1::uuid IS NULL OR d.organization_id = $1) AND ($2::uuid IS NULL OR d.id = $2)
           ORDER BY d.name"#,
        org,
        id
    )
    .fetch_all(&mut *conn)
    .await?)
}

impl Store {
    /// What the response to a new build needs besides its rows, for a job still pending: the
    /// daemons of its organization (as [`Store::daemons`] orders them) and its (position, size)
    /// in the queue (as [`Store::queue_position`] counts them), read in one statement instead
    /// of two. `None` when the organization has no daemon (the statement then has no row to
    /// carry the counts): the caller asks for the position on its own.
    pub async fn daemons_and_queue(
        &self,
        job: &JobRow,
    ) -> Result<Option<(Vec<DaemonRow>, (i64, i64))>> {
        timed("daemons_and_queue", async {
            // The counts are one uncorrelated subquery in FROM, computed once however many
            // daemons there are; both walk the pending index in its order up to the cap, as
            // `queue_position`'s do.
            let rows = sqlx::query!(
                r#"SELECT d.id, d.organization_id, d.name, d.owner_key, d.provisioners, d.tags,
                          d.version, d.api_version, d.key_id, d.created_at, d.last_seen_at,
                          k.name AS "key_name?", q.ahead AS "ahead!", q.size AS "size!"
                   FROM (SELECT
                           (SELECT count(*) FROM (
                              SELECT 1 FROM provisioner_jobs
                              WHERE organization_id = $1 AND provisioner = $2 AND tags_key = $3
                                AND started_at IS NULL AND canceled_at IS NULL
                                AND (created_at, id) < ($4, $5)
                              ORDER BY created_at, id
                              LIMIT $6) ahead) AS ahead,
                           (SELECT count(*) FROM (
                              SELECT 1 FROM provisioner_jobs
                              WHERE organization_id = $1 AND provisioner = $2 AND tags_key = $3
                                AND started_at IS NULL AND canceled_at IS NULL
                              ORDER BY created_at, id
                              LIMIT $6) size) AS size) q
                   CROSS JOIN provisioner_daemons d
                   LEFT JOIN provisioner_keys k ON k.id = d.key_id
                   WHERE d.organization_id = $1
                   ORDER BY d.name"#,
                job.organization_id,
                job.provisioner,
                job.tags_key,
                job.created_at,
                job.id,
                QUEUE_COUNT_CAP
            )
            .fetch_all(&self.pool)
            .await?;
            let Some(queue) = rows.first().map(|r| (r.ahead + 1, r.size)) else {
                return Ok(None);
            };
            let daemons = rows
                .into_iter()
                .map(|r| DaemonRow {
                    id: r.id,
                    organization_id: r.organization_id,
                    name: r.name,
                    owner_key: r.owner_key,
                    provisioners: r.provisioners,
                    tags: r.tags,
                    version: r.version,
                    api_version: r.api_version,
                    key_id: r.key_id,
                    created_at: r.created_at,
                    last_seen_at: r.last_seen_at,
                    key_name: r.key_name,
                })
                .collect();
            Ok(Some((daemons, queue)))
        })
        .await
    }
}
