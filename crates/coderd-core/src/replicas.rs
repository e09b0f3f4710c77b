//! This process as one replica among those sharing the database (Coder's replica sync): its
//! row in `replicas`, a beat every 2 s with the database's latency and which peers' relay URLs
//! could not be reached, and `stopped_at` on shutdown. PostgreSQL is the only coordination
//! point; a replica is alive while its row was beaten less than 6 s ago by the database's
//! clock.
//!
//! Joining refuses what would break the mesh: a second replica without a relay URL (its peers
//! could not reach it), or one of another version (the relay hop speaks one protocol).

use std::time::{Duration, Instant};

use codersdk::deployment::Replica as ReplicaJson;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use url::Url;
use uuid::Uuid;

use coderd_store::{ReplicaRow, Store};

/// How often a replica beats (and probes its peers).
pub const BEAT: Duration = Duration::from_secs(2);
/// How long a peer's relay URL may take to answer a probe.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);
/// A replica that has not recorded its own beat for this long fences itself: peers count it
/// dead after 6 s, so it stops serving before anyone else takes over what it held.
pub const FENCE_AFTER: Duration = Duration::from_secs(4);

#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    #[error(transparent)]
    Store(#[from] coderd_store::Error),
    #[error(
        "another replica is running ({peers}): set --derp-server-relay-url \
         (CODER_DERP_SERVER_RELAY_URL) to this replica's own internal URL so its peers can reach it"
    )]
    NoRelayUrl { peers: String },
    #[error(
        "replica {hostname} ({id}) runs version {theirs} and this one {ours}: replicas of \
         different versions cannot share a deployment; upgrade them all"
    )]
    VersionSkew {
        id: Uuid,
        hostname: String,
        theirs: String,
        ours: String,
    },
}

/// This replica.
#[derive(Debug, Clone)]
pub struct Replica {
    pub id: Uuid,
    pub hostname: String,
    pub relay_url: Option<Url>,
    /// True while this replica is fenced: it could not record its beat for [`FENCE_AFTER`],
    /// so its peers may soon count it dead. It then reports itself unready, refuses agents and
    /// closes the connections it holds, so they reconnect to a replica that can write.
    pub fenced: watch::Receiver<bool>,
    fence: std::sync::Arc<watch::Sender<bool>>,
}

