//! `/deployment/users`: the users directory with search, and for those who manage users (owners,
//! user admins) forms to create a user, suspend or activate one, change site roles and delete
//! one. Everyone sees what the API's list shows them; every change goes through
//! `domain::users`, so a member posting a form is refused as the API would refuse them.

use askama::Template;
use askama_web::WebTemplate;
use axum::extract::{Form, Path, Query, RawForm, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use coderd_authz::{Action, Object, Resource, SITE_ROLES};
use coderd_core::domain::{resolve, users};
use coderd_core::state::AppState;
use coderd_store::{UserDeletion, UserQuery, UserRow};
use codersdk::users::{CreateUserRequest, LoginType, UserStatus};
use serde::Deserialize;

use super::{CsrfForm, FieldErrors};
use crate::error::{PageError, PageResult};
use crate::session::Viewer;
use crate::view::Chrome;

const USERS_PAGE: i64 = 50;

/// The fields of the create form, kept when it is refused.
#[derive(Debug, Default, Deserialize)]
pub struct CreateForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    email: String,
    #[serde(default)]
    username: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    login_type: String,
}

/// A site role as a user's checkbox.
pub struct RoleChoice {
    pub name: &'static str,
    pub display_name: &'static str,
    /// Whether the viewer may grant or remove it (else the box is shown disabled).
    pub assignable: bool,
    pub held: bool,
}

pub struct UserView {
    pub u: UserRow,
    pub roles: Vec<RoleChoice>,
}

#[derive(Template, WebTemplate)]
#[template(path = "users.html")]
pub struct UsersPage {
    chrome: Chrome,
    search: String,
    users: Vec<UserView>,
    count: i64,
    page: i64,
    more: bool,
    /// Whether the viewer may create users (and so sees the form).
    can_create: bool,
    /// Whether the viewer may change users (status, deletion).
    can_manage: bool,
    form: CreateForm,
    errors: FieldErrors,
    other_errors: Vec<String>,
    me: uuid::Uuid,
}

#[derive(Debug, Deserialize)]
pub struct UsersQuery {
    #[serde(default)]
    search: String,
    page: Option<i64>,
}

async fn page(
    state: &AppState,
    viewer: &Viewer,
    q: UsersQuery,
    form: CreateForm,
    errors: FieldErrors,
) -> PageResult<UsersPage> {
    let page = q.page.unwrap_or(1).max(1);
    let query = UserQuery {
        search: q.search.trim().to_owned(),
        limit: USERS_PAGE,
        offset: (page - 1).saturating_mul(USERS_PAGE),
        ..Default::default()
    };
    let subject = viewer.subject();
    let filter = subject.filter(Resource::User);
    let (users, count) = state.store.list_users(&query, &filter).await?;
    let other_errors = errors.others(&["email", "username", "name", "password"]);
    Ok(UsersPage {
        chrome: Chrome::of(viewer),
        search: q.search,
        more: page.saturating_mul(USERS_PAGE) < count,
        users: users
            .into_iter()
            .map(|u| UserView {
                roles: SITE_ROLES
                    .iter()
                    .map(|r| RoleChoice {
                        name: r.name,
                        display_name: r.display_name,
                        assignable: subject.can_assign_site_role(r.name),
                        held: u.rbac_roles.iter().any(|h| h == r.name),
                    })
                    .collect(),
                u,
            })
            .collect(),
        count,
        page,
        can_create: subject.can(Action::Create, &Object::site(Resource::User)),
        can_manage: subject.can(Action::Update, &Object::site(Resource::User)),
        form,
        errors,
        other_errors,
        me: subject.user_id,
    })
}

pub async fn list(
    State(state): State<AppState>,
    viewer: Viewer,
    Query(q): Query<UsersQuery>,
) -> PageResult<UsersPage> {
    page(
        &state,
        &viewer,
        q,
        CreateForm::default(),
        FieldErrors::default(),
    )
    .await
}

/// Coder's older URL.
pub async fn redirect() -> Redirect {
    Redirect::permanent("/deployment/users")
}

fn back() -> Response {
    Redirect::to("/deployment/users").into_response()
}

