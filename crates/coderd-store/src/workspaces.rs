//! `workspaces`, `workspace_builds` and their parameters.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::build_insert::{BUILD_NUMBER_TAKEN, insert_build};
use super::jobs::{Claimant, JobRow, NewJob};
use super::{Error, NewAuditLog, Result, Store, audit, timed};

/// A workspace with the names the API shows next to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceRow {
    pub id: Uuid,
    pub owner_id: Uuid,
    pub organization_id: Uuid,
    pub template_id: Uuid,
    pub name: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub last_used_at: DateTime<Utc>,
    pub deleted: bool,
    pub autostart_schedule: Option<String>,
    pub ttl_ms: Option<i64>,
    pub automatic_updates: String,
    pub dormant_at: Option<DateTime<Utc>>,
    pub next_start_at: Option<DateTime<Utc>>,
    pub autostart_failed_at: Option<DateTime<Utc>>,
    pub autostart_failure: Option<String>,
    /// Pinned by its owner: listed first for them.
    pub favorite: bool,
    pub owner_username: String,
    pub owner_avatar_url: String,
    pub organization_name: String,
    pub template_name: String,
    pub template_display_name: String,
    pub template_icon: String,
    pub template_allow_user_cancel_workspace_jobs: bool,
    pub template_active_version_id: Uuid,
    pub template_require_active_version: bool,
    pub template_default_ttl_ms: i64,
    pub template_allow_user_autostart: bool,
    pub template_allow_user_autostop: bool,
    pub template_autostart_allowed_days: i16,
    pub template_time_til_dormant_autodelete_ms: i64,
}

/// A build with the names the API shows next to it (its state is fetched separately: it can be
/// large).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildRow {
    pub id: Uuid,
    pub workspace_id: Uuid,
    pub template_version_id: Uuid,
    pub build_number: i32,
    pub transition: String,
    pub initiator_id: Uuid,
    pub job_id: Uuid,
    pub reason: String,
    pub daily_cost: i32,
    pub deadline: Option<DateTime<Utc>>,
    pub max_deadline: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub workspace_name: String,
    pub workspace_owner_id: Uuid,
    pub owner_username: String,
    pub owner_avatar_url: String,
    pub template_version_name: String,
    pub initiator_username: String,
    /// The preset the build was created with (Coder's `template_version_preset_id`).
    pub template_version_preset_id: Option<Uuid>,
    /// What the finished build recorded about AI tasks and external agents (`None` until it
    /// finished).
    pub has_ai_task: Option<bool>,
    pub ai_task_sidebar_app_id: Option<Uuid>,
    pub has_external_agent: Option<bool>,
}

#[derive(Debug, Clone)]
pub struct NewWorkspace {
    pub id: Uuid,
    pub owner_id: Uuid,
    pub organization_id: Uuid,
    pub template_id: Uuid,
    pub name: String,
    pub autostart_schedule: Option<String>,
    pub ttl_ms: Option<i64>,
    pub automatic_updates: String,
    pub next_start_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone)]
pub struct NewBuild {
    pub id: Uuid,
    pub workspace_id: Uuid,
    pub template_version_id: Uuid,
    pub transition: String,
    pub initiator_id: Uuid,
    pub reason: String,
    pub parameters: Vec<(String, String)>,
    /// Start from no provisioner state (an orphaning delete forgets the resources instead of
    /// destroying them).
    pub orphan: bool,
    /// Start from this provisioner state instead of the latest build's (`coder state push`).
    pub state: Option<Vec<u8>>,
    /// Refuse (as if a build were active) unless this is still the latest build.
    pub expect_latest: Option<Uuid>,
    pub preset_id: Option<Uuid>,
    pub job: NewJob,
}

/// A search over workspaces (`GET /workspaces?q=...`), already parsed.
#[derive(Debug, Clone, Default)]
pub struct WorkspaceQuery {
    pub owner: Option<Uuid>,
    /// Substring of the name, case-insensitive.
    pub name: String,
    pub template: String,
    pub status: String,
    pub deleted: bool,
    /// Whether the latest build has an external agent (Coder's `has_external_agent`); while
    /// that build has not succeeded, whether its template version declares one.
    pub has_external_agent: Option<bool>,
    pub limit: i64,
    pub offset: i64,
}

