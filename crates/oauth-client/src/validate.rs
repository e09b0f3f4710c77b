//! Asking a provider whether an access token still works (external auth's `VALIDATE_URL`):
//! a token the provider refuses is no token, whatever its expiry says.

use url::Url;

use crate::HttpClient;

/// What the validation endpoint said of a token.
#[derive(Debug, Clone, PartialEq)]
pub enum Validity {
    /// Accepted; the endpoint's JSON answer (GitHub's `/user` names the account).
    Valid(Option<serde_json::Value>),
    /// Refused (401 or 403).
    Invalid(String),
    /// Rate limited or otherwise unsure: the token is kept as valid, since a provider's bad
    /// minute must not unlink anyone.
    Unknown(String),
}

impl HttpClient {
    pub async fn validate_token(&self, url: &Url, access_token: &str) -> Validity {
        let response = match self
            .inner()
            .get(url.clone())
            .bearer_auth(access_token)
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
        {
            Ok(response) => response,
            Err(e) => return Validity::Unknown(e.without_url().to_string()),
        };
        let status = response.status();
        if status == reqwest::StatusCode::UNAUTHORIZED || status == reqwest::StatusCode::FORBIDDEN {
            // GitHub answers 403 when rate limited; that is not a verdict on the token.
            let limited = response
                .headers()
                .get("x-ratelimit-remaining")
                .is_some_and(|v| v == "0");
            if !limited {
                return Validity::Invalid(format!("the provider answered {status}"));
            }
        }
        if !status.is_success() {
            return Validity::Unknown(format!("the provider answered {status}"));
        }
        Validity::Valid(response.json().await.ok())
    }
}
