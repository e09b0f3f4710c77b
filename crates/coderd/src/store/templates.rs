//! `files`, `templates` and `template_versions`.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::Connection as _;
use uuid::Uuid;

use super::jobs::{JobRow, NewJob, insert_job};
use super::{Error, Result, Store, timed};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRow {
    pub id: Uuid,
    pub hash: String,
    pub created_by: Uuid,
    pub created_at: DateTime<Utc>,
    pub mimetype: String,
    pub data: Vec<u8>,
}

/// A file's row without its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileMeta {
    pub id: Uuid,
    pub created_by: Uuid,
}

/// A template with the names the API shows next to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateRow {
    pub id: Uuid,
    pub organization_id: Uuid,
    pub name: String,
    pub display_name: String,
    pub description: String,
    pub icon: String,
    pub provisioner: String,
    pub active_version_id: Uuid,
    pub created_by: Uuid,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub deleted: bool,
    pub default_ttl_ms: i64,
    pub allow_user_cancel_workspace_jobs: bool,
    pub deprecated: String,
    pub organization_name: String,
    pub organization_display_name: String,
    pub organization_icon: String,
    pub created_by_username: String,
}

#[derive(Debug, Clone)]
pub struct NewTemplate {
    pub id: Uuid,
    pub organization_id: Uuid,
    pub name: String,
    pub display_name: String,
    pub description: String,
    pub icon: String,
    pub provisioner: String,
    pub active_version_id: Uuid,
    pub created_by: Uuid,
    pub default_ttl_ms: i64,
    pub allow_user_cancel_workspace_jobs: bool,
}

/// Template metadata changes; `None` keeps the current value.
#[derive(Debug, Clone, Default)]
pub struct TemplateChanges {
    pub name: Option<String>,
    pub display_name: Option<String>,
    pub description: Option<String>,
    pub icon: Option<String>,
    pub default_ttl_ms: Option<i64>,
    pub allow_user_cancel_workspace_jobs: Option<bool>,
    pub deprecated: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TemplateVersionRow {
    pub id: Uuid,
    pub template_id: Option<Uuid>,
    pub organization_id: Uuid,
    pub name: String,
    pub message: String,
    pub readme: String,
    pub job_id: Uuid,
    pub created_by: Uuid,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub archived: bool,
    pub rich_parameters: Value,
    pub variables: Value,
    pub user_variable_values: Value,
    pub external_auth_providers: Value,
    pub created_by_username: String,
    pub created_by_name: String,
    pub created_by_avatar_url: String,
}

#[derive(Debug, Clone)]
pub struct NewTemplateVersion {
    pub id: Uuid,
    pub template_id: Option<Uuid>,
    pub organization_id: Uuid,
    pub name: String,
    pub message: String,
    pub created_by: Uuid,
    pub user_variable_values: Value,
    pub job: NewJob,
}

/// What a successful import found.
#[derive(Debug, Clone)]
pub struct ImportResult {
    pub rich_parameters: Value,
    pub variables: Value,
    pub external_auth_providers: Value,
    pub readme: String,
}

impl Store {
    /// How many users have workspaces of each template (templates without any are absent).
    pub async fn template_active_users(&self) -> Result<std::collections::HashMap<Uuid, i64>> {
        timed("template_active_users", async {
            let rows = sqlx::query!(
                r#"SELECT template_id, count(DISTINCT owner_id) AS "users!"
                   FROM workspaces WHERE NOT deleted GROUP BY template_id"#
            )
            .fetch_all(&self.pool)
            .await?;
            Ok(rows.into_iter().map(|r| (r.template_id, r.users)).collect())
        })
        .await
    }

