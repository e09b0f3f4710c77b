//! Provisioner jobs, their logs, daemons and provisioner keys.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ProvisionerJobStatus {
    Pending,
    Running,
    Succeeded,
    Canceling,
    Canceled,
    Failed,
}

impl ProvisionerJobStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::Succeeded => "succeeded",
            Self::Canceling => "canceling",
            Self::Canceled => "canceled",
            Self::Failed => "failed",
        }
    }

    /// Whether the job can still change.
    pub fn is_active(self) -> bool {
        matches!(self, Self::Pending | Self::Running | Self::Canceling)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProvisionerJobType {
    TemplateVersionImport,
    WorkspaceBuild,
    TemplateVersionDryRun,
}

impl ProvisionerJobType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::TemplateVersionImport => "template_version_import",
            Self::WorkspaceBuild => "workspace_build",
            Self::TemplateVersionDryRun => "template_version_dry_run",
        }
    }
}

impl std::str::FromStr for ProvisionerJobType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "template_version_import" => Ok(Self::TemplateVersionImport),
            "workspace_build" => Ok(Self::WorkspaceBuild),
            "template_version_dry_run" => Ok(Self::TemplateVersionDryRun),
            other => Err(format!("unknown job type {other:?}")),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ProvisionerJobInput {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_version_id: Option<Uuid>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_build_id: Option<Uuid>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ProvisionerJobMetadata {
    pub template_version_name: String,
    pub template_id: Uuid,
    pub template_name: String,
    pub template_display_name: String,
    pub template_icon: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_id: Option<Uuid>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_name: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ProvisionerJob {
    pub id: Uuid,
    pub created_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub completed_at: Option<DateTime<Utc>>,
    pub canceled_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub error: String,
    #[serde(default)]
    pub error_code: String,
    pub status: ProvisionerJobStatus,
    pub worker_id: Option<Uuid>,
    #[serde(default)]
    pub worker_name: String,
    pub file_id: Uuid,
    pub tags: BTreeMap<String, String>,
    /// Place among pending jobs the same daemons could take (1 = next); 0 once started.
    pub queue_position: i64,
    pub queue_size: i64,
    pub organization_id: Uuid,
    pub initiator_id: Uuid,
    pub input: ProvisionerJobInput,
    #[serde(rename = "type")]
    pub job_type: ProvisionerJobType,
    /// Online daemons that could take this pending job.
    pub available_workers: Vec<Uuid>,
    #[serde(default)]
    pub metadata: ProvisionerJobMetadata,
    pub logs_overflowed: bool,
    /// Why a pending job is not being picked up, when coderd can tell (no online daemon matches
    /// its tags, naming them). Empty otherwise.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub waiting_reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ProvisionerJobLog {
    pub id: i64,
    pub created_at: DateTime<Utc>,
    pub log_source: String,
    pub log_level: String,
    pub stage: String,
    pub output: String,
}

/// How many daemons could run a job: all registered ones, and those online now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct MatchedProvisioners {
    pub count: i64,
    pub available: i64,
    pub most_recently_seen: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ProvisionerDaemonStatus {
    Offline,
    Idle,
    Busy,
}

impl ProvisionerDaemonStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Offline => "offline",
            Self::Idle => "idle",
            Self::Busy => "busy",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ProvisionerDaemonJob {
    pub id: Uuid,
    pub status: ProvisionerJobStatus,
    pub template_name: String,
    pub template_icon: String,
    pub template_display_name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ProvisionerDaemon {
    pub id: Uuid,
    pub organization_id: Uuid,
    /// The provisioner key the daemon authenticated with; the nil UUID for daemons that
    /// authenticated otherwise (built in, a session token, the pre-shared key).
    pub key_id: Uuid,
    pub created_at: DateTime<Utc>,
    pub last_seen_at: Option<DateTime<Utc>>,
    pub name: String,
    pub version: String,
    pub api_version: String,
    pub provisioners: Vec<String>,
    pub tags: BTreeMap<String, String>,
    pub key_name: Option<String>,
    pub status: ProvisionerDaemonStatus,
    pub current_job: Option<ProvisionerDaemonJob>,
    pub previous_job: Option<ProvisionerDaemonJob>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ProvisionerKey {
    pub id: Uuid,
    pub created_at: DateTime<Utc>,
    pub organization: Uuid,
    pub name: String,
    pub tags: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CreateProvisionerKeyRequest {
    pub name: String,
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CreateProvisionerKeyResponse {
    pub key: String,
}

impl crate::Client {
    pub async fn provisioner_daemons(
        &self,
        org: &str,
    ) -> Result<Vec<ProvisionerDaemon>, crate::ClientError> {
        self.get(&format!("/api/v2/organizations/{org}/provisionerdaemons"))
            .await
    }

    /// Jobs of `org`, newest first; `status` filters (e.g. `pending`), `limit` 0 means default.
    pub async fn provisioner_jobs(
        &self,
        org: &str,
        status: Option<ProvisionerJobStatus>,
        limit: i64,
    ) -> Result<Vec<ProvisionerJob>, crate::ClientError> {
        let mut query: Vec<(&str, String)> = vec![("limit", limit.to_string())];
        if let Some(status) = status {
            query.push(("status", status.as_str().into()));
        }
        self.get_query(
            &format!("/api/v2/organizations/{org}/provisionerjobs"),
            &query,
        )
        .await
    }

    pub async fn provisioner_job(
        &self,
        org: &str,
        id: Uuid,
    ) -> Result<ProvisionerJob, crate::ClientError> {
        self.get(&format!("/api/v2/organizations/{org}/provisionerjobs/{id}"))
            .await
    }

    pub async fn create_provisioner_key(
        &self,
        org: &str,
        req: &CreateProvisionerKeyRequest,
    ) -> Result<CreateProvisionerKeyResponse, crate::ClientError> {
        self.post(&format!("/api/v2/organizations/{org}/provisionerkeys"), req)
            .await
    }

    pub async fn provisioner_keys(
        &self,
        org: &str,
    ) -> Result<Vec<ProvisionerKey>, crate::ClientError> {
        self.get(&format!("/api/v2/organizations/{org}/provisionerkeys"))
            .await
    }

    pub async fn delete_provisioner_key(
        &self,
        org: &str,
        name: &str,
    ) -> Result<(), crate::ClientError> {
        self.delete(&format!(
            "/api/v2/organizations/{org}/provisionerkeys/{name}"
        ))
        .await
    }
}
