//! `GET /api/v2/audit`: the log, newest first, for owners and auditors.

use std::collections::{BTreeMap, HashMap};

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use codersdk::audit::{AuditDiffField, AuditLog, AuditLogResponse};
use codersdk::{Response, ValidationError};
use uuid::Uuid;

use coderd_authz::{Action, Object, Resource};
use coderd_core::domain::render;
use coderd_core::state::AppState;
use coderd_http::error::{ApiError, ApiResult};
use coderd_http::extract::{Auth, Json, Pagination, Query};
use coderd_store::AuditLogRow;

pub fn routes() -> Router<AppState> {
    Router::new().route("/audit", get(audit_logs))
}

#[derive(Debug, Default, serde::Deserialize)]
pub(crate) struct AuditParams {
    #[serde(default)]
    q: String,
    #[serde(flatten)]
    page: Pagination,
}

const DEFAULT_LIMIT: i64 = 25;
const MAX_LIMIT: i64 = 1000;

#[utoipa::path(get, path = "/api/v2/audit", tag = "Audit",
    params(("q" = Option<String>, Query, description = "Search terms: resource_type:, \
            resource_id:, action:, username:, email:, date_from:, date_to: (YYYY-MM-DD), build_reason:"),
        ("limit" = Option<i64>, Query, description = "Page size (default 25, at most 1000)"),
        ("offset" = Option<i64>, Query, description = "Entries to skip")),
    responses((status = 200, body = AuditLogResponse), (status = 400, body = Response),
        (status = 401, body = Response), (status = 403, body = Response)))]
pub(crate) async fn audit_logs(
    State(state): State<AppState>,
    auth: Auth,
    Query(params): Query<AuditParams>,
) -> ApiResult<Json<AuditLogResponse>> {
    // Coder answers 403 here (not 404): the endpoint is known to exist.
    if !auth.can(Action::Read, &Object::site(Resource::AuditLog)) {
        return Err(ApiError::forbidden());
    }
    let (limit, offset) = params.page.resolve(DEFAULT_LIMIT)?;
    let mut query = super::parse_query(&params.q).map_err(|errors| {
        ApiError::validation(
            errors
                .into_iter()
                .map(|e| ValidationError {
                    field: e.field,
                    detail: e.detail,
                })
                .collect(),
        )
        .with_detail("Invalid audit search query.")
    })?;
    query.limit = limit.min(MAX_LIMIT);
    query.offset = offset;
    let (rows, count) = state.store.list_audit_logs(&query).await?;
    let mut actor_ids: Vec<Uuid> = rows.iter().filter_map(|r| r.user_id).collect();
    actor_ids.sort_unstable();
    actor_ids.dedup();
    let actors = state.store.audit_actors(&actor_ids).await?;
    let mut orgs = state.store.organization_ids_of(&actor_ids).await?;
    let users: HashMap<Uuid, codersdk::users::User> = actors
        .into_iter()
        .map(|u| {
            let id = u.id;
            (id, render::user(u, orgs.remove(&id).unwrap_or_default()))
        })
        .collect();
    let audit_logs = rows
        .into_iter()
        .filter_map(|row| {
            let user = row.user_id.and_then(|id| users.get(&id).cloned());
            render_entry(row, user)
        })
        .collect();
    Ok(Json(AuditLogResponse {
        audit_logs,
        count,
        // Counts here are exact.
        count_cap: 0,
    }))
}

/// A stored entry as the API shows it; `None` for a row whose type or action this version
/// does not know (written by a newer replica).
fn render_entry(row: AuditLogRow, user: Option<codersdk::users::User>) -> Option<AuditLog> {
    let diff: BTreeMap<String, AuditDiffField> = serde_json::from_value(row.diff).ok()?;
    Some(AuditLog {
        id: row.id,
        request_id: row.request_id,
        time: row.time,
        organization_id: row.organization_id.unwrap_or_default(),
        ip: row.ip.unwrap_or_default(),
        user_agent: row.user_agent,
        resource_type: row.resource_type.parse().ok()?,
        resource_id: row.resource_id,
        resource_target: row.resource_target,
        resource_icon: String::new(),
        action: row.action.parse().ok()?,
        diff,
        status_code: row.status_code,
        additional_fields: row.additional_fields,
        description: row.description,
        resource_link: String::new(),
        is_deleted: false,
        user,
    })
}
