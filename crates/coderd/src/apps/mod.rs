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
pub(crate) mod handoff;
pub mod host;
mod pages;
mod path;
pub(crate) mod port_share;
mod proxy;
mod tls;
mod token;

use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;
use oauth_client::KeyRing;

pub use access::{Sharing, Target};
pub use handoff::AUTH_REDIRECT_PATH;
pub use host::{AppHost, AppName, Wildcard};
pub use pages::AppError;
pub use proxy::Pool;

use crate::domain::{self, session::Session};
use crate::state::AppState;

/// The deployment's app settings.
#[derive(Clone)]
pub struct Settings {
    /// `--disable-path-apps`: apps only on subdomains.
    pub disable_path_apps: bool,
    /// `--dangerous-allow-path-app-sharing`: path apps keep their sharing level (otherwise
    /// owner-only: they share the dashboard's origin).
    pub allow_path_app_sharing: bool,
    /// `--dangerous-allow-path-app-site-owner-access`: site owners may open others' path apps.
    pub allow_path_app_site_owner_access: bool,
    /// `--wildcard-access-url`: where subdomain apps live; without it they are unavailable.
    pub wildcard: Option<Wildcard>,
    /// Seal app tokens and the keys handed to app hosts. [`AppState::start`] replaces the
    /// default (a key of this process's own) with the deployment's key from the database, so
    /// every replica opens what another sealed, and a restart keeps browsers signed in.
    pub keys: Arc<KeyRing>,
    /// How long an app may take to send its response's head (its body may stream for as long
    /// as it likes): a hung app must not pin a request forever.
    pub response_timeout: std::time::Duration,
}

/// Where the deployment's app key is kept (`site_configs`).
const KEY_NAME: &str = "app_signing_key";

/// The deployment's app key, created by the first replica that asks.
pub async fn deployment_keys(store: &crate::store::Store) -> Result<KeyRing, crate::store::Error> {
    let secret = store.site_secret(KEY_NAME, KeyRing::generate_key).await?;
    Ok(KeyRing::from_base64(&[secret]).unwrap_or_else(|e| {
        // Only a hand-edited database gets here; apps still open through this replica.
        tracing::error!(error = %e, "the stored app key is damaged; using a temporary one");
        KeyRing::ephemeral()
    }))
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            disable_path_apps: false,
            allow_path_app_sharing: false,
            allow_path_app_site_owner_access: false,
            wildcard: None,
            keys: Arc::new(KeyRing::ephemeral()),
            response_timeout: std::time::Duration::from_secs(60),
        }
    }
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("disable_path_apps", &self.disable_path_apps)
            .field("allow_path_app_sharing", &self.allow_path_app_sharing)
            .field(
                "allow_path_app_site_owner_access",
                &self.allow_path_app_site_owner_access,
            )
            .field("wildcard", &self.wildcard.as_ref().map(ToString::to_string))
            .finish_non_exhaustive()
    }
}

/// The subdomain of an app, as the API shows it (`None` without a wildcard access URL).
pub fn subdomain_name(
    settings: &Settings,
    slug: &str,
    agent: &str,
    workspace: &str,
    user: &str,
) -> Option<String> {
    settings.wildcard.as_ref()?;
    let host = AppHost {
        app: AppName::Slug(slug.to_ascii_lowercase()),
        agent: agent.to_ascii_lowercase(),
        workspace: workspace.to_ascii_lowercase(),
        user: user.to_ascii_lowercase(),
    };
    let label = host.label();
    // Names hosts cannot carry (a username with `_`) have no subdomain.
    (AppHost::parse(&label).as_ref() == Some(&host)).then_some(label)
}

/// The front door: app hosts and app paths are served here; everything else goes on to the
/// dashboard and the API.
pub async fn front_door(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let settings = &state.options.apps;
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok());
    if let (Some(wildcard), Some(host)) = (&settings.wildcard, host)
        && let Some(app) = wildcard.label(host).and_then(AppHost::parse)
    {
        return handoff::serve_subdomain(&state, app, request).await;
    }
    if request.uri().path() == AUTH_REDIRECT_PATH {
        return handoff::auth_redirect(&state, request).await;
    }
    let Some(app) = path::parse(request.uri().path()) else {
        return next.run(request).await;
    };
    let app = OwnedPathApp::from(app);
    serve_path(&state, app, request).await
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

async fn serve_path(state: &AppState, app: OwnedPathApp, request: Request) -> Response {
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
        .and_then(crate::auth::split_token)
        .map_or("", |(id, _)| id);
    for cookie in crate::cookies::values(headers, token::TOKEN_COOKIE) {
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
        .filter(|t| crate::auth::split_token(t.trim()).is_some())
    {
        return Some(v.trim().to_string());
    }
    let name = if dashboard {
        codersdk::client::SESSION_TOKEN_COOKIE
    } else {
        token::SESSION_COOKIE
    };
    crate::cookies::value(headers, name).map(str::to_owned)
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

    #[test]
    fn subdomain_names_exist_only_with_a_wildcard_and_host_safe_names() {
        let mut s = Settings::default();
        assert_eq!(subdomain_name(&s, "code", "main", "dev", "alice"), None);
        s.wildcard =
            Some(Wildcard::parse("*.apps.example.com", "http").expect("test input is valid"));
        assert_eq!(
            subdomain_name(&s, "code", "main", "dev", "Alice").as_deref(),
            Some("code--main--dev--alice")
        );
        assert_eq!(subdomain_name(&s, "code", "main", "dev", "a_b"), None);
    }
}
