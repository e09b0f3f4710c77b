//! One connected daemon, whatever carries its messages (a WebSocket for external daemons, a
//! channel for built-in ones): hands it jobs, records its progress and results, tells it about
//! cancellation.

use std::time::Duration;

use codersdk::provisionerd::{
    DaemonMessage, JobFailure, JobResult, PROTOCOL_VERSION, ServerMessage,
};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use uuid::Uuid;

use super::dispatch::{Capability, Posting, Wake};
use super::payload;
use crate::domain;
use crate::state::AppState;
use coderd_store::pubsub::{Subscription, channels};
use coderd_store::{
    BuildContext, BuildSchedule, Claimant, Completion, CompletionFacts, DaemonRow, FinishOutcome,
    ImportResult, JobRow, ReleaseOutcome, UpdateOutcome,
};

/// How often an idle daemon looks for work on its own, in case a notification was lost.
pub const SAFETY_POLL: Duration = Duration::from_secs(10);

/// The two directions of a daemon's connection.
pub struct SessionIo {
    pub incoming: mpsc::Receiver<DaemonMessage>,
    pub outgoing: mpsc::Sender<ServerMessage>,
}

/// The session's view of the job its daemon holds.
struct Held {
    id: Uuid,
    events: Subscription,
    cancel_sent: bool,
}

struct Session {
    state: AppState,
    daemon: DaemonRow,
    capability: Capability,
    outgoing: mpsc::Sender<ServerMessage>,
    held: Option<Held>,
    waiting: Option<oneshot::Receiver<Wake>>,
    /// The daemon said `Stopping`: it takes no more jobs on this connection.
    stopping: bool,
    /// The schedule facts read with the payload of the build job sent to the daemon, from which
    /// its completion is prepared.
    prepared: Option<(Uuid, CompletionFacts)>,
}

/// Serves one daemon until it disconnects or coderd shuts down.
pub async fn run(
    state: AppState,
    daemon: DaemonRow,
    capability: Capability,
    io: SessionIo,
    shutdown: CancellationToken,
) {
    let span = tracing::info_span!("provisioner_daemon", daemon = %daemon.name, id = %daemon.id);
    async move {
        tracing::info!("provisioner daemon connected");
        state.daemons.connected(daemon.id);
        let mut session = Session {
            outgoing: io.outgoing,
            state: state.clone(),
            daemon,
            capability,
            held: None,
            waiting: None,
            stopping: false,
            prepared: None,
        };
        session.serve(io.incoming, shutdown).await;
        state.dispatcher.forget(session.daemon.id);
        session.pass_on_wake().await;
        state.daemons.disconnected(session.daemon.id);
        tracing::info!("provisioner daemon disconnected");
    }
    .instrument(span)
    .await
}

async fn wait_wake(waiting: &mut Option<oneshot::Receiver<Wake>>) -> Option<Wake> {
    match waiting {
        Some(rx) => rx.await.ok(),
        None => std::future::pending().await,
    }
}

async fn next_job_event(held: &mut Option<Held>) -> Option<coderd_store::pubsub::Event> {
    match held {
        Some(h) => h.events.recv().await,
        None => std::future::pending().await,
    }
}

impl Session {
    async fn send(&self, msg: ServerMessage) -> bool {
        self.outgoing.send(msg).await.is_ok()
    }