pub async fn create(
    State(state): State<AppState>,
    viewer: Viewer,
    headers: HeaderMap,
    Form(form): Form<CreateForm>,
) -> PageResult<Response> {
    viewer.check_form(&headers, &form.csrf)?;
    let login_type = match form.login_type.as_str() {
        "" | "password" => LoginType::Password,
        "none" => LoginType::None,
        "oidc" => LoginType::Oidc,
        "github" => LoginType::Github,
        other => {
            return Err(PageError::BadRequest(format!(
                "Unknown login type {other:?}."
            )));
        }
    };
    let req = CreateUserRequest {
        email: form.email.trim().to_owned(),
        username: form.username.trim().to_owned(),
        name: form.name.trim().to_owned(),
        password: form.password.clone(),
        login_type: Some(login_type),
        user_status: None,
        organization_ids: Vec::new(),
        organization_id: None,
        roles: Vec::new(),
    };
    if let Err(refused) =
        coderd_http::requests::create_user(&req, login_type == LoginType::Password)
    {
        let errors = FieldErrors::from_validations(refused.body.validations);
        return refuse(&state, &viewer, form, errors, StatusCode::BAD_REQUEST).await;
    }
    let (errors, status) = match users::create(&state, viewer.subject(), req).await {
        Ok(_) => return Ok(back()),
        Err(coderd_core::domain::Error::Validation(v)) => {
            (FieldErrors::from_validations(v), StatusCode::BAD_REQUEST)
        }
        Err(coderd_core::domain::Error::Conflict { message, .. }) => {
            let mut errors = FieldErrors::default();
            let field = if message.contains("email") {
                "email"
            } else {
                "username"
            };
            errors.push(field, message);
            (errors, StatusCode::CONFLICT)
        }
        Err(e) => return Err(e.into()),
    };
    refuse(&state, &viewer, form, errors, status).await
}

/// The list again with the refused form beside its errors (the password is not sent back).
async fn refuse(
    state: &AppState,
    viewer: &Viewer,
    form: CreateForm,
    errors: FieldErrors,
    status: StatusCode,
) -> PageResult<Response> {
    let q = UsersQuery {
        search: String::new(),
        page: None,
    };
    let form = CreateForm {
        password: String::new(),
        ..form
    };
    Ok((status, page(state, viewer, q, form, errors).await?).into_response())
}

/// The user named in the path, when the viewer may see them.
async fn target(state: &AppState, viewer: &Viewer, user: &str) -> PageResult<UserRow> {
    Ok(resolve::user(state, viewer.subject(), user).await?)
}

#[derive(Debug, Deserialize)]
pub struct StatusForm {
    #[serde(default)]
    csrf: String,
    /// `suspended` or `active`.
    #[serde(default)]
    status: String,
}

/// Suspends or activates a user; a suspended user can no longer sign in or use their tokens.
pub async fn status(
    State(state): State<AppState>,
    viewer: Viewer,
    headers: HeaderMap,
    Path(user): Path<String>,
    Form(form): Form<StatusForm>,
) -> PageResult<Response> {
    viewer.check_form(&headers, &form.csrf)?;
    let status = match form.status.as_str() {
        "suspended" => UserStatus::Suspended,
        "active" => UserStatus::Active,
        other => return Err(PageError::BadRequest(format!("Unknown status {other:?}."))),
    };
    let row = target(&state, &viewer, &user).await?;
    users::set_status(&state, viewer.subject(), &row, status).await?;
    Ok(back())
}

pub async fn delete(
    State(state): State<AppState>,
    viewer: Viewer,
    headers: HeaderMap,
    Path(user): Path<String>,
    Form(form): Form<CsrfForm>,
) -> PageResult<Response> {
    viewer.check_form(&headers, &form.csrf)?;
    let row = target(&state, &viewer, &user).await?;
    match users::delete(&state, viewer.subject(), &row).await? {
        UserDeletion::Deleted => Ok(back()),
        UserDeletion::OwnsWorkspaces => Err(PageError::Conflict(
            "You cannot delete a user that has workspaces. Delete their workspaces and try again!"
                .into(),
        )),
    }
}

/// Replaces the user's site roles with the boxes ticked (`role` repeated).
pub async fn roles(
    State(state): State<AppState>,
    viewer: Viewer,
    headers: HeaderMap,
    Path(user): Path<String>,
    RawForm(body): RawForm,
) -> PageResult<Response> {
    let values: Vec<(String, String)> = serde_urlencoded::from_bytes(&body)
        .map_err(|e| PageError::BadRequest(format!("Unreadable form: {e}")))?;
    let csrf = values
        .iter()
        .find(|(k, _)| k == "csrf")
        .map(|(_, v)| v.as_str())
        .unwrap_or("");
    viewer.check_form(&headers, csrf)?;
    let row = target(&state, &viewer, &user).await?;
    let wanted = values
        .into_iter()
        .filter(|(k, _)| k == "role")
        .map(|(_, v)| v)
        .collect();
    users::set_roles(&state, viewer.subject(), &row, wanted).await?;
    Ok(back())
}
