//! Templates' build time statistics (`build_time_stats`: p50/p95 per transition), computed for
//! all templates at once off the request path, as Coder's metrics cache does. Computing them per
//! template read scanned every recent build of the template: ~120 ms of database CPU per
//! `GET /templates/{id}` at ten thousand builds, which made template reads the first thing to
//! saturate a deployment.
//!
//! The figures are refreshed every [`REFRESH`], and soon after any job completes (completions
//! arrive on the job channel from every replica), at most once per [`SETTLE`]: a burst of
//! builds costs one recomputation, and a build's time shows within about a second.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use coderd_store::pubsub::{Event, Pubsub, Subscription, channels};
use coderd_store::{BuildTimes, Store};

/// The longest the figures go without a refresh (builds may also be deleted or age out).
pub const REFRESH: Duration = Duration::from_secs(60);
/// The shortest time between two refreshes caused by completed jobs.
pub const SETTLE: Duration = Duration::from_secs(1);

type Stats = HashMap<Uuid, BTreeMap<String, BuildTimes>>;

#[derive(Clone, Default)]
pub struct BuildTimesCache {
    stats: Arc<RwLock<Arc<Stats>>>,
}

impl BuildTimesCache {
    /// Computes the figures once, then keeps them fresh until `shutdown`.
    pub async fn start(store: Store, pubsub: &Pubsub, shutdown: CancellationToken) -> Self {
        let cache = Self::default();
        let mut jobs = Some(pubsub.subscribe(channels::JOB_UPDATED, None));
        cache.refresh(&store).await;
        let this = cache.clone();
        tokio::spawn(async move {
            let mut last = Instant::now();
            let mut dirty = false;
            loop {
                let due = if dirty { last + SETTLE } else { last + REFRESH };
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    event = next(&mut jobs) => match event {
                        Some(_) => dirty = true,
                        // The listener is gone (shutting down): periodic refreshes only.
                        None => jobs = None,
                    },
                    () = tokio::time::sleep_until(due) => {
                        this.refresh(&store).await;
                        last = Instant::now();
                        dirty = false;
                    }
                }
            }
        });
        cache
    }

    async fn refresh(&self, store: &Store) {
        match store.build_time_stats().await {
            Ok(stats) => {
                *self.stats.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(stats);
            }
            Err(e) => tracing::warn!(error = %e, "refreshing template build times"),
        }
    }

    /// The figures of every template, as of the last refresh.
    pub fn snapshot(&self) -> Arc<Stats> {
        Arc::clone(&self.stats.read().unwrap_or_else(|e| e.into_inner()))
    }
}

/// The next job event, or never once the subscription has ended.
async fn next(jobs: &mut Option<Subscription>) -> Option<Event> {
    match jobs {
        Some(sub) => sub.recv().await,
        None => std::future::pending().await,
    }
}
