//! The daemon's life: connect, get welcomed, run one job at a time, deliver each result until
//! coderd confirms it, reconnect whenever the connection drops, and stop gracefully.
//!
//! Everything happens in one event loop over: the shutdown signal, the running job's task, the
//! connection (being opened, waiting for the welcome, or open), and one timer armed for the
//! earliest deadline (next log flush or heartbeat, welcome timeout, shutdown grace, abort of an
//! engine ignoring cancellation, the wait for the last confirmation).

mod cadence;
mod held;

use std::future::pending;
use std::time::Duration;

use codersdk::provisionerd::{
    AcquiredJob, DaemonMessage, JobFailure, LOG_FLUSH_INTERVAL, PROTOCOL_VERSION, ServeParams,
    ServerMessage,
};
use futures::future::BoxFuture;
use tokio::task::JoinError;
use tokio::time::{Instant, sleep, sleep_until};
use tokio_util::sync::CancellationToken;

use self::held::{HeldJob, Phase, StopReason, send};
use crate::backoff::{Backoff, MAX_DELAY, MAX_DELAY_WITH_JOB};
use crate::config::DaemonConfig;
use crate::connection::{ConnectError, Connection, Connector};
use crate::engine::Progress;
use crate::error::DaemonError;
use crate::job::{self, JobSetup, Outcome};
use crate::logs::LogSink;

/// How long coderd has to welcome a new connection.
const WELCOME_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a stopping daemon waits for coderd to confirm its last result.
const FINISH_WAIT: Duration = Duration::from_secs(5);

/// Runs the daemon until `shutdown` is cancelled (then finishes or fails the running job and
/// returns `Ok`) or coderd refuses it for good (bad credentials, incompatible version).
pub async fn run<C: Connector>(
    connector: C,
    config: DaemonConfig,
    shutdown: CancellationToken,
) -> Result<(), DaemonError> {
    run_until(connector, config, shutdown, CancellationToken::new()).await
}

/// [`run`], with a second way to stop: cancelling `now` (a second signal) stops the running job
/// at once instead of letting it use the rest of its grace, and implies `shutdown`.
#[tracing::instrument(name = "provisionerd", skip_all, fields(daemon = %config.name))]
pub async fn run_until<C: Connector>(
    connector: C,
    config: DaemonConfig,
    shutdown: CancellationToken,
    now: CancellationToken,
) -> Result<(), DaemonError> {
    config.validate()?;
    let params = config.serve_params();
    tracing::info!(provisioners = %params.provisioners, tags = %params.tags, "provisioner daemon starting");
    let mut daemon = Daemon {
        connector: &connector,
        link: Link::Connecting(connect(&connector, params.clone(), Duration::ZERO)),
        params,
        config,
        shutdown,
        now,
        backoff: Backoff::new(),
        job: None,
        stopping_since: None,
    };
    let result = daemon.run().await;
    if let Err(e) = &result {
        daemon.abandon(&e.to_string());
    }
    tracing::info!("provisioner daemon stopped");
    result
}

fn connect<'c, C: Connector>(
    connector: &'c C,
    params: ServeParams,
    delay: Duration,
) -> BoxFuture<'c, Result<Connection, ConnectError>> {
    Box::pin(async move {
        sleep(delay).await;
        connector.connect(&params).await
    })
}

enum Link<'c> {
    Connecting(BoxFuture<'c, Result<Connection, ConnectError>>),
    /// Connected; coderd has yet to say `Welcome`.
    Handshake {
        conn: Connection,
        deadline: Instant,
    },
    Open {
        conn: Connection,
        ready_sent: bool,
        since: Instant,
        /// coderd speaks 1.2 or later: a result may double as `Ready`.
        ready_with_result: bool,
        /// coderd speaks 1.3 or later: a stopping daemon withdraws its `Ready` with `Stopping`.
        says_stopping: bool,
        farewell: Farewell,
    },
    /// Only while switching between the others.
    Switching,
}

/// A stopping daemon's withdrawal of its `Ready` (protocol 1.3). coderd may have claimed a job
/// for an idle daemon that is still on its way; exiting before it arrives would leave the job
/// `running` with nobody running it, so the daemon asks and waits for the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Farewell {
    Unsaid,
    /// `Stopping` sent at this instant; coderd's `Stopped` not yet received.
    Said(Instant),
    /// coderd answered (or did not in time): no job follows.
    Settled,
}

