//! Subdomain apps and how their hosts get a session. An app host cannot read the dashboard's
//! cookie (it is another origin, on purpose), so a browser without a session there is sent to
//! the dashboard's [`AUTH_REDIRECT_PATH`], which — once the user is signed in — mints a key
//! scoped to opening apps, seals it (AES-256-GCM, bound to that one app host, valid for a
//! minute) and sends the browser back with it in a query parameter; the app host opens it,
//! keeps the key in a cookie of its own, and redirects to the clean URL. Only hosts under the
//! wildcard access URL are accepted as destinations, so this is no open redirect.

use axum::extract::Request;
use axum::http::HeaderMap;
use axum::response::Response;
use chrono::Utc;

use super::access::{self, AppRef, Cors};
use super::cors;
use super::host::AppHost;
use super::pages::{self, AppError};
use super::proxy::Pool;
use super::proxy::{self, HANDOFF_PARAM};
use super::{authenticate, authorise, forwarded, join_path, session_token, set_cookie, token};
use coderd_core::state::AppState;

/// The dashboard's end of the hand-off (Coder's path).
pub const AUTH_REDIRECT_PATH: &str = "/api/v2/applications/auth-redirect";

const PURPOSE: &str = "coder-app-handoff-v1";
/// How long a sealed key may travel: one redirect.
const HANDOFF_SECONDS: i64 = 60;

#[derive(serde::Serialize, serde::Deserialize)]
struct Handoff {
    token: String,
    /// The app host's label it was minted for.
    label: String,
    expires: i64,
}

fn query_param(query: Option<&str>, name: &str) -> Option<String> {
    url::form_urlencoded::parse(query?.as_bytes())
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

/// A request on an app host.
pub async fn serve_subdomain(
    state: &AppState,
    pool: &Pool,
    app: AppHost,
    request: Request,
) -> Response {
    let headers = request.headers().clone();
    let label = app.label();
    let path = request.uri().path().to_string();
    let query = request.uri().query().map(str::to_owned);
    let keys = &state.options.apps.keys;
    let Some(wildcard) = state.options.apps.wildcard.clone() else {
        return AppError::NotFound.respond(&headers);
    };

    // Back from the dashboard with a sealed key: keep it, and go to the clean URL.
    if let Some(sealed) = query_param(query.as_deref(), HANDOFF_PARAM) {
        let opened = keys
            .open(PURPOSE, &sealed)
            .ok()
            .and_then(|plain| serde_json::from_slice::<Handoff>(&plain).ok())
            .filter(|h| h.label == label && h.expires > Utc::now().timestamp());
        let Some(handoff) = opened else {
            return AppError::unavailable(
                "The sign-in link is invalid or has expired.",
                "Open the application again.",
            )
            .respond(&headers);
        };
        let mut response = pages::redirect_to(&join_path("", &path, query.as_deref()));
        let lifetime = state.options.session_duration.as_secs();
        set_cookie(
            state,
            &mut response,
            token::SESSION_COOKIE,
            &handoff.token,
            "/",
            lifetime,
        );
        return response;
    }

    // Preflights carry no credentials: under `simple` they are answered here, before any
    // authorisation (which would only send them to a login page).
    if cors::is_preflight(request.method(), &headers)
        && access::cors_of(state, &app.user, &app.workspace).await == Cors::Simple
    {
        return cors::preflight(cors::allowed_origin(&wildcard, &app, &headers), &headers);
    }

    let reference = AppRef {
        user: app.user.clone(),
        workspace: app.workspace.clone(),
        agent: Some(app.agent.clone()),
        app: app.app.clone(),
        path_based: false,
    };
    let id = format!("host:{label}");
    let session = session_token(&headers, false);
    let start_link = || {
        format!(
            "{}/@{}/{}",
            state.options.access_url.as_str().trim_end_matches('/'),
            app.user,
            app.workspace
        )
    };
    match authorise(
        state,
        &headers,
        &id,
        session.as_deref(),
        &reference,
        start_link,
    )
    .await
    {
        Ok((target, minted)) => {
            let upstream = join_path(&target.base_path, &path, query.as_deref());
            let fwd = forwarded(state, &request);
            match proxy::forward(state, pool, &target, &upstream, fwd, request).await {
                Ok(mut response) => {
                    if target.cors == Cors::Simple
                        && let Some(origin) = cors::allowed_origin(&wildcard, &app, &headers)
                    {
                        cors::allow(response.headers_mut(), origin.clone());
                    }
                    if let Some(minted) = minted {
                        let age = token::LIFETIME.as_secs();
                        set_cookie(state, &mut response, token::TOKEN_COOKIE, &minted, "/", age);
                    }
                    response
                }
                Err(e) => e.respond(&headers),
            }
        }
        Err(AppError::LoginRequired { .. }) => {
            let here = match &query {
                Some(q) => format!("{}{path}?{q}", wildcard.origin(&label)),
                None => format!("{}{path}", wildcard.origin(&label)),
            };
            let redirect = format!(
                "{}{AUTH_REDIRECT_PATH}?redirect_uri={}",
                state.options.access_url.as_str().trim_end_matches('/'),
                encode(&here)
            );
            AppError::LoginRequired { redirect }.respond(&headers)
        }
        Err(e) => e.respond(&headers),
    }
}

fn encode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// `GET /api/v2/applications/auth-redirect?redirect_uri=<app URL>` on the dashboard.
#[utoipa::path(get, path = "/api/v2/applications/auth-redirect", tag = "Applications",
    params(("redirect_uri" = String, Query,
            description = "the app URL to return to; its host must be an app host under the wildcard access URL")),
    responses((status = 307, description = "back to `redirect_uri` with `coder_application_connect_api_key` (a sealed, app-scoped key), or to /login first"),
              (status = 400, body = codersdk::Response, description = "the redirect URI is not an app URL of this deployment, or there is no wildcard access URL"),
              (status = 401, body = codersdk::Response, description = "not signed in (API clients)")))]