    /// Stores an upload, or finds the same bytes the same user uploaded before. Returns the id
    /// and whether it is new.
    pub async fn insert_file(
        &self,
        created_by: Uuid,
        hash: &str,
        mimetype: &str,
        data: &[u8],
    ) -> Result<(Uuid, bool)> {
        timed("insert_file", async {
            let mut conn = self.pool.acquire().await?;
            let inserted = sqlx::query_scalar!(
                r#"INSERT INTO files (id, hash, created_by, created_at, mimetype, data)
                   VALUES ($1, $2, $3, now(), $4, $5)
                   ON CONFLICT (hash, created_by) DO NOTHING
                   RETURNING id"#,
                Uuid::new_v4(),
                hash,
                created_by,
                mimetype,
                data
            )
            .fetch_optional(&mut *conn)
            .await;
            conn.shrink_buffers();
            match inserted? {
                Some(id) => Ok((id, true)),
                None => Ok((
                    sqlx::query_scalar!(
                        "SELECT id FROM files WHERE hash = $1 AND created_by = $2",
                        hash,
                        created_by
                    )
                    .fetch_one(&mut *conn)
                    .await?,
                    false,
                )),
            }
        })
        .await
    }

    /// A file with its bytes. Uploads and these reads are the only queries that carry whole
    /// archives; both give their connection's buffers back afterwards (sqlx keeps a
    /// connection's buffers at the largest message it has carried, so every pooled connection
    /// that once moved an archive would hold a copy of it for the rest of its life).
    pub async fn file_by_id(&self, id: Uuid) -> Result<FileRow> {
        timed("file_by_id", async {
            let mut conn = self.pool.acquire().await?;
            let row = sqlx::query_as!(FileRow, "SELECT * FROM files WHERE id = $1", id)
                .fetch_one(&mut *conn)
                .await;
            conn.shrink_buffers();
            Ok(row?)
        })
        .await
    }

    /// A file without its bytes, for checks that need only who uploaded it.
    pub async fn file_meta(&self, id: Uuid) -> Result<FileMeta> {
        timed("file_meta", async {
            Ok(sqlx::query_as!(
                FileMeta,
                "SELECT id, created_by FROM files WHERE id = $1",
                id
            )
            .fetch_one(&self.pool)
            .await?)
        })
        .await
    }

