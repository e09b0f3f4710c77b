//! The sign-in front door, the same for each provider: its callback (without a code it starts a
//! sign-in: the browser goes to the provider with a sealed state cookie; with one it finishes:
//! state checked, code exchanged, identity verified, session cookie set, back to where the
//! person was going) — `GET /api/v2/users/oidc/callback` and
//! `GET /api/v2/users/oauth2/github/callback` (started from `/users/oauth2/github` too) — and
//! `GET /api/v2/users/authmethods`.

use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use codersdk::client::SESSION_TOKEN_COOKIE;
use codersdk::users::{AuthMethod, AuthMethods, GithubAuthMethod, OidcAuthMethod};
use oauth_client::PendingAuth;
use url::Url;

use super::{Error, GITHUB_CALLBACK_PATH, Login, github_login, oidc_login};
use coderd_core::state::AppState;
use coderd_http::error::{ApiError, ApiResult};

pub use coderd_core::sso_providers::CALLBACK_PATH;

/// The sealed sign-in in flight; only the callback ever receives it.
use coderd_http::oauth_flow::{
    CallbackParams, STATE_COOKIE, cookie, redirect_to, safe_redirect, state_cookie, with_cookie,
};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/users/oidc/callback", get(oidc_callback))
        .route("/users/oauth2/github", get(github_start))
        .route("/users/oauth2/github/callback", get(github_callback))
        .route("/users/authmethods", get(auth_methods))
}

#[utoipa::path(get, path = "/api/v2/users/authmethods", tag = "Users",
    responses((status = 200, body = AuthMethods)))]
pub(crate) async fn auth_methods(State(state): State<AppState>) -> axum::Json<AuthMethods> {
    axum::Json(super::auth_methods(&state))
}

/// How people may sign in to this deployment (the login pages of the API and the dashboard).
pub fn methods(state: &AppState) -> AuthMethods {
    let oidc = state.options.oidc.as_ref();
    AuthMethods {
        password: AuthMethod {
            enabled: !state.options.disable_password_auth,
        },
        oidc: OidcAuthMethod {
            enabled: oidc.is_some() && state.sso.oidc().is_some(),
            sign_in_text: oidc.map(|o| o.sign_in_text.clone()).unwrap_or_default(),
            icon_url: oidc.map(|o| o.icon_url.clone()).unwrap_or_default(),
        },
        github: GithubAuthMethod {
            enabled: state.options.github.is_some() && state.sso.github().is_some(),
            default_provider_configured: false,
        },
        ..AuthMethods::default()
    }
}

/// What a callback request asks for.
enum Step {
    Start { redirect: String },
    Finish { code: String, state: String },
}

/// Reads a callback's query; a provider's refusal ends the attempt (its cookie cleared).
fn step(state: &AppState, query: Option<&str>, path: &str) -> Result<Step, Box<Response>> {
    let params: CallbackParams = serde_urlencoded::from_str(query.unwrap_or("")).map_err(|e| {
        Box::new(
            ApiError::bad_request("Invalid query parameters.")
                .with_detail(e.to_string())
                .into_response(),
        )
    })?;
    if let Some(error) = params.error {
        // The person declined, or the provider refused us: the attempt is over either way.
        let err = ApiError::bad_request("The identity provider refused the sign-in.").with_detail(
            format!("{error}: {}", params.error_description.unwrap_or_default()),
        );
        return Err(Box::new(with_cookie(
            err.into_response(),
            state_cookie("", 0, path, state.options.secure_cookies),
        )));
    }
    Ok(match params.code {
        None => Step::Start {
            redirect: safe_redirect(params.redirect.as_deref()),
        },
        Some(code) => Step::Finish {
            code,
            state: params.state.unwrap_or_default(),
        },
    })
}

/// Sends the browser to the provider with the sealed attempt as a cookie for `path`.
fn started(state: &AppState, url: &Url, pending: &PendingAuth, path: &str) -> Response {
    let cookie = state_cookie(
        &pending.seal(state.sso.state_keys()),
        oauth_client::pending::LIFETIME_MINUTES * 60,
        path,
        state.options.secure_cookies,
    );
    with_cookie(redirect_to(url.as_str()), cookie)
}

fn open_pending(
    state: &AppState,
    headers: &HeaderMap,
    provider: &str,
    returned_state: &str,
) -> Result<PendingAuth, Error> {
    Ok(PendingAuth::open(
        state.sso.state_keys(),
        coderd_http::cookies::value(headers, STATE_COOKIE),
        provider,
        returned_state,
    )?)
}

