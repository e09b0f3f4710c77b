//! The front door of user secrets: `/api/v2/users/{user}/secrets` and
//! `/api/v2/users/{user}/secrets/{name}` in Coder's shapes.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use codersdk::usersecrets::{CreateUserSecretRequest, UpdateUserSecretRequest, UserSecret};

use coderd_core::secrets;
use coderd_core::state::AppState;
use coderd_http::error::ApiResult;
use coderd_http::extract::{Auth, Json, Path};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/users/{user}/secrets", get(list).post(create))
        .route(
            "/users/{user}/secrets/{name}",
            get(read).patch(update).delete(remove),
        )
}

#[utoipa::path(post, path = "/api/v2/users/{user}/secrets", tag = "Secrets",
    params(("user" = String, Path, description = "User ID, username, or me")),
    request_body = CreateUserSecretRequest,
    responses((status = 201, body = UserSecret),
        (status = 409, description = "Another secret of the user has this name, environment variable or file path.")))]
pub(crate) async fn create(
    State(state): State<AppState>,
    auth: Auth,
    Path(user): Path<String>,
    Json(req): Json<CreateUserSecretRequest>,
) -> ApiResult<(StatusCode, Json<UserSecret>)> {
    let secret = secrets::create(&state, &auth.subject, &user, req).await?;
    Ok((StatusCode::CREATED, Json(secret)))
}

#[utoipa::path(get, path = "/api/v2/users/{user}/secrets", tag = "Secrets",
    params(("user" = String, Path, description = "User ID, username, or me")),
    responses((status = 200, body = Vec<UserSecret>)))]
pub(crate) async fn list(
    State(state): State<AppState>,
    auth: Auth,
    Path(user): Path<String>,
) -> ApiResult<Json<Vec<UserSecret>>> {
    Ok(Json(secrets::list(&state, &auth.subject, &user).await?))
}

#[utoipa::path(get, path = "/api/v2/users/{user}/secrets/{name}", tag = "Secrets",
    params(("user" = String, Path, description = "User ID, username, or me"),
        ("name" = String, Path, description = "Secret name")),
    responses((status = 200, body = UserSecret)))]
pub(crate) async fn read(
    State(state): State<AppState>,
    auth: Auth,
    Path((user, name)): Path<(String, String)>,
) -> ApiResult<Json<UserSecret>> {
    Ok(Json(
        secrets::get(&state, &auth.subject, &user, &name).await?,
    ))
}

#[utoipa::path(patch, path = "/api/v2/users/{user}/secrets/{name}", tag = "Secrets",
    params(("user" = String, Path, description = "User ID, username, or me"),
        ("name" = String, Path, description = "Secret name")),
    request_body = UpdateUserSecretRequest,
    responses((status = 200, body = UserSecret),
        (status = 409, description = "Another secret of the user has this environment variable or file path.")))]
pub(crate) async fn update(
    State(state): State<AppState>,
    auth: Auth,
    Path((user, name)): Path<(String, String)>,
    Json(req): Json<UpdateUserSecretRequest>,
) -> ApiResult<Json<UserSecret>> {
    Ok(Json(
        secrets::update(&state, &auth.subject, &user, &name, req).await?,
    ))
}

#[utoipa::path(delete, path = "/api/v2/users/{user}/secrets/{name}", tag = "Secrets",
    params(("user" = String, Path, description = "User ID, username, or me"),
        ("name" = String, Path, description = "Secret name")),
    responses((status = 204, description = "The secret is deleted.")))]
pub(crate) async fn remove(
    State(state): State<AppState>,
    auth: Auth,
    Path((user, name)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    secrets::delete(&state, &auth.subject, &user, &name).await?;
    Ok(StatusCode::NO_CONTENT)
}
