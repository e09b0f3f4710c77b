//! Cross-replica events over PostgreSQL LISTEN/NOTIFY.
//!
//! Publishing is a `pg_notify` inside the transaction whose effect it announces (see the store),
//! so a subscriber never hears of a row it cannot yet read. Receiving happens on one dedicated
//! connection per coderd process; its messages are routed in memory to subscribers by channel
//! and key (payload `<key>` or `<key>:<data>`), so the set of LISTENed channels is small and
//! fixed while subscribers come and go freely.
//!
//! Delivery is at most once: when the connection drops, messages are lost until it is back.
//! Subscribers therefore get [`Event::Reconnected`] after every reconnect and must re-read the
//! state they care about.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::PgListener;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The channels coderd uses. Keys are part of the payload, not the channel name.
pub mod channels {
    /// A provisioner job became pending: payload `<org id>:<job id>:<provisioner>:<tags key>`.
    pub const JOB_POSTED: &str = "coderd_job_posted";
    /// A job its daemon handed back is pending again: payload as for [`JOB_POSTED`]. A channel
    /// of its own because every replica has heard of the job already, under `JOB_POSTED`, and
    /// drops a repeat of that posting.
    pub const JOB_REQUEUED: &str = "coderd_job_requeued";
    /// New logs or completion of a job: payload `<job id>`.
    pub const JOB_LOGS: &str = "coderd_job_logs";
    /// A job changed state (cancel requested, completed): payload `<job id>`.
    pub const JOB_UPDATED: &str = "coderd_job_updated";
    /// Something about an agent changed (lifecycle, logs): payload `<agent id>`.
    pub const AGENT_UPDATED: &str = "coderd_agent_updated";
    /// A workspace changed (new build, status): payload `<workspace id>`.
    pub const WORKSPACE_UPDATED: &str = "coderd_workspace_updated";
    /// New log lines of an agent: payload `<agent id>`.
    pub const AGENT_LOGS: &str = "coderd_agent_logs";
    /// New metadata values of an agent: payload `<agent id>`.
    pub const AGENT_METADATA: &str = "coderd_agent_metadata";

    pub const ALL: &[&str] = &[
        JOB_POSTED,
        JOB_REQUEUED,
        JOB_LOGS,
        JOB_UPDATED,
        AGENT_UPDATED,
        WORKSPACE_UPDATED,
        AGENT_LOGS,
        AGENT_METADATA,
    ];
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A notification: its key and the data after the key.
    Message { key: String, data: String },
    /// The connection was re-established; anything may have been missed.
    Reconnected,
}

type Subscribers = HashMap<SubscriberKey, Vec<mpsc::UnboundedSender<Event>>>;

#[derive(Clone, Debug)]
pub struct Pubsub {
    subscribers: Arc<Mutex<Subscribers>>,
}

type SubscriberKey = (&'static str, Option<String>);

/// A live subscription; dropping it unsubscribes.
#[derive(Debug)]
pub struct Subscription {
    rx: mpsc::UnboundedReceiver<Event>,
    subscribers: Arc<Mutex<Subscribers>>,
    key: SubscriberKey,
}

impl Drop for Subscription {
    // Most keys are ids (a job, an agent) that hear nothing more once their subscriber is done:
    // an entry left for the next message to prune would stay for good, one per job.
    fn drop(&mut self) {
        self.rx.close();
        let mut subs = lock(&self.subscribers);
        if let Some(list) = subs.get_mut(&self.key) {
            list.retain(|tx| !tx.is_closed());
            if list.is_empty() {
                subs.remove(&self.key);
            }
        }
    }
}

fn lock(subscribers: &Mutex<Subscribers>) -> std::sync::MutexGuard<'_, Subscribers> {
    // A poisoned lock only means another thread panicked mid-update of a plain map.
    subscribers.lock().unwrap_or_else(|e| e.into_inner())
}

impl Subscription {
    pub async fn recv(&mut self) -> Option<Event> {
        self.rx.recv().await
    }

    /// Takes whatever is queued without waiting.
    pub fn try_recv(&mut self) -> Option<Event> {
        self.rx.try_recv().ok()
    }
}

const MIN_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(10);

