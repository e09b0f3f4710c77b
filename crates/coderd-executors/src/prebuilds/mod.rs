//! Prebuilt workspaces: a pool of started workspaces per preset, owned by the `prebuilds`
//! system user, that `coder create --preset` claims instead of waiting for a build.
//!
//! Every coderd runs the reconciler beside the lifecycle executor. Each pass takes a
//! PostgreSQL advisory lock first (transaction-scoped: a replica that dies releases it), so one
//! replica at a time compares what the presets want with what exists and acts through the
//! domain's builder ([`reconcile`]); the others skip the pass. A claim (the domain's, when a
//! workspace is created with a preset) is a row lock with `SKIP LOCKED`, so concurrent claims
//! never take the same prebuild.

mod reconcile;
mod scheduling;

use std::time::Duration;

use tokio_util::sync::CancellationToken;

pub use reconcile::{PassReport, pass};

/// How the reconciler runs.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Time between passes (Coder's `--workspace-prebuilds-reconciliation-interval`).
    pub interval: Duration,
    /// The wait after a preset's first failed prebuild; it doubles with each further failure
    /// (Coder's `--workspace-prebuilds-reconciliation-backoff-interval`).
    pub backoff: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(15),
            backoff: Duration::from_secs(15),
        }
    }
}

/// The longest wait between attempts of a failing preset.
const MAX_BACKOFF: Duration = Duration::from_secs(600);

/// The wait after `failures` consecutive failures.
pub fn backoff(base: Duration, failures: i64) -> Duration {
    let doublings = u32::try_from(failures.saturating_sub(1).clamp(0, 16)).unwrap_or(16);
    base.saturating_mul(1 << doublings).min(MAX_BACKOFF)
}

/// Runs the reconciler until `shutdown`.
pub fn spawn(
    state: coderd_core::state::AppState,
    options: Options,
    shutdown: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut interval = tokio::time::interval(options.interval);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = interval.tick() => {}
            }
            // An administrator's pause holds on every replica until it is lifted.
            match coderd_core::domain::prebuild_settings::current(&state).await {
                Ok(settings) if settings.reconciliation_paused => continue,
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "prebuilds: cannot read the settings"),
            }
            if let Err(e) = pass(&state, options.backoff).await {
                tracing::warn!(error = %e, "prebuilds: reconciliation pass failed");
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_a_ceiling() {
        let base = Duration::from_secs(15);
        assert_eq!(backoff(base, 1), base);
        assert_eq!(backoff(base, 3), base * 4);
        assert_eq!(backoff(base, 60), MAX_BACKOFF);
    }
}
