//! The hang detector: fails running jobs whose daemon stopped sending heartbeats (it crashed,
//! was killed, lost its connection, or its coderd restarted), so no job stays "running" forever
//! and the workspace can build again. Every replica runs it; the store fails each job once.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use coderd_store::Store;

/// A job whose heartbeat is this old is failed. Daemons send one every 5 s; with the check
/// interval a dead daemon's job fails within 25 s.
pub const STALE_AFTER: Duration = Duration::from_secs(20);
pub const CHECK_INTERVAL: Duration = Duration::from_secs(5);

pub const REASON: &str = "The provisioner daemon running this job stopped sending heartbeats for 20 \
    seconds (it crashed, was killed, or lost its connection to coderd), so the job was failed. \
    The workspace keeps the state it had before this job; you can start another build.";

pub fn start(store: Store, shutdown: CancellationToken) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(CHECK_INTERVAL);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            match store.fail_stale_jobs(STALE_AFTER, REASON).await {
                Ok(failed) => {
                    for job in failed {
                        tracing::warn!(job = %job.id, worker = ?job.worker_id, "failed a job whose daemon stopped sending heartbeats");
                        metrics::counter!("coderd_provisioner_jobs_hung_total").increment(1);
                    }
                }
                Err(e) => tracing::warn!(error = %e, "hang detector"),
            }
        }
    });
}
