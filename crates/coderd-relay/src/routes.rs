//! The relay's HTTP endpoints: a raw stream (`connect`), the reconnecting PTY (`pty`) and the
//! listening ports. Each authorises the caller on the agent's workspace (`Connect`), opens the
//! agent's stream and waits for its answer before the WebSocket upgrade is accepted, so every
//! failure is an ordinary HTTP answer with Coder's error body.

use axum::Router;
use axum::extract::ws::{WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use codersdk::agentsdk::{ListeningPorts, StreamHeader, read_frame};
use serde::Deserialize;
use tokio_yamux::StreamHandle;
use tracing::Instrument;
use uuid::Uuid;

use super::splice::{Inbound, Splice};
use super::{OpenError, kind, open};
use coderd_authz::Action;
use coderd_core::domain::resolve;
use coderd_core::state::AppState;
use coderd_http::error::{ApiError, ApiResult};
use coderd_http::extract::{Auth, Json, Query, empty_as_none};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/workspaceagents/{id}/connect", get(connect))
        .route("/workspaceagents/{id}/pty", get(pty))
        .route(
            "/workspaceagents/{id}/listening-ports",
            get(listening_ports),
        )
}

type Upgrade = Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>;

/// The largest WebSocket message the relay reads from a client.
const MAX_MESSAGE: usize = 4 << 20;

/// The workspace an agent serves, once the caller may connect to it.
async fn authorize(state: &AppState, auth: &Auth, agent: Uuid) -> ApiResult<Uuid> {
    let target = resolve::agent(state, &auth.subject, agent, Action::Connect).await?;
    Ok(target.workspace.id)
}

/// Opens the stream, counting failures by reason for the relay's metrics.
pub(super) async fn open_counted(
    state: &AppState,
    agent: Uuid,
    header: &StreamHeader,
) -> Result<(StreamHandle, tokio::sync::watch::Receiver<bool>), OpenError> {
    let opened = open(&state.agents, agent, header).await;
    if let Err(e) = &opened {
        let reason = match e {
            OpenError::NotConnected => "not_connected",
            OpenError::Refused(_) => "refused",
            OpenError::Unreachable(_) => "unreachable",
        };
        metrics::counter!("coderd_relay_open_failures_total", "type" => kind(header), "reason" => reason)
            .increment(1);
    }
    opened
}

/// Opens the stream, turning a failure into the answer the client sees. `not_connected` is the
/// status for an agent with no connection: the streams answer 502 (clients such as `coder ssh`
/// retry on it while a workspace starts); listing ports answers 400, as Coder's does, since the
/// request asks about a state the agent is not in.
async fn open_for(
    state: &AppState,
    agent: Uuid,
    header: &StreamHeader,
    not_connected: StatusCode,
) -> ApiResult<(StreamHandle, tokio::sync::watch::Receiver<bool>)> {
    match open_counted(state, agent, header).await {
        Ok(opened) => Ok(opened),
        Err(OpenError::NotConnected) => {
            let row = state.store.agent_by_id(agent).await?;
            let status = coderd_core::domain::render::agent_status(&row);
            Err(ApiError::new(
                not_connected,
                "The workspace agent is not connected.",
            )
            .with_detail(format!(
                "Agent {:?} is {status}; start the workspace or wait for its agent to connect.",
                row.name
            )))
        }
        Err(OpenError::Refused(reason)) => Err(ApiError::new(
            StatusCode::BAD_GATEWAY,
            "The workspace agent refused the connection.",
        )
        .with_detail(reason)),
        Err(e @ OpenError::Unreachable(_)) => Err(ApiError::new(
            StatusCode::BAD_GATEWAY,
            "The workspace agent did not answer.",
        )
        .with_detail(e.to_string())),
    }
}

fn need_upgrade(ws: Upgrade) -> ApiResult<WebSocketUpgrade> {
    ws.map(|ws| {
        coderd_http::websocket::long_lived(ws)
            .max_message_size(MAX_MESSAGE)
            .max_frame_size(MAX_MESSAGE)
    })
    .map_err(|e| {
        ApiError::bad_request("This endpoint needs a WebSocket upgrade.").with_detail(e.body_text())
    })
}

/// Accepts the upgrade and splices until either side ends.
fn splice(
    state: AppState,
    ws: WebSocketUpgrade,
    opened: (StreamHandle, tokio::sync::watch::Receiver<bool>),
    workspace: Uuid,
    header: &StreamHeader,
    inbound: Inbound,
) -> Response {
    let kind = kind(header);
    ws.on_upgrade(move |socket: WebSocket| serve(state, socket, opened, workspace, kind, inbound))
}

