//! Following logs live — a build's or a template import's job log, an agent's startup logs —
//! for any front door (the API's WebSockets, the dashboard's live page), with no line missed or
//! repeated: the tail subscribes before its first read, reads by id after the last line it
//! returned, and re-reads on every notification (and after a pubsub reconnect, which may have
//! dropped notifications). Access is the caller's to check first (`resolve`).

use std::future::Future;

use uuid::Uuid;

use super::Result;
use crate::state::AppState;
use coderd_store::pubsub::{Subscription, channels};
use coderd_store::{AgentLogRow, LogRow};

/// A live tail of log lines.
pub trait LogTail: Send {
    type Line: Send;

    /// The next lines (never an empty batch), or `None` when the tail has ended. Cancel-safe:
    /// a call dropped while it waits loses nothing, so front doors can race it against their
    /// client going away.
    fn next(&mut self) -> impl Future<Output = Result<Option<Vec<Self::Line>>>> + Send;
}

/// Waits for the next notification; false when the tail should end (shutdown, pubsub gone).
async fn woken(state: &AppState, events: &mut Subscription) -> bool {
    tokio::select! {
        () = state.shutdown.cancelled() => false,
        event = events.recv() => event.is_some(),
    }
}

/// The lines of a job after a given id, then new ones as they commit, until the job completes.
pub struct JobLogTail {
    state: AppState,
    job: Uuid,
    last: i64,
    events: Subscription,
    finished: bool,
}

impl JobLogTail {
    /// Starts after line id `after` (0: from the beginning).
    pub fn new(state: &AppState, job: Uuid, after: i64) -> Self {
        // Subscribed before the first read, so no line committed in between is missed.
        let events = state
            .pubsub
            .subscribe(channels::JOB_LOGS, Some(job.to_string()));
        Self {
            state: state.clone(),
            job,
            last: after,
            events,
            finished: false,
        }
    }
}

impl LogTail for JobLogTail {
    type Line = LogRow;

    /// Ends once the job has completed and every line it wrote was returned, or when coderd
    /// shuts down.
    async fn next(&mut self) -> Result<Option<Vec<LogRow>>> {
        while !self.finished {
            let rows = self.state.store.job_logs_after(self.job, self.last).await?;
            if let Some(last) = rows.last() {
                self.last = last.id;
                return Ok(Some(rows));
            }
            // Completion is announced after the last line commits: one more read after seeing
            // it returns everything.
            if self
                .state
                .store
                .job_by_id(self.job)
                .await?
                .completed_at
                .is_some()
            {
                self.finished = true;
                let rest = self.state.store.job_logs_after(self.job, self.last).await?;
                if let Some(last) = rest.last() {
                    self.last = last.id;
                    return Ok(Some(rest));
                }
                break;
            }
            if !woken(&self.state, &mut self.events).await {
                break;
            }
        }
        Ok(None)
    }
}

/// An agent's log lines after a given id, then new ones as they arrive; agent logs have no
/// natural end, so the tail lasts until its owner drops it or coderd shuts down.
pub struct AgentLogTail {
    state: AppState,
    agent: Uuid,
    last: i64,
    events: Subscription,
}

impl AgentLogTail {
    /// Starts after line id `after` (0: from the beginning).
    pub fn new(state: &AppState, agent: Uuid, after: i64) -> Self {
        let events = state
            .pubsub
            .subscribe(channels::AGENT_LOGS, Some(agent.to_string()));
        Self {
            state: state.clone(),
            agent,
            last: after,
            events,
        }
    }
}

impl LogTail for AgentLogTail {
    type Line = AgentLogRow;

    /// Ends only when coderd shuts down.
    async fn next(&mut self) -> Result<Option<Vec<AgentLogRow>>> {
        loop {
            let rows = self
                .state
                .store
                .agent_logs_after(self.agent, self.last)
                .await?;
            if let Some(last) = rows.last() {
                self.last = last.id;
                return Ok(Some(rows));
            }
            if !woken(&self.state, &mut self.events).await {
                return Ok(None);
            }
        }
    }
}
