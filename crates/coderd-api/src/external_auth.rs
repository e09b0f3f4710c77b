//! External auth's front door: linking a git provider in the browser (`/external-auth/{id}`
//! and its callback), the caller's links (`/api/v2/external-auth…`, the device flow), what a
//! template version needs (`/templateversions/{id}/external-auth`), the workspace's view of
//! its owner's credentials (`/workspaceagents/me/external-auth`, `…/gitsshkey`) and users'
//! git SSH keys (`/users/{user}/gitsshkey`). Decisions are `coderd_core::external_auth`'s.

use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use codersdk::externalauth::{
    AgentExternalAuthResponse, AgentGitSshKey, DeleteExternalAuthByIdResponse, ExternalAuth,
    ExternalAuthDevice, ExternalAuthDeviceExchange, GitSshKey, ListUserExternalAuthResponse,
    TemplateVersionExternalAuth,
};
use codersdk::proto::ExternalAuthProviderResource;
use uuid::Uuid;

use super::AppState;
use coderd_authz::Action;
use coderd_core::domain::{resolve, user_settings};
use coderd_core::external_auth::{self as external, AgentQuery, LinkState, NoProvider};
use coderd_http::error::{ApiError, ApiResult};
use coderd_http::extract::{Auth, Json, Path, resolve_user, token_from_parts};
use coderd_http::oauth_flow::{
    CallbackParams, STATE_COOKIE, redirect_to, safe_redirect, state_cookie, with_cookie,
};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/external-auth", get(list))
        .route("/external-auth/{id}", get(get_one).delete(unlink))
        .route(
            "/external-auth/{id}/device",
            get(begin_device).post(exchange_device),
        )
        .route("/templateversions/{id}/external-auth", get(for_version))
        .route("/workspaceagents/me/external-auth", get(agent_credentials))
        .route("/workspaceagents/me/gitauth", get(agent_credentials))
        .route("/workspaceagents/me/gitsshkey", get(agent_gitsshkey))
        .route(
            "/users/{user}/gitsshkey",
            get(get_gitsshkey).put(regenerate_gitsshkey),
        )
}

/// The browser's side: outside `/api/v2`, at Coder's paths, so OAuth apps registered for Coder
/// work unchanged.
pub fn browser_routes() -> Router<AppState> {
    Router::new()
        .route("/external-auth/{id}", get(page))
        .route("/external-auth/{id}/callback", get(callback))
        .route("/gitauth/{id}/callback", get(callback))
}

fn no_provider(e: NoProvider) -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, e.message).with_detail(e.detail)
}

#[utoipa::path(get, path = "/api/v2/external-auth", tag = "Git",
    responses((status = 200, body = ListUserExternalAuthResponse)))]
pub(super) async fn list(
    State(state): State<AppState>,
    auth: Auth,
) -> ApiResult<Json<ListUserExternalAuthResponse>> {
    Ok(Json(external::list(&state, auth.user.id).await?))
}

#[utoipa::path(get, path = "/api/v2/external-auth/{id}", tag = "Git",
    params(("id" = String, Path, description = "Provider id")),
    responses((status = 200, body = ExternalAuth), (status = 404, body = codersdk::Response)))]
pub(super) async fn get_one(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<String>,
) -> ApiResult<Json<ExternalAuth>> {
    Ok(Json(external::get(&state, auth.user.id, &id).await?))
}

#[utoipa::path(delete, path = "/api/v2/external-auth/{id}", tag = "Git",
    params(("id" = String, Path)),
    responses((status = 200, body = DeleteExternalAuthByIdResponse),
        (status = 404, body = codersdk::Response, description = "No such provider, or no link with it")))]
pub(super) async fn unlink(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<String>,
) -> ApiResult<Json<DeleteExternalAuthByIdResponse>> {
    Ok(Json(external::unlink(&state, auth.user.id, &id).await?))
}

