//! The sign-in front door: `GET /api/v2/users/oidc/callback` (without a code it starts a
//! sign-in: the browser goes to the provider with a sealed state cookie; with one it finishes:
//! state checked, code exchanged, ID token verified, session cookie set, back to where the
//! person was going) and `GET /api/v2/users/authmethods`.

use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use codersdk::client::SESSION_TOKEN_COOKIE;
use codersdk::users::{AuthMethod, AuthMethods, OidcAuthMethod};
use oauth_client::PendingAuth;

use super::{Error, oidc_login};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// Where the provider sends the browser back (registered with the provider).
pub const CALLBACK_PATH: &str = "/api/v2/users/oidc/callback";

/// The sealed sign-in in flight; only the callback ever receives it.
const STATE_COOKIE: &str = "oauth_state";
const PROVIDER: &str = "oidc";

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/users/oidc/callback", get(oidc_callback))
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
        ..AuthMethods::default()
    }
}

#[derive(Debug, Default, serde::Deserialize)]
struct CallbackParams {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
    /// Where to go after signing in (a path on this deployment).
    redirect: Option<String>,
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
    let params: CallbackParams = serde_urlencoded::from_str(query.as_deref().unwrap_or(""))
        .map_err(|e| {
            ApiError::bad_request("Invalid query parameters.").with_detail(e.to_string())
        })?;
    let (Some(client), Some(settings)) = (state.sso.oidc(), state.options.oidc.as_ref()) else {
        return Err(ApiError::not_found().with_detail("OIDC login is not configured."));
    };
    let secure = state.options.secure_cookies;
    if let Some(error) = params.error {
        // The person declined, or the provider refused us: the attempt is over either way.
        let err = ApiError::bad_request("The identity provider refused the sign-in.").with_detail(
            format!("{error}: {}", params.error_description.unwrap_or_default()),
        );
        return Ok(with_cookie(
            err.into_response(),
            state_cookie("", 0, secure),
        ));
    }
    let Some(code) = params.code else {
        let redirect = safe_redirect(params.redirect.as_deref());
        let (url, pending) = client.begin(&redirect).await.map_err(Error::from)?;
        let cookie = state_cookie(
            &pending.seal(&state.sso.state_keys),
            oauth_client::pending::LIFETIME_MINUTES * 60,
            secure,
        );
        return Ok(with_cookie(redirect_to(url.as_str()), cookie));
    };
    let clear = state_cookie("", 0, secure);
    let finished = async {
        let pending = PendingAuth::open(
            &state.sso.state_keys,
            crate::cookies::value(&headers, STATE_COOKIE),
            PROVIDER,
            params.state.as_deref().unwrap_or_default(),
        )?;
        let identity = client.finish(&pending, &code).await?;
        let login = oidc_login(&state, settings, identity).await?;
        Ok::<_, Error>((pending.redirect, login))
    }
    .await;
    let (redirect, login) = match finished {
        Ok(done) => done,
        Err(e) => {
            tracing::info!(error = %e, "OIDC sign-in refused");
            return Ok(with_cookie(ApiError::from(e).into_response(), clear));
        }
    };
    let max_age = state.options.session_duration.as_secs();
    let session = cookie(SESSION_TOKEN_COOKIE, &login.token, "/", max_age, secure);
    let response = with_cookie(with_cookie(redirect_to(&redirect), clear), session);
    Ok(response)
}

/// Only paths on this deployment: anything else (`//evil`, `https://…`) would make the
/// callback an open redirect.
fn safe_redirect(redirect: Option<&str>) -> String {
    match redirect {
        Some(r)
            if r.starts_with('/')
                && !r.starts_with("//")
                && !r.starts_with("/\\")
                && !r.chars().any(char::is_control) =>
        {
            r.to_string()
        }
        _ => "/".into(),
    }
}

fn redirect_to(location: &str) -> Response {
    match HeaderValue::from_str(location) {
        Ok(value) => (StatusCode::TEMPORARY_REDIRECT, [(header::LOCATION, value)]).into_response(),
        Err(e) => ApiError::internal(format!("redirect location: {e}")).into_response(),
    }
}

fn with_cookie(mut response: Response, cookie: HeaderValue) -> Response {
    response.headers_mut().append(header::SET_COOKIE, cookie);
    response
}

fn state_cookie(value: &str, max_age: i64, secure: bool) -> HeaderValue {
    let max_age = u64::try_from(max_age).unwrap_or_default();
    cookie(STATE_COOKIE, value, CALLBACK_PATH, max_age, secure)
}

/// `SameSite=Lax`: the provider's redirect back is a top-level navigation from another site,
/// which Lax lets through and `Strict` would not.
fn cookie(name: &str, value: &str, path: &str, max_age: u64, secure: bool) -> HeaderValue {
    let secure = if secure { "; Secure" } else { "" };
    HeaderValue::from_str(&format!(
        "{name}={value}; Path={path}; Max-Age={max_age}; HttpOnly; SameSite=Lax{secure}"
    ))
    .unwrap_or_else(|_| HeaderValue::from_static(""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_local_paths_are_redirect_targets() {
        assert_eq!(safe_redirect(Some("/workspaces?x=1")), "/workspaces?x=1");
        for bad in [
            None,
            Some(""),
            Some("//evil.example"),
            Some("/\\evil.example"),
            Some("https://evil.example"),
            Some("evil"),
            Some("/a\r\nSet-Cookie: x=y"),
        ] {
            assert_eq!(safe_redirect(bad), "/", "{bad:?}");
        }
    }
}
