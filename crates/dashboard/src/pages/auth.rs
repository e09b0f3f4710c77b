//! Signing in and out, and creating the first user: `/login`, POST `/logout`, `/setup`.
//!
//! The forms have no session yet, so their CSRF token is a random value also set in a
//! `SameSite=Strict` cookie (double submit); a cross-site page can neither read the cookie nor
//! set it, so it cannot forge the pair.

use std::net::SocketAddr;

use askama::Template;
use askama_web::WebTemplate;
use axum::extract::{ConnectInfo, Form, Query, State};
use axum::http::Extensions;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use coderd_core::domain::accounts::{self, PasswordLogin};
use coderd_core::state::AppState;
use codersdk::users::CreateFirstUserRequest;
use serde::Deserialize;

use super::{CsrfForm, FieldErrors};
use crate::error::{PageError, PageResult};
use crate::security::{self, PRE_SESSION_COOKIE};
use crate::session::{self, Viewer};
use crate::view::Chrome;

#[derive(Template, WebTemplate)]
#[template(path = "login.html")]
struct LoginPage {
    chrome: Chrome,
    csrf: String,
    redirect: String,
    email: String,
    error: String,
    password_enabled: bool,
    oidc_enabled: bool,
    oidc_text: String,
    oidc_url: String,
    github_enabled: bool,
    github_url: String,
}

#[derive(Debug, Default, Deserialize)]
pub struct LoginQuery {
    #[serde(default)]
    redirect: String,
}

/// Where to go after signing in: the asked-for page when it is on this site.
fn after_login(redirect: &str) -> String {
    session::safe_redirect(redirect)
        .unwrap_or("/workspaces")
        .to_owned()
}

/// The pre-session token: the one the browser already holds, or a new one (set by the page).
fn pre_session_token(headers: &HeaderMap) -> (String, bool) {
    match coderd_http::cookies::value(headers, PRE_SESSION_COOKIE).filter(|t| t.len() == 64) {
        Some(t) => (t.to_owned(), false),
        None => (security::random_token(), true),
    }
}

fn with_pre_session_cookie(mut response: Response, token: &str, fresh: bool) -> Response {
    if fresh {
        let cookie = format!("{PRE_SESSION_COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict");
        if let Ok(v) = HeaderValue::from_str(&cookie) {
            response.headers_mut().append(header::SET_COOKIE, v);
        }
    }
    response
}

fn check_pre_session(headers: &HeaderMap, submitted: &str) -> PageResult<()> {
    security::check_origin(&Method::POST, headers)?;
    let expected = coderd_http::cookies::value(headers, PRE_SESSION_COOKIE).unwrap_or("");
    if security::tokens_match(expected, submitted) {
        Ok(())
    } else {
        Err(PageError::Csrf)
    }
}

async fn login_page_with(
    state: &AppState,
    headers: &HeaderMap,
    redirect: &str,
    email: &str,
    error: String,
    status: StatusCode,
) -> PageResult<Response> {
    let (csrf, fresh) = pre_session_token(headers);
    let methods = coderd_sso::auth_methods(state);
    let target = after_login(redirect);
    let oidc_url = format!(
        "{}?{}",
        coderd_sso::CALLBACK_PATH,
        serde_urlencoded::to_string([("redirect", target.as_str())]).unwrap_or_default()
    );
    let github_url = format!(
        "{}?{}",
        coderd_sso::GITHUB_CALLBACK_PATH,
        serde_urlencoded::to_string([("redirect", target.as_str())]).unwrap_or_default()
    );
    let page = LoginPage {
        chrome: Chrome::anonymous(),
        csrf: csrf.clone(),
        redirect: target,
        email: email.to_owned(),
        error,
        password_enabled: methods.password.enabled,
        oidc_enabled: methods.oidc.enabled,
        oidc_text: if methods.oidc.sign_in_text.is_empty() {
            "OpenID Connect".into()
        } else {
            methods.oidc.sign_in_text
        },
        oidc_url,
        github_enabled: methods.github.enabled,
        github_url,
    };
    Ok(with_pre_session_cookie(
        (status, page).into_response(),
        &csrf,
        fresh,
    ))
}

pub async fn login_page(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<LoginQuery>,
) -> PageResult<Response> {
    if accounts::needs_first_user(&state).await? {
        return Ok(Redirect::to("/setup").into_response());
    }
    // Already signed in: straight on.
    if let Some(token) = session::token(&headers)
        && coderd_core::domain::session::authenticate(&state, token)
            .await
            .is_ok()
    {
        return Ok(Redirect::to(&after_login(&q.redirect)).into_response());
    }
    login_page_with(
        &state,
        &headers,
        &q.redirect,
        "",
        String::new(),
        StatusCode::OK,
    )
    .await
}

#[derive(Debug, Deserialize)]
pub struct LoginForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    email: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    redirect: String,
}

