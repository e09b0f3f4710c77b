//! `files`, `templates` and `template_versions`.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::Connection as _;
use uuid::Uuid;

use super::jobs::{JobRow, NewJob, insert_job};
use super::{Error, NewAuditLog, Result, Store, audit, timed};

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
    pub activity_bump_ms: i64,
    pub autostop_requirement_days_of_week: i16,
    pub autostop_requirement_weeks: i64,
    pub autostart_allowed_days: i16,
    pub allow_user_autostart: bool,
    pub allow_user_autostop: bool,
    pub failure_ttl_ms: i64,
    pub time_til_dormant_ms: i64,
    pub time_til_dormant_autodelete_ms: i64,
    pub require_active_version: bool,
    pub max_port_share_level: String,
    pub cors_behavior: String,
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
    pub allow_user_cancel_workspace_jobs: bool,
    pub schedule: TemplateScheduleRow,
    pub require_active_version: bool,
    pub max_port_share_level: String,
    pub cors_behavior: String,
}

/// A template's scheduling settings, as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TemplateScheduleRow {
    pub default_ttl_ms: i64,
    pub activity_bump_ms: i64,
    pub autostop_requirement_days_of_week: i16,
    pub autostop_requirement_weeks: i64,
    pub autostart_allowed_days: i16,
    pub allow_user_autostart: bool,
    pub allow_user_autostop: bool,
    pub failure_ttl_ms: i64,
    pub time_til_dormant_ms: i64,
    pub time_til_dormant_autodelete_ms: i64,
}

impl Default for TemplateScheduleRow {
    /// Coder's defaults: no TTL, a one-hour activity bump, no requirements, users decide.
    fn default() -> Self {
        Self {
            default_ttl_ms: 0,
            activity_bump_ms: 3_600_000,
            autostop_requirement_days_of_week: 0,
            autostop_requirement_weeks: 1,
            autostart_allowed_days: 0b0111_1111,
            allow_user_autostart: true,
            allow_user_autostop: true,
            failure_ttl_ms: 0,
            time_til_dormant_ms: 0,
            time_til_dormant_autodelete_ms: 0,
        }
    }
}

impl TemplateRow {
    pub fn schedule(&self) -> TemplateScheduleRow {
        TemplateScheduleRow {
            default_ttl_ms: self.default_ttl_ms,
            activity_bump_ms: self.activity_bump_ms,
            autostop_requirement_days_of_week: self.autostop_requirement_days_of_week,
            autostop_requirement_weeks: self.autostop_requirement_weeks,
            autostart_allowed_days: self.autostart_allowed_days,
            allow_user_autostart: self.allow_user_autostart,
            allow_user_autostop: self.allow_user_autostop,
            failure_ttl_ms: self.failure_ttl_ms,
            time_til_dormant_ms: self.time_til_dormant_ms,
            time_til_dormant_autodelete_ms: self.time_til_dormant_autodelete_ms,
        }
    }
}

