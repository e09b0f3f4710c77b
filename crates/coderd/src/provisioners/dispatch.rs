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

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::pubsub::{Event, Pubsub, channels};

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

impl From<&crate::store::JobRow> for Posting {
    fn from(job: &crate::store::JobRow) -> Self {
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wake {
    /// A matching job was posted.
    Posted(Posting),
    /// Something may have been missed; look.
    Look,
}

struct Waiter {
    daemon: Uuid,
    org: Uuid,
    provisioners: Vec<String>,
    keys: HashSet<String>,
    wake: oneshot::Sender<Wake>,
}

#[derive(Clone, Default)]
pub struct Dispatcher {
    waiters: Arc<Mutex<VecDeque<Waiter>>>,
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
        });
        rx
    }

    /// Removes a daemon that stopped waiting (busy, disconnected).
    pub fn forget(&self, daemon: Uuid) {
        self.lock().retain(|w| w.daemon != daemon);
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
        let Some(index) = waiters.iter().position(|w| {
            w.org == posting.org
                && w.provisioners.contains(&posting.provisioner)
                && w.keys.contains(&posting.tags_key)
        }) else {
            return;
        };
        if let Some(waiter) = waiters.remove(index) {
            let _ = waiter.wake.send(Wake::Posted(posting));
        }
    }

    /// Wakes every idle daemon (after events may have been lost).
    pub fn wake_all(&self) {
        for waiter in self.lock().drain(..) {
            let _ = waiter.wake.send(Wake::Look);
        }
    }

    pub fn idle_count(&self) -> usize {
        self.lock().len()
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
        assert_eq!(d.idle_count(), 1);
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
        let mut job = crate::store::JobRow {
            input: serde_json::json!({ "workspace_build_id": build }),
            tags: serde_json::json!({}),
            tags_key: "{}".into(),
            ..crate::store::JobRow::pending_build(chrono::Utc::now())
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
