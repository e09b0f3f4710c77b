//! Which daemons are connected to this coderd process, and their `last_seen_at`, refreshed for
//! all of them in one statement per interval instead of one write per heartbeat.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use coderd_store::Store;

/// How often connected daemons are marked seen; well inside [`OFFLINE_AFTER`].
pub const TOUCH_INTERVAL: Duration = Duration::from_secs(15);
/// A daemon not seen for this long is offline.
pub const OFFLINE_AFTER: Duration = Duration::from_secs(90);

#[derive(Clone, Default)]
pub struct DaemonRegistry {
    connected: Arc<Mutex<HashSet<Uuid>>>,
}

impl DaemonRegistry {
    pub fn start(store: Store, shutdown: CancellationToken) -> Self {
        let registry = Self::default();
        let this = registry.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(TOUCH_INTERVAL);
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    _ = tick.tick() => {}
                }
                let ids: Vec<Uuid> = this.lock().iter().copied().collect();
                if ids.is_empty() {
                    continue;
                }
                if let Err(e) = store.touch_daemons(&ids).await {
                    tracing::warn!(error = %e, "recording connected provisioner daemons");
                }
            }
        });
        registry
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<Uuid>> {
        self.connected.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn connected(&self, id: Uuid) {
        self.lock().insert(id);
    }

    pub fn disconnected(&self, id: Uuid) {
        self.lock().remove(&id);
    }

    pub fn is_connected(&self, id: Uuid) -> bool {
        self.lock().contains(&id)
    }
}
