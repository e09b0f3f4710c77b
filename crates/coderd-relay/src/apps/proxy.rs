//! The reverse proxy: an HTTP/1.1 client over relay streams to a port on the agent's loopback.
//! Bodies stream both ways (hyper's, never buffered: SSE arrives event by event, uploads and
//! downloads of any size run in bounded memory), upgrades (WebSocket) are spliced, and idle
//! connections are kept per agent and port, so a page's many requests do not each open a
//! relay stream. Requests lose every credential of coderd's before they leave.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, Uri, header};
use axum::response::Response;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use uuid::Uuid;

use super::access::{Cors, Target};
use super::cors;
use super::pages::AppError;
use crate::{self as relay, OpenError};
use coderd_core::state::AppState;

/// Idle connections older than this are not reused (the app may have closed them).
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Idle connections kept per agent and port.
const MAX_IDLE: usize = 16;

/// Cookies of coderd's that never reach an app, by name prefix.
const COOKIE_PREFIXES: &[&str] = &[
    codersdk::client::SESSION_TOKEN_COOKIE,
    super::token::TOKEN_COOKIE,
    super::token::SESSION_COOKIE,
    "oauth_state",
];
/// The query parameter the app host hand-off carries (stripped before forwarding).
pub const HANDOFF_PARAM: &str = "coder_application_connect_api_key";

struct Idle {
    sender: SendRequest<Body>,
    since: Instant,
}

/// An agent, a port, and whether the app there speaks TLS.
type Key = (Uuid, u16, bool);

/// Idle keep-alive connections per agent, port and protocol.
#[derive(Clone, Default)]
pub struct Pool {
    idle: Arc<Mutex<HashMap<Key, Vec<Idle>>>>,
}

impl Pool {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Vec<Idle>>> {
        self.idle.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A pool whose idle connections past [`IDLE_TIMEOUT`] (or closed by the app or the
    /// agent's disconnect) are closed every half timeout, until `shutdown`: connections to a
    /// port nobody opens again must not stay open forever.
    pub fn start(shutdown: tokio_util::sync::CancellationToken) -> Self {
        let pool = Self::default();
        let sweeper = pool.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(IDLE_TIMEOUT / 2);
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    _ = tick.tick() => sweeper.sweep(),
                }
            }
        });
        pool
    }

    fn sweep(&self) {
        let mut map = self.lock();
        for list in map.values_mut() {
            list.retain(|i| i.since.elapsed() < IDLE_TIMEOUT && !i.sender.is_closed());
        }
        map.retain(|_, list| !list.is_empty());
    }

    fn take(&self, key: Key) -> Option<SendRequest<Body>> {
        let mut map = self.lock();
        let list = map.get_mut(&key)?;
        while let Some(idle) = list.pop() {
            if idle.since.elapsed() < IDLE_TIMEOUT && idle.sender.is_ready() {
                return Some(idle.sender);
            }
        }
        None
    }

    /// Puts `sender` back once its exchange is over (its response body read to the end).
    fn give_back_when_ready(&self, key: Key, mut sender: SendRequest<Body>) {
        let pool = self.clone();
        tokio::spawn(async move {
            if sender.ready().await.is_err() {
                return;
            }
            let mut map = pool.lock();
            let list = map.entry(key).or_default();
            list.retain(|i| i.since.elapsed() < IDLE_TIMEOUT && !i.sender.is_closed());
            if list.len() < MAX_IDLE {
                list.push(Idle {
                    sender,
                    since: Instant::now(),
                });
            }
        });
    }
}

/// A new HTTP/1.1 connection to the target's port inside the workspace, over the relay.
async fn connect(state: &AppState, target: &Target) -> Result<SendRequest<Body>, AppError> {
    let stream = relay::dial::tcp(
        state,
        target.agent_id,
        target.workspace_id,
        target.port,
        "app",
    )
    .await
    .map_err(|e| match e {
        OpenError::NotConnected => AppError::AgentNotConnected {
            status: "disconnected".into(),
        },
        OpenError::Refused(reason) => AppError::Upstream { detail: reason },
        OpenError::Unreachable(reason) => AppError::Upstream { detail: reason },
    })?;
    let sender = if target.tls {
        let tls = super::tls::connect(stream)
            .await
            .map_err(|e| AppError::Upstream {
                detail: format!("the TLS handshake with the application failed: {e}"),
            })?;
        relay::dial::http1(tls).await
    } else {
        relay::dial::http1(stream).await
    };
    sender.map_err(upstream_error)
}

