//! Template versions after their import, and the starter templates: `PATCH
//! /templateversions/{id}`, `…/archive` and `…/unarchive`, `POST /templates/{id}/versions/archive`,
//! a version by its template's and its own name (and the one before it), and
//! `GET /templates/examples`.

use axum::Router;
use axum::extract::State;
use axum::routing::{get, post};
use codersdk::templates::{
    ArchiveTemplateVersionsRequest, ArchiveTemplateVersionsResponse, PatchTemplateVersionRequest,
    TemplateExample, TemplateVersion,
};
use uuid::Uuid;

use super::AppState;
use super::templates::resolve_template;
use coderd_authz::{Action, Object, Resource};
use coderd_core::domain::views::version;
use coderd_core::domain::{Error, resolve, template_versions};
use coderd_http::error::{ApiError, ApiResult};
use coderd_http::extract::{Auth, Json, Path, resolve_org};
use coderd_store::TemplateVersionRow;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/templates/examples", get(examples))
        .route(
            "/organizations/{organization}/templates/examples",
            get(org_examples),
        )
        .route(
            "/organizations/{organization}/templates/{template}/versions/{version}",
            get(org_version_by_name),
        )
        .route(
            "/organizations/{organization}/templates/{template}/versions/{version}/previous",
            get(previous_version),
        )
        .route(
            "/templateversions/{id}",
            axum::routing::patch(update_version),
        )
        .route("/templateversions/{id}/archive", post(archive_version))
        .route("/templateversions/{id}/unarchive", post(unarchive_version))
        .route("/templates/{id}/versions/archive", post(archive_unused))
}

/// Whoever may read templates in some organization sees the starter templates.
#[utoipa::path(get, path = "/api/v2/templates/examples", tag = "Templates",
    responses((status = 200, body = [TemplateExample]), (status = 404, body = codersdk::Response)))]
pub(super) async fn examples(auth: Auth) -> ApiResult<Json<Vec<TemplateExample>>> {
    let may_read = auth
        .subject
        .orgs
        .keys()
        .any(|org| auth.can(Action::Read, &Object::in_org(Resource::Template, *org)))
        || auth.can(Action::Read, &Object::site(Resource::Template));
    // Members read templates through access lists, never in general; they create from
    // starter templates no more than they create templates, which needs `Create`.
    let may_create = auth
        .subject
        .orgs
        .keys()
        .any(|org| auth.can(Action::Create, &Object::in_org(Resource::Template, *org)));
    if !may_read && !may_create {
        return Err(ApiError::not_found());
    }
    Ok(Json(coderd_core::examples::list()))
}

#[utoipa::path(get, path = "/api/v2/organizations/{organization}/templates/examples", tag = "Templates",
    params(("organization" = String, Path)),
    responses((status = 200, body = [TemplateExample]), (status = 404, body = codersdk::Response)))]
pub(super) async fn org_examples(
    State(state): State<AppState>,
    auth: Auth,
    Path(org): Path<String>,
) -> ApiResult<Json<Vec<TemplateExample>>> {
    let org = resolve_org(&state, &auth, &org).await?;
    let object = Object::in_org(Resource::Template, org.id);
    if !auth.can(Action::Read, &object) && !auth.can(Action::Create, &object) {
        return Err(ApiError::not_found());
    }
    Ok(Json(coderd_core::examples::list()))
}

/// A version by its organization's, its template's and its own name.
async fn version_by_names(
    state: &AppState,
    auth: &Auth,
    org: &str,
    template: &str,
    name: &str,
) -> ApiResult<(coderd_store::TemplateRow, TemplateVersionRow)> {
    let org = resolve_org(state, auth, org).await?;
    let template = resolve::template_by_name(state, &auth.subject, org.id, template).await?;
    let row = state
        .store
        .template_version_by_name(template.id, name)
        .await
        .map_err(|e| match e {
            coderd_store::Error::NotFound => {
                ApiError::not_found().with_detail(format!("no template version named {name:?}"))
            }
            other => other.into(),
        })?;
    Ok((template, row))
}

