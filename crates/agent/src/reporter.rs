//! What the agent owes coderd, kept across reconnects: lifecycle changes (in order), script logs
//! (in order per log source), script timings and the latest metadata values. Producers queue; one flusher per
//! connection sends, and removes an item only once coderd has acknowledged it.
//!
//! Each pass sends logs before lifecycle changes, so that a client following the startup logs
//! until `ready` has seen every line by the time `ready` arrives.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use chrono::Utc;
use codersdk::agentsdk::{
    AgentLog, AppHealthUpdate, LifecycleChange, LogBatch, MAX_AGENT_LOGS_BYTES, MetadataValue,
    Request, Response, ScriptTiming,
};
use tokio::sync::{Notify, watch};
use uuid::Uuid;

use crate::rpc::{self, CallError, Rpc};

/// Queued lines that make the flusher send at once rather than at its next tick.
const EAGER_LINES: usize = 100;
/// Most lines in one call, so a long backlog goes in frames of a sane size.
const MAX_LINES_PER_CALL: usize = 1000;
/// Most log bytes queued while coderd is unreachable: coderd keeps no more than this per agent,
/// so holding more would only cost memory.
const MAX_QUEUED_LOG_BYTES: usize = MAX_AGENT_LOGS_BYTES as usize;
/// The pause after a call that got no answer.
const RETRY_PAUSE: Duration = Duration::from_secs(1);

#[derive(Clone)]
pub(crate) struct Reporter {
    inner: Arc<Inner>,
}

struct Inner {
    queues: Mutex<Queues>,
    wake: Notify,
    /// Bumped after every flush pass, for [`Reporter::wait_idle`].
    progress: watch::Sender<u64>,
    flush_interval: Duration,
    metadata_interval: Duration,
}

#[derive(Default)]
struct Queues {
    lifecycle: Vec<LifecycleChange>,
    script_timings: Vec<ScriptTiming>,
    logs: BTreeMap<Uuid, VecDeque<AgentLog>>,
    log_lines: usize,
    log_bytes: usize,
    /// coderd's per-agent cap was reached: logs go to files only from now on.
    logs_stopped: bool,
    dropped_lines: u64,
    metadata: BTreeMap<String, MetadataValue>,
    metadata_sent_at: Option<Instant>,
    /// The latest health per app not yet acknowledged.
    app_health: BTreeMap<Uuid, String>,
}

impl Reporter {
    pub(crate) fn new(flush_interval: Duration, metadata_interval: Duration) -> Self {
        Self {
            inner: Arc::new(Inner {
                queues: Mutex::new(Queues::default()),
                wake: Notify::new(),
                progress: watch::Sender::new(0),
                flush_interval,
                metadata_interval,
            }),
        }
    }

    fn queues(&self) -> MutexGuard<'_, Queues> {
        // A panic while holding the lock leaves plain data behind; keep reporting.
        self.inner
            .queues
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn push_lifecycle(&self, change: LifecycleChange) {
        self.queues().lifecycle.push(change);
        self.inner.wake.notify_one();
    }

    pub(crate) fn push_script_timing(&self, timing: ScriptTiming) {
        self.queues().script_timings.push(timing);
        self.inner.wake.notify_one();
    }

    pub(crate) fn push_log(&self, source: Uuid, log: AgentLog) {
        let mut q = self.queues();
        if q.logs_stopped {
            return;
        }
        if q.log_bytes + log.output.len() > MAX_QUEUED_LOG_BYTES {
            if q.dropped_lines == 0 {
                tracing::warn!(
                    "too many script logs are waiting for coderd; dropping new lines (the log files keep them)"
                );
            }
            q.dropped_lines += 1;
            return;
        }
        q.log_bytes += log.output.len();
        q.log_lines += 1;
        q.logs.entry(source).or_default().push_back(log);
        if q.log_lines >= EAGER_LINES {
            self.inner.wake.notify_one();
        }
    }

    /// Replaces the value waiting to be sent for the key, if any: only the latest matters.
    pub(crate) fn set_metadata(&self, value: MetadataValue) {
        self.queues().metadata.insert(value.key.clone(), value);
    }

