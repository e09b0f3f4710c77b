//! The audit log (`GET /api/v2/audit`): who did what, with Coder's JSON shapes.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::users::User;

/// What kind of object an entry is about (Coder's values; `api_key` for logins and logouts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ResourceType {
    Template,
    TemplateVersion,
    User,
    Workspace,
    WorkspaceBuild,
    ApiKey,
    Group,
    Organization,
    OrganizationMember,
    ProvisionerKey,
}

impl ResourceType {
    pub const ALL: [Self; 10] = [
        Self::Template,
        Self::TemplateVersion,
        Self::User,
        Self::Workspace,
        Self::WorkspaceBuild,
        Self::ApiKey,
        Self::Group,
        Self::Organization,
        Self::OrganizationMember,
        Self::ProvisionerKey,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Template => "template",
            Self::TemplateVersion => "template_version",
            Self::User => "user",
            Self::Workspace => "workspace",
            Self::WorkspaceBuild => "workspace_build",
            Self::ApiKey => "api_key",
            Self::Group => "group",
            Self::Organization => "organization",
            Self::OrganizationMember => "organization_member",
            Self::ProvisionerKey => "provisioner_key",
        }
    }
}

impl std::str::FromStr for ResourceType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| format!("unknown resource type {s:?}"))
    }
}

/// What was done (Coder's values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AuditAction {
    Create,
    Write,
    Delete,
    Start,
    Stop,
    Login,
    Logout,
    Register,
}

impl AuditAction {
    pub const ALL: [Self; 8] = [
        Self::Create,
        Self::Write,
        Self::Delete,
        Self::Start,
        Self::Stop,
        Self::Login,
        Self::Logout,
        Self::Register,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Create => "create",
            Self::Write => "write",
            Self::Delete => "delete",
            Self::Start => "start",
            Self::Stop => "stop",
            Self::Login => "login",
            Self::Logout => "logout",
            Self::Register => "register",
        }
    }
}

impl std::str::FromStr for AuditAction {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|a| a.as_str() == s)
            .ok_or_else(|| format!("unknown audit action {s:?}"))
    }
}

/// One changed field. A secret field only says that it changed: `old` and `new` are empty.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AuditDiffField {
    pub old: serde_json::Value,
    pub new: serde_json::Value,
    pub secret: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AuditLog {
    pub id: Uuid,
    pub request_id: Uuid,
    pub time: DateTime<Utc>,
    /// Nil for entries outside any organization.
    pub organization_id: Uuid,
    /// Empty when the action did not come over the network (the lifecycle executor).
    pub ip: String,
    pub user_agent: String,
    pub resource_type: ResourceType,
    pub resource_id: Uuid,
    pub resource_target: String,
    pub resource_icon: String,
    pub action: AuditAction,
    pub diff: BTreeMap<String, AuditDiffField>,
    pub status_code: i32,
    pub additional_fields: serde_json::Value,
    pub description: String,
    pub resource_link: String,
    pub is_deleted: bool,
    /// Who acted; null for coderd itself and for failed logins of unknown accounts.
    pub user: Option<User>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AuditLogResponse {
    pub audit_logs: Vec<AuditLog>,
    pub count: i64,
    /// The most `count` counts to (Coder stops counting there); 0 when counts are exact.
    #[serde(default)]
    pub count_cap: i64,
}

impl crate::Client {
    /// `GET /api/v2/audit?q=...&limit=...&offset=...`.
    pub async fn audit_logs(
        &self,
        q: &str,
        limit: i64,
        offset: i64,
    ) -> Result<AuditLogResponse, crate::ClientError> {
        self.get_query(
            "/api/v2/audit",
            &[
                ("q", q.to_string()),
                ("limit", limit.to_string()),
                ("offset", offset.to_string()),
            ],
        )
        .await
    }
}
