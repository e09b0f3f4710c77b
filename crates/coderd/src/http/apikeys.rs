//! API tokens: named, long-lived keys a user creates for scripts and daemons.

use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use codersdk::Response;
use codersdk::apikeys::{ApiKey, CreateTokenRequest, GenerateApiKeyResponse, NANOS_PER_SECOND};
use codersdk::audit::{AuditAction, ResourceType};
use codersdk::users::LoginType;
use rand::seq::IndexedRandom;

use super::AppState;
use super::extract::{Auth, Json, Path, resolve_user};
use crate::audit::{Entry, actor};
use crate::authz::{Action, Object, Resource};
use crate::error::{ApiError, ApiResult};
use crate::store::ApiKeyRow;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/users/{user}/keys/tokens",
            get(list_tokens).post(create_token),
        )
        .route("/users/{user}/keys/tokens/{name}", get(token_by_name))
        .route("/users/{user}/keys/{id}", get(key_by_id).delete(delete_key))
}

fn api_key(row: ApiKeyRow) -> ApiKey {
    ApiKey {
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

#[utoipa::path(post, path = "/api/v2/users/{user}/keys/tokens", tag = "Users",
    params(("user" = String, Path)), request_body = CreateTokenRequest,
    responses((status = 201, body = GenerateApiKeyResponse), (status = 400, body = Response), (status = 409, body = Response)))]
pub(super) async fn create_token(
    State(state): State<AppState>,
    auth: Auth,
    Path(user): Path<String>,
    Json(req): Json<CreateTokenRequest>,
) -> ApiResult<(StatusCode, Json<GenerateApiKeyResponse>)> {
    let user = resolve_user(&state, &auth, &user).await?;
    auth.authorize(
        Action::Create,
        &Object::owned(Resource::ApiKey, None, user.id),
    )?;
    crate::validate::requests::create_token(&req)?;
    let lifetime = if req.lifetime == 0 {
        state.options.default_token_lifetime
    } else {
        // Go clients send nanoseconds; round up so a 1ns request is not a 0s token.
        Duration::from_secs((req.lifetime as u64).div_ceil(NANOS_PER_SECOND as u64))
    };
    crate::error::Validator::default()
        .check(
            lifetime <= state.options.max_token_lifetime,
            "lifetime",
            format!(
                "must be at most {} hours",
                state.options.max_token_lifetime.as_secs() / 3600
            ),
        )
        .finish()?;
    let name = if req.token_name.is_empty() {
        random_token_name()
    } else {
        req.token_name
    };
    let audit = Entry::new(
        actor(&auth.subject),
        ResourceType::ApiKey,
        user.id,
        &name,
        AuditAction::Create,
    );
    let key = crate::domain::keys::issue_key(
        &state,
        user.id,
        LoginType::Token,
        &name,
        lifetime,
        Some(audit),
    )
    .await?;
    Ok((StatusCode::CREATED, Json(GenerateApiKeyResponse { key })))
}

#[utoipa::path(get, path = "/api/v2/users/{user}/keys/tokens", tag = "Users",
    params(("user" = String, Path)), responses((status = 200, body = [ApiKey])))]
pub(super) async fn list_tokens(
    State(state): State<AppState>,
    auth: Auth,
    Path(user): Path<String>,
) -> ApiResult<Json<Vec<ApiKey>>> {
    let user = resolve_user(&state, &auth, &user).await?;
    auth.authorize(
        Action::Read,
        &Object::owned(Resource::ApiKey, None, user.id),
    )?;
    let rows = state.store.api_tokens_of_user(user.id).await?;
    Ok(Json(rows.into_iter().map(api_key).collect()))
}

#[utoipa::path(get, path = "/api/v2/users/{user}/keys/tokens/{name}", tag = "Users",
    params(("user" = String, Path), ("name" = String, Path)), responses((status = 200, body = ApiKey)))]
pub(super) async fn token_by_name(
    State(state): State<AppState>,
    auth: Auth,
    Path((user, name)): Path<(String, String)>,
) -> ApiResult<Json<ApiKey>> {
    let user = resolve_user(&state, &auth, &user).await?;
    auth.authorize(
        Action::Read,
        &Object::owned(Resource::ApiKey, None, user.id),
    )?;
    Ok(Json(api_key(
        state.store.api_key_by_name(user.id, &name).await?,
    )))
}

/// The key `id` of `user`, or 404 when it belongs to someone else.
async fn owned_key(state: &AppState, auth: &Auth, user: &str, id: &str) -> ApiResult<ApiKeyRow> {
    let user = resolve_user(state, auth, user).await?;
    let key = state.store.api_key_by_id(id).await?;
    if key.user_id != user.id {
        return Err(ApiError::not_found());
    }
    auth.authorize(
        Action::Read,
        &Object::owned(Resource::ApiKey, None, user.id),
    )?;
    Ok(key)
}

#[utoipa::path(get, path = "/api/v2/users/{user}/keys/{id}", tag = "Users",
    params(("user" = String, Path), ("id" = String, Path)), responses((status = 200, body = ApiKey)))]
pub(super) async fn key_by_id(
    State(state): State<AppState>,
    auth: Auth,
    Path((user, id)): Path<(String, String)>,
) -> ApiResult<Json<ApiKey>> {
    Ok(Json(api_key(owned_key(&state, &auth, &user, &id).await?)))
}

#[utoipa::path(delete, path = "/api/v2/users/{user}/keys/{id}", tag = "Users",
    params(("user" = String, Path), ("id" = String, Path)), responses((status = 204)))]
pub(super) async fn delete_key(
    State(state): State<AppState>,
    auth: Auth,
    Path((user, id)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    let key = owned_key(&state, &auth, &user, &id).await?;
    auth.authorize(
        Action::Delete,
        &Object::owned(Resource::ApiKey, None, key.user_id),
    )?;
    let log = Entry::new(
        actor(&auth.subject),
        ResourceType::ApiKey,
        key.user_id,
        &key.token_name,
        AuditAction::Delete,
    )
    .diff(Some(&key), None)
    .build();
    state.store.delete_api_key(&key.id, Some(&log)).await?;
    Ok(StatusCode::NO_CONTENT)
}
