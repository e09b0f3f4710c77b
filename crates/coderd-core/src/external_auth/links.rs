//! A user's link with a provider: stored sealed, handed out refreshed and checked.
//!
//! - **Sealed** with the deployment's `CODER_EXTERNAL_TOKEN_ENCRYPTION_KEYS` (mandatory once a
//!   provider is configured), each value bound to its user, provider and field so a sealed
//!   token copied onto another row does not open.
//! - **Refreshed** when expired (unless `NO_REFRESH`), one refresh per link at a time across
//!   replicas: the refresher holds the row (`FOR UPDATE`), and whoever waited finds the fresh
//!   token. A provider that cannot be reached is retried (250 ms doubling to 2 s, 10 s in all)
//!   and never taken for a revocation: the link is kept. A refresh token the provider refuses is
//!   cleared and the reason kept, and the user is asked to link again.
//! - **Checked** at `VALIDATE_URL` when one is configured: a token the provider refuses is no
//!   token, whatever its expiry says; a rate-limited or unsure answer keeps it.

use std::time::Duration;

use oauth_client::{KeyRing, SealError, TokenSet, Validity};
use uuid::Uuid;

use super::providers::Provider;
use crate::state::AppState;
use coderd_store::{self as store, ExternalAuthLinkRow, SealedLinkTokens};