    /// Queues an app's new health (replacing one not yet sent) and asks for a pass.
    pub(crate) fn set_app_health(&self, app: Uuid, health: &str) {
        self.queues().app_health.insert(app, health.to_string());
        self.inner.wake.notify_one();
    }

    /// Asks for a pass now rather than at the next tick.
    pub(crate) fn wake(&self) {
        self.inner.wake.notify_one();
    }

    /// Nothing owed but metadata (which is superseded anyway).
    pub(crate) fn is_idle(&self) -> bool {
        let q = self.queues();
        q.lifecycle.is_empty() && q.log_lines == 0 && q.script_timings.is_empty()
    }

    /// Waits until lifecycle changes and logs are all delivered; false if `timeout` ran out.
    pub(crate) async fn wait_idle(&self, timeout: Duration) -> bool {
        let mut progress = self.inner.progress.subscribe();
        self.wake();
        tokio::time::timeout(timeout, async {
            while !self.is_idle() {
                if progress.changed().await.is_err() {
                    break;
                }
            }
        })
        .await
        .is_ok()
    }

    /// Sends everything owed through `rpc`, pass after pass, until the caller drops the future
    /// (the connection ended). Calls that got no answer are retried after a pause.
    pub(crate) async fn flush_loop(&self, rpc: &impl Rpc) {
        loop {
            let pause = match self.flush(rpc).await {
                Ok(()) => self.inner.flush_interval,
                Err(error) => {
                    tracing::debug!(%error, "reporting to coderd failed; retrying");
                    RETRY_PAUSE
                }
            };
            tokio::select! {
                () = self.inner.wake.notified() => {}
                () = tokio::time::sleep(pause) => {}
            }
        }
    }

    /// One pass: logs, then lifecycle changes, then metadata if its interval has passed.
    pub(crate) async fn flush(&self, rpc: &impl Rpc) -> Result<(), CallError> {
        let result = self.flush_parts(rpc).await;
        self.inner.progress.send_modify(|n| *n += 1);
        result
    }

    async fn flush_parts(&self, rpc: &impl Rpc) -> Result<(), CallError> {
        while let Some((source, logs)) = self.next_log_batch() {
            let sent = logs.len();
            let request = Request::BatchCreateLogs(LogBatch {
                log_source_id: source,
                logs,
            });
            match rpc::call(rpc, request).await {
                Ok(response) => {
                    self.remove_logs(source, sent);
                    if let Response::Logs {
                        limit_exceeded: true,
                    } = response
                    {
                        self.stop_logs();
                    }
                }
                Err(CallError::Refused(message)) => {
                    tracing::warn!(%message, lines = sent, "coderd refused script logs; dropping them");
                    self.remove_logs(source, sent);
                }
                Err(transport) => return Err(transport),
            }
        }

        // Before the lifecycle: once `ready` is reported the start's timeline is complete.
        let timings = self.queues().script_timings.clone();
        if !timings.is_empty() {
            let sent = timings.len();
            match rpc::call(rpc, Request::ScriptsCompleted { timings }).await {
                Ok(_) => {}
                Err(CallError::Refused(message)) => {
                    tracing::warn!(%message, "coderd refused script timings; dropping them");
                }
                Err(transport) => return Err(transport),
            }
            self.queues().script_timings.drain(..sent);
        }

        let changes = self.queues().lifecycle.clone();
        if !changes.is_empty() {
            let sent = changes.len();
            match rpc::call(rpc, Request::UpdateLifecycle { changes }).await {
                Ok(_) => {}
                Err(CallError::Refused(message)) => {
                    tracing::error!(%message, "coderd refused the agent's lifecycle changes");
                }
                Err(transport) => return Err(transport),
            }
            self.queues().lifecycle.drain(..sent);
        }

        let healths = std::mem::take(&mut self.queues().app_health);
        if !healths.is_empty() {
            let updates = healths
                .iter()
                .map(|(id, health)| AppHealthUpdate {
                    id: *id,
                    health: health.clone(),
                })
                .collect();
            match rpc::call(rpc, Request::BatchUpdateAppHealths { updates }).await {
                Ok(_) => {}
                Err(CallError::Refused(message)) => {
                    tracing::warn!(%message, "coderd refused app health updates");
                }
                Err(transport) => {
                    let mut q = self.queues();
                    for (id, health) in healths {
                        q.app_health.entry(id).or_insert(health);
                    }
                    return Err(transport);
                }
            }
        }

        let values = {
            let mut q = self.queues();
            let due = q
                .metadata_sent_at
                .is_none_or(|at| at.elapsed() >= self.inner.metadata_interval);
            if !due || q.metadata.is_empty() {
                return Ok(());
            }
            q.metadata_sent_at = Some(Instant::now());
            std::mem::take(&mut q.metadata)
        };
        let request = Request::BatchUpdateMetadata {
            values: values.values().cloned().collect(),
        };
        match rpc::call(rpc, request).await {
            Ok(_) => Ok(()),
            Err(CallError::Refused(message)) => {
                tracing::warn!(%message, "coderd refused metadata values");
                Ok(())
            }
            Err(transport) => {
                // Keep what was not superseded meanwhile, for the next connection.
                let mut q = self.queues();
                for (key, value) in values {
                    q.metadata.entry(key).or_insert(value);
                }
                Err(transport)
            }
        }
    }