    /// Creates a version and its import job in one transaction (the job is announced on
    /// commit).
    pub async fn create_template_version(
        &self,
        v: &NewTemplateVersion,
    ) -> Result<(TemplateVersionRow, JobRow)> {
        timed("create_template_version", async {
            let mut tx = self.pool.begin().await?;
            let now = Utc::now();
            let job = insert_job(&mut tx, &v.job, now).await?;
            sqlx::query!(
                r#"INSERT INTO template_versions (id, template_id, organization_id, name, message,
                       job_id, created_by, created_at, updated_at, user_variable_values)
                   VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, $9)"#,
                v.id,
                v.template_id,
                v.organization_id,
                v.name,
                v.message,
                job.id,
                v.created_by,
                now,
                v.user_variable_values
            )
            .execute(&mut *tx)
            .await?;
            let version = version_by_id(&mut tx, v.id).await?;
            tx.commit().await?;
            Ok((version, job))
        })
        .await
    }

    pub async fn template_version_by_id(&self, id: Uuid) -> Result<TemplateVersionRow> {
        timed("template_version_by_id", async {
            let mut conn = self.pool.acquire().await?;
            version_by_id(&mut conn, id).await
        })
        .await
    }

    pub async fn template_version_by_job(&self, job: Uuid) -> Result<TemplateVersionRow> {
        timed("template_version_by_job", async {
            let id = sqlx::query_scalar!("SELECT id FROM template_versions WHERE job_id = $1", job)
                .fetch_one(&self.pool)
                .await?;
            let mut conn = self.pool.acquire().await?;
            version_by_id(&mut conn, id).await
        })
        .await
    }

    pub async fn template_version_by_name(
        &self,
        template: Uuid,
        name: &str,
    ) -> Result<TemplateVersionRow> {
        timed("template_version_by_name", async {
            let id = sqlx::query_scalar!(
                "SELECT id FROM template_versions WHERE template_id = $1 AND lower(name) = lower($2)",
                template,
                name
            )
            .fetch_one(&self.pool)
            .await?;
            let mut conn = self.pool.acquire().await?;
            version_by_id(&mut conn, id).await
        })
        .await
    }

    pub async fn template_versions_of(&self, template: Uuid) -> Result<Vec<TemplateVersionRow>> {
        timed("template_versions_of", async {
            Ok(sqlx::query_as!(
                TemplateVersionRow,
                r#"SELECT v.*, u.username AS created_by_username, u.name AS created_by_name,
                          u.avatar_url AS created_by_avatar_url
                   FROM template_versions v JOIN users u ON u.id = v.created_by
                   WHERE v.template_id = $1 ORDER BY v.created_at, v.id"#,
                template
            )
            .fetch_all(&self.pool)
            .await?)
        })
        .await
    }

    /// Creates a template around an imported version, claiming the version for it.
    pub async fn create_template(&self, t: &NewTemplate) -> Result<TemplateRow> {
        timed("create_template", async {
            let mut tx = self.pool.begin().await?;
            let now = Utc::now();
            sqlx::query!(
                r#"INSERT INTO templates (id, organization_id, name, display_name, description, icon,
                       provisioner, active_version_id, created_by, created_at, updated_at,
                       default_ttl_ms, allow_user_cancel_workspace_jobs)
                   VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10, $11, $12)"#,
                t.id,
                t.organization_id,
                t.name,
                t.display_name,
                t.description,
                t.icon,
                t.provisioner,
                t.active_version_id,
                t.created_by,
                now,
                t.default_ttl_ms,
                t.allow_user_cancel_workspace_jobs
            )
            .execute(&mut *tx)
            .await?;
            let claimed = sqlx::query!(
                "UPDATE template_versions SET template_id = $1, updated_at = now() WHERE id = $2 AND template_id IS NULL",
                t.id,
                t.active_version_id
            )
            .execute(&mut *tx)
            .await?;
            if claimed.rows_affected() == 0 {
                return Err(Error::Conflict {
                    constraint: "template_versions_template_id".into(),
                });
            }
            let row = template_by(&mut tx, Some(t.id), None, None).await?;
            tx.commit().await?;
            Ok(row)
        })
        .await
    }

    pub async fn template_by_id(&self, id: Uuid) -> Result<TemplateRow> {
        timed("template_by_id", async {
            let mut conn = self.pool.acquire().await?;
            template_by(&mut conn, Some(id), None, None).await
        })
        .await
    }

    pub async fn template_by_name(&self, org: Uuid, name: &str) -> Result<TemplateRow> {
        timed("template_by_name", async {
            let mut conn = self.pool.acquire().await?;
            template_by(&mut conn, None, Some(org), Some(name)).await
        })
        .await
    }

    /// Templates in `orgs` (all organizations when `all`), by name.
    pub async fn list_templates(&self, all: bool, orgs: &[Uuid]) -> Result<Vec<TemplateRow>> {
        timed("list_templates", async {
            Ok(sqlx::query_as!(
                TemplateRow,
                r#"SELECT t.*, o.name AS organization_name, o.display_name AS organization_display_name,
                          o.icon AS organization_icon, u.username AS created_by_username
                   FROM templates t
                   JOIN organizations o ON o.id = t.organization_id
                   JOIN users u ON u.id = t.created_by
                   WHERE NOT t.deleted AND ($1 OR t.organization_id = ANY($2))
                   ORDER BY lower(t.name)"#,
                all,
                orgs
            )
            .fetch_all(&self.pool)
            .await?)
        })
        .await
    }

    pub async fn update_template(&self, id: Uuid, c: &TemplateChanges) -> Result<TemplateRow> {
        timed("update_template", async {
            let mut tx = self.pool.begin().await?;
            sqlx::query!(
                r#"UPDATE templates SET
                     name = COALESCE($2, name),
                     display_name = COALESCE($3, display_name),
                     description = COALESCE($4, description),
                     icon = COALESCE($5, icon),
                     default_ttl_ms = COALESCE($6, default_ttl_ms),
                     allow_user_cancel_workspace_jobs = COALESCE($7, allow_user_cancel_workspace_jobs),
                     deprecated = COALESCE($8, deprecated),
                     updated_at = now()
                   WHERE id = $1 AND NOT deleted"#,
                id,
                c.name,
                c.display_name,
                c.description,
                c.icon,
                c.default_ttl_ms,
                c.allow_user_cancel_workspace_jobs,
                c.deprecated
            )
            .execute(&mut *tx)
            .await?;
            let row = template_by(&mut tx, Some(id), None, None).await?;
            tx.commit().await?;
            Ok(row)
        })
        .await
    }

    pub async fn set_active_version(&self, template: Uuid, version: Uuid) -> Result<()> {
        timed("set_active_version", async {
            let updated = sqlx::query!(
                "UPDATE templates SET active_version_id = $2, updated_at = now() WHERE id = $1 AND NOT deleted",
                template,
                version
            )
            .execute(&self.pool)
            .await?;
            if updated.rows_affected() == 0 {
                return Err(Error::NotFound);
            }
            Ok(())
        })
        .await
    }

    /// Deletes a template unless workspaces still use it; returns false when some do.
    pub async fn delete_template(&self, id: Uuid) -> Result<bool> {
        timed("delete_template", async {
            let mut tx = self.pool.begin().await?;
            sqlx::query!("SELECT id FROM templates WHERE id = $1 FOR UPDATE", id)
                .fetch_one(&mut *tx)
                .await?;
            let in_use = sqlx::query_scalar!(
                r#"SELECT EXISTS (SELECT 1 FROM workspaces WHERE template_id = $1 AND NOT deleted) AS "e!""#,
                id
            )
            .fetch_one(&mut *tx)
            .await?;
            if in_use {
                return Ok(false);
            }
            sqlx::query!("UPDATE templates SET deleted = true, updated_at = now() WHERE id = $1", id)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(true)
        })
        .await
    }
}

