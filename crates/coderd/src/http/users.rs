//! Users: first-user setup, password login, the user directory, status and roles.

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response as HttpResponse};
use axum::routing::{get, post, put};
use codersdk::audit::{AuditAction, ResourceType};
use codersdk::users::{
    AssignableRole, CreateFirstUserRequest, CreateFirstUserResponse, CreateUserRequest,
    GetUsersResponse, LoginType, LoginWithPasswordRequest, LoginWithPasswordResponse, UpdateRoles,
    UpdateUserPasswordRequest, User, UserRoles, UserStatus,
};
use codersdk::{Response, client::SESSION_TOKEN_COOKIE};
use uuid::Uuid;

use super::AppState;
use super::convert;
use super::extract::{Auth, Json, Pagination, Path, Query, resolve_user};
use crate::audit::{Entry, actor};
use crate::authz::{Action, Object, Resource, SITE_ROLES};
use crate::domain::accounts::{self, PasswordLogin};
use crate::error::{ApiError, ApiResult, Validator};
use crate::store::{self, NewUser, UserDeletion, UserQuery, UserRow};
use crate::validate;

const DEFAULT_USERS_PAGE: i64 = 50;

/// An entry for `action` by the caller on the user `row`.
fn user_entry(auth: &Auth, row: &UserRow, action: AuditAction) -> Entry {
    Entry::new(
        actor(&auth.subject),
        ResourceType::User,
        row.id,
        &row.username,
        action,
    )
}

pub fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/users/first",
            get(first_user_exists).post(create_first_user),
        )
        .route("/users/login", post(login))
        .route("/users/logout", post(logout))
        .route("/users/roles", get(assignable_roles))
        .route("/users", get(list_users).post(create_user))
        .route("/users/{user}", get(get_user).delete(delete_user))
        .route("/users/{user}/status/suspend", put(suspend_user))
        .route("/users/{user}/status/activate", put(activate_user))
        .route(
            "/users/{user}/roles",
            get(user_roles).put(update_user_roles),
        )
        .route("/users/{user}/password", put(update_password))
}

/// A user as the API shows it, with its organizations.
pub(super) async fn user_response(state: &AppState, row: UserRow) -> ApiResult<User> {
    let mut orgs = state.store.organization_ids_of(&[row.id]).await?;
    let ids = orgs.remove(&row.id).unwrap_or_default();
    Ok(convert::user(row, ids))
}

#[utoipa::path(get, path = "/api/v2/users/first", tag = "Users",
    responses((status = 200, body = Response), (status = 404, body = Response)))]
pub(super) async fn first_user_exists(State(state): State<AppState>) -> ApiResult<Json<Response>> {
    if state.store.has_any_user().await? {
        Ok(Json(Response::new(
            "The initial user has already been created!",
        )))
    } else {
        Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "The initial user has not been created!",
        ))
    }
}

#[utoipa::path(post, path = "/api/v2/users/first", tag = "Users",
    request_body = CreateFirstUserRequest,
    responses((status = 201, body = CreateFirstUserResponse), (status = 400, body = Response), (status = 409, body = Response)))]
pub(super) async fn create_first_user(
    State(state): State<AppState>,
    Json(req): Json<CreateFirstUserRequest>,
) -> ApiResult<(StatusCode, Json<CreateFirstUserResponse>)> {
    // An existing user is the answer even to an invalid request, as before.
    if !accounts::needs_first_user(&state).await? {
        return Err(ApiError::conflict(
            "The initial user has already been created.",
        ));
    }
    validate::requests::first_user(&req)?;
    let (user, org) = accounts::create_first_user(&state, req).await?;
    Ok((
        StatusCode::CREATED,
        Json(CreateFirstUserResponse {
            user_id: user.id,
            organization_id: org.id,
        }),
    ))
}

#[utoipa::path(post, path = "/api/v2/users/login", tag = "Authorization",
    request_body = LoginWithPasswordRequest,
    responses((status = 201, body = LoginWithPasswordResponse), (status = 401, body = Response),
        (status = 429, body = Response, description = "Too many attempts from this address or for this account; see Retry-After.")))]
