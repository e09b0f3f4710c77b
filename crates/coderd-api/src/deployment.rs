//! Deployment-level reads and the dashboard's permission checks: `/deployment/config`,
//! `/deployment/ssh`, `/deployment/stats`, `/experiments[/available]`, `/updatecheck`,
//! `/regions`, `/auth/scopes`, `POST /authcheck`, `POST /csp/reports`, `/prebuilds/settings`.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use codersdk::deployment::{
    AuthorizationRequest, AuthorizationResponse, AvailableExperiments, DeploymentConfig,
    DeploymentStats, ExternalAPIKeyScopes, PrebuildsSettings, RegionsResponse, SSHConfigResponse,
    UpdateCheckResponse,
};

use super::AppState;
use coderd_core::domain::{authcheck, deployment_config, deployment_stats, prebuild_settings};
use coderd_http::error::{ApiError, ApiResult};
use coderd_http::extract::{Auth, Json};

/// The largest CSP report read; browsers send a few hundred bytes.
const MAX_CSP_REPORT: usize = 64 * 1024;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/deployment/config", get(config))
        .route("/deployment/ssh", get(ssh))
        .route("/deployment/stats", get(stats))
        .route("/experiments", get(experiments))
        .route("/experiments/available", get(available_experiments))
        .route("/updatecheck", get(update_check))
        .route("/regions", get(regions))
        .route("/auth/scopes", get(scopes))
        .route("/authcheck", post(authcheck))
        .route("/csp/reports", post(csp_report))
        .route(
            "/prebuilds/settings",
            get(get_prebuild_settings).put(update_prebuild_settings),
        )
}

#[utoipa::path(get, path = "/api/v2/deployment/config", tag = "General",
    responses((status = 200, body = DeploymentConfig), (status = 403, body = codersdk::Response), (status = 404, body = codersdk::Response, description = "Not a deployment administrator")))]
pub(super) async fn config(
    State(state): State<AppState>,
    auth: Auth,
) -> ApiResult<Json<DeploymentConfig>> {
    Ok(Json(deployment_config::config(&state, &auth.subject)?))
}

#[utoipa::path(get, path = "/api/v2/deployment/ssh", tag = "General",
    responses((status = 200, body = SSHConfigResponse)))]
pub(super) async fn ssh(State(state): State<AppState>, _auth: Auth) -> Json<SSHConfigResponse> {
    Json(deployment_config::ssh(&state))
}

#[utoipa::path(get, path = "/api/v2/deployment/stats", tag = "General",
    responses((status = 200, body = DeploymentStats), (status = 403, body = codersdk::Response), (status = 404, body = codersdk::Response, description = "Not a deployment administrator")))]
pub(super) async fn stats(
    State(state): State<AppState>,
    auth: Auth,
) -> ApiResult<Json<DeploymentStats>> {
    Ok(Json(deployment_stats::stats(&state, &auth.subject).await?))
}

/// No experiment is switched on: what Coder keeps behind experiments is either built here
/// already or not built at all.
#[utoipa::path(get, path = "/api/v2/experiments", tag = "General",
    responses((status = 200, body = [String])))]
pub(super) async fn experiments(_auth: Auth) -> Json<Vec<String>> {
    Json(Vec::new())
}

#[utoipa::path(get, path = "/api/v2/experiments/available", tag = "General",
    responses((status = 200, body = AvailableExperiments)))]
pub(super) async fn available_experiments(_auth: Auth) -> Json<AvailableExperiments> {
    Json(AvailableExperiments::default())
}

/// This server never calls out to learn of releases (it runs where nothing else may be
/// reachable), so it reports itself as current, as Coder does with its update check off.
#[utoipa::path(get, path = "/api/v2/updatecheck", tag = "General",
    responses((status = 200, body = UpdateCheckResponse)))]
pub(super) async fn update_check() -> Json<UpdateCheckResponse> {
    Json(UpdateCheckResponse {
        current: true,
        version: codersdk::version::VERSION.to_string(),
        url: String::new(),
    })
}

/// One region, this deployment, until workspace proxies exist.
#[utoipa::path(get, path = "/api/v2/regions", tag = "WorkspaceProxies",
    responses((status = 200, body = RegionsResponse)))]
pub(super) async fn regions(State(state): State<AppState>, _auth: Auth) -> Json<RegionsResponse> {
    Json(RegionsResponse {
        regions: vec![deployment_config::primary_region(&state)],
    })
}

#[utoipa::path(get, path = "/api/v2/auth/scopes", tag = "Authorization",
    responses((status = 200, body = ExternalAPIKeyScopes)))]
pub(super) async fn scopes() -> Json<ExternalAPIKeyScopes> {
    Json(ExternalAPIKeyScopes {
        external: coderd_http::requests::TOKEN_SCOPES
            .iter()
            .map(|s| s.to_string())
            .collect(),
    })
}

#[utoipa::path(post, path = "/api/v2/authcheck", tag = "Authorization",
    request_body = AuthorizationRequest,
    responses((status = 200, body = Object, description = "Each check's name and whether the caller may."),
        (status = 400, body = codersdk::Response)))]
pub(super) async fn authcheck(
    State(state): State<AppState>,
    auth: Auth,
    Json(req): Json<AuthorizationRequest>,
) -> ApiResult<Json<AuthorizationResponse>> {
    Ok(Json(
        authcheck::evaluate(&state, &auth.subject, &req).await?,
    ))
}

/// A browser's report of a Content-Security-Policy violation, logged for the operators.
/// Browsers send these without credentials, so it needs none; its size is capped.
#[utoipa::path(post, path = "/api/v2/csp/reports", tag = "General",
    request_body = Object, responses((status = 200, body = String), (status = 400, body = codersdk::Response),
        (status = 413, body = codersdk::Response)))]
pub(super) async fn csp_report(body: axum::body::Bytes) -> ApiResult<Json<&'static str>> {
    if body.len() > MAX_CSP_REPORT {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "Request body too large.",
        ));
    }
    let report: serde_json::Value = serde_json::from_slice(&body).map_err(|e| {
        ApiError::bad_request("Failed to read body, invalid json.").with_detail(e.to_string())
    })?;
    tracing::warn!(report = %report, "content security policy violation");
    Ok(Json("ok"))
}

#[utoipa::path(get, path = "/api/v2/prebuilds/settings", tag = "Prebuilds",
    responses((status = 200, body = PrebuildsSettings), (status = 403, body = codersdk::Response), (status = 404, body = codersdk::Response, description = "Not a deployment administrator")))]
pub(super) async fn get_prebuild_settings(
    State(state): State<AppState>,
    auth: Auth,
) -> ApiResult<Json<PrebuildsSettings>> {
    Ok(Json(prebuild_settings::get(&state, &auth.subject).await?))
}

#[utoipa::path(put, path = "/api/v2/prebuilds/settings", tag = "Prebuilds",
    request_body = PrebuildsSettings,
    responses((status = 200, body = PrebuildsSettings), (status = 403, body = codersdk::Response), (status = 404, body = codersdk::Response, description = "Not a deployment administrator")))]
pub(super) async fn update_prebuild_settings(
    State(state): State<AppState>,
    auth: Auth,
    Json(req): Json<PrebuildsSettings>,
) -> ApiResult<Json<PrebuildsSettings>> {
    Ok(Json(
        prebuild_settings::update(&state, &auth.subject, &req).await?,
    ))
}
