//! Insights (`/api/v2/insights/*`): who used the deployment's workspaces, when, and how, from
//! the usage the relay and clients report.

use std::collections::BTreeMap;

use chrono::{DateTime, FixedOffset};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DAUEntry {
    /// A day (`YYYY-MM-DD`) in the asked time zone.
    pub date: String,
    pub amount: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DAUsResponse {
    pub entries: Vec<DAUEntry>,
    pub tz_hour_offset: i32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UserActivity {
    pub template_ids: Vec<Uuid>,
    pub user_id: Uuid,
    pub username: String,
    pub avatar_url: String,
    pub seconds: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UserActivityInsightsReport {
    #[schema(value_type = String)]
    pub start_time: DateTime<FixedOffset>,
    #[schema(value_type = String)]
    pub end_time: DateTime<FixedOffset>,
    pub template_ids: Vec<Uuid>,
    pub users: Vec<UserActivity>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UserActivityInsightsResponse {
    pub report: UserActivityInsightsReport,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ConnectionLatency {
    pub p50: f64,
    pub p95: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct UserLatency {
    pub template_ids: Vec<Uuid>,
    pub user_id: Uuid,
    pub username: String,
    pub avatar_url: String,
    pub latency_ms: ConnectionLatency,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct UserLatencyInsightsReport {
    #[schema(value_type = String)]
    pub start_time: DateTime<FixedOffset>,
    #[schema(value_type = String)]
    pub end_time: DateTime<FixedOffset>,
    pub template_ids: Vec<Uuid>,
    pub users: Vec<UserLatency>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct UserLatencyInsightsResponse {
    pub report: UserLatencyInsightsReport,
}

/// Use of one app (built in: `vscode`, `jetbrains`, `reconnecting-pty`, `ssh`; or a
/// template's apps together) over a report's range.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TemplateAppUsage {
    pub template_ids: Vec<Uuid>,
    /// `builtin` or `app`.
    #[serde(rename = "type")]
    pub kind: String,
    pub display_name: String,
    pub slug: String,
    pub icon: String,
    pub seconds: i64,
    pub times_used: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TemplateParameterValue {
    pub value: String,
    pub count: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TemplateParameterUsage {
    pub template_ids: Vec<Uuid>,
    pub display_name: String,
    pub name: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub description: String,
    pub values: Vec<TemplateParameterValue>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TemplateInsightsReport {
    #[schema(value_type = String)]
    pub start_time: DateTime<FixedOffset>,
    #[schema(value_type = String)]
    pub end_time: DateTime<FixedOffset>,
    pub template_ids: Vec<Uuid>,
    pub active_users: i64,
    pub apps_usage: Vec<TemplateAppUsage>,
    pub parameters_usage: Vec<TemplateParameterUsage>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TemplateInsightsIntervalReport {
    #[schema(value_type = String)]
    pub start_time: DateTime<FixedOffset>,
    #[schema(value_type = String)]
    pub end_time: DateTime<FixedOffset>,
    pub template_ids: Vec<Uuid>,
    /// `day` or `week`.
    pub interval: String,
    pub active_users: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TemplateInsightsResponse {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<TemplateInsightsReport>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_reports: Option<Vec<TemplateInsightsIntervalReport>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UserStatusChangeCount {
    #[schema(value_type = String)]
    pub date: DateTime<FixedOffset>,
    pub count: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct GetUserStatusCountsResponse {
    /// By status (`active`, `dormant`, `suspended`): how many users had it at each day's end.
    pub status_counts: BTreeMap<String, Vec<UserStatusChangeCount>>,
}