/// Tokens this close to their expiry are refreshed first.
const EXPIRY_MARGIN_SECONDS: i64 = 5;
const RETRY_FIRST: Duration = Duration::from_millis(250);
const RETRY_MAX: Duration = Duration::from_secs(2);
const RETRY_BUDGET: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Store(#[from] store::Error),
    /// A stored token cannot be opened with this deployment's keys.
    #[error("a stored external auth token cannot be opened: {0}")]
    Sealed(#[from] SealError),
    /// The deployment has providers but no encryption keys (startup refuses this).
    #[error("external auth tokens cannot be kept: no CODER_EXTERNAL_TOKEN_ENCRYPTION_KEYS")]
    NoKeys,
    /// The provider could not be reached or answered nonsense, even after retrying.
    #[error("{provider}: {detail}")]
    Provider { provider: String, detail: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What a user's link with a provider is good for now.
#[derive(Debug, Clone, PartialEq)]
pub enum LinkState {
    Valid(TokenSet),
    /// There is no link.
    NotLinked,
    /// There is a link, but its token does not work; the reason is for the user.
    Invalid(String),
}

fn keys(state: &AppState) -> Result<&KeyRing> {
    state
        .options
        .external_token_keys
        .as_deref()
        .ok_or(Error::NoKeys)
}

fn purpose(user: Uuid, provider: &str, field: &str) -> String {
    format!("external_auth_link:{user}:{provider}:{field}")
}

pub(super) fn seal(
    keys: &KeyRing,
    user: Uuid,
    provider: &str,
    tokens: &TokenSet,
) -> SealedLinkTokens {
    let sealed = |field: &str, value: &str| {
        if value.is_empty() {
            String::new()
        } else {
            keys.seal(&purpose(user, provider, field), value.as_bytes())
        }
    };
    let access_token = sealed("access", &tokens.access_token);
    let key_id = access_token
        .split_once(':')
        .map(|(k, _)| k.to_owned())
        .unwrap_or_default();
    let extra = if tokens.extra.is_empty() {
        String::new()
    } else {
        serde_json::to_string(&tokens.extra).unwrap_or_default()
    };
    SealedLinkTokens {
        access_token,
        refresh_token: sealed("refresh", tokens.refresh_token.as_deref().unwrap_or("")),
        expiry: tokens.expires_at,
        extra: sealed("extra", &extra),
        key_id,
    }
}

pub(super) fn open(keys: &KeyRing, row: &ExternalAuthLinkRow) -> Result<TokenSet> {
    let open = |field: &str, value: &str| -> Result<String> {
        if value.is_empty() {
            return Ok(String::new());
        }
        let plain = keys.open(&purpose(row.user_id, &row.provider_id, field), value)?;
        String::from_utf8(plain).map_err(|_| Error::Sealed(SealError::Damaged))
    };
    let refresh = open("refresh", &row.oauth_refresh_token)?;
    let extra = open("extra", &row.oauth_extra)?;
    Ok(TokenSet {
        access_token: open("access", &row.oauth_access_token)?,
        refresh_token: (!refresh.is_empty()).then_some(refresh),
        expires_at: row.oauth_expiry,
        extra: serde_json::from_str(&extra).unwrap_or_default(),
    })
}

/// Stores the tokens a person just linked with (replacing an older link).
pub async fn save(
    state: &AppState,
    user: Uuid,
    provider: &Provider,
    tokens: &TokenSet,
) -> Result<ExternalAuthLinkRow> {
    let sealed = seal(keys(state)?, user, provider.id(), tokens);
    Ok(state
        .store
        .upsert_external_auth_link(user, provider.id(), &sealed)
        .await?)
}

fn expired(tokens: &TokenSet) -> bool {
    tokens.expired(chrono::Duration::seconds(EXPIRY_MARGIN_SECONDS))
}

/// The user's token for `provider`, refreshed if it expired and, with `validate`, checked at
/// the provider's `VALIDATE_URL`.
pub async fn token(
    state: &AppState,
    user: Uuid,
    provider: &Provider,
    validate: bool,
) -> Result<LinkState> {
    let Some(row) = state.store.external_auth_link(user, provider.id()).await? else {
        return Ok(LinkState::NotLinked);
    };
    let keys = keys(state)?;
    let mut tokens = open(keys, &row)?;
    if expired(&tokens) {
        match refresh(state, keys, user, provider).await? {
            LinkState::Valid(fresh) => tokens = fresh,
            other => return Ok(other),
        }
    }
    if validate {
        return Ok(check(provider, tokens).await);
    }
    Ok(LinkState::Valid(tokens))
}

/// Asks the provider whether the token works, when it can be asked.
pub(super) async fn check(provider: &Provider, tokens: TokenSet) -> LinkState {
    let Some(url) = &provider.settings.validate_url else {
        return LinkState::Valid(tokens);
    };
    match provider
        .client
        .http()
        .validate_token(url, &tokens.access_token)
        .await
    {
        Validity::Invalid(reason) => {
            LinkState::Invalid(format!("the token failed to validate: {reason}"))
        }
        Validity::Unknown(reason) => {
            tracing::warn!(provider = provider.id(), %reason, "external auth token validation inconclusive; keeping the token");
            LinkState::Valid(tokens)
        }
        Validity::Valid(_) => LinkState::Valid(tokens),
    }
}

/// Refreshes an expired link, holding its row so only one refresh runs at a time.
async fn refresh(
    state: &AppState,
    keys: &KeyRing,
    user: Uuid,
    provider: &Provider,
) -> Result<LinkState> {
    let Some(lock) = state
        .store
        .lock_external_auth_link(user, provider.id())
        .await?
    else {
        return Ok(LinkState::NotLinked);
    };
    let tokens = open(keys, &lock.row)?;
    if !expired(&tokens) {
        // Refreshed by whoever held the row before us.
        return Ok(LinkState::Valid(tokens));
    }
    let reason = &lock.row.oauth_refresh_failure_reason;
    if provider.settings.no_refresh || tokens.refresh_token.is_none() {
        let why = if !reason.is_empty() {
            format!("the token expired and refreshing it failed: {reason}")
        } else if provider.settings.no_refresh {
            "the token expired, and refreshing is disabled for this provider".to_string()
        } else {
            "the token expired, and the provider issued no refresh token".to_string()
        };
        return Ok(LinkState::Invalid(why));
    }
    let started = std::time::Instant::now();
    let mut wait = RETRY_FIRST;
    loop {
        match provider.client.refresh(&tokens).await {
            Ok(fresh) => {
                lock.save(&seal(keys, user, provider.id(), &fresh)).await?;
                tracing::debug!(provider = provider.id(), %user, "refreshed an external auth token");
                return Ok(LinkState::Valid(fresh));
            }
            Err(oauth_client::Error::Refused(detail)) => {
                let reason: String = detail.chars().take(400).collect();
                lock.refused(&reason).await?;
                tracing::info!(provider = provider.id(), %user, %reason, "the provider refused a refresh token; the user must link again");
                return Ok(LinkState::Invalid(format!(
                    "the token expired and the provider refused to refresh it: {reason}"
                )));
            }
            Err(e) if started.elapsed() + wait < RETRY_BUDGET => {
                tracing::debug!(provider = provider.id(), error = %e, "refresh failed; retrying");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(RETRY_MAX);
            }
            Err(e) => {
                // Dropping the lock leaves the link as it was.
                return Err(Error::Provider {
                    provider: provider.id().to_string(),
                    detail: format!("refreshing the token failed: {e}"),
                });
            }
        }
    }
}

/// Seals every link again with the first key of `keys`, opening them with any of its keys
/// (`coder server dbcrypt rotate`); how many were re-sealed. A link changed meanwhile (a
/// refresh) is left alone: the change sealed it with the then-current key.
pub async fn reseal_all(store: &coderd_store::Store, keys: &KeyRing) -> Result<usize> {
    let current = keys.sealing_key_id().to_string();
    let mut done = 0;
    for row in store.external_auth_links_not_sealed_by(&current).await? {
        let tokens = open(keys, &row)?;
        let sealed = seal(keys, row.user_id, &row.provider_id, &tokens);
        if store.reseal_external_auth_link(&row, &sealed).await? {
            done += 1;
        }
    }
    Ok(done)
}