    async fn serve(
        &mut self,
        mut incoming: mpsc::Receiver<DaemonMessage>,
        shutdown: CancellationToken,
    ) {
        let welcome = ServerMessage::Welcome {
            daemon_id: self.daemon.id,
            daemon_name: self.daemon.name.clone(),
            protocol_version: PROTOCOL_VERSION.into(),
        };
        if !self.send(welcome).await {
            return;
        }
        // A reconnecting daemon may still hold a job from before.
        match self.state.store.current_job_of(self.daemon.id).await {
            Ok(Some(job)) => self.hold(job.id),
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "looking up the daemon's current job"),
        }
        let mut poll = tokio::time::interval(SAFETY_POLL);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let keep_going = tokio::select! {
                () = shutdown.cancelled() => false,
                msg = incoming.recv() => match msg {
                    Some(msg) => self.handle(msg).await,
                    None => false,
                },
                wake = wait_wake(&mut self.waiting) => {
                    self.waiting = None;
                    self.woken(wake).await
                }
                _ = poll.tick(), if self.waiting.is_some() => {
                    // Only a daemon idle in the queue looks on its own; one that is not there
                    // has a wake-up on its way (see `Dispatcher::take_idle`).
                    if self.state.dispatcher.take_idle(self.daemon.id) {
                        // A wake-up sent meanwhile is taken, not dropped with the receiver.
                        let wake = self.stop_waiting();
                        self.woken(wake).await
                    } else {
                        true
                    }
                }
                event = next_job_event(&mut self.held) => match event {
                    Some(_) => self.check_cancel().await,
                    None => true,
                },
            };
            if !keep_going {
                return;
            }
        }
    }

    fn hold(&mut self, job: Uuid) {
        if self.held.as_ref().is_some_and(|h| h.id == job) {
            return;
        }
        let events = self
            .state
            .pubsub
            .subscribe(channels::JOB_UPDATED, Some(job.to_string()));
        self.held = Some(Held {
            id: job,
            events,
            cancel_sent: false,
        });
    }

    fn release(&mut self, job: Uuid) {
        if self.held.as_ref().is_some_and(|h| h.id == job) {
            self.held = None;
        }
    }

    /// Returns false when the connection is gone.
    async fn handle(&mut self, msg: DaemonMessage) -> bool {
        match msg {
            DaemonMessage::Ready => {
                if let Some(held) = self.held.take() {
                    // A daemon resuming a job says so with an update or its result; one that
                    // says it is idle lost the job (it restarted under the same name).
                    self.abandon(held.id).await;
                }
                if self.waiting.is_some() {
                    return true;
                }
                self.acquire(None).await
            }
            DaemonMessage::Update { job_id, logs } => {
                match self
                    .state
                    .store
                    .update_job(job_id, self.daemon.id, &logs)
                    .await
                {
                    Ok(UpdateOutcome::Accepted { canceled }) => {
                        self.hold(job_id);
                        if canceled {
                            return self.send_cancel().await;
                        }
                        true
                    }
                    Ok(UpdateOutcome::Gone) => {
                        self.release(job_id);
                        self.send(ServerMessage::JobGone {
                            job_id,
                            reason: "the job is no longer assigned to this daemon (it completed, \
                                     was failed for missed heartbeats, or belongs to another daemon)"
                                .into(),
                        })
                        .await
                    }
                    Err(e) => {
                        // The update is lost, not the job: the daemon's next heartbeat retries.
                        tracing::warn!(error = %e, job = %job_id, "recording job update");
                        true
                    }
                }
            }
            DaemonMessage::Complete {
                job_id,
                result,
                logs,
                ready,
            } => {
                let schedule = Box::new(BuildSchedule {
                    now: self.state.options.clock.now(),
                    quiet_hours: self.state.options.quiet_hours.clone(),
                });
                let (mut completion, timings) = completion_of(*result, schedule);
                if let Completion::Build {
                    resources,
                    features,
                    external_tokens,
                    ..
                } = &mut completion
                    && features.has_external_agents
                {
                    *external_tokens =
                        crate::external_agents::seal_tokens(&self.state, job_id, resources).await;
                }
                let next = self.next_claim(ready);
                let facts = self.take_prepared(job_id);
                let outcome = self
                    .state
                    .store
                    .complete_prepared_and_claim(
                        job_id,
                        self.daemon.id,
                        &completion,
                        &timings,
                        &logs,
                        next.as_ref().map(|_| self.claimant()).as_ref(),
                        facts.as_ref(),
                    )
                    .await;
                self.finish_and_next(job_id, outcome, next).await
            }
            DaemonMessage::Fail {
                job_id,
                failure,
                logs,
                ready,
            } => {
                let next = self.next_claim(ready);
                let outcome = self
                    .state
                    .store
                    .fail_job_and_claim(
                        job_id,
                        self.daemon.id,
                        &failure,
                        &logs,
                        next.as_ref().map(|_| self.claimant()).as_ref(),
                    )
                    .await;
                self.finish_and_next(job_id, outcome, next).await
            }
            DaemonMessage::Release { job_id, logs } => self.requeue(job_id, &logs).await,
            DaemonMessage::Stopping => {
                // Messages are handled one at a time, so a job claimed for this daemon has been
                // sent already: `Stopped` reaches the daemon after it, and the daemon hands it
                // back.
                self.stopping = true;
                self.state.dispatcher.forget(self.daemon.id);
                self.pass_on_wake().await;
                self.send(ServerMessage::Stopped).await
            }
        }
    }

    /// A daemon stopping before its job changed anything hands the job back; it waits for the
    /// next matching daemon (a cancelled one ends as cancelled).
    async fn requeue(&mut self, job_id: Uuid, logs: &[codersdk::provisionerd::JobLog]) -> bool {
        match self
            .state
            .store
            .release_job(job_id, self.daemon.id, logs)
            .await
        {
            Ok(ReleaseOutcome::Requeued) => {
                tracing::info!(job = %job_id, daemon = %self.daemon.name, "the daemon handed the job back; it is queued again");
                metrics::counter!("coderd_provisioner_jobs_handed_back_total").increment(1);
                self.release(job_id);
                // Its JOB_REQUEUED notification wakes an idle daemon, here or on any replica.
                self.send(ServerMessage::Finished { job_id }).await
            }
            Ok(ReleaseOutcome::Canceled) => {
                let failure = JobFailure {
                    canceled: true,
                    ..JobFailure::new("the job was canceled")
                };
                let outcome = self
                    .state
                    .store
                    .fail_job(job_id, self.daemon.id, &failure, logs)
                    .await;
                self.finish(job_id, outcome).await
            }
            Ok(ReleaseOutcome::NotHeld) => {
                self.release(job_id);
                self.send(ServerMessage::JobGone {
                    job_id,
                    reason: "the job is no longer assigned to this daemon".into(),
                })
                .await
            }
            Err(e) => {
                // Not acknowledged: the daemon resends the hand-back.
                tracing::warn!(error = %e, job = %job_id, "handing a job back failed");
                true
            }
        }
    }

    /// The facts read with `job`'s payload, if this session sent it (a job resumed after a
    /// reconnect has none: its completion reads them).
    fn take_prepared(&mut self, job: Uuid) -> Option<CompletionFacts> {
        self.prepared
            .take()
            .filter(|(id, _)| *id == job)
            .map(|(_, facts)| facts)
    }

    fn claimant(&self) -> Claimant<'_> {
        Claimant {
            org: self.capability.org,
            provisioners: &self.capability.provisioners,
            tag_keys: &self.capability.keys,
            worker: self.daemon.id,
        }
    }

    /// For a result that doubles as `Ready`: registers the daemon as idle before the
    /// transaction that claims its next job runs, so that a posting committed meanwhile is
    /// not missed (as [`Self::acquire`] does).
    fn next_claim(&self, ready: bool) -> Option<oneshot::Receiver<Wake>> {
        (ready && !self.stopping && self.waiting.is_none())
            .then(|| self.state.dispatcher.wait(self.daemon.id, &self.capability))
    }

    /// Answers a result and, when it said `ready`, hands the daemon the job claimed with it
    /// (or waits for one). The daemon hears `Finished` before its next job.
    async fn finish_and_next(
        &mut self,
        job_id: Uuid,
        outcome: coderd_store::Result<(FinishOutcome, Option<JobRow>)>,
        next: Option<oneshot::Receiver<Wake>>,
    ) -> bool {
        let (outcome, claimed) = match outcome {
            Ok((outcome, claimed)) => (Ok(outcome), claimed),
            Err(e) => (Err(e), None),
        };
        let idle = matches!(
            outcome,
            Ok(FinishOutcome::Recorded | FinishOutcome::AlreadyRecorded)
        );
        let recorded_now = matches!(outcome, Ok(FinishOutcome::Recorded));
        if !self.finish(job_id, outcome).await {
            return false;
        }
        let Some(waiter) = next else {
            return true;
        };
        if !idle {
            // Not confirmed (the daemon resends it) or gone (the daemon says Ready itself):
            // no next job now, and a posting that woke this daemon goes to another.
            self.unwait(waiter);
            return true;
        }
        if !recorded_now {
            // A resent result, recorded before: nothing was claimed with it.
            self.unwait(waiter);
            return self.acquire(None).await;
        }
        match self.claimed(Ok(claimed), waiter, None, None).await {
            Claimed::Sent(alive) => alive,
            Claimed::Waiting => true,
            Claimed::Unpreparable => self.acquire(None).await,
        }
    }

    /// Stops waiting for postings, passing on one that arrived meanwhile.
    fn unwait(&self, mut waiter: oneshot::Receiver<Wake>) {
        self.state.dispatcher.forget(self.daemon.id);
        if let Ok(Wake::Posted(p)) = waiter.try_recv() {
            self.state.dispatcher.post(p);
        }
    }

    async fn finish(&mut self, job_id: Uuid, outcome: coderd_store::Result<FinishOutcome>) -> bool {
        match outcome {
            Ok(FinishOutcome::Recorded | FinishOutcome::AlreadyRecorded) => {
                self.release(job_id);
                metrics::counter!("coderd_provisioner_jobs_finished_total").increment(1);
                self.send(ServerMessage::Finished { job_id }).await
            }
            Ok(FinishOutcome::Gone(reason)) => {
                self.release(job_id);
                self.send(ServerMessage::JobGone { job_id, reason }).await
            }
            Err(e) => {
                // Not acknowledged: the daemon keeps its result and resends it.
                tracing::warn!(error = %e, job = %job_id, "recording job result failed");
                true
            }
        }
    }

    async fn abandon(&self, job: Uuid) {
        let failure = JobFailure {
            error_code: "daemon_restarted".into(),
            ..JobFailure::new(
                "The provisioner daemon running this job restarted and no longer runs it, so the \
                 job was failed. The workspace keeps the state it had before this job.",
            )
        };
        tracing::warn!(job = %job, "daemon came back idle; failing the job it held");
        if let Err(e) = self
            .state
            .store
            .fail_job(job, self.daemon.id, &failure, &[])
            .await
        {
            tracing::warn!(error = %e, job = %job, "failing an abandoned job");
        }
    }

    async fn send_cancel(&mut self) -> bool {
        let Some(held) = self.held.as_mut() else {
            return true;
        };
        if held.cancel_sent {
            return true;
        }
        held.cancel_sent = true;
        let job_id = held.id;
        self.send(ServerMessage::Cancel { job_id }).await
    }

    async fn check_cancel(&mut self) -> bool {
        let Some(job_id) = self.held.as_ref().map(|h| h.id) else {
            return true;
        };
        match self.state.store.job_by_id(job_id).await {
            Ok(job) if job.canceled_at.is_some() && job.completed_at.is_none() => {
                self.send_cancel().await
            }
            Ok(job) if job.completed_at.is_some() => {
                // Completed behind the daemon's back (failed for missed heartbeats).
                self.release(job_id);
                self.send(ServerMessage::JobGone {
                    job_id,
                    reason: job
                        .error
                        .unwrap_or_else(|| "the job was completed elsewhere".into()),
                })
                .await
            }
            Ok(_) => true,
            Err(e) => {
                tracing::warn!(error = %e, "checking job for cancellation");
                true
            }
        }
    }

    /// Tries to claim a job; registers as waiting first, so a posting between an empty result
    /// and the registration cannot be missed.
    async fn acquire(&mut self, mut posting: Option<Posting>) -> bool {
        if self.held.is_some() || self.stopping {
            if let Some(p) = posting {
                self.state.dispatcher.post(p);
            }
            return true;
        }
        loop {
            let waiter = self.state.dispatcher.wait(self.daemon.id, &self.capability);
            let claim = async {
                let started = std::time::Instant::now();
                let acquired = self
                    .state
                    .store
                    .acquire_job(
                        self.capability.org,
                        &self.capability.provisioners,
                        &self.capability.keys,
                        self.daemon.id,
                    )
                    .await;
                metrics::histogram!("coderd_provisioner_acquire_seconds")
                    .record(started.elapsed().as_secs_f64());
                acquired
            };
            // The posted build's payload is read on another connection while the claim commits:
            // the claim takes the posted job unless an older one waits, and then the daemon
            // gets its job a round trip sooner. A failed read is repeated after the claim.
            let (acquired, context) = match posting.as_ref().and_then(|p| p.build) {
                Some(build) => {
                    let (acquired, context) =
                        tokio::join!(claim, self.state.store.build_context(build));
                    (acquired, context.ok())
                }
                None => (claim.await, None),
            };
            match self
                .claimed(acquired, waiter, posting.take(), context)
                .await
            {
                Claimed::Sent(alive) => return alive,
                Claimed::Waiting => return true,
                Claimed::Unpreparable => {}
            }
        }
    }

    /// What follows a claim attempt: with a job, it is described (with `context` if that is
    /// its build's, read already) and sent to the daemon; without one, the daemon waits for a
    /// posting on `waiter`.
    async fn claimed(
        &mut self,
        acquired: coderd_store::Result<Option<JobRow>>,
        mut waiter: oneshot::Receiver<Wake>,
        posting: Option<Posting>,
        context: Option<BuildContext>,
    ) -> Claimed {
        let job = match acquired {
            Ok(Some(job)) => job,
            Ok(None) => {
                self.waiting = Some(waiter);
                self.state.dispatcher.settle(self.daemon.id);
                return Claimed::Waiting;
            }
            Err(e) => {
                tracing::warn!(error = %e, "acquiring a job failed; retrying on the next poll");
                self.waiting = Some(waiter);
                return Claimed::Waiting;
            }
        };
        self.state.dispatcher.forget(self.daemon.id);
        // Postings meant for this daemon that it cannot serve now go to the next idle one.
        for p in posting.into_iter().chain(match waiter.try_recv() {
            Ok(Wake::Posted(p)) => Some(p),
            _ => None,
        }) {
            if p.job != job.id {
                self.state.dispatcher.post(p);
            }
        }
        self.send_job(job, context).await
    }

    /// Describes a job this daemon holds now (with `context` if that is its build's, read
    /// already) and sends it.
    async fn send_job(&mut self, job: JobRow, context: Option<BuildContext>) -> Claimed {
        if let Some(started_at) = job.started_at {
            let waited = (started_at - job.created_at).to_std().unwrap_or_default();
            metrics::histogram!("coderd_provisioner_job_queue_wait_seconds")
                .record(waited.as_secs_f64());
        }
        match payload::describe(&self.state, &job, context).await {
            Ok(described) => {
                tracing::info!(job = %job.id, kind = %job.r#type, "job acquired");
                self.hold(job.id);
                self.prepared = described.facts.map(|facts| (job.id, facts));
                Claimed::Sent(self.send(ServerMessage::Job(Box::new(described.job))).await)
            }
            Err(e) => {
                // A job that cannot be described cannot run anywhere; fail it and look again.
                tracing::error!(error = %e, job = %job.id, "preparing the acquired job failed");
                let failure = JobFailure::new(format!("coderd could not prepare the job: {e}"));
                if let Err(e) = self
                    .state
                    .store
                    .fail_job(job.id, self.daemon.id, &failure, &[])
                    .await
                {
                    tracing::error!(error = %e, job = %job.id, "failing the unpreparable job");
                }
                Claimed::Unpreparable
            }
        }
    }
}

