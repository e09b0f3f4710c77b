//! API tokens: the named, long-lived keys a user makes for scripts and daemons. The JSON API's
//! `/users/{user}/keys/tokens` and the dashboard's `/settings/tokens` both list, create and
//! delete them here. Field rules (`validate::requests::create_token`) stay with each front door.

use std::time::Duration;

use codersdk::apikeys::{ApiKey, NANOS_PER_SECOND};
use codersdk::audit::{AuditAction, ResourceType};
use codersdk::users::LoginType;
use rand::seq::IndexedRandom;

use super::{Error, Result};
use crate::audit::{Entry, actor};
use crate::state::AppState;
use coderd_authz::{self as authz, Action, Object, Resource, Subject};
use coderd_store::{ApiKeyRow, UserRow};

/// A key of `owner` as the API shows it: never its secret.
pub fn api_key(row: ApiKeyRow, owner: &str) -> ApiKey {
    ApiKey {
        scopes: vec![row.scope.clone()],
        username: owner.to_owned(),
        allow_list: Vec::new(),
        id: row.id,
        user_id: row.user_id,
        last_used: row.last_used,
        expires_at: row.expires_at,
        created_at: row.created_at,
        updated_at: row.updated_at,
        login_type: row.login_type.parse().unwrap_or(LoginType::Token),
        scope: row.scope,
        token_name: row.token_name,
        lifetime_seconds: row.lifetime_seconds,
    }
}

fn keys_of(user: &UserRow) -> Object {
    Object::owned(Resource::ApiKey, None, user.id)
}

/// A readable default name, like Coder's `adjective-noun`.
fn random_token_name() -> String {
    const ADJECTIVES: &[&str] = &[
        "brave", "calm", "eager", "fancy", "gentle", "happy", "jolly", "kind", "lively", "proud",
        "quiet", "witty",
    ];
    const NOUNS: &[&str] = &[
        "otter", "falcon", "badger", "heron", "lynx", "marten", "owl", "panda", "quokka", "raven",
        "tapir", "walrus",
    ];
    let mut rng = rand::rng();
    let adjective = ADJECTIVES.choose(&mut rng).copied().unwrap_or("calm");
    let noun = NOUNS.choose(&mut rng).copied().unwrap_or("otter");
    let suffix: u16 = rand::Rng::random_range(&mut rng, 0..10000);
    format!("{adjective}-{noun}-{suffix}")
}

/// The tokens of `user` the subject may read.
pub async fn list(state: &AppState, subject: &Subject, user: &UserRow) -> Result<Vec<ApiKey>> {
    authz::authorize(subject, Action::Read, &keys_of(user))?;
    let rows = state.store.api_tokens_of_user(user.id).await?;
    Ok(rows
        .into_iter()
        .map(|row| api_key(row, &user.username))
        .collect())
}

/// The token of `user` named `name`.
pub async fn by_name(
    state: &AppState,
    subject: &Subject,
    user: &UserRow,
    name: &str,
) -> Result<ApiKey> {
    authz::authorize(subject, Action::Read, &keys_of(user))?;
    Ok(api_key(
        state.store.api_key_by_name(user.id, name).await?,
        &user.username,
    ))
}

/// Mints a token for `user`; returns the secret to show once. `lifetime_nanos` is Coder's
/// nanoseconds (0: the deployment's default), and must not exceed the deployment's maximum.
pub async fn create(
    state: &AppState,
    subject: &Subject,
    user: &UserRow,
    name: &str,
    lifetime_nanos: i64,
) -> Result<String> {
    authz::authorize(subject, Action::Create, &keys_of(user))?;
    let lifetime = if lifetime_nanos <= 0 {
        state.options.default_token_lifetime
    } else {
        // Go clients send nanoseconds; round up so a 1ns request is not a 0s token.
        Duration::from_secs((lifetime_nanos as u64).div_ceil(NANOS_PER_SECOND as u64))
    };
    let max = state.options.max_token_lifetime;
    if lifetime > max {
        return Err(Error::Validation(vec![codersdk::ValidationError {
            field: "lifetime".into(),
            detail: format!("must be at most {} hours", max.as_secs() / 3600),
        }]));
    }
    let name = if name.is_empty() {
        random_token_name()
    } else {
        name.to_owned()
    };
    let audit = Entry::new(
        actor(subject),
        ResourceType::ApiKey,
        user.id,
        &name,
        AuditAction::Create,
    );
    super::keys::issue_key(
        state,
        user.id,
        LoginType::Token,
        &name,
        lifetime,
        Some(audit),
    )
    .await
}

/// A new session for `user` with the deployment's session length, of the caller's own login
/// type: Coder's `POST /users/{user}/keys`, which `coder login --token` (without
/// `--use-token-as-session`), the dashboard's "Open in VS Code" and its `/cli-auth` page use.
pub async fn create_session(
    state: &AppState,
    subject: &Subject,
    user: &UserRow,
    login_type: LoginType,
) -> Result<String> {
    authz::authorize(subject, Action::Create, &keys_of(user))?;
    let audit = Entry::new(
        actor(subject),
        ResourceType::ApiKey,
        user.id,
        "session",
        AuditAction::Create,
    );
    super::keys::issue_key(
        state,
        user.id,
        login_type,
        "",
        state.options.session_duration,
        Some(audit),
    )
    .await
}

/// The key `id` of `user` (any kind, as Coder's `/keys/{id}`); another user's is not found.
pub async fn owned(
    state: &AppState,
    subject: &Subject,
    user: &UserRow,
    id: &str,
) -> Result<ApiKeyRow> {
    let key = state.store.api_key_by_id(id).await?;
    if key.user_id != user.id {
        return Err(Error::NotFound);
    }
    authz::authorize(subject, Action::Read, &keys_of(user))?;
    Ok(key)
}

/// Expires the key `id` of `user`: it stops working at once and stays listed as expired.
pub async fn expire(state: &AppState, subject: &Subject, user: &UserRow, id: &str) -> Result<()> {
    let key = owned(state, subject, user, id).await?;
    authz::authorize(subject, Action::Update, &keys_of(user))?;
    let log = Entry::new(
        actor(subject),
        ResourceType::ApiKey,
        key.user_id,
        &key.token_name,
        AuditAction::Write,
    )
    .build();
    state.store.expire_api_key(&key.id, Some(&log)).await?;
    Ok(())
}

/// Deletes the key `id` of `user`: it stops working at once.
pub async fn delete(state: &AppState, subject: &Subject, user: &UserRow, id: &str) -> Result<()> {
    let key = owned(state, subject, user, id).await?;
    authz::authorize(subject, Action::Delete, &keys_of(user))?;
    let log = Entry::new(
        actor(subject),
        ResourceType::ApiKey,
        key.user_id,
        &key.token_name,
        AuditAction::Delete,
    )
    .diff(Some(&key), None)
    .build();
    state.store.delete_api_key(&key.id, Some(&log)).await?;
    Ok(())
}
