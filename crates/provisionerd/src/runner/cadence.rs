//! When a running job's next update is due: new logs go out every `LOG_FLUSH_INTERVAL`, and an
//! update goes out at least every `HEARTBEAT_INTERVAL` even without logs, because the update is
//! the job's heartbeat.

use codersdk::provisionerd::{HEARTBEAT_INTERVAL, LOG_FLUSH_INTERVAL};
use tokio::time::Instant;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Cadence {
    last_sent: Instant,
    last_check: Instant,
    /// An update is owed at once (the connection is new and coderd must learn the job is held).
    owed: bool,
}

impl Cadence {
    pub(super) fn new(now: Instant) -> Self {
        Self {
            last_sent: now,
            last_check: now,
            owed: false,
        }
    }

    /// When [`Self::poll`] should run next.
    pub(super) fn next_check(&self) -> Instant {
        if self.owed {
            return self.last_check;
        }
        (self.last_check + LOG_FLUSH_INTERVAL).min(self.last_sent + HEARTBEAT_INTERVAL)
    }

    /// Whether to send an update now; call [`Self::sent`] once one went out.
    pub(super) fn poll(&mut self, now: Instant, has_logs: bool) -> bool {
        if self.owed || now >= self.last_sent + HEARTBEAT_INTERVAL {
            return true;
        }
        if now >= self.last_check + LOG_FLUSH_INTERVAL {
            self.last_check = now;
            return has_logs;
        }
        false
    }

    pub(super) fn sent(&mut self, now: Instant) {
        self.last_sent = now;
        self.last_check = now;
        self.owed = false;
    }

    pub(super) fn owe(&mut self) {
        self.owed = true;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn logs_flush_every_interval() {
        let start = Instant::now();
        let mut cadence = Cadence::new(start);
        assert_eq!(cadence.next_check(), start + LOG_FLUSH_INTERVAL);
        assert!(
            !cadence.poll(start + 100 * MS, true),
            "not before the interval"
        );
        let at = start + LOG_FLUSH_INTERVAL;
        assert!(cadence.poll(at, true));
        cadence.sent(at);
        assert_eq!(cadence.next_check(), at + LOG_FLUSH_INTERVAL);
    }

    #[test]
    fn quiet_jobs_heartbeat() {
        let start = Instant::now();
        let mut cadence = Cadence::new(start);
        let mut now = start;
        let mut sent_at = None;
        // Follow the schedule the runner would: wake at next_check, poll.
        for _ in 0..100 {
            now = cadence.next_check();
            if cadence.poll(now, false) {
                sent_at = Some(now);
                cadence.sent(now);
                break;
            }
        }
        assert_eq!(sent_at, Some(start + HEARTBEAT_INTERVAL), "{now:?}");
        assert_eq!(
            cadence.next_check(),
            start + HEARTBEAT_INTERVAL + LOG_FLUSH_INTERVAL
        );
    }

    #[test]
    fn checks_between_flushes_do_not_postpone_the_heartbeat() {
        let start = Instant::now();
        let mut cadence = Cadence::new(start);
        for i in 1..20 {
            assert!(!cadence.poll(start + i * LOG_FLUSH_INTERVAL, false));
        }
        assert!(cadence.poll(start + HEARTBEAT_INTERVAL, false));
    }

    #[test]
    fn an_owed_update_is_due_at_once() {
        let start = Instant::now();
        let mut cadence = Cadence::new(start);
        cadence.owe();
        assert_eq!(cadence.next_check(), start);
        assert!(cadence.poll(start, false));
        cadence.sent(start + MS);
        assert!(!cadence.poll(start + 2 * MS, true));
    }
}