#[utoipa::path(get, path = "/api/v2/external-auth/{id}/device", tag = "Git",
    params(("id" = String, Path)),
    responses((status = 200, body = ExternalAuthDevice),
        (status = 400, body = codersdk::Response, description = "The provider has no device flow"),
        (status = 404, body = codersdk::Response)))]
pub(super) async fn begin_device(
    State(state): State<AppState>,
    _auth: Auth,
    Path(id): Path<String>,
) -> ApiResult<Json<ExternalAuthDevice>> {
    let device = external::begin_device(&state, &id).await?;
    Ok(Json(ExternalAuthDevice {
        device_code: device.device_code,
        user_code: device.user_code,
        verification_uri: device.verification_uri,
        expires_in: device.expires_in,
        interval: device.interval,
    }))
}

#[utoipa::path(post, path = "/api/v2/external-auth/{id}/device", tag = "Git",
    params(("id" = String, Path)), request_body = ExternalAuthDeviceExchange,
    responses((status = 204, description = "Linked"),
        (status = 400, body = codersdk::Response, description = "Not approved yet (`authorization_pending`), refused, or no device flow"),
        (status = 404, body = codersdk::Response)))]
pub(super) async fn exchange_device(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<String>,
    Json(req): Json<ExternalAuthDeviceExchange>,
) -> ApiResult<StatusCode> {
    if req.device_code.is_empty() {
        return Err(ApiError::validation(vec![codersdk::ValidationError {
            field: "device_code".into(),
            detail: "A device code is required.".into(),
        }]));
    }
    external::exchange_device(&state, auth.user.id, &id, &req.device_code).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(get, path = "/api/v2/templateversions/{id}/external-auth", tag = "Templates",
    params(("id" = Uuid, Path)),
    responses((status = 200, body = [TemplateVersionExternalAuth]),
        (status = 404, body = codersdk::Response)))]
pub(super) async fn for_version(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<Vec<TemplateVersionExternalAuth>>> {
    let version = resolve::version(&state, &auth.subject, id).await?;
    let wanted: Vec<ExternalAuthProviderResource> =
        serde_json::from_value(version.external_auth_providers).unwrap_or_default();
    if let Some(missing) = external::missing_provider(&state, &wanted) {
        return Err(no_provider(missing));
    }
    Ok(Json(
        external::for_template_version(&state, auth.user.id, &wanted).await?,
    ))
}

/// The owner of the workspace whose agent token the request carries.
async fn agent_owner(state: &AppState, headers: &HeaderMap) -> ApiResult<Uuid> {
    let invalid = || ApiError::unauthorized("Invalid agent token.");
    let token = token_from_headers(headers).ok_or_else(invalid)?;
    let agent = state
        .store
        .agent_by_token(&coderd_authz::auth::hash_secret(&token))
        .await?
        .ok_or_else(invalid)?;
    if agent.workspace_deleted || agent.build_number != agent.latest_build_number {
        return Err(ApiError::forbidden().with_detail(
            "This agent belongs to a build that is no longer its workspace's latest.",
        ));
    }
    Ok(state.store.agent_context(agent.agent.id).await?.owner_id)
}

fn token_from_headers(headers: &HeaderMap) -> Option<String> {
    let (mut parts, ()) = axum::http::Request::new(()).into_parts();
    parts.headers = headers.clone();
    token_from_parts(&parts)
}

#[derive(Debug, Default, serde::Deserialize)]
struct AgentQueryParams {
    #[serde(default)]
    r#match: String,
    /// Coder's older name for `match`.
    #[serde(default)]
    url: String,
    #[serde(default)]
    id: String,
    listen: Option<String>,
}

/// How long `listen` waits for the owner to link before answering with the link URL again.
const LISTEN_LIMIT: std::time::Duration = std::time::Duration::from_secs(600);

#[utoipa::path(get, path = "/api/v2/workspaceagents/me/external-auth", tag = "Agents",
    params(("match" = Option<String>, Query, description = "A git remote URL"),
        ("id" = Option<String>, Query, description = "A provider id"),
        ("listen" = Option<bool>, Query, description = "Wait until the owner has linked")),
    responses((status = 200, body = AgentExternalAuthResponse),
        (status = 400, body = codersdk::Response, description = "Neither or both of match and id"),
        (status = 401, body = codersdk::Response),
        (status = 404, body = codersdk::Response, description = "No provider matches")))]
