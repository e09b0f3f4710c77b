//! `/insights/*` and `/templates/{id}/daus`: the domain layer's reports
//! (`coderd_core::domain::insights`), with Coder's query parameters.

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use codersdk::insights::{
    DAUsResponse, GetUserStatusCountsResponse, TemplateInsightsResponse,
    UserActivityInsightsResponse, UserLatencyInsightsResponse,
};
use uuid::Uuid;

use super::AppState;
use coderd_core::domain::insights::{self, Range, Sections};
use coderd_http::error::{ApiError, ApiResult};
use coderd_http::extract::{Auth, Json, Path, Query};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/insights/daus", get(daus))
        .route("/insights/user-activity", get(user_activity))
        .route("/insights/user-latency", get(user_latency))
        .route("/insights/templates", get(templates))
        .route("/insights/user-status-counts", get(user_status_counts))
        .route("/templates/{id}/daus", get(template_daus))
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct OffsetParams {
    #[serde(default)]
    tz_offset: i32,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ReportParams {
    #[serde(default)]
    start_time: String,
    #[serde(default)]
    end_time: String,
    /// Comma-separated.
    #[serde(default)]
    template_ids: String,
    #[serde(default)]
    interval: String,
    /// Comma-separated: `report`, `interval_reports`.
    #[serde(default)]
    sections: String,
}

impl ReportParams {
    fn range(&self) -> ApiResult<Range> {
        Ok(insights::parse_range(
            &self.start_time,
            &self.end_time,
            chrono::Utc::now(),
        )?)
    }

    fn template_ids(&self) -> ApiResult<Vec<Uuid>> {
        self.template_ids
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| {
                s.parse().map_err(|_| {
                    ApiError::validation(vec![codersdk::ValidationError {
                        field: "template_ids".into(),
                        detail: format!("{s:?} is not a UUID"),
                    }])
                })
            })
            .collect()
    }
}

#[utoipa::path(get, path = "/api/v2/insights/daus", tag = "Insights",
    params(("tz_offset" = Option<i32>, Query, description = "Hours from UTC")),
    responses((status = 200, body = DAUsResponse),
        (status = 404, body = codersdk::Response, description = "Not a deployment administrator")))]
pub(super) async fn daus(
    State(state): State<AppState>,
    auth: Auth,
    Query(params): Query<OffsetParams>,
) -> ApiResult<Json<DAUsResponse>> {
    Ok(Json(
        insights::daus(&state, &auth.subject, params.tz_offset, None).await?,
    ))
}

#[utoipa::path(get, path = "/api/v2/templates/{id}/daus", tag = "Templates",
    params(("id" = Uuid, Path), ("tz_offset" = Option<i32>, Query)),
    responses((status = 200, body = DAUsResponse)))]
pub(super) async fn template_daus(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
    Query(params): Query<OffsetParams>,
) -> ApiResult<Json<DAUsResponse>> {
    Ok(Json(
        insights::daus(&state, &auth.subject, params.tz_offset, Some(id)).await?,
    ))
}

#[utoipa::path(get, path = "/api/v2/insights/user-activity", tag = "Insights",
    params(("start_time" = String, Query), ("end_time" = String, Query), ("template_ids" = Option<String>, Query)),
    responses((status = 200, body = UserActivityInsightsResponse), (status = 400, body = codersdk::Response),
        (status = 404, body = codersdk::Response, description = "Not allowed to view these insights")))]
pub(super) async fn user_activity(
    State(state): State<AppState>,
    auth: Auth,
    Query(params): Query<ReportParams>,
) -> ApiResult<Json<UserActivityInsightsResponse>> {
    let (range, templates) = (params.range()?, params.template_ids()?);
    Ok(Json(
        insights::user_activity(&state, &auth.subject, range, templates).await?,
    ))
}

#[utoipa::path(get, path = "/api/v2/insights/user-latency", tag = "Insights",
    params(("start_time" = String, Query), ("end_time" = String, Query), ("template_ids" = Option<String>, Query)),
    responses((status = 200, body = UserLatencyInsightsResponse), (status = 400, body = codersdk::Response),
        (status = 404, body = codersdk::Response, description = "Not allowed to view these insights")))]
pub(super) async fn user_latency(
    State(state): State<AppState>,
    auth: Auth,
    Query(params): Query<ReportParams>,
) -> ApiResult<Json<UserLatencyInsightsResponse>> {
    let (range, templates) = (params.range()?, params.template_ids()?);
    Ok(Json(
        insights::user_latency(&state, &auth.subject, range, templates).await?,
    ))
}

#[utoipa::path(get, path = "/api/v2/insights/templates", tag = "Insights",
    params(("start_time" = String, Query), ("end_time" = String, Query), ("template_ids" = Option<String>, Query),
        ("interval" = Option<String>, Query, description = "day or week"),
        ("sections" = Option<String>, Query, description = "report, interval_reports")),
    responses((status = 200, body = TemplateInsightsResponse), (status = 400, body = codersdk::Response),
        (status = 404, body = codersdk::Response, description = "Not allowed to view these insights")))]
pub(super) async fn templates(
    State(state): State<AppState>,
    auth: Auth,
    Query(params): Query<ReportParams>,
) -> ApiResult<Json<TemplateInsightsResponse>> {
    let (range, templates) = (params.range()?, params.template_ids()?);
    let interval = insights::parse_interval(&params.interval, &range)?;
    let mut sections = Sections {
        report: params.sections.is_empty(),
        interval_reports: params.sections.is_empty(),
    };
    for section in params.sections.split(',').filter(|s| !s.is_empty()) {
        match section {
            "report" => sections.report = true,
            "interval_reports" => sections.interval_reports = true,
            other => {
                return Err(ApiError::validation(vec![codersdk::ValidationError {
                    field: "sections".into(),
                    detail: format!("{other:?} is not one of \"report\", \"interval_reports\""),
                }]));
            }
        }
    }
    Ok(Json(
        insights::templates(&state, &auth.subject, range, templates, interval, sections).await?,
    ))
}

#[utoipa::path(get, path = "/api/v2/insights/user-status-counts", tag = "Insights",
    params(("tz_offset" = Option<i32>, Query)),
    responses((status = 200, body = GetUserStatusCountsResponse), (status = 403, body = codersdk::Response)))]
pub(super) async fn user_status_counts(
    State(state): State<AppState>,
    auth: Auth,
    Query(params): Query<OffsetParams>,
) -> ApiResult<Json<GetUserStatusCountsResponse>> {
    Ok(Json(
        insights::user_status_counts(&state, &auth.subject, params.tz_offset).await?,
    ))
}