/// Template metadata changes; `None` keeps the current value.
#[derive(Debug, Clone, Default)]
pub struct TemplateChanges {
    pub name: Option<String>,
    pub display_name: Option<String>,
    pub description: Option<String>,
    pub icon: Option<String>,
    pub allow_user_cancel_workspace_jobs: Option<bool>,
    pub deprecated: Option<String>,
    /// The whole schedule, when any of it changes.
    pub schedule: Option<TemplateScheduleRow>,
    pub require_active_version: Option<bool>,
    pub max_port_share_level: Option<String>,
    pub cors_behavior: Option<String>,
    /// Count the template's workspaces as used now, so a shorter dormancy threshold does not
    /// make them dormant at once.
    pub touch_workspaces_last_used: bool,
    /// Restart the dormant workspaces' clocks now, so a shorter deletion threshold does not
    /// delete them at once.
    pub touch_workspaces_dormant: bool,
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
    /// The `coder_secret`s the version's builds need (see `version_facts`).
    pub secret_requirements: Value,
    pub has_ai_task: bool,
    pub has_external_agent: bool,
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
        log: Option<&NewAuditLog>,
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
            audit::append(&mut tx, log).await?;
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
    pub async fn create_template(
        &self,
        t: &NewTemplate,
        log: Option<&NewAuditLog>,
    ) -> Result<TemplateRow> {
        timed("create_template", async {
            let mut tx = self.pool.begin().await?;
            let now = Utc::now();
            sqlx::query!(
                r#"INSERT INTO templates (id, organization_id, name, display_name, description, icon,
                       provisioner, active_version_id, created_by, created_at, updated_at,
                       allow_user_cancel_workspace_jobs, default_ttl_ms, activity_bump_ms,
                       autostop_requirement_days_of_week, autostop_requirement_weeks,
                       autostart_allowed_days, allow_user_autostart, allow_user_autostop,
                       failure_ttl_ms, time_til_dormant_ms, time_til_dormant_autodelete_ms,
                       require_active_version, max_port_share_level, cors_behavior)
                   VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10, $11, $12, $13, $14, $15,
                           $16, $17, $18, $19, $20, $21, $22, $23, $24)"#,
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
                t.allow_user_cancel_workspace_jobs,
                t.schedule.default_ttl_ms,
                t.schedule.activity_bump_ms,
                t.schedule.autostop_requirement_days_of_week,
                t.schedule.autostop_requirement_weeks,
                t.schedule.autostart_allowed_days,
                t.schedule.allow_user_autostart,
                t.schedule.allow_user_autostop,
                t.schedule.failure_ttl_ms,
                t.schedule.time_til_dormant_ms,
                t.schedule.time_til_dormant_autodelete_ms,
                t.require_active_version,
                t.max_port_share_level,
                t.cors_behavior
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
            // Coder's default: the organization's Everyone group may use a new template.
            sqlx::query!(
                "INSERT INTO template_group_acl (template_id, group_id, role) VALUES ($1, $2, 'use')",
                t.id,
                t.organization_id
            )
            .execute(&mut *tx)
            .await?;
            if claimed.rows_affected() == 0 {
                return Err(Error::Conflict {
                    constraint: "template_versions_template_id".into(),
                });
            }
            let row = template_by_id_in(&mut tx, t.id).await?;
            audit::append(&mut tx, log).await?;
            tx.commit().await?;
            Ok(row)
        })
        .await
    }

    pub async fn template_by_id(&self, id: Uuid) -> Result<TemplateRow> {
        timed("template_by_id", async {
            let mut conn = self.pool.acquire().await?;
            template_by_id_in(&mut conn, id).await
        })
        .await
    }

    /// A template with its access list (what authorising a read of it needs), on one
    /// connection.
    pub async fn template_with_acl(&self, id: Uuid) -> Result<(TemplateRow, coderd_authz::Acl)> {
        timed("template_with_acl", async {
            let mut conn = self.pool.acquire().await?;
            let row = template_by_id_in(&mut conn, id).await?;
            let acl = super::groups::template_acl_in(&mut conn, id).await?;
            Ok((row, acl))
        })
        .await
    }

    pub async fn template_by_name(&self, org: Uuid, name: &str) -> Result<TemplateRow> {
        timed("template_by_name", async {
            let mut conn = self.pool.acquire().await?;
            template_by_name_in(&mut conn, org, name).await
        })
        .await
    }

    /// The templates a filter admits (in `org` only, when given), by name. A template is
    /// admitted by the filter's organizations or, in its ACL organizations, by an access-list
    /// entry for the user or one of its groups (the Everyone group's id is the organization's).
    pub async fn list_templates(
        &self,
        filter: &coderd_authz::Filter,
        org: Option<Uuid>,
    ) -> Result<Vec<TemplateRow>> {
        timed("list_templates", async {
            Ok(sqlx::query_as!(
                TemplateRow,
                r#"SELECT t.*, o.name AS organization_name, o.display_name AS organization_display_name,
                          o.icon AS organization_icon, u.username AS created_by_username
                   FROM templates t
                   JOIN organizations o ON o.id = t.organization_id
                   JOIN users u ON u.id = t.created_by
                   WHERE NOT t.deleted AND ($6::uuid IS NULL OR t.organization_id = $6)
                     AND ($1 OR t.organization_id = ANY($2)
                       OR (t.organization_id = ANY($3) AND (
                            EXISTS (SELECT 1 FROM template_user_acl a
                                    WHERE a.template_id = t.id AND a.user_id = $4)
                            OR EXISTS (SELECT 1 FROM template_group_acl a
                                       WHERE a.template_id = t.id
                                         AND (a.group_id = t.organization_id
                                              OR a.group_id = ANY($5))))))
                   ORDER BY lower(t.name)"#,
                filter.all,
                &filter.orgs,
                &filter.acl_orgs,
                filter.acl_user,
                &filter.acl_groups,
                org
            )
            .fetch_all(&self.pool)
            .await?)
        })
        .await
    }

    pub async fn update_template(
        &self,
        id: Uuid,
        c: &TemplateChanges,
        log: Option<&NewAuditLog>,
    ) -> Result<TemplateRow> {
        timed("update_template", async {
            let mut tx = self.pool.begin().await?;
            sqlx::query!(
                r#"UPDATE templates SET
                     name = COALESCE($2, name),
                     display_name = COALESCE($3, display_name),
                     description = COALESCE($4, description),
                     icon = COALESCE($5, icon),
                     allow_user_cancel_workspace_jobs = COALESCE($6, allow_user_cancel_workspace_jobs),
                     deprecated = COALESCE($7, deprecated),
                     require_active_version = COALESCE($8, require_active_version),
                     max_port_share_level = COALESCE($9, max_port_share_level),
                     cors_behavior = COALESCE($10, cors_behavior),
                     updated_at = now()
                   WHERE id = $1 AND NOT deleted"#,
                id,
                c.name,
                c.display_name,
                c.description,
                c.icon,
                c.allow_user_cancel_workspace_jobs,
                c.deprecated,
                c.require_active_version,
                c.max_port_share_level,
                c.cors_behavior
            )
            .execute(&mut *tx)
            .await?;
            if let Some(s) = &c.schedule {
                sqlx::query!(
                    r#"UPDATE templates SET
                         default_ttl_ms = $2, activity_bump_ms = $3,
                         autostop_requirement_days_of_week = $4, autostop_requirement_weeks = $5,
                         autostart_allowed_days = $6, allow_user_autostart = $7,
                         allow_user_autostop = $8, failure_ttl_ms = $9, time_til_dormant_ms = $10,
                         time_til_dormant_autodelete_ms = $11
                       WHERE id = $1 AND NOT deleted"#,
                    id,
                    s.default_ttl_ms,
                    s.activity_bump_ms,
                    s.autostop_requirement_days_of_week,
                    s.autostop_requirement_weeks,
                    s.autostart_allowed_days,
                    s.allow_user_autostart,
                    s.allow_user_autostop,
                    s.failure_ttl_ms,
                    s.time_til_dormant_ms,
                    s.time_til_dormant_autodelete_ms
                )
                .execute(&mut *tx)
                .await?;
            }
            if c.touch_workspaces_last_used {
                sqlx::query!(
                    "UPDATE workspaces SET last_used_at = now() WHERE template_id = $1 AND NOT deleted",
                    id
                )
                .execute(&mut *tx)
                .await?;
            }
            if c.touch_workspaces_dormant {
                sqlx::query!(
                    r#"UPDATE workspaces SET dormant_at = now()
                       WHERE template_id = $1 AND NOT deleted AND dormant_at IS NOT NULL"#,
                    id
                )
                .execute(&mut *tx)
                .await?;
            }
            let row = template_by_id_in(&mut tx, id).await?;
            audit::append(&mut tx, log).await?;
            tx.commit().await?;
            Ok(row)
        })
        .await
    }

    pub async fn set_active_version(
        &self,
        template: Uuid,
        version: Uuid,
        log: Option<&NewAuditLog>,
    ) -> Result<()> {
        timed("set_active_version", async {
            let mut tx = self.pool.begin().await?;
            let updated = sqlx::query!(
                "UPDATE templates SET active_version_id = $2, updated_at = now() WHERE id = $1 AND NOT deleted",
                template,
                version
            )
            .execute(&mut *tx)
            .await?;
            if updated.rows_affected() == 0 {
                return Err(Error::NotFound);
            }
            audit::append(&mut tx, log).await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    /// Deletes a template unless workspaces still use it; returns false when some do.
    pub async fn delete_template(&self, id: Uuid, log: Option<&NewAuditLog>) -> Result<bool> {
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
            audit::append(&mut tx, log).await?;
            tx.commit().await?;
            Ok(true)
        })
        .await
    }
}

