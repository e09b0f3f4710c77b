//! Workspace agents over HTTP: the agent's own connection endpoint, agents as users see them
//! (details, logs, metadata), and the agent binary download the bootstrap scripts fetch.

use std::convert::Infallible;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::extract::ws::WebSocketUpgrade;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use codersdk::workspaces::{
    WorkspaceAgent, WorkspaceAgentLog, WorkspaceAgentMetadata, WorkspaceAgentMetadataDescription,
    WorkspaceAgentMetadataResult,
};
use futures::{Stream, StreamExt};
use tower_http::CompressionLevel;
use tower_http::compression::CompressionLayer;
use uuid::Uuid;

use super::AppState;
use super::jobs::{LogParams, follow};
use coderd_authz::Action;
use coderd_core::domain::logs::AgentLogTail;
use coderd_core::domain::resolve;
use coderd_http::error::{ApiError, ApiResult};
use coderd_http::extract::{Auth, Json, Path, Query, empty_as_none, token_from_parts};
use coderd_store::pubsub::channels;
use coderd_store::{AgentLogRow, MetadataEntry};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/workspaceagents/me/rpc", get(rpc))
        .route("/workspaceagents/{id}", get(get_agent))
        .route("/workspaceagents/{id}/logs", get(agent_logs))
        // Coder's older name for the same logs, still routed there.
        .route("/workspaceagents/{id}/startup-logs", get(agent_logs))
        .route("/workspaceagents/{id}/watch-metadata", get(watch_metadata))
        .route(
            "/workspaceagents/{id}/watch-metadata-ws",
            get(watch_metadata_ws),
        )
        .route("/workspaceagents/{id}/connection", get(connection_info))
}

/// The agent binary's route. Compressed for clients that accept zstd or gzip (curl
/// `--compressed` does): with the copy a release compressed ahead of time when there is one (see
/// [`coderd_core::agents::binary`]), otherwise on the fly at level 3, which keeps the cost at a fraction
/// of a second per download. The hash in the entity tag spares repeated downloads entirely.
pub fn binary_routes() -> Router<AppState> {
    Router::new()
        .route("/bin/{file}", get(download_binary))
        .layer(CompressionLayer::new().quality(CompressionLevel::Precise(3)))
}

fn invalid_token() -> ApiError {
    ApiError::unauthorized("Invalid agent token.").with_detail(
        "The token is unknown; the agent's workspace may have been rebuilt with a new agent.",
    )
}

/// `GET /workspaceagents/me/rpc`: an agent's connection. The token is checked on every
/// connect; an agent of a build that is no longer the workspace's latest is refused.
pub(super) async fn rpc(
    State(state): State<AppState>,
    request: axum::extract::Request,
) -> ApiResult<Response> {
    let (mut parts, _) = request.into_parts();
    if state.replica.is_fenced() {
        return Err(ApiError::new(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "This replica is fenced: it cannot reach the database. Connect through another one.",
        ));
    }
    let token = token_from_parts(&parts).ok_or_else(invalid_token)?;
    let auth = state
        .store
        .agent_by_token(&coderd_authz::auth::hash_secret(&token))
        .await?
        .ok_or_else(invalid_token)?;
    if auth.workspace_deleted || auth.build_number != auth.latest_build_number {
        return Err(ApiError::forbidden().with_detail(format!(
            "This agent belongs to build #{} of its workspace, but the latest build is #{}: \
             agents of old builds cannot connect.",
            auth.build_number, auth.latest_build_number
        )));
    }
    let ws = <WebSocketUpgrade as axum::extract::FromRequestParts<AppState>>::from_request_parts(
        &mut parts, &state,
    )
    .await
    .map_err(|e| {
        ApiError::bad_request("This endpoint needs a WebSocket upgrade.").with_detail(e.body_text())
    })?;
    Ok(coderd_http::websocket::long_lived(ws)
        .max_message_size(16 << 20)
        .on_upgrade(move |socket| coderd_core::agents::connection::serve(state, auth, socket))
        .into_response())
}

#[utoipa::path(get, path = "/api/v2/workspaceagents/{id}", tag = "Agents",
    params(("id" = Uuid, Path)), responses((status = 200, body = WorkspaceAgent)))]
pub(super) async fn get_agent(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<WorkspaceAgent>> {
    resolve::agent(&state, &auth.subject, id, Action::Read).await?;
    Ok(Json(coderd_core::domain::render::agent(
        state.store.agent_tree(id).await?,
    )))
}

#[utoipa::path(get, path = "/api/v2/workspaceagents/{id}/connection", tag = "Agents",
    params(("id" = Uuid, Path)),
    responses((status = 200, body = codersdk::workspaces::WorkspaceAgentConnectionInfo),
        (status = 404, body = codersdk::Response)))]
