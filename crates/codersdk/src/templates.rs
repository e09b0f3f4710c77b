//! Templates and template versions.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::provisioners::{MatchedProvisioners, ProvisionerJob};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Template {
    pub id: Uuid,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub organization_id: Uuid,
    pub organization_name: String,
    pub organization_display_name: String,
    pub organization_icon: String,
    pub name: String,
    pub display_name: String,
    pub provisioner: String,
    pub active_version_id: Uuid,
    pub active_user_count: i64,
    pub description: String,
    pub deprecated: bool,
    pub deprecation_message: String,
    pub icon: String,
    pub default_ttl_ms: i64,
    /// How far activity in a running workspace pushes its deadline (0: it does not).
    pub activity_bump_ms: i64,
    pub autostop_requirement: TemplateAutostopRequirement,
    pub autostart_requirement: TemplateAutostartRequirement,
    pub created_by_id: Uuid,
    pub created_by_name: String,
    pub allow_user_cancel_workspace_jobs: bool,
    pub allow_user_autostart: bool,
    pub allow_user_autostop: bool,
    /// A failed start is stopped this long after it failed (0: never).
    pub failure_ttl_ms: i64,
    /// A workspace unused this long becomes dormant (0: never).
    pub time_til_dormant_ms: i64,
    /// A dormant workspace is deleted this long after it became dormant (0: never).
    pub time_til_dormant_autodelete_ms: i64,
    pub require_active_version: bool,
    /// The widest sharing level a workspace port may have: owner, authenticated,
    /// organization or public.
    pub max_port_share_level: String,
    /// How the app proxy treats cross-origin requests to this template's apps: `simple`
    /// (coderd answers them; apps of the same user may call each other) or `passthru` (left to
    /// the app).
    pub cors_behavior: String,
    /// p50/p95 build times (ms) of recent `start`, `stop` and `delete` builds.
    pub build_time_stats: std::collections::BTreeMap<String, TransitionStats>,
    /// Reads never return deleted templates, so this is false wherever one is shown.
    #[serde(default)]
    pub deleted: bool,
    /// Whether builds skip Terraform's module cache (they never cache modules here).
    #[serde(default)]
    pub disable_module_cache: bool,
    /// Parameters are asked as a form from the version's declarations (Coder's classic flow),
    /// not through its dynamic-parameters WebSocket, which is not served here.
    #[serde(default = "classic_parameter_flow")]
    pub use_classic_parameter_flow: bool,
}

fn classic_parameter_flow() -> bool {
    true
}

/// Days a restart is required (Monday first), every `weeks` weeks (counted from Monday
/// 2 January 2023, so every deployment agrees): the workspace is stopped during its owner's
/// quiet hours on those days.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TemplateAutostopRequirement {
    pub days_of_week: Vec<String>,
    pub weeks: i64,
}

/// Days autostart may happen on; empty means never.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TemplateAutostartRequirement {
    pub days_of_week: Vec<String>,
}

/// Build times of one transition, in milliseconds (null until there are builds).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TransitionStats {
    // Coder's field names, capitalised as its API has them.
    #[serde(rename = "P50")]
    pub p50: Option<i64>,
    #[serde(rename = "P95")]
    pub p95: Option<i64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CreateTemplateRequest {
    pub name: String,
    #[serde(default)]
    pub display_name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub icon: String,
    pub template_version_id: Uuid,
    #[serde(default)]
    pub default_ttl_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activity_bump_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autostop_requirement: Option<TemplateAutostopRequirement>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autostart_requirement: Option<TemplateAutostartRequirement>,
    #[serde(default)]
    pub allow_user_cancel_workspace_jobs: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_user_autostart: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_user_autostop: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_ttl_ms: Option<i64>,
    /// The template's `time_til_dormant_ms` (Coder's create request names it so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dormant_ttl_ms: Option<i64>,
    /// The template's `time_til_dormant_autodelete_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_ttl_ms: Option<i64>,
    #[serde(default)]
    pub require_active_version: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_port_share_level: Option<String>,
    /// `simple` (the default) or `passthru`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cors_behavior: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UpdateTemplateMeta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icon: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_ttl_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_user_cancel_workspace_jobs: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecation_message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activity_bump_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autostop_requirement: Option<TemplateAutostopRequirement>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autostart_requirement: Option<TemplateAutostartRequirement>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_user_autostart: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_user_autostop: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_ttl_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_til_dormant_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_til_dormant_autodelete_ms: Option<i64>,
    /// Count the template's workspaces as used now (so a shorter dormancy threshold does not
    /// make them dormant at once).
    #[serde(default)]
    pub update_workspace_last_used_at: bool,
    /// Restart dormant workspaces' deletion clocks now.
    #[serde(default)]
    pub update_workspace_dormant_at: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub require_active_version: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_port_share_level: Option<String>,
    /// `simple` (the default) or `passthru`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cors_behavior: Option<String>,
}

