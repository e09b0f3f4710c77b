//! What the relay carries: per stream kind, the active streams and the bytes each way (in
//! `/metrics`), and per workspace whether someone is connected, which bumps its `last_used_at`
//! and its running build's deadline (the activity bump) — for every such workspace in one
//! transaction each interval, never a write per stream.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use metrics::Counter;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use coderd_store::Store;

/// How often `last_used_at` of workspaces in use is written.
const FLUSH: Duration = Duration::from_secs(10);

#[derive(Default)]
struct Entry {
    /// Streams open now.
    active: u32,
    /// A stream opened or closed since the last flush.
    touched: bool,
}

/// The relay's usage book, shared by every stream of this process.
#[derive(Clone, Default)]
pub struct Usage {
    workspaces: Arc<Mutex<HashMap<Uuid, Entry>>>,
}

impl Usage {
    /// Starts writing `last_used_at` every [`FLUSH`] until `shutdown`, then once more.
    pub fn start(store: Store, shutdown: CancellationToken) -> Self {
        let usage = Self::default();
        let book = usage.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(FLUSH);
            loop {
                tokio::select! {
                    _ = tick.tick() => book.flush(&store).await,
                    () = shutdown.cancelled() => break,
                }
            }
            book.flush(&store).await;
        });
        usage
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, Entry>> {
        self.workspaces.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Workspaces with a stream now or since the last flush; forgets the idle ones.
    fn take_used(&self) -> Vec<Uuid> {
        let mut map = self.lock();
        let used = map
            .iter()
            .filter(|(_, e)| e.active > 0 || e.touched)
            .map(|(id, _)| *id)
            .collect();
        map.retain(|_, e| {
            e.touched = false;
            e.active > 0
        });
        used
    }

    async fn flush(&self, store: &Store) {
        let used = self.take_used();
        if used.is_empty() {
            return;
        }
        if let Err(e) = store.mark_workspaces_used(&used).await {
            tracing::warn!(error = %e, count = used.len(), "recording workspace use");
        }
    }

    /// Records a use of `workspace` now, without a stream (a client's usage report): it counts
    /// as used at the next flush.
    pub fn touch(&self, workspace: Uuid) {
        self.lock().entry(workspace).or_default().touched = true;
    }

    /// Records a stream of `kind` into `workspace` until the returned guard is dropped.
    pub fn begin(&self, workspace: Uuid, kind: &'static str) -> Active {
        {
            let mut map = self.lock();
            let entry = map.entry(workspace).or_default();
            entry.active += 1;
            entry.touched = true;
        }
        metrics::counter!("coderd_relay_streams_total", "type" => kind).increment(1);
        metrics::gauge!("coderd_relay_streams_active", "type" => kind).increment(1.0);
        Active {
            usage: self.clone(),
            workspace,
            kind,
            to_agent: metrics::counter!("coderd_relay_bytes_total", "type" => kind, "direction" => "to_agent"),
            to_client: metrics::counter!("coderd_relay_bytes_total", "type" => kind, "direction" => "to_client"),
        }
    }
}

/// One open stream: counts its bytes, and ends its record when dropped.
pub struct Active {
    usage: Usage,
    workspace: Uuid,
    kind: &'static str,
    to_agent: Counter,
    to_client: Counter,
}

impl Active {
    pub fn to_agent(&self, bytes: usize) {
        self.to_agent.increment(bytes as u64);
    }

    pub fn to_client(&self, bytes: usize) {
        self.to_client.increment(bytes as u64);
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        metrics::gauge!("coderd_relay_streams_active", "type" => self.kind).decrement(1.0);
        let mut map = self.usage.lock();
        if let Some(entry) = map.get_mut(&self.workspace) {
            entry.active = entry.active.saturating_sub(1);
            entry.touched = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workspace_counts_as_used_while_connected_and_once_after() {
        let usage = Usage::default();
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        let first = usage.begin(a, "ssh");
        let second = usage.begin(b, "tcp");
        let mut used = usage.take_used();
        used.sort();
        let mut both = vec![a, b];
        both.sort();
        assert_eq!(used, both);
        drop(second);
        // `a` is still connected; `b` closed since the last flush.
        let mut used = usage.take_used();
        used.sort();
        assert_eq!(used, both);
        assert_eq!(usage.take_used(), vec![a]);
        drop(first);
        assert_eq!(usage.take_used(), vec![a]);
        assert!(usage.take_used().is_empty());
    }
}
