//! Port sharing: ports of a workspace's agent opened to others than its owner, at a sharing
//! level capped by the template's `max_port_share_level`.

use reqwest::Method;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkspaceAgentPortShare {
    pub workspace_id: Uuid,
    pub agent_name: String,
    pub port: i32,
    /// `owner`, `authenticated`, `organization` or `public`.
    pub share_level: String,
    /// `http` or `https` (what the workspace side speaks).
    pub protocol: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkspaceAgentPortShares {
    pub shares: Vec<WorkspaceAgentPortShare>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UpsertWorkspaceAgentPortShareRequest {
    pub agent_name: String,
    pub port: i32,
    pub share_level: String,
    /// Empty means `http`.
    #[serde(default)]
    pub protocol: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DeleteWorkspaceAgentPortShareRequest {
    pub agent_name: String,
    pub port: i32,
}

impl crate::Client {
    pub async fn workspace_port_shares(
        &self,
        workspace: Uuid,
    ) -> Result<WorkspaceAgentPortShares, crate::ClientError> {
        self.get(&format!("/api/v2/workspaces/{workspace}/port-share"))
            .await
    }

    pub async fn upsert_workspace_port_share(
        &self,
        workspace: Uuid,
        req: &UpsertWorkspaceAgentPortShareRequest,
    ) -> Result<WorkspaceAgentPortShare, crate::ClientError> {
        self.post(&format!("/api/v2/workspaces/{workspace}/port-share"), req)
            .await
    }

    pub async fn delete_workspace_port_share(
        &self,
        workspace: Uuid,
        req: &DeleteWorkspaceAgentPortShareRequest,
    ) -> Result<(), crate::ClientError> {
        let path = format!("/api/v2/workspaces/{workspace}/port-share");
        self.send_empty(self.request(Method::DELETE, &path)?.json(req))
            .await
    }
}
