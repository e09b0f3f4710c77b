//! The deployment's health report (`GET /api/v2/debug/health`) in Coder's shape, and which of
//! its sections administrators dismissed (`/debug/health/settings`).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::deployment::RegionsResponse;
use crate::provisioners::ProvisionerDaemon;

/// The sections of the report, by Coder's names.
pub const HEALTH_SECTIONS: &[&str] = &[
    "DERP",
    "AccessURL",
    "Websocket",
    "Database",
    "WorkspaceProxy",
    "ProvisionerDaemons",
];

/// What every section reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct BaseReport {
    /// `ok`, `warning` or `error`.
    pub severity: String,
    pub warnings: Vec<HealthMessage>,
    /// An administrator dismissed the section: it shows, but no longer counts.
    pub dismissed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One finding, with Coder's code (`EDB02`: the database is slow, …).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct HealthMessage {
    pub code: String,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DatabaseReport {
    pub healthy: bool,
    #[serde(flatten)]
    pub base: BaseReport,
    pub reachable: bool,
    /// The ping's round trip, as Go prints a duration (`1.2ms`).
    pub latency: String,
    pub latency_ms: i64,
    pub threshold_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AccessURLReport {
    pub healthy: bool,
    #[serde(flatten)]
    pub base: BaseReport,
    pub access_url: String,
    pub reachable: bool,
    pub status_code: i32,
    pub healthz_response: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WebsocketReport {
    pub healthy: bool,
    #[serde(flatten)]
    pub base: BaseReport,
    pub body: String,
    pub code: i32,
}

/// Coder's DERP relays; connections here take none, so there are no regions to check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DERPHealthReport {
    pub healthy: bool,
    #[serde(flatten)]
    pub base: BaseReport,
    #[schema(value_type = Object)]
    pub regions: BTreeMap<String, serde_json::Value>,
    pub netcheck_logs: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkspaceProxyReport {
    pub healthy: bool,
    #[serde(flatten)]
    pub base: BaseReport,
    pub workspace_proxies: RegionsResponse,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ProvisionerDaemonsReportItem {
    pub provisioner_daemon: ProvisionerDaemon,
    pub warnings: Vec<HealthMessage>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ProvisionerDaemonsReport {
    #[serde(flatten)]
    pub base: BaseReport,
    pub items: Vec<ProvisionerDaemonsReportItem>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct HealthcheckReport {
    pub time: DateTime<Utc>,
    /// Deprecated by Coder in favour of `severity`: false when it is `error`.
    pub healthy: bool,
    pub severity: String,
    pub derp: DERPHealthReport,
    pub access_url: AccessURLReport,
    pub websocket: WebsocketReport,
    pub database: DatabaseReport,
    pub workspace_proxy: WorkspaceProxyReport,
    pub provisioner_daemons: ProvisionerDaemonsReport,
    pub coder_version: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HealthSettings {
    pub dismissed_healthchecks: Vec<String>,
}
