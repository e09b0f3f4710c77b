//! What rendering builds reads besides the builds themselves (their jobs, resource trees and
//! the daemons that could run them), on one pooled connection. Read statement by statement
//! from the pool, each paid a connection's checkout and its return, where sqlx pings the
//! connection (a round trip and a backend wake-up): for a workspace GET that overhead cost
//! PostgreSQL about as much CPU as the statements themselves.

use std::collections::HashSet;

use sqlx::PgConnection;
use uuid::Uuid;

use super::daemons::daemons_in;
use super::resource_trees::trees_in;
use super::workspace_build_rows::workspace_build_job;
use super::workspaces::{latest_builds_in, workspace_by, workspaces_by_ids_in};
use super::{BuildRow, DaemonRow, JobRow, ResourceTree, Result, Store, WorkspaceRow, timed};

/// The jobs, resource trees and daemons of some builds.
#[derive(Debug)]
pub struct BuildFacts {
    pub jobs: Vec<JobRow>,
    pub trees: Vec<ResourceTree>,
    /// The daemons of the jobs' organization when they share one, else all.
    pub daemons: Vec<DaemonRow>,
}

impl Store {
    /// The facts of `builds`, read on one connection.
    pub async fn build_facts(&self, builds: &[BuildRow]) -> Result<BuildFacts> {
        timed("build_facts", async {
            let mut conn = self.pool.acquire().await?;
            facts_in(&mut conn, builds).await
        })
        .await
    }

    /// The newest build of each workspace with its facts, read on one connection.
    pub async fn latest_builds_with_facts(
        &self,
        workspaces: &[Uuid],
    ) -> Result<(Vec<BuildRow>, BuildFacts)> {
        timed("latest_builds_with_facts", async {
            let mut conn = self.pool.acquire().await?;
            let builds = latest_builds_in(&mut conn, workspaces).await?;
            let facts = facts_in(&mut conn, &builds).await?;
            Ok((builds, facts))
        })
        .await
    }

    /// A workspace (deleted ones only when asked for) with its newest build and that build's
    /// facts, read on one connection.
    pub async fn workspace_with_latest_build(
        &self,
        id: Uuid,
        include_deleted: bool,
    ) -> Result<(WorkspaceRow, Vec<BuildRow>, BuildFacts)> {
        timed("workspace_with_latest_build", async {
            let mut conn = self.pool.acquire().await?;
            if let Some((workspace, build, job)) =
                workspace_build_job(&mut conn, id, include_deleted).await?
            {
                let facts = facts_of_jobs(&mut conn, vec![job]).await?;
                return Ok((workspace, vec![build], facts));
            }
            // Not found, or a workspace without a build: its parts one by one, as before.
            let workspace = workspace_by(&mut conn, id, include_deleted).await?;
            let (builds, jobs) = match latest_build_with_job(&mut conn, id).await? {
                Some((build, job)) => (vec![build], vec![job]),
                None => (Vec::new(), Vec::new()),
            };
            let facts = facts_of_jobs(&mut conn, jobs).await?;
            Ok((workspace, builds, facts))
        })
        .await
    }

    /// Workspaces by id (in the order of `ids`) with their newest builds and those builds'
    /// facts, read on one connection.
    pub async fn workspaces_with_latest_builds(
        &self,
        ids: &[Uuid],
    ) -> Result<(Vec<WorkspaceRow>, Vec<BuildRow>, BuildFacts)> {
        timed("workspaces_with_latest_builds", async {
            let mut conn = self.pool.acquire().await?;
            let workspaces = workspaces_by_ids_in(&mut conn, ids).await?;
            let builds = latest_builds_in(&mut conn, ids).await?;
            let facts = facts_in(&mut conn, &builds).await?;
            Ok((workspaces, builds, facts))
        })
        .await
    }
}

async fn facts_in(conn: &mut PgConnection, builds: &[BuildRow]) -> Result<BuildFacts> {
    if builds.is_empty() {
        return Ok(BuildFacts {
            jobs: Vec::new(),
            trees: Vec::new(),
            daemons: Vec::new(),
        });
    }
    let job_ids: Vec<Uuid> = builds.iter().map(|b| b.job_id).collect();
    let jobs = jobs_in(conn, &job_ids).await?;
    facts_of_jobs(conn, jobs).await
}

/// The facts of builds whose jobs are already read.
async fn facts_of_jobs(conn: &mut PgConnection, jobs: Vec<JobRow>) -> Result<BuildFacts> {
    if jobs.is_empty() {
        return Ok(BuildFacts {
            jobs,
            trees: Vec::new(),
            daemons: Vec::new(),
        });
    }
    let job_ids: Vec<Uuid> = jobs.iter().map(|j| j.id).collect();
    let trees = trees_in(conn, &job_ids).await?;
    let orgs: HashSet<Uuid> = jobs.iter().map(|j| j.organization_id).collect();
    let org = match orgs.len() {
        1 => orgs.into_iter().next(),
        _ => None,
    };
    let daemons = daemons_in(conn, org, None).await?;
    Ok(BuildFacts {
        jobs,
        trees,
        daemons,
    })
}

