//! `/-/live`: one WebSocket per tab, pushing what changed on the open page.
//!
//! Driven by coderd's pubsub: a workspace's updates (`WORKSPACE_UPDATED`) re-render its live
//! region, and its latest build's log is followed with `domain::logs::JobLogTail`. Every event
//! re-reads state rather than trusting the payload, and so does a slow safety tick (NOTIFY is
//! not durable; a pubsub reconnect may have dropped events). The client reconnects with backoff
//! and passes the last log line it has (`after`), so nothing is repeated or lost.
//!
//! Messages are JSON: `{"type":"html","id":…,"html":…}` replaces an element (markup rendered by
//! the same askama template as the page), `{"type":"log","lines":[{"id":…,"text":…}]}` appends
//! lines (inserted as text, never markup), `{"type":"log-reset"}` starts a new build's log.

use std::time::Duration;

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use coderd_authz::Action;
use coderd_core::domain::logs::{JobLogTail, LogTail};
use coderd_core::domain::{resolve, views};
use coderd_core::state::AppState;
use coderd_store::pubsub::channels;
use serde::Deserialize;
use serde_json::json;
use uuid::Uuid;

use crate::error::PageError;
use crate::session::Viewer;
use crate::view::WorkspaceLive;

const PING: Duration = Duration::from_secs(15);
const SAFETY_TICK: Duration = Duration::from_secs(10);
/// The browser only sends pongs and a close frame. tungstenite zero-fills its whole read buffer
/// on every read, so its default (128 KiB) would stay resident for each idle tab.
const READ_BUFFER: usize = 4096;
/// Nothing the browser sends is larger; a bigger message ends the socket.
const MAX_MESSAGE: usize = 16 * 1024;

#[derive(Debug, Deserialize)]
pub struct LiveQuery {
    workspace: Uuid,
    #[serde(default)]
    after: i64,
}

pub async fn socket(
    State(state): State<AppState>,
    viewer: Viewer,
    headers: HeaderMap,
    Query(q): Query<LiveQuery>,
    ws: WebSocketUpgrade,
) -> Response {
    if !crate::security::same_origin(&headers) {
        return PageError::Csrf.into_response();
    }
    if let Err(e) =
        resolve::workspace(&state, viewer.subject(), q.workspace, Action::Read, false).await
    {
        return PageError::from(e).into_response();
    }
    let ws = ws
        .read_buffer_size(READ_BUFFER)
        .max_message_size(MAX_MESSAGE)
        .max_frame_size(MAX_MESSAGE);
    ws.on_upgrade(move |socket| async move {
        if let Err(e) = follow(state, viewer, q, socket).await {
            tracing::debug!(error = %e, "live socket ended");
        }
    })
}

#[derive(Debug, thiserror::Error)]
enum LiveError {
    #[error("sending: {0}")]
    Send(#[from] axum::Error),
    #[error(transparent)]
    Page(#[from] PageError),
}

async fn send(socket: &mut WebSocket, value: serde_json::Value) -> Result<(), LiveError> {
    socket.send(Message::Text(value.to_string().into())).await?;
    Ok(())
}

/// The live region as it is now, and the job of the latest build.
async fn current(state: &AppState, viewer: &Viewer, id: Uuid) -> Result<(String, Uuid), PageError> {
    let row = resolve::workspace(state, viewer.subject(), id, Action::Read, false).await?;
    let ws = views::workspace(state, row).await?;
    let html = askama::Template::render(&WorkspaceLive::new(&ws, &viewer.csrf))?;
    Ok((html, ws.latest_build.job.id))
}

async fn follow(
    state: AppState,
    viewer: Viewer,
    q: LiveQuery,
    mut socket: WebSocket,
) -> Result<(), LiveError> {
    // Subscribed before the first read, so no change in between is missed.
    let mut events = state
        .pubsub
        .subscribe(channels::WORKSPACE_UPDATED, Some(q.workspace.to_string()));
    let (mut shown, mut job) = current(&state, &viewer, q.workspace).await?;
    // The client's page may be older than this socket: it gets the current region at once.
    send(
        &mut socket,
        json!({"type": "html", "id": "ws-live", "html": shown}),
    )
    .await?;
    let mut tail = Some(JobLogTail::new(&state, job, q.after));
    let mut ping = tokio::time::interval(PING);
    let mut safety = tokio::time::interval(SAFETY_TICK);
    loop {
        let refresh = tokio::select! {
            () = state.shutdown.cancelled() => return Ok(()),
            event = events.recv() => {
                if event.is_none() { return Ok(()); }
                true
            }
            lines = next_lines(&mut tail) => {
                match lines {
                    Ok(Some(rows)) => {
                        let lines: Vec<_> = rows
                            .iter()
                            .map(|r| json!({"id": r.id, "text": crate::pages::workspace::line_text(r)}))
                            .collect();
                        send(&mut socket, json!({"type": "log", "lines": lines})).await?;
                        // A job's first lines mean it was picked up: pending became starting.
                        true
                    }
                    // The job ended: its last status arrives with the workspace's update.
                    Ok(None) => { tail = None; true }
                    Err(e) => { tail = None; tracing::debug!(error = %e, "live log tail"); true }
                }
            }
            _ = ping.tick() => {
                socket.send(Message::Ping(Vec::new().into())).await?;
                false
            }
            _ = safety.tick() => true,
            incoming = socket.recv() => match incoming {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return Ok(()),
                Some(Ok(_)) => false,
            },
        };
        if !refresh {
            continue;
        }
        let (html, latest_job) = match current(&state, &viewer, q.workspace).await {
            Ok(now) => now,
            // Deleted, or no longer visible: the page reloads into whatever it now is.
            Err(PageError::NotFound) => {
                send(&mut socket, json!({"type": "reload"})).await?;
                return Ok(());
            }
            Err(e) => return Err(e.into()),
        };
        if latest_job != job {
            job = latest_job;
            tail = Some(JobLogTail::new(&state, job, 0));
            send(&mut socket, json!({"type": "log-reset"})).await?;
        }
        if html != shown {
            shown = html;
            send(
                &mut socket,
                json!({"type": "html", "id": "ws-live", "html": shown}),
            )
            .await?;
        }
    }
}

/// The tail's next lines, or never when there is no tail (a finished job).
async fn next_lines(
    tail: &mut Option<JobLogTail>,
) -> coderd_core::domain::Result<Option<Vec<coderd_store::LogRow>>> {
    match tail {
        Some(t) => t.next().await,
        None => std::future::pending().await,
    }
}