enum Event {
    Shutdown,
    StopNow,
    JobEnded(Result<Outcome, JoinError>),
    Connected(Result<Connection, ConnectError>),
    Message(ServerMessage),
    Closed,
    Timer,
}

struct Daemon<'c, C> {
    connector: &'c C,
    params: ServeParams,
    config: DaemonConfig,
    shutdown: CancellationToken,
    now: CancellationToken,
    link: Link<'c>,
    backoff: Backoff,
    job: Option<HeldJob>,
    stopping_since: Option<Instant>,
}

impl<'c, C: Connector> Daemon<'c, C> {
    async fn run(&mut self) -> Result<(), DaemonError> {
        loop {
            let event = self.next_event().await;
            self.handle(event)?;
            self.sync();
            if self.done() {
                return Ok(());
            }
        }
    }

    async fn next_event(&mut self) -> Event {
        let deadline = self.next_deadline();
        let stopping = self.stopping_since.is_some();
        let stopping_now = self
            .job
            .as_ref()
            .is_some_and(|job| job.stopping().is_some());
        tokio::select! {
            () = self.shutdown.cancelled(), if !stopping => Event::Shutdown,
            () = self.now.cancelled(), if !stopping_now && self.job_running() => Event::StopNow,
            () = self.now.cancelled(), if !stopping => Event::Shutdown,
            ended = job_ended(&mut self.job) => Event::JobEnded(ended),
            event = link_event(&mut self.link) => event,
            () = sleep_until_opt(deadline) => Event::Timer,
        }
    }

    fn handle(&mut self, event: Event) -> Result<(), DaemonError> {
        let now = Instant::now();
        match event {
            Event::Shutdown => self.on_shutdown(now),
            Event::StopNow => {
                if self.stopping_since.is_none() {
                    self.on_shutdown(now);
                }
                if let Some(job) = &mut self.job {
                    tracing::info!(job_id = %job.id, "stopping the running job now");
                    job.stop(StopReason::StopNow, now + self.config.cancel_timeout);
                }
            }
            Event::JobEnded(ended) => {
                if let Some(job) = &mut self.job {
                    job.finish(ended, now);
                }
            }
            Event::Connected(Ok(conn)) => {
                self.link = Link::Handshake {
                    conn,
                    deadline: now + WELCOME_TIMEOUT,
                };
            }
            Event::Connected(Err(e)) => {
                if let Some(fatal) = DaemonError::from_connect(e.clone()) {
                    return Err(fatal);
                }
                tracing::warn!(error = %e, "cannot connect to coderd; retrying");
                self.reconnect();
            }
            Event::Closed => {
                tracing::warn!("lost the connection to coderd; reconnecting");
                self.reconnect();
            }
            Event::Message(message) => self.on_message(message, now)?,
            Event::Timer => self.on_timer(now),
        }
        Ok(())
    }

    fn reconnect(&mut self) {
        if let Link::Open { since, .. } = &self.link
            && since.elapsed() >= MAX_DELAY
        {
            // Only a connection that lasted resets the backoff, so a flapping one cannot make
            // the daemon hammer coderd.
            self.backoff.reset();
        }
        let cap = if self.job.is_some() {
            MAX_DELAY_WITH_JOB
        } else {
            MAX_DELAY
        };
        let delay = self.backoff.next_delay(cap);
        self.link = Link::Connecting(connect(self.connector, self.params.clone(), delay));
    }