pub(super) async fn login(
    State(state): State<AppState>,
    extensions: axum::http::Extensions,
    Json(req): Json<LoginWithPasswordRequest>,
) -> ApiResult<HttpResponse> {
    validate::requests::login(&req)?;
    let peer = extensions
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|c| c.0.ip());
    let token = match accounts::password_login(&state, peer, &req.email, req.password).await? {
        PasswordLogin::Session { token } => token,
        PasswordLogin::RateLimited { retry_after } => return Ok(too_many_attempts(retry_after)),
        PasswordLogin::PasswordAuthDisabled => {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "Password authentication is disabled.",
            )
            .with_detail("Sign in through the identity provider."));
        }
    };
    let cookie = session_cookie(&state, &token, state.options.session_duration.as_secs());
    Ok((
        StatusCode::CREATED,
        [(header::SET_COOKIE, cookie)],
        Json(LoginWithPasswordResponse {
            session_token: token,
        }),
    )
        .into_response())
}

/// 429 with `Retry-After`, the same for every account, existing or not.
fn too_many_attempts(retry_after: std::time::Duration) -> HttpResponse {
    let seconds = retry_after.as_secs_f64().ceil().max(1.0) as u64;
    let mut response = ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        "Too many login attempts. Try again later.",
    )
    .with_detail(format!("Retry in {seconds} s."))
    .into_response();
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    response
}

fn session_cookie(state: &AppState, value: &str, max_age: u64) -> HeaderValue {
    let secure = if state.options.secure_cookies {
        "; Secure"
    } else {
        ""
    };
    let cookie = format!(
        "{SESSION_TOKEN_COOKIE}={value}; Path=/; Max-Age={max_age}; HttpOnly; SameSite=Lax{secure}"
    );
    HeaderValue::from_str(&cookie).unwrap_or_else(|_| HeaderValue::from_static(""))
}

#[utoipa::path(post, path = "/api/v2/users/logout", tag = "Users",
    responses((status = 200, body = Response)))]
pub(super) async fn logout(
    State(state): State<AppState>,
    auth: Auth,
) -> ApiResult<impl IntoResponse> {
    accounts::logout(&state, &auth.user, &auth.key.id).await?;
    let mut headers = HeaderMap::new();
    headers.insert(header::SET_COOKIE, session_cookie(&state, "", 0));
    Ok((headers, Json(Response::new("Logged out!"))))
}

#[utoipa::path(get, path = "/api/v2/users/roles", tag = "Members",
    responses((status = 200, body = [AssignableRole])))]
pub(super) async fn assignable_roles(auth: Auth) -> ApiResult<Json<Vec<AssignableRole>>> {
    auth.authorize(Action::Read, &Object::site(Resource::AssignRole))?;
    Ok(Json(
        SITE_ROLES
            .iter()
            .map(|r| AssignableRole {
                name: r.name.into(),
                display_name: r.display_name.into(),
                organization_id: String::new(),
                assignable: auth.subject.can_assign_site_role(r.name),
                built_in: true,
            })
            .collect(),
    ))
}

#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct ListUsersParams {
    #[serde(default)]
    q: String,
    #[serde(flatten)]
    page: Pagination,
}

/// Parses Coder's user search: `status:active role:owner alice`.
fn parse_user_query(q: &str) -> ApiResult<UserQuery> {
    let mut query = UserQuery::default();
    let mut words = Vec::new();
    for term in q.split_whitespace() {
        match term.split_once(':') {
            Some(("status", v)) => {
                v.parse::<UserStatus>().map_err(|e| {
                    ApiError::bad_request("Invalid user search query.").with_detail(e)
                })?;
                query.statuses.push(v.to_string());
            }
            Some(("role", v)) => query.roles.push(v.to_string()),
            Some(("username" | "email", v)) => words.push(v.to_string()),
            Some((key, _)) => {
                return Err(ApiError::bad_request("Invalid user search query.")
                    .with_detail(format!("unknown filter {key:?}")));
            }
            None => words.push(term.to_string()),
        }
    }
    query.search = words.join(" ");
    Ok(query)
}

