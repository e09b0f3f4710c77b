//! Push dispatch: idle daemons wait here, and a posted job wakes exactly one that can take it.
//!
//! A job's creation commits a `pg_notify` naming its organization, provisioner and tag key.
//! Every coderd process hears it and wakes the longest-idle local daemon whose accepted keys
//! contain that key; the daemon's session then runs the acquire statement. Waking one daemon per
//! job keeps acquisition queries proportional to jobs, not to jobs × daemons. When the woken
//! daemon ends up with another (older) job, the posting is handed on to the next idle daemon, so
//! no job waits while a matching daemon idles. A slow poll per idle daemon is only the safety
//! net for lost notifications; a pubsub reconnect wakes everyone once. A job a stopping daemon
//! hands back is announced on a channel of its own: every process has seen the job's first
//! posting and drops a repeat of it, but a hand-back is news to all of them.
//!
//! A build created while a local daemon that can run it idles skips the queue: the creating
//! process reserves that daemon ([`Dispatcher::reserve`]), the insert claims the job for it in
//! the same statement, and the session gets the claimed job ([`Wake::Claimed`]) instead of a
//! posting. That saves the claim's statement and its commit on the pickup path.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use coderd_store::pubsub::{Event, Pubsub, channels};
use coderd_store::{Claimant, JobRow};

/// A job posting as announced by its creating transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Posting {
    pub org: Uuid,
    pub job: Uuid,
    pub provisioner: String,
    pub tags_key: String,
    /// The build a workspace build job runs, known only to the process that created the job
    /// (its NOTIFY does not carry it): the woken session reads the build for the payload while
    /// its claim runs, instead of after it.
    pub build: Option<Uuid>,
}

