//! coderd's side of the agent protocol, in the test: an HTTP server that checks the agent's
//! token, accepts the WebSocket, runs the yamux server session and answers calls the way the
//! protocol says. It records every call so tests can assert on what the agent reported.

use std::collections::BTreeSet;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use axum::Router;
use axum::extract::State;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response as HttpResponse};
use axum::routing::get;
use bytes::Bytes;
use codersdk::agentsdk::{
    self, AgentLog, LifecycleChange, LifecycleState, Manifest, MetadataValue, RPC_PATH, Request,
    Response, StartupInfo, StreamHeader, StreamOpen, WsIo,
};
use futures::{SinkExt, StreamExt};
use tokio::sync::{mpsc, watch};
use tokio_yamux::{Control, Session, StreamHandle};
use url::Url;
use uuid::Uuid;

/// How long a test waits for the agent to do something before failing.
pub const PATIENCE: Duration = Duration::from_secs(20);
/// The stats interval the peer asks for, so stats show up within a test.
const STATS_INTERVAL_SECONDS: u64 = 1;

pub struct Peer {
    pub url: Url,
    state: Arc<PeerState>,
    server: tokio::task::JoinHandle<()>,
}

struct PeerState {
    accepted: Mutex<BTreeSet<String>>,
    /// What tokens outside `accepted` get: (status, message).
    refusal: Mutex<(StatusCode, String)>,
    manifest: Mutex<Manifest>,
    calls: Mutex<Vec<Request>>,
    attempts: AtomicUsize,
    refused: AtomicUsize,
    logs_full: AtomicBool,
    /// Bumped on every call and connection, for [`Peer::wait_for`].
    progress: watch::Sender<u64>,
    sessions: Mutex<Vec<Control>>,
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl Peer {
    /// Serves on 127.0.0.1 and accepts `token`.
    pub async fn start(token: &str, manifest: Manifest) -> anyhow::Result<Self> {
        let state = Arc::new(PeerState {
            accepted: Mutex::new([token.to_string()].into()),
            refusal: Mutex::new((
                StatusCode::UNAUTHORIZED,
                "Workspace agent not authorized.".into(),
            )),
            manifest: Mutex::new(manifest),
            calls: Mutex::new(Vec::new()),
            attempts: AtomicUsize::new(0),
            refused: AtomicUsize::new(0),
            logs_full: AtomicBool::new(false),
            progress: watch::Sender::new(0),
            sessions: Mutex::new(Vec::new()),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = Url::parse(&format!("http://{}/", listener.local_addr()?))?;
        let app = Router::new()
            .route(RPC_PATH, get(upgrade))
            .with_state(state.clone());
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self { url, state, server })
    }

    pub fn accept_only(&self, tokens: &[&str]) {
        *lock(&self.state.accepted) = tokens.iter().map(|t| t.to_string()).collect();
    }

    pub fn refuse_with(&self, status: StatusCode, message: &str) {
        *lock(&self.state.refusal) = (status, message.to_string());
    }

    pub fn set_manifest(&self, manifest: Manifest) {
        *lock(&self.state.manifest) = manifest;
    }

    pub fn set_logs_full(&self, full: bool) {
        self.state.logs_full.store(full, Ordering::SeqCst);
    }

    /// Connection attempts so far, and how many were refused.
    pub fn attempts(&self) -> (usize, usize) {
        (
            self.state.attempts.load(Ordering::SeqCst),
            self.state.refused.load(Ordering::SeqCst),
        )
    }

    pub fn calls(&self) -> Vec<Request> {
        lock(&self.state.calls).clone()
    }

    /// Every lifecycle state reported, in order. A change whose acknowledgement was lost with
    /// the connection is sent again; like coderd, count it once.
    pub fn lifecycle(&self) -> Vec<LifecycleState> {
        let mut changes: Vec<LifecycleChange> = self
            .calls()
            .into_iter()
            .filter_map(|c| match c {
                Request::UpdateLifecycle { changes } => Some(changes),
                _ => None,
            })
            .flatten()
            .collect();
        changes.dedup();
        changes.into_iter().map(|c| c.state).collect()
    }

    pub fn startups(&self) -> Vec<StartupInfo> {
        self.calls()
            .into_iter()
            .filter_map(|c| match c {
                Request::UpdateStartup(info) => Some(info),
                _ => None,
            })
            .collect()
    }

    pub fn manifests_served(&self) -> usize {
        self.calls()
            .iter()
            .filter(|c| matches!(c, Request::GetManifest))
            .count()
    }

    /// The lines received for one log source, in order.
    pub fn logs(&self, source: Uuid) -> Vec<AgentLog> {
        self.calls()
            .into_iter()
            .filter_map(|c| match c {
                Request::BatchCreateLogs(batch) if batch.log_source_id == source => {
                    Some(batch.logs)
                }
                _ => None,
            })
            .flatten()
            .collect()
    }

    pub fn outputs(&self, source: Uuid) -> Vec<String> {
        self.logs(source).into_iter().map(|l| l.output).collect()
    }

    /// The latest value received for `key`.
    pub fn metadata(&self, key: &str) -> Option<MetadataValue> {
        self.calls()
            .into_iter()
            .filter_map(|c| match c {
                Request::BatchUpdateMetadata { values } => Some(values),
                _ => None,
            })
            .flatten()
            .rfind(|v| v.key == key)
    }

    pub fn stats(&self) -> Vec<agentsdk::Stats> {
        self.calls()
            .into_iter()
            .filter_map(|c| match c {
                Request::UpdateStats(stats) => Some(stats),
                _ => None,
            })
            .collect()
    }

    /// Waits until `check` holds, re-checking after every call the agent makes.
    pub async fn wait_for(&self, what: &str, check: impl Fn(&Self) -> bool) -> anyhow::Result<()> {
        let mut progress = self.state.progress.subscribe();
        tokio::time::timeout(PATIENCE, async {
            while !check(self) {
                // The sender lives as long as the peer.
                let _ = progress.changed().await;
            }
        })
        .await
        .with_context(|| format!("timed out waiting for {what}; calls: {:#?}", self.calls()))
    }

    /// Ends every session, as a coderd restart would.
    pub async fn disconnect(&self) {
        let sessions: Vec<Control> = std::mem::take(&mut *lock(&self.state.sessions));
        for mut control in sessions {
            control.close().await;
        }
    }

    /// Opens a client stream to the agent over its latest session.
    pub async fn open(&self, header: StreamHeader) -> anyhow::Result<StreamHandle> {
        open(&self.state, header).await
    }

    /// A TCP listener on 127.0.0.1 whose every connection is joined to a new stream of
    /// `header` (after the agent accepted it): how tests point the system's OpenSSH client
    /// at the agent, as coderd's relay and `coder ssh --stdio` do in production.
    pub async fn bridge(&self, header: StreamHeader) -> anyhow::Result<Bridge> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let state = self.state.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                // As a relay would: small packets (window adjustments) must not wait.
                let _ = socket.set_nodelay(true);
                let state = state.clone();
                let header = header.clone();
                tokio::spawn(async move {
                    let Ok(mut stream) = open(&state, header).await else {
                        return;
                    };
                    if let Ok(Some(StreamOpen::Ok)) = agentsdk::read_frame(&mut stream).await {
                        let _ = tokio::io::copy_bidirectional(&mut socket, &mut stream).await;
                    }
                });
            }
        });
        Ok(Bridge { port, task })
    }

    /// Opens a client stream and reads the agent's answer to it.
    pub async fn open_answered(
        &self,
        header: StreamHeader,
    ) -> anyhow::Result<(StreamOpen, StreamHandle)> {
        let mut stream = self.open(header.clone()).await?;
        let answer = tokio::time::timeout(PATIENCE, agentsdk::read_frame(&mut stream))
            .await
            .with_context(|| format!("no answer to {header:?}"))??
            .with_context(|| format!("{header:?} closed without an answer"))?;
        Ok((answer, stream))
    }

    /// Opens a client stream the agent must accept.
    pub async fn open_ok(&self, header: StreamHeader) -> anyhow::Result<StreamHandle> {
        match self.open_answered(header.clone()).await? {
            (StreamOpen::Ok, stream) => Ok(stream),
            (refused, _) => anyhow::bail!("{header:?} was refused: {refused:?}"),
        }
    }
}

