//! Workspace apps: coderd's reverse proxy into workspaces. A front door of its own, in front of
//! the JSON API's router (app URLs are not API routes: `/@user/workspace/apps/…` on the
//! dashboard's origin, and whole hosts under the wildcard access URL), using the core, the
//! domain layer (sessions, RBAC) and the relay, never the API's handlers.
//!
//! - [`path`] and [`host`] parse the two URL shapes; [`access`] resolves an app and applies
//!   its sharing level; [`token`] caches that decision in a sealed cookie; [`proxy`] forwards
//!   over relay streams; [`handoff`] logs app hosts in through the dashboard; [`pages`] says
//!   why not.

mod access;
mod cors;
pub mod handoff;
mod pages;
mod path;
pub mod port_share;
mod proxy;
mod tls;
mod token;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;

pub use access::{Sharing, Target};
use coderd_core::app_urls::{AppHost, AppName, host};
pub use handoff::AUTH_REDIRECT_PATH;
pub use pages::AppError;
pub use proxy::Pool;

use coderd_core::domain::{self, session::Session};
use coderd_core::state::AppState;

/// The app proxy's state: the core, and the idle keep-alive connections to apps that only the
/// proxy uses.
#[derive(Clone)]
pub struct AppProxy {
    core: AppState,
    pool: Pool,
}

impl AppProxy {
    /// The proxy of a started core; its pool closes with the core's shutdown.
    pub fn new(core: AppState) -> Self {
        let pool = Pool::start(core.shutdown.child_token());
        Self { core, pool }
    }
}

/// The front door: app hosts and app paths are served here; everything else goes on to the
/// dashboard and the API.
pub async fn front_door(State(proxy): State<AppProxy>, request: Request, next: Next) -> Response {
    let (state, pool) = (&proxy.core, &proxy.pool);
    let settings = &state.options.apps;
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok());
    if let (Some(wildcard), Some(host)) = (&settings.wildcard, host)
        && let Some(app) = wildcard.label(host).and_then(AppHost::parse)
    {
        return handoff::serve_subdomain(state, pool, app, request).await;
    }
    if request.uri().path() == AUTH_REDIRECT_PATH {
        return handoff::auth_redirect(state, request).await;
    }
    let Some(app) = path::parse(request.uri().path()) else {
        return next.run(request).await;
    };
    let app = OwnedPathApp::from(app);
    serve_path(state, pool, app, request).await
}

#[derive(Debug)]
struct OwnedPathApp {
    user: String,
    workspace: String,
    agent: Option<String>,
    app: AppName,
    prefix: String,
    rest: Option<String>,
}

impl From<path::PathApp<'_>> for OwnedPathApp {
    fn from(p: path::PathApp<'_>) -> Self {
        let workspace = match p.agent {
            Some(a) => format!("{}.{a}", p.workspace),
            None => p.workspace.to_string(),
        };
        Self {
            prefix: format!("/@{}/{workspace}/apps/{}", p.user, p.app),
            user: p.user.to_string(),
            workspace: p.workspace.to_string(),
            agent: p.agent.map(str::to_owned),
            app: p.app_name(),
            rest: p.rest.map(str::to_owned),
        }
    }
}

async fn serve_path(
    state: &AppState,
    pool: &Pool,
    app: OwnedPathApp,
    request: Request,
) -> Response {
    let headers = request.headers().clone();
    if state.options.apps.disable_path_apps {
        return AppError::unavailable(
            "Path-based applications are disabled on this deployment.",
            "Open the application on its subdomain (--disable-path-apps is set).",
        )
        .respond(&headers);
    }
    let query = request.uri().query().map(str::to_owned);
    let Some(rest) = app.rest.clone() else {
        // Relative links inside the app only resolve under a trailing slash.
        let location = match &query {
            Some(q) => format!("{}/?{q}", app.prefix),
            None => format!("{}/", app.prefix),
        };
        return pages::redirect_to(&location);
    };
    let reference = access::AppRef {
        user: app.user.clone(),
        workspace: app.workspace.clone(),
        agent: app.agent.clone(),
        app: app.app.clone(),
        path_based: true,
    };
    let id = format!(
        "path:{}/{}/{}/{}",
        app.user.to_ascii_lowercase(),
        app.workspace.to_ascii_lowercase(),
        app.agent.as_deref().unwrap_or("").to_ascii_lowercase(),
        app.app
    );
    let token = session_token(&headers, true);
    let start_link = || {
        format!(
            "{}/@{}/{}",
            state.options.access_url.as_str().trim_end_matches('/'),
            app.user,
            app.workspace
        )
    };
    let cookie_path = format!("{}/", app.prefix);
    let decision = authorise(
        state,
        &headers,
        &id,
        token.as_deref(),
        &reference,
        start_link,
    )
    .await;
    let (target, minted) = match decision {
        Ok(found) => found,
        Err(AppError::LoginRequired { .. }) => {
            let mut back = format!("{}{rest}", app.prefix);
            if let Some(q) = &query {
                back = format!("{back}?{q}");
            }
            let redirect = format!(
                "/login?redirect={}",
                url::form_urlencoded::byte_serialize(back.as_bytes()).collect::<String>()
            );
            return AppError::LoginRequired { redirect }.respond(&headers);
        }
        Err(e) => return e.respond(&headers),
    };
    let upstream_path = join_path(&target.base_path, &rest, query.as_deref());
    let mut response = match proxy::forward(
        state,
        pool,
        &target,
        &upstream_path,
        forwarded(state, &request),
        request,
    )
    .await
    {
        Ok(r) => r,
        Err(e) => return e.respond(&headers),
    };
    if let Some(minted) = minted {
        set_cookie(
            state,
            &mut response,
            token::TOKEN_COOKIE,
            &minted,
            &cookie_path,
            token::LIFETIME.as_secs(),
        );
    }
    response
}