pub async fn auth_redirect(state: &AppState, request: Request) -> Response {
    let headers = request.headers().clone();
    let query = request.uri().query().map(str::to_owned);
    match auth_redirect_location(state, &headers, query.as_deref()).await {
        Ok(location) => pages::redirect_to(&location),
        Err(e) => e.respond(&headers),
    }
}

async fn auth_redirect_location(
    state: &AppState,
    headers: &HeaderMap,
    query: Option<&str>,
) -> Result<String, AppError> {
    let Some(wildcard) = &state.options.apps.wildcard else {
        return Err(AppError::unavailable(
            "Subdomain applications are not enabled on this deployment.",
            "The operator has not set a wildcard access URL (--wildcard-access-url).",
        ));
    };
    let refused = || {
        AppError::unavailable(
            "The redirect URI is not an application URL of this deployment.",
            format!("It must be an app host under {wildcard}."),
        )
    };
    let redirect = query_param(query, "redirect_uri").ok_or_else(refused)?;
    let mut target = url::Url::parse(&redirect).map_err(|_| refused())?;
    let host = match (target.host_str(), target.port()) {
        (Some(h), Some(p)) => format!("{h}:{p}"),
        (Some(h), None) => h.to_string(),
        _ => return Err(refused()),
    };
    let label = wildcard
        .label(&host)
        .and_then(AppHost::parse)
        .map(|a| a.label())
        .ok_or_else(refused)?;
    if target.scheme() != wildcard.scheme()
        || !target.username().is_empty()
        || target.password().is_some()
    {
        return Err(refused());
    }
    let session = match session_token(headers, true) {
        Some(t) => authenticate(state, &t).await?,
        None => None,
    };
    // An app host's key must not mint more of itself.
    let session = session.filter(|s| s.key.scope != coderd_core::domain::keys::APP_CONNECT_SCOPE);
    let Some(session) = session else {
        let back = format!("{AUTH_REDIRECT_PATH}?{}", query.unwrap_or(""));
        return Err(AppError::LoginRequired {
            redirect: format!("/login?redirect={}", encode(&back)),
        });
    };
    let token = coderd_core::domain::keys::issue_app_key(
        state,
        session.user.id,
        state.options.session_duration,
    )
    .await
    .map_err(|e| {
        tracing::error!(error = %e, "minting an app key");
        AppError::Internal
    })?;
    let handoff = Handoff {
        token,
        label,
        expires: Utc::now().timestamp() + HANDOFF_SECONDS,
    };
    let plain = serde_json::to_vec(&handoff).unwrap_or_default();
    let sealed = state.options.apps.keys.seal(PURPOSE, &plain);
    target.query_pairs_mut().append_pair(HANDOFF_PARAM, &sealed);
    Ok(target.to_string())
}