#[utoipa::path(get, path = "/api/v2/users", tag = "Users",
    params(("q" = Option<String>, Query), ("limit" = Option<i64>, Query), ("offset" = Option<i64>, Query), ("after_id" = Option<Uuid>, Query)),
    responses((status = 200, body = GetUsersResponse)))]
pub(super) async fn list_users(
    State(state): State<AppState>,
    auth: Auth,
    Query(params): Query<ListUsersParams>,
) -> ApiResult<Json<GetUsersResponse>> {
    let mut query = parse_user_query(&params.q)?;
    (query.limit, query.offset) = params.page.resolve(DEFAULT_USERS_PAGE)?;
    query.after_id = params.page.after_id;
    let filter = auth.subject.filter(Resource::User);
    let (rows, count) = state.store.list_users(&query, &filter).await?;
    let ids: Vec<Uuid> = rows.iter().map(|r| r.id).collect();
    let mut orgs = state.store.organization_ids_of(&ids).await?;
    let users = rows
        .into_iter()
        .map(|row| {
            let ids = orgs.remove(&row.id).unwrap_or_default();
            convert::user(row, ids)
        })
        .collect();
    Ok(Json(GetUsersResponse { users, count }))
}

#[utoipa::path(post, path = "/api/v2/users", tag = "Users",
    request_body = CreateUserRequest,
    responses((status = 201, body = User), (status = 400, body = Response), (status = 409, body = Response)))]
pub(super) async fn create_user(
    State(state): State<AppState>,
    auth: Auth,
    Json(req): Json<CreateUserRequest>,
) -> ApiResult<(StatusCode, Json<User>)> {
    auth.authorize(Action::Create, &Object::site(Resource::User))?;
    let login_type = req.login_type.unwrap_or(LoginType::Password);
    let needs_password = login_type == LoginType::Password;
    validate::requests::create_user(&req, needs_password)?;
    // An OIDC or GitHub user made in advance (signups closed) is linked on its first sign-in.
    if !matches!(
        login_type,
        LoginType::Password | LoginType::None | LoginType::Oidc | LoginType::Github
    ) {
        return Err(
            ApiError::bad_request("Unsupported login type.").with_detail(
                "users can be created with login_type \"password\", \"oidc\", \"github\" or \"none\"",
            ),
        );
    }
    // `member` is implicit.
    let roles: Vec<String> = req.roles.into_iter().filter(|r| r != "member").collect();
    for role in &roles {
        if !auth.subject.can_assign_site_role(role) {
            return Err(
                ApiError::forbidden().with_detail(format!("you may not assign the role {role:?}"))
            );
        }
    }
    let mut organization_ids = req.organization_ids.clone();
    organization_ids.extend(req.organization_id);
    if organization_ids.is_empty() {
        organization_ids.push(state.store.default_organization().await?.id);
    }
    for org in &organization_ids {
        let org = state
            .store
            .organization_by_id(*org)
            .await
            .map_err(|e| match e {
                store::Error::NotFound => ApiError::bad_request("Organization does not exist.")
                    .with_detail(format!("no organization {org}")),
                other => other.into(),
            })?;
        auth.authorize(
            Action::Create,
            &Object::in_org(Resource::OrganizationMember, org.id),
        )?;
    }
    let hashed_password = if needs_password {
        crate::auth::hash_password(req.password).await?
    } else {
        String::new()
    };
    let new = NewUser {
        id: Uuid::new_v4(),
        email: req.email,
        username: req.username,
        name: req.name,
        hashed_password,
        status: req
            .user_status
            .unwrap_or(UserStatus::Active)
            .as_str()
            .into(),
        rbac_roles: roles,
        login_type: login_type.as_str().into(),
        organization_ids,
    };
    let log = Entry::new(
        actor(&auth.subject),
        ResourceType::User,
        new.id,
        &new.username,
        AuditAction::Create,
    )
    .diff(None, Some(&new))
    .build();
    let row = state
        .store
        .create_user(new, Some(&log))
        .await
        .map_err(|e| match e {
            store::Error::Conflict { constraint } if constraint.contains("email") => {
                ApiError::conflict("A user with this email already exists.")
            }
            store::Error::Conflict { constraint } if constraint.contains("username") => {
                ApiError::conflict("A user with this username already exists.")
            }
            other => other.into(),
        })?;
    Ok((StatusCode::CREATED, Json(user_response(&state, row).await?)))
}

