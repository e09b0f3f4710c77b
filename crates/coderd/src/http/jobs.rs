//! Provisioner job logs, replayed or followed live over a WebSocket (the jobs themselves are
//! rendered by `crate::domain::jobs`).

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::response::{IntoResponse, Response};
use codersdk::provisioners::ProvisionerJobLog;
use uuid::Uuid;

use super::AppState;
use super::extract::{Json, empty_as_none};
use crate::error::{ApiError, ApiResult};
use crate::pubsub::channels;
use crate::store::LogRow;

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
    Ok(ws.on_upgrade(move |socket| follow(state, job, after, socket)))
}

async fn follow(state: AppState, job: Uuid, after: i64, mut socket: WebSocket) {
    // Subscribe before the first read so no line committed in between is missed.
    let mut events = state
        .pubsub
        .subscribe(channels::JOB_LOGS, Some(job.to_string()));
    let mut last = after;
    loop {
        let rows = match state.store.job_logs_after(job, last).await {
            Ok(rows) => rows,
            Err(e) => {
                tracing::warn!(error = %e, "reading job logs");
                break;
            }
        };
        for row in rows {
            last = row.id;
            let Ok(text) = serde_json::to_string(&log(row)) else {
                continue;
            };
            if socket.send(Message::Text(text.into())).await.is_err() {
                return;
            }
        }
        // Completion is announced after the last line commits: re-read once more after seeing it.
        match state.store.job_by_id(job).await {
            Ok(j) if j.completed_at.is_some() => {
                let rest = state
                    .store
                    .job_logs_after(job, last)
                    .await
                    .unwrap_or_default();
                for row in rest {
                    let Ok(text) = serde_json::to_string(&log(row)) else {
                        continue;
                    };
                    if socket.send(Message::Text(text.into())).await.is_err() {
                        return;
                    }
                }
                break;
            }
            Ok(_) => {}
            Err(_) => break,
        }
        tokio::select! {
            () = state.shutdown.cancelled() => break,
            event = events.recv() => if event.is_none() { break },
            incoming = socket.recv() => match incoming {
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return,
                Some(Ok(_)) => {}
            },
        }
    }
    let _ = socket.send(Message::Close(None)).await;
}
