//! Coder's Tasks (`/api/v2/tasks`): a prompt handed to an AI agent that runs in a workspace of
//! a template version with a `coder_ai_task`. A task has its own id and name; its status is
//! derived from its workspace's latest build, the task app's agent and the app's health.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::workspaces::{WorkspaceAgentHealth, WorkspaceStatus};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CreateTaskRequest {
    pub template_version_id: Uuid,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_version_preset_id: Option<Uuid>,
    /// The prompt: what the task's AI agent is asked to do.
    #[serde(default)]
    pub input: String,
    /// The task's (and its workspace's) name; generated from the input when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Generated from the input when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub display_name: String,
}

/// Coder's `TaskStatus`, derived from the workspace's latest build, then the task app's agent,
/// then the app's health.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum TaskStatus {
    /// No build has started yet.
    Pending,
    /// The build runs, the agent connects or starts, or the app initialises.
    Initializing,
    /// Started, its agent ready and its app healthy (or without health check).
    Active,
    /// The workspace was stopped.
    Paused,
    Unknown,
    /// The build failed or was canceled, or the app is unhealthy.
    Error,
}

impl TaskStatus {
    pub const ALL: [TaskStatus; 6] = [
        Self::Pending,
        Self::Initializing,
        Self::Active,
        Self::Paused,
        Self::Error,
        Self::Unknown,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Initializing => "initializing",
            Self::Active => "active",
            Self::Paused => "paused",
            Self::Unknown => "unknown",
            Self::Error => "error",
        }
    }
}

impl std::str::FromStr for TaskStatus {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|status| status.as_str() == s)
            .ok_or_else(|| format!("unknown task status {s:?}"))
    }
}

impl std::fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Coder's `TaskState`: what the AI agent reports it is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum TaskState {
    Working,
    Idle,
    Complete,
    Failed,
}

impl TaskState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Working => "working",
            Self::Idle => "idle",
            Self::Complete => "complete",
            Self::Failed => "failed",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TaskStateEntry {
    pub timestamp: DateTime<Utc>,
    pub state: TaskState,
    pub message: String,
    pub uri: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Task {
    pub id: Uuid,
    pub organization_id: Uuid,
    pub owner_id: Uuid,
    pub owner_name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub owner_avatar_url: String,
    pub name: String,
    pub display_name: String,
    pub template_id: Uuid,
    pub template_version_id: Uuid,
    pub template_name: String,
    pub template_display_name: String,
    pub template_icon: String,
    pub workspace_id: Option<Uuid>,
    pub workspace_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_status: Option<WorkspaceStatus>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub workspace_build_number: i32,
    pub workspace_agent_id: Option<Uuid>,
    /// The task app's agent's lifecycle state (`created`, `starting`, `ready`, ...).
    pub workspace_agent_lifecycle: Option<String>,
    pub workspace_agent_health: Option<WorkspaceAgentHealth>,
    pub workspace_app_id: Option<Uuid>,
    pub initial_prompt: String,
    pub status: TaskStatus,
    pub current_state: Option<TaskStateEntry>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TasksListResponse {
    pub tasks: Vec<Task>,
    pub count: i64,
}

/// What `GET /api/v2/tasks` filters on; rendered as Coder's `q` search (`owner:"me"
/// status:"active"`), each value quoted so it stays one term.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TasksFilter {
    /// A username, a user id or `me`.
    pub owner: String,
    /// An organization's name or id.
    pub organization: String,
    pub status: Option<TaskStatus>,
    /// Appended as it is.
    pub filter_query: String,
}

impl TasksFilter {
    pub fn query(&self) -> String {
        let mut terms = Vec::new();
        if !self.owner.is_empty() {
            terms.push(format!("owner:{:?}", self.owner));
        }
        if !self.organization.is_empty() {
            terms.push(format!("organization:{:?}", self.organization));
        }
        if let Some(status) = self.status {
            terms.push(format!("status:{:?}", status.as_str()));
        }
        if !self.filter_query.is_empty() {
            terms.push(self.filter_query.clone());
        }
        terms.join(" ")
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TaskSendRequest {
    #[serde(default)]
    pub input: String,
}

/// Who wrote a task log entry: the user (`input`) or the task's AI agent (`output`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum TaskLogType {
    Input,
    Output,
}

impl TaskLogType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Input => "input",
            Self::Output => "output",
        }
    }
}

