//! External auth: the git providers (and other OAuth2 services) a user links once so that git
//! in their workspaces, and the templates that need a token, just work; and each user's git
//! SSH key. Coder's names and shapes throughout.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

/// `GET /external-auth/{id}`: the caller's link with one provider.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ExternalAuth {
    pub authenticated: bool,
    /// The provider links through the device flow (`…/device`) rather than a redirect.
    pub device: bool,
    pub display_name: String,
    /// Who the token belongs to at the provider, when its validation says.
    pub user: Option<ExternalAuthUser>,
    pub app_installable: bool,
    pub installations: Vec<ExternalAuthAppInstallation>,
    pub app_install_url: String,
    pub supports_revocation: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ExternalAuthUser {
    pub id: i64,
    pub login: String,
    pub avatar_url: String,
    pub profile_url: String,
    pub name: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ExternalAuthAppInstallation {
    pub id: i64,
    pub account: ExternalAuthUser,
    pub configure_url: String,
}

/// `GET /external-auth`: the deployment's providers and the caller's links with them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ListUserExternalAuthResponse {
    pub providers: Vec<ExternalAuthLinkProvider>,
    pub links: Vec<ExternalAuthLink>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ExternalAuthLinkProvider {
    pub id: String,
    #[serde(rename = "type")]
    pub r#type: String,
    pub device: bool,
    pub display_name: String,
    pub display_icon: String,
    pub allow_refresh: bool,
    pub allow_validate: bool,
    pub supports_revocation: bool,
    /// `["S256"]`, or `["none"]` for a provider that takes no PKCE challenge.
    pub code_challenge_methods_supported: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ExternalAuthLink {
    pub provider_id: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub has_refresh_token: bool,
    /// The access token's expiry; Go's zero time when it has none.
    pub expires: DateTime<Utc>,
    pub authenticated: bool,
    /// Why the link does not work (a refused refresh, a failed validation), or empty.
    pub validate_error: String,
}

/// RFC 8628's device authorization response, as the dashboard and CLI show it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ExternalAuthDevice {
    pub device_code: String,
    pub user_code: String,
    pub verification_uri: String,
    pub expires_in: i64,
    pub interval: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ExternalAuthDeviceExchange {
    pub device_code: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DeleteExternalAuthByIdResponse {
    /// The provider confirmed the token is revoked.
    pub token_revoked: bool,
    /// Why it could not, when it could not (the link is removed either way).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub token_revocation_error: String,
}

/// A provider a template version needs (`data "coder_external_auth"`), and whether the caller
/// is linked with it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TemplateVersionExternalAuth {
    pub id: String,
    #[serde(rename = "type")]
    pub r#type: String,
    pub display_name: String,
    pub display_icon: String,
    pub authenticate_url: String,
    pub authenticated: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
}

/// `GET /workspaceagents/me/external-auth`: the workspace owner's credentials for a URL (what
/// `coder gitaskpass` hands git) or for a provider id.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AgentExternalAuthResponse {
    pub access_token: String,
    /// The extra token fields the provider is configured to keep (`EXTRA_TOKEN_KEYS`).
    pub token_extra: serde_json::Map<String, serde_json::Value>,
    /// Set, with the rest empty, when the owner must link first: where to do it.
    pub url: String,
    #[serde(rename = "type")]
    pub r#type: String,
    /// What git sends as the user name and password for this provider.
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for AgentExternalAuthResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentExternalAuthResponse")
            .field("url", &self.url)
            .field("type", &self.r#type)
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

/// A user's git SSH key as the API shows it: the public half only.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct GitSshKey {
    pub user_id: Uuid,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub public_key: String,
}

/// The workspace owner's git SSH key, for `coder gitssh` inside the workspace.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AgentGitSshKey {
    pub public_key: String,
    pub private_key: String,
}

impl std::fmt::Debug for AgentGitSshKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentGitSshKey")
            .field("public_key", &self.public_key)
            .field("private_key", &"<redacted>")
            .finish()
    }
}

/// A provider's access token as a build receives it: terraform's `coder_external_auth` data
/// source reads it from `CODER_EXTERNAL_AUTH_ACCESS_TOKEN_<id>`.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExternalAuthProviderToken {
    pub id: String,
    pub access_token: String,
}

impl std::fmt::Debug for ExternalAuthProviderToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExternalAuthProviderToken")
            .field("id", &self.id)
            .field("access_token", &"<redacted>")
            .finish()
    }
}
