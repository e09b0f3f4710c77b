//! `workspace_resources`, their metadata, agents and apps: what a job produced.

use chrono::{DateTime, Utc};
use codersdk::proto::{self, AgentAuth};
use serde_json::Value;
use uuid::Uuid;

use super::{Result, Store, timed};

#[derive(Debug, Clone, PartialEq)]
pub struct ResourceRow {
    pub id: Uuid,
    pub job_id: Uuid,
    pub transition: String,
    pub r#type: String,
    pub name: String,
    pub hide: bool,
    pub icon: String,
    pub instance_type: String,
    pub daily_cost: i32,
    pub module_path: String,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
pub struct MetadataRow {
    pub workspace_resource_id: Uuid,
    pub position: i32,
    pub key: String,
    pub value: Option<String>,
    pub sensitive: bool,
}

#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
pub struct AgentRow {
    pub id: Uuid,
    pub resource_id: Uuid,
    pub name: String,
    /// Not loaded with a resource tree ([`Store::resources_of_jobs`]): only authenticating an
    /// agent needs it, and that reads the agent on its own.
    #[serde(skip_deserializing)]
    pub auth_token_hash: Option<Vec<u8>>,
    pub auth_instance_id: Option<String>,
    pub architecture: String,
    pub operating_system: String,
    pub directory: String,
    pub environment_variables: Value,
    pub connection_timeout_seconds: i32,
    pub troubleshooting_url: String,
    pub motd_file: String,
    pub display_apps: Vec<String>,
    pub api_key_scope: String,
    pub display_order: i64,
    pub spec: Value,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub first_connected_at: Option<DateTime<Utc>>,
    pub last_connected_at: Option<DateTime<Utc>>,
    pub disconnected_at: Option<DateTime<Utc>>,
    pub lifecycle_state: String,
    pub started_at: Option<DateTime<Utc>>,
    pub ready_at: Option<DateTime<Utc>>,
    pub version: String,
    pub api_version: String,
    pub expanded_directory: String,
    pub logs_length: i32,
    pub logs_overflowed: bool,
    pub subsystems: Vec<String>,
    /// The agent this one runs under: set for a dev container's sub-agent.
    #[serde(default)]
    pub parent_id: Option<Uuid>,
}

#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
pub struct AppRow {
    pub id: Uuid,
    pub agent_id: Uuid,
    pub slug: String,
    pub display_name: String,
    pub icon: String,
    pub command: Option<String>,
    pub url: Option<String>,
    pub external: bool,
    pub subdomain: bool,
    pub sharing_level: String,
    pub healthcheck_url: String,
    pub healthcheck_interval: i32,
    pub healthcheck_threshold: i32,
    pub health: String,
    pub open_in: String,
    pub display_order: i64,
    pub hidden: bool,
    pub display_group: String,
    pub created_at: DateTime<Utc>,
}

/// An agent with what hangs off it.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
pub struct AgentTree {
    pub agent: AgentRow,
    pub apps: Vec<AppRow>,
    pub scripts: Vec<super::ScriptRow>,
    pub log_sources: Vec<super::LogSourceRow>,
}

/// A resource with everything attached to it.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceTree {
    pub resource: ResourceRow,
    pub metadata: Vec<MetadataRow>,
    pub agents: Vec<AgentTree>,
}

fn display_apps(d: &proto::DisplayApps) -> Vec<String> {
    [
        (d.vscode, "vscode"),
        (d.vscode_insiders, "vscode_insiders"),
        (d.web_terminal, "web_terminal"),
        (d.ssh_helper, "ssh_helper"),
        (d.port_forwarding_helper, "port_forwarding_helper"),
    ]
    .into_iter()
    .filter(|(on, _)| *on)
    .map(|(_, name)| name.to_string())
    .collect()
}

fn enum_str<T: serde::Serialize>(value: &T, fallback: &str) -> String {
    match serde_json::to_value(value) {
        Ok(Value::String(s)) => s,
        _ => fallback.to_string(),
    }
}

