//! Minting API keys: sessions (password logins), named tokens, and the short-lived owner tokens
//! terraform builds get.

use std::time::Duration;

use chrono::Utc;
use codersdk::users::LoginType;
use uuid::Uuid;

use super::{Error, Result};
use crate::audit::Entry;
use crate::state::AppState;
use coderd_store::{self as store, NewApiKey};

/// The scope of keys minted for one app host (the subdomain app hand-off): they open apps and
/// nothing else; the API refuses them.
pub const APP_CONNECT_SCOPE: &str = "application_connect";

/// Mints a key for `user` and stores its hash; returns the token to show once. `audit`, when
/// given, is recorded with the key's fields as its diff, in the key's transaction.
pub async fn issue_key(
    state: &AppState,
    user: Uuid,
    login_type: LoginType,
    token_name: &str,
    lifetime: Duration,
    audit: Option<Entry>,
) -> Result<String> {
    issue_scoped_key(state, user, login_type, token_name, "all", lifetime, audit).await
}

/// An app host's key: scoped to [`APP_CONNECT_SCOPE`], a fixed lifetime (it never slides).
pub async fn issue_app_key(state: &AppState, user: Uuid, lifetime: Duration) -> Result<String> {
    issue_scoped_key(
        state,
        user,
        LoginType::Token,
        "",
        APP_CONNECT_SCOPE,
        lifetime,
        None,
    )
    .await
}

async fn issue_scoped_key(
    state: &AppState,
    user: Uuid,
    login_type: LoginType,
    token_name: &str,
    scope: &str,
    lifetime: Duration,
    audit: Option<Entry>,
) -> Result<String> {
    let generated = coderd_authz::auth::generate_key();
    let lifetime_seconds = i64::try_from(lifetime.as_secs()).unwrap_or(i64::MAX);
    let key = NewApiKey {
        id: generated.id.clone(),
        hashed_secret: generated.hashed_secret.clone(),
        user_id: user,
        login_type: login_type.as_str().into(),
        token_name: token_name.into(),
        scope: scope.into(),
        lifetime_seconds,
        expires_at: Utc::now() + chrono::Duration::seconds(lifetime_seconds),
    };
    let log = audit.map(|e| e.diff(None, Some(&key)).build());
    state
        .store
        .insert_api_key(&key, log.as_ref())
        .await
        .map_err(|e| match e {
            store::Error::Conflict { .. } => Error::conflict(format!(
                "A token with the name {token_name:?} already exists."
            )),
            other => other.into(),
        })?;
    Ok(generated.token)
}
