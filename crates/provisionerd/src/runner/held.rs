//! The job a daemon holds: running, or finished with a result coderd has not confirmed yet. It
//! outlives connections, so a job goes on (and its logs and result wait) while the daemon
//! reconnects.

use codersdk::provisionerd::{DaemonMessage, JobFailure, LogLevel};
use tokio::sync::mpsc::{self, error::TrySendError};
use tokio::task::{JoinError, JoinHandle};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::cadence::Cadence;
use crate::engine::Progress;
use crate::job::Outcome;
use crate::logs::LogSink;

pub(super) const SHUTTING_DOWN: &str = "the provisioner daemon is shutting down";
/// Updates carry at most about this much output each, so no frame gets huge.
const MAX_UPDATE_BYTES: usize = 1 << 20;

/// Why the runner stopped a job before it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum StopReason {
    Canceled,
    /// The shutdown grace ran out.
    ShuttingDown,
    /// Told to stop now (a second signal), grace or not.
    StopNow,
    /// The shutdown grace ran out before the job changed anything: it goes back to the queue.
    HandingBack,
}

pub(super) struct HeldJob {
    pub(super) id: Uuid,
    pub(super) logs: LogSink,
    pub(super) progress: Progress,
    pub(super) cadence: Cadence,
    pub(super) phase: Phase,
}

pub(super) enum Phase {
    Running {
        task: JoinHandle<Outcome>,
        cancel: CancellationToken,
        stop: Option<StopReason>,
        /// When to give up on a cancelled engine and abort its task.
        abort_at: Option<Instant>,
    },
    Done {
        message: DaemonMessage,
        sent: bool,
        since: Instant,
    },
}

/// The connection went away while sending.
#[derive(Debug)]
pub(super) struct Closed;

impl HeldJob {
    pub(super) fn running(
        id: Uuid,
        logs: LogSink,
        cancel: CancellationToken,
        progress: Progress,
        task: JoinHandle<Outcome>,
        now: Instant,
    ) -> Self {
        Self {
            id,
            logs,
            progress,
            cadence: Cadence::new(now),
            phase: Phase::Running {
                task,
                cancel,
                stop: None,
                abort_at: None,
            },
        }
    }

    /// A job handed back without running (coderd sent it while the daemon was shutting down).
    pub(super) fn handed_back(id: Uuid, now: Instant) -> Self {
        Self {
            id,
            logs: LogSink::new(),
            progress: Progress::default(),
            cadence: Cadence::new(now),
            phase: Phase::Done {
                message: DaemonMessage::Release {
                    job_id: id,
                    logs: Vec::new(),
                },
                sent: false,
                since: now,
            },
        }
    }

    pub(super) fn is_running(&self) -> bool {
        matches!(self.phase, Phase::Running { .. })
    }

    pub(super) fn stopping(&self) -> Option<StopReason> {
        match self.phase {
            Phase::Running { stop, .. } => stop,
            Phase::Done { .. } => None,
        }
    }

    /// Cancels the engine, once; its task is aborted if it has not ended by `abort_at`.
    pub(super) fn stop(&mut self, reason: StopReason, abort_at: Instant) {
        let Phase::Running {
            cancel,
            stop,
            abort_at: deadline,
            ..
        } = &mut self.phase
        else {
            return;
        };
        if stop.is_some() {
            return;
        }
        let (stage, output) = match reason {
            StopReason::Canceled => (
                "Canceling",
                "The job was canceled; stopping the provisioner",
            ),
            StopReason::ShuttingDown => (
                "Shutting down",
                "The provisioner daemon is shutting down and the job ran out of time; stopping the provisioner",
            ),
            StopReason::StopNow => (
                "Shutting down",
                "The provisioner daemon was told to stop now; stopping the provisioner",
            ),
            StopReason::HandingBack => (
                "Shutting down",
                "The provisioner daemon is shutting down and the job ran out of time before it \
                 changed anything; stopping the provisioner and handing the job back to the queue",
            ),
        };
        self.logs.daemon(LogLevel::Warn, stage, output);
        *stop = Some(reason);
        *deadline = Some(abort_at);
        cancel.cancel();
    }

    pub(super) fn abort_at(&self) -> Option<Instant> {
        match &self.phase {
            Phase::Running { abort_at, .. } => *abort_at,
            Phase::Done { .. } => None,
        }
    }

