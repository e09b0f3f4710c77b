//! Deployment-level reads: its configuration, SSH naming, usage totals, experiments, regions,
//! update checks, and the permission checks Coder's dashboard asks before it shows a control.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

/// How clients name workspaces in SSH.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SSHConfigResponse {
    pub hostname_prefix: String,
    pub hostname_suffix: String,
    pub ssh_config_options: BTreeMap<String, String>,
}

/// One option of the server, as Coder's option library describes it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SerpentOption {
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub flag: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub env: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub default: String,
    /// The value in effect (text, or a boolean for a switch); absent for a secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hidden: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value_source: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct DeploymentConfig {
    /// Every option's value by its name in Coder's configuration (secrets left out).
    #[schema(value_type = Object)]
    pub config: BTreeMap<String, Value>,
    pub options: Vec<SerpentOption>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct WorkspaceConnectionLatencyMS {
    #[serde(rename = "P50")]
    pub p50: f64,
    #[serde(rename = "P95")]
    pub p95: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct WorkspaceDeploymentStats {
    pub pending: i64,
    pub building: i64,
    pub running: i64,
    pub failed: i64,
    pub stopped: i64,
    pub connection_latency_ms: WorkspaceConnectionLatencyMS,
    pub rx_bytes: i64,
    pub tx_bytes: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SessionCountDeploymentStats {
    pub vscode: i64,
    pub ssh: i64,
    pub jetbrains: i64,
    pub reconnecting_pty: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct DeploymentStats {
    /// The start of the window the agents' figures come from.
    pub aggregated_from: DateTime<Utc>,
    pub collected_at: DateTime<Utc>,
    pub next_update_at: DateTime<Utc>,
    pub workspaces: WorkspaceDeploymentStats,
    pub session_count: SessionCountDeploymentStats,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AvailableExperiments {
    pub safe: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UpdateCheckResponse {
    pub current: bool,
    pub version: String,
    pub url: String,
}

/// Where workspaces' apps are served from: this deployment, until workspace proxies exist.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Region {
    pub id: Uuid,
    pub name: String,
    pub display_name: String,
    pub icon_url: String,
    pub healthy: bool,
    pub path_app_url: String,
    pub wildcard_hostname: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RegionsResponse {
    pub regions: Vec<Region>,
}

/// The scopes an API key may be created with.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ExternalAPIKeyScopes {
    pub external: Vec<String>,
}

/// What a permission check asks about; the fields narrow the object down.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AuthorizationObject {
    pub resource_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub organization_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_id: Option<String>,
    /// Whether the caller may act on such an object in any organization it belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub any_org: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AuthorizationCheck {
    pub object: AuthorizationObject,
    pub action: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AuthorizationRequest {
    pub checks: HashMap<String, AuthorizationCheck>,
}

/// Each check's name and whether the caller may.
pub type AuthorizationResponse = HashMap<String, bool>;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PrebuildsSettings {
    pub reconciliation_paused: bool,
}

/// One coderd replica sharing the deployment's database (`GET /replicas`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Replica {
    pub id: Uuid,
    pub hostname: String,
    pub created_at: DateTime<Utc>,
    /// The replica's own internal URL, where its peers reach it.
    pub relay_address: String,
    pub region_id: i32,
    /// Why it could not reach its peers at its last beat, or empty.
    pub error: String,
    /// Microseconds its last database round trip took.
    pub database_latency: i32,
}
