//! `PATCH /workspaces/{id}` (rename) and `PUT/DELETE /workspaces/{id}/favorite`.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::put;
use codersdk::workspaces::UpdateWorkspaceRequest;
use uuid::Uuid;

use super::AppState;
use super::workspaces::resolve_workspace;
use coderd_core::domain::workspace_edits;
use coderd_http::error::ApiResult;
use coderd_http::extract::{Auth, Json, Path};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/workspaces/{id}", axum::routing::patch(update_workspace))
        .route(
            "/workspaces/{id}/favorite",
            put(favorite).delete(unfavorite),
        )
}

#[utoipa::path(patch, path = "/api/v2/workspaces/{id}", tag = "Workspaces",
    params(("id" = Uuid, Path)), request_body = UpdateWorkspaceRequest,
    responses((status = 204), (status = 400, body = codersdk::Response), (status = 409, body = codersdk::Response)))]
pub(super) async fn update_workspace(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
    Json(req): Json<UpdateWorkspaceRequest>,
) -> ApiResult<StatusCode> {
    let workspace = resolve_workspace(&state, &auth, id, false).await?;
    if let Some(name) = req.name.as_deref() {
        workspace_edits::rename(&state, &auth.subject, &workspace, name).await?;
    }
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(put, path = "/api/v2/workspaces/{id}/favorite", tag = "Workspaces",
    params(("id" = Uuid, Path)), responses((status = 204)))]
pub(super) async fn favorite(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
) -> ApiResult<StatusCode> {
    let workspace = resolve_workspace(&state, &auth, id, false).await?;
    workspace_edits::set_favorite(&state, &auth.subject, &workspace, true).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(delete, path = "/api/v2/workspaces/{id}/favorite", tag = "Workspaces",
    params(("id" = Uuid, Path)), responses((status = 204)))]
pub(super) async fn unfavorite(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
) -> ApiResult<StatusCode> {
    let workspace = resolve_workspace(&state, &auth, id, false).await?;
    workspace_edits::set_favorite(&state, &auth.subject, &workspace, false).await?;
    Ok(StatusCode::NO_CONTENT)
}
