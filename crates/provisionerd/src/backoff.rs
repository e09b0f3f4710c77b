//! Reconnect delays: exponential from 100 ms to 10 s, with jitter so that many daemons cut off
//! by the same coderd restart do not reconnect in lockstep.

use std::time::Duration;

pub(crate) const MIN_DELAY: Duration = Duration::from_millis(100);
pub(crate) const MAX_DELAY: Duration = Duration::from_secs(10);
/// The cap while the daemon holds a job: coderd fails a job whose daemon stays silent for 20 s,
/// so a daemon with work in flight must keep trying often enough to get back in time.
pub(crate) const MAX_DELAY_WITH_JOB: Duration = Duration::from_secs(2);

#[derive(Debug)]
pub(crate) struct Backoff {
    ceiling: Duration,
}

impl Backoff {
    pub(crate) fn new() -> Self {
        Self { ceiling: MIN_DELAY }
    }

    /// A delay between half the current ceiling (at most `cap`) and the ceiling, which then
    /// doubles.
    pub(crate) fn next_delay(&mut self, cap: Duration) -> Duration {
        let ceiling = self.ceiling.min(cap);
        self.ceiling = (ceiling * 2).min(MAX_DELAY);
        let half = ceiling / 2;
        let jitter = rand::random_range(0..=half.as_millis() as u64);
        half + Duration::from_millis(jitter)
    }

    pub(crate) fn reset(&mut self) {
        self.ceiling = MIN_DELAY;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_to_the_cap_and_resets() {
        let mut backoff = Backoff::new();
        let first = backoff.next_delay(MAX_DELAY);
        assert!(first >= MIN_DELAY / 2 && first <= MIN_DELAY, "{first:?}");
        let mut last = first;
        for _ in 0..20 {
            last = backoff.next_delay(MAX_DELAY);
            assert!(last <= MAX_DELAY, "{last:?}");
        }
        assert!(last >= MAX_DELAY / 2, "{last:?}");
        backoff.reset();
        assert!(backoff.next_delay(MAX_DELAY) <= MIN_DELAY);
        for _ in 0..20 {
            backoff.next_delay(MAX_DELAY);
        }
        assert!(
            backoff.next_delay(MAX_DELAY_WITH_JOB) <= MAX_DELAY_WITH_JOB,
            "a held job caps the delay"
        );
    }
}
