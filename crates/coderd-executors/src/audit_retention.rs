//! Retention: entries older than the deployment's `--audit-logs-retention` are deleted once an
//! hour by every replica (the purge is one idempotent statement, so replicas need not agree on
//! who runs it). Zero keeps entries forever.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use coderd_store::Store;

const PURGE_EVERY: Duration = Duration::from_secs(3600);

/// Starts the purge, unless `retention` is zero.
pub fn start_purge(
    store: Store,
    retention: Duration,
    clock: coderd_schedule::clock::Clock,
    stop: CancellationToken,
) {
    let Ok(keep) = chrono::Duration::from_std(retention) else {
        return;
    };
    if keep.is_zero() {
        return;
    }
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(PURGE_EVERY);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            match store.purge_audit_logs(clock.now() - keep).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(deleted = n, "audit log entries past retention deleted"),
                Err(e) => tracing::warn!(error = %e, "purging audit log entries failed"),
            }
        }
    });
}
