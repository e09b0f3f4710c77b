//! The agent's lifecycle state: it only moves forward, and every change is queued for coderd
//! with the time it happened.

use std::sync::Mutex;

use chrono::Utc;
use codersdk::agentsdk::{LifecycleChange, LifecycleState};

use crate::reporter::Reporter;
use crate::scripts::Outcome;

pub(crate) struct Lifecycle {
    current: Mutex<LifecycleState>,
    reporter: Reporter,
}

impl Lifecycle {
    pub(crate) fn new(reporter: Reporter) -> Self {
        Self {
            current: Mutex::new(LifecycleState::Created),
            reporter,
        }
    }

    /// Moves to `state` and queues the change; a state that is not ahead of the current one is
    /// ignored (false).
    pub(crate) fn set(&self, state: LifecycleState) -> bool {
        let mut current = self
            .current
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if state.rank() <= current.rank() {
            tracing::debug!(
                from = current.as_str(),
                to = state.as_str(),
                "ignoring a lifecycle change that does not move forward"
            );
            return false;
        }
        tracing::info!(
            from = current.as_str(),
            to = state.as_str(),
            "lifecycle changed"
        );
        *current = state;
        self.reporter.push_lifecycle(LifecycleChange {
            state,
            changed_at: Utc::now(),
        });
        true
    }

    #[cfg(test)]
    pub(crate) fn current(&self) -> LifecycleState {
        *self
            .current
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The state after the start scripts: a timeout wins over other failures, since it is the one
/// a template author most needs to hear about.
pub(crate) fn after_start(outcomes: &[Outcome]) -> LifecycleState {
    summarize(
        outcomes,
        LifecycleState::Ready,
        LifecycleState::StartTimeout,
        LifecycleState::StartError,
    )
}

/// The state after the stop scripts.
pub(crate) fn after_stop(outcomes: &[Outcome]) -> LifecycleState {
    summarize(
        outcomes,
        LifecycleState::Off,
        LifecycleState::ShutdownTimeout,
        LifecycleState::ShutdownError,
    )
}

fn summarize(
    outcomes: &[Outcome],
    ok: LifecycleState,
    timeout: LifecycleState,
    error: LifecycleState,
) -> LifecycleState {
    if outcomes.contains(&Outcome::TimedOut) {
        timeout
    } else if outcomes.iter().any(|o| *o != Outcome::Succeeded) {
        error
    } else {
        ok
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::reporter::tests::FakePeer;

    #[tokio::test]
    async fn only_forward_and_reported_in_order() -> anyhow::Result<()> {
        let reporter = Reporter::new(Duration::from_millis(10), Duration::from_secs(1));
        let lifecycle = Lifecycle::new(reporter.clone());
        assert!(lifecycle.set(LifecycleState::Starting));
        assert!(lifecycle.set(LifecycleState::StartError));
        assert!(!lifecycle.set(LifecycleState::Ready), "same rank");
        assert!(!lifecycle.set(LifecycleState::Starting), "backwards");
        assert!(lifecycle.set(LifecycleState::ShuttingDown));
        assert!(lifecycle.set(LifecycleState::Off));
        assert!(!lifecycle.set(LifecycleState::ShutdownError));
        assert_eq!(lifecycle.current(), LifecycleState::Off);

        let calls = FakePeer::default().flushed(&reporter).await?;
        let [codersdk::agentsdk::Request::UpdateLifecycle { changes }] = calls.as_slice() else {
            anyhow::bail!("one lifecycle call: {calls:?}");
        };
        let states: Vec<_> = changes.iter().map(|c| c.state).collect();
        assert_eq!(
            states,
            [
                LifecycleState::Starting,
                LifecycleState::StartError,
                LifecycleState::ShuttingDown,
                LifecycleState::Off
            ]
        );
        assert!(
            changes
                .windows(2)
                .all(|w| w[0].changed_at <= w[1].changed_at)
        );
        Ok(())
    }

    #[test]
    fn script_outcomes_decide_the_state() {
        use Outcome::*;
        assert_eq!(after_start(&[]), LifecycleState::Ready);
        assert_eq!(after_start(&[Succeeded, Succeeded]), LifecycleState::Ready);
        assert_eq!(
            after_start(&[Succeeded, Failed]),
            LifecycleState::StartError
        );
        assert_eq!(
            after_start(&[Failed, TimedOut]),
            LifecycleState::StartTimeout
        );
        assert_eq!(after_start(&[PipesHeldOpen]), LifecycleState::StartError);
        assert_eq!(
            after_start(&[Succeeded, Skipped]),
            LifecycleState::StartError
        );
        assert_eq!(
            after_start(&[Skipped, TimedOut]),
            LifecycleState::StartTimeout
        );
        assert_eq!(after_stop(&[]), LifecycleState::Off);
        assert_eq!(after_stop(&[TimedOut]), LifecycleState::ShutdownTimeout);
        assert_eq!(after_stop(&[Failed]), LifecycleState::ShutdownError);
    }
}
