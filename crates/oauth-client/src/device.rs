//! The device authorization grant (RFC 8628), for providers that link a person without a
//! browser redirect back to coderd: coderd asks for a device code, the person enters the user
//! code at the provider, and coderd exchanges the device code once they have. Each exchange is
//! one request: the caller (the dashboard, the CLI) polls at the interval the provider named.

use serde::Deserialize;
use url::Url;

use crate::oauth2::OAuth2Client;
use crate::{Error, Result, TokenSet};

const GRANT_TYPE: &str = "urn:ietf:params:oauth:grant-type:device_code";

/// What the provider answered the device authorization request with.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct DeviceAuthorization {
    pub device_code: String,
    pub user_code: String,
    /// GitHub and others say `verification_url`, as the RFC's drafts did.
    #[serde(alias = "verification_url")]
    pub verification_uri: String,
    #[serde(default)]
    pub expires_in: i64,
    #[serde(default = "default_interval")]
    pub interval: i64,
}

/// RFC 8628 §3.2: five seconds when the provider names no interval.
fn default_interval() -> i64 {
    5
}

/// How one exchange of a device code ended, short of success.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DevicePending {
    /// The person has not entered the code yet (`authorization_pending`), or the caller polls
    /// too fast (`slow_down`): ask again later.
    #[error("{0}")]
    NotYet(String),
    /// Denied, expired, or otherwise refused for good.
    #[error("{0}")]
    Refused(String),
}

#[derive(Deserialize)]
struct ErrorBody {
    error: String,
    #[serde(default)]
    error_description: String,
}

impl OAuth2Client {
    /// Starts a device authorization at `device_url`.
    pub async fn begin_device(&self, device_url: &Url) -> Result<DeviceAuthorization> {
        let config = self.config();
        let mut form = vec![("client_id", config.client_id.clone())];
        if !config.scopes.is_empty() {
            form.push(("scope", config.scopes.join(" ")));
        }
        let response = self
            .http()
            .post_form(device_url.clone(), &form, None)
            .await?;
        if !response.status.is_success() {
            return Err(Error::Refused(format!(
                "the device authorization endpoint answered {}: {}",
                response.status,
                String::from_utf8_lossy(&response.body)
            )));
        }
        serde_json::from_slice(&response.body).map_err(|e| {
            Error::Unavailable(format!(
                "the device authorization response is not valid: {e}"
            ))
        })
    }

    /// Exchanges `device_code` once: the tokens when the person has approved, else why not.
    pub async fn exchange_device(
        &self,
        device_code: &str,
    ) -> Result<std::result::Result<TokenSet, DevicePending>> {
        let config = self.config();
        let form = vec![
            ("grant_type", GRANT_TYPE.to_string()),
            ("device_code", device_code.to_string()),
            ("client_id", config.client_id.clone()),
        ];
        let response = self
            .http()
            .post_form(config.token_url.clone(), &form, Some(self.credentials()))
            .await?;
        if let Ok(error) = serde_json::from_slice::<ErrorBody>(&response.body) {
            let message = if error.error_description.is_empty() {
                error.error.clone()
            } else {
                format!("{}: {}", error.error, error.error_description)
            };
            return Ok(Err(match error.error.as_str() {
                "authorization_pending" | "slow_down" => DevicePending::NotYet(message),
                _ => DevicePending::Refused(message),
            }));
        }
        if !response.status.is_success() {
            return Err(Error::Unavailable(format!(
                "the token endpoint answered {}",
                response.status
            )));
        }
        self.tokens_from_json(&response.body).map(Ok)
    }
}