impl Session {
    /// Acts on a wake-up: a job claimed for this daemon at its creation is sent as it is;
    /// anything else means looking for a job.
    async fn woken(&mut self, wake: Option<Wake>) -> bool {
        match wake {
            Some(Wake::Claimed(job)) => self.take_claimed(*job).await,
            Some(Wake::Posted(p)) => self.acquire(Some(p)).await,
            Some(Wake::Look) | None => self.acquire(None).await,
        }
    }

    /// A job whose insert claimed it for this daemon (see `Dispatcher::reserve`): sent
    /// without a claim statement, or handed back to the queue when the daemon cannot take it
    /// now (it holds a job, or is stopping).
    async fn take_claimed(&mut self, job: JobRow) -> bool {
        if self.held.is_some() || self.stopping {
            domain::jobs::hand_back(&self.state, job.id, self.daemon.id).await;
            return true;
        }
        match self.send_job(job, None).await {
            Claimed::Sent(alive) => alive,
            Claimed::Waiting => true,
            Claimed::Unpreparable => self.acquire(None).await,
        }
    }

    /// Stops waiting, returning a wake-up sent before: closing the receiver first makes every
    /// later send fail, so a job claimed for this daemon is either returned here or handed
    /// back by the process that claimed it, never lost with the receiver.
    fn stop_waiting(&mut self) -> Option<Wake> {
        let mut waiter = self.waiting.take()?;
        waiter.close();
        waiter.try_recv().ok()
    }