    fn next_log_batch(&self) -> Option<(Uuid, Vec<AgentLog>)> {
        let q = self.queues();
        let (source, lines) = q.logs.iter().find(|(_, lines)| !lines.is_empty())?;
        Some((
            *source,
            lines.iter().take(MAX_LINES_PER_CALL).cloned().collect(),
        ))
    }

    fn remove_logs(&self, source: Uuid, count: usize) {
        let mut q = self.queues();
        let Some(lines) = q.logs.get_mut(&source) else {
            return;
        };
        let removed: Vec<_> = lines.drain(..count.min(lines.len())).collect();
        if lines.is_empty() {
            q.logs.remove(&source);
        }
        q.log_lines -= removed.len();
        q.log_bytes -= removed.iter().map(|l| l.output.len()).sum::<usize>();
    }

    fn stop_logs(&self) {
        let mut q = self.queues();
        if !q.logs_stopped {
            tracing::warn!(
                "coderd's log limit for this agent is reached; script output now goes only to the log files"
            );
        }
        q.logs_stopped = true;
        q.logs.clear();
        q.log_lines = 0;
        q.log_bytes = 0;
    }
}

/// A log line stamped now.
pub(crate) fn log_line(level: &str, output: String) -> AgentLog {
    AgentLog {
        created_at: Utc::now(),
        level: level.to_string(),
        output,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use codersdk::ClientError;
    use codersdk::agentsdk::LifecycleState;

    use super::*;

    /// A peer that records calls and answers from a script (then `Ok`, or `Logs` for logs).
    #[derive(Default)]
    pub(crate) struct FakePeer {
        pub(crate) calls: Mutex<Vec<Request>>,
        answers: Mutex<VecDeque<Result<Response, ClientError>>>,
        failures: AtomicUsize,
    }

    impl FakePeer {
        pub(crate) fn answer(&self, answer: Result<Response, ClientError>) {
            self.answers
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push_back(answer);
        }

        pub(crate) fn fail_next(&self, times: usize) {
            self.failures.store(times, Ordering::SeqCst);
        }

        pub(crate) fn take_calls(&self) -> Vec<Request> {
            std::mem::take(&mut *self.calls.lock().unwrap_or_else(|p| p.into_inner()))
        }

        /// One flush pass of `reporter` through this peer, and the calls it made.
        pub(crate) async fn flushed(&self, reporter: &Reporter) -> anyhow::Result<Vec<Request>> {
            reporter
                .flush(self)
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            Ok(self.take_calls())
        }
    }

    /// A token cancelled after `delay`, as a shutdown in the middle of a test.
    pub(crate) fn cancel_after(delay: Duration) -> tokio_util::sync::CancellationToken {
        let token = tokio_util::sync::CancellationToken::new();
        let cancel = token.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            cancel.cancel();
        });
        token
    }

    impl Rpc for FakePeer {
        async fn call(&self, request: Request) -> Result<Response, ClientError> {
            if self
                .failures
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
            {
                return Err(ClientError::Decode("connection lost".into()));
            }
            let default = match &request {
                Request::BatchCreateLogs(_) => Response::Logs {
                    limit_exceeded: false,
                },
                _ => Response::Ok,
            };
            self.calls
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(request);
            self.answers
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .pop_front()
                .unwrap_or(Ok(default))
        }
    }

    fn reporter() -> Reporter {
        Reporter::new(Duration::from_millis(10), Duration::from_secs(3600))
    }

    fn change(state: LifecycleState) -> LifecycleChange {
        LifecycleChange {
            state,
            changed_at: Utc::now(),
        }
    }

    fn sent_lines(calls: &[Request]) -> Vec<(Uuid, String)> {
        calls
            .iter()
            .filter_map(|c| match c {
                Request::BatchCreateLogs(b) => Some(b),
                _ => None,
            })
            .flat_map(|b| b.logs.iter().map(|l| (b.log_source_id, l.output.clone())))
            .collect()
    }

    #[tokio::test]
    async fn logs_go_before_lifecycle_and_keep_their_order() -> anyhow::Result<()> {
        let reporter = reporter();
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        reporter.push_log(a, log_line("info", "a1".into()));
        reporter.push_log(b, log_line("error", "b1".into()));
        reporter.push_log(a, log_line("info", "a2".into()));
        reporter.push_lifecycle(change(LifecycleState::Starting));
        reporter.push_lifecycle(change(LifecycleState::Ready));
        let peer = FakePeer::default();
        let calls = peer.flushed(&reporter).await?;
        assert_eq!(calls.len(), 3, "{calls:?}");
        let mut lines = sent_lines(&calls);
        lines.sort_by_key(|(source, _)| *source != a);
        assert_eq!(
            lines,
            [(a, "a1".into()), (a, "a2".into()), (b, "b1".into())]
        );
        let Request::UpdateLifecycle { changes } = &calls[2] else {
            anyhow::bail!("lifecycle last: {calls:?}");
        };
        let states: Vec<_> = changes.iter().map(|c| c.state).collect();
        assert_eq!(states, [LifecycleState::Starting, LifecycleState::Ready]);
        assert!(reporter.is_idle());
        Ok(())
    }

    #[tokio::test]
    async fn unanswered_calls_keep_everything_for_the_next_connection() -> anyhow::Result<()> {
        let reporter = reporter();
        let source = Uuid::new_v4();
        reporter.push_log(source, log_line("info", "line".into()));
        reporter.push_lifecycle(change(LifecycleState::Starting));
        let lost = FakePeer::default();
        lost.fail_next(usize::MAX);
        assert!(reporter.flush(&lost).await.is_err());
        assert!(!reporter.is_idle());

        reporter.push_lifecycle(change(LifecycleState::Ready));
        let peer = FakePeer::default();
        peer.fail_next(1);
        assert!(reporter.flush(&peer).await.is_err(), "the first call fails");
        let calls = peer.flushed(&reporter).await?;
        assert_eq!(sent_lines(&calls), [(source, "line".to_string())]);
        let lifecycle: Vec<_> = calls
            .iter()
            .filter_map(|c| match c {
                Request::UpdateLifecycle { changes } => Some(changes.len()),
                _ => None,
            })
            .collect();
        assert_eq!(lifecycle, [2], "both changes, once, in one call");
        assert!(reporter.is_idle());
        Ok(())
    }

    #[tokio::test]
    async fn the_log_limit_stops_sending_logs() -> anyhow::Result<()> {
        let reporter = reporter();
        let source = Uuid::new_v4();
        reporter.push_log(source, log_line("info", "first".into()));
        let peer = FakePeer::default();
        peer.answer(Ok(Response::Logs {
            limit_exceeded: true,
        }));
        let mut calls = peer.flushed(&reporter).await?;
        reporter.push_log(source, log_line("info", "second".into()));
        assert!(reporter.is_idle(), "later lines are not queued");
        calls.extend(peer.flushed(&reporter).await?);
        assert_eq!(sent_lines(&calls), [(source, "first".to_string())]);
        Ok(())
    }

    #[tokio::test]
    async fn refused_items_are_dropped_not_retried_forever() -> anyhow::Result<()> {
        let reporter = reporter();
        reporter.push_lifecycle(change(LifecycleState::Starting));
        let peer = FakePeer::default();
        peer.answer(Ok(Response::Error {
            message: "no".into(),
        }));
        peer.flushed(&reporter).await?;
        assert!(reporter.is_idle());
        Ok(())
    }

    #[tokio::test]
    async fn queued_logs_are_bounded() {
        let reporter = reporter();
        let source = Uuid::new_v4();
        let big = "x".repeat(64 * 1024);
        for _ in 0..40 {
            reporter.push_log(source, log_line("info", big.clone()));
        }
        let q = reporter.queues();
        assert!(q.log_bytes <= MAX_QUEUED_LOG_BYTES);
        assert_eq!(q.log_lines, 16);
        assert_eq!(q.dropped_lines, 24);
    }

    #[tokio::test]
    async fn long_backlogs_are_split_into_calls() -> anyhow::Result<()> {
        let reporter = reporter();
        let source = Uuid::new_v4();
        for i in 0..2500 {
            reporter.push_log(source, log_line("info", i.to_string()));
        }
        let peer = FakePeer::default();
        let calls = peer.flushed(&reporter).await?;
        assert_eq!(calls.len(), 3);
        let lines = sent_lines(&calls);
        assert_eq!(lines.len(), 2500);
        assert!(
            lines
                .iter()
                .enumerate()
                .all(|(i, (_, l))| *l == i.to_string())
        );
        Ok(())
    }

    #[tokio::test]
    async fn metadata_is_batched_per_interval_latest_value_wins() -> anyhow::Result<()> {
        let reporter = Reporter::new(Duration::from_millis(10), Duration::from_millis(200));
        let value = |key: &str, v: &str| MetadataValue {
            key: key.into(),
            collected_at: Utc::now(),
            age: 0,
            value: v.into(),
            error: String::new(),
        };
        reporter.set_metadata(value("cpu", "1"));
        reporter.set_metadata(value("cpu", "2"));
        reporter.set_metadata(value("mem", "3"));
        let peer = FakePeer::default();
        let flush = async |r: &Reporter| r.flush(&peer).await.map_err(|e| anyhow::anyhow!("{e}"));
        flush(&reporter).await?;
        reporter.set_metadata(value("cpu", "4"));
        flush(&reporter).await?;
        let calls = peer.take_calls();
        assert_eq!(calls.len(), 1, "the second value waits for the interval");
        let Request::BatchUpdateMetadata { values } = &calls[0] else {
            anyhow::bail!("{calls:?}");
        };
        let got: Vec<_> = values
            .iter()
            .map(|v| (v.key.as_str(), v.value.as_str()))
            .collect();
        assert_eq!(got, [("cpu", "2"), ("mem", "3")]);

        tokio::time::sleep(Duration::from_millis(250)).await;
        peer.fail_next(1);
        assert!(flush(&reporter).await.is_err());
        reporter.set_metadata(value("mem", "5"));
        tokio::time::sleep(Duration::from_millis(250)).await;
        flush(&reporter).await?;
        let Some(Request::BatchUpdateMetadata { values }) = peer.take_calls().pop() else {
            anyhow::bail!("a batch after the failure");
        };
        let got: Vec<_> = values
            .iter()
            .map(|v| (v.key.as_str(), v.value.as_str()))
            .collect();
        assert_eq!(
            got,
            [("cpu", "4"), ("mem", "5")],
            "unsent values kept, newer ones win"
        );
        Ok(())
    }

    #[tokio::test]
    async fn wait_idle_returns_once_delivered() {
        let reporter = reporter();
        reporter.push_lifecycle(change(LifecycleState::Off));
        assert!(!reporter.wait_idle(Duration::from_millis(50)).await);
        let peer = Arc::new(FakePeer::default());
        let flusher = {
            let (reporter, peer) = (reporter.clone(), peer.clone());
            tokio::spawn(async move { reporter.flush_loop(&*peer).await })
        };
        assert!(reporter.wait_idle(Duration::from_secs(5)).await);
        flusher.abort();
    }
}
