//! User secrets (`/api/v2/users/{user}/secrets`): values a user keeps for their workspaces,
//! matched to a template's `coder_secret` by environment variable name or file path. A value
//! goes in on create and update and never comes back out of the API.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

/// A secret's metadata; the value is never included.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UserSecret {
    pub id: Uuid,
    pub name: String,
    pub description: String,
    pub env_name: String,
    pub file_path: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// `name` and `value` are required; the rest default to empty.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CreateUserSecretRequest {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub value: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub env_name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub file_path: String,
}

/// A partial update: absent fields are kept, at least one must be present.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UpdateUserSecretRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_path: Option<String>,
}

// Requests carry values: their Debug shows everything else.
impl std::fmt::Debug for CreateUserSecretRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CreateUserSecretRequest")
            .field("name", &self.name)
            .field("value", &"<redacted>")
            .field("description", &self.description)
            .field("env_name", &self.env_name)
            .field("file_path", &self.file_path)
            .finish()
    }
}

impl std::fmt::Debug for UpdateUserSecretRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpdateUserSecretRequest")
            .field("value", &self.value.as_ref().map(|_| "<redacted>"))
            .field("description", &self.description)
            .field("env_name", &self.env_name)
            .field("file_path", &self.file_path)
            .finish()
    }
}

impl crate::Client {
    pub async fn create_user_secret(
        &self,
        user: &str,
        req: &CreateUserSecretRequest,
    ) -> Result<UserSecret, crate::ClientError> {
        self.post(&format!("/api/v2/users/{user}/secrets"), req)
            .await
    }

    pub async fn user_secrets(&self, user: &str) -> Result<Vec<UserSecret>, crate::ClientError> {
        self.get(&format!("/api/v2/users/{user}/secrets")).await
    }

    pub async fn user_secret(
        &self,
        user: &str,
        name: &str,
    ) -> Result<UserSecret, crate::ClientError> {
        self.get(&format!("/api/v2/users/{user}/secrets/{}", segment(name)))
            .await
    }

    pub async fn update_user_secret(
        &self,
        user: &str,
        name: &str,
        req: &UpdateUserSecretRequest,
    ) -> Result<UserSecret, crate::ClientError> {
        self.patch(
            &format!("/api/v2/users/{user}/secrets/{}", segment(name)),
            req,
        )
        .await
    }

    pub async fn delete_user_secret(
        &self,
        user: &str,
        name: &str,
    ) -> Result<(), crate::ClientError> {
        self.delete(&format!("/api/v2/users/{user}/secrets/{}", segment(name)))
            .await
    }
}

/// A name as one path segment (names may hold spaces and other characters URLs escape).
fn segment(name: &str) -> String {
    url::form_urlencoded::byte_serialize(name.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}