async fn version_by_id(conn: &mut sqlx::PgConnection, id: Uuid) -> Result<TemplateVersionRow> {
    Ok(sqlx::query_as!(
        TemplateVersionRow,
        r#"SELECT v.*, u.username AS created_by_username, u.name AS created_by_name,
                  u.avatar_url AS created_by_avatar_url
           FROM template_versions v JOIN users u ON u.id = v.created_by
           WHERE v.id = $1"#,
        id
    )
    .fetch_one(&mut *conn)
    .await?)
}

async fn template_by(
    conn: &mut sqlx::PgConnection,
    id: Option<Uuid>,
    org: Option<Uuid>,
    name: Option<&str>,
) -> Result<TemplateRow> {
    Ok(sqlx::query_as!(
        TemplateRow,
        r#"SELECT t.*, o.name AS organization_name, o.display_name AS organization_display_name,
                  o.icon AS organization_icon, u.username AS created_by_username
           FROM templates t
           JOIN organizations o ON o.id = t.organization_id
           JOIN users u ON u.id = t.created_by
           WHERE NOT t.deleted
             AND ($1::uuid IS NULL OR t.id = $1)
             AND ($2::uuid IS NULL OR (t.organization_id = $2 AND lower(t.name) = lower($3)))"#,
        id,
        org,
        name
    )
    .fetch_one(&mut *conn)
    .await?)
}

/// Records a successful import on its version, inside the completion transaction.
pub(crate) async fn record_import(
    tx: &mut sqlx::PgConnection,
    job: Uuid,
    result: &ImportResult,
) -> Result<()> {
    sqlx::query!(
        r#"UPDATE template_versions SET rich_parameters = $2, variables = $3,
               external_auth_providers = $4, readme = $5, updated_at = now()
           WHERE job_id = $1"#,
        job,
        result.rich_parameters,
        result.variables,
        result.external_auth_providers,
        result.readme
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}
