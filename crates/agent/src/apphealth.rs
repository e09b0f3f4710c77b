//! App health checks: each app with a `healthcheck` is asked for its URL every `interval`
//! seconds. It is `initializing` until the first answer, `healthy` after one success (any
//! answer below 500), `unhealthy` after `threshold` failures in a row; only changes go to
//! coderd (through the reporter, which retries across reconnects).

use std::time::Duration;

use codersdk::workspaces::WorkspaceApp;
use futures::future::join_all;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::reporter::Reporter;

/// The longest a single check may take (shorter for shorter intervals).
const MAX_CHECK_TIMEOUT: Duration = Duration::from_secs(10);

/// Checks every app that has a health check until `cancel`.
pub(crate) async fn check_all(
    apps: Vec<WorkspaceApp>,
    reporter: Reporter,
    cancel: CancellationToken,
) {
    // Apps live on the workspace's loopback: never through a proxy from the environment.
    let client = match reqwest::Client::builder().no_proxy().build() {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(error = %e, "no HTTP client for app health checks");
            return;
        }
    };
    let checks = apps.into_iter().filter_map(|app| {
        let check = app.healthcheck?;
        (!check.url.is_empty() && check.interval > 0).then(|| {
            let interval = Duration::from_secs(u64::try_from(check.interval).unwrap_or(1));
            let threshold = u32::try_from(check.threshold).unwrap_or(0).max(1);
            run(
                &client, app.id, check.url, interval, threshold, &reporter, &cancel,
            )
        })
    });
    join_all(checks).await;
}

/// Health as Coder names it, from the outcome of a check and the failures before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Health {
    Initializing,
    Healthy,
    Unhealthy,
}

impl Health {
    fn as_str(self) -> &'static str {
        match self {
            Self::Initializing => "initializing",
            Self::Healthy => "healthy",
            Self::Unhealthy => "unhealthy",
        }
    }

    /// The health after a check; `failures` counts this one if it failed.
    pub(crate) fn next(self, ok: bool, failures: u32, threshold: u32) -> Self {
        match (ok, failures >= threshold) {
            (true, _) => Self::Healthy,
            (false, true) => Self::Unhealthy,
            (false, false) => self,
        }
    }
}

async fn run(
    client: &reqwest::Client,
    app: Uuid,
    url: String,
    interval: Duration,
    threshold: u32,
    reporter: &Reporter,
    cancel: &CancellationToken,
) {
    let timeout = interval.min(MAX_CHECK_TIMEOUT);
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let (mut health, mut failures) = (Health::Initializing, 0u32);
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            _ = ticks.tick() => {}
        }
        let ok = tokio::select! {
            () = cancel.cancelled() => return,
            r = client.get(&url).timeout(timeout).send() => r.is_ok_and(|r| r.status().as_u16() < 500),
        };
        failures = if ok { 0 } else { failures.saturating_add(1) };
        let next = health.next(ok, failures, threshold);
        if next != health {
            tracing::debug!(%app, health = next.as_str(), "app health changed");
            reporter.set_app_health(app, next.as_str());
            health = next;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Health::*;

    #[test]
    fn healthy_after_one_success_unhealthy_after_threshold_failures() {
        assert_eq!(Initializing.next(true, 0, 3), Healthy);
        assert_eq!(Initializing.next(false, 1, 3), Initializing);
        assert_eq!(Healthy.next(false, 2, 3), Healthy);
        assert_eq!(Healthy.next(false, 3, 3), Unhealthy);
        assert_eq!(Unhealthy.next(true, 0, 3), Healthy);
        assert_eq!(Initializing.next(false, 1, 1), Unhealthy);
    }
}