#[utoipa::path(get, path = "/api/v2/organizations/{organization}/templates/{template}/versions/{version}", tag = "Templates",
    params(("organization" = String, Path), ("template" = String, Path), ("version" = String, Path)),
    responses((status = 200, body = TemplateVersion), (status = 404, body = codersdk::Response)))]
pub(super) async fn org_version_by_name(
    State(state): State<AppState>,
    auth: Auth,
    Path((org, template, name)): Path<(String, String, String)>,
) -> ApiResult<Json<TemplateVersion>> {
    let (_, row) = version_by_names(&state, &auth, &org, &template, &name).await?;
    Ok(Json(version(&state, row).await?))
}

#[utoipa::path(get, path = "/api/v2/organizations/{organization}/templates/{template}/versions/{version}/previous", tag = "Templates",
    params(("organization" = String, Path), ("template" = String, Path), ("version" = String, Path)),
    responses((status = 200, body = TemplateVersion), (status = 404, body = codersdk::Response)))]
pub(super) async fn previous_version(
    State(state): State<AppState>,
    auth: Auth,
    Path((org, template, name)): Path<(String, String, String)>,
) -> ApiResult<Json<TemplateVersion>> {
    let (template, row) = version_by_names(&state, &auth, &org, &template, &name).await?;
    let previous = template_versions::previous(&state, &template, &row)
        .await
        .map_err(|e| match e {
            Error::NotFound => {
                ApiError::not_found().with_detail(format!("no template version before {name:?}"))
            }
            other => other.into(),
        })?;
    Ok(Json(version(&state, previous).await?))
}

#[utoipa::path(patch, path = "/api/v2/templateversions/{id}", tag = "Templates",
    params(("id" = Uuid, Path)), request_body = PatchTemplateVersionRequest,
    responses((status = 200, body = TemplateVersion), (status = 400, body = codersdk::Response)))]
pub(super) async fn update_version(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
    Json(req): Json<PatchTemplateVersionRequest>,
) -> ApiResult<Json<TemplateVersion>> {
    let row = resolve::version(&state, &auth.subject, id).await?;
    let row = template_versions::update(&state, &auth.subject, &row, &req).await?;
    Ok(Json(version(&state, row).await?))
}

async fn set_archived(
    state: &AppState,
    auth: &Auth,
    id: Uuid,
    archived: bool,
) -> ApiResult<Json<String>> {
    let row = resolve::version(state, &auth.subject, id).await?;
    template_versions::set_archived(state, &auth.subject, &row, archived).await?;
    let done = if archived { "archived" } else { "unarchived" };
    Ok(Json(format!("template version {id:?} {done}")))
}

#[utoipa::path(post, path = "/api/v2/templateversions/{id}/archive", tag = "Templates",
    params(("id" = Uuid, Path)),
    responses((status = 200, body = String), (status = 400, body = codersdk::Response)))]
pub(super) async fn archive_version(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<String>> {
    set_archived(&state, &auth, id, true).await
}

#[utoipa::path(post, path = "/api/v2/templateversions/{id}/unarchive", tag = "Templates",
    params(("id" = Uuid, Path)),
    responses((status = 200, body = String), (status = 400, body = codersdk::Response)))]
pub(super) async fn unarchive_version(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<String>> {
    set_archived(&state, &auth, id, false).await
}

#[utoipa::path(post, path = "/api/v2/templates/{id}/versions/archive", tag = "Templates",
    params(("id" = Uuid, Path)), request_body = ArchiveTemplateVersionsRequest,
    responses((status = 200, body = ArchiveTemplateVersionsResponse)))]
pub(super) async fn archive_unused(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
    Json(req): Json<ArchiveTemplateVersionsRequest>,
) -> ApiResult<Json<ArchiveTemplateVersionsResponse>> {
    let template = resolve_template(&state, &auth, id).await?;
    let archived_ids =
        template_versions::archive_unused(&state, &auth.subject, &template, req.all).await?;
    Ok(Json(ArchiveTemplateVersionsResponse {
        template_id: template.id,
        archived_ids,
    }))
}
