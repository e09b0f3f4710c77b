//! Single sign-on: people signing in through the deployment's identity provider instead of a
//! password. Two sibling providers — OpenID Connect (`settings`, `login`: Coder's
//! `CODER_OIDC_*`) and GitHub (`github`: `CODER_OAUTH2_GITHUB_*`) — each with a long-lived
//! client from `oauth-client` (which does the protocol: discovery, PKCE, `state`/`nonce`,
//! ID-token verification, GitHub's API) and its own decision about who may sign in; `account`
//! then decides, for both, as which user; `routes` is the front door (the callbacks and
//! `/users/authmethods`). It uses the core (store, domain keys) and never the `http` module.

mod account;
mod github;
mod login;
pub(crate) mod routes;
mod settings;

use std::sync::Arc;

use axum::http::StatusCode;
use oauth_client::github::GithubClient;
use oauth_client::oidc::OidcClient;
use oauth_client::{HttpClient, KeyRing};

use crate::error::ApiError;
use crate::store::{self, Store};

pub use account::{Login, username_from};
pub use github::{AllowedTeam, GITHUB_CALLBACK_PATH, GithubSettings, github_login};
pub use login::oidc_login;
pub use routes::{CALLBACK_PATH, methods as auth_methods, routes};
pub use settings::OidcSettings;

/// The `site_configs` key of the secret that seals sign-ins in flight (the state cookie). Kept
/// in the database so every replica opens what another started.
const STATE_KEY: &str = "oauth_state_key";

/// The running sign-in providers of a deployment.
pub struct Sso {
    oidc: Option<Arc<OidcClient>>,
    github: Option<Arc<GithubClient>>,
    state_keys: KeyRing,
}

impl std::fmt::Debug for Sso {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sso")
            .field("oidc", &self.oidc.is_some())
            .field("github", &self.github.is_some())
            .finish_non_exhaustive()
    }
}

impl Sso {
    /// Sets up the configured providers. Providers are discovered on first use, so coderd
    /// starts while an identity provider is down.
    pub async fn start(
        store: &Store,
        options: &crate::state::Options,
    ) -> Result<Self, store::Error> {
        let secret = store.site_secret(STATE_KEY, KeyRing::generate_key).await?;
        let state_keys = KeyRing::from_base64(&[secret]).unwrap_or_else(|e| {
            // Only a hand-edited database gets here; sign-ins still work on this replica.
            tracing::error!(error = %e, "the stored sign-in state key is damaged; using a temporary one");
            KeyRing::ephemeral()
        });
        let oidc = match (&options.oidc, HttpClient::new()) {
            (None, _) => None,
            (Some(settings), Ok(http)) => {
                if options.external_token_keys.is_none() {
                    tracing::info!(
                        "OIDC tokens are not kept: set CODER_EXTERNAL_TOKEN_ENCRYPTION_KEYS to keep them encrypted"
                    );
                }
                Some(Arc::new(OidcClient::new(
                    "oidc",
                    settings.client_config(&options.access_url),
                    http,
                )))
            }
            (Some(_), Err(e)) => {
                tracing::error!(error = %e, "OIDC login is disabled");
                None
            }
        };
        let github = match (&options.github, HttpClient::new()) {
            (None, _) => None,
            (Some(settings), Ok(http)) => match settings.client(&options.access_url, http) {
                Ok(client) => Some(Arc::new(client)),
                Err(e) => {
                    tracing::error!(error = %e, "GitHub login is disabled");
                    None
                }
            },
            (Some(_), Err(e)) => {
                tracing::error!(error = %e, "GitHub login is disabled");
                None
            }
        };
        Ok(Self {
            oidc,
            github,
            state_keys,
        })
    }

    pub fn oidc(&self) -> Option<&Arc<OidcClient>> {
        self.oidc.as_ref()
    }

    pub fn github(&self) -> Option<&Arc<GithubClient>> {
        self.github.as_ref()
    }
}

/// Why a sign-in through a provider was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A decision of ours: the message is for the person signing in.
    #[error("{message}")]
    Refused {
        status: StatusCode,
        message: String,
        detail: String,
    },
    #[error(transparent)]
    Provider(#[from] oauth_client::Error),
    #[error(transparent)]
    Domain(#[from] crate::domain::Error),
    #[error(transparent)]
    Store(#[from] store::Error),
}

impl Error {
    fn refused(status: StatusCode, message: impl Into<String>) -> Self {
        Self::Refused {
            status,
            message: message.into(),
            detail: String::new(),
        }
    }
}

impl From<Error> for ApiError {
    #[track_caller]
    fn from(e: Error) -> Self {
        use oauth_client::Error as P;
        match e {
            Error::Refused {
                status,
                message,
                detail,
            } => ApiError::new(status, message).with_detail(detail),
            Error::Provider(P::BadState(message)) => ApiError::bad_request(message),
            Error::Provider(P::Refused(detail)) => {
                ApiError::bad_request("The identity provider refused to complete the sign-in.")
                    .with_detail(detail)
            }
            Error::Provider(P::InvalidToken(detail)) => {
                ApiError::unauthorized("Failed to verify the identity provider's ID token.")
                    .with_detail(detail)
            }
            Error::Provider(P::Unavailable(detail)) => {
                tracing::warn!(%detail, "identity provider unavailable");
                ApiError::new(
                    StatusCode::BAD_GATEWAY,
                    "The identity provider could not be reached.",
                )
                .with_detail(detail)
            }
            Error::Provider(P::Config(cause)) => ApiError::internal(cause),
            Error::Domain(e) => e.into(),
            Error::Store(e) => e.into(),
        }
    }
}
