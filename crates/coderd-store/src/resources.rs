//! `workspace_resources`, their metadata, agents and apps: what a job produced.

use chrono::{DateTime, Utc};
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

/// An agent as read back. Its stored `spec` (the template's agent block, as written at import)
/// is left out: nothing reads it back, and decoding it for every agent of a listing was the
/// largest JSON decode in its profile.
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
