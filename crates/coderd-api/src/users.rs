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
use coderd_authz::{Action, Object, Resource, SITE_ROLES};
use coderd_core::audit::{Entry, actor};
use coderd_core::domain::accounts::{self, PasswordLogin};
use coderd_core::domain::users;
use coderd_core::validate;
use coderd_http::error::{ApiError, ApiResult, Validator};
use coderd_http::extract::{Auth, Json, Pagination, Path, Query, resolve_user};
use coderd_store::{UserDeletion, UserQuery, UserRow};

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
    coderd_http::requests::first_user(&req)?;
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
    coderd_http::requests::login(&req)?;
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
                site_permissions: convert::permissions(&r.site),
                organization_permissions: convert::permissions(&r.org),
                user_permissions: convert::permissions(&r.user),
                organization_member_permissions: Vec::new(),
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
    let needs_password = req.login_type.unwrap_or(LoginType::Password) == LoginType::Password;
    coderd_http::requests::create_user(&req, needs_password)?;
    let row = users::create(&state, &auth.subject, req).await?;
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
    match users::delete(&state, &auth.subject, &row).await? {
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
    let row = users::set_status(state, &auth.subject, &row, status).await?;
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
    let row = users::set_roles(&state, &auth.subject, &row, req.roles).await?;
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
        let ok = coderd_authz::auth::verify_password(
            Some(row.hashed_password.clone()),
            req.old_password,
        )
        .await?;
        if !ok {
            return Err(ApiError::validation(vec![codersdk::ValidationError {
                field: "old_password".into(),
                detail: "Old password is incorrect.".into(),
            }]));
        }
    }
    let hashed = coderd_authz::auth::hash_password(req.password).await?;
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