async fn open(state: &PeerState, header: StreamHeader) -> anyhow::Result<StreamHandle> {
    let mut control = lock(&state.sessions)
        .last()
        .cloned()
        .context("the agent is not connected")?;
    let mut stream = control.open_stream().await?;
    agentsdk::write_frame(&mut stream, &header).await?;
    Ok(stream)
}

/// See [`Peer::bridge`]; stops listening when dropped.
pub struct Bridge {
    pub port: u16,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Bridge {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

async fn upgrade(
    State(state): State<Arc<PeerState>>,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> HttpResponse {
    state.attempts.fetch_add(1, Ordering::SeqCst);
    state.progress.send_modify(|n| *n += 1);
    let token = headers
        .get("Coder-Session-Token")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if !lock(&state.accepted).contains(token) {
        state.refused.fetch_add(1, Ordering::SeqCst);
        let (status, message) = lock(&state.refusal).clone();
        let body = serde_json::json!({ "message": message, "detail": "test refusal" });
        return (status, axum::Json(body)).into_response();
    }
    ws.on_upgrade(move |socket| serve(state, socket))
}

async fn serve(state: Arc<PeerState>, socket: WebSocket) {
    let (sink, stream) = socket.split();
    let incoming = stream.filter_map(|message| async move {
        match message {
            Ok(Message::Binary(bytes)) => Some(Ok(bytes)),
            Ok(_) => None,
            Err(e) => Some(Err(io::Error::other(e))),
        }
    });
    let outgoing = sink
        .sink_map_err(io::Error::other)
        .with(|bytes: Bytes| async move { Ok::<_, io::Error>(Message::Binary(bytes)) });
    let session = Session::new_server(WsIo::new(incoming, outgoing), agentsdk::yamux_config());
    lock(&state.sessions).push(session.control());
    let (inbound_tx, mut inbound) = mpsc::channel(16);
    let (closed_tx, _closed) = watch::channel(false);
    agentsdk::drive(session, inbound_tx, closed_tx);
    while let Some((header, stream)) = inbound.recv().await {
        if let StreamHeader::Rpc(request) = header {
            tokio::spawn(answer(state.clone(), request, stream));
        }
    }
}

async fn answer(state: Arc<PeerState>, request: Request, mut stream: StreamHandle) {
    let response = match &request {
        Request::GetManifest => Response::Manifest(Box::new(lock(&state.manifest).clone())),
        Request::BatchCreateLogs(_) => Response::Logs {
            limit_exceeded: state.logs_full.load(Ordering::SeqCst),
        },
        Request::UpdateStats(_) => Response::Stats {
            report_interval_seconds: STATS_INTERVAL_SECONDS,
        },
        _ => Response::Ok,
    };
    lock(&state.calls).push(request);
    let _ = agentsdk::write_frame(&mut stream, &response).await;
    state.progress.send_modify(|n| *n += 1);
}
