//! Reconnect delays: doubling from 100 ms up to 10 s, jittered so that the agents of a whole
//! deployment, cut off by one coderd restart, do not all come back in the same instant.

use std::time::Duration;

pub(crate) const FIRST: Duration = Duration::from_millis(100);
pub(crate) const LONGEST: Duration = Duration::from_secs(10);

#[derive(Debug)]
pub(crate) struct Backoff {
    next: Duration,
}

impl Backoff {
    pub(crate) fn new() -> Self {
        Self { next: FIRST }
    }

    /// A delay in `[next/2, next]`; `next` then doubles, up to [`LONGEST`].
    pub(crate) fn delay(&mut self) -> Duration {
        let ceiling = self.next;
        self.next = (ceiling * 2).min(LONGEST);
        let floor = ceiling / 2;
        let spread = u64::try_from((ceiling - floor).as_millis()).unwrap_or(u64::MAX);
        floor + Duration::from_millis(rand::random_range(0..=spread))
    }

    /// After a connection that worked, start again from the shortest delay.
    pub(crate) fn reset(&mut self) {
        self.next = FIRST;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_to_the_ceiling_with_jitter_and_resets() {
        let mut backoff = Backoff::new();
        let first = backoff.delay();
        assert!((FIRST / 2..=FIRST).contains(&first), "{first:?}");
        let second = backoff.delay();
        assert!((FIRST..=FIRST * 2).contains(&second), "{second:?}");
        let delays: Vec<_> = (0..30).map(|_| backoff.delay()).collect();
        assert!(delays.iter().all(|d| *d <= LONGEST), "{delays:?}");
        assert!(delays[20..].iter().all(|d| *d >= LONGEST / 2), "{delays:?}");
        assert!(
            delays[20..].windows(2).any(|w| w[0] != w[1]),
            "jittered: {delays:?}"
        );
        backoff.reset();
        assert!(backoff.delay() <= FIRST);
    }
}