#[utoipa::path(get, path = "/api/v2/users/{user}", tag = "Users",
    params(("user" = String, Path, description = "User ID, username, or me")),
    responses((status = 200, body = User), (status = 404, body = Response)))]
pub(super) async fn get_user(
    State(state): State<AppState>,
    auth: Auth,
    Path(user): Path<String>,
) -> ApiResult<Json<User>> {
    let row = resolve_user(&state, &auth, &user).await?;
    Ok(Json(user_response(&state, row).await?))
}

#[utoipa::path(delete, path = "/api/v2/users/{user}", tag = "Users",
    params(("user" = String, Path)),
    responses((status = 200, body = Response), (status = 403, body = Response),
        (status = 417, body = Response, description = "The user still owns workspaces.")))]
pub(super) async fn delete_user(
    State(state): State<AppState>,
    auth: Auth,
    Path(user): Path<String>,
) -> ApiResult<Json<Response>> {
    let row = resolve_user(&state, &auth, &user).await?;
    auth.authorize(Action::Delete, &Object::user(row.id))?;
    if row.id == auth.user.id {
        return Err(ApiError::forbidden().with_detail("You cannot delete yourself."));
    }
    let log = user_entry(&auth, &row, AuditAction::Delete)
        .diff(
            Some(&row),
            Some(&UserRow {
                deleted: true,
                ..row.clone()
            }),
        )
        .build();
    match state.store.delete_user(row.id, Some(&log)).await? {
        UserDeletion::Deleted => Ok(Json(Response::new("User has been deleted!"))),
        // Coder's status and words: the workspaces would be left without an owner.
        UserDeletion::OwnsWorkspaces => Err(ApiError::new(
            StatusCode::EXPECTATION_FAILED,
            "You cannot delete a user that has workspaces. Delete their workspaces and try again!",
        )),
    }
}

async fn set_status(
    state: &AppState,
    auth: &Auth,
    user: &str,
    status: UserStatus,
) -> ApiResult<Json<User>> {
    let row = resolve_user(state, auth, user).await?;
    auth.authorize(Action::Update, &Object::user(row.id))?;
    if status == UserStatus::Suspended && row.id == auth.user.id {
        return Err(ApiError::bad_request("You cannot suspend yourself."));
    }
    let log = user_entry(auth, &row, AuditAction::Write)
        .diff(
            Some(&row),
            Some(&UserRow {
                status: status.as_str().into(),
                ..row.clone()
            }),
        )
        .build();
    let row = state
        .store
        .update_user_status(row.id, status.as_str(), Some(&log))
        .await?;
    tracing::info!(user = %row.username, status = status.as_str(), "user status changed");
    Ok(Json(user_response(state, row).await?))
}

#[utoipa::path(put, path = "/api/v2/users/{user}/status/suspend", tag = "Users",
    params(("user" = String, Path)), responses((status = 200, body = User)))]
pub(super) async fn suspend_user(
    State(state): State<AppState>,
    auth: Auth,
    Path(user): Path<String>,
) -> ApiResult<Json<User>> {
    set_status(&state, &auth, &user, UserStatus::Suspended).await
}

#[utoipa::path(put, path = "/api/v2/users/{user}/status/activate", tag = "Users",
    params(("user" = String, Path)), responses((status = 200, body = User)))]
pub(super) async fn activate_user(
    State(state): State<AppState>,
    auth: Auth,
    Path(user): Path<String>,
) -> ApiResult<Json<User>> {
    set_status(&state, &auth, &user, UserStatus::Active).await
}

#[utoipa::path(get, path = "/api/v2/users/{user}/roles", tag = "Members",
    params(("user" = String, Path)), responses((status = 200, body = UserRoles)))]
