//! Resource trees: what jobs produced (resources, their metadata, agents, and each agent's
//! apps, scripts and log sources), loaded together for rendering builds.
//!
//! Two shapes of the same read. A build or two (a workspace, a version) is one statement per
//! job with JSON aggregated per resource: one round trip instead of six. It names one job
//! (`job_id = $1`, not `= ANY($1)`) so that PostgreSQL settles on a generic plan: with an
//! array its cost model always preferred re-planning, which cost more (~0.25 ms) than running
//! the statement. Building that JSON costs PostgreSQL ~0.15 ms per resource, which for a
//! listing of thousands of workspaces was more than everything else together (1.6 s of 10,000
//! workspaces' 3.5 s), so longer lists read each table once by ids in the binary protocol and
//! assemble the trees here.

use std::collections::HashMap;

use sqlx::PgConnection;
use sqlx::types::Json;
use uuid::Uuid;

use super::{
    AgentRow, AgentTree, AppRow, LogSourceRow, MetadataRow, ResourceRow, ResourceTree, Result,
    ScriptRow, Store, timed,
};

/// Up to this many jobs, one JSON statement each; beyond, one statement per table.
const JSON_TREE_MAX_JOBS: usize = 4;

impl Store {
    /// Everything produced by `jobs`, grouped per resource, in creation order per job; each
    /// resource's metadata, agents and their children in display order (dev containers'
    /// sub-agents after the agents they run under).
    pub async fn resources_of_jobs(&self, jobs: &[Uuid]) -> Result<Vec<ResourceTree>> {
        let mut conn = self.pool.acquire().await?;
        trees_in(&mut conn, jobs).await
    }
}

/// [`Store::resources_of_jobs`] on a connection the caller holds.
pub(super) async fn trees_in(conn: &mut PgConnection, jobs: &[Uuid]) -> Result<Vec<ResourceTree>> {
    if jobs.len() > JSON_TREE_MAX_JOBS {
        return trees_by_table(conn, jobs).await;
    }
    let mut trees = Vec::new();
    let mut seen = Vec::with_capacity(jobs.len());
    for job in jobs {
        if !seen.contains(job) {
            seen.push(*job);
            trees.extend(trees_as_json(conn, *job).await?);
        }
    }
    Ok(trees)
}

/// One statement for one job: the metadata and agents (with their apps, scripts and log sources)
/// aggregated as JSON per resource, so a build's tree costs one round trip however deep
/// it is.
async fn trees_as_json(conn: &mut PgConnection, job: Uuid) -> Result<Vec<ResourceTree>> {
    timed("resources_of_jobs_json", async {
        let rows = sqlx::query!(
            r#"SELECT r.id, r.job_id, r.transition, r.type AS kind, r.name, r.hide, r.icon,
                      r.instance_type, r.daily_cost, r.module_path, r.created_at,
                      COALESCE((SELECT jsonb_agg(to_jsonb(m) ORDER BY m.position)
                                FROM workspace_resource_metadata m
                                WHERE m.workspace_resource_id = r.id), '[]') AS "metadata!: Json<Vec<MetadataRow>>",
                      COALESCE((SELECT jsonb_agg(jsonb_build_object(
                                    'agent', to_jsonb(a) - 'auth_token_hash' - 'spec',
                                    'apps', COALESCE((SELECT jsonb_agg(to_jsonb(p) ORDER BY p.display_order, p.slug)
                                                      FROM workspace_apps p WHERE p.agent_id = a.id), '[]'),
                                    'scripts', COALESCE((SELECT jsonb_agg(to_jsonb(s) ORDER BY s.created_at, s.display_name)
                                                         FROM workspace_agent_scripts s WHERE s.agent_id = a.id), '[]'),
                                    'log_sources', COALESCE((SELECT jsonb_agg(to_jsonb(l) ORDER BY l.created_at, l.display_name)
                                                             FROM workspace_agent_log_sources l WHERE l.agent_id = a.id), '[]'))
                                ORDER BY a.parent_id IS NOT NULL, a.display_order, a.name)
                                FROM workspace_agents a WHERE a.resource_id = r.id), '[]') AS "agents!: Json<Vec<AgentTree>>"
               FROM workspace_resources r
               WHERE r.job_id = $1
               ORDER BY r.created_at, r.name"#,
            job
        )
        .fetch_all(&mut *conn)
        .await?;
        Ok(rows
            .into_iter()
            .map(|r| ResourceTree {
                resource: ResourceRow {
                    id: r.id,
                    job_id: r.job_id,
                    transition: r.transition,
                    r#type: r.kind,
                    name: r.name,
                    hide: r.hide,
                    icon: r.icon,
                    instance_type: r.instance_type,
                    daily_cost: r.daily_cost,
                    module_path: r.module_path,
                    created_at: r.created_at,
                },
                metadata: r.metadata.0,
                agents: r.agents.0,
            })
            .collect())
    })
    .await
}