    /// Aborts an engine that ignored its cancellation for too long.
    pub(super) fn abort_overdue(&mut self, now: Instant) {
        if let Phase::Running { task, abort_at, .. } = &mut self.phase
            && abort_at.is_some_and(|at| now >= at)
        {
            tracing::warn!(job_id = %self.id, "the engine did not stop after being cancelled; aborting it");
            *abort_at = None;
            task.abort();
        }
    }

    pub(super) fn finish(&mut self, ended: Result<Outcome, JoinError>, now: Instant) {
        let message = result_message(self.id, ended, self.stopping());
        match &message {
            DaemonMessage::Complete { .. } => tracing::info!(job_id = %self.id, "job completed"),
            DaemonMessage::Fail { failure, .. } => {
                tracing::info!(job_id = %self.id, error = %failure.error, canceled = failure.canceled, "job failed")
            }
            DaemonMessage::Release { .. } => {
                tracing::info!(job_id = %self.id, "job handed back to coderd's queue")
            }
            _ => {}
        }
        self.phase = Phase::Done {
            message,
            sent: false,
            since: now,
        };
    }

    /// Sends whatever is due: logs and heartbeats while running; once done, the result with
    /// the last lines in it (coderd records both in one transaction), preceded by updates when
    /// the backlog is bigger than one frame. A full channel leaves the rest for the next call.
    /// `ready`: the result also says the daemon is idle after it (protocol 1.2), so coderd
    /// sends the next job with its confirmation.
    pub(super) fn sync(
        &mut self,
        outgoing: &mpsc::Sender<DaemonMessage>,
        now: Instant,
        ready: bool,
    ) -> Result<(), Closed> {
        match &mut self.phase {
            Phase::Running { .. } => {
                if self.cadence.poll(now, !self.logs.is_empty()) {
                    // Even when the channel is full: what waits in it tells coderd the job is
                    // alive, and retrying at once would spin.
                    send_logs(self.id, &self.logs, outgoing)?;
                    self.cadence.sent(now);
                }
            }
            Phase::Done { message, sent, .. } if !*sent => {
                while self.logs.buffered_bytes() > MAX_UPDATE_BYTES {
                    let Some(permit) = reserve(outgoing)? else {
                        return Ok(());
                    };
                    permit.send(DaemonMessage::Update {
                        job_id: self.id,
                        logs: self.logs.take_batch(MAX_UPDATE_BYTES),
                    });
                }
                let Some(permit) = reserve(outgoing)? else {
                    return Ok(());
                };
                // Kept in the message: a resend after a reconnect carries them again. (A done
                // job's message is always its result.)
                if let DaemonMessage::Complete { logs, .. }
                | DaemonMessage::Fail { logs, .. }
                | DaemonMessage::Release { logs, .. } = message
                    && !self.logs.is_empty()
                {
                    logs.extend(self.logs.take());
                }
                if let DaemonMessage::Complete { ready: r, .. }
                | DaemonMessage::Fail { ready: r, .. } = message
                {
                    *r = ready;
                }
                permit.send(message.clone());
                *sent = true;
            }
            Phase::Done { .. } => {}
        }
        Ok(())
    }

    /// Whether the result last sent said the daemon is idle after it: coderd's confirmation
    /// is then followed by the next job (or by nothing until one is posted), without `Ready`.
    pub(super) fn offered_ready(&self) -> bool {
        matches!(
            self.phase,
            Phase::Done {
                message: DaemonMessage::Complete { ready: true, .. }
                    | DaemonMessage::Fail { ready: true, .. },
                sent: true,
                ..
            }
        )
    }

    /// A new connection: coderd must hear about the job at once, and a result it may not have
    /// received goes again.
    pub(super) fn reconnected(&mut self) {
        match &mut self.phase {
            Phase::Running { .. } => self.cadence.owe(),
            Phase::Done { sent, .. } => *sent = false,
        }
    }
}

/// Sends the buffered logs in updates, or one empty update (a heartbeat) when there are none.
fn send_logs(
    job_id: Uuid,
    logs: &LogSink,
    outgoing: &mpsc::Sender<DaemonMessage>,
) -> Result<(), Closed> {
    loop {
        let Some(permit) = reserve(outgoing)? else {
            return Ok(());
        };
        permit.send(DaemonMessage::Update {
            job_id,
            logs: logs.take_batch(MAX_UPDATE_BYTES),
        });
        if logs.is_empty() {
            return Ok(());
        }
    }
}