/// What the proxy tells the app about the original request.
#[derive(Debug, Clone)]
pub struct Forwarded {
    pub client: Option<std::net::IpAddr>,
    pub host: Option<HeaderValue>,
    pub proto: &'static str,
}

/// Forwards `request` (its path already relative to the app) to `target`.
pub async fn forward(
    state: &AppState,
    pool: &Pool,
    target: &Target,
    path_and_query: &str,
    forwarded: Forwarded,
    mut request: Request,
) -> Result<Response, AppError> {
    let upgrade = wants_upgrade(request.headers());
    let client_upgrade = upgrade.then(|| hyper::upgrade::on(&mut request));
    let (parts, body) = request.into_parts();
    let mut headers = parts.headers;
    sanitize_request(&mut headers, upgrade);
    if let Some(ip) = forwarded.client {
        set(&mut headers, "x-forwarded-for", &ip.to_string());
    }
    if let Some(host) = forwarded.host {
        headers.insert(HeaderName::from_static("x-forwarded-host"), host);
    }
    set(&mut headers, "x-forwarded-proto", forwarded.proto);
    set(&mut headers, "host", &format!("127.0.0.1:{}", target.port));
    let uri: Uri = path_and_query
        .parse()
        .map_err(|_| AppError::unavailable("The request's path is invalid.", ""))?;
    let mut upstream = Request::new(body);
    *upstream.method_mut() = parts.method;
    *upstream.uri_mut() = uri;
    *upstream.headers_mut() = headers;

    let key = (target.agent_id, target.port, target.tls);
    let send = async move {
        if let Some(mut sender) = pool.take(key) {
            match sender.try_send_request(upstream).await {
                Ok(response) => return Ok((sender, response)),
                // The app closed the idle connection meanwhile and the request came back
                // unsent: it goes on a new connection.
                Err(mut e) => match e.take_message() {
                    Some(unsent) => upstream = unsent,
                    None => return Err(upstream_error(e.into_error())),
                },
            }
        }
        let mut sender = connect(state, target).await?;
        let response = sender
            .send_request(upstream)
            .await
            .map_err(upstream_error)?;
        Ok((sender, response))
    };
    let limit = state.options.apps.response_timeout;
    let (sender, response) =
        tokio::time::timeout(limit, send)
            .await
            .map_err(|_| AppError::Upstream {
                detail: format!("no response within {} s", limit.as_secs_f32()),
            })??;
    finish(pool, key, sender, response, client_upgrade, target.cors)
}

fn upstream_error(e: hyper::Error) -> AppError {
    AppError::Upstream {
        detail: e.to_string(),
    }
}

/// Hands the response back to the client: the connection returns to the pool when its body
/// ends, or an upgrade splices the two connections.
fn finish(
    pool: &Pool,
    key: Key,
    sender: SendRequest<Body>,
    mut response: hyper::Response<hyper::body::Incoming>,
    client_upgrade: Option<hyper::upgrade::OnUpgrade>,
    cors: Cors,
) -> Result<Response, AppError> {
    if cors == Cors::Simple {
        cors::strip_app_headers(response.headers_mut());
    }
    if response.status() == StatusCode::SWITCHING_PROTOCOLS {
        let Some(client) = client_upgrade else {
            return Err(AppError::Upstream {
                detail: "the application switched protocols unasked".into(),
            });
        };
        let app = hyper::upgrade::on(&mut response);
        tokio::spawn(async move {
            match tokio::try_join!(client, app) {
                Ok((client, app)) => {
                    let (mut client, mut app) = (TokioIo::new(client), TokioIo::new(app));
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut app).await;
                }
                Err(e) => tracing::debug!(error = %e, "app upgrade failed"),
            }
        });
        let (mut parts, _) = response.into_parts();
        strip_set_cookies(&mut parts.headers);
        return Ok(Response::from_parts(parts, Body::empty()));
    }
    pool.give_back_when_ready(key, sender);
    let (mut parts, body) = response.into_parts();
    remove_hop_by_hop(&mut parts.headers, false);
    strip_set_cookies(&mut parts.headers);
    Ok(Response::from_parts(parts, Body::new(body)))
}