impl Pubsub {
    /// Starts the listener task on its own connection; it runs until `shutdown`.
    pub fn start(pool: PgPool, shutdown: CancellationToken) -> Self {
        let pubsub = Self {
            subscribers: Arc::default(),
        };
        let runner = pubsub.clone();
        tokio::spawn(async move { runner.run(pool, shutdown).await });
        pubsub
    }

    /// Events on `channel` whose key is `key`, or every event on `channel` when `key` is None.
    pub fn subscribe(&self, channel: &'static str, key: Option<String>) -> Subscription {
        let (tx, rx) = mpsc::unbounded_channel();
        self.lock()
            .entry((channel, key.clone()))
            .or_default()
            .push(tx);
        Subscription {
            rx,
            subscribers: Arc::clone(&self.subscribers),
            key: (channel, key),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Subscribers> {
        lock(&self.subscribers)
    }

    fn dispatch(&self, channel: &str, payload: &str) {
        let (key, data) = payload.split_once(':').unwrap_or((payload, ""));
        let event = Event::Message {
            key: key.to_string(),
            data: data.to_string(),
        };
        let mut subs = self.lock();
        for sub_key in [
            (channel_static(channel), Some(key.to_string())),
            (channel_static(channel), None),
        ] {
            if let Some(list) = subs.get_mut(&sub_key) {
                list.retain(|tx| tx.send(event.clone()).is_ok());
                if list.is_empty() {
                    subs.remove(&sub_key);
                }
            }
        }
    }

    fn broadcast_reconnected(&self) {
        let mut subs = self.lock();
        for list in subs.values_mut() {
            list.retain(|tx| tx.send(Event::Reconnected).is_ok());
        }
        subs.retain(|_, list| !list.is_empty());
    }

    async fn run(self, pool: PgPool, shutdown: CancellationToken) {
        let mut backoff = MIN_BACKOFF;
        let mut first = true;
        loop {
            let connected = tokio::select! {
                () = shutdown.cancelled() => return,
                l = connect(&pool) => l,
            };
            match connected {
                Ok(mut listener) => {
                    if !first {
                        tracing::info!("pubsub reconnected");
                        self.broadcast_reconnected();
                    }
                    first = false;
                    backoff = MIN_BACKOFF;
                    loop {
                        tokio::select! {
                            () = shutdown.cancelled() => return,
                            msg = listener.try_recv() => match msg {
                                Ok(Some(n)) => self.dispatch(n.channel(), n.payload()),
                                Ok(None) => {
                                    tracing::warn!("pubsub connection lost; reconnecting");
                                    break;
                                }
                                Err(e) => {
                                    tracing::warn!(error = %e, "pubsub connection failed; reconnecting");
                                    break;
                                }
                            },
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, retry_in_ms = backoff.as_millis() as u64, "pubsub cannot connect");
                    tokio::select! {
                        () = shutdown.cancelled() => return,
                        () = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
    }
}

async fn connect(pool: &PgPool) -> Result<PgListener, sqlx::Error> {
    let mut listener = PgListener::connect_with(pool).await?;
    // We reconnect ourselves, with backoff and a Reconnected event.
    listener.ignore_pool_close_event(true);
    listener.listen_all(channels::ALL.iter().copied()).await?;
    Ok(listener)
}

/// Maps a channel name from the wire back to our static name (the map is keyed by `&'static`).
fn channel_static(channel: &str) -> &'static str {
    channels::ALL
        .iter()
        .copied()
        .find(|c| *c == channel)
        .unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropped_subscriptions_leave_nothing_behind() {
        let pubsub = Pubsub {
            subscribers: Arc::default(),
        };
        let key = (channels::JOB_UPDATED, Some("job-1".to_string()));
        let first = pubsub.subscribe(channels::JOB_UPDATED, Some("job-1".into()));
        let mut second = pubsub.subscribe(channels::JOB_UPDATED, Some("job-1".into()));
        let every = pubsub.subscribe(channels::JOB_POSTED, None);
        drop(first);
        assert_eq!(pubsub.lock().get(&key).map(Vec::len), Some(1));

        pubsub.dispatch(channels::JOB_UPDATED, "job-1");
        assert!(matches!(second.try_recv(), Some(Event::Message { key, .. }) if key == "job-1"));

        drop(second);
        drop(every);
        assert!(pubsub.lock().is_empty());
    }
}