/// A slot in the channel; `None` when it is full.
fn reserve(
    outgoing: &mpsc::Sender<DaemonMessage>,
) -> Result<Option<mpsc::Permit<'_, DaemonMessage>>, Closed> {
    match outgoing.try_reserve() {
        Ok(permit) => Ok(Some(permit)),
        Err(TrySendError::Full(())) => Ok(None),
        Err(TrySendError::Closed(())) => Err(Closed),
    }
}

/// Sends one message; `Ok(false)` when the channel is full.
pub(super) fn send(
    outgoing: &mpsc::Sender<DaemonMessage>,
    message: DaemonMessage,
) -> Result<bool, Closed> {
    match outgoing.try_send(message) {
        Ok(()) => Ok(true),
        Err(TrySendError::Full(_)) => Ok(false),
        Err(TrySendError::Closed(_)) => Err(Closed),
    }
}

/// What to tell coderd about a job that ended, given why the runner stopped it (if it did).
pub(super) fn result_message(
    job_id: Uuid,
    ended: Result<Outcome, JoinError>,
    stop: Option<StopReason>,
) -> DaemonMessage {
    let outcome = ended.unwrap_or_else(|e| {
        Err(JobFailure::new(if e.is_panic() {
            "the provisioner engine crashed"
        } else {
            "the provisioner engine did not stop in time and was aborted"
        }))
    });
    if stop == Some(StopReason::HandingBack) && outcome.is_err() {
        return DaemonMessage::Release {
            job_id,
            logs: Vec::new(),
        };
    }
    let mut failure = match outcome {
        // A job that completed despite a cancel or shutdown is still complete.
        Ok(result) => {
            return DaemonMessage::Complete {
                job_id,
                result: Box::new(result),
                logs: Vec::new(),
                ready: false,
            };
        }
        Err(failure) => failure,
    };
    match stop {
        Some(StopReason::Canceled) => failure.canceled = true,
        Some(StopReason::ShuttingDown | StopReason::StopNow | StopReason::HandingBack) => {
            failure.error = SHUTTING_DOWN.into()
        }
        None => {}
    }
    if failure.error.is_empty() {
        failure.error = if failure.canceled {
            "the job was canceled".into()
        } else {
            "the provisioner failed without saying why".into()
        };
    }
    DaemonMessage::Fail {
        job_id,
        failure,
        logs: Vec::new(),
        ready: false,
    }
}

#[cfg(test)]
mod tests {
    use codersdk::provisionerd::JobResult;

    use super::*;

    fn build_result() -> JobResult {
        JobResult::WorkspaceBuild {
            state: b"s".to_vec(),
            resources: vec![],
            timings: vec![],
            features: codersdk::proto::TemplateFeatures::default(),
        }
    }

    fn failure_of(message: &DaemonMessage) -> &JobFailure {
        match message {
            DaemonMessage::Fail { failure, .. } => failure,
            other => panic!("expected a failure, got {other:?}"),
        }
    }

    #[test]
    fn completed_jobs_complete_even_when_stopped() {
        for stop in [
            None,
            Some(StopReason::Canceled),
            Some(StopReason::ShuttingDown),
        ] {
            let message = result_message(Uuid::nil(), Ok(Ok(build_result())), stop);
            assert!(
                matches!(message, DaemonMessage::Complete { .. }),
                "{stop:?}"
            );
        }
    }

    #[test]
    fn cancelled_failures_are_marked_and_keep_state() {
        let engine = JobFailure {
            state: Some(b"partial".to_vec()),
            ..JobFailure::new("interrupted")
        };
        let message = result_message(Uuid::nil(), Ok(Err(engine)), Some(StopReason::Canceled));
        let failure = failure_of(&message);
        assert!(failure.canceled);
        assert_eq!(failure.error, "interrupted");
        assert_eq!(failure.state.as_deref(), Some(&b"partial"[..]));

        let message = result_message(
            Uuid::nil(),
            Ok(Err(JobFailure::default())),
            Some(StopReason::Canceled),
        );
        assert_eq!(failure_of(&message).error, "the job was canceled");
    }