/// The end of a sign-in: a session cookie and back where the person was going, or the refusal;
/// the state cookie is cleared either way.
fn finished(state: &AppState, path: &str, result: Result<(String, Login), Error>) -> Response {
    let secure = state.options.secure_cookies;
    let clear = state_cookie("", 0, path, secure);
    let (redirect, login) = match result {
        Ok(done) => done,
        Err(e) => {
            tracing::info!(error = %e, path, "sign-in refused");
            return with_cookie(ApiError::from(e).into_response(), clear);
        }
    };
    let max_age = state.options.session_duration.as_secs();
    let session = cookie(SESSION_TOKEN_COOKIE, &login.token, "/", max_age, secure);
    with_cookie(with_cookie(redirect_to(&redirect), clear), session)
}

#[utoipa::path(get, path = "/api/v2/users/oidc/callback", tag = "Users",
    params(("code" = Option<String>, Query), ("state" = Option<String>, Query),
        ("redirect" = Option<String>, Query, description = "Path to return to after signing in.")),
    responses((status = 307, description = "To the identity provider, or back into the deployment with a session cookie."),
        (status = 400, body = codersdk::Response), (status = 401, body = codersdk::Response),
        (status = 403, body = codersdk::Response), (status = 404, body = codersdk::Response)))]
pub(crate) async fn oidc_callback(
    State(state): State<AppState>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> ApiResult<Response> {
    let (Some(client), Some(settings)) = (state.sso.oidc(), state.options.oidc.as_ref()) else {
        return Err(ApiError::not_found().with_detail("OIDC login is not configured."));
    };
    let (code, returned_state) = match step(&state, query.as_deref(), CALLBACK_PATH) {
        Err(response) => return Ok(*response),
        Ok(Step::Start { redirect }) => {
            let (url, pending) = client.begin(&redirect).await.map_err(Error::from)?;
            return Ok(started(&state, &url, &pending, CALLBACK_PATH));
        }
        Ok(Step::Finish { code, state }) => (code, state),
    };
    let result = async {
        let pending = open_pending(&state, &headers, "oidc", &returned_state)?;
        let identity = client.finish(&pending, &code).await?;
        let login = oidc_login(&state, settings, identity).await?;
        Ok((pending.redirect, login))
    }
    .await;
    Ok(finished(&state, CALLBACK_PATH, result))
}

/// Starts a GitHub sign-in (the callback without a code does the same; this is the address a
/// login button links to).
#[utoipa::path(get, path = "/api/v2/users/oauth2/github", tag = "Users",
    params(("redirect" = Option<String>, Query, description = "Path to return to after signing in.")),
    responses((status = 307, description = "To GitHub, with the sign-in's state cookie."),
        (status = 400, body = codersdk::Response), (status = 404, body = codersdk::Response)))]
pub(crate) async fn github_start(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> ApiResult<Response> {
    let Some(client) = state.sso.github() else {
        return Err(ApiError::not_found().with_detail("GitHub login is not configured."));
    };
    let params: CallbackParams = serde_urlencoded::from_str(query.as_deref().unwrap_or(""))
        .map_err(|e| {
            ApiError::bad_request("Invalid query parameters.").with_detail(e.to_string())
        })?;
    let (url, pending) = client.begin(&safe_redirect(params.redirect.as_deref()));
    Ok(started(&state, &url, &pending, GITHUB_CALLBACK_PATH))
}

#[utoipa::path(get, path = "/api/v2/users/oauth2/github/callback", tag = "Users",
    params(("code" = Option<String>, Query), ("state" = Option<String>, Query),
        ("redirect" = Option<String>, Query, description = "Path to return to after signing in.")),
    responses((status = 307, description = "To GitHub, or back into the deployment with a session cookie."),
        (status = 400, body = codersdk::Response), (status = 401, body = codersdk::Response),
        (status = 403, body = codersdk::Response), (status = 404, body = codersdk::Response),
        (status = 428, body = codersdk::Response, description = "The GitHub account has no verified primary email.")))]
pub(crate) async fn github_callback(
    State(state): State<AppState>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> ApiResult<Response> {
    let (Some(client), Some(settings)) = (state.sso.github(), state.options.github.as_ref()) else {
        return Err(ApiError::not_found().with_detail("GitHub login is not configured."));
    };
    let (code, returned_state) = match step(&state, query.as_deref(), GITHUB_CALLBACK_PATH) {
        Err(response) => return Ok(*response),
        Ok(Step::Start { redirect }) => {
            let (url, pending) = client.begin(&redirect);
            return Ok(started(&state, &url, &pending, GITHUB_CALLBACK_PATH));
        }
        Ok(Step::Finish { code, state }) => (code, state),
    };
    let result = async {
        let pending = open_pending(&state, &headers, "github", &returned_state)?;
        let tokens = client.finish(&pending, &code).await?;
        let login = github_login(&state, settings, client, tokens).await?;
        Ok((pending.redirect, login))
    }
    .await;
    Ok(finished(&state, GITHUB_CALLBACK_PATH, result))
}