pub(super) async fn agent_credentials(
    State(state): State<AppState>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<AgentExternalAuthResponse>> {
    let owner = agent_owner(&state, &headers).await?;
    let params: AgentQueryParams = serde_urlencoded::from_str(query.as_deref().unwrap_or(""))
        .map_err(|e| {
            ApiError::bad_request("Invalid query parameters.").with_detail(e.to_string())
        })?;
    let url = if params.r#match.is_empty() {
        params.url
    } else {
        params.r#match
    };
    let query = match (url.is_empty(), params.id.is_empty()) {
        (true, true) => return Err(ApiError::bad_request("'url' or 'id' must be provided!")),
        (false, false) => {
            return Err(ApiError::bad_request(
                "'url' and 'id' cannot be provided together!",
            ));
        }
        (false, true) => AgentQuery::Match(url),
        (true, false) => AgentQuery::Id(params.id),
    };
    let provider = external::resolve_agent_query(&state, &query).map_err(no_provider)?;
    let listen = params
        .listen
        .is_some_and(|v| !matches!(v.as_str(), "false" | "0"));
    let deadline = tokio::time::Instant::now() + LISTEN_LIMIT;
    let mut answer = external::agent_credentials(&state, owner, provider).await?;
    if !listen {
        return Ok(Json(answer));
    }
    // Waiting for the owner to link: the provider is asked again only once the link changed.
    let version = |row: Option<coderd_store::ExternalAuthLinkRow>| row.map(|r| r.updated_at);
    let mut seen = version(state.store.external_auth_link(owner, provider.id()).await?);
    while !answer.url.is_empty() && tokio::time::Instant::now() < deadline {
        tokio::select! {
            () = state.shutdown.cancelled() => break,
            () = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
        }
        let now = version(state.store.external_auth_link(owner, provider.id()).await?);
        if now != seen {
            seen = now;
            answer = external::agent_credentials(&state, owner, provider).await?;
        }
    }
    Ok(Json(answer))
}

#[utoipa::path(get, path = "/api/v2/workspaceagents/me/gitsshkey", tag = "Agents",
    responses((status = 200, body = AgentGitSshKey), (status = 401, body = codersdk::Response)))]
pub(super) async fn agent_gitsshkey(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> ApiResult<Json<AgentGitSshKey>> {
    let owner = agent_owner(&state, &headers).await?;
    Ok(Json(
        external::gitsshkey::for_workspace(&state, owner).await?,
    ))
}

#[utoipa::path(get, path = "/api/v2/users/{user}/gitsshkey", tag = "Users",
    params(("user" = String, Path, description = "User ID, username, or me")),
    responses((status = 200, body = GitSshKey), (status = 404, body = codersdk::Response)))]
pub(super) async fn get_gitsshkey(
    State(state): State<AppState>,
    auth: Auth,
    Path(user): Path<String>,
) -> ApiResult<Json<GitSshKey>> {
    let row = resolve_user(&state, &auth, &user).await?;
    user_settings::authorize_read_personal(&auth.subject, &row)?;
    Ok(Json(external::gitsshkey::get(&state, row.id).await?))
}

#[utoipa::path(put, path = "/api/v2/users/{user}/gitsshkey", tag = "Users",
    params(("user" = String, Path, description = "User ID, username, or me")),
    responses((status = 200, body = GitSshKey), (status = 404, body = codersdk::Response)))]
pub(super) async fn regenerate_gitsshkey(
    State(state): State<AppState>,
    auth: Auth,
    Path(user): Path<String>,
) -> ApiResult<Json<GitSshKey>> {
    let row = resolve_user(&state, &auth, &user).await?;
    user_settings::authorize_read_personal(&auth.subject, &row)?;
    if row.id != auth.subject.user_id {
        auth.authorize(Action::Update, &coderd_authz::Object::user(row.id))?;
    }
    Ok(Json(external::gitsshkey::regenerate(&state, row.id).await?))
}