async fn trees_by_table(conn: &mut PgConnection, jobs: &[Uuid]) -> Result<Vec<ResourceTree>> {
    timed("resources_of_jobs_by_table", async {
        let resources = sqlx::query_as!(
            ResourceRow,
            "SELECT * FROM workspace_resources WHERE job_id = ANY($1) ORDER BY created_at, name",
            jobs
        )
        .fetch_all(&mut *conn)
        .await?;
        if resources.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<Uuid> = resources.iter().map(|r| r.id).collect();
        let metadata = sqlx::query_as!(
            MetadataRow,
            "SELECT * FROM workspace_resource_metadata WHERE workspace_resource_id = ANY($1) ORDER BY position",
            &ids
        )
        .fetch_all(&mut *conn)
        .await?;
        // Neither the token's hash nor the stored spec: rendering needs neither, and the
        // JSON shape leaves them out too.
        let agents = sqlx::query_as!(
            AgentRow,
            r#"SELECT id, resource_id, name, NULL::bytea AS auth_token_hash, auth_instance_id,
                      architecture, operating_system, directory, environment_variables,
                      connection_timeout_seconds, troubleshooting_url, motd_file, display_apps,
                      api_key_scope, display_order, created_at, updated_at, first_connected_at,
                      last_connected_at, disconnected_at, lifecycle_state, started_at, ready_at,
                      version, api_version, expanded_directory, logs_length, logs_overflowed,
                      subsystems, parent_id
               FROM workspace_agents WHERE resource_id = ANY($1)
               ORDER BY parent_id IS NOT NULL, display_order, name"#,
            &ids
        )
        .fetch_all(&mut *conn)
        .await?;
        let agent_ids: Vec<Uuid> = agents.iter().map(|a| a.id).collect();
        let apps = sqlx::query_as!(
            AppRow,
            "SELECT * FROM workspace_apps WHERE agent_id = ANY($1) ORDER BY display_order, slug",
            &agent_ids
        )
        .fetch_all(&mut *conn)
        .await?;
        let scripts = sqlx::query_as!(
            ScriptRow,
            "SELECT * FROM workspace_agent_scripts WHERE agent_id = ANY($1) ORDER BY created_at, display_name",
            &agent_ids
        )
        .fetch_all(&mut *conn)
        .await?;
        let sources = sqlx::query_as!(
            LogSourceRow,
            "SELECT * FROM workspace_agent_log_sources WHERE agent_id = ANY($1) ORDER BY created_at, display_name",
            &agent_ids
        )
        .fetch_all(&mut *conn)
        .await?;
        let mut apps_by_agent = group(apps, |a: &AppRow| a.agent_id);
        let mut scripts_by_agent = group(scripts, |s: &ScriptRow| s.agent_id);
        let mut sources_by_agent = group(sources, |l: &LogSourceRow| l.agent_id);
        let mut agents_by_resource = group(
            agents.into_iter().map(|agent| AgentTree {
                apps: apps_by_agent.remove(&agent.id).unwrap_or_default(),
                scripts: scripts_by_agent.remove(&agent.id).unwrap_or_default(),
                log_sources: sources_by_agent.remove(&agent.id).unwrap_or_default(),
                agent,
            }),
            |t: &AgentTree| t.agent.resource_id,
        );
        let mut metadata_by_resource =
            group(metadata, |m: &MetadataRow| m.workspace_resource_id);
        Ok(resources
            .into_iter()
            .map(|resource| ResourceTree {
                metadata: metadata_by_resource.remove(&resource.id).unwrap_or_default(),
                agents: agents_by_resource.remove(&resource.id).unwrap_or_default(),
                resource,
            })
            .collect())
    })
    .await
}

/// Groups rows by a key, keeping their order within each group.
fn group<T>(rows: impl IntoIterator<Item = T>, key: impl Fn(&T) -> Uuid) -> HashMap<Uuid, Vec<T>> {
    let mut groups: HashMap<Uuid, Vec<T>> = HashMap::new();
    for row in rows {
        groups.entry(key(&row)).or_default().push(row);
    }
    groups
}