/// Jobs by id. One id is its own statement: with an array PostgreSQL re-plans every call.
async fn jobs_in(conn: &mut PgConnection, ids: &[Uuid]) -> Result<Vec<JobRow>> {
    if let [id] = ids {
        return Ok(
            sqlx::query_as!(JobRow, "SELECT * FROM provisioner_jobs WHERE id = $1", id)
                .fetch_optional(&mut *conn)
                .await?
                .into_iter()
                .collect(),
        );
    }
    Ok(sqlx::query_as!(
        JobRow,
        "SELECT * FROM provisioner_jobs WHERE id = ANY($1)",
        ids
    )
    .fetch_all(&mut *conn)
    .await?)
}

/// A workspace's newest build and its job in one statement: a workspace GET reads both, and
/// each statement costs a round trip and PostgreSQL's per-statement work, which for these
/// primary-key reads is most of what they cost.
async fn latest_build_with_job(
    conn: &mut PgConnection,
    workspace: Uuid,
) -> Result<Option<(BuildRow, JobRow)>> {
    let Some(r) = sqlx::query!(
        r#"SELECT b.id, b.workspace_id, b.template_version_id, b.build_number, b.transition,
                  b.initiator_id, b.job_id, b.reason, b.daily_cost, b.deadline, b.max_deadline,
                  b.created_at, b.updated_at, w.name AS workspace_name,
                  w.owner_id AS workspace_owner_id, u.username AS owner_username,
                  u.avatar_url AS owner_avatar_url, v.name AS template_version_name,
                  i.username AS initiator_username, b.template_version_preset_id,
                  b.has_ai_task, b.ai_task_sidebar_app_id, b.has_external_agent,
                  j.created_at AS job_created_at, j.updated_at AS job_updated_at,
                  j.started_at AS job_started_at, j.canceled_at AS job_canceled_at,
                  j.completed_at AS job_completed_at, j.error AS job_error,
                  j.error_code AS job_error_code, j.organization_id AS job_organization_id,
                  j.initiator_id AS job_initiator_id, j.provisioner AS job_provisioner,
                  j.storage_method AS job_storage_method, j.file_id AS job_file_id,
                  j.type AS job_type, j.input AS job_input, j.worker_id AS job_worker_id,
                  j.tags AS job_tags, j.tags_key AS job_tags_key,
                  j.logs_length AS job_logs_length, j.logs_overflowed AS job_logs_overflowed
           FROM workspace_builds b
           JOIN workspaces w ON w.id = b.workspace_id
           JOIN users u ON u.id = w.owner_id
           JOIN users i ON i.id = b.initiator_id
           JOIN template_versions v ON v.id = b.template_version_id
           JOIN provisioner_jobs j ON j.id = b.job_id
           WHERE b.workspace_id = $1
           ORDER BY b.build_number DESC
           LIMIT 1"#,
        workspace
    )
    .fetch_optional(&mut *conn)
    .await?
    else {
        return Ok(None);
    };
    let job = JobRow {
        id: r.job_id,
        created_at: r.job_created_at,
        updated_at: r.job_updated_at,
        started_at: r.job_started_at,
        canceled_at: r.job_canceled_at,
        completed_at: r.job_completed_at,
        error: r.job_error,
        error_code: r.job_error_code,
        organization_id: r.job_organization_id,
        initiator_id: r.job_initiator_id,
        provisioner: r.job_provisioner,
        storage_method: r.job_storage_method,
        file_id: r.job_file_id,
        r#type: r.job_type,
        input: r.job_input,
        worker_id: r.job_worker_id,
        tags: r.job_tags,
        tags_key: r.job_tags_key,
        logs_length: r.job_logs_length,
        logs_overflowed: r.job_logs_overflowed,
    };
    let build = BuildRow {
        id: r.id,
        workspace_id: r.workspace_id,
        template_version_id: r.template_version_id,
        build_number: r.build_number,
        transition: r.transition,
        initiator_id: r.initiator_id,
        job_id: r.job_id,
        reason: r.reason,
        daily_cost: r.daily_cost,
        deadline: r.deadline,
        max_deadline: r.max_deadline,
        created_at: r.created_at,
        updated_at: r.updated_at,
        workspace_name: r.workspace_name,
        workspace_owner_id: r.workspace_owner_id,
        owner_username: r.owner_username,
        owner_avatar_url: r.owner_avatar_url,
        template_version_name: r.template_version_name,
        initiator_username: r.initiator_username,
        template_version_preset_id: r.template_version_preset_id,
        has_ai_task: r.has_ai_task,
        ai_task_sidebar_app_id: r.ai_task_sidebar_app_id,
        has_external_agent: r.has_external_agent,
    };
    Ok(Some((build, job)))
}
