//! `GET /api/v2/buildinfo`.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct BuildInfoResponse {
    pub external_url: String,
    pub version: String,
    pub dashboard_url: String,
    pub workspace_proxy: bool,
    pub agent_api_version: String,
    pub provisioner_api_version: String,
    pub upgrade_message: String,
    pub deployment_id: String,
    /// Whether the deployment reports telemetry; coder-rs never does.
    #[serde(default)]
    pub telemetry: bool,
}

impl crate::Client {
    pub async fn build_info(&self) -> Result<BuildInfoResponse, crate::ClientError> {
        self.get("/api/v2/buildinfo").await
    }
}
