//! One agent's connection: a yamux session over its WebSocket. The agent opens a stream per API
//! call; coderd answers on the same stream. Streams coderd opens toward the agent (SSH, TCP)
//! use the registry's control.

use std::io;

use axum::extract::ws::{Message, WebSocket};
use chrono::Utc;
use codersdk::agentsdk::{self, MAX_METADATA_VALUE, Request, Response, StreamHeader, WsIo};
use futures::{SinkExt, StreamExt};
use tokio::sync::{mpsc, watch};
use tokio_yamux::{Session, StreamHandle};
use tracing::Instrument;
use uuid::Uuid;

use crate::state::AppState;
use coderd_store::pubsub::channels;
use coderd_store::{AgentAuth, MetadataWrite};

/// How often agents should report stats.
const STATS_INTERVAL_SECONDS: u64 = 30;

/// What a connection knows about its agent.
#[derive(Clone)]
struct Agent {
    state: AppState,
    id: Uuid,
    workspace: Uuid,
}

/// Serves an authenticated agent until its connection ends or coderd shuts down.
pub async fn serve(state: AppState, auth: AgentAuth, socket: WebSocket) {
    let span = tracing::info_span!("agent", agent = %auth.agent.id, name = %auth.agent.name);
    async move {
        let (sink, stream) = socket.split();
        let incoming = stream.filter_map(|msg| async move {
            match msg {
                Ok(Message::Binary(bytes)) => Some(Ok(bytes)),
                Ok(_) => None,
                Err(e) => Some(Err(io::Error::other(e))),
            }
        });
        let outgoing = sink
            .sink_map_err(io::Error::other)
            .with(|bytes: bytes::Bytes| async move { Ok::<_, io::Error>(Message::Binary(bytes)) });
        let session = Session::new_server(WsIo::new(incoming, outgoing), agentsdk::yamux_config());
        let (inbound_tx, mut inbound) = mpsc::channel(64);
        let (closed_tx, mut closed) = watch::channel(false);
        let generation = state
            .agents
            .insert(auth.agent.id, session.control(), closed.clone());
        let driver = agentsdk::drive(session, inbound_tx, closed_tx);
        // The store calls are boxed: this future lives as long as the connection, and an
        // inlined call's state would count in its size for every connected agent.
        let epoch =
            match Box::pin(state.store.agent_connected(auth.agent.id, state.replica.id)).await {
                Ok(epoch) => epoch,
                Err(e) => {
                    // Without an epoch this connection cannot tell a newer one: refuse it, and the
                    // agent reconnects.
                    tracing::warn!(error = %e, "recording the agent's connection");
                    driver.abort();
                    state.agents.remove(auth.agent.id, generation);
                    return;
                }
            };
        tracing::info!("agent connected");
        metrics::gauge!("coderd_agents_connected").increment(1.0);
        let agent = Agent {
            state: state.clone(),
            id: auth.agent.id,
            workspace: auth.workspace_id,
        };
        // A claimed prebuild's agent is superseded by the claim build's agent holding its
        // token: the connection ends and the agent re-authenticates as that one.
        let mut updates = state
            .pubsub
            .subscribe(channels::AGENT_UPDATED, Some(auth.agent.id.to_string()));
        let mut fenced = state.replica.fenced.clone();
        loop {
            let mut updated = false;
            tokio::select! {
                () = state.shutdown.cancelled() => break,
                _ = closed.wait_for(|c| *c) => break,
                _ = fenced.wait_for(|f| *f) => {
                    tracing::info!("this replica is fenced: sending the agent elsewhere");
                    break;
                }
                Some(_) = updates.recv() => updated = true,
                next = inbound.recv() => match next {
                    Some((header, stream)) => {
                        let agent = agent.clone();
                        tokio::spawn(async move { agent.handle_stream(header, stream).await });
                    }
                    None => break,
                },
            }
            if updated && Box::pin(superseded(&state, &auth)).await {
                tracing::info!("agent superseded by a newer build's: reconnecting it");
                break;
            }
            if updated && let Some(holder) = Box::pin(moved(&state, auth.agent.id, epoch)).await {
                tracing::info!(replica = %holder, "agent reconnected elsewhere: closing this copy");
                break;
            }
        }
        // Ends the session (closing the socket) when coderd is the one leaving.
        driver.abort();
        metrics::gauge!("coderd_agents_connected").decrement(1.0);
        if state.agents.remove(auth.agent.id, generation) {
            if let Err(e) = Box::pin(state.store.agent_disconnected(auth.agent.id, epoch)).await {
                tracing::warn!(error = %e, "recording the agent's disconnection");
            }
            tracing::info!("agent disconnected");
        }
    }
    .instrument(span)
    .await
}

