//! Signing in and out with a password, and creating the deployment's first user: the decisions
//! the JSON API's `/users/login`, `/users/logout` and `/users/first` and the dashboard's login,
//! logout and setup pages share. Field rules (`validate::requests`) stay with each front door.

use std::net::IpAddr;
use std::time::Duration;

use codersdk::audit::{AuditAction, ResourceType};
use codersdk::users::{CreateFirstUserRequest, LoginType, UserStatus};
use uuid::Uuid;

use super::{Error, Result};
use crate::audit;
use crate::state::AppState;
use coderd_store::{self as store, NewUser, OrganizationRow, UserRow};

/// The organization the first user creates.
pub const DEFAULT_ORGANIZATION: &str = "coder";

const BAD_CREDENTIALS: &str = "Incorrect email or password.";

/// What a password login attempt came to, when it was not refused outright.
#[derive(Debug)]
pub enum PasswordLogin {
    /// A new session: the token to hand to the client once.
    Session { token: String },
    /// Too many attempts from this address or for this account; the same for every account.
    RateLimited { retry_after: Duration },
    /// The credentials are right, but only owners may use a password on this deployment.
    PasswordAuthDisabled,
}

/// Checks an email and password and mints a session. Wrong passwords and unknown accounts get
/// the same [`Error::Unauthorized`] after the same work; a suspended account is told so.
pub async fn password_login(
    state: &AppState,
    peer: Option<IpAddr>,
    email: &str,
    password: String,
) -> Result<PasswordLogin> {
    // Counted before the password is hashed: refused attempts cost no Argon2 run.
    if let Err(limited) = state.login_limits.attempt(peer, email) {
        metrics::counter!("coderd_login_attempts_total", "result" => "rate_limited").increment(1);
        return Ok(PasswordLogin::RateLimited {
            retry_after: limited.retry_after,
        });
    }
    let user = match state.store.user_by_email(email).await {
        Ok(user) => Some(user),
        Err(store::Error::NotFound) => None,
        Err(e) => return Err(e.into()),
    };
    let hash = user
        .as_ref()
        .filter(|u| u.login_type == LoginType::Password.as_str())
        .map(|u| u.hashed_password.clone());
    // Unknown accounts cost the same work and get the same answer as wrong passwords.
    let ok = coderd_authz::auth::verify_password(hash, password)
        .await
        .map_err(Error::internal)?;
    let result = if ok { "succeeded" } else { "failed" };
    metrics::counter!("coderd_login_attempts_total", "result" => result).increment(1);
    // Refusals are recorded with the account they were for (none when it does not exist);
    // what was typed is not.
    let refused = |user: Option<&UserRow>, status: u16, why: &str| {
        login_entry(user)
            .status(status)
            .description(format!("password login refused: {why}"))
    };
    let user = match user {
        Some(user) if ok => user,
        other => {
            audit::record(
                &state.store,
                refused(other.as_ref(), 401, "bad credentials"),
            )
            .await;
            return Err(Error::unauthorized(BAD_CREDENTIALS));
        }
    };
    if user.status == UserStatus::Suspended.as_str() {
        audit::record(&state.store, refused(Some(&user), 401, "account suspended")).await;
        return Err(Error::unauthorized("Your account is suspended.")
            .with_detail("Contact an administrator to reactivate your account."));
    }
    // Owners keep their password so a broken identity provider cannot lock everyone out.
    if state.options.disable_password_auth && !user.rbac_roles.iter().any(|r| r == "owner") {
        let why = "password authentication is disabled";
        audit::record(&state.store, refused(Some(&user), 403, why)).await;
        return Ok(PasswordLogin::PasswordAuthDisabled);
    }
    let token = super::keys::issue_key(
        state,
        user.id,
        LoginType::Password,
        "",
        state.options.session_duration,
        Some(login_entry(Some(&user))),
    )
    .await?;
    Ok(PasswordLogin::Session { token })
}

/// The entry of a login (sessions are `api_key` resources, named by their user).
pub fn login_entry(user: Option<&UserRow>) -> audit::Entry {
    audit::Entry::new(
        user.map(|u| u.id),
        ResourceType::ApiKey,
        user.map(|u| u.id).unwrap_or_default(),
        user.map_or("", |u| u.username.as_str()),
        AuditAction::Login,
    )
}

/// Ends `user`'s session: its key is deleted (an already deleted key is not an error, and
/// records nothing).
pub async fn logout(state: &AppState, user: &UserRow, key_id: &str) -> Result<()> {
    let log = audit::Entry::new(
        Some(user.id),
        ResourceType::ApiKey,
        user.id,
        &user.username,
        AuditAction::Logout,
    )
    .build();
    match state.store.delete_api_key(key_id, Some(&log)).await {
        Ok(()) | Err(store::Error::NotFound) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Whether the deployment still waits for its first user.
pub async fn needs_first_user(state: &AppState) -> Result<bool> {
    Ok(!state.store.has_any_user().await?)
}

/// Creates the first user, an owner, with the default organization; [`Error::Conflict`] once
/// any user exists. The request's fields must have passed `validate::requests::first_user`.
pub async fn create_first_user(
    state: &AppState,
    req: CreateFirstUserRequest,
) -> Result<(UserRow, OrganizationRow)> {
    let taken = || Error::conflict("The initial user has already been created.");
    if state.store.has_any_user().await? {
        return Err(taken());
    }
    let hashed_password = coderd_authz::auth::hash_password(req.password)
        .await
        .map_err(Error::internal)?;
    let user = NewUser {
        id: Uuid::new_v4(),
        email: req.email,
        username: req.username,
        name: req.name,
        hashed_password,
        status: UserStatus::Active.as_str().into(),
        rbac_roles: vec!["owner".into()],
        login_type: LoginType::Password.as_str().into(),
        organization_ids: vec![],
    };
    let (user, org) = state
        .store
        .create_first_user(user, DEFAULT_ORGANIZATION)
        .await?
        .ok_or_else(taken)?;
    tracing::info!(user = %user.username, "first user created");
    Ok((user, org))
}
