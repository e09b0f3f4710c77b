//! The deployment's sign-in providers as configured and running: OIDC's and GitHub's settings
//! and their long-lived `oauth-client` clients, started with the core so every front door
//! (the API's callbacks, the dashboard's login page) sees the same ones. Who may sign in, and
//! as which user, is the sso crate's to decide.

mod github;
pub mod group_sync;
mod oidc;

use std::sync::Arc;

use oauth_client::github::GithubClient;
use oauth_client::oidc::OidcClient;
use oauth_client::{HttpClient, KeyRing};

use coderd_store::{self as store, Store};

pub use github::{AllowedTeam, GITHUB_CALLBACK_PATH, GithubSettings};
pub use oidc::{CALLBACK_PATH, OidcSettings};

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

    /// The key sealing sign-ins in flight (the state cookie).
    pub fn state_keys(&self) -> &KeyRing {
        &self.state_keys
    }
}
