//! Who is calling: a session token (from whichever header, cookie or query a front door found
//! it in) checked against its stored hash, with the user and memberships it acts for. Every
//! call re-reads the user, so suspension and role changes apply at once.

use chrono::Utc;

use super::{Error, Result};
use crate::state::AppState;
use coderd_authz::Subject;
use coderd_store::{self as store, ApiKeyRow, UserRow};

/// An authenticated caller: its key, its user, and what it may do.
#[derive(Debug, Clone)]
pub struct Session {
    pub key: ApiKeyRow,
    pub user: UserRow,
    pub subject: Subject,
}

fn invalid_token() -> Error {
    Error::unauthorized("Invalid session token.")
        .with_detail("The token is unknown, was revoked, or is not a Coder session token.")
}

/// Validates a token and loads the caller. A dormant user becomes active by using the account.
pub async fn authenticate(state: &AppState, token: &str) -> Result<Session> {
    let (id, secret) = coderd_authz::auth::split_token(token).ok_or_else(invalid_token)?;
    let store::KeyHolder {
        key,
        mut user,
        memberships,
        groups,
    } = match state.store.api_key_with_user(id).await {
        Ok(found) => found,
        Err(store::Error::NotFound) => return Err(invalid_token()),
        Err(e) => return Err(e.into()),
    };
    if !coderd_authz::auth::secret_matches(secret, &key.hashed_secret) || user.deleted {
        return Err(invalid_token());
    }
    let now = Utc::now();
    if key.expires_at <= now {
        return Err(
            Error::unauthorized("Your session token has expired.").with_detail(format!(
                "It expired at {}; log in again.",
                key.expires_at.to_rfc3339()
            )),
        );
    }
    match user.status.as_str() {
        "suspended" => {
            return Err(Error::unauthorized("Your account is suspended.")
                .with_detail("Contact an administrator to reactivate your account."));
        }
        "dormant" => {
            // Dormancy only marks inactivity; using the account ends it.
            user = state
                .store
                .update_user_status(user.id, "active", None)
                .await?;
        }
        _ => {}
    }
    refresh_key_if_due(state, &key, now);
    let subject = Subject {
        user_id: user.id,
        site_roles: user.rbac_roles.clone(),
        orgs: memberships.into_iter().collect(),
        groups,
    };
    Ok(Session { key, user, subject })
}

/// Records use at most once a minute per key, and slides a session's expiry forward at most
/// once an hour: a write per request would be wasted load.
fn refresh_key_if_due(state: &AppState, key: &ApiKeyRow, now: chrono::DateTime<Utc>) {
    let session = chrono::Duration::from_std(state.options.session_duration).unwrap_or_default();
    let mut expires_at = key.expires_at;
    // Sessions (whatever signed them in) slide; named API tokens keep their fixed lifetime.
    let is_session = matches!(key.login_type.as_str(), "password" | "oidc" | "github");
    let refresh = is_session && key.expires_at - now < session - chrono::Duration::hours(1);
    if refresh {
        expires_at = now + session;
    }
    if refresh || now - key.last_used > chrono::Duration::minutes(1) {
        let store = state.store.clone();
        let (id, user) = (key.id.clone(), key.user_id);
        tokio::spawn(async move {
            if let Err(e) = store.touch_api_key(&id, user, expires_at).await {
                tracing::warn!(error = %e, "recording API key use failed");
            }
        });
    }
}
