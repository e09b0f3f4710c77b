//! `/@{owner}/{workspace}[.{agent}]/terminal`: Coder's web terminal, a full-window xterm.js
//! attached to the agent's reconnecting PTY, and `/-/terminal/{agent}`, its WebSocket.
//!
//! The socket is served here rather than by the browser calling `/api/v2/…/pty` with its
//! cookie: the dashboard checks the `Origin` of every socket it accepts (a page of a workspace
//! app on a sibling subdomain is same-site, so the cookie alone proves nothing), and the
//! relay's `open_pty` gives the same authorisation and stream as the API, in-process.
//!
//! The terminal's id lives in the page's URL (`?reconnect=`, as in Coder), so a reload
//! reattaches and the agent replays what the terminal printed meanwhile.

use askama::Template;
use askama_web::WebTemplate;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Redirect, Response};
use coderd_authz::Action;
use coderd_core::domain::{resolve, views};
use coderd_core::state::AppState;
use coderd_relay::{self as relay, OpenError, PtyError, PtyRequest};
use codersdk::workspaces::WorkspaceAgent;
use serde::Deserialize;
use uuid::Uuid;

use crate::error::{PageError, PageResult};
use crate::pages::workspace::lookup;
use crate::security;
use crate::session::Viewer;

/// The page's policy: the dashboard's, except that styles may be inline. xterm.js sizes and
/// colours its DOM renderer with `<style>` elements it creates and with `style` attributes on
/// each row's spans, neither of which can carry a nonce; scripts stay `'self'` only.
const CSP: &str = "default-src 'self'; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'; \
                   base-uri 'none'; form-action 'self'";

/// The close code telling the page the terminal could not be opened (the reason says why);
/// the page keeps retrying, since an agent that is not connected yet may connect.
const CLOSE_UNAVAILABLE: u16 = 4502;

#[derive(Debug, Deserialize)]
pub struct PageQuery {
    #[serde(default)]
    reconnect: String,
    #[serde(default)]
    command: String,
}

#[derive(Template, WebTemplate)]
#[template(path = "terminal.html")]
pub struct TerminalPage {
    title: String,
    workspace_url: String,
    agent: WorkspaceAgent,
    socket: String,
    /// The same page with a fresh terminal.
    new_session: String,
    css: String,
    xterm_css: String,
    xterm_js: String,
    fit_js: String,
    terminal_js: String,
}

/// Splits `dev.main` into the workspace and the agent named after the dot.
fn split_target(target: &str) -> (&str, Option<&str>) {
    match target.split_once('.') {
        Some((workspace, agent)) => (workspace, Some(agent)),
        None => (target, None),
    }
}

fn query_string(reconnect: Option<Uuid>, command: &str) -> String {
    let mut pairs: Vec<(&str, String)> = Vec::new();
    if let Some(id) = reconnect {
        pairs.push(("reconnect", id.to_string()));
    }
    if !command.is_empty() {
        pairs.push(("command", command.to_owned()));
    }
    let query = serde_urlencoded::to_string(&pairs).unwrap_or_default();
    if query.is_empty() {
        query
    } else {
        format!("?{query}")
    }
}

pub async fn page(
    State(state): State<AppState>,
    viewer: Viewer,
    Path((owner, target)): Path<(String, String)>,
    Query(query): Query<PageQuery>,
) -> PageResult<Response> {
    let (name, agent_name) = split_target(&target);
    let row = lookup(&state, &viewer, &owner, name).await?;
    let ws = views::workspace(&state, row).await?;
    let mut agents = ws
        .latest_build
        .resources
        .iter()
        .flat_map(|r| r.agents.iter());
    let agent = match agent_name {
        Some(wanted) => agents.find(|a| a.name == wanted),
        None => agents.next(),
    }
    .cloned()
    .ok_or(PageError::NotFound)?;
    // Those who may read the workspace but not connect to it are told so here, not by a
    // socket that fails without a word.
    resolve::agent(&state, viewer.subject(), agent.id, Action::Connect).await?;

    let path = format!("/{owner}/{target}/terminal");
    let Ok(reconnect) = Uuid::parse_str(&query.reconnect) else {
        let fresh = query_string(Some(Uuid::new_v4()), &query.command);
        return Ok(Redirect::to(&format!("{path}{fresh}")).into_response());
    };
    let socket = format!(
        "/-/terminal/{}{}",
        agent.id,
        query_string(Some(reconnect), &query.command)
    );
    let page = TerminalPage {
        title: format!("{}/{}.{}", ws.owner_name, ws.name, agent.name),
        workspace_url: format!("/@{}/{}", ws.owner_name, ws.name),
        new_session: format!("{path}{}", query_string(None, &query.command)),
        agent,
        socket,
        css: crate::assets::url("dashboard.css"),
        xterm_css: crate::assets::url("xterm-6.0.0.css"),
        xterm_js: crate::assets::url("xterm-6.0.0.min.js"),
        fit_js: crate::assets::url("xterm-addon-fit-0.11.0.min.js"),
        terminal_js: crate::assets::url("terminal.js"),
    };
    let mut response = page.into_response();
    response.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    Ok(response)
}

#[derive(Debug, Deserialize)]
pub struct SocketQuery {
    reconnect: Uuid,
    #[serde(default)]
    width: u16,
    #[serde(default)]
    height: u16,
    #[serde(default)]
    command: String,
}

pub async fn socket(
    State(state): State<AppState>,
    viewer: Viewer,
    headers: HeaderMap,
    Path(agent): Path<Uuid>,
    Query(q): Query<SocketQuery>,
    ws: WebSocketUpgrade,
) -> Response {
    if !security::same_origin(&headers) {
        return PageError::Csrf.into_response();
    }
    let request = PtyRequest {
        reconnect: q.reconnect,
        width: q.width,
        height: q.height,
        command: q.command,
    };
    match relay::open_pty(&state, viewer.subject(), agent, &request).await {
        Ok(pty) => ws.on_upgrade(move |socket| pty.serve(state, socket)),
        Err(PtyError::Denied(e)) => PageError::from(e).into_response(),
        // A browser cannot read an HTTP error on a WebSocket, so the reason goes in a close
        // frame the page shows.
        Err(PtyError::Open(e)) => {
            let reason = match e {
                OpenError::NotConnected => "The workspace agent is not connected.".to_owned(),
                other => other.to_string(),
            };
            ws.on_upgrade(move |socket| refuse(socket, reason))
        }
    }
}

async fn refuse(mut socket: WebSocket, reason: String) {
    // A close reason has room for 123 bytes.
    let mut end = reason.len().min(123);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    let frame = CloseFrame {
        code: CLOSE_UNAVAILABLE,
        reason: reason[..end].into(),
    };
    if socket.send(Message::Close(Some(frame))).await.is_err() {
        tracing::debug!("terminal socket went away before its refusal");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_name_the_agent_after_a_dot() {
        assert_eq!(split_target("dev.main"), ("dev", Some("main")));
        assert_eq!(split_target("dev"), ("dev", None));
    }

    #[test]
    fn queries_keep_the_command_and_drop_what_is_empty() {
        let id = Uuid::nil();
        assert_eq!(
            query_string(Some(id), "htop -d 5"),
            format!("?reconnect={id}&command=htop+-d+5")
        );
        assert_eq!(query_string(None, ""), "");
    }
}