impl Store {
    /// Creates a workspace and its first build (and the build's job) in one transaction.
    /// Creates a workspace, its first build and, for a Coder Task, the task: in one
    /// transaction, so the build's job never runs without its task's prompt.
    pub async fn create_workspace(
        &self,
        w: &NewWorkspace,
        build: &NewBuild,
        task: Option<&super::NewTask>,
        log: &[NewAuditLog],
        claim: Option<&Claimant<'_>>,
    ) -> Result<(WorkspaceRow, BuildRow, JobRow)> {
        timed("create_workspace", async {
            let mut tx = self.pool.begin().await?;
            let now = Utc::now();
            // Holds the owner against a concurrent deletion (`delete_user` locks the row and
            // then looks for workspaces), and refuses an owner deleted since the caller looked.
            sqlx::query_scalar!(
                "SELECT id FROM users WHERE id = $1 AND NOT deleted FOR KEY SHARE",
                w.owner_id
            )
            .fetch_optional(&mut *tx)
            .await?
            .ok_or(super::Error::NotFound)?;
            sqlx::query!(
                r#"INSERT INTO workspaces (id, owner_id, organization_id, template_id, name, created_at,
                       updated_at, last_used_at, autostart_schedule, ttl_ms, automatic_updates,
                       next_start_at)
                   VALUES ($1, $2, $3, $4, $5, $6, $6, $6, $7, $8, $9, $10)"#,
                w.id,
                w.owner_id,
                w.organization_id,
                w.template_id,
                w.name,
                now,
                w.autostart_schedule,
                w.ttl_ms,
                w.automatic_updates,
                w.next_start_at
            )
            .execute(&mut *tx)
            .await?;
            if let Some(task) = task {
                super::tasks::insert_task(&mut tx, task, w, build.template_version_id, now)
                    .await?;
            }
            let (build, job) = insert_build(&mut tx, build, None, claim, now)
                .await?
                .ok_or(Error::NotFound)?;
            let workspace = workspace_by(&mut tx, w.id, true).await?;
            audit::append(&mut tx, log).await?;
            tx.commit().await?;
            Ok((workspace, build, job))
        })
        .await
    }

    /// Creates the next build of a workspace, starting from the previous build's state (none
    /// for an orphaning build), unless a build is still active (then `None`; also when another
    /// build of the workspace was created meanwhile). One autocommit statement, without a lock:
    /// [`insert_build`] says why concurrent creates stay one build at a time. A deleted
    /// workspace is [`Error::NotFound`]. With `claim`, the job may be claimed by its insert
    /// (see [`insert_build`]).
    pub async fn create_build(
        &self,
        build: &NewBuild,
        log: Option<&NewAuditLog>,
        claim: Option<&Claimant<'_>>,
    ) -> Result<Option<(BuildRow, JobRow)>> {
        timed("create_build", async {
            let mut conn = self.pool.acquire().await?;
            match insert_build(&mut conn, build, log, claim, Utc::now()).await {
                Ok(Some(created)) => Ok(Some(created)),
                Err(Error::Conflict { constraint }) if constraint == BUILD_NUMBER_TAKEN => Ok(None),
                Ok(None) => {
                    // Refused: a deleted workspace (404) or an active build (409)? A second
                    // read, on this path alone.
                    let live = sqlx::query_scalar!(
                        "SELECT NOT deleted AS \"live!\" FROM workspaces WHERE id = $1",
                        build.workspace_id
                    )
                    .fetch_optional(&mut *conn)
                    .await?;
                    match live {
                        Some(true) => Ok(None),
                        _ => Err(Error::NotFound),
                    }
                }
                Err(e) => Err(e),
            }
        })
        .await
    }

    pub async fn workspace_by_id(&self, id: Uuid, include_deleted: bool) -> Result<WorkspaceRow> {
        timed("workspace_by_id", async {
            let mut conn = self.pool.acquire().await?;
            workspace_by(&mut conn, id, include_deleted).await
        })
        .await
    }

    pub async fn workspace_by_owner_and_name(
        &self,
        owner: Uuid,
        name: &str,
    ) -> Result<WorkspaceRow> {
        timed("workspace_by_owner_and_name", async {
            let id = sqlx::query_scalar!(
                "SELECT id FROM workspaces WHERE owner_id = $1 AND lower(name) = lower($2) AND NOT deleted",
                owner,
                name
            )
            .fetch_one(&self.pool)
            .await?;
            let mut conn = self.pool.acquire().await?;
            workspace_by(&mut conn, id, false).await
        })
        .await
    }

    /// Workspaces by id, in the order of `ids`.
    pub async fn workspaces_by_ids(&self, ids: &[Uuid]) -> Result<Vec<WorkspaceRow>> {
        timed("workspaces_by_ids", async {
            let mut conn = self.pool.acquire().await?;
            workspaces_by_ids_in(&mut conn, ids).await
        })
        .await
    }

    /// The newest build of each workspace.
    pub async fn latest_builds(&self, workspaces: &[Uuid]) -> Result<Vec<BuildRow>> {
        timed("latest_builds", async {
            let mut conn = self.pool.acquire().await?;
            latest_builds_in(&mut conn, workspaces).await
        })
        .await
    }

    /// Builds of a workspace, newest first.
    pub async fn builds_of(
        &self,
        workspace: Uuid,
        limit: i64,
        offset: i64,
    ) -> Result<Vec<BuildRow>> {
        timed("builds_of", async {
            Ok(sqlx::query_as!(
                BuildRow,
                r#"SELECT b.id, b.workspace_id, b.template_version_id, b.build_number, b.transition,
                          b.initiator_id, b.job_id, b.reason, b.daily_cost, b.deadline, b.max_deadline,
                          b.created_at, b.updated_at, w.name AS workspace_name,
                          w.owner_id AS workspace_owner_id, u.username AS owner_username,
                          u.avatar_url AS owner_avatar_url, v.name AS template_version_name,
                          i.username AS initiator_username, b.template_version_preset_id,
                          b.has_ai_task, b.ai_task_sidebar_app_id, b.has_external_agent
                   FROM workspace_builds b
                   JOIN workspaces w ON w.id = b.workspace_id
                   JOIN users u ON u.id = w.owner_id
                   JOIN users i ON i.id = b.initiator_id
                   JOIN template_versions v ON v.id = b.template_version_id
                   WHERE b.workspace_id = $1
                   ORDER BY b.build_number DESC LIMIT $2 OFFSET $3"#,
                workspace,
                limit,
                offset
            )
            .fetch_all(&self.pool)
            .await?)
        })
        .await
    }

    pub async fn build_by_id(&self, id: Uuid) -> Result<BuildRow> {
        timed("build_by_id", async {
            let mut conn = self.pool.acquire().await?;
            build_by(&mut conn, id).await
        })
        .await
    }

    pub async fn build_by_job(&self, job: Uuid) -> Result<BuildRow> {
        timed("build_by_job", async {
            let id = sqlx::query_scalar!("SELECT id FROM workspace_builds WHERE job_id = $1", job)
                .fetch_one(&self.pool)
                .await?;
            let mut conn = self.pool.acquire().await?;
            build_by(&mut conn, id).await
        })
        .await
    }

    pub async fn build_state(&self, id: Uuid) -> Result<Vec<u8>> {
        timed("build_state", async {
            let state = sqlx::query_scalar!(
                "SELECT provisioner_state FROM workspace_builds WHERE id = $1",
                id
            )
            .fetch_one(&self.pool)
            .await?;
            Ok(state.unwrap_or_default())
        })
        .await
    }

    pub async fn build_parameters(&self, build: Uuid) -> Result<Vec<(String, String)>> {
        timed("build_parameters", async {
            let rows = sqlx::query!(
                "SELECT name, value FROM workspace_build_parameters WHERE workspace_build_id = $1 ORDER BY name",
                build
            )
            .fetch_all(&self.pool)
            .await?;
            Ok(rows.into_iter().map(|r| (r.name, r.value)).collect())
        })
        .await
    }
}

