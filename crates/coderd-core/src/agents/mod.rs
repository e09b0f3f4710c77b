//! Workspace agents at run time: their one connection each (WebSocket + yamux), the calls they
//! make, and the batched writes that keep thousands of agents cheap.

pub mod batch;
pub mod binary;
pub mod connection;
pub mod manifest;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio_yamux::Control;
use uuid::Uuid;

pub use batch::Batcher;

/// A connected agent's `last_connected_at` is refreshed this often (in one statement for all).
pub const TOUCH_INTERVAL: Duration = Duration::from_secs(15);
/// An agent whose `last_connected_at` is older than this counts as disconnected, even without a
/// recorded disconnect (its coderd died).
pub const INACTIVE_AFTER: Duration = Duration::from_secs(45);

/// One registered connection: its generation, its control, and a flag that flips when it ends.
type Entry = (u64, Control, watch::Receiver<bool>);

/// The agents connected to this process: each with its connection's control (to open streams to
/// it) and a generation, so a stale connection's cleanup never unregisters its successor.
#[derive(Clone, Default)]
pub struct Registry {
    connected: Arc<Mutex<HashMap<Uuid, Entry>>>,
    next: Arc<std::sync::atomic::AtomicU64>,
}

impl Registry {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, Entry>> {
        self.connected.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a connection whose end flips `closed`; returns its generation.
    pub fn insert(&self, agent: Uuid, control: Control, closed: watch::Receiver<bool>) -> u64 {
        let generation = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.lock().insert(agent, (generation, control, closed));
        generation
    }

    /// Unregisters a connection; returns true when no newer one replaced it.
    pub fn remove(&self, agent: Uuid, generation: u64) -> bool {
        let mut map = self.lock();
        if map.get(&agent).is_some_and(|(g, _, _)| *g == generation) {
            map.remove(&agent);
            true
        } else {
            false
        }
    }

    pub fn ids(&self) -> Vec<Uuid> {
        self.lock().keys().copied().collect()
    }

    pub fn control(&self, agent: Uuid) -> Option<Control> {
        self.lock().get(&agent).map(|(_, c, _)| c.clone())
    }

    /// The agent's control and the flag that flips when its connection ends.
    pub fn connection(&self, agent: Uuid) -> Option<(Control, watch::Receiver<bool>)> {
        self.lock()
            .get(&agent)
            .map(|(_, c, closed)| (c.clone(), closed.clone()))
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }
}
