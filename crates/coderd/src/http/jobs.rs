//! Provisioner jobs as the API shows them (status, queue position, which daemons could run
//! them, why a pending job waits), and their logs, replayed or followed live.

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use codersdk::provisionerd::Tags;
use codersdk::provisioners::{
    MatchedProvisioners, ProvisionerJob, ProvisionerJobInput, ProvisionerJobLog,
    ProvisionerJobMetadata, ProvisionerJobStatus, ProvisionerJobType,
};
use uuid::Uuid;

use super::AppState;
use super::extract::{Json, empty_as_none};
use crate::domain::render::job_status;
use crate::error::{ApiError, ApiResult};
use crate::provisioners::registry::OFFLINE_AFTER;
use crate::provisioners::tags;
use crate::pubsub::channels;
use crate::store::{DaemonRow, JobRow, LogRow};

pub fn job_tags(job: &JobRow) -> Tags {
    serde_json::from_value(job.tags.clone()).unwrap_or_default()
}

pub fn daemon_tags(daemon: &DaemonRow) -> Tags {
    serde_json::from_value(daemon.tags.clone()).unwrap_or_default()
}

pub fn daemon_online(state: &AppState, daemon: &DaemonRow) -> bool {
    state.daemons.is_connected(daemon.id)
        || (Utc::now() - daemon.last_seen_at)
            .to_std()
            .unwrap_or_default()
            < OFFLINE_AFTER
}

/// Daemons of the job's organization that could run it, and how many of them are online.
pub fn matched(
    state: &AppState,
    job: &JobRow,
    daemons: &[DaemonRow],
) -> (Vec<Uuid>, MatchedProvisioners) {
    let tags = job_tags(job);
    let matching: Vec<&DaemonRow> = daemons
        .iter()
        .filter(|d| {
            d.organization_id == job.organization_id
                && d.provisioners.contains(&job.provisioner)
                && tags::matches(&daemon_tags(d), &tags)
        })
        .collect();
    let online: Vec<Uuid> = matching
        .iter()
        .filter(|d| daemon_online(state, d))
        .map(|d| d.id)
        .collect();
    let summary = MatchedProvisioners {
        count: matching.len() as i64,
        available: online.len() as i64,
        most_recently_seen: matching.iter().map(|d| d.last_seen_at).max(),
    };
    (online, summary)
}

fn describe_tags(tags: &Tags) -> String {
    tags.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Renders a job; `daemons` are the organization's daemons (fetched once per request).
pub async fn render(
    state: &AppState,
    job: &JobRow,
    daemons: &[DaemonRow],
) -> ApiResult<ProvisionerJob> {
    let status = job_status(job);
    let (mut queue_position, mut queue_size) = (0, 0);
    let (available_workers, summary) = matched(state, job, daemons);
    let mut waiting_reason = String::new();
    if status == ProvisionerJobStatus::Pending {
        (queue_position, queue_size) = state.store.queue_position(job).await?;
        if available_workers.is_empty() {
            let tags = describe_tags(&job_tags(job));
            waiting_reason = if summary.count == 0 {
                format!(
                    "No {} provisioner daemon in this organization has tags matching this job's \
                     ({tags}); start one with matching tags (coder provisionerd start --tag ...).",
                    job.provisioner
                )
            } else {
                format!(
                    "{} {} provisioner daemon(s) match this job's tags ({tags}) but none is online.",
                    summary.count, job.provisioner
                )
            };
        }
    }
    let worker_name = job
        .worker_id
        .and_then(|w| daemons.iter().find(|d| d.id == w))
        .map(|d| d.name.clone())
        .unwrap_or_default();
    let input = ProvisionerJobInput {
        template_version_id: job
            .input
            .get("template_version_id")
            .and_then(|v| v.as_str())
            .and_then(|s| s.parse().ok()),
        workspace_build_id: job
            .input
            .get("workspace_build_id")
            .and_then(|v| v.as_str())
            .and_then(|s| s.parse().ok()),
    };
    Ok(ProvisionerJob {
        id: job.id,
        created_at: job.created_at,
        started_at: job.started_at,
        completed_at: job.completed_at,
        canceled_at: job.canceled_at,
        error: job.error.clone().unwrap_or_default(),
        error_code: job.error_code.clone().unwrap_or_default(),
        status,
        worker_id: job.worker_id,
        worker_name,
        file_id: job.file_id,
        tags: job_tags(job),
        queue_position,
        queue_size,
        organization_id: job.organization_id,
        initiator_id: job.initiator_id,
        input,
        job_type: job
            .r#type
            .parse()
            .unwrap_or(ProvisionerJobType::WorkspaceBuild),
        available_workers,
        metadata: ProvisionerJobMetadata::default(),
        logs_overflowed: job.logs_overflowed,
        waiting_reason,
    })
}

/// Renders a job together with the daemons of its organization.
pub async fn render_one(
    state: &AppState,
    job: &JobRow,
) -> ApiResult<(ProvisionerJob, MatchedProvisioners)> {
    let daemons = state.store.daemons(Some(job.organization_id), None).await?;
    let rendered = render(state, job, &daemons).await?;
    let (_, summary) = matched(state, job, &daemons);
    Ok((rendered, summary))
}

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