    fn on_message(&mut self, message: ServerMessage, now: Instant) -> Result<(), DaemonError> {
        if matches!(self.link, Link::Handshake { .. }) {
            return self.on_welcome(message, now);
        }
        match message {
            ServerMessage::Welcome { .. } => {
                tracing::warn!("coderd welcomed the daemon twice; ignoring")
            }
            ServerMessage::Job(job) => self.on_job(*job, now),
            ServerMessage::Cancel { job_id } => match &mut self.job {
                Some(job) if job.id == job_id && job.is_running() => {
                    tracing::info!(%job_id, "coderd canceled the job");
                    job.stop(StopReason::Canceled, now + self.config.cancel_timeout);
                }
                _ => {
                    tracing::debug!(%job_id, "ignoring a cancel for a job that is not running here")
                }
            },
            ServerMessage::Finished { job_id } => match &self.job {
                Some(job) if job.id == job_id && !job.is_running() => {
                    tracing::info!(%job_id, "coderd stored the job's result");
                    // A result that said `ready` was this daemon's Ready: coderd sends the
                    // next job as soon as there is one.
                    let offered = job.offered_ready();
                    self.job = None;
                    if offered && let Link::Open { ready_sent, .. } = &mut self.link {
                        *ready_sent = true;
                    }
                }
                Some(job) if job.id == job_id => {
                    self.abandon("coderd finished the job while it was still running");
                }
                _ => tracing::debug!(%job_id, "ignoring a confirmation for a job not held here"),
            },
            ServerMessage::JobGone { job_id, reason } => match &self.job {
                Some(job) if job.id == job_id => {
                    self.abandon(&format!("coderd gave the job up: {reason}"));
                }
                _ => tracing::debug!(%job_id, "ignoring the loss of a job not held here"),
            },
            ServerMessage::Stopped => {
                if let Link::Open { farewell, .. } = &mut self.link {
                    tracing::info!("coderd confirmed that no job is on its way");
                    *farewell = Farewell::Settled;
                }
            }
        }
        Ok(())
    }

    fn on_welcome(&mut self, message: ServerMessage, now: Instant) -> Result<(), DaemonError> {
        let ServerMessage::Welcome {
            daemon_id,
            daemon_name,
            protocol_version,
        } = message
        else {
            tracing::warn!("coderd sent a message before its welcome; reconnecting");
            self.reconnect();
            return Ok(());
        };
        if major(&protocol_version) != major(PROTOCOL_VERSION) {
            return Err(DaemonError::Incompatible(format!(
                "coderd speaks provisioner protocol {protocol_version:?}, this daemon {PROTOCOL_VERSION:?}"
            )));
        }
        let Link::Handshake { conn, .. } = std::mem::replace(&mut self.link, Link::Switching)
        else {
            return Ok(());
        };
        tracing::info!(%daemon_id, %daemon_name, "connected to coderd");
        self.link = Link::Open {
            conn,
            ready_sent: false,
            since: now,
            ready_with_result: minor(&protocol_version) >= 2,
            says_stopping: minor(&protocol_version) >= 3,
            farewell: Farewell::Unsaid,
        };
        if let Some(job) = &mut self.job {
            job.reconnected();
        }
        Ok(())
    }

    fn on_job(&mut self, job: AcquiredJob, now: Instant) {
        let job_id = job.job_id;
        if let Link::Open {
            ready_sent, conn, ..
        } = &mut self.link
        {
            *ready_sent = false;
            if let Some(held) = &self.job {
                tracing::error!(%job_id, held = %held.id, "coderd sent a second job; refusing it");
                let failure = JobFailure::new(format!(
                    "the provisioner daemon is busy with job {}",
                    held.id
                ));
                // Best effort: coderd broke the protocol, and fails the job itself if this is lost.
                let _ = send(
                    &conn.outgoing,
                    DaemonMessage::Fail {
                        job_id,
                        failure,
                        logs: vec![],
                        ready: false,
                    },
                );
                return;
            }
        }
        if self.stopping_since.is_some() {
            tracing::warn!(%job_id, "coderd sent a job during shutdown; handing it back");
            self.job = Some(HeldJob::handed_back(job_id, now));
            return;
        }
        tracing::info!(%job_id, provisioner = %job.provisioner, "running a job");
        let logs = LogSink::new();
        let cancel = CancellationToken::new();
        let progress = Progress::default();
        let setup = JobSetup {
            engine: self.config.engines.get(&job.provisioner).cloned(),
            advertised: self.config.engines.keys().cloned().collect(),
            work_root: self.config.work_root.clone(),
            limits: self.config.archive_limits,
            logs: logs.clone(),
            cancel: cancel.clone(),
            progress: progress.clone(),
        };
        let task = job::spawn(job, setup);
        self.job = Some(HeldJob::running(job_id, logs, cancel, progress, task, now));
    }

    fn on_shutdown(&mut self, now: Instant) {
        self.stopping_since = Some(now);
        match &self.job {
            Some(job) if job.is_running() => {
                let grace = self.config.shutdown_grace;
                tracing::info!(job_id = %job.id, ?grace, "shutting down once the running job ends");
                job.logs.daemon(
                    codersdk::provisionerd::LogLevel::Warn,
                    "Shutting down",
                    format!(
                        "The provisioner daemon is shutting down; the job has {} to finish",
                        humanize(grace)
                    ),
                );
            }
            Some(job) => {
                tracing::info!(job_id = %job.id, "shutting down once coderd confirms the last result")
            }
            None => tracing::info!("shutting down"),
        }
    }

