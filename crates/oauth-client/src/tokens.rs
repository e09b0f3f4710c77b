//! The tokens a provider hands back, kept together and never printed.

use chrono::{DateTime, Utc};
use openidconnect::OAuth2TokenResponse;

/// An access token with, where the provider issues them, a refresh token and an expiry.
#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TokenSet {
    pub access_token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
    /// The token response's fields the provider is configured to keep beyond the standard
    /// ones (external auth's `EXTRA_TOKEN_KEYS`); may hold secrets, so never printed.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

impl std::fmt::Debug for TokenSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenSet")
            .field("access_token", &"<redacted>")
            .field(
                "refresh_token",
                &self.refresh_token.as_ref().map(|_| "<redacted>"),
            )
            .field("expires_at", &self.expires_at)
            .field("extra", &self.extra.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl TokenSet {
    pub(crate) fn from_response(response: &impl OAuth2TokenResponse) -> Self {
        let expires_at = response
            .expires_in()
            .and_then(|d| chrono::Duration::from_std(d).ok())
            .map(|d| Utc::now() + d);
        Self {
            access_token: response.access_token().secret().clone(),
            refresh_token: response.refresh_token().map(|t| t.secret().clone()),
            expires_at,
            extra: serde_json::Map::new(),
        }
    }

    /// Whether the access token has expired (or will within `margin`).
    pub fn expired(&self, margin: chrono::Duration) -> bool {
        self.expires_at.is_some_and(|at| at - margin <= Utc::now())
    }

    /// After a refresh: providers may omit the refresh token when it did not rotate.
    pub(crate) fn keep_refresh_token_from(mut self, previous: &TokenSet) -> Self {
        if self.refresh_token.is_none() {
            self.refresh_token = previous.refresh_token.clone();
        }
        self
    }
}
