//! Organizations and their members.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post, put};
use chrono::Utc;
use codersdk::Response;
use codersdk::audit::{AuditAction, ResourceType};
use codersdk::organizations::{
    CreateOrganizationRequest, Organization, OrganizationMember, OrganizationMemberWithUserData,
};
use codersdk::users::UpdateRoles;
use uuid::Uuid;

use super::AppState;
use super::convert;
use coderd_authz::{Action, Object, Resource};
use coderd_core::audit::{Entry, actor};
use coderd_http::error::{ApiError, ApiResult, Validator};
use coderd_http::extract::{Auth, Json, Path, resolve_org, resolve_user};
use coderd_store::{self as store, MemberRow, OrganizationRow};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/organizations",
            get(list_organizations).post(create_organization),
        )
        .route("/organizations/{organization}", get(get_organization))
        .route("/organizations/{organization}/members", get(list_members))
        .route(
            "/organizations/{organization}/members/{user}",
            post(add_member).delete(remove_member),
        )
        .route(
            "/organizations/{organization}/members/{user}/roles",
            put(update_member_roles),
        )
        .route("/users/{user}/organizations", get(user_organizations))
}

#[utoipa::path(get, path = "/api/v2/organizations", tag = "Organizations",
    responses((status = 200, body = [Organization])))]
pub(super) async fn list_organizations(
    State(state): State<AppState>,
    auth: Auth,
) -> ApiResult<Json<Vec<Organization>>> {
    let orgs = state.store.list_organizations().await?;
    Ok(Json(
        orgs.into_iter()
            .filter(|o| auth.can(Action::Read, &Object::in_org(Resource::Organization, o.id)))
            .map(convert::organization)
            .collect(),
    ))
}

#[utoipa::path(post, path = "/api/v2/organizations", tag = "Organizations",
    request_body = CreateOrganizationRequest,
    responses((status = 201, body = Organization), (status = 409, body = Response)))]
pub(super) async fn create_organization(
    State(state): State<AppState>,
    auth: Auth,
    Json(req): Json<CreateOrganizationRequest>,
) -> ApiResult<(StatusCode, Json<Organization>)> {
    auth.authorize(Action::Create, &Object::site(Resource::Organization))?;
    coderd_http::requests::create_organization(&req)?;
    let now = Utc::now();
    let row = OrganizationRow {
        id: Uuid::new_v4(),
        display_name: if req.display_name.is_empty() {
            req.name.clone()
        } else {
            req.display_name
        },
        name: req.name,
        description: req.description,
        icon: req.icon,
        is_default: false,
        created_at: now,
        updated_at: now,
    };
    let log = Entry::new(
        actor(&auth.subject),
        ResourceType::Organization,
        row.id,
        &row.name,
        AuditAction::Create,
    )
    .org(row.id)
    .diff(None, Some(&row))
    .build();
    let org = state
        .store
        .create_organization(&row, auth.user.id, Some(&log))
        .await
        .map_err(|e| match e {
            store::Error::Conflict { .. } => {
                ApiError::conflict("An organization with this name already exists.")
            }
            other => other.into(),
        })?;
    Ok((StatusCode::CREATED, Json(convert::organization(org))))
}

#[utoipa::path(get, path = "/api/v2/organizations/{organization}", tag = "Organizations",
    params(("organization" = String, Path, description = "Organization ID or name")),
    responses((status = 200, body = Organization)))]
pub(super) async fn get_organization(
    State(state): State<AppState>,
    auth: Auth,
    Path(org): Path<String>,
) -> ApiResult<Json<Organization>> {
    Ok(Json(convert::organization(
        resolve_org(&state, &auth, &org).await?,
    )))
}

#[utoipa::path(get, path = "/api/v2/users/{user}/organizations", tag = "Users",
    params(("user" = String, Path)), responses((status = 200, body = [Organization])))]
pub(super) async fn user_organizations(
    State(state): State<AppState>,
    auth: Auth,
    Path(user): Path<String>,
) -> ApiResult<Json<Vec<Organization>>> {
    let user = resolve_user(&state, &auth, &user).await?;
    let orgs = state.store.organizations_of_user(user.id).await?;
    Ok(Json(
        orgs.into_iter()
            .filter(|o| auth.can(Action::Read, &Object::in_org(Resource::Organization, o.id)))
            .map(convert::organization)
            .collect(),
    ))
}

#[utoipa::path(get, path = "/api/v2/organizations/{organization}/members", tag = "Members",
    params(("organization" = String, Path)), responses((status = 200, body = [OrganizationMemberWithUserData])))]
pub(super) async fn list_members(
    State(state): State<AppState>,
    auth: Auth,
    Path(org): Path<String>,
) -> ApiResult<Json<Vec<OrganizationMemberWithUserData>>> {
    let org = resolve_org(&state, &auth, &org).await?;
    auth.authorize(
        Action::Read,
        &Object::in_org(Resource::OrganizationMember, org.id),
    )?;
    let rows = state.store.organization_members(org.id).await?;
    Ok(Json(
        rows.into_iter().map(convert::member_with_user).collect(),
    ))
}