/// Stores what a job produced for `transition`, inside the caller's transaction.
pub(crate) async fn insert_resources(
    tx: &mut sqlx::PgConnection,
    job: Uuid,
    transition: &str,
    resources: &[proto::Resource],
) -> Result<()> {
    let now = Utc::now();
    for resource in resources {
        let resource_id = Uuid::new_v4();
        sqlx::query!(
            r#"INSERT INTO workspace_resources (id, job_id, transition, type, name, hide, icon,
                   instance_type, daily_cost, module_path, created_at)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"#,
            resource_id,
            job,
            transition,
            resource.kind,
            resource.name,
            resource.hide,
            resource.icon,
            resource.instance_type,
            resource.daily_cost,
            resource.module_path,
            now
        )
        .execute(&mut *tx)
        .await?;
        for (position, item) in resource.metadata.iter().enumerate() {
            sqlx::query!(
                r#"INSERT INTO workspace_resource_metadata (workspace_resource_id, position, key, value, sensitive)
                   VALUES ($1, $2, $3, $4, $5)"#,
                resource_id,
                position as i32,
                item.key,
                (!item.is_null).then_some(item.value.as_str()),
                item.sensitive
            )
            .execute(&mut *tx)
            .await?;
        }
        for agent in &resource.agents {
            let parent = insert_agent(tx, resource_id, agent, None, now).await?;
            for container in &agent.devcontainers {
                super::subagents::insert_devcontainer(
                    tx,
                    resource_id,
                    agent,
                    parent,
                    container,
                    now,
                )
                .await?;
            }
        }
    }
    Ok(())
}

/// Stores an agent with its metadata, scripts and apps (not its dev containers: the caller
/// adds those once the agent exists). `sub` is the parent and id of a dev container's
/// sub-agent; other agents get a fresh id.
pub(super) async fn insert_agent(
    tx: &mut sqlx::PgConnection,
    resource_id: Uuid,
    agent: &proto::Agent,
    sub: Option<(Uuid, Uuid)>,
    now: DateTime<Utc>,
) -> Result<Uuid> {
    // Fresh ids per build: terraform keeps an unchanged agent's (and app's) id across builds,
    // but every build's rows are its own.
    let (parent_id, agent_id) = match sub {
        Some((parent, id)) => (Some(parent), id),
        None => (None, Uuid::new_v4()),
    };
    let (token_hash, instance_id) = match &agent.auth {
        AgentAuth::Token(token) if !token.is_empty() => {
            (Some(crate::auth::hash_secret(token)), None)
        }
        AgentAuth::Token(_) => (None, None),
        AgentAuth::InstanceId(id) => (None, Some(id.clone())),
    };
    // Keep what the agent needs later (scripts, metadata, env) without its secret or apps,
    // which have their own rows.
    let mut spec = agent.clone();
    spec.auth = AgentAuth::Token(String::new());
    spec.apps.clear();
    spec.devcontainers.clear();
    let spec = serde_json::to_value(&spec).unwrap_or_default();
    let mut env = agent.env.clone();
    for extra in &agent.extra_envs {
        env.insert(extra.name.clone(), extra.value.clone());
    }
    sqlx::query!(
        r#"INSERT INTO workspace_agents (id, resource_id, name, auth_token_hash, auth_instance_id,
               architecture, operating_system, directory, environment_variables,
               connection_timeout_seconds, troubleshooting_url, motd_file, display_apps,
               api_key_scope, display_order, spec, created_at, updated_at, parent_id)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $17, $18)"#,
        agent_id,
        resource_id,
        agent.name,
        token_hash,
        instance_id,
        agent.architecture,
        agent.operating_system,
        agent.directory,
        serde_json::to_value(&env).unwrap_or_default(),
        agent.connection_timeout_seconds,
        agent.troubleshooting_url,
        agent.motd_file,
        &display_apps(&agent.display_apps),
        // Providers before the attribute existed gave agents full scope.
        if agent.api_key_scope.is_empty() {
            "all"
        } else {
            agent.api_key_scope.as_str()
        },
        agent.order,
        spec,
        now,
        parent_id
    )
    .execute(&mut *tx)
    .await?;
    for (order, metadata) in agent.metadata.iter().enumerate() {
        sqlx::query!(
            r#"INSERT INTO workspace_agent_metadata (agent_id, key, display_name, script,
                   interval_seconds, timeout_seconds, display_order)
               VALUES ($1, $2, $3, $4, $5, $6, $7)
               ON CONFLICT (agent_id, key) DO NOTHING"#,
            agent_id,
            metadata.key,
            metadata.display_name,
            metadata.script,
            metadata.interval,
            metadata.timeout,
            i32::try_from(if metadata.order != 0 {
                metadata.order
            } else {
                order as i64
            })
            .unwrap_or(0)
        )
        .execute(&mut *tx)
        .await?;
    }
    for script in &agent.scripts {
        let log_source =
            insert_log_source(tx, agent_id, &script.display_name, &script.icon, now).await?;
        sqlx::query!(
            r#"INSERT INTO workspace_agent_scripts (id, agent_id, log_source_id, display_name, script,
                   cron, run_on_start, run_on_stop, start_blocks_login, timeout_seconds, log_path,
                   resource_address, dependencies, created_at)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"#,
            Uuid::new_v4(),
            agent_id,
            log_source,
            script.display_name,
            script.script,
            script.cron,
            script.run_on_start,
            script.run_on_stop,
            script.start_blocks_login,
            script.timeout_seconds,
            script.log_path,
            script.resource_address,
            serde_json::to_value(&script.dependencies).unwrap_or_default(),
            now
        )
        .execute(&mut *tx)
        .await?;
    }
    for app in &agent.apps {
        let health = if app.healthcheck.as_ref().is_some_and(|h| !h.url.is_empty()) {
            "initializing"
        } else {
            "disabled"
        };
        let healthcheck = app.healthcheck.clone().unwrap_or_default();
        sqlx::query!(
            r#"INSERT INTO workspace_apps (id, agent_id, slug, display_name, icon, command, url,
                   external, subdomain, sharing_level, healthcheck_url, healthcheck_interval,
                   healthcheck_threshold, health, open_in, display_order, hidden, display_group,
                   created_at)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)"#,
            Uuid::new_v4(),
            agent_id,
            app.slug,
            app.display_name,
            app.icon,
            (!app.command.is_empty()).then_some(app.command.as_str()),
            (!app.url.is_empty()).then_some(app.url.as_str()),
            app.external,
            app.subdomain,
            enum_str(&app.sharing_level, "owner"),
            healthcheck.url,
            healthcheck.interval,
            healthcheck.threshold,
            health,
            enum_str(&app.open_in, "slim-window"),
            app.order,
            app.hidden,
            app.group,
            now
        )
        .execute(&mut *tx)
        .await?;
    }
    Ok(agent_id)
}