/// Text made safe inside HTML elements and attribute values.
fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A page of our own for the browser, in place of the dashboard's: the result of a link.
fn page_html(status: StatusCode, title: &str, body: &str) -> Response {
    let html = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{}</title></head>\
         <body><main><h1>{}</h1><p>{}</p></main></body></html>",
        escape(title),
        escape(title),
        escape(body)
    );
    (status, Html(html)).into_response()
}

#[derive(Debug, Default, serde::Deserialize)]
struct PageParams {
    #[serde(default)]
    redirected: Option<String>,
}

/// `/external-auth/{id}`: where users are sent to link. Linked: says so. Not yet: into the
/// provider's code flow. Signed out: to the login page first, and back here.
async fn page(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Response {
    let here = format!("/external-auth/{id}");
    let (provider, user) = match provider_and_user(&state, &headers, &id).await {
        Ok(found) => found,
        Err(response) => return *response,
    };
    let params: PageParams =
        serde_urlencoded::from_str(query.as_deref().unwrap_or("")).unwrap_or_default();
    match external::links::token(&state, user, provider, true).await {
        Ok(LinkState::Valid(_)) => page_html(
            StatusCode::OK,
            &format!(
                "You've authenticated with {}!",
                provider.settings.display_name
            ),
            "You may close this page and return to your workspace.",
        ),
        Ok(_) if params.redirected.is_some() => page_html(
            StatusCode::BAD_REQUEST,
            "Failed to validate oauth access token",
            &format!(
                "{} did not give a working token. Try again from {here}.",
                provider.settings.display_name
            ),
        ),
        Ok(_) if provider.settings.device_flow => device_page(&state, provider).await,
        Ok(_) => redirect_to(&format!("{here}/callback")),
        Err(e) => {
            tracing::warn!(provider = %id, error = %e, "reading an external auth link");
            page_html(
                StatusCode::BAD_GATEWAY,
                "The provider could not be reached",
                &format!(
                    "{} could not be reached; try again later.",
                    provider.settings.display_name
                ),
            )
        }
    }
}

/// The provider a browser route names and who is signed in; else the page to answer with (not
/// found, or the login page, which comes back to the provider's page).
async fn provider_and_user<'a>(
    state: &'a AppState,
    headers: &HeaderMap,
    id: &str,
) -> Result<(&'a external::Provider, Uuid), Box<Response>> {
    let Some(provider) = state.external_auth.get(id) else {
        return Err(Box::new(page_html(
            StatusCode::NOT_FOUND,
            "Not found",
            "There is no such external auth provider.",
        )));
    };
    match signed_in(state, headers).await {
        Some(user) => Ok((provider, user)),
        None => Err(Box::new(redirect_to(&format!(
            "/login?redirect={}",
            urlencode(&format!("/external-auth/{id}"))
        )))),
    }
}

