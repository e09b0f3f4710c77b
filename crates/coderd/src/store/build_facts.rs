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
            let workspace = workspace_by(&mut conn, id, include_deleted).await?;
            let builds = latest_builds_in(&mut conn, &[id]).await?;
            let facts = facts_in(&mut conn, &builds).await?;
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