pub(super) async fn connection_info(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<codersdk::workspaces::WorkspaceAgentConnectionInfo>> {
    resolve::agent(&state, &auth.subject, id, Action::Read).await?;
    Ok(Json(codersdk::workspaces::WorkspaceAgentConnectionInfo {
        derp_map: serde_json::json!({"Regions": {}, "OmitDefaultRegions": true}),
        derp_force_websockets: true,
        disable_direct_connections: true,
        hostname_suffix: state.options.ssh.hostname_suffix.clone(),
    }))
}

fn log(row: AgentLogRow) -> WorkspaceAgentLog {
    WorkspaceAgentLog {
        id: row.id,
        created_at: row.created_at,
        output: row.output,
        level: row.level,
        source_id: row.log_source_id,
    }
}

#[utoipa::path(get, path = "/api/v2/workspaceagents/{id}/logs", tag = "Agents",
    params(("id" = Uuid, Path), ("after" = Option<i64>, Query), ("follow" = Option<bool>, Query, description = "true streams the lines live over a WebSocket; the request must then be a WebSocket upgrade (400 otherwise)")),
    responses((status = 200, body = [WorkspaceAgentLog])))]
pub(super) async fn agent_logs(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
    Query(params): Query<LogParams>,
    ws: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> ApiResult<Response> {
    resolve::agent(&state, &auth.subject, id, Action::Read).await?;
    let after = params.after.unwrap_or(0);
    if !params.follow.unwrap_or(false) {
        let rows = state.store.agent_logs_after(id, after).await?;
        return Ok(Json(rows.into_iter().map(log).collect::<Vec<_>>()).into_response());
    }
    let ws = ws.map_err(|_| {
        ApiError::bad_request("Following logs needs a WebSocket.")
            .with_detail("send the request as a WebSocket upgrade, or drop follow=true")
    })?;
    // Agent logs have no natural end: the stream lasts until the client leaves.
    let tail = AgentLogTail::new(&state, id, after);
    Ok(ws.on_upgrade(move |socket| follow(tail, log, socket)))
}

/// Go's zero time, which Coder reports for a value not collected yet.
fn never_collected() -> chrono::DateTime<chrono::Utc> {
    use chrono::TimeZone;
    chrono::Utc
        .with_ymd_and_hms(1, 1, 1, 0, 0, 0)
        .single()
        .unwrap_or(chrono::DateTime::<chrono::Utc>::MIN_UTC)
}

fn metadata(entries: Vec<MetadataEntry>) -> Vec<WorkspaceAgentMetadata> {
    let now = chrono::Utc::now();
    entries
        .into_iter()
        .map(|m| WorkspaceAgentMetadata {
            result: WorkspaceAgentMetadataResult {
                age: m.collected_at.map_or(0, |c| (now - c).num_seconds().max(0)),
                collected_at: m.collected_at.unwrap_or_else(never_collected),
                value: m.value,
                error: m.error,
            },
            description: WorkspaceAgentMetadataDescription {
                display_name: m.display_name,
                key: m.key,
                script: m.script,
                interval: m.interval_seconds,
                timeout: m.timeout_seconds,
            },
        })
        .collect()
}

#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct MetadataParams {
    /// Answer with the current values as JSON instead of an event stream.
    #[serde(default, deserialize_with = "empty_as_none")]
    snapshot: Option<bool>,
}

#[utoipa::path(get, path = "/api/v2/workspaceagents/{id}/watch-metadata", tag = "Agents",
    params(("id" = Uuid, Path), ("snapshot" = Option<bool>, Query)),
    responses((status = 200, body = [WorkspaceAgentMetadata], description = "server-sent events of the full list, or one JSON list with snapshot=true")))]
pub(super) async fn watch_metadata(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
    Query(params): Query<MetadataParams>,
) -> ApiResult<Response> {
    resolve::agent(&state, &auth.subject, id, Action::Read).await?;
    if params.snapshot.unwrap_or(false) {
        return Ok(Json(metadata(state.store.agent_metadata(id).await?)).into_response());
    }
    let events = metadata_changes(state, id).filter_map(|list| async move {
        Event::default()
            .event("data")
            .json_data(list)
            .ok()
            .map(Ok::<_, Infallible>)
    });
    Ok(Sse::new(events)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response())
}

