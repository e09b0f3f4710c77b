//! `GET /replicas`: the coderd replicas sharing the deployment's database, as Coder lists them;
//! for owners only (everyone else is told it does not exist).

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use codersdk::deployment::Replica;

use super::AppState;
use coderd_http::error::{ApiError, ApiResult};
use coderd_http::extract::{Auth, Json};

pub fn routes() -> Router<AppState> {
    Router::new().route("/replicas", get(list))
}

#[utoipa::path(get, path = "/api/v2/replicas", tag = "Enterprise",
    responses((status = 200, body = [Replica]),
        (status = 404, body = codersdk::Response, description = "The caller is not an owner")))]
pub(super) async fn list(
    State(state): State<AppState>,
    auth: Auth,
) -> ApiResult<Json<Vec<Replica>>> {
    if !auth.subject.has_site_role("owner") {
        return Err(ApiError::not_found());
    }
    Ok(Json(coderd_core::replicas::list(&state.store).await?))
}
