//! `GET /api/v2/applications/host`: where subdomain apps live.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The wildcard host subdomain apps live under (`*.apps.example.com`), empty without one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AppHostResponse {
    pub host: String,
}

impl crate::Client {
    pub async fn app_host(&self) -> Result<AppHostResponse, crate::ClientError> {
        self.get("/api/v2/applications/host").await
    }
}