    fn on_timer(&mut self, now: Instant) {
        if let Link::Handshake { deadline, .. } = &self.link
            && now >= *deadline
        {
            tracing::warn!("coderd did not welcome the daemon in time; reconnecting");
            self.reconnect();
        }
        if self.farewell_end().is_some_and(|end| now >= end)
            && let Link::Open { farewell, .. } = &mut self.link
        {
            tracing::warn!(
                "coderd did not confirm the shutdown in time; a job it sent meanwhile fails once it notices the daemon is gone"
            );
            *farewell = Farewell::Settled;
        }
        let grace_end = self.grace_end();
        let ack_end = self.ack_end();
        let Some(job) = &mut self.job else {
            return;
        };
        job.abort_overdue(now);
        if grace_end.is_some_and(|end| now >= end) {
            let reason = if job.progress.is_applying() {
                StopReason::ShuttingDown
            } else {
                StopReason::HandingBack
            };
            job.stop(reason, now + self.config.cancel_timeout);
        }
        if ack_end.is_some_and(|end| now >= end) {
            tracing::warn!(
                job_id = %job.id,
                "coderd did not confirm the job's result before shutdown; it fails the job once it notices the daemon is gone"
            );
            self.job = None;
        }
    }

    fn job_running(&self) -> bool {
        self.job.as_ref().is_some_and(HeldJob::is_running)
    }

    /// When a stopping daemon cancels its running job.
    fn grace_end(&self) -> Option<Instant> {
        let since = self.stopping_since?;
        let job = self.job.as_ref()?;
        (job.is_running() && job.stopping().is_none()).then(|| since + self.config.shutdown_grace)
    }

    /// When a stopping daemon stops waiting for coderd to confirm its last result.
    fn ack_end(&self) -> Option<Instant> {
        let since = self.stopping_since?;
        match &self.job.as_ref()?.phase {
            Phase::Done { since: done, .. } => Some(since.max(*done) + FINISH_WAIT),
            Phase::Running { .. } => None,
        }
    }

    /// When a stopping daemon stops waiting for coderd to answer its `Stopping`.
    fn farewell_end(&self) -> Option<Instant> {
        match &self.link {
            Link::Open {
                farewell: Farewell::Said(since),
                ..
            } => Some(*since + FINISH_WAIT),
            _ => None,
        }
    }

    /// Whether this daemon, stopping and idle, must still tell coderd (or hear back) that it
    /// takes no job: it said it was idle, so a job may be on its way.
    fn farewell_pending(&self) -> bool {
        let Link::Open {
            ready_sent,
            says_stopping: true,
            farewell,
            ..
        } = &self.link
        else {
            return false;
        };
        match farewell {
            Farewell::Unsaid => *ready_sent,
            Farewell::Said(_) => true,
            Farewell::Settled => false,
        }
    }