pub(super) async fn user_roles(
    State(state): State<AppState>,
    auth: Auth,
    Path(user): Path<String>,
) -> ApiResult<Json<UserRoles>> {
    let row = resolve_user(&state, &auth, &user).await?;
    let memberships = state.store.memberships_of_user(row.id).await?;
    Ok(Json(UserRoles {
        roles: row.rbac_roles,
        organization_roles: memberships
            .into_iter()
            .map(|m| (m.organization_id, m.roles))
            .collect(),
    }))
}

#[utoipa::path(put, path = "/api/v2/users/{user}/roles", tag = "Members",
    params(("user" = String, Path)), request_body = UpdateRoles,
    responses((status = 200, body = User), (status = 400, body = Response), (status = 403, body = Response)))]
pub(super) async fn update_user_roles(
    State(state): State<AppState>,
    auth: Auth,
    Path(user): Path<String>,
    Json(req): Json<UpdateRoles>,
) -> ApiResult<Json<User>> {
    let row = resolve_user(&state, &auth, &user).await?;
    auth.authorize(Action::Update, &Object::site(Resource::AssignRole))?;
    if row.id == auth.user.id {
        return Err(ApiError::bad_request("You cannot change your own roles."));
    }
    // `member` is implicit; accept it for clients that send it back.
    let mut wanted: Vec<String> = req.roles.into_iter().filter(|r| r != "member").collect();
    wanted.sort();
    wanted.dedup();
    let mut v = Validator::default();
    for role in &wanted {
        v.check(
            crate::authz::site_role(role).is_some(),
            "roles",
            format!("{role:?} is not a site role"),
        );
    }
    v.finish()?;
    let changed = wanted
        .iter()
        .filter(|r| !row.rbac_roles.contains(r))
        .chain(row.rbac_roles.iter().filter(|r| !wanted.contains(r)));
    for role in changed {
        if !auth.subject.can_assign_site_role(role) {
            return Err(ApiError::forbidden()
                .with_detail(format!("You may not assign or remove the role {role:?}.")));
        }
    }
    let log = user_entry(&auth, &row, AuditAction::Write)
        .diff(
            Some(&row),
            Some(&UserRow {
                rbac_roles: wanted.clone(),
                ..row.clone()
            }),
        )
        .build();
    let row = state
        .store
        .update_user_roles(row.id, &wanted, Some(&log))
        .await?;
    Ok(Json(user_response(&state, row).await?))
}

#[utoipa::path(put, path = "/api/v2/users/{user}/password", tag = "Users",
    params(("user" = String, Path)), request_body = UpdateUserPasswordRequest,
    responses((status = 204), (status = 400, body = Response)))]
pub(super) async fn update_password(
    State(state): State<AppState>,
    auth: Auth,
    Path(user): Path<String>,
    Json(req): Json<UpdateUserPasswordRequest>,
) -> ApiResult<StatusCode> {
    let row = resolve_user(&state, &auth, &user).await?;
    let object = Object::user(row.id);
    let admin = auth.can(Action::Update, &object);
    if !admin {
        auth.authorize(Action::UpdatePersonal, &object)?;
    }
    Validator::default()
        .push(
            "password",
            validate::password_for(&req.password, &row.username, &row.email),
        )
        .finish()?;
    // Admins reset others' passwords; everyone proves the old one for their own.
    if !admin || row.id == auth.user.id {
        let ok = crate::auth::verify_password(Some(row.hashed_password.clone()), req.old_password)
            .await?;
        if !ok {
            return Err(ApiError::validation(vec![codersdk::ValidationError {
                field: "old_password".into(),
                detail: "Old password is incorrect.".into(),
            }]));
        }
    }
    let hashed = crate::auth::hash_password(req.password).await?;
    let log = user_entry(&auth, &row, AuditAction::Write)
        .diff(
            Some(&row),
            Some(&UserRow {
                hashed_password: hashed.clone(),
                ..row.clone()
            }),
        )
        .build();
    state
        .store
        .update_user_password(row.id, &hashed, &auth.key.id, Some(&log))
        .await?;
    Ok(StatusCode::NO_CONTENT)
}
