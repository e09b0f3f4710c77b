//! Request extractors: the authenticated caller, pagination, and the resolution of path
//! segments (`me`, names, ids) to rows. Bodies, query strings and path parameters are read by
//! `input`'s extractors, re-exported here.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use uuid::Uuid;

pub use crate::input::{Json, Path, Query};

use crate::error::{ApiError, ApiResult};
use coderd_authz::{self as authz, Action, Object, Subject};
use coderd_core::AppState;
use coderd_core::domain;
use coderd_store::{ApiKeyRow, OrganizationRow, UserRow};
use codersdk::client::{SESSION_TOKEN_COOKIE, SESSION_TOKEN_HEADER};

/// `limit`/`offset`/`after_id` as list endpoints take them.
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct Pagination {
    #[serde(default, deserialize_with = "empty_as_none")]
    pub limit: Option<i64>,
    #[serde(default, deserialize_with = "empty_as_none")]
    pub offset: Option<i64>,
    #[serde(default, deserialize_with = "empty_as_none")]
    pub after_id: Option<Uuid>,
}

impl Pagination {
    /// Validated (limit, offset); a missing or zero limit means `default_limit`.
    pub fn resolve(&self, default_limit: i64) -> ApiResult<(i64, i64)> {
        let limit = self.limit.unwrap_or(0);
        let offset = self.offset.unwrap_or(0);
        if limit < 0 || offset < 0 {
            return Err(
                ApiError::bad_request("Query parameters have invalid values.")
                    .with_detail("limit and offset must not be negative"),
            );
        }
        Ok((if limit == 0 { default_limit } else { limit }, offset))
    }
}

/// Parses a query value from its text, treating `?after_id=` (empty) as absent, as Go's clients
/// send it. Going through text also keeps numbers working inside `#[serde(flatten)]`, where
/// serde_urlencoded hands every value over as a string.
pub fn empty_as_none<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: std::str::FromStr,
    T::Err: std::fmt::Display,
{
    let s: Option<String> = serde::Deserialize::deserialize(d)?;
    match s.as_deref() {
        None | Some("") => Ok(None),
        Some(s) => s.parse().map(Some).map_err(serde::de::Error::custom),
    }
}

/// The authenticated caller: its key, its user, and what it may do.
#[derive(Debug, Clone)]
pub struct Auth {
    pub key: ApiKeyRow,
    pub user: UserRow,
    pub subject: Subject,
}

impl Auth {
    /// Authorizes or answers with the right refusal (404 when the object is invisible).
    pub fn authorize(&self, action: Action, object: &Object) -> ApiResult<()> {
        authz::authorize(&self.subject, action, object).map_err(ApiError::from)
    }

    pub fn can(&self, action: Action, object: &Object) -> bool {
        self.subject.can(action, object)
    }
}

/// Where a client may put its token, in the order we look.
pub fn token_from_parts(parts: &Parts) -> Option<String> {
    let headers = &parts.headers;
    if let Some(v) = headers
        .get(SESSION_TOKEN_HEADER)
        .and_then(|v| v.to_str().ok())
    {
        return Some(v.trim().to_string());
    }
    if let Some(v) = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
    {
        return Some(v.trim().to_string());
    }
    let cookie = crate::cookies::value(headers, SESSION_TOKEN_COOKIE).map(str::to_string);
    if cookie.is_some() {
        return cookie;
    }
    // Browsers cannot set headers on WebSocket upgrades.
    parts.uri.query().and_then(|q| {
        url::form_urlencoded::parse(q.as_bytes())
            .find(|(k, _)| k == SESSION_TOKEN_COOKIE)
            .map(|(_, v)| v.into_owned())
    })
}

impl FromRequestParts<AppState> for Auth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        if let Some(auth) = parts.extensions.get::<Auth>() {
            return Ok(auth.clone());
        }
        let token = token_from_parts(parts).ok_or_else(|| {
            ApiError::unauthorized("You must be logged in to use this endpoint.").with_detail(
                "Send a session token in the Coder-Session-Token header, the \
                 coder_session_token cookie or an Authorization: Bearer header.",
            )
        })?;
        let auth = authenticate(state, &token).await?;
        parts.extensions.insert(auth.clone());
        Ok(auth)
    }
}

/// Validates a token and loads the caller (see [`domain::session::authenticate`]).
pub async fn authenticate(state: &AppState, token: &str) -> ApiResult<Auth> {
    let domain::session::Session { key, user, subject } =
        domain::session::authenticate(state, token).await?;
    // An app host's key opens apps, not the API (were it leaked by an app, it must not act as
    // its user).
    if key.scope == domain::keys::APP_CONNECT_SCOPE {
        return Err(ApiError::unauthorized(
            "This token only opens workspace applications.",
        ));
    }
    Ok(Auth { key, user, subject })
}

/// Resolves a `{user}` path segment (`me`, a username or an id) to a user the caller may see.
pub async fn resolve_user(state: &AppState, auth: &Auth, param: &str) -> ApiResult<UserRow> {
    if param == "me" {
        // Already loaded with the caller's key.
        auth.authorize(Action::Read, &Object::user(auth.user.id))?;
        return Ok(auth.user.clone());
    }
    Ok(domain::resolve::user(state, &auth.subject, param).await?)
}

/// Finds an `{organization}` path segment: an id, a name, or `default` for the default
/// organization (unless one is named so), as Coder's API does.
pub async fn find_org(state: &AppState, param: &str) -> ApiResult<OrganizationRow> {
    Ok(domain::resolve::find_organization(state, param).await?)
}

/// Resolves an `{organization}` path segment to one the caller may see.
pub async fn resolve_org(state: &AppState, auth: &Auth, param: &str) -> ApiResult<OrganizationRow> {
    Ok(domain::resolve::organization(state, &auth.subject, param).await?)
}
