//! Session tokens and named API tokens.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::users::LoginType;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ApiKey {
    pub id: String,
    pub user_id: Uuid,
    pub last_used: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub login_type: LoginType,
    pub scope: String,
    /// Coder's newer list form of `scope`.
    #[serde(default)]
    pub scopes: Vec<String>,
    pub token_name: String,
    pub lifetime_seconds: i64,
    /// The owner's username (Coder's `APIKeyWithOwner`).
    #[serde(default)]
    pub username: String,
    /// Objects the key is limited to; empty, as keys here are not narrowed to objects.
    #[serde(default)]
    #[schema(value_type = Vec<Object>)]
    pub allow_list: Vec<serde_json::Value>,
}

/// `POST /users/{user}/keys/tokens`. `lifetime` is in nanoseconds, as Go's `time.Duration`;
/// zero means the server's default token lifetime.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CreateTokenRequest {
    #[serde(default)]
    pub lifetime: i64,
    #[serde(default)]
    pub scope: String,
    #[serde(default)]
    pub token_name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct GenerateApiKeyResponse {
    pub key: String,
}

/// One nanosecond-based duration helper for `CreateTokenRequest::lifetime`.
pub const NANOS_PER_SECOND: i64 = 1_000_000_000;

impl crate::Client {
    pub async fn create_token(
        &self,
        user: &str,
        req: &CreateTokenRequest,
    ) -> Result<GenerateApiKeyResponse, crate::ClientError> {
        self.post(&format!("/api/v2/users/{user}/keys/tokens"), req)
            .await
    }

    /// A new session key for `user` (`POST /users/{user}/keys`), with the deployment's session
    /// lifetime; returns the key.
    pub async fn create_session_key(&self, user: &str) -> Result<String, crate::ClientError> {
        let created: GenerateApiKeyResponse = self
            .post(
                &format!("/api/v2/users/{user}/keys"),
                &serde_json::json!({}),
            )
            .await?;
        Ok(created.key)
    }

    pub async fn tokens(&self, user: &str) -> Result<Vec<ApiKey>, crate::ClientError> {
        self.get(&format!("/api/v2/users/{user}/keys/tokens")).await
    }

    pub async fn token_by_name(
        &self,
        user: &str,
        name: &str,
    ) -> Result<ApiKey, crate::ClientError> {
        self.get(&format!("/api/v2/users/{user}/keys/tokens/{name}"))
            .await
    }

    pub async fn expire_api_key(&self, user: &str, id: &str) -> Result<(), crate::ClientError> {
        self.send_empty(self.request(
            reqwest::Method::PUT,
            &format!("/api/v2/users/{user}/keys/{id}/expire"),
        )?)
        .await
    }

    pub async fn delete_api_key(&self, user: &str, id: &str) -> Result<(), crate::ClientError> {
        self.delete(&format!("/api/v2/users/{user}/keys/{id}"))
            .await
    }
}