    #[test]
    fn shutdown_failures_say_so() {
        let engine = JobFailure {
            state: Some(b"partial".to_vec()),
            ..JobFailure::new("interrupted")
        };
        let message = result_message(Uuid::nil(), Ok(Err(engine)), Some(StopReason::ShuttingDown));
        let failure = failure_of(&message);
        assert_eq!(failure.error, SHUTTING_DOWN);
        assert!(!failure.canceled);
        assert!(failure.state.is_some());
    }

    #[test]
    fn a_job_stopped_before_it_changed_anything_is_handed_back() {
        let message = result_message(
            Uuid::nil(),
            Ok(Err(JobFailure::new("interrupted"))),
            Some(StopReason::HandingBack),
        );
        assert!(
            matches!(message, DaemonMessage::Release { .. }),
            "{message:?}"
        );
        // One that finished anyway is complete.
        let message = result_message(
            Uuid::nil(),
            Ok(Ok(build_result())),
            Some(StopReason::HandingBack),
        );
        assert!(
            matches!(message, DaemonMessage::Complete { .. }),
            "{message:?}"
        );
    }

    #[tokio::test]
    async fn crashed_and_aborted_engines_fail_the_job() {
        let crashed = tokio::spawn(async { panic!("engine bug") }).await;
        let message = result_message(Uuid::nil(), crashed.map(|()| Ok(build_result())), None);
        assert_eq!(failure_of(&message).error, "the provisioner engine crashed");

        let task = tokio::spawn(std::future::pending::<Outcome>());
        task.abort();
        let message = result_message(Uuid::nil(), task.await, Some(StopReason::Canceled));
        assert!(failure_of(&message).canceled);
        assert!(failure_of(&message).error.contains("aborted"));
    }

    fn result_logs(message: Option<DaemonMessage>) -> Vec<String> {
        match message {
            Some(DaemonMessage::Release { logs, .. }) => {
                logs.into_iter().map(|l| l.output).collect()
            }
            other => panic!("expected a hand-back, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn done_jobs_send_their_last_logs_with_the_result_on_every_resend() {
        let (tx, mut rx) = mpsc::channel(8);
        let mut job = HeldJob::handed_back(Uuid::nil(), Instant::now());
        job.logs.log(LogLevel::Info, "s", "last words");
        job.sync(&tx, Instant::now(), false).expect("open");
        assert_eq!(result_logs(rx.recv().await), ["last words"]);
        job.sync(&tx, Instant::now(), false).expect("open");
        assert!(
            rx.try_recv().is_err(),
            "the result goes once per connection"
        );
        job.reconnected();
        job.sync(&tx, Instant::now(), false).expect("open");
        assert_eq!(
            result_logs(rx.recv().await),
            ["last words"],
            "a resend must not lose the lines the lost send carried"
        );
        drop(rx);
        job.reconnected();
        assert!(job.sync(&tx, Instant::now(), false).is_err());
    }

    #[tokio::test]
    async fn a_backlog_bigger_than_a_frame_goes_ahead_in_updates() {
        let (tx, mut rx) = mpsc::channel(8);
        let mut job = HeldJob::handed_back(Uuid::nil(), Instant::now());
        let line = "x".repeat(64 << 10);
        for _ in 0..24 {
            job.logs.log(LogLevel::Info, "s", line.clone());
        }
        job.sync(&tx, Instant::now(), false).expect("open");
        let mut lines = 0;
        loop {
            match rx.recv().await {
                Some(DaemonMessage::Update { logs, .. }) => lines += logs.len(),
                Some(DaemonMessage::Release { logs, .. }) => {
                    lines += logs.len();
                    let bytes: usize = logs.iter().map(|l| l.output.len()).sum();
                    assert!(bytes <= MAX_UPDATE_BYTES, "{bytes} bytes in the result");
                    break;
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(lines, 24);
    }

    #[tokio::test]
    async fn a_full_channel_holds_the_result_back_without_losing_lines() {
        let (tx, mut rx) = mpsc::channel(1);
        tx.try_send(DaemonMessage::Ready).expect("room");
        let mut job = HeldJob::handed_back(Uuid::nil(), Instant::now());
        job.logs.log(LogLevel::Info, "s", "kept");
        job.sync(&tx, Instant::now(), false).expect("open");
        assert!(matches!(rx.recv().await, Some(DaemonMessage::Ready)));
        assert!(
            rx.try_recv().is_err(),
            "nothing fit while the channel was full"
        );
        job.sync(&tx, Instant::now(), false).expect("open");
        assert_eq!(result_logs(rx.recv().await), ["kept"]);
    }
}