/// The organization and the user named in a members path, with the user's visibility checked
/// through the organization rather than site-wide (org admins manage members they could not
/// otherwise list).
async fn org_and_user(
    state: &AppState,
    auth: &Auth,
    org: &str,
    user: &str,
) -> ApiResult<(OrganizationRow, store::UserRow)> {
    let org = resolve_org(state, auth, org).await?;
    let user = if user == "me" {
        auth.user.clone()
    } else if let Ok(id) = user.parse::<Uuid>() {
        state.store.user_by_id(id).await?
    } else {
        state.store.user_by_username(user).await?
    };
    Ok((org, user))
}

#[utoipa::path(post, path = "/api/v2/organizations/{organization}/members/{user}", tag = "Members",
    params(("organization" = String, Path), ("user" = String, Path)),
    responses((status = 200, body = OrganizationMember), (status = 409, body = Response)))]
pub(super) async fn add_member(
    State(state): State<AppState>,
    auth: Auth,
    Path((org, user)): Path<(String, String)>,
) -> ApiResult<Json<OrganizationMember>> {
    let (org, user) = org_and_user(&state, &auth, &org, &user).await?;
    auth.authorize(
        Action::Create,
        &Object::in_org(Resource::OrganizationMember, org.id),
    )?;
    let log = member_entry(&auth, org.id, &user, AuditAction::Create)
        .diff(None, Some(&member_of(org.id, &user, vec![])))
        .build();
    let member = state
        .store
        .add_organization_member(org.id, user.id, Some(&log))
        .await
        .map_err(|e| match e {
            store::Error::Conflict { .. } => {
                ApiError::conflict("The user is already a member of this organization.")
            }
            other => other.into(),
        })?;
    Ok(Json(convert::member(member)))
}

#[utoipa::path(delete, path = "/api/v2/organizations/{organization}/members/{user}", tag = "Members",
    params(("organization" = String, Path), ("user" = String, Path)), responses((status = 204)))]
pub(super) async fn remove_member(
    State(state): State<AppState>,
    auth: Auth,
    Path((org, user)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    let (org, user) = org_and_user(&state, &auth, &org, &user).await?;
    auth.authorize(
        Action::Delete,
        &Object::in_org(Resource::OrganizationMember, org.id),
    )?;
    if user.id == auth.user.id {
        return Err(ApiError::bad_request(
            "You cannot remove yourself from an organization.",
        ));
    }
    let log = member_entry(&auth, org.id, &user, AuditAction::Delete).build();
    state
        .store
        .remove_organization_member(org.id, user.id, Some(&log))
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(put, path = "/api/v2/organizations/{organization}/members/{user}/roles", tag = "Members",
    params(("organization" = String, Path), ("user" = String, Path)), request_body = UpdateRoles,
    responses((status = 200, body = OrganizationMember), (status = 400, body = Response)))]
pub(super) async fn update_member_roles(
    State(state): State<AppState>,
    auth: Auth,
    Path((org, user)): Path<(String, String)>,
    Json(req): Json<UpdateRoles>,
) -> ApiResult<Json<OrganizationMember>> {
    let (org, user) = org_and_user(&state, &auth, &org, &user).await?;
    auth.authorize(
        Action::Update,
        &Object::in_org(Resource::AssignOrgRole, org.id),
    )?;
    if user.id == auth.user.id {
        return Err(ApiError::bad_request("You cannot change your own roles."));
    }
    let current = state
        .store
        .memberships_of_user(user.id)
        .await?
        .into_iter()
        .find(|m| m.organization_id == org.id)
        .ok_or_else(ApiError::not_found)?;
    let mut wanted: Vec<String> = req
        .roles
        .into_iter()
        .filter(|r| r != "organization-member")
        .collect();
    wanted.sort();
    wanted.dedup();
    let mut v = Validator::default();
    for role in &wanted {
        v.check(
            coderd_authz::org_role(role).is_some(),
            "roles",
            format!("{role:?} is not an organization role"),
        );
    }
    v.finish()?;
    let changed = wanted
        .iter()
        .filter(|r| !current.roles.contains(r))
        .chain(current.roles.iter().filter(|r| !wanted.contains(r)));
    for role in changed {
        if !auth.subject.can_assign_org_role(org.id, role) {
            return Err(ApiError::forbidden()
                .with_detail(format!("You may not assign or remove the role {role:?}.")));
        }
    }
    let log = member_entry(&auth, org.id, &user, AuditAction::Write)
        .diff(
            Some(&current),
            Some(&MemberRow {
                roles: wanted.clone(),
                ..current.clone()
            }),
        )
        .build();
    let member = state
        .store
        .update_member_roles(org.id, user.id, &wanted, Some(&log))
        .await?;
    Ok(Json(convert::member(member)))
}

/// An entry for `action` by the caller on `user`'s membership of `org` (named by the user, as
/// Coder does).
fn member_entry(auth: &Auth, org: Uuid, user: &store::UserRow, action: AuditAction) -> Entry {
    Entry::new(
        actor(&auth.subject),
        ResourceType::OrganizationMember,
        user.id,
        &user.username,
        action,
    )
    .org(org)
}

/// The membership about to be created, for its entry's diff.
fn member_of(org: Uuid, user: &store::UserRow, roles: Vec<String>) -> MemberRow {
    let now = Utc::now();
    MemberRow {
        organization_id: org,
        user_id: user.id,
        roles,
        created_at: now,
        updated_at: now,
    }
}