pub(super) async fn workspace_by(
    conn: &mut sqlx::PgConnection,
    id: Uuid,
    include_deleted: bool,
) -> Result<WorkspaceRow> {
    Ok(sqlx::query_as!(
        WorkspaceRow,
        r#"SELECT w.*, u.username AS owner_username, u.avatar_url AS owner_avatar_url,
                  o.name AS organization_name, t.name AS template_name,
                  t.display_name AS template_display_name, t.icon AS template_icon,
                  t.allow_user_cancel_workspace_jobs AS template_allow_user_cancel_workspace_jobs,
                  t.active_version_id AS template_active_version_id,
                  t.require_active_version AS template_require_active_version,
                  t.default_ttl_ms AS template_default_ttl_ms,
                  t.allow_user_autostart AS template_allow_user_autostart,
                  t.allow_user_autostop AS template_allow_user_autostop,
                  t.autostart_allowed_days AS template_autostart_allowed_days,
                  t.time_til_dormant_autodelete_ms AS template_time_til_dormant_autodelete_ms
           FROM workspaces w
           JOIN users u ON u.id = w.owner_id
           JOIN organizations o ON o.id = w.organization_id
           JOIN templates t ON t.id = w.template_id
           WHERE w.id = $1 AND ($2 OR NOT w.deleted)"#,
        id,
        include_deleted
    )
    .fetch_one(&mut *conn)
    .await?)
}

