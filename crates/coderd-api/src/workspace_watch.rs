//! A workspace as it changes, for the clients that show a start's progress (Coder's VS Code
//! extension follows `watch-ws` while it starts a workspace for the user; the dashboard's own
//! pages use `watch`). Both send the whole workspace at once and again after every change to
//! it or to one of its agents: `watch` as server-sent events, `watch-ws` as WebSocket messages
//! of the same shape, `{"type": "data", "data": <workspace>}`. Streams have no place in the
//! OpenAPI document (the fuzzer would wait on them forever); tests cover them instead.

use std::convert::Infallible;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use codersdk::workspaces::Workspace;
use futures::{FutureExt, Stream, StreamExt};
use serde_json::json;
use uuid::Uuid;

use super::AppState;
use coderd_authz::{Action, Subject};
use coderd_core::domain::{resolve, views};
use coderd_http::error::ApiResult;
use coderd_http::extract::{Auth, Path};
use coderd_store::pubsub::{Subscription, channels};

/// Agents' statuses age without an event (connected → disconnected once its beats stop): the
/// workspace is looked at again this often even when nothing was announced.
const SAFETY_TICK: Duration = Duration::from_secs(15);
const PING: Duration = Duration::from_secs(15);

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/workspaces/{id}/watch", get(watch))
        .route("/workspaces/{id}/watch-ws", get(watch_ws))
}

pub(super) async fn watch(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
) -> ApiResult<Response> {
    let first = current(&state, &auth.subject, id).await?;
    let events = changes(state, auth.subject, id, first).map(|workspace| {
        Ok::<_, Infallible>(match Event::default().event("data").json_data(&workspace) {
            Ok(event) => event,
            Err(error) => Event::default().event("error").data(error.to_string()),
        })
    });
    Ok(Sse::new(events)
        .keep_alive(
            KeepAlive::new()
                .interval(PING)
                .event(Event::default().event("ping")),
        )
        .into_response())
}

pub(super) async fn watch_ws(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
    ws: WebSocketUpgrade,
) -> ApiResult<Response> {
    // Refused before the upgrade: a workspace the caller may not see is a plain 404.
    let first = current(&state, &auth.subject, id).await?;
    let stream = changes(state, auth.subject, id, first);
    Ok(coderd_http::websocket::long_lived(ws)
        .on_upgrade(move |socket| send_as_messages(socket, stream)))
}

/// Sends each of `changes` as `{"type": "data", "data": …}` (Coder's server-sent event shape as
/// a WebSocket message), with `{"type": "ping"}` between, until either side ends.
pub(crate) async fn send_as_messages<T: serde::Serialize>(
    mut socket: WebSocket,
    changes: impl Stream<Item = T> + Send,
) {
    let mut changes = std::pin::pin!(changes);
    let mut ping = tokio::time::interval(PING);
    loop {
        let message = tokio::select! {
            change = changes.next() => match change {
                Some(change) => json!({"type": "data", "data": change}),
                None => return,
            },
            _ = ping.tick() => json!({"type": "ping"}),
            incoming = socket.recv() => match incoming {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return,
                Some(Ok(_)) => continue,
            },
        };
        if socket
            .send(Message::Text(message.to_string().into()))
            .await
            .is_err()
        {
            return;
        }
    }
}

/// The workspace as the caller may see it now (deleted ones included: a watcher sees the end).
async fn current(state: &AppState, subject: &Subject, id: Uuid) -> ApiResult<Workspace> {
    let row = resolve::workspace(state, subject, id, Action::Read, true).await?;
    Ok(views::workspace(state, row).await?)
}

/// `first`, then the workspace again each time it differs from what was last sent. Ends when
/// the server shuts down or the caller may no longer see the workspace.
fn changes(
    state: AppState,
    subject: Subject,
    id: Uuid,
    first: Workspace,
) -> impl Stream<Item = Workspace> + Send {
    let workspace_events = state
        .pubsub
        .subscribe(channels::WORKSPACE_UPDATED, Some(id.to_string()));
    let watcher = Watcher {
        agents: agent_subscriptions(&state, &first),
        state,
        subject,
        id,
        workspace_events,
        last: None,
    };
    futures::stream::unfold((watcher, Some(first)), |(mut watcher, first)| async move {
        if let Some(first) = first {
            watcher.last = serde_json::to_value(&first).ok();
            return Some((first, (watcher, None)));
        }
        let next = watcher.next_change().await?;
        Some((next, (watcher, None)))
    })
}

struct Watcher {
    state: AppState,
    subject: Subject,
    id: Uuid,
    workspace_events: Subscription,
    /// One per agent of the latest build; replaced when a build brings other agents.
    agents: Vec<(Uuid, Subscription)>,
    last: Option<serde_json::Value>,
}

impl Watcher {
    async fn next_change(&mut self) -> Option<Workspace> {
        loop {
            tokio::select! {
                () = self.state.shutdown.cancelled() => return None,
                event = self.workspace_events.recv() => { event?; }
                event = any_event(&mut self.agents) => { event?; }
                () = tokio::time::sleep(SAFETY_TICK) => {}
            }
            let workspace = match current(&self.state, &self.subject, self.id).await {
                Ok(workspace) => workspace,
                Err(error) if error.status == axum::http::StatusCode::NOT_FOUND => return None,
                Err(error) => {
                    tracing::debug!(error = ?error.body, workspace = %self.id, "watching a workspace");
                    continue;
                }
            };
            let seen = serde_json::to_value(&workspace).ok();
            if seen.is_some() && seen == self.last {
                continue;
            }
            self.last = seen;
            let wanted = agent_ids(&workspace);
            if wanted != self.agents.iter().map(|(id, _)| *id).collect::<Vec<_>>() {
                self.agents = agent_subscriptions(&self.state, &workspace);
            }
            return Some(workspace);
        }
    }
}

fn agent_ids(workspace: &Workspace) -> Vec<Uuid> {
    workspace
        .latest_build
        .resources
        .iter()
        .flat_map(|r| r.agents.iter().map(|a| a.id))
        .collect()
}

fn agent_subscriptions(state: &AppState, workspace: &Workspace) -> Vec<(Uuid, Subscription)> {
    agent_ids(workspace)
        .into_iter()
        .map(|agent| {
            let events = state
                .pubsub
                .subscribe(channels::AGENT_UPDATED, Some(agent.to_string()));
            (agent, events)
        })
        .collect()
}

/// Resolves when any of the agents' subscriptions has an event (`None` once the pubsub is
/// gone); never, without agents.
async fn any_event(agents: &mut [(Uuid, Subscription)]) -> Option<()> {
    if agents.is_empty() {
        return std::future::pending().await;
    }
    let waits = agents.iter_mut().map(|(_, events)| events.recv().boxed());
    let (event, _, _) = futures::future::select_all(waits).await;
    event.map(drop)
}