/// `GET /workspaceagents/{id}/watch-metadata-ws`: the same lists as `watch-metadata`, as
/// WebSocket messages `{"type": "data", "data": [...]}` (what Coder's VS Code extension reads).
pub(super) async fn watch_metadata_ws(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
    ws: WebSocketUpgrade,
) -> ApiResult<Response> {
    resolve::agent(&state, &auth.subject, id, Action::Read).await?;
    let changes = metadata_changes(state, id);
    Ok(coderd_http::websocket::long_lived(ws)
        .on_upgrade(move |socket| crate::workspace_watch::send_as_messages(socket, changes)))
}

/// The full metadata list now, and again each time values change.
fn metadata_changes(
    state: AppState,
    agent: Uuid,
) -> impl Stream<Item = Vec<WorkspaceAgentMetadata>> + Send {
    let events = state
        .pubsub
        .subscribe(channels::AGENT_METADATA, Some(agent.to_string()));
    futures::stream::unfold(
        (state, events, true),
        move |(state, mut events, first)| async move {
            if !first {
                tokio::select! {
                    () = state.shutdown.cancelled() => return None,
                    e = events.recv() => { e?; }
                }
            }
            let entries = state.store.agent_metadata(agent).await.ok()?;
            Some((metadata(entries), (state, events, false)))
        },
    )
}

/// `GET /bin/coder-<os>-<arch>`: the agent binary. This server can hand out itself, so it serves
/// the platform it runs on; other platforms answer 404 with an explanation. The response is
/// compressed when the client accepts it (see [`binary_routes`]) and carries the binary's hash
/// as its entity tag: a bootstrap script holding that binary already gets 304 and no body.
pub(super) async fn download_binary(
    Path(file): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let own = format!(
        "coder-{}-{}",
        std::env::consts::OS,
        go_arch(std::env::consts::ARCH)
    );
    if file != own {
        return Err(
            ApiError::new(StatusCode::NOT_FOUND, "Binary not available.").with_detail(format!(
                "{file} is not built for this deployment: it serves only its own platform's \
                 binary, {own}"
            )),
        );
    }
    let binary = coderd_core::agents::binary::own()
        .await
        .map_err(ApiError::internal)?;
    let etag = binary.etag();
    let cached = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| binary.matches(v));
    if cached {
        return Ok((StatusCode::NOT_MODIFIED, [(header::ETAG, etag)]).into_response());
    }
    if accepts_zstd(&headers)
        && let Some(compressed) = coderd_core::agents::binary::precompressed(&binary).await
    {
        return Ok((
            [
                (header::CONTENT_TYPE, "application/octet-stream".to_string()),
                (header::CONTENT_ENCODING, "zstd".to_string()),
                (header::CONTENT_LENGTH, compressed.len.to_string()),
                (header::VARY, "accept-encoding".to_string()),
                (header::ETAG, etag),
            ],
            file_body(&compressed.path).await?,
        )
            .into_response());
    }
    Ok((
        [
            (header::CONTENT_TYPE, "application/octet-stream".to_string()),
            (header::CONTENT_LENGTH, binary.len.to_string()),
            (header::ETAG, etag),
        ],
        file_body(&binary.path).await?,
    )
        .into_response())
}

async fn file_body(path: &std::path::Path) -> ApiResult<Body> {
    let handle = tokio::fs::File::open(path)
        .await
        .map_err(ApiError::internal)?;
    Ok(Body::from_stream(
        tokio_util::io::ReaderStream::with_capacity(handle, 256 << 10),
    ))
}

/// Whether `Accept-Encoding` lists zstd with a non-zero quality.
fn accepts_zstd(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|coding| {
            let mut params = coding.split(';');
            let name = params.next().unwrap_or_default().trim();
            name.eq_ignore_ascii_case("zstd")
                && params.all(|param| {
                    param
                        .trim()
                        .strip_prefix("q=")
                        .and_then(|q| q.trim().parse::<f32>().ok())
                        .is_none_or(|q| q > 0.0)
                })
        })
}

/// Go's architecture names, which Coder's download paths use.
fn go_arch(arch: &str) -> &str {
    match arch {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "arm" => "armv7",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zstd_is_accepted_when_listed_without_a_zero_quality() {
        let accepts = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::ACCEPT_ENCODING, value.parse().expect("header"));
            accepts_zstd(&headers)
        };
        for value in [
            "zstd",
            "deflate, gzip, br, zstd",
            "gzip;q=1, ZSTD;q=0.5",
            "zstd; q=1",
        ] {
            assert!(accepts(value), "{value}");
        }
        for value in ["gzip", "zstd;q=0", "zstdx", "*", "br, gzip;q=0.8"] {
            assert!(!accepts(value), "{value}");
        }
        assert!(!accepts_zstd(&HeaderMap::new()));
    }
}