/// The target of an app for this caller: from a valid signed token when the browser has one
/// (no database work), else resolved and authorised, with a new token to set.
async fn authorise(
    state: &AppState,
    headers: &HeaderMap,
    id: &str,
    session_token: Option<&str>,
    reference: &access::AppRef,
    start_link: impl FnOnce() -> String,
) -> Result<(Target, Option<String>), AppError> {
    let keys = &state.options.apps.keys;
    let key_id = session_token
        .and_then(coderd_authz::auth::split_token)
        .map_or("", |(id, _)| id);
    for cookie in coderd_http::cookies::values(headers, token::TOKEN_COOKIE) {
        if let Some(target) = token::check(keys, cookie, id, key_id) {
            return Ok((target, None));
        }
    }
    let session = match session_token {
        Some(t) => authenticate(state, t).await?,
        None => None,
    };
    let target = access::resolve(state, session.as_ref(), reference, start_link).await?;
    let minted = token::mint(keys, id, key_id, &target);
    Ok((target, Some(minted)))
}

/// The caller's session, `None` when its token is not valid (it is then anonymous: a public
/// app still opens).
async fn authenticate(state: &AppState, token: &str) -> Result<Option<Session>, AppError> {
    match domain::session::authenticate(state, token).await {
        Ok(s) => Ok(Some(s)),
        Err(domain::Error::Internal(e)) => {
            tracing::error!(error = %e, "authenticating an app request");
            Err(AppError::Internal)
        }
        Err(_) => Ok(None),
    }
}

/// The session token of an app request: the `Coder-Session-Token` header, a bearer token, or
/// the dashboard's session cookie (only on the dashboard's origin: `dashboard`).
fn session_token(headers: &HeaderMap, dashboard: bool) -> Option<String> {
    if let Some(v) = headers
        .get(codersdk::client::SESSION_TOKEN_HEADER)
        .and_then(|v| v.to_str().ok())
    {
        return Some(v.trim().to_string());
    }
    if let Some(v) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .filter(|t| coderd_authz::auth::split_token(t.trim()).is_some())
    {
        return Some(v.trim().to_string());
    }
    let name = if dashboard {
        codersdk::client::SESSION_TOKEN_COOKIE
    } else {
        token::SESSION_COOKIE
    };
    coderd_http::cookies::value(headers, name).map(str::to_owned)
}

fn set_cookie(
    state: &AppState,
    response: &mut Response,
    name: &str,
    value: &str,
    path: &str,
    max_age: u64,
) {
    let secure = if state.options.secure_cookies {
        "; Secure"
    } else {
        ""
    };
    let cookie =
        format!("{name}={value}; Path={path}; Max-Age={max_age}; HttpOnly; SameSite=Lax{secure}");
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        response.headers_mut().append(header::SET_COOKIE, v);
    }
}

/// The app's base path joined with the request's path (from its `/`) and cleaned query.
fn join_path(base: &str, rest: &str, query: Option<&str>) -> String {
    let mut path = format!("{}{rest}", base.trim_end_matches('/'));
    if path.is_empty() {
        path.push('/');
    }
    if let Some(q) = proxy::clean_query(query) {
        path = format!("{path}?{q}");
    }
    path
}

fn forwarded(state: &AppState, request: &Request) -> proxy::Forwarded {
    proxy::Forwarded {
        client: request
            .extensions()
            .get::<ConnectInfo<std::net::SocketAddr>>()
            .map(|c| c.0.ip()),
        host: request.headers().get(header::HOST).cloned(),
        proto: if state.options.access_url.scheme() == "https" {
            "https"
        } else {
            "http"
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_join_under_the_apps_base() {
        assert_eq!(join_path("/", "/a?b", None), "/a?b");
        assert_eq!(
            join_path("/base/", "/x", Some("q=1&coder_session_token=t")),
            "/base/x?q=1"
        );
        assert_eq!(join_path("", "/", None), "/");
    }
}