/// The replica holding the agent under a newer epoch than `epoch`, if one does.
async fn moved(state: &AppState, agent: Uuid, epoch: i64) -> Option<Uuid> {
    match state.store.agent_holder(agent).await {
        Ok((holder, current)) if current > epoch => Some(holder.unwrap_or_default()),
        _ => None,
    }
}

/// Whether a newer agent row now holds this agent's token.
async fn superseded(state: &AppState, auth: &AgentAuth) -> bool {
    let Some(hash) = &auth.agent.auth_token_hash else {
        return false;
    };
    matches!(
        state.store.agent_by_token(hash).await,
        Ok(Some(newest)) if newest.agent.id != auth.agent.id
    )
}

impl Agent {
    async fn handle_stream(&self, header: StreamHeader, stream: StreamHandle) {
        let StreamHeader::Rpc(request) = header else {
            // Agents open calls only; client streams go the other way.
            return;
        };
        let started = std::time::Instant::now();
        let call = call_name(&request);
        let response = self.handle(request).await;
        metrics::histogram!("coderd_agent_api_seconds", "call" => call)
            .record(started.elapsed().as_secs_f64());
        if let Err(e) = agentsdk::reply(stream, &response).await {
            tracing::debug!(error = %e, "agent went away before the answer");
        }
    }

    async fn handle(&self, request: Request) -> Response {
        let store = &self.state.store;
        let result = match request {
            Request::GetManifest => super::manifest::build(&self.state, self.id)
                .await
                .map(|m| Response::Manifest(Box::new(m))),
            Request::UpdateLifecycle { changes } => {
                let mut outcome = Ok(Response::Ok);
                for change in changes {
                    if let Err(e) = store
                        .update_agent_lifecycle(self.id, change.state, change.changed_at)
                        .await
                    {
                        outcome = Err(e);
                        break;
                    }
                }
                outcome
            }
            Request::UpdateStartup(info) => store
                .update_agent_startup(
                    self.id,
                    &info.version,
                    &info.expanded_directory,
                    &info.subsystems,
                )
                .await
                .map(|()| Response::Ok),
            Request::BatchCreateLogs(batch) => store
                .insert_agent_logs(self.id, batch.log_source_id, &batch.logs)
                .await
                .map(|limit_exceeded| Response::Logs { limit_exceeded }),
            Request::BatchUpdateAppHealths { updates } => {
                let valid = ["initializing", "healthy", "unhealthy"];
                match updates.iter().find(|u| !valid.contains(&u.health.as_str())) {
                    Some(bad) => Ok(Response::Error {
                        message: format!("unknown app health {:?}", bad.health),
                    }),
                    None => {
                        let mut outcome = Ok(Response::Ok);
                        for u in updates {
                            // Only this agent's apps with a health check change.
                            if let Err(e) = store.update_app_health(self.id, u.id, &u.health).await
                            {
                                outcome = Err(e);
                                break;
                            }
                        }
                        outcome
                    }
                }
            }
            Request::BatchUpdateMetadata { values } => {
                for v in values {
                    let (value, error) = if v.value.len() > MAX_METADATA_VALUE {
                        let mut cut = MAX_METADATA_VALUE;
                        while !v.value.is_char_boundary(cut) {
                            cut -= 1;
                        }
                        (
                            v.value[..cut].to_string(),
                            format!("value truncated to {MAX_METADATA_VALUE} bytes"),
                        )
                    } else {
                        (v.value, v.error)
                    };
                    self.state.agent_batcher.metadata(MetadataWrite {
                        agent_id: self.id,
                        key: v.key,
                        value,
                        error,
                        collected_at: v.collected_at.min(Utc::now()),
                    });
                }
                Ok(Response::Ok)
            }
            Request::UpdateStats(stats) => {
                self.state
                    .agent_batcher
                    .stats(self.id, self.workspace, stats);
                Ok(Response::Stats {
                    report_interval_seconds: STATS_INTERVAL_SECONDS,
                })
            }
            Request::ScriptsCompleted { timings } => store
                .insert_script_timings(self.id, &timings)
                .await
                .map(|()| Response::Ok),
        };
        result.unwrap_or_else(|e| {
            tracing::warn!(error = %e, "agent call failed");
            Response::Error {
                message: "coderd could not complete the call; try again".into(),
            }
        })
    }
}

fn call_name(request: &Request) -> &'static str {
    match request {
        Request::GetManifest => "get_manifest",
        Request::UpdateLifecycle { .. } => "update_lifecycle",
        Request::UpdateStartup(_) => "update_startup",
        Request::BatchCreateLogs(_) => "batch_create_logs",
        Request::BatchUpdateMetadata { .. } => "batch_update_metadata",
        Request::UpdateStats(_) => "update_stats",
        Request::ScriptsCompleted { .. } => "scripts_completed",
        Request::BatchUpdateAppHealths { .. } => "batch_update_app_healths",
    }
}