async fn build_by(conn: &mut sqlx::PgConnection, id: Uuid) -> Result<BuildRow> {
    Ok(sqlx::query_as!(
        BuildRow,
        r#"SELECT b.id, b.workspace_id, b.template_version_id, b.build_number, b.transition,
                  b.initiator_id, b.job_id, b.reason, b.daily_cost, b.deadline, b.max_deadline,
                  b.created_at, b.updated_at, w.name AS workspace_name,
                  w.owner_id AS workspace_owner_id, u.username AS owner_username,
                  u.avatar_url AS owner_avatar_url, v.name AS template_version_name,
                  i.username AS initiator_username, b.template_version_preset_id,
                  b.has_ai_task, b.ai_task_sidebar_app_id, b.has_external_agent
           FROM workspace_builds b
           JOIN workspaces w ON w.id = b.workspace_id
           JOIN users u ON u.id = w.owner_id
           JOIN users i ON i.id = b.initiator_id
           JOIN template_versions v ON v.id = b.template_version_id
           WHERE b.id = $1"#,
        id
    )
    .fetch_one(&mut *conn)
    .await?)
}

/// Everything a build job's payload needs, in one query.
#[derive(Debug, Clone)]
pub struct BuildContext {
    pub build_id: Uuid,
    pub transition: String,
    pub state: Option<Vec<u8>>,
    pub parameter_names: Vec<String>,
    pub parameter_values: Vec<String>,
    pub workspace_id: Uuid,
    pub workspace_name: String,
    pub owner_id: Uuid,
    pub owner_username: String,
    pub owner_email: String,
    pub owner_name: String,
    pub template_id: Uuid,
    pub template_name: String,
    pub version_name: String,
    pub user_variable_values: serde_json::Value,
    /// The owner's secrets the version declares (`coder_secret`), as stored at import.
    pub secret_requirements: serde_json::Value,
    /// The external auth providers the version names (`coder_external_auth`), as stored at
    /// import: `[{id, optional}]`.
    pub external_auth_providers: serde_json::Value,
    /// The workspace's task and its prompt, when it is a task's.
    pub task_id: Option<Uuid>,
    pub task_prompt: Option<String>,
    /// What the build's deadlines will follow from (the workspace's and its template's schedule
    /// settings), read now so that its completion can be one statement, guarded on them.
    pub ttl_ms: Option<i64>,
    pub autostart_schedule: Option<String>,
    pub default_ttl_ms: i64,
    pub allow_user_autostop: bool,
    pub allow_user_autostart: bool,
    pub autostop_requirement_days_of_week: i16,
    pub autostop_requirement_weeks: i64,
    pub autostart_allowed_days: i16,
}