pub async fn login(
    State(state): State<AppState>,
    extensions: Extensions,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> PageResult<Response> {
    check_pre_session(&headers, &form.csrf)?;
    let again = |message: String, status| {
        login_page_with(
            &state,
            &headers,
            &form.redirect,
            &form.email,
            message,
            status,
        )
    };
    if form.email.trim().is_empty() || form.password.is_empty() {
        return again(
            "Enter your email and password.".into(),
            StatusCode::BAD_REQUEST,
        )
        .await;
    }
    let peer = extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    let outcome = match accounts::password_login(
        &state,
        peer,
        form.email.trim(),
        form.password.clone(),
    )
    .await
    {
        Ok(outcome) => outcome,
        Err(coderd_core::domain::Error::Unauthorized { message, .. }) => {
            return again(message, StatusCode::UNAUTHORIZED).await;
        }
        Err(e) => return Err(e.into()),
    };
    match outcome {
        PasswordLogin::Session { token } => {
            let cookie =
                session::session_cookie(&state, &token, state.options.session_duration.as_secs());
            let mut response = Redirect::to(&after_login(&form.redirect)).into_response();
            if let Ok(v) = HeaderValue::from_str(&cookie) {
                response.headers_mut().append(header::SET_COOKIE, v);
            }
            Ok(response)
        }
        PasswordLogin::RateLimited { retry_after } => {
            let message = format!(
                "Too many login attempts. Try again in {} s.",
                retry_after.as_secs().max(1)
            );
            again(message, StatusCode::TOO_MANY_REQUESTS).await
        }
        PasswordLogin::PasswordAuthDisabled => {
            again(
                "Password authentication is disabled. Sign in through the identity provider."
                    .into(),
                StatusCode::FORBIDDEN,
            )
            .await
        }
    }
}

/// Ends the session: the key is revoked and the cookie cleared.
pub async fn logout(
    State(state): State<AppState>,
    viewer: Viewer,
    headers: HeaderMap,
    Form(form): Form<CsrfForm>,
) -> PageResult<Response> {
    viewer.check_form(&headers, &form.csrf)?;
    accounts::logout(&state, &viewer.session.user, &viewer.session.key.id).await?;
    let mut response = Redirect::to("/login").into_response();
    if let Ok(v) = HeaderValue::from_str(&session::session_cookie(&state, "", 0)) {
        response.headers_mut().append(header::SET_COOKIE, v);
    }
    Ok(response)
}

#[derive(Template, WebTemplate)]
#[template(path = "setup.html")]
struct SetupPage {
    chrome: Chrome,
    csrf: String,
    email: String,
    username: String,
    name: String,
    errors: FieldErrors,
    other_errors: Vec<String>,
}

async fn setup_page_with(
    headers: &HeaderMap,
    values: Option<&SetupForm>,
    errors: FieldErrors,
    status: StatusCode,
) -> Response {
    let (csrf, fresh) = pre_session_token(headers);
    let other_errors = errors.others(&["email", "username", "name", "password"]);
    let page = SetupPage {
        chrome: Chrome::anonymous(),
        csrf: csrf.clone(),
        email: values.map(|v| v.email.clone()).unwrap_or_default(),
        username: values.map(|v| v.username.clone()).unwrap_or_default(),
        name: values.map(|v| v.name.clone()).unwrap_or_default(),
        errors,
        other_errors,
    };
    with_pre_session_cookie((status, page).into_response(), &csrf, fresh)
}

/// Only while no user exists; afterwards it is the login page's business.
pub async fn setup_page(State(state): State<AppState>, headers: HeaderMap) -> PageResult<Response> {
    if !accounts::needs_first_user(&state).await? {
        return Ok(Redirect::to("/login").into_response());
    }
    Ok(setup_page_with(&headers, None, FieldErrors::default(), StatusCode::OK).await)
}

#[derive(Debug, Deserialize)]
pub struct SetupForm {
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
}

pub async fn setup(
    State(state): State<AppState>,
    extensions: Extensions,
    headers: HeaderMap,
    Form(form): Form<SetupForm>,
) -> PageResult<Response> {
    check_pre_session(&headers, &form.csrf)?;
    if !accounts::needs_first_user(&state).await? {
        return Err(PageError::Conflict(
            "The initial user has already been created.".into(),
        ));
    }
    let req = CreateFirstUserRequest {
        email: form.email.trim().to_owned(),
        username: form.username.trim().to_owned(),
        name: form.name.trim().to_owned(),
        password: form.password.clone(),
        trial: false,
    };
    // The API's field rules, so both doors accept the same first users.
    if let Err(refused) = coderd_http::requests::first_user(&req) {
        let errors = FieldErrors::from_validations(refused.body.validations);
        return Ok(setup_page_with(&headers, Some(&form), errors, StatusCode::BAD_REQUEST).await);
    }
    let email = req.email.clone();
    match accounts::create_first_user(&state, req).await {
        Ok(_) => {}
        Err(coderd_core::domain::Error::Validation(v)) => {
            let errors = FieldErrors::from_validations(v);
            return Ok(
                setup_page_with(&headers, Some(&form), errors, StatusCode::BAD_REQUEST).await,
            );
        }
        Err(e) => return Err(e.into()),
    }
    // Signed in at once, as Coder's setup page does.
    let peer = extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    match accounts::password_login(&state, peer, &email, form.password).await? {
        PasswordLogin::Session { token } => {
            let cookie =
                session::session_cookie(&state, &token, state.options.session_duration.as_secs());
            let mut response = Redirect::to("/workspaces").into_response();
            if let Ok(v) = HeaderValue::from_str(&cookie) {
                response.headers_mut().append(header::SET_COOKIE, v);
            }
            Ok(response)
        }
        _ => Ok(Redirect::to("/login").into_response()),
    }
}
