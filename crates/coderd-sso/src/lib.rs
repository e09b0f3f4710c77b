//! Who people are: single sign-on and groups.
//!
//! Single sign-on lets people sign in through the deployment's identity provider instead of a
//! password. Two sibling providers — OpenID Connect (`login`: Coder's `CODER_OIDC_*`) and
//! GitHub (`github`: `CODER_OAUTH2_GITHUB_*`) — each with a long-lived client from
//! `oauth-client` that the core starts (`coderd_core::sso_providers`: the protocol, discovery,
//! PKCE, `state`/`nonce`, ID-token verification, GitHub's API), and each with its own decision
//! about who may sign in; `account` then decides, for both, as which user; `routes` is the
//! front door (the callbacks and `/users/authmethods`). [`groups`] owns groups, template access
//! lists and what OIDC group sync does with a sign-in's groups. Both use the core (store,
//! domain) and the shared HTTP kit, never another front door.

mod account;
mod github;
pub mod groups;
mod login;
pub mod routes;

use axum::http::StatusCode;

use coderd_http::error::ApiError;
use coderd_store as store;

pub use account::{Login, username_from};
pub use coderd_core::sso_providers::{
    AllowedTeam, GITHUB_CALLBACK_PATH, GithubSettings, OidcSettings, Sso,
};
pub use github::github_login;
pub use login::oidc_login;
pub use routes::{CALLBACK_PATH, methods as auth_methods, routes};

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
    Domain(#[from] coderd_core::domain::Error),
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