/// Splices an accepted WebSocket onto an opened stream until either side ends.
pub(super) async fn serve(
    state: AppState,
    socket: WebSocket,
    opened: (StreamHandle, tokio::sync::watch::Receiver<bool>),
    workspace: Uuid,
    kind: &'static str,
    inbound: Inbound,
) {
    let span = tracing::info_span!("relay", %workspace, kind);
    async move {
        let (stream, closed) = opened;
        let active = state.relay_usage.begin(workspace, kind);
        let ended = Splice::new(
            socket,
            stream,
            inbound,
            closed,
            state.shutdown.clone(),
            active,
        )
        .await;
        tracing::debug!(?ended, "relay stream ended");
    }
    .instrument(span)
    .await
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ConnectType {
    Ssh,
    Tcp,
    Udp,
    Ping,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ConnectParams {
    #[serde(rename = "type")]
    kind: ConnectType,
    #[serde(default, deserialize_with = "empty_as_none")]
    port: Option<u16>,
}

/// `GET /workspaceagents/{id}/connect?type=ssh|tcp|udp|ping[&port=N]`: one raw stream into
/// the workspace over a WebSocket (binary messages; an empty one ends a direction).
#[utoipa::path(get, path = "/api/v2/workspaceagents/{id}/connect", tag = "Agents",
    params(("id" = Uuid, Path), ("type" = String, Query, description = "ssh, tcp, udp or ping"),
           ("port" = Option<u16>, Query, description = "the workspace port, for tcp and udp")),
    responses((status = 101, description = "the stream, as binary WebSocket messages"),
              (status = 502, body = codersdk::Response, description = "the agent is not connected or refused")))]
pub(crate) async fn connect(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
    Query(params): Query<ConnectParams>,
    ws: Upgrade,
) -> ApiResult<Response> {
    let port = |kind: &str| {
        params.port.filter(|p| *p != 0).ok_or_else(|| {
            ApiError::validation(vec![codersdk::ValidationError {
                field: "port".into(),
                detail: format!("a {kind} stream needs the workspace port (1-65535)"),
            }])
        })
    };
    let header = match params.kind {
        ConnectType::Ssh => StreamHeader::Ssh,
        ConnectType::Ping => StreamHeader::Ping,
        ConnectType::Tcp => StreamHeader::Tcp { port: port("tcp")? },
        ConnectType::Udp => StreamHeader::Udp { port: port("udp")? },
    };
    let ws = need_upgrade(ws)?;
    let workspace = authorize(&state, &auth, id).await?;
    let opened = open_for(&state, id, &header, StatusCode::BAD_GATEWAY).await?;
    Ok(splice(state, ws, opened, workspace, &header, Inbound::Raw))
}

#[derive(Debug, Deserialize)]
pub(crate) struct PtyParams {
    #[serde(default, deserialize_with = "empty_as_none")]
    reconnect: Option<Uuid>,
    #[serde(default, deserialize_with = "empty_as_none")]
    width: Option<u16>,
    #[serde(default, deserialize_with = "empty_as_none")]
    height: Option<u16>,
    #[serde(default)]
    command: String,
}

/// `GET /workspaceagents/{id}/pty?reconnect=<uuid>&width=&height=&command=`: Coder's
/// reconnecting PTY. Client messages are JSON `{data, height, width}`; server messages are the
/// terminal's raw output, starting with what the agent kept while nobody was attached.
#[utoipa::path(get, path = "/api/v2/workspaceagents/{id}/pty", tag = "Agents",
    params(("id" = Uuid, Path), ("reconnect" = Uuid, Query), ("width" = Option<u16>, Query),
           ("height" = Option<u16>, Query), ("command" = Option<String>, Query)),
    responses((status = 101, description = "the terminal"),
              (status = 502, body = codersdk::Response, description = "the agent is not connected or refused")))]
pub(crate) async fn pty(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
    Query(params): Query<PtyParams>,
    ws: Upgrade,
) -> ApiResult<Response> {
    let reconnect = params.reconnect.ok_or_else(|| {
        ApiError::validation(vec![codersdk::ValidationError {
            field: "reconnect".into(),
            detail: "a UUID naming the terminal, to reattach to it later".into(),
        }])
    })?;
    let header = super::PtyRequest {
        reconnect,
        width: params.width.unwrap_or(0),
        height: params.height.unwrap_or(0),
        command: params.command,
    }
    .header();
    let ws = need_upgrade(ws)?;
    let workspace = authorize(&state, &auth, id).await?;
    let opened = open_for(&state, id, &header, StatusCode::BAD_GATEWAY).await?;
    Ok(splice(state, ws, opened, workspace, &header, Inbound::Pty))
}

/// `GET /workspaceagents/{id}/listening-ports`: the TCP ports listening inside the workspace,
/// as the agent reads them from the kernel (its own left out).
#[utoipa::path(get, path = "/api/v2/workspaceagents/{id}/listening-ports", tag = "Agents",
    params(("id" = Uuid, Path)),
    responses((status = 200, body = ListeningPorts),
              (status = 400, body = codersdk::Response, description = "the agent is not connected"),
              (status = 502, body = codersdk::Response, description = "the agent did not answer, or answered wrongly")))]
pub(crate) async fn listening_ports(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<ListeningPorts>> {
    authorize(&state, &auth, id).await?;
    let header = StreamHeader::ListeningPorts;
    let (mut stream, _) = open_for(&state, id, &header, StatusCode::BAD_REQUEST).await?;
    let answer = tokio::time::timeout(super::OPEN_TIMEOUT, read_frame(&mut stream)).await;
    match answer {
        Ok(Ok(Some(ports))) => Ok(Json(ports)),
        Ok(Ok(None)) => Err(ApiError::new(
            StatusCode::BAD_GATEWAY,
            "The workspace agent closed the stream without listing its ports.",
        )),
        Ok(Err(e)) => Err(ApiError::new(
            StatusCode::BAD_GATEWAY,
            "The workspace agent's answer is invalid.",
        )
        .with_detail(e.to_string())),
        Err(_) => Err(ApiError::new(
            StatusCode::BAD_GATEWAY,
            "The workspace agent did not list its ports in time.",
        )),
    }
}