pub(super) async fn insert_log_source(
    tx: &mut sqlx::PgConnection,
    agent: Uuid,
    display_name: &str,
    icon: &str,
    now: DateTime<Utc>,
) -> Result<Uuid> {
    let id = Uuid::new_v4();
    sqlx::query!(
        r#"INSERT INTO workspace_agent_log_sources (id, agent_id, display_name, icon, created_at)
           VALUES ($1, $2, $3, $4, $5)"#,
        id,
        agent,
        display_name,
        icon,
        now
    )
    .execute(&mut *tx)
    .await?;
    Ok(id)
}

impl Store {
    /// Records an app's health, for an app of `agent` that has a health check (others keep
    /// `disabled`).
    pub async fn update_app_health(&self, agent: Uuid, app: Uuid, health: &str) -> Result<()> {
        timed("update_app_health", async {
            sqlx::query!(
                "UPDATE workspace_apps SET health = $3
                 WHERE id = $2 AND agent_id = $1 AND healthcheck_url <> ''",
                agent,
                app,
                health
            )
            .execute(&self.pool)
            .await?;
            Ok(())
        })
        .await
    }

    pub async fn agent_apps(&self, agent: Uuid) -> Result<Vec<AppRow>> {
        timed("agent_apps", async {
            Ok(sqlx::query_as!(
                AppRow,
                "SELECT * FROM workspace_apps WHERE agent_id = $1 ORDER BY display_order, slug",
                agent
            )
            .fetch_all(&self.pool)
            .await?)
        })
        .await
    }

    /// One agent with its apps, scripts and log sources.
    pub async fn agent_tree(&self, agent: Uuid) -> Result<AgentTree> {
        let row = self.agent_by_id(agent).await?;
        Ok(AgentTree {
            apps: self.agent_apps(agent).await?,
            scripts: self.agent_scripts(&[agent]).await?,
            log_sources: self.agent_log_sources(&[agent]).await?,
            agent: row,
        })
    }
}