impl From<&coderd_store::JobRow> for Posting {
    fn from(job: &coderd_store::JobRow) -> Self {
        let build = (job.r#type == "workspace_build")
            .then(|| job.input.get("workspace_build_id")?.as_str()?.parse().ok())
            .flatten();
        Self {
            org: job.organization_id,
            job: job.id,
            provisioner: job.provisioner.clone(),
            tags_key: job.tags_key.clone(),
            build,
        }
    }
}

impl Posting {
    /// Parses `<org>:<job>:<provisioner>:<tags key>` (the key may itself contain colons).
    pub fn parse(key: &str, data: &str) -> Option<Self> {
        let mut parts = data.splitn(3, ':');
        Some(Self {
            org: key.parse().ok()?,
            job: parts.next()?.parse().ok()?,
            provisioner: parts.next()?.to_string(),
            tags_key: parts.next()?.to_string(),
            build: None,
        })
    }
}

/// Why an idle daemon was woken.
#[derive(Debug, Clone, PartialEq)]
pub enum Wake {
    /// A matching job was posted.
    Posted(Posting),
    /// Something may have been missed; look.
    Look,
    /// The statement that created this job claimed it for this daemon (see
    /// [`Dispatcher::reserve`]): it is the daemon's already, to be sent as it is. A session that
    /// cannot send it hands it back to the queue.
    Claimed(Box<JobRow>),
}

struct Waiter {
    daemon: Uuid,
    org: Uuid,
    provisioners: Vec<String>,
    keys: HashSet<String>,
    wake: oneshot::Sender<Wake>,
    /// Its session found no job after registering and now only waits: it runs no claim of its
    /// own that could take a job besides one claimed for it at creation.
    settled: bool,
}

impl Waiter {
    fn takes(&self, org: Uuid, provisioner: &str, tags_key: &str) -> bool {
        self.org == org
            && self.provisioners.iter().any(|p| p == provisioner)
            && self.keys.contains(tags_key)
    }
}

#[derive(Clone, Default)]
pub struct Dispatcher {
    waiters: Arc<Mutex<VecDeque<Waiter>>>,
    /// Postings that found no idle daemon here, and wake-ups of everyone: a reserved daemon,
    /// out of the queue meanwhile, missed them if this moved while it was out.
    unserved: Arc<AtomicU64>,
    /// Jobs announced recently, so that a job this process created (and dispatched at once) is
    /// not dispatched again when its own NOTIFY comes back.
    recent: Arc<Mutex<Recent>>,
}

/// A bounded set of job ids, oldest forgotten first.
#[derive(Default)]
struct Recent {
    order: VecDeque<Uuid>,
    set: HashSet<Uuid>,
}

const RECENT_JOBS: usize = 4096;

impl Recent {
    /// Records `job`; false if it was already there.
    fn insert(&mut self, job: Uuid) -> bool {
        if !self.set.insert(job) {
            return false;
        }
        self.order.push_back(job);
        if self.order.len() > RECENT_JOBS
            && let Some(old) = self.order.pop_front()
        {
            self.set.remove(&old);
        }
        true
    }
}

/// Filter of the jobs a daemon can take.
#[derive(Debug, Clone)]
pub struct Capability {
    pub org: Uuid,
    pub provisioners: Vec<String>,
    pub keys: Vec<String>,
}

impl Dispatcher {
    /// Starts listening for postings; runs until `shutdown`.
    pub fn start(pubsub: &Pubsub, shutdown: CancellationToken) -> Self {
        let dispatcher = Self::default();
        let mut posted = pubsub.subscribe(channels::JOB_POSTED, None);
        let mut requeued = pubsub.subscribe(channels::JOB_REQUEUED, None);
        let this = dispatcher.clone();
        tokio::spawn(async move {
            loop {
                let (event, requeue) = tokio::select! {
                    () = shutdown.cancelled() => return,
                    e = posted.recv() => (e, false),
                    e = requeued.recv() => (e, true),
                };
                match event {
                    Some(Event::Message { key, data }) => {
                        match Posting::parse(&key, &data) {
                            // Known here already by its first posting: dispatched again.
                            Some(posting) if requeue => this.post(posting),
                            Some(posting) => this.announce(posting),
                            None => {}
                        }
                    }
                    Some(Event::Reconnected) => this.wake_all(),
                    None => return,
                }
            }
        });
        dispatcher
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Waiter>> {
        self.waiters.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers an idle daemon; the receiver fires when it should try to acquire.
    pub fn wait(&self, daemon: Uuid, capability: &Capability) -> oneshot::Receiver<Wake> {
        let (tx, rx) = oneshot::channel();
        let mut waiters = self.lock();
        waiters.retain(|w| w.daemon != daemon);
        waiters.push_back(Waiter {
            daemon,
            org: capability.org,
            provisioners: capability.provisioners.clone(),
            keys: capability.keys.iter().cloned().collect(),
            wake: tx,
            settled: false,
        });
        rx
    }

    /// Marks `daemon`'s waiter as settled: its session's claim came back empty and it now
    /// only waits for a wake-up, so it may be reserved for a job at creation.
    pub fn settle(&self, daemon: Uuid) {
        if let Some(w) = self.lock().iter_mut().find(|w| w.daemon == daemon) {
            w.settled = true;
        }
    }

    /// Takes the longest-idle settled daemon here that can run a job of `org`, `provisioner`
    /// and `tags_key` out of the queue, for the statement that creates such a job to claim it
    /// for that daemon. Only a settled one: a daemon whose session is claiming on its own could
    /// end up with two jobs. Daemons of other replicas are not here, so never reserved; their
    /// jobs go through the posting as before. Dropping the reservation unused gives the daemon
    /// back (see [`Reserved`]).
    pub fn reserve(&self, org: Uuid, provisioner: &str, tags_key: &str) -> Option<Reserved> {
        let mut waiters = self.lock();
        waiters.retain(|w| !w.wake.is_closed());
        let index = waiters
            .iter()
            .position(|w| w.settled && w.takes(org, provisioner, tags_key))?;
        let waiter = waiters.remove(index)?;
        Some(Reserved {
            dispatcher: self.clone(),
            index,
            unserved: self.unserved.load(Ordering::SeqCst),
            keys: waiter.keys.iter().cloned().collect(),
            waiter: Some(waiter),
        })
    }

    /// Removes a daemon that stopped waiting (busy, disconnected).
    pub fn forget(&self, daemon: Uuid) {
        self.lock().retain(|w| w.daemon != daemon);
    }

    /// Takes `daemon` out of the queue when it waits there idle, for its session to look for
    /// a job on its own (the safety poll). False when it is not there: a wake-up was sent to
    /// it, or it is reserved for a job being created, and that job (or its place back in the
    /// queue) is on its way. Looking anyway would close the receiver the claimed job is handed
    /// over on, and the job would go back to the queue.
    pub fn take_idle(&self, daemon: Uuid) -> bool {
        let mut waiters = self.lock();
        let before = waiters.len();
        waiters.retain(|w| w.daemon != daemon);
        waiters.len() != before
    }

    /// A new job: dispatches it unless it was already (by the process that created it, before
    /// its NOTIFY arrived).
    pub fn announce(&self, posting: Posting) {
        let fresh = self
            .recent
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(posting.job);
        if fresh {
            self.post(posting);
        }
    }

    /// Wakes the longest-idle daemon that can take `posting`, if any is here.
    pub fn post(&self, posting: Posting) {
        let mut waiters = self.lock();
        // Waiters whose receiver is gone are dropped on the way.
        waiters.retain(|w| !w.wake.is_closed());
        let Some(index) = waiters
            .iter()
            .position(|w| w.takes(posting.org, &posting.provisioner, &posting.tags_key))
        else {
            self.unserved.fetch_add(1, Ordering::SeqCst);
            return;
        };
        if let Some(waiter) = waiters.remove(index) {
            let _ = waiter.wake.send(Wake::Posted(posting));
        }
    }

    /// Wakes every idle daemon (after events may have been lost).
    pub fn wake_all(&self) {
        let mut waiters = self.lock();
        self.unserved.fetch_add(1, Ordering::SeqCst);
        for waiter in waiters.drain(..) {
            let _ = waiter.wake.send(Wake::Look);
        }
    }

    /// Daemons here that found nothing to claim and wait for a job (those a job created now
    /// could be claimed for).
    pub fn idle_count(&self) -> usize {
        self.lock().iter().filter(|w| w.settled).count()
    }
}

/// A daemon taken out of the queue for a job being created (see [`Dispatcher::reserve`]).
/// Dropped without [`Reserved::hand_over`] (the job was not claimed at its insert, the insert
/// was refused or failed), it goes back to its place in the queue, so every early return gives
/// it back; when a posting or wake-up found no one while it was out, it is woken to look
/// instead, as it would have been.
pub struct Reserved {
    dispatcher: Dispatcher,
    index: usize,
    unserved: u64,
    keys: Vec<String>,
    waiter: Option<Waiter>,
}

impl Reserved {
    pub fn daemon(&self) -> Option<Uuid> {
        self.waiter.as_ref().map(|w| w.daemon)
    }

    /// Who the insert claims the job for, with every job the daemon could take (the insert
    /// leaves the job pending when an older one of those waits).
    pub fn claimant(&self) -> Option<Claimant<'_>> {
        self.waiter.as_ref().map(|w| Claimant {
            org: w.org,
            provisioners: &w.provisioners,
            tag_keys: &self.keys,
            worker: w.daemon,
        })
    }

    /// Gives the job its insert claimed for this daemon to the daemon's session. False when
    /// the session stopped waiting meanwhile (disconnected or stopping):
    /// the caller then hands the job back to the queue.
    pub fn hand_over(mut self, job: JobRow) -> bool {
        self.waiter
            .take()
            .is_some_and(|w| w.wake.send(Wake::Claimed(Box::new(job))).is_ok())
    }
}

impl Drop for Reserved {
    fn drop(&mut self) {
        let Some(waiter) = self.waiter.take() else {
            return;
        };
        let mut waiters = self.dispatcher.lock();
        // Gone, or registered anew by its session (which looked on its own meanwhile).
        if waiter.wake.is_closed() || waiters.iter().any(|w| w.daemon == waiter.daemon) {
            return;
        }
        if self.dispatcher.unserved.load(Ordering::SeqCst) != self.unserved {
            let _ = waiter.wake.send(Wake::Look);
            return;
        }
        let index = self.index.min(waiters.len());
        waiters.insert(index, waiter);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capability(org: Uuid, keys: &[&str]) -> Capability {
        Capability {
            org,
            provisioners: vec!["echo".into()],
            keys: keys.iter().map(|k| k.to_string()).collect(),
        }
    }

    fn posting(org: Uuid, key: &str) -> Posting {
        Posting {
            org,
            job: Uuid::new_v4(),
            provisioner: "echo".into(),
            tags_key: key.into(),
            build: None,
        }
    }

    #[test]
    fn postings_wake_one_matching_daemon_in_idle_order() {
        let d = Dispatcher::default();
        let org = Uuid::new_v4();
        let mut first = d.wait(Uuid::new_v4(), &capability(org, &["a"]));
        let mut second = d.wait(Uuid::new_v4(), &capability(org, &["a"]));
        let mut other = d.wait(Uuid::new_v4(), &capability(org, &["b"]));
        d.post(posting(org, "a"));
        assert!(matches!(first.try_recv(), Ok(Wake::Posted(_))));
        assert!(second.try_recv().is_err(), "only one daemon per posting");
        assert!(other.try_recv().is_err());
        d.post(posting(Uuid::new_v4(), "a"));
        assert!(
            second.try_recv().is_err(),
            "other organizations never match"
        );
        d.post(posting(org, "a"));
        assert!(matches!(second.try_recv(), Ok(Wake::Posted(_))));
        assert_eq!(d.lock().len(), 1);
    }

    #[test]
    fn only_a_settled_daemon_is_reserved_and_an_unused_reservation_gives_it_back() {
        let d = Dispatcher::default();
        let org = Uuid::new_v4();
        let (busy, idle) = (Uuid::new_v4(), Uuid::new_v4());
        let _busy = d.wait(busy, &capability(org, &["a"]));
        let mut idle_rx = d.wait(idle, &capability(org, &["a", "b"]));
        assert!(
            d.reserve(org, "echo", "a").is_none(),
            "a daemon still running its own claim is not reserved"
        );
        d.settle(idle);
        assert!(
            d.reserve(org, "echo", "c").is_none(),
            "no daemon takes key c"
        );
        let reserved = d.reserve(org, "echo", "a").expect("the settled daemon");
        assert_eq!(reserved.daemon(), Some(idle));
        let claimant = reserved.claimant().expect("claimant");
        assert_eq!(claimant.tag_keys.len(), 2, "every key the daemon takes");
        assert_eq!(d.idle_count(), 0, "out of the queue while reserved");
        drop(reserved);
        assert_eq!(d.idle_count(), 1, "back in the queue");
        assert!(idle_rx.try_recv().is_err(), "not woken");
        assert!(
            d.reserve(org, "echo", "b").is_some(),
            "and reservable again"
        );
    }

    #[test]
    fn a_reserved_daemon_that_missed_a_posting_is_woken_to_look() {
        let d = Dispatcher::default();
        let org = Uuid::new_v4();
        let daemon = Uuid::new_v4();
        let mut rx = d.wait(daemon, &capability(org, &["a"]));
        d.settle(daemon);
        let reserved = d.reserve(org, "echo", "a").expect("reserved");
        d.post(posting(org, "a"));
        drop(reserved);
        assert_eq!(rx.try_recv(), Ok(Wake::Look));
        assert_eq!(d.idle_count(), 0);
    }

    #[test]
    fn a_claimed_job_reaches_a_waiting_session_only() {
        let d = Dispatcher::default();
        let org = Uuid::new_v4();
        let daemon = Uuid::new_v4();
        let mut rx = d.wait(daemon, &capability(org, &["a"]));
        d.settle(daemon);
        let job = coderd_store::JobRow::pending_build(chrono::Utc::now());
        let reserved = d.reserve(org, "echo", "a").expect("reserved");
        assert!(reserved.hand_over(job.clone()));
        assert_eq!(rx.try_recv(), Ok(Wake::Claimed(Box::new(job.clone()))));

        let mut rx = d.wait(daemon, &capability(org, &["a"]));
        d.settle(daemon);
        let reserved = d.reserve(org, "echo", "a").expect("reserved");
        // The session stops waiting (stopping, disconnecting) before the hand-over.
        rx.close();
        assert!(
            !reserved.hand_over(job),
            "refused: the caller hands the job back"
        );
    }

    #[test]
    fn the_safety_poll_takes_an_idle_daemon_but_not_a_reserved_or_woken_one() {
        let d = Dispatcher::default();
        let org = Uuid::new_v4();
        let daemon = Uuid::new_v4();
        let _rx = d.wait(daemon, &capability(org, &["a"]));
        d.settle(daemon);
        let reserved = d.reserve(org, "echo", "a").expect("reserved");
        assert!(!d.take_idle(daemon), "reserved: its job is on its way");
        drop(reserved);
        assert!(d.take_idle(daemon), "back in the queue, idle");
        assert!(!d.take_idle(daemon), "taken once");

        let mut rx = d.wait(daemon, &capability(org, &["a"]));
        d.post(posting(org, "a"));
        assert!(!d.take_idle(daemon), "woken: the posting is on its way");
        assert!(matches!(rx.try_recv(), Ok(Wake::Posted(_))));
    }

    #[test]
    fn a_job_is_announced_once() {
        let d = Dispatcher::default();
        let org = Uuid::new_v4();
        let mut first = d.wait(Uuid::new_v4(), &capability(org, &["a"]));
        let mut second = d.wait(Uuid::new_v4(), &capability(org, &["a"]));
        let p = posting(org, "a");
        d.announce(p.clone());
        d.announce(p);
        assert!(first.try_recv().is_ok());
        assert!(
            second.try_recv().is_err(),
            "the echo of a local announcement wakes nobody"
        );
    }

    #[test]
    fn a_local_posting_names_the_build_its_job_runs() {
        let build = Uuid::new_v4();
        let mut job = coderd_store::JobRow {
            input: serde_json::json!({ "workspace_build_id": build }),
            tags: serde_json::json!({}),
            tags_key: "{}".into(),
            ..coderd_store::JobRow::pending_build(chrono::Utc::now())
        };
        assert_eq!(Posting::from(&job).build, Some(build));
        job.r#type = "template_version_import".into();
        job.input = serde_json::json!({ "template_version_id": Uuid::new_v4() });
        assert_eq!(Posting::from(&job).build, None, "an import has no build");
    }

    #[test]
    fn postings_parse_with_colons_in_the_key() {
        let org = Uuid::new_v4();
        let job = Uuid::new_v4();
        let p = Posting::parse(&org.to_string(), &format!("{job}:echo:{{\"a\":\"b:c\"}}"))
            .expect("parse");
        assert_eq!(
            (p.org, p.job, p.provisioner.as_str(), p.tags_key.as_str()),
            (org, job, "echo", "{\"a\":\"b:c\"}")
        );
        assert_eq!(p.build, None, "a NOTIFY does not carry the build");
        assert!(Posting::parse("nope", "x").is_none());
    }
}
