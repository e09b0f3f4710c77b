//! Connection stats for coderd, every `report_interval_seconds` (coderd names it in each
//! answer; 30 s until then): the client streams open at any time during the interval, by
//! protocol, and the bytes they carried. Sessions stay 0 until the agent serves SSH.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use codersdk::agentsdk::{Request, Response, Stats as Report};

use crate::rpc::{self, CallError, Rpc};

pub(crate) struct Stats {
    rx_bytes: AtomicU64,
    tx_bytes: AtomicU64,
    interval_seconds: AtomicU64,
    ledger: Mutex<Ledger>,
}

/// Running totals, and what of them coderd has already been told.
#[derive(Default)]
struct Ledger {
    protocols: BTreeMap<&'static str, Connections>,
    reported_rx: u64,
    reported_tx: u64,
}

#[derive(Default, Clone, Copy)]
struct Connections {
    open: i64,
    opened: u64,
    /// Open at the last report: they were alive in the next interval too.
    open_at_report: i64,
    opened_at_report: u64,
}

/// What a report claimed, committed once coderd has it.
struct Claim {
    rx: u64,
    tx: u64,
    protocols: BTreeMap<&'static str, Connections>,
}

/// Counts one client connection as open until dropped.
pub(crate) struct ConnectionGuard {
    stats: Arc<Stats>,
    protocol: &'static str,
}

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        if let Some(c) = self.stats.ledger().protocols.get_mut(self.protocol) {
            c.open -= 1;
        }
    }
}

impl Stats {
    pub(crate) fn new(interval: Duration) -> Self {
        Self {
            rx_bytes: AtomicU64::new(0),
            tx_bytes: AtomicU64::new(0),
            interval_seconds: AtomicU64::new(interval.as_secs().max(1)),
            ledger: Mutex::new(Ledger::default()),
        }
    }

    fn ledger(&self) -> MutexGuard<'_, Ledger> {
        self.ledger.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn connection(self: &Arc<Self>, protocol: &'static str) -> ConnectionGuard {
        let mut ledger = self.ledger();
        let c = ledger.protocols.entry(protocol).or_default();
        c.open += 1;
        c.opened += 1;
        ConnectionGuard {
            stats: self.clone(),
            protocol,
        }
    }

    /// Bytes the agent received from clients.
    pub(crate) fn received(&self, bytes: usize) {
        self.rx_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// Bytes the agent sent to clients.
    pub(crate) fn sent(&self, bytes: usize) {
        self.tx_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    pub(crate) fn interval(&self) -> Duration {
        Duration::from_secs(self.interval_seconds.load(Ordering::Relaxed))
    }

    fn report(&self) -> (Report, Claim) {
        let ledger = self.ledger();
        let rx = self.rx_bytes.load(Ordering::Relaxed);
        let tx = self.tx_bytes.load(Ordering::Relaxed);
        let mut report = Report {
            rx_bytes: i64::try_from(rx - ledger.reported_rx).unwrap_or(i64::MAX),
            tx_bytes: i64::try_from(tx - ledger.reported_tx).unwrap_or(i64::MAX),
            ..Report::default()
        };
        for (protocol, c) in &ledger.protocols {
            let new = i64::try_from(c.opened - c.opened_at_report).unwrap_or(i64::MAX);
            let count = c.open_at_report + new;
            if count > 0 {
                report
                    .connections_by_proto
                    .insert((*protocol).to_string(), count);
                report.connection_count += count;
            }
        }
        let claim = Claim {
            rx,
            tx,
            protocols: ledger.protocols.clone(),
        };
        (report, claim)
    }

    fn commit(&self, claim: Claim) {
        let mut ledger = self.ledger();
        ledger.reported_rx = claim.rx;
        ledger.reported_tx = claim.tx;
        for (protocol, claimed) in claim.protocols {
            if let Some(c) = ledger.protocols.get_mut(protocol) {
                c.opened_at_report = claimed.opened;
                c.open_at_report = claimed.open;
            }
        }
    }

    /// Reports every interval through `rpc` until the caller drops the future. A report that
    /// got no answer is folded into the next one.
    pub(crate) async fn report_loop(&self, rpc: &impl Rpc) {
        loop {
            tokio::time::sleep(self.interval()).await;
            self.report_once(rpc).await;
        }
    }

    async fn report_once(&self, rpc: &impl Rpc) {
        let (report, claim) = self.report();
        match rpc::call(rpc, Request::UpdateStats(report)).await {
            Ok(response) => {
                self.commit(claim);
                if let Response::Stats {
                    report_interval_seconds: seconds @ 1..,
                } = response
                {
                    self.interval_seconds.store(seconds, Ordering::Relaxed);
                }
            }
            Err(CallError::Refused(message)) => {
                tracing::warn!(%message, "coderd refused the agent's stats");
                self.commit(claim);
            }
            Err(CallError::Transport(error)) => {
                tracing::debug!(%error, "cannot report stats; they go with the next report");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reporter::tests::FakePeer;

    fn last_report(peer: &FakePeer) -> anyhow::Result<Report> {
        match peer.take_calls().pop() {
            Some(Request::UpdateStats(report)) => Ok(report),
            other => anyhow::bail!("expected stats, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn counts_connections_alive_in_each_interval_and_their_bytes() -> anyhow::Result<()> {
        let stats = Arc::new(Stats::new(Duration::from_secs(30)));
        let peer = FakePeer::default();

        let long_lived = stats.connection("tcp");
        drop(stats.connection("tcp"));
        stats.received(100);
        stats.sent(40);
        stats.report_once(&peer).await;
        let first = last_report(&peer)?;
        assert_eq!(first.connection_count, 2);
        assert_eq!(first.connections_by_proto.get("tcp"), Some(&2));
        assert_eq!((first.rx_bytes, first.tx_bytes), (100, 40));
        assert_eq!(first.sessions(), 0);

        stats.sent(5);
        stats.report_once(&peer).await;
        let second = last_report(&peer)?;
        assert_eq!(second.connection_count, 1, "the one still open");
        assert_eq!((second.rx_bytes, second.tx_bytes), (0, 5));

        drop(long_lived);
        stats.report_once(&peer).await;
        assert_eq!(
            last_report(&peer)?.connection_count,
            1,
            "it was open in this interval"
        );
        stats.report_once(&peer).await;
        let idle = last_report(&peer)?;
        assert_eq!(idle.connection_count, 0);
        assert!(idle.connections_by_proto.is_empty());
        Ok(())
    }

    #[tokio::test]
    async fn unanswered_reports_fold_into_the_next_and_coderd_sets_the_interval()
    -> anyhow::Result<()> {
        let stats = Arc::new(Stats::new(Duration::from_secs(30)));
        let peer = FakePeer::default();
        stats.received(7);
        peer.fail_next(1);
        stats.report_once(&peer).await;
        stats.received(3);
        peer.answer(Ok(Response::Stats {
            report_interval_seconds: 5,
        }));
        stats.report_once(&peer).await;
        assert_eq!(last_report(&peer)?.rx_bytes, 10);
        assert_eq!(stats.interval(), Duration::from_secs(5));

        peer.answer(Ok(Response::Stats {
            report_interval_seconds: 0,
        }));
        stats.report_once(&peer).await;
        assert_eq!(
            stats.interval(),
            Duration::from_secs(5),
            "0 keeps the interval"
        );
        Ok(())
    }
}
