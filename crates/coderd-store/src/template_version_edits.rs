//! Changes to template versions after their import: name and message, archiving, and the
//! version before another.

use uuid::Uuid;

use super::templates::{TemplateVersionRow, version_by_id};
use super::{NewAuditLog, Result, Store, audit, timed};

/// What archiving one version came to.
#[derive(Debug, Clone)]
pub enum Archiving {
    Done(Box<TemplateVersionRow>),
    /// The version is its template's active one, which must stay usable.
    IsActive,
}

impl Store {
    /// Renames a version and replaces its message; a name its template already uses is a
    /// conflict.
    pub async fn update_template_version(
        &self,
        id: Uuid,
        name: &str,
        message: &str,
        log: Option<&NewAuditLog>,
    ) -> Result<TemplateVersionRow> {
        timed("update_template_version", async {
            let mut tx = self.pool.begin().await?;
            sqlx::query!(
                "UPDATE template_versions SET name = $2, message = $3, updated_at = now() WHERE id = $1",
                id,
                name,
                message
            )
            .execute(&mut *tx)
            .await?;
            let row = version_by_id(&mut tx, id).await?;
            audit::append(&mut tx, log).await?;
            tx.commit().await?;
            Ok(row)
        })
        .await
    }

    /// Archives or restores one version. The active version is refused in the same statement,
    /// so a promotion racing the archive cannot leave the template on an archived version.
    pub async fn set_template_version_archived(
        &self,
        id: Uuid,
        archived: bool,
        log: Option<&NewAuditLog>,
    ) -> Result<Archiving> {
        timed("set_template_version_archived", async {
            let mut tx = self.pool.begin().await?;
            let updated = sqlx::query!(
                "UPDATE template_versions v SET archived = $2, updated_at = now()
                 WHERE v.id = $1
                   AND NOT ($2 AND EXISTS (SELECT 1 FROM templates t WHERE t.active_version_id = v.id))",
                id,
                archived
            )
            .execute(&mut *tx)
            .await?;
            if updated.rows_affected() == 0 {
                return Ok(Archiving::IsActive);
            }
            let row = version_by_id(&mut tx, id).await?;
            audit::append(&mut tx, log).await?;
            tx.commit().await?;
            Ok(Archiving::Done(Box::new(row)))
        })
        .await
    }

    /// Archives a template's versions that nothing needs: not active, not the version of any
    /// workspace's latest build, and (unless `all`) whose import failed. Returns their ids;
    /// `log` is written when there were any.
    pub async fn archive_unused_template_versions(
        &self,
        template: Uuid,
        all: bool,
        log: Option<&NewAuditLog>,
    ) -> Result<Vec<Uuid>> {
        timed("archive_unused_template_versions", async {
            let mut tx = self.pool.begin().await?;
            let archived = sqlx::query_scalar!(
                r#"UPDATE template_versions v SET archived = true, updated_at = now()
                   FROM provisioner_jobs j
                   WHERE v.template_id = $1 AND NOT v.archived AND j.id = v.job_id
                     AND j.completed_at IS NOT NULL
                     AND ($2 OR coalesce(j.error, '') <> '')
                     AND NOT EXISTS (SELECT 1 FROM templates t WHERE t.active_version_id = v.id)
                     AND NOT EXISTS (
                         SELECT 1 FROM workspaces w
                         JOIN LATERAL (SELECT b.template_version_id FROM workspace_builds b
                                       WHERE b.workspace_id = w.id
                                       ORDER BY b.build_number DESC LIMIT 1) latest ON true
                         WHERE w.template_id = $1 AND NOT w.deleted
                           AND latest.template_version_id = v.id)
                   RETURNING v.id"#,
                template,
                all
            )
            .fetch_all(&mut *tx)
            .await?;
            if !archived.is_empty() {
                audit::append(&mut tx, log).await?;
            }
            tx.commit().await?;
            Ok(archived)
        })
        .await
    }

    /// The version of `template` created just before `version`, if any.
    pub async fn previous_template_version(
        &self,
        template: Uuid,
        version: &TemplateVersionRow,
    ) -> Result<TemplateVersionRow> {
        timed("previous_template_version", async {
            let id = sqlx::query_scalar!(
                "SELECT id FROM template_versions
                 WHERE template_id = $1 AND (created_at, id) < ($2, $3)
                 ORDER BY created_at DESC, id DESC LIMIT 1",
                template,
                version.created_at,
                version.id
            )
            .fetch_one(&self.pool)
            .await?;
            let mut conn = self.pool.acquire().await?;
            version_by_id(&mut conn, id).await
        })
        .await
    }
}