/// The device flow in the browser: the code to enter at the provider, and a script that asks
/// coderd to exchange it at the provider's interval until the person has (the API's `POST
/// …/device`, same-origin, with the session cookie), then shows the linked page.
async fn device_page(state: &AppState, provider: &external::Provider) -> Response {
    let name = &provider.settings.display_name;
    let device = match external::begin_device(state, provider.id()).await {
        Ok(device) => device,
        Err(e) => {
            tracing::warn!(provider = provider.id(), error = %e, "starting a device authorization");
            return page_html(
                StatusCode::BAD_GATEWAY,
                "The provider could not be reached",
                &format!("{name} did not start a device authorization; try again later."),
            );
        }
    };
    // JSON string literals, safe inside a script element.
    let js = |s: &str| {
        serde_json::to_string(s)
            .unwrap_or_default()
            .replace('<', "\\u003c")
    };
    let html = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>Authenticate with {name}</title></head>\
         <body><main><h1>Authenticate with {name}</h1>\
         <p>Enter this code at <a href=\"{uri}\" target=\"_blank\" rel=\"noopener\">{uri}</a>:</p>\
         <p><code id=\"user-code\">{code}</code></p>\
         <p id=\"status\" role=\"status\">Waiting for you to enter the code…</p></main>\
         <script>(function () {{\
           var url = {exchange}, body = JSON.stringify({{device_code: {device_code}}});\
           function poll() {{\
             fetch(url, {{method: 'POST', headers: {{'Content-Type': 'application/json'}}, body: body}})\
               .then(function (r) {{ if (r.status === 204) {{ location.reload(); }} else {{ setTimeout(poll, {interval}); }} }})\
               .catch(function () {{ setTimeout(poll, {interval}); }});\
           }}\
           setTimeout(poll, {interval});\
         }})();</script></body></html>",
        name = escape(name),
        uri = escape(&device.verification_uri),
        code = escape(&device.user_code),
        exchange = js(&format!("/api/v2/external-auth/{}/device", provider.id())),
        device_code = js(&device.device_code),
        interval = device.interval.max(1) * 1000,
    );
    (StatusCode::OK, Html(html)).into_response()
}

async fn signed_in(state: &AppState, headers: &HeaderMap) -> Option<Uuid> {
    let token = token_from_headers(headers)?;
    coderd_http::extract::authenticate(state, &token)
        .await
        .ok()
        .map(|auth| auth.user.id)
}

fn urlencode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// `/external-auth/{id}/callback`: without a code, starts the link (a sealed state cookie and
/// off to the provider); with one, finishes it (state checked, code exchanged, tokens stored)
/// and returns to the page, or where `redirect` said. Nothing is stored unless all of it holds.
async fn callback(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Response {
    let path = format!("/external-auth/{id}/callback");
    let secure = state.options.secure_cookies;
    let clear = || state_cookie("", 0, &path, secure);
    let (provider, user) = match provider_and_user(&state, &headers, &id).await {
        Ok(found) => found,
        Err(response) => return *response,
    };
    let params: CallbackParams = match serde_urlencoded::from_str(query.as_deref().unwrap_or("")) {
        Ok(p) => p,
        Err(e) => return page_html(StatusCode::BAD_REQUEST, "Invalid request", &e.to_string()),
    };
    if let Some(error) = params.error {
        let detail = params.error_description.unwrap_or_default();
        return with_cookie(
            page_html(
                StatusCode::BAD_REQUEST,
                &format!("{} refused the link", provider.settings.display_name),
                &format!("{error}: {detail}"),
            ),
            clear(),
        );
    }
    let Some(code) = params.code else {
        let redirect = params
            .redirect
            .as_deref()
            .map(|r| safe_redirect(Some(r)))
            .unwrap_or_else(|| format!("/external-auth/{id}?redirected=true"));
        let (url, sealed) = external::begin_link(&state, provider, &redirect);
        let cookie = state_cookie(
            &sealed,
            oauth_client::pending::LIFETIME_MINUTES * 60,
            &path,
            secure,
        );
        return with_cookie(redirect_to(url.as_str()), cookie);
    };
    let Some(returned_state) = params.state.filter(|s| !s.is_empty()) else {
        return with_cookie(
            page_html(
                StatusCode::BAD_REQUEST,
                "State must be provided.",
                "Start again from the link page.",
            ),
            clear(),
        );
    };
    let cookie = coderd_http::cookies::value(&headers, STATE_COOKIE);
    match external::finish_link(&state, user, provider, cookie, &returned_state, &code).await {
        Ok(redirect) => with_cookie(redirect_to(&redirect), clear()),
        Err(e) => {
            tracing::info!(provider = %id, error = %e, "external auth link refused");
            let status = match e {
                oauth_client::Error::Unavailable(_) => StatusCode::BAD_GATEWAY,
                _ => StatusCode::BAD_REQUEST,
            };
            with_cookie(
                page_html(
                    status,
                    &format!("Linking {} failed", provider.settings.display_name),
                    &e.to_string(),
                ),
                clear(),
            )
        }
    }
}
