#![doc = include_str!("../README.md")]

pub mod cipher;
pub mod device;
pub mod github;
mod http;
pub mod oauth2;
pub mod oidc;
pub mod pending;
mod revoke;
mod tokens;
mod validate;

pub use cipher::{KeyRing, SealError};
pub use http::HttpClient;
pub use pending::PendingAuth;
pub use tokens::TokenSet;
pub use validate::Validity;

/// What can go wrong talking to a provider. Messages are written for the person signing in and
/// the operator reading the log; none carries a token or secret.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The deployment's settings are wrong (a bad URL, a provider without a needed endpoint).
    #[error("misconfigured identity provider: {0}")]
    Config(String),
    /// The provider could not be reached or answered something unusable.
    #[error("identity provider unavailable: {0}")]
    Unavailable(String),
    /// The provider refused the exchange (a code used twice, expired or issued to another
    /// client; a revoked refresh token).
    #[error("the identity provider refused the request: {0}")]
    Refused(String),
    /// The ID token failed verification (signature, issuer, audience, expiry, nonce).
    #[error("the identity provider's ID token is not valid: {0}")]
    InvalidToken(String),
    /// The round trip did not come back as it left (wrong or missing state, expired attempt).
    #[error("{0}")]
    BadState(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
