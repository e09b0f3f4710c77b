//! API tokens: named, long-lived keys a user creates for scripts and daemons.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post, put};
use codersdk::Response;
use codersdk::apikeys::{ApiKey, CreateTokenRequest, GenerateApiKeyResponse};
use codersdk::users::LoginType;

use super::AppState;
use coderd_core::domain::tokens;
use coderd_http::error::ApiResult;
use coderd_http::extract::{Auth, Json, Path, resolve_user};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/users/{user}/keys/tokens",
            get(list_tokens).post(create_token),
        )
        .route("/users/{user}/keys", post(create_session_key))
        .route("/users/{user}/keys/tokens/{name}", get(token_by_name))
        .route("/users/{user}/keys/{id}", get(key_by_id).delete(delete_key))
        .route("/users/{user}/keys/{id}/expire", put(expire_key))
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
    coderd_http::requests::create_token(&req)?;
    let key = tokens::create(&state, &auth.subject, &user, &req.token_name, req.lifetime).await?;
    Ok((StatusCode::CREATED, Json(GenerateApiKeyResponse { key })))
}

#[utoipa::path(post, path = "/api/v2/users/{user}/keys", tag = "Users",
    params(("user" = String, Path)),
    responses((status = 201, body = GenerateApiKeyResponse)))]
pub(super) async fn create_session_key(
    State(state): State<AppState>,
    auth: Auth,
    Path(user): Path<String>,
) -> ApiResult<(StatusCode, Json<GenerateApiKeyResponse>)> {
    let user = resolve_user(&state, &auth, &user).await?;
    let login_type = auth.key.login_type.parse().unwrap_or(LoginType::Password);
    let key = tokens::create_session(&state, &auth.subject, &user, login_type).await?;
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
    Ok(Json(tokens::list(&state, &auth.subject, &user).await?))
}

#[utoipa::path(get, path = "/api/v2/users/{user}/keys/tokens/{name}", tag = "Users",
    params(("user" = String, Path), ("name" = String, Path)), responses((status = 200, body = ApiKey)))]
pub(super) async fn token_by_name(
    State(state): State<AppState>,
    auth: Auth,
    Path((user, name)): Path<(String, String)>,
) -> ApiResult<Json<ApiKey>> {
    let user = resolve_user(&state, &auth, &user).await?;
    Ok(Json(
        tokens::by_name(&state, &auth.subject, &user, &name).await?,
    ))
}

#[utoipa::path(get, path = "/api/v2/users/{user}/keys/{id}", tag = "Users",
    params(("user" = String, Path), ("id" = String, Path)), responses((status = 200, body = ApiKey)))]
pub(super) async fn key_by_id(
    State(state): State<AppState>,
    auth: Auth,
    Path((user, id)): Path<(String, String)>,
) -> ApiResult<Json<ApiKey>> {
    let user = resolve_user(&state, &auth, &user).await?;
    Ok(Json(tokens::api_key(
        tokens::owned(&state, &auth.subject, &user, &id).await?,
        &user.username,
    )))
}

#[utoipa::path(delete, path = "/api/v2/users/{user}/keys/{id}", tag = "Users",
    params(("user" = String, Path), ("id" = String, Path)), responses((status = 204)))]
pub(super) async fn delete_key(
    State(state): State<AppState>,
    auth: Auth,
    Path((user, id)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    let user = resolve_user(&state, &auth, &user).await?;
    tokens::delete(&state, &auth.subject, &user, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(put, path = "/api/v2/users/{user}/keys/{id}/expire", tag = "Users",
    params(("user" = String, Path), ("id" = String, Path)), responses((status = 204)))]
pub(super) async fn expire_key(
    State(state): State<AppState>,
    auth: Auth,
    Path((user, id)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    let user = resolve_user(&state, &auth, &user).await?;
    tokens::expire(&state, &auth.subject, &user, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}