/// `PATCH /templates/{id}/versions`: promote a version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UpdateActiveTemplateVersion {
    pub id: Uuid,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct MinimalUser {
    pub id: Uuid,
    pub username: String,
    pub avatar_url: String,
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TemplateVersion {
    pub id: Uuid,
    pub template_id: Option<Uuid>,
    pub organization_id: Uuid,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub name: String,
    pub message: String,
    pub job: ProvisionerJob,
    pub readme: String,
    pub created_by: MinimalUser,
    pub archived: bool,
    pub warnings: Vec<String>,
    pub matched_provisioners: Option<MatchedProvisioners>,
    /// The version declares `coder_external_agent` resources.
    #[serde(default)]
    pub has_external_agent: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct VariableValue {
    pub name: String,
    pub value: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CreateTemplateVersionRequest {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub template_id: Option<Uuid>,
    #[serde(default)]
    pub storage_method: String,
    /// The uploaded archive; nil when `example_id` names a starter template instead.
    #[serde(default)]
    pub file_id: Uuid,
    /// A starter template (`GET /templates/examples`) to import instead of an upload.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub example_id: String,
    pub provisioner: String,
    #[serde(default)]
    pub tags: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    pub user_variable_values: Vec<VariableValue>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TemplateVersionParameterOption {
    pub name: String,
    pub description: String,
    pub value: String,
    pub icon: String,
}

/// A rich parameter a template version declares (`coder_parameter`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TemplateVersionParameter {
    pub name: String,
    pub display_name: String,
    pub description: String,
    pub description_plaintext: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub form_type: String,
    pub mutable: bool,
    pub default_value: String,
    pub icon: String,
    pub options: Vec<TemplateVersionParameterOption>,
    pub validation_error: String,
    pub validation_regex: String,
    pub validation_min: Option<i32>,
    pub validation_max: Option<i32>,
    pub validation_monotonic: String,
    pub required: bool,
    pub ephemeral: bool,
    pub order: i32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TemplateVersionVariable {
    pub name: String,
    pub description: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub value: String,
    pub default_value: String,
    pub required: bool,
    pub sensitive: bool,
}

impl crate::Client {
    pub async fn create_template_version(
        &self,
        org: &str,
        req: &CreateTemplateVersionRequest,
    ) -> Result<TemplateVersion, crate::ClientError> {
        self.post(
            &format!("/api/v2/organizations/{org}/templateversions"),
            req,
        )
        .await
    }

    pub async fn template_version(&self, id: Uuid) -> Result<TemplateVersion, crate::ClientError> {
        self.get(&format!("/api/v2/templateversions/{id}")).await
    }

    pub async fn template_version_by_name(
        &self,
        template: Uuid,
        name: &str,
    ) -> Result<TemplateVersion, crate::ClientError> {
        self.get(&format!("/api/v2/templates/{template}/versions/{name}"))
            .await
    }

    pub async fn template_version_rich_parameters(
        &self,
        id: Uuid,
    ) -> Result<Vec<TemplateVersionParameter>, crate::ClientError> {
        self.get(&format!("/api/v2/templateversions/{id}/rich-parameters"))
            .await
    }

    pub async fn template_version_variables(
        &self,
        id: Uuid,
    ) -> Result<Vec<TemplateVersionVariable>, crate::ClientError> {
        self.get(&format!("/api/v2/templateversions/{id}/variables"))
            .await
    }

    pub async fn template_version_resources(
        &self,
        id: Uuid,
    ) -> Result<Vec<crate::workspaces::WorkspaceResource>, crate::ClientError> {
        self.get(&format!("/api/v2/templateversions/{id}/resources"))
            .await
    }

    pub async fn template_version_logs(
        &self,
        id: Uuid,
    ) -> Result<Vec<crate::provisioners::ProvisionerJobLog>, crate::ClientError> {
        self.get(&format!("/api/v2/templateversions/{id}/logs"))
            .await
    }

    pub async fn cancel_template_version(
        &self,
        id: Uuid,
    ) -> Result<crate::Response, crate::ClientError> {
        self.send(self.request(
            reqwest::Method::PATCH,
            &format!("/api/v2/templateversions/{id}/cancel"),
        )?)
        .await
    }

    pub async fn create_template(
        &self,
        org: &str,
        req: &CreateTemplateRequest,
    ) -> Result<Template, crate::ClientError> {
        self.post(&format!("/api/v2/organizations/{org}/templates"), req)
            .await
    }

    pub async fn templates(&self, org: &str) -> Result<Vec<Template>, crate::ClientError> {
        self.get(&format!("/api/v2/organizations/{org}/templates"))
            .await
    }

    /// All templates the caller can see, in every organization.
    pub async fn all_templates(&self) -> Result<Vec<Template>, crate::ClientError> {
        self.get("/api/v2/templates").await
    }

    pub async fn template_by_name(
        &self,
        org: &str,
        name: &str,
    ) -> Result<Template, crate::ClientError> {
        self.get(&format!("/api/v2/organizations/{org}/templates/{name}"))
            .await
    }

    pub async fn template(&self, id: Uuid) -> Result<Template, crate::ClientError> {
        self.get(&format!("/api/v2/templates/{id}")).await
    }

    pub async fn update_template_meta(
        &self,
        id: Uuid,
        req: &UpdateTemplateMeta,
    ) -> Result<Template, crate::ClientError> {
        self.patch(&format!("/api/v2/templates/{id}"), req).await
    }

    pub async fn delete_template(&self, id: Uuid) -> Result<(), crate::ClientError> {
        self.delete(&format!("/api/v2/templates/{id}")).await
    }

    pub async fn template_versions(
        &self,
        id: Uuid,
    ) -> Result<Vec<TemplateVersion>, crate::ClientError> {
        self.get(&format!("/api/v2/templates/{id}/versions")).await
    }

    pub async fn update_active_template_version(
        &self,
        template: Uuid,
        version: Uuid,
    ) -> Result<crate::Response, crate::ClientError> {
        self.patch(
            &format!("/api/v2/templates/{template}/versions"),
            &UpdateActiveTemplateVersion { id: version },
        )
        .await
    }
}

/// A starter template built into the server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TemplateExample {
    /// A slug (`docker`), not a UUID.
    pub id: String,
    pub url: String,
    pub name: String,
    pub description: String,
    pub icon: String,
    pub tags: Vec<String>,
    /// The README, as Markdown.
    pub markdown: String,
}

/// `PATCH /templateversions/{id}`: an absent or empty name keeps the name; an absent message
/// keeps the message.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchTemplateVersionRequest {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub message: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ArchiveTemplateVersionsRequest {
    /// Archive every unused version, not only those whose import failed.
    #[serde(default)]
    pub all: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ArchiveTemplateVersionsResponse {
    pub template_id: Uuid,
    pub archived_ids: Vec<Uuid>,
}
