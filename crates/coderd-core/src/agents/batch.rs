//! Batched agent writes. 2,000 agents reporting 2 metadata keys every 10 s and stats every 30 s
//! would be hundreds of transactions a second written one by one; instead the latest value per
//! key is kept in memory and written for all agents in one statement per interval. These are
//! telemetry (latest value wins), so a value may sit in memory up to one interval.

use std::collections::HashMap;
use std::time::Duration;

use codersdk::agentsdk::Stats;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::{Registry, TOUCH_INTERVAL};
use coderd_store::{MetadataWrite, Store};

const METADATA_FLUSH: Duration = Duration::from_secs(1);
const STATS_FLUSH: Duration = Duration::from_secs(10);

enum Item {
    Metadata(MetadataWrite),
    Stats {
        agent: Uuid,
        workspace: Uuid,
        stats: Stats,
    },
}

#[derive(Clone)]
pub struct Batcher {
    tx: mpsc::UnboundedSender<Item>,
}

impl Batcher {
    pub fn start(store: Store, registry: Registry, shutdown: CancellationToken) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(store, registry, rx, shutdown));
        Self { tx }
    }

    pub fn metadata(&self, write: MetadataWrite) {
        let _ = self.tx.send(Item::Metadata(write));
    }

    pub fn stats(&self, agent: Uuid, workspace: Uuid, stats: Stats) {
        let _ = self.tx.send(Item::Stats {
            agent,
            workspace,
            stats,
        });
    }
}

async fn run(
    store: Store,
    registry: Registry,
    mut rx: mpsc::UnboundedReceiver<Item>,
    shutdown: CancellationToken,
) {
    let mut metadata: HashMap<(Uuid, String), MetadataWrite> = HashMap::new();
    let mut stats: HashMap<Uuid, (Uuid, Stats)> = HashMap::new();
    let mut metadata_tick = tokio::time::interval(METADATA_FLUSH);
    let mut stats_tick = tokio::time::interval(STATS_FLUSH);
    let mut touch_tick = tokio::time::interval(TOUCH_INTERVAL);
    loop {
        tokio::select! {
            item = rx.recv() => match item {
                Some(Item::Metadata(w)) => {
                    metadata.insert((w.agent_id, w.key.clone()), w);
                }
                Some(Item::Stats { agent, workspace, stats: s }) => {
                    stats.insert(agent, (workspace, s));
                }
                None => break,
            },
            _ = metadata_tick.tick() => flush_metadata(&store, &mut metadata).await,
            _ = stats_tick.tick() => flush_stats(&store, &mut stats).await,
            _ = touch_tick.tick() => {
                let ids = registry.ids();
                if !ids.is_empty()
                    && let Err(e) = store.touch_agents(&ids).await
                {
                    tracing::warn!(error = %e, "recording connected agents");
                }
            }
            () = shutdown.cancelled() => break,
        }
    }
    flush_metadata(&store, &mut metadata).await;
    flush_stats(&store, &mut stats).await;
}

async fn flush_metadata(store: &Store, pending: &mut HashMap<(Uuid, String), MetadataWrite>) {
    if pending.is_empty() {
        return;
    }
    let writes: Vec<MetadataWrite> = pending.drain().map(|(_, w)| w).collect();
    metrics::histogram!("coderd_agent_metadata_batch_size").record(writes.len() as f64);
    if let Err(e) = store.flush_agent_metadata(&writes).await {
        tracing::warn!(error = %e, count = writes.len(), "writing agent metadata");
    }
}

async fn flush_stats(store: &Store, pending: &mut HashMap<Uuid, (Uuid, Stats)>) {
    if pending.is_empty() {
        return;
    }
    let batch = std::mem::take(pending);
    if let Err(e) = store.flush_agent_stats(&batch).await {
        tracing::warn!(error = %e, count = batch.len(), "writing agent stats");
    }
}