    fn next_deadline(&self) -> Option<Instant> {
        let now = Instant::now();
        let retry = now + LOG_FLUSH_INTERVAL;
        let link = match &self.link {
            Link::Handshake { deadline, .. } => Some(*deadline),
            Link::Open { ready_sent, .. } => match &self.job {
                Some(job) => match &job.phase {
                    Phase::Running { .. } => Some(job.cadence.next_check()),
                    Phase::Done { sent: false, .. } => Some(retry),
                    Phase::Done { .. } => None,
                },
                None => match self.stopping_since {
                    None => (!ready_sent).then_some(retry),
                    // Retried when the channel was full.
                    Some(_) => self.farewell_pending().then_some(retry),
                },
            },
            Link::Connecting(_) | Link::Switching => None,
        };
        let abort = self.job.as_ref().and_then(HeldJob::abort_at);
        [
            link,
            abort,
            self.grace_end(),
            self.ack_end(),
            self.farewell_end(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Sends whatever is due on an open connection.
    fn sync(&mut self) {
        let now = Instant::now();
        let Link::Open {
            conn,
            ready_sent,
            ready_with_result,
            says_stopping,
            farewell,
            ..
        } = &mut self.link
        else {
            return;
        };
        // A stopping daemon takes no next job, so its result must not ask for one.
        let ready = *ready_with_result && self.stopping_since.is_none();
        let result = match &mut self.job {
            Some(job) => job.sync(&conn.outgoing, now, ready),
            None if !*ready_sent && self.stopping_since.is_none() => {
                send(&conn.outgoing, DaemonMessage::Ready).map(|sent| *ready_sent = sent)
            }
            None if self.stopping_since.is_some()
                && *says_stopping
                && *ready_sent
                && *farewell == Farewell::Unsaid =>
            {
                send(&conn.outgoing, DaemonMessage::Stopping).map(|sent| {
                    if sent {
                        *farewell = Farewell::Said(now);
                    }
                })
            }
            None => Ok(()),
        };
        if result.is_err() {
            tracing::warn!("lost the connection to coderd; reconnecting");
            self.reconnect();
        }
    }

    /// Whether a stopping daemon has nothing left to do. A job coderd sent before it learnt
    /// of the shutdown must not vanish: with a 1.3 coderd the daemon waits for `Stopped`, after
    /// which no job comes, handing back any job that arrives first; with an older one, a job
    /// already received is handed back.
    fn done(&mut self) -> bool {
        if self.stopping_since.is_none() || self.job.is_some() || self.farewell_pending() {
            return false;
        }
        let mut refused = None;
        if let Link::Open { conn, .. } = &mut self.link {
            while let Ok(message) = conn.incoming.try_recv() {
                if let ServerMessage::Job(job) = message {
                    refused = Some(job.job_id);
                    break;
                }
            }
        }
        let Some(job_id) = refused else {
            return true;
        };
        tracing::warn!(%job_id, "coderd sent a job during shutdown; handing it back");
        self.job = Some(HeldJob::handed_back(job_id, Instant::now()));
        self.sync();
        false
    }

    /// Lets go of the held job: its engine is cancelled (and aborted if it ignores that), its
    /// result never sent.
    fn abandon(&mut self, why: &str) {
        let Some(job) = self.job.take() else {
            return;
        };
        tracing::warn!(job_id = %job.id, reason = why, "abandoning the job");
        if let Phase::Running {
            mut task, cancel, ..
        } = job.phase
        {
            cancel.cancel();
            let timeout = self.config.cancel_timeout;
            tokio::spawn(async move {
                if tokio::time::timeout(timeout, &mut task).await.is_err() {
                    task.abort();
                }
            });
        }
    }
}

async fn job_ended(job: &mut Option<HeldJob>) -> Result<Outcome, JoinError> {
    match job {
        Some(HeldJob {
            phase: Phase::Running { task, .. },
            ..
        }) => task.await,
        _ => pending().await,
    }
}

async fn link_event(link: &mut Link<'_>) -> Event {
    match link {
        Link::Connecting(connecting) => Event::Connected(connecting.await),
        Link::Handshake { conn, .. } | Link::Open { conn, .. } => {
            match conn.incoming.recv().await {
                Some(message) => Event::Message(message),
                None => Event::Closed,
            }
        }
        Link::Switching => pending().await,
    }
}

async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => sleep_until(deadline).await,
        None => pending().await,
    }
}

fn major(version: &str) -> &str {
    version.split('.').next().unwrap_or_default().trim()
}

/// The minor version (0 when absent or unreadable).
fn minor(version: &str) -> u32 {
    version
        .split('.')
        .nth(1)
        .and_then(|m| m.trim().parse().ok())
        .unwrap_or(0)
}

fn humanize(duration: Duration) -> String {
    if duration.subsec_millis() == 0 {
        format!("{}s", duration.as_secs())
    } else {
        format!("{}ms", duration.as_millis())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_majors() {
        assert_eq!(major("1.0"), "1");
        assert_eq!(major("1.7"), major(PROTOCOL_VERSION));
        assert_ne!(major("2.0"), major(PROTOCOL_VERSION));
        assert_eq!(major(""), "");
        assert_eq!(minor("1.2"), 2);
        assert_eq!(minor("1"), 0);
        assert!(
            minor(PROTOCOL_VERSION) >= 2,
            "this daemon sends `ready` with results"
        );
    }

    #[test]
    fn grace_periods_read_well() {
        assert_eq!(humanize(Duration::from_secs(30)), "30s");
        assert_eq!(humanize(Duration::from_millis(1500)), "1500ms");
    }
}
