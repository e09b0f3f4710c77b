//! The groups' JSON front door: Coder's `/organizations/{organization}/groups`,
//! `/groups/{group}` and `/templates/{template}/acl` routes, each parsing and calling the
//! module's decisions.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use codersdk::groups::{
    ACLAvailable, CreateGroupRequest, Group, PatchGroupRequest, TemplateACL, UpdateTemplateACL,
};
use uuid::Uuid;

use coderd_core::state::AppState;
use coderd_http::error::ApiResult;
use coderd_http::extract::{Auth, Json, Path};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/organizations/{organization}/groups",
            get(list_groups).post(create_group),
        )
        .route(
            "/organizations/{organization}/groups/{name}",
            get(group_by_name),
        )
        .route(
            "/groups/{group}",
            get(get_group).patch(patch_group).delete(delete_group),
        )
        .route(
            "/templates/{template}/acl",
            get(template_acl).patch(update_template_acl),
        )
        .route("/templates/{template}/acl/available", get(acl_available))
}

#[utoipa::path(get, path = "/api/v2/organizations/{organization}/groups", tag = "Enterprise",
    params(("organization" = String, Path)),
    responses((status = 200, body = [Group]), (status = 401, body = codersdk::Response),
        (status = 404, body = codersdk::Response)))]
pub(crate) async fn list_groups(
    State(state): State<AppState>,
    auth: Auth,
    Path(org): Path<String>,
) -> ApiResult<Json<Vec<Group>>> {
    Ok(Json(super::list(&state, &auth.subject, &org).await?))
}

#[utoipa::path(post, path = "/api/v2/organizations/{organization}/groups", tag = "Enterprise",
    params(("organization" = String, Path)), request_body = CreateGroupRequest,
    responses((status = 201, body = Group), (status = 400, body = codersdk::Response),
        (status = 401, body = codersdk::Response), (status = 403, body = codersdk::Response),
        (status = 404, body = codersdk::Response), (status = 409, body = codersdk::Response)))]
pub(crate) async fn create_group(
    State(state): State<AppState>,
    auth: Auth,
    Path(org): Path<String>,
    Json(req): Json<CreateGroupRequest>,
) -> ApiResult<(StatusCode, Json<Group>)> {
    let group = super::create(&state, &auth.subject, &org, &req).await?;
    Ok((StatusCode::CREATED, Json(group)))
}

#[utoipa::path(get, path = "/api/v2/organizations/{organization}/groups/{name}", tag = "Enterprise",
    params(("organization" = String, Path), ("name" = String, Path)),
    responses((status = 200, body = Group), (status = 401, body = codersdk::Response),
        (status = 404, body = codersdk::Response)))]
pub(crate) async fn group_by_name(
    State(state): State<AppState>,
    auth: Auth,
    Path((org, name)): Path<(String, String)>,
) -> ApiResult<Json<Group>> {
    Ok(Json(
        super::get_by_name(&state, &auth.subject, &org, &name).await?,
    ))
}

#[utoipa::path(get, path = "/api/v2/groups/{group}", tag = "Enterprise",
    params(("group" = Uuid, Path)),
    responses((status = 200, body = Group), (status = 400, body = codersdk::Response),
        (status = 401, body = codersdk::Response), (status = 404, body = codersdk::Response)))]
pub(crate) async fn get_group(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<Group>> {
    Ok(Json(super::get(&state, &auth.subject, id).await?))
}

#[utoipa::path(patch, path = "/api/v2/groups/{group}", tag = "Enterprise",
    params(("group" = Uuid, Path)), request_body = PatchGroupRequest,
    responses((status = 200, body = Group), (status = 400, body = codersdk::Response),
        (status = 401, body = codersdk::Response), (status = 403, body = codersdk::Response),
        (status = 404, body = codersdk::Response), (status = 409, body = codersdk::Response)))]
pub(crate) async fn patch_group(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
    Json(req): Json<PatchGroupRequest>,
) -> ApiResult<Json<Group>> {
    Ok(Json(super::patch(&state, &auth.subject, id, &req).await?))
}

#[utoipa::path(delete, path = "/api/v2/groups/{group}", tag = "Enterprise",
    params(("group" = Uuid, Path)),
    responses((status = 200, body = codersdk::Response), (status = 400, body = codersdk::Response),
        (status = 401, body = codersdk::Response), (status = 403, body = codersdk::Response),
        (status = 404, body = codersdk::Response)))]
pub(crate) async fn delete_group(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<codersdk::Response>> {
    super::delete(&state, &auth.subject, id).await?;
    Ok(Json(codersdk::Response::new("Successfully deleted group!")))
}

#[utoipa::path(get, path = "/api/v2/templates/{template}/acl", tag = "Enterprise",
    params(("template" = Uuid, Path)),
    responses((status = 200, body = TemplateACL), (status = 400, body = codersdk::Response),
        (status = 401, body = codersdk::Response), (status = 403, body = codersdk::Response),
        (status = 404, body = codersdk::Response)))]
pub(crate) async fn template_acl(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<TemplateACL>> {
    Ok(Json(super::template_acl(&state, &auth.subject, id).await?))
}

#[utoipa::path(patch, path = "/api/v2/templates/{template}/acl", tag = "Enterprise",
    params(("template" = Uuid, Path)), request_body = UpdateTemplateACL,
    responses((status = 200, body = codersdk::Response), (status = 400, body = codersdk::Response),
        (status = 401, body = codersdk::Response), (status = 403, body = codersdk::Response),
        (status = 404, body = codersdk::Response)))]
pub(crate) async fn update_template_acl(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
    Json(req): Json<UpdateTemplateACL>,
) -> ApiResult<Json<codersdk::Response>> {
    super::update_template_acl(&state, &auth.subject, id, &req).await?;
    Ok(Json(codersdk::Response::new(
        "Successfully updated template ACL list.",
    )))
}

#[utoipa::path(get, path = "/api/v2/templates/{template}/acl/available", tag = "Enterprise",
    params(("template" = Uuid, Path)),
    responses((status = 200, body = ACLAvailable), (status = 400, body = codersdk::Response),
        (status = 401, body = codersdk::Response), (status = 403, body = codersdk::Response),
        (status = 404, body = codersdk::Response)))]
pub(crate) async fn acl_available(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<ACLAvailable>> {
    Ok(Json(super::acl_available(&state, &auth.subject, id).await?))
}
