//! Workspaces, their builds, and the resources, agents and apps builds produce.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::provisioners::{MatchedProvisioners, ProvisionerJob};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum WorkspaceStatus {
    Pending,
    Starting,
    Running,
    Stopping,
    Stopped,
    Failed,
    Canceling,
    Canceled,
    Deleting,
    Deleted,
}

impl WorkspaceStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Starting => "starting",
            Self::Running => "running",
            Self::Stopping => "stopping",
            Self::Stopped => "stopped",
            Self::Failed => "failed",
            Self::Canceling => "canceling",
            Self::Canceled => "canceled",
            Self::Deleting => "deleting",
            Self::Deleted => "deleted",
        }
    }
}

impl std::str::FromStr for WorkspaceStatus {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "pending" => Self::Pending,
            "starting" => Self::Starting,
            "running" => Self::Running,
            "stopping" => Self::Stopping,
            "stopped" => Self::Stopped,
            "failed" => Self::Failed,
            "canceling" => Self::Canceling,
            "canceled" => Self::Canceled,
            "deleting" => Self::Deleting,
            "deleted" => Self::Deleted,
            other => return Err(format!("unknown workspace status {other:?}")),
        })
    }
}

/// Where a build's time went (Coder's `WorkspaceBuildTimings`): the provisioner's stages
/// (`init`, `plan`, `graph`, `apply`) per resource, the runs of the agents' scripts (`start`,
/// `stop`, `cron`) and each agent's first connection (`connect`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkspaceBuildTimings {
    pub provisioner_timings: Vec<ProvisionerTiming>,
    pub agent_script_timings: Vec<AgentScriptTiming>,
    pub agent_connection_timings: Vec<AgentConnectionTiming>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ProvisionerTiming {
    pub job_id: Uuid,
    pub started_at: DateTime<Utc>,
    pub ended_at: DateTime<Utc>,
    pub stage: String,
    pub source: String,
    pub action: String,
    pub resource: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AgentScriptTiming {
    pub started_at: DateTime<Utc>,
    pub ended_at: DateTime<Utc>,
    pub exit_code: i32,
    pub stage: String,
    /// `ok`, `exit_failure`, `timed_out` or `pipes_left_open`.
    pub status: String,
    pub display_name: String,
    pub workspace_agent_id: Uuid,
    pub workspace_agent_name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AgentConnectionTiming {
    pub started_at: DateTime<Utc>,
    pub ended_at: DateTime<Utc>,
    pub stage: String,
    pub workspace_agent_id: Uuid,
    pub workspace_agent_name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkspaceBuildParameter {
    pub name: String,
    pub value: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkspaceResourceMetadata {
    pub key: String,
    pub value: String,
    pub sensitive: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Healthcheck {
    pub url: String,
    pub interval: i32,
    pub threshold: i32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkspaceApp {
    pub id: Uuid,
    pub url: Option<String>,
    pub external: bool,
    pub slug: String,
    pub display_name: String,
    pub command: Option<String>,
    pub icon: String,
    pub subdomain: bool,
    pub subdomain_name: Option<String>,
    pub sharing_level: String,
    pub healthcheck: Option<Healthcheck>,
    pub health: String,
    pub group: String,
    pub hidden: bool,
    pub open_in: String,
    /// Statuses an AI task's app reported; apps report none here.
    #[serde(default)]
    #[schema(value_type = Vec<Object>)]
    pub statuses: Vec<serde_json::Value>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkspaceAgentHealth {
    pub healthy: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkspaceAgentLogSource {
    pub workspace_agent_id: Uuid,
    pub id: Uuid,
    pub created_at: DateTime<Utc>,
    pub display_name: String,
    pub icon: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkspaceAgentScript {
    pub id: Uuid,
    pub log_source_id: Uuid,
    pub log_path: String,
    pub script: String,
    pub cron: String,
    pub run_on_start: bool,
    pub run_on_stop: bool,
    pub start_blocks_login: bool,
    /// Nanoseconds, as Go's `time.Duration`.
    pub timeout: i64,
    pub display_name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkspaceAgent {
    pub id: Uuid,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub first_connected_at: Option<DateTime<Utc>>,
    pub last_connected_at: Option<DateTime<Utc>>,
    pub disconnected_at: Option<DateTime<Utc>>,
    pub started_at: Option<DateTime<Utc>>,
    pub ready_at: Option<DateTime<Utc>>,
    /// connecting, connected, disconnected or timeout.
    pub status: String,
    /// created, starting, start_timeout, start_error, ready, shutting_down, shutdown_timeout,
    /// shutdown_error or off.
    pub lifecycle_state: String,
    pub name: String,
    pub resource_id: Uuid,
    pub instance_id: String,
    pub architecture: String,
    pub environment_variables: BTreeMap<String, String>,
    pub operating_system: String,
    pub logs_length: i32,
    pub logs_overflowed: bool,
    pub directory: String,
    pub expanded_directory: String,
    pub version: String,
    pub api_version: String,
    pub apps: Vec<WorkspaceApp>,
    pub connection_timeout_seconds: i32,
    pub troubleshooting_url: String,
    pub health: WorkspaceAgentHealth,
    pub display_apps: Vec<String>,
    pub log_sources: Vec<WorkspaceAgentLogSource>,
    pub scripts: Vec<WorkspaceAgentScript>,
    pub startup_script_behavior: String,
    /// The agent this one runs under (a dev container's sub-agent); null for agents of
    /// resources.
    #[serde(default)]
    pub parent_id: Option<Uuid>,
    /// Sandboxes the agent runs inside (Coder's envbox, exectrace); it reports none.
    #[serde(default)]
    pub subsystems: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkspaceResource {
    pub id: Uuid,
    pub created_at: DateTime<Utc>,
    pub job_id: Uuid,
    pub workspace_transition: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub name: String,
    pub hide: bool,
    pub icon: String,
    pub agents: Vec<WorkspaceAgent>,
    pub metadata: Vec<WorkspaceResourceMetadata>,
    pub daily_cost: i32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkspaceBuild {
    pub id: Uuid,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub workspace_id: Uuid,
    pub workspace_name: String,
    pub workspace_owner_id: Uuid,
    pub workspace_owner_name: String,
    pub workspace_owner_avatar_url: String,
    pub template_version_id: Uuid,
    pub template_version_name: String,
    pub build_number: i32,
    pub transition: String,
    pub initiator_id: Uuid,
    pub initiator_name: String,
    pub job: ProvisionerJob,
    pub reason: String,
    pub resources: Vec<WorkspaceResource>,
    pub deadline: Option<DateTime<Utc>>,
    pub max_deadline: Option<DateTime<Utc>>,
    pub status: WorkspaceStatus,
    pub daily_cost: i32,
    pub matched_provisioners: Option<MatchedProvisioners>,
    /// The build runs an AI task (`coder_ai_task`); absent until its job succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub has_ai_task: Option<bool>,
    /// The app the task is shown in (deprecated in Coder in favour of the tasks API, still
    /// sent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ai_task_sidebar_app_id: Option<Uuid>,
    /// The build has `coder_external_agent`s; absent until its job succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub has_external_agent: Option<bool>,
    /// The preset the build was created with.
    #[serde(default)]
    pub template_version_preset_id: Option<Uuid>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkspaceHealth {
    pub healthy: bool,
    pub failing_agents: Vec<Uuid>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Workspace {
    pub id: Uuid,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub owner_id: Uuid,
    pub owner_name: String,
    pub owner_avatar_url: String,
    pub organization_id: Uuid,
    pub organization_name: String,
    pub template_id: Uuid,
    pub template_name: String,
    pub template_display_name: String,
    pub template_icon: String,
    pub template_allow_user_cancel_workspace_jobs: bool,
    pub template_active_version_id: Uuid,
    pub template_require_active_version: bool,
    pub latest_build: WorkspaceBuild,
    /// The latest build is not on the template's active version.
    pub outdated: bool,
    pub name: String,
    pub autostart_schedule: Option<String>,
    pub ttl_ms: Option<i64>,
    pub last_used_at: DateTime<Utc>,
    pub deleting_at: Option<DateTime<Utc>>,
    pub dormant_at: Option<DateTime<Utc>>,
    pub health: WorkspaceHealth,
    pub automatic_updates: String,
    pub allow_renames: bool,
    pub favorite: bool,
    /// When the autostart schedule next starts the workspace (none without a schedule).
    pub next_start_at: Option<DateTime<Utc>>,
    /// Whether this is a prebuilt workspace waiting to be claimed.
    #[serde(default)]
    pub is_prebuild: bool,
    /// The newest status an AI task's app reported; apps report none here.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub latest_app_status: Option<serde_json::Value>,
    /// See `Template::use_classic_parameter_flow`.
    #[serde(default)]
    pub template_use_classic_parameter_flow: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkspacesResponse {
    pub workspaces: Vec<Workspace>,
    pub count: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CreateWorkspaceRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_id: Option<Uuid>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_version_id: Option<Uuid>,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autostart_schedule: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<i64>,
    #[serde(default)]
    pub rich_parameter_values: Vec<WorkspaceBuildParameter>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub automatic_updates: Option<String>,
    /// A preset of the version: its parameter values are applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_version_preset_id: Option<Uuid>,
}

/// `PATCH /workspaces/{id}`: what changes (only the name can).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UpdateWorkspaceRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CreateWorkspaceBuildRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_version_id: Option<Uuid>,
    pub transition: String,
    #[serde(default)]
    pub rich_parameter_values: Vec<WorkspaceBuildParameter>,
    /// Delete the workspace's record without destroying its resources.
    #[serde(default)]
    pub orphan: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub log_level: String,
    /// Why a client starts the build: `dashboard`, `cli`, `ssh_connection`,
    /// `vscode_connection` or `jetbrains_connection` (empty: `initiator`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// A preset of the build's version: its parameter values are applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_version_preset_id: Option<Uuid>,
    /// Terraform state to start from instead of the previous build's (`coder state push`;
    /// template managers only), base64 as Go encodes bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = Byte)]
    pub state: Option<StateBytes>,
}

/// `PUT /workspacebuilds/{id}/state`: replaces a build's Terraform state without a build.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UpdateWorkspaceBuildStateRequest {
    #[schema(value_type = String, format = Byte)]
    pub state: StateBytes,
}

/// Provisioner state on the wire: bytes as base64, as Go's JSON encodes `[]byte`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StateBytes(pub Vec<u8>);

impl Serialize for StateBytes {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use base64::Engine as _;
        serializer.serialize_str(&base64::engine::general_purpose::STANDARD.encode(&self.0))
    }
}

impl<'de> Deserialize<'de> for StateBytes {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use base64::Engine as _;
        let text = String::deserialize(deserializer)?;
        base64::engine::general_purpose::STANDARD
            .decode(text.as_bytes())
            .map(Self)
            .map_err(|e| serde::de::Error::custom(format!("state is not base64: {e}")))
    }
}

/// `PUT /workspaces/{id}/autostart`: `CRON_TZ=<zone> <minute> <hour> * * <days of week>`;
/// absent or empty turns autostart off.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UpdateWorkspaceAutostartRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
}

/// `PUT /workspaces/{id}/ttl`: the time to live of each start, in milliseconds; null turns
/// autostop off.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UpdateWorkspaceTTLRequest {
    #[serde(default)]
    pub ttl_ms: Option<i64>,
}

/// `PUT /workspaces/{id}/extend`: the running build's new deadline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PutExtendWorkspaceRequest {
    pub deadline: DateTime<Utc>,
}

/// `PUT /workspaces/{id}/dormant`: make the workspace dormant, or active again.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UpdateWorkspaceDormancy {
    pub dormant: bool,
}

/// `PUT /workspaces/{id}/autoupdates`: `always` (autostarts use the template's active
/// version) or `never`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UpdateWorkspaceAutomaticUpdatesRequest {
    pub automatic_updates: String,
}

/// `GET /workspaces/{id}/resolve-autostart`: whether the workspace's next autostart would fail
/// for its parameters (the version it would run needs values it does not have).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ResolveAutostartResponse {
    pub parameter_mismatch: bool,
}

impl crate::Client {
    pub async fn update_workspace_autostart(
        &self,
        id: Uuid,
        req: &UpdateWorkspaceAutostartRequest,
    ) -> Result<(), crate::ClientError> {
        self.send_empty(
            self.request(
                reqwest::Method::PUT,
                &format!("/api/v2/workspaces/{id}/autostart"),
            )?
            .json(req),
        )
        .await
    }

    pub async fn update_workspace_ttl(
        &self,
        id: Uuid,
        req: &UpdateWorkspaceTTLRequest,
    ) -> Result<(), crate::ClientError> {
        self.send_empty(
            self.request(
                reqwest::Method::PUT,
                &format!("/api/v2/workspaces/{id}/ttl"),
            )?
            .json(req),
        )
        .await
    }

    pub async fn extend_workspace(
        &self,
        id: Uuid,
        req: &PutExtendWorkspaceRequest,
    ) -> Result<crate::Response, crate::ClientError> {
        self.put(&format!("/api/v2/workspaces/{id}/extend"), req)
            .await
    }

    pub async fn update_workspace_dormancy(
        &self,
        id: Uuid,
        req: &UpdateWorkspaceDormancy,
    ) -> Result<(), crate::ClientError> {
        self.send_empty(
            self.request(
                reqwest::Method::PUT,
                &format!("/api/v2/workspaces/{id}/dormant"),
            )?
            .json(req),
        )
        .await
    }

    pub async fn update_workspace_automatic_updates(
        &self,
        id: Uuid,
        req: &UpdateWorkspaceAutomaticUpdatesRequest,
    ) -> Result<(), crate::ClientError> {
        self.send_empty(
            self.request(
                reqwest::Method::PUT,
                &format!("/api/v2/workspaces/{id}/autoupdates"),
            )?
            .json(req),
        )
        .await
    }

    pub async fn resolve_autostart(
        &self,
        id: Uuid,
    ) -> Result<ResolveAutostartResponse, crate::ClientError> {
        self.get(&format!("/api/v2/workspaces/{id}/resolve-autostart"))
            .await
    }

    pub async fn create_workspace(
        &self,
        user: &str,
        req: &CreateWorkspaceRequest,
    ) -> Result<Workspace, crate::ClientError> {
        self.post(&format!("/api/v2/users/{user}/workspaces"), req)
            .await
    }

    pub async fn workspace(&self, id: Uuid) -> Result<Workspace, crate::ClientError> {
        self.get(&format!("/api/v2/workspaces/{id}")).await
    }

    /// Includes deleted workspaces when `include_deleted`.
    pub async fn workspace_with_deleted(&self, id: Uuid) -> Result<Workspace, crate::ClientError> {
        self.get_query(
            &format!("/api/v2/workspaces/{id}"),
            &[("include_deleted", "true")],
        )
        .await
    }

    pub async fn workspace_by_owner_and_name(
        &self,
        owner: &str,
        name: &str,
    ) -> Result<Workspace, crate::ClientError> {
        self.get(&format!("/api/v2/users/{owner}/workspace/{name}"))
            .await
    }

    /// `q` is Coder's search (`owner:me name:foo status:running template:t`).
    pub async fn workspaces(&self, q: &str) -> Result<WorkspacesResponse, crate::ClientError> {
        self.get_query("/api/v2/workspaces", &[("q", q)]).await
    }

    pub async fn create_workspace_build(
        &self,
        workspace: Uuid,
        req: &CreateWorkspaceBuildRequest,
    ) -> Result<WorkspaceBuild, crate::ClientError> {
        self.post(&format!("/api/v2/workspaces/{workspace}/builds"), req)
            .await
    }

    pub async fn workspace_builds(
        &self,
        workspace: Uuid,
    ) -> Result<Vec<WorkspaceBuild>, crate::ClientError> {
        self.get(&format!("/api/v2/workspaces/{workspace}/builds"))
            .await
    }

    pub async fn workspace_build(&self, id: Uuid) -> Result<WorkspaceBuild, crate::ClientError> {
        self.get(&format!("/api/v2/workspacebuilds/{id}")).await
    }

    pub async fn workspace_build_timings(
        &self,
        id: Uuid,
    ) -> Result<WorkspaceBuildTimings, crate::ClientError> {
        self.get(&format!("/api/v2/workspacebuilds/{id}/timings"))
            .await
    }

    pub async fn workspace_build_logs(
        &self,
        id: Uuid,
    ) -> Result<Vec<crate::provisioners::ProvisionerJobLog>, crate::ClientError> {
        self.get(&format!("/api/v2/workspacebuilds/{id}/logs"))
            .await
    }

    pub async fn workspace_build_state(&self, id: Uuid) -> Result<Vec<u8>, crate::ClientError> {
        let resp = crate::client::check(
            self.request(
                reqwest::Method::GET,
                &format!("/api/v2/workspacebuilds/{id}/state"),
            )?
            .send()
            .await?,
        )
        .await?;
        Ok(resp.bytes().await?.to_vec())
    }

    pub async fn workspace_build_parameters(
        &self,
        id: Uuid,
    ) -> Result<Vec<WorkspaceBuildParameter>, crate::ClientError> {
        self.get(&format!("/api/v2/workspacebuilds/{id}/parameters"))
            .await
    }

    pub async fn cancel_workspace_build(
        &self,
        id: Uuid,
    ) -> Result<crate::Response, crate::ClientError> {
        self.send(self.request(
            reqwest::Method::PATCH,
            &format!("/api/v2/workspacebuilds/{id}/cancel"),
        )?)
        .await
    }
}

/// One line an agent logged (`GET /workspaceagents/{id}/logs`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkspaceAgentLog {
    pub id: i64,
    pub created_at: DateTime<Utc>,
    pub output: String,
    pub level: String,
    pub source_id: Uuid,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkspaceAgentMetadataResult {
    /// Go's zero time (`0001-01-01T00:00:00Z`) until the agent has collected a value: Coder's
    /// clients parse this field as a timestamp and fail on `null`.
    pub collected_at: DateTime<Utc>,
    pub age: i64,
    pub value: String,
    pub error: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkspaceAgentMetadataDescription {
    pub display_name: String,
    pub key: String,
    pub script: String,
    pub interval: i64,
    pub timeout: i64,
}

/// The latest value of one metadata key (`GET /workspaceagents/{id}/watch-metadata`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkspaceAgentMetadata {
    pub result: WorkspaceAgentMetadataResult,
    pub description: WorkspaceAgentMetadataDescription,
}

impl crate::Client {
    pub async fn workspace_agent(&self, id: Uuid) -> Result<WorkspaceAgent, crate::ClientError> {
        self.get(&format!("/api/v2/workspaceagents/{id}")).await
    }

    pub async fn workspace_agent_logs(
        &self,
        id: Uuid,
    ) -> Result<Vec<WorkspaceAgentLog>, crate::ClientError> {
        self.agent_logs_after(id, 0).await
    }

    /// An agent's stored log lines with ids above `after`, oldest first.
    pub async fn agent_logs_after(
        &self,
        id: Uuid,
        after: i64,
    ) -> Result<Vec<WorkspaceAgentLog>, crate::ClientError> {
        self.get_query(
            &format!("/api/v2/workspaceagents/{id}/logs"),
            &[("after", after.to_string())],
        )
        .await
    }

    /// The current metadata values (one snapshot of the watch stream).
    pub async fn workspace_agent_metadata(
        &self,
        id: Uuid,
    ) -> Result<Vec<WorkspaceAgentMetadata>, crate::ClientError> {
        self.get_query(
            &format!("/api/v2/workspaceagents/{id}/watch-metadata"),
            &[("snapshot", "true")],
        )
        .await
    }
}

/// A `coder_devcontainer` of an agent, as `GET /workspaceagents/{id}/containers` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkspaceAgentDevcontainer {
    pub id: Uuid,
    pub name: String,
    pub workspace_folder: String,
    pub config_path: String,
    /// `running`, `stopped`, `starting` or `error`.
    pub status: String,
    pub dirty: bool,
    /// Why the container is not running, when `status` is `error`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error: String,
    /// The sub-agent of the container (absent when it has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<WorkspaceAgentDevcontainerAgent>,
}

/// A dev container's sub-agent, as the containers listing names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkspaceAgentDevcontainerAgent {
    pub id: Uuid,
    pub name: String,
    pub directory: String,
}

/// An agent's dev containers and the containers it sees (none without a container engine).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkspaceAgentListContainersResponse {
    pub devcontainers: Vec<WorkspaceAgentDevcontainer>,
    /// Containers the agent sees; always empty here (no container engine is used).
    #[schema(value_type = Vec<Object>)]
    pub containers: Vec<serde_json::Value>,
    pub warnings: Vec<String>,
}

impl crate::Client {
    /// Reports that `app` uses `workspace` through `agent` (`POST /workspaces/{id}/usage`).
    pub async fn report_workspace_usage(
        &self,
        workspace: Uuid,
        agent: Uuid,
        app: &str,
    ) -> Result<(), crate::ClientError> {
        let request = self
            .request(
                reqwest::Method::POST,
                &format!("/api/v2/workspaces/{workspace}/usage"),
            )?
            .json(&serde_json::json!({"agent_id": agent, "app_name": app}));
        self.send_empty(request).await
    }
}

impl crate::Client {
    pub async fn rename_workspace(&self, id: Uuid, name: &str) -> Result<(), crate::ClientError> {
        let request = self
            .request(reqwest::Method::PATCH, &format!("/api/v2/workspaces/{id}"))?
            .json(&UpdateWorkspaceRequest {
                name: Some(name.to_owned()),
            });
        self.send_empty(request).await
    }

    /// Pins (`true`) or unpins a workspace for its owner.
    pub async fn set_workspace_favorite(
        &self,
        id: Uuid,
        favorite: bool,
    ) -> Result<(), crate::ClientError> {
        let method = if favorite {
            reqwest::Method::PUT
        } else {
            reqwest::Method::DELETE
        };
        let request = self.request(method, &format!("/api/v2/workspaces/{id}/favorite"))?;
        self.send_empty(request).await
    }
}

impl crate::Client {
    /// Replaces build `id`'s Terraform state (no build runs).
    pub async fn update_workspace_build_state(
        &self,
        id: Uuid,
        state: Vec<u8>,
    ) -> Result<(), crate::ClientError> {
        let request = self
            .request(
                reqwest::Method::PUT,
                &format!("/api/v2/workspacebuilds/{id}/state"),
            )?
            .json(&UpdateWorkspaceBuildStateRequest {
                state: StateBytes(state),
            });
        self.send_empty(request).await
    }
}

/// How a client reaches an agent. Connections here go through coderd's relay, never
/// peer-to-peer or through DERP relays: the map is empty and direct connections are off.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkspaceAgentConnectionInfo {
    /// Tailscale's DERP map (`{"Regions": {}}`): no DERP regions.
    #[schema(value_type = Object)]
    pub derp_map: serde_json::Value,
    pub derp_force_websockets: bool,
    pub disable_direct_connections: bool,
    pub hostname_suffix: String,
}
