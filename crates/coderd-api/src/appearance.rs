//! `GET/PUT /api/v2/appearance`.

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use codersdk::appearance::{AppearanceConfig, UpdateAppearanceConfig};

use super::AppState;
use coderd_core::domain::appearance;
use coderd_http::error::ApiResult;
use coderd_http::extract::{Auth, Json};

pub fn routes() -> Router<AppState> {
    Router::new().route("/appearance", get(get_appearance).put(update_appearance))
}

#[utoipa::path(get, path = "/api/v2/appearance", tag = "Enterprise",
    responses((status = 200, body = AppearanceConfig)))]
pub(super) async fn get_appearance(
    State(state): State<AppState>,
    _auth: Auth,
) -> ApiResult<Json<AppearanceConfig>> {
    Ok(Json(appearance::get(&state).await?))
}

#[utoipa::path(put, path = "/api/v2/appearance", tag = "Enterprise",
    request_body = UpdateAppearanceConfig,
    responses((status = 200, body = AppearanceConfig), (status = 400, body = codersdk::Response)))]
pub(super) async fn update_appearance(
    State(state): State<AppState>,
    auth: Auth,
    Json(update): Json<UpdateAppearanceConfig>,
) -> ApiResult<Json<AppearanceConfig>> {
    Ok(Json(
        appearance::update(&state, &auth.subject, &update).await?,
    ))
}