impl BuildContext {
    /// The schedule facts its completion can be prepared from.
    pub fn completion_facts(&self) -> super::CompletionFacts {
        super::CompletionFacts::of(super::lifecycle::ScheduleFacts {
            transition: self.transition.clone(),
            workspace_id: self.workspace_id,
            ttl_ms: self.ttl_ms,
            autostart_schedule: self.autostart_schedule.clone(),
            default_ttl_ms: self.default_ttl_ms,
            allow_user_autostop: self.allow_user_autostop,
            allow_user_autostart: self.allow_user_autostart,
            autostop_requirement_days_of_week: self.autostop_requirement_days_of_week,
            autostop_requirement_weeks: self.autostop_requirement_weeks,
            autostart_allowed_days: self.autostart_allowed_days,
        })
    }
}

impl Store {
    /// The build a job runs, with its workspace, owner, template, version, state, parameters,
    /// the secrets its version declares and its workspace's task.
    pub async fn build_context(&self, build: Uuid) -> Result<BuildContext> {
        timed("build_context", async {
            Ok(sqlx::query_as!(
                BuildContext,
                r#"SELECT b.id AS build_id, b.transition, b.provisioner_state AS state,
                          COALESCE((SELECT array_agg(p.name ORDER BY p.name) FROM workspace_build_parameters p
                                    WHERE p.workspace_build_id = b.id), '{}') AS "parameter_names!",
                          COALESCE((SELECT array_agg(p.value ORDER BY p.name) FROM workspace_build_parameters p
                                    WHERE p.workspace_build_id = b.id), '{}') AS "parameter_values!",
                          w.id AS workspace_id, w.name AS workspace_name,
                          u.id AS owner_id, u.username AS owner_username, u.email AS owner_email,
                          u.name AS owner_name, t.id AS template_id, t.name AS template_name,
                          v.name AS version_name, v.user_variable_values, v.secret_requirements,
                          v.external_auth_providers,
                          k.id AS "task_id?", k.prompt AS "task_prompt?",
                          w.ttl_ms, w.autostart_schedule, t.default_ttl_ms, t.allow_user_autostop,
                          t.allow_user_autostart, t.autostop_requirement_days_of_week,
                          t.autostop_requirement_weeks, t.autostart_allowed_days
                   FROM workspace_builds b
                   JOIN workspaces w ON w.id = b.workspace_id
                   JOIN users u ON u.id = w.owner_id
                   JOIN template_versions v ON v.id = b.template_version_id
                   JOIN templates t ON t.id = w.template_id
                   LEFT JOIN tasks k ON k.workspace_id = w.id AND k.deleted_at IS NULL
                   WHERE b.id = $1"#,
                build
            )
            // The job path's pool: it runs for every job, and its generic plan is the custom one.
            .fetch_one(&self.jobs)
            .await?)
        })
        .await
    }

