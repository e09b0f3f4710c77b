//! External agents: an agent of a `coder_external_agent` build runs on a machine its owner
//! provides, started with the credentials `GET /workspaces/{workspace}/external-agent/{agent}/
//! credentials` hands out.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

/// What starts an external agent: its token, and a shell command that downloads and runs it.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ExternalAgentCredentials {
    pub agent_token: String,
    pub command: String,
}

impl std::fmt::Debug for ExternalAgentCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExternalAgentCredentials")
            .field("agent_token", &"<redacted>")
            .field("command", &"<redacted>")
            .finish()
    }
}

impl crate::Client {
    pub async fn workspace_external_agent_credentials(
        &self,
        workspace: Uuid,
        agent: &str,
    ) -> Result<ExternalAgentCredentials, crate::ClientError> {
        self.get(&format!(
            "/api/v2/workspaces/{workspace}/external-agent/{agent}/credentials"
        ))
        .await
    }
}