    /// For a session that takes no more jobs (stopping, or ending): a posting meant for it goes
    /// to the next idle daemon, a job claimed for it back to the queue.
    async fn pass_on_wake(&mut self) {
        match self.stop_waiting() {
            Some(Wake::Posted(p)) => self.state.dispatcher.post(p),
            Some(Wake::Claimed(job)) => {
                domain::jobs::hand_back(&self.state, job.id, self.daemon.id).await;
            }
            Some(Wake::Look) | None => {}
        }
    }
}

/// What became of a claim.
enum Claimed {
    /// A job went to the daemon; false when the connection is gone.
    Sent(bool),
    /// No job: the daemon waits for a posting.
    Waiting,
    /// The claimed job could not be described and was failed: look again.
    Unpreparable,
}

/// Maps a daemon's result to what the store records.
fn completion_of(
    result: JobResult,
    schedule: Box<BuildSchedule>,
) -> (Completion, Vec<codersdk::provisionerd::Timing>) {
    match result {
        JobResult::TemplateImport {
            start_resources,
            stop_resources,
            rich_parameters,
            external_auth_providers,
            variables,
            readme,
            timings,
            features,
        } => (
            Completion::Import {
                result: ImportResult {
                    rich_parameters: serde_json::to_value(&rich_parameters).unwrap_or_default(),
                    variables: serde_json::to_value(&variables).unwrap_or_default(),
                    external_auth_providers: serde_json::to_value(&external_auth_providers)
                        .unwrap_or_default(),
                    readme,
                },
                start_resources,
                stop_resources,
                features,
            },
            timings,
        ),
        JobResult::WorkspaceBuild {
            state,
            resources,
            timings,
            features,
        } => (
            Completion::Build {
                state,
                resources,
                features,
                external_tokens: Vec::new(),
                schedule,
            },
            timings,
        ),
    }
}