/// One message of a task's conversation with its AI agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TaskLogEntry {
    /// The message's place in the conversation (the task app's own numbering).
    pub id: i64,
    pub content: String,
    #[serde(rename = "type")]
    pub kind: TaskLogType,
    pub time: DateTime<Utc>,
}

/// A task's conversation. `snapshot` is true when it does not come live from the task's app
/// (the task is not active); `snapshot_at` says when a stored snapshot was taken.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TaskLogsResponse {
    pub logs: Vec<TaskLogEntry>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub snapshot: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_at: Option<DateTime<Utc>>,
}

impl crate::Client {
    /// Creates a task for `user` (`me`, a username or an id).
    pub async fn create_task(
        &self,
        user: &str,
        req: &CreateTaskRequest,
    ) -> Result<Task, crate::ClientError> {
        self.post(&format!("/api/v2/tasks/{}", segment(user)), req)
            .await
    }

    pub async fn tasks(&self, filter: &TasksFilter) -> Result<Vec<Task>, crate::ClientError> {
        let resp: TasksListResponse = self
            .get_query("/api/v2/tasks", &[("q", filter.query())])
            .await?;
        Ok(resp.tasks)
    }

    /// A task by its owner (`me`, a username or an id) and its id or name.
    pub async fn task(&self, owner: &str, task: &str) -> Result<Task, crate::ClientError> {
        self.get(&format!(
            "/api/v2/tasks/{}/{}",
            segment(owner),
            segment(task)
        ))
        .await
    }

    /// A task by an id, a name of the caller's, or `owner/name`.
    pub async fn task_by_identifier(&self, identifier: &str) -> Result<Task, crate::ClientError> {
        let identifier = identifier.trim();
        match identifier.split('/').collect::<Vec<_>>()[..] {
            [owner, name] => self.task(owner, name).await,
            _ => self.task("me", identifier).await,
        }
    }

    pub async fn delete_task(&self, owner: &str, task: &str) -> Result<(), crate::ClientError> {
        self.delete(&format!(
            "/api/v2/tasks/{}/{}",
            segment(owner),
            segment(task)
        ))
        .await
    }

    pub async fn task_send(
        &self,
        owner: &str,
        task: &str,
        req: &TaskSendRequest,
    ) -> Result<(), crate::ClientError> {
        let path = format!("/api/v2/tasks/{}/{}/send", segment(owner), segment(task));
        self.send_empty(self.request(reqwest::Method::POST, &path)?.json(req))
            .await
    }

    /// The task's conversation with its AI agent.
    pub async fn task_logs(
        &self,
        owner: &str,
        task: &str,
    ) -> Result<TaskLogsResponse, crate::ClientError> {
        self.get(&format!(
            "/api/v2/tasks/{}/{}/logs",
            segment(owner),
            segment(task)
        ))
        .await
    }
}

fn segment(part: &str) -> String {
    url::form_urlencoded::byte_serialize(part.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filter_quotes_each_value() {
        let filter = TasksFilter {
            owner: "me".into(),
            organization: String::new(),
            status: Some(TaskStatus::Active),
            filter_query: String::new(),
        };
        assert_eq!(filter.query(), r#"owner:"me" status:"active""#);
        assert_eq!(TasksFilter::default().query(), "");
    }

    #[test]
    fn statuses_round_trip() {
        for status in TaskStatus::ALL {
            assert_eq!(status.as_str().parse::<TaskStatus>(), Ok(status));
            assert_eq!(
                serde_json::to_value(status).ok(),
                Some(serde_json::Value::from(status.as_str()))
            );
        }
    }
}
