//! Provisioner job logs, replayed or followed live over a WebSocket (the jobs themselves are
//! rendered by `coderd_core::domain::jobs`).

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::response::{IntoResponse, Response};
use codersdk::provisioners::ProvisionerJobLog;
use serde::Serialize;
use uuid::Uuid;

use super::AppState;
use coderd_core::domain::logs::{JobLogTail, LogTail};
use coderd_http::error::{ApiError, ApiResult};
use coderd_http::extract::{Json, empty_as_none};
use coderd_store::LogRow;

fn log(row: LogRow) -> ProvisionerJobLog {
    ProvisionerJobLog {
        id: row.id,
        created_at: row.created_at,
        log_source: row.source,
        log_level: row.level,
        stage: row.stage,
        output: row.output,
    }
}

#[derive(Debug, Default, serde::Deserialize)]
pub struct LogParams {
    #[serde(default, deserialize_with = "empty_as_none")]
    pub after: Option<i64>,
    #[serde(default, deserialize_with = "empty_as_none")]
    pub follow: Option<bool>,
}

/// `GET .../logs`: the lines after `after`, or with `follow=true` a WebSocket that replays them
/// and then streams new ones until the job completes.
pub async fn logs(
    state: AppState,
    job: Uuid,
    params: LogParams,
    ws: Option<WebSocketUpgrade>,
) -> ApiResult<Response> {
    let after = params.after.unwrap_or(0);
    if !params.follow.unwrap_or(false) {
        let rows = state.store.job_logs_after(job, after).await?;
        return Ok(Json(rows.into_iter().map(log).collect::<Vec<_>>()).into_response());
    }
    let ws = ws.ok_or_else(|| {
        ApiError::bad_request("Following logs needs a WebSocket.")
            .with_detail("send the request as a WebSocket upgrade, or drop follow=true")
    })?;
    Ok(ws.on_upgrade(move |socket| follow(JobLogTail::new(&state, job, after), log, socket)))
}

/// Sends a tail's lines as JSON text messages until it ends or the client leaves.
pub async fn follow<T: LogTail, S: Serialize>(
    mut tail: T,
    render: fn(T::Line) -> S,
    mut socket: WebSocket,
) {
    loop {
        tokio::select! {
            batch = tail.next() => match batch {
                Ok(Some(lines)) => {
                    for line in lines {
                        let Ok(text) = serde_json::to_string(&render(line)) else {
                            continue;
                        };
                        if socket.send(Message::Text(text.into())).await.is_err() {
                            return;
                        }
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(error = %e, "following logs");
                    break;
                }
            },
            incoming = socket.recv() => match incoming {
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return,
                Some(Ok(_)) => {}
            },
        }
    }
    let _ = socket.send(Message::Close(None)).await;
}