    /// Bumps `last_used_at` of workspaces someone is connected to (the relay's usage), and
    /// the running deadlines of those workspaces (the activity bump, as agent stats do).
    pub async fn mark_workspaces_used(&self, workspaces: &[Uuid]) -> Result<()> {
        timed("mark_workspaces_used", async {
            let mut tx = self.pool.begin().await?;
            sqlx::query!(
                "UPDATE workspaces SET last_used_at = now() WHERE id = ANY($1)",
                workspaces
            )
            .execute(&mut *tx)
            .await?;
            super::lifecycle::bump_deadlines(&mut tx, workspaces).await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }
}

/// The newest build of each workspace. One workspace is its own statement: with an array,
/// PostgreSQL re-plans the statement on every call.
pub(super) async fn latest_builds_in(
    conn: &mut sqlx::PgConnection,
    workspaces: &[Uuid],
) -> Result<Vec<BuildRow>> {
    if let [workspace] = workspaces {
        return Ok(sqlx::query_as!(
            BuildRow,
            r#"SELECT b.id, b.workspace_id, b.template_version_id, b.build_number, b.transition,
                      b.initiator_id, b.job_id, b.reason, b.daily_cost, b.deadline, b.max_deadline,
                      b.created_at, b.updated_at, w.name AS workspace_name,
                      w.owner_id AS workspace_owner_id, u.username AS owner_username,
                      u.avatar_url AS owner_avatar_url, v.name AS template_version_name,
                      i.username AS initiator_username, b.template_version_preset_id,
                      b.has_ai_task, b.ai_task_sidebar_app_id, b.has_external_agent
               FROM workspace_builds b
               JOIN workspaces w ON w.id = b.workspace_id
               JOIN users u ON u.id = w.owner_id
               JOIN users i ON i.id = b.initiator_id
               JOIN template_versions v ON v.id = b.template_version_id
               WHERE b.workspace_id = $1
               ORDER BY b.build_number DESC
               LIMIT 1"#,
            workspace
        )
        .fetch_optional(&mut *conn)
        .await?
        .into_iter()
        .collect());
    }
    Ok(sqlx::query_as!(
        BuildRow,
        r#"SELECT DISTINCT ON (b.workspace_id)
                  b.id, b.workspace_id, b.template_version_id, b.build_number, b.transition,
                  b.initiator_id, b.job_id, b.reason, b.daily_cost, b.deadline, b.max_deadline,
                  b.created_at, b.updated_at, w.name AS workspace_name,
                  w.owner_id AS workspace_owner_id, u.username AS owner_username,
                  u.avatar_url AS owner_avatar_url, v.name AS template_version_name,
                  i.username AS initiator_username, b.template_version_preset_id,
                  b.has_ai_task, b.ai_task_sidebar_app_id, b.has_external_agent
           FROM workspace_builds b
           JOIN workspaces w ON w.id = b.workspace_id
           JOIN users u ON u.id = w.owner_id
           JOIN users i ON i.id = b.initiator_id
           JOIN template_versions v ON v.id = b.template_version_id
           WHERE b.workspace_id = ANY($1)
           ORDER BY b.workspace_id, b.build_number DESC"#,
        workspaces
    )
    .fetch_all(&mut *conn)
    .await?)
}

/// Workspaces by id, in the order of `ids`.
pub(super) async fn workspaces_by_ids_in(
    conn: &mut sqlx::PgConnection,
    ids: &[Uuid],
) -> Result<Vec<WorkspaceRow>> {
    let mut found = sqlx::query_as!(
        WorkspaceRow,
        r#"SELECT w.*, u.username AS owner_username, u.avatar_url AS owner_avatar_url,
                  o.name AS organization_name, t.name AS template_name,
                  t.display_name AS template_display_name, t.icon AS template_icon,
                  t.allow_user_cancel_workspace_jobs AS template_allow_user_cancel_workspace_jobs,
                  t.active_version_id AS template_active_version_id,
                  t.require_active_version AS template_require_active_version,
                  t.default_ttl_ms AS template_default_ttl_ms,
                  t.allow_user_autostart AS template_allow_user_autostart,
                  t.allow_user_autostop AS template_allow_user_autostop,
                  t.autostart_allowed_days AS template_autostart_allowed_days,
                  t.time_til_dormant_autodelete_ms AS template_time_til_dormant_autodelete_ms
           FROM workspaces w
           JOIN users u ON u.id = w.owner_id
           JOIN organizations o ON o.id = w.organization_id
           JOIN templates t ON t.id = w.template_id
           WHERE w.id = ANY($1)"#,
        ids
    )
    .fetch_all(&mut *conn)
    .await?;
    let order: std::collections::HashMap<Uuid, usize> =
        ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    found.sort_by_key(|w| order.get(&w.id).copied().unwrap_or(usize::MAX));
    Ok(found)
}
