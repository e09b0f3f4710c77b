//! Connection stats for coderd, every `report_interval_seconds` (coderd names it in each
//! answer; 30 s until then): the client streams open at any time during the interval, by
//! protocol, the user sessions (SSH by client, web terminals) open during it, and the bytes
//! they carried. A session counts like a connection: once in every interval it was alive in,
//! so a ten-second `ssh ws make` still bumps the workspace's `last_used_at`.

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
    sessions: BTreeMap<SessionKind, Connections>,
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

/// The kinds of user session coderd tells apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum SessionKind {
    Ssh,
    Vscode,
    Jetbrains,
    ReconnectingPty,
}

/// What a report claimed, committed once coderd has it.
struct Claim {
    rx: u64,
    tx: u64,
    protocols: BTreeMap<&'static str, Connections>,
    sessions: BTreeMap<SessionKind, Connections>,
}

/// What a guard counts.
enum Counted {
    Connection(&'static str),
    Session(SessionKind),
}

/// Counts one client connection or session as open until dropped.
pub(crate) struct ConnectionGuard {
    stats: Arc<Stats>,
    counted: Counted,
}

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        let mut ledger = self.stats.ledger();
        let c = match self.counted {
            Counted::Connection(protocol) => ledger.protocols.get_mut(protocol),
            Counted::Session(kind) => ledger.sessions.get_mut(&kind),
        };
        if let Some(c) = c {
            c.open -= 1;
        }
    }
}

impl Connections {
    fn open(&mut self) {
        self.open += 1;
        self.opened += 1;
    }

    /// How many were alive since the last report.
    fn alive(&self) -> i64 {
        self.open_at_report + i64::try_from(self.opened - self.opened_at_report).unwrap_or(i64::MAX)
    }

    fn commit(&mut self, claimed: &Connections) {
        self.opened_at_report = claimed.opened;
        self.open_at_report = claimed.open;
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
        self.ledger().protocols.entry(protocol).or_default().open();
        ConnectionGuard {
            stats: self.clone(),
            counted: Counted::Connection(protocol),
        }
    }

    pub(crate) fn session(self: &Arc<Self>, kind: SessionKind) -> ConnectionGuard {
        self.ledger().sessions.entry(kind).or_default().open();
        ConnectionGuard {
            stats: self.clone(),
            counted: Counted::Session(kind),
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
            let count = c.alive();
            if count > 0 {
                report
                    .connections_by_proto
                    .insert((*protocol).to_string(), count);
                report.connection_count += count;
            }
        }
        for (kind, c) in &ledger.sessions {
            let count = c.alive();
            *match kind {
                SessionKind::Ssh => &mut report.session_count_ssh,
                SessionKind::Vscode => &mut report.session_count_vscode,
                SessionKind::Jetbrains => &mut report.session_count_jetbrains,
                SessionKind::ReconnectingPty => &mut report.session_count_reconnecting_pty,
            } = count;
        }
        let claim = Claim {
            rx,
            tx,
            protocols: ledger.protocols.clone(),
            sessions: ledger.sessions.clone(),
        };
        (report, claim)
    }

    fn commit(&self, claim: Claim) {
        let mut ledger = self.ledger();
        ledger.reported_rx = claim.rx;
        ledger.reported_tx = claim.tx;
        for (protocol, claimed) in claim.protocols {
            if let Some(c) = ledger.protocols.get_mut(protocol) {
                c.commit(&claimed);
            }
        }
        for (kind, claimed) in claim.sessions {
            if let Some(c) = ledger.sessions.get_mut(&kind) {
                c.commit(&claimed);
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
    async fn sessions_count_by_kind_in_every_interval_they_were_alive() -> anyhow::Result<()> {
        let stats = Arc::new(Stats::new(Duration::from_secs(30)));
        let peer = FakePeer::default();
        let shell = stats.session(SessionKind::Ssh);
        drop(stats.session(SessionKind::Ssh));
        let editor = stats.session(SessionKind::Vscode);
        let later = stats.session(SessionKind::Ssh);
        let terminal = stats.session(SessionKind::ReconnectingPty);
        stats.report_once(&peer).await;
        let first = last_report(&peer)?;
        assert_eq!(
            (
                first.session_count_ssh,
                first.session_count_vscode,
                first.session_count_jetbrains,
                first.session_count_reconnecting_pty
            ),
            (3, 1, 0, 1)
        );
        assert_eq!(first.connection_count, 0, "sessions are not connections");
        drop((shell, editor));
        stats.report_once(&peer).await;
        assert_eq!(last_report(&peer)?.sessions(), 4, "alive in this interval");
        stats.report_once(&peer).await;
        let last = last_report(&peer)?;
        assert_eq!(
            (last.session_count_ssh, last.session_count_reconnecting_pty),
            (1, 1)
        );
        drop((later, terminal));
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