impl Replica {
    pub fn is_fenced(&self) -> bool {
        *self.fenced.borrow()
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".into())
}

/// Joins the deployment's replicas: refuses as [`JoinError`] says, else writes this replica's
/// row.
pub async fn join(store: &Store, relay_url: Option<&Url>) -> Result<Replica, JoinError> {
    let version = codersdk::version::VERSION;
    let hostname = hostname();
    let relay = relay_url.map(Url::as_str).unwrap_or_default();
    // A row from this host with this relay URL is this process's previous life (a restart
    // within the liveness window, after a crash or for an upgrade), not a peer.
    let peers: Vec<ReplicaRow> = store
        .live_replicas()
        .await?
        .into_iter()
        .filter(|p| !(p.hostname == hostname && p.relay_address == relay))
        .collect();
    if let Some(other) = peers.iter().find(|p| p.version != version) {
        return Err(JoinError::VersionSkew {
            id: other.id,
            hostname: other.hostname.clone(),
            theirs: other.version.clone(),
            ours: version.to_string(),
        });
    }
    if relay_url.is_none() && !peers.is_empty() {
        return Err(JoinError::NoRelayUrl {
            peers: peers
                .iter()
                .map(|p| format!("{} at {}", p.hostname, p.relay_address))
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    let (fence, fenced) = watch::channel(false);
    let replica = Replica {
        id: Uuid::new_v4(),
        hostname,
        relay_url: relay_url.cloned(),
        fenced,
        fence: std::sync::Arc::new(fence),
    };
    store
        .insert_replica(replica.id, &replica.hostname, relay, version)
        .await?;
    tracing::info!(replica = %replica.id, hostname = %replica.hostname, relay_url = relay, peers = peers.len(), "joined the deployment's replicas");
    Ok(replica)
}

/// Beats until `stop` is cancelled (then the caller records the stop with [`leave`]), and
/// fences this replica while its beats fail.
pub fn beat_until(store: Store, replica: Replica, stop: CancellationToken) {
    let (recorded, mut last_ok) = watch::channel(Instant::now());
    // The fence is judged apart from the beats, so a beat that hangs (a database cut off
    // without a reset) cannot hold it back.
    let watched = replica.clone();
    let stop_watching = stop.clone();
    tokio::spawn(async move {
        let mut check = tokio::time::interval(Duration::from_millis(250));
        loop {
            tokio::select! {
                () = stop_watching.cancelled() => return,
                _ = check.tick() => {}
                _ = last_ok.changed() => {}
            }
            let since = last_ok.borrow().elapsed();
            fence(&watched, since > FENCE_AFTER);
        }
    });
    tokio::spawn(async move {
        let http = match reqwest::Client::builder().timeout(PROBE_TIMEOUT).build() {
            Ok(http) => http,
            Err(e) => {
                tracing::error!(error = %e, "replica probes are disabled");
                reqwest::Client::new()
            }
        };
        let mut tick = tokio::time::interval(BEAT);
        let mut beats: u64 = 0;
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            beats += 1;
            match tokio::time::timeout(BEAT * 2, beat(&store, &replica, &http)).await {
                Ok(Ok(())) => {
                    let _ = recorded.send(Instant::now());
                }
                Ok(Err(e)) => tracing::warn!(error = %e, "replica beat failed"),
                Err(_) => tracing::warn!("replica beat timed out"),
            }
            // Once a minute, forget replicas silent for an hour.
            if beats.is_multiple_of(30)
                && let Err(e) = store.purge_replicas().await
            {
                tracing::warn!(error = %e, "purging old replicas");
            }
        }
    });
}

fn fence(replica: &Replica, fenced: bool) {
    let changed = replica.fence.send_if_modified(|now| {
        let changed = *now != fenced;
        *now = fenced;
        changed
    });
    if changed && fenced {
        tracing::error!(
            replica = %replica.id,
            "fenced: this replica could not record its beat for {FENCE_AFTER:?}; it stops \
             serving agents until it can"
        );
    } else if changed {
        tracing::info!(replica = %replica.id, "unfenced: beats are recorded again");
    }
}

async fn beat(
    store: &Store,
    me: &Replica,
    http: &reqwest::Client,
) -> Result<(), coderd_store::Error> {
    let started = Instant::now();
    store.ping().await?;
    let latency = i32::try_from(started.elapsed().as_micros()).unwrap_or(i32::MAX);
    let peers: Vec<ReplicaRow> = store
        .live_replicas()
        .await?
        .into_iter()
        .filter(|p| p.id != me.id)
        .collect();
    // At once: probes take up to 3 s each, and a beat must end well within the fence.
    let results = futures::future::join_all(peers.iter().map(|peer| probe(http, peer))).await;
    let failures: Vec<String> = peers
        .iter()
        .zip(results)
        .filter_map(|(peer, result)| {
            result
                .err()
                .map(|why| format!("replica {} ({}): {why}", peer.hostname, peer.relay_address))
        })
        .collect();
    if !store
        .beat_replica(me.id, latency, &failures.join("; "))
        .await?
    {
        tracing::warn!(replica = %me.id, "this replica's row is gone; beats are not recorded");
    }
    Ok(())
}

/// Whether a peer's relay URL answers.
async fn probe(http: &reqwest::Client, peer: &ReplicaRow) -> Result<(), String> {
    if peer.relay_address.is_empty() {
        return Err("it has no relay URL".into());
    }
    let url = Url::parse(&peer.relay_address)
        .and_then(|u| u.join("/healthz"))
        .map_err(|e| format!("its relay URL is not valid: {e}"))?;
    match http.get(url).send().await {
        Ok(r) if r.status().is_success() => Ok(()),
        Ok(r) => Err(format!("answered {}", r.status())),
        Err(e) => Err(format!("unreachable: {}", e.without_url())),
    }
}

/// Records that this replica stopped (its peers stop counting it at once).
pub async fn leave(store: &Store, me: &Replica) {
    if let Err(e) = store.stop_replica(me.id).await {
        tracing::warn!(error = %e, "recording this replica's stop");
    }
}

/// The live replicas in Coder's shape.
pub async fn list(store: &Store) -> Result<Vec<ReplicaJson>, coderd_store::Error> {
    Ok(store
        .live_replicas()
        .await?
        .into_iter()
        .map(|r| ReplicaJson {
            id: r.id,
            hostname: r.hostname,
            created_at: r.created_at,
            relay_address: r.relay_address,
            region_id: r.region_id,
            error: r.error,
            database_latency: r.database_latency,
        })
        .collect())
}
