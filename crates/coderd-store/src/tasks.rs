//! `tasks`: Coder's Tasks, each tied to the workspace it runs in. A task is live while it is
//! not deleted and its workspace is not: deleting the workspace by any door ends the task.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{Result, Store, timed};
use coderd_authz::Filter;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskRow {
    pub id: Uuid,
    pub organization_id: Uuid,
    pub owner_id: Uuid,
    pub name: String,
    pub display_name: String,
    pub workspace_id: Uuid,
    pub template_version_id: Uuid,
    pub prompt: String,
    pub created_at: DateTime<Utc>,
}

/// A task to insert with its workspace; the organization, owner, workspace and version are
/// the workspace's and its first build's.
#[derive(Debug, Clone)]
pub struct NewTask {
    pub id: Uuid,
    pub name: String,
    pub display_name: String,
    pub prompt: String,
}

/// What `GET /tasks` narrows to, besides what the caller may see.
#[derive(Debug, Clone, Default)]
pub struct TaskQuery {
    pub owner: Option<Uuid>,
    pub organization: Option<Uuid>,
}

/// Inserts `task` for the workspace being created, inside its transaction.
pub(crate) async fn insert_task(
    tx: &mut sqlx::PgConnection,
    task: &NewTask,
    workspace: &super::NewWorkspace,
    version: Uuid,
    now: DateTime<Utc>,
) -> Result<()> {
    sqlx::query!(
        r#"INSERT INTO tasks (id, organization_id, owner_id, name, display_name, workspace_id,
                              template_version_id, prompt, created_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"#,
        task.id,
        workspace.organization_id,
        workspace.owner_id,
        task.name,
        task.display_name,
        workspace.id,
        version,
        task.prompt,
        now
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}

impl Store {
    pub async fn task_by_id(&self, id: Uuid) -> Result<TaskRow> {
        timed("task_by_id", async {
            Ok(sqlx::query_as!(
                TaskRow,
                r#"SELECT t.id, t.organization_id, t.owner_id, t.name, t.display_name,
                          t.workspace_id AS "workspace_id!", t.template_version_id, t.prompt,
                          t.created_at
                   FROM tasks t JOIN workspaces w ON w.id = t.workspace_id
                   WHERE t.id = $1 AND t.deleted_at IS NULL AND NOT w.deleted"#,
                id
            )
            .fetch_one(&self.pool)
            .await?)
        })
        .await
    }

    pub async fn task_by_owner_and_name(&self, owner: Uuid, name: &str) -> Result<TaskRow> {
        timed("task_by_owner_and_name", async {
            Ok(sqlx::query_as!(
                TaskRow,
                r#"SELECT t.id, t.organization_id, t.owner_id, t.name, t.display_name,
                          t.workspace_id AS "workspace_id!", t.template_version_id, t.prompt,
                          t.created_at
                   FROM tasks t JOIN workspaces w ON w.id = t.workspace_id
                   WHERE t.owner_id = $1 AND lower(t.name) = lower($2)
                     AND t.deleted_at IS NULL AND NOT w.deleted
                   ORDER BY t.created_at DESC LIMIT 1"#,
                owner,
                name
            )
            .fetch_one(&self.pool)
            .await?)
        })
        .await
    }

    /// The live tasks `q` names among those whose workspaces `filter` lets the caller see,
    /// newest first.
    pub async fn list_tasks(&self, q: &TaskQuery, filter: &Filter) -> Result<Vec<TaskRow>> {
        timed("list_tasks", async {
            Ok(sqlx::query_as!(
                TaskRow,
                r#"SELECT t.id, t.organization_id, t.owner_id, t.name, t.display_name,
                          t.workspace_id AS "workspace_id!", t.template_version_id, t.prompt,
                          t.created_at
                   FROM tasks t JOIN workspaces w ON w.id = t.workspace_id
                   WHERE t.deleted_at IS NULL AND NOT w.deleted
                     AND ($1 OR w.organization_id = ANY($2)
                          OR (w.owner_id = $3 AND w.organization_id = ANY($4)))
                     AND ($5::uuid IS NULL OR t.owner_id = $5)
                     AND ($6::uuid IS NULL OR t.organization_id = $6)
                   ORDER BY t.created_at DESC, t.id"#,
                filter.all,
                &filter.orgs,
                filter.owner,
                &filter.owner_orgs,
                q.owner,
                q.organization
            )
            .fetch_all(&self.pool)
            .await?)
        })
        .await
    }

    /// Marks a task deleted; false when it already was.
    pub async fn delete_task(&self, id: Uuid, now: DateTime<Utc>) -> Result<bool> {
        timed("delete_task", async {
            let done = sqlx::query!(
                "UPDATE tasks SET deleted_at = $2 WHERE id = $1 AND deleted_at IS NULL",
                id,
                now
            )
            .execute(&self.pool)
            .await?;
            Ok(done.rows_affected() > 0)
        })
        .await
    }
}