fn set(headers: &mut HeaderMap, name: &'static str, value: &str) {
    if let Ok(v) = HeaderValue::from_str(value) {
        headers.insert(HeaderName::from_static(name), v);
    }
}

fn wants_upgrade(headers: &HeaderMap) -> bool {
    headers.contains_key(header::UPGRADE)
        && headers
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
}

/// Headers that describe one hop, not the request (RFC 9110 §7.6.1); an upgrade keeps the two
/// that ask the app to switch protocols.
fn remove_hop_by_hop(headers: &mut HeaderMap, upgrade: bool) {
    for name in [
        "keep-alive",
        "proxy-connection",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
    ] {
        headers.remove(name);
    }
    if !upgrade {
        headers.remove(header::CONNECTION);
        headers.remove(header::UPGRADE);
    }
}

/// Removes every credential of coderd's: its cookies, the session header, a bearer token of
/// coderd's (an app's own `Authorization` passes), and what the client claimed to forward.
pub fn sanitize_request(headers: &mut HeaderMap, upgrade: bool) {
    remove_hop_by_hop(headers, upgrade);
    headers.remove(codersdk::client::SESSION_TOKEN_HEADER);
    let coder_bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|t| coderd_authz::auth::split_token(t.trim()).is_some());
    if coder_bearer {
        headers.remove(header::AUTHORIZATION);
    }
    for name in [
        "x-forwarded-for",
        "x-forwarded-host",
        "x-forwarded-proto",
        "forwarded",
    ] {
        headers.remove(name);
    }
    let kept: Vec<String> = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .filter(|c| {
            let name = c.split_once('=').map_or(*c, |(n, _)| n).trim();
            !is_coder_cookie(name)
        })
        .map(str::to_owned)
        .collect();
    headers.remove(header::COOKIE);
    if !kept.is_empty()
        && let Ok(v) = HeaderValue::from_str(&kept.join("; "))
    {
        headers.insert(header::COOKIE, v);
    }
}

fn is_coder_cookie(name: &str) -> bool {
    COOKIE_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// An app must not set (or clear) coderd's cookies: on a path app it shares their origin.
fn strip_set_cookies(headers: &mut HeaderMap) {
    let kept: Vec<HeaderValue> = headers
        .get_all(header::SET_COOKIE)
        .iter()
        .filter(|v| {
            let text = v.to_str().unwrap_or("");
            let name = text.split_once('=').map_or(text, |(n, _)| n).trim();
            !is_coder_cookie(name)
        })
        .cloned()
        .collect();
    headers.remove(header::SET_COOKIE);
    for v in kept {
        headers.append(header::SET_COOKIE, v);
    }
}

/// The query without the hand-off parameter and coderd's session token.
pub fn clean_query(query: Option<&str>) -> Option<String> {
    let query = query?;
    let kept: Vec<&str> = query
        .split('&')
        .filter(|pair| {
            let name = pair.split_once('=').map_or(*pair, |(n, _)| n);
            name != HANDOFF_PARAM && name != codersdk::client::SESSION_TOKEN_COOKIE
        })
        .collect();
    (!kept.is_empty()).then(|| kept.join("&"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coderd_credentials_never_leave() {
        let mut h = HeaderMap::new();
        h.insert("coder-session-token", HeaderValue::from_static("abc-def"));
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer 0123456789-abcdefghijklmnopqrstuv"),
        );
        h.append(
            header::COOKIE,
            HeaderValue::from_static("coder_session_token=x; theme=dark"),
        );
        h.append(
            header::COOKIE,
            HeaderValue::from_static("coder_signed_app_token_1=y;app=1"),
        );
        h.insert("x-forwarded-for", HeaderValue::from_static("6.6.6.6"));
        sanitize_request(&mut h, false);
        assert!(h.get("coder-session-token").is_none());
        assert!(h.get("x-forwarded-for").is_none());
        assert_eq!(
            h.get(header::COOKIE).expect("test input is valid"),
            "theme=dark; app=1"
        );

        let mut h = HeaderMap::new();
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Basic dXNlcjpwdw=="),
        );
        sanitize_request(&mut h, false);
        assert!(
            h.get(header::AUTHORIZATION).is_some(),
            "the app's own auth passes"
        );

        assert_eq!(
            clean_query(Some(
                "a=1&coder_application_connect_api_key=k&coder_session_token=t"
            )),
            Some("a=1".into())
        );
        assert_eq!(clean_query(Some("coder_session_token=t")), None);
    }
}