pub(super) async fn version_by_id(
    conn: &mut sqlx::PgConnection,
    id: Uuid,
) -> Result<TemplateVersionRow> {
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

async fn template_by_name_in(
    conn: &mut sqlx::PgConnection,
    org: Uuid,
    name: &str,
) -> Result<TemplateRow> {
    Ok(sqlx::query_as!(
        TemplateRow,
        r#"SELECT t.*, o.name AS organization_name, o.display_name AS organization_display_name,
                  o.icon AS organization_icon, u.username AS created_by_username
           FROM templates t
           JOIN organizations o ON o.id = t.organization_id
           JOIN users u ON u.id = t.created_by
           WHERE t.organization_id = $1 AND lower(t.name) = lower($2) AND NOT t.deleted"#,
        org,
        name
    )
    .fetch_one(&mut *conn)
    .await?)
}

/// A template by id. Its own statement (not optional filters shared with the by-name lookup):
/// PostgreSQL re-planned that one on every call, since a generic plan of optional filters
/// cannot use an index.
async fn template_by_id_in(conn: &mut sqlx::PgConnection, id: Uuid) -> Result<TemplateRow> {
    Ok(sqlx::query_as!(
        TemplateRow,
        r#"SELECT t.*, o.name AS organization_name, o.display_name AS organization_display_name,
                  o.icon AS organization_icon, u.username AS created_by_username
           FROM templates t
           JOIN organizations o ON o.id = t.organization_id
           JOIN users u ON u.id = t.created_by
           WHERE t.id = $1 AND NOT t.deleted"#,
        id
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
