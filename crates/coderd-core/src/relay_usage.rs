//! What the relay carries: per stream kind, the active streams and the bytes each way (in
//! `/metrics`), and per workspace whether someone is connected, which bumps its `last_used_at`
//! and its running build's deadline (the activity bump) and adds to the usage rollups the
//! insights read (by how it was used: SSH, a terminal, an app, an IDE's report) — for every
//! such workspace in one transaction each interval, never a write per stream.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use metrics::Counter;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use coderd_store::{Store, UsageKinds};

/// How often `last_used_at` of workspaces in use is written.
const FLUSH: Duration = Duration::from_secs(10);
/// A client's report of an app in use covers this long (Coder's CLI reports every minute).
const REPORT_COVERS: Duration = Duration::from_secs(60);

/// The ways of use the rollups tell apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Ssh,
    Pty,
    App,
    Vscode,
    Jetbrains,
}

const KINDS: usize = 5;

impl Kind {
    /// A relay stream's kind, or a client's app name; `None` for others (port forwards).
    fn of(name: &str) -> Option<Self> {
        Some(match name {
            "ssh" => Self::Ssh,
            "pty" | "reconnecting-pty" => Self::Pty,
            "app" => Self::App,
            "vscode" => Self::Vscode,
            "jetbrains" => Self::Jetbrains,
            _ => return None,
        })
    }
}

#[derive(Default)]
struct Entry {
    /// Streams open now.
    active: u32,
    /// A stream opened or closed since the last flush.
    touched: bool,
    /// Streams open now, by kind.
    open: [u32; KINDS],
    /// Kinds used since the last flush.
    seen: [bool; KINDS],
    /// Until when a client's report keeps a kind in use.
    reported: [Option<Instant>; KINDS],
}

impl Entry {
    fn kinds(&self, now: Instant) -> UsageKinds {
        let used = |k: Kind| {
            let i = k as usize;
            self.open[i] > 0 || self.seen[i] || self.reported[i].is_some_and(|until| until > now)
        };
        UsageKinds {
            ssh: used(Kind::Ssh),
            reconnecting_pty: used(Kind::Pty),
            app: used(Kind::App),
            vscode: used(Kind::Vscode),
            jetbrains: used(Kind::Jetbrains),
        }
    }

    fn reported_now(&self, now: Instant) -> bool {
        self.reported.iter().flatten().any(|until| *until > now)
    }
}

/// The relay's usage book, shared by every stream of this process.
#[derive(Clone, Default)]
pub struct Usage {
    workspaces: Arc<Mutex<HashMap<Uuid, Entry>>>,
}

impl Usage {
    /// Starts writing `last_used_at` every [`FLUSH`] until `shutdown`, then once more.
    pub fn start(store: Store, shutdown: CancellationToken) -> Self {
        let usage = Self::default();
        let book = usage.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(FLUSH);
            loop {
                tokio::select! {
                    _ = tick.tick() => book.flush(&store).await,
                    () = shutdown.cancelled() => break,
                }
            }
            book.flush(&store).await;
        });
        usage
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, Entry>> {
        self.workspaces.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Workspaces with a stream now or since the last flush, and how they were used;
    /// forgets the idle ones.
    fn take_used(&self) -> Vec<(Uuid, UsageKinds)> {
        let now = Instant::now();
        let mut map = self.lock();
        let used = map
            .iter()
            .filter(|(_, e)| e.active > 0 || e.touched || e.reported_now(now))
            .map(|(id, e)| (*id, e.kinds(now)))
            .collect();
        map.retain(|_, e| {
            e.touched = false;
            e.seen = [false; KINDS];
            e.active > 0 || e.reported_now(now)
        });
        used
    }

    async fn flush(&self, store: &Store) {
        let used = self.take_used();
        if used.is_empty() {
            return;
        }
        let ids: Vec<Uuid> = used.iter().map(|(id, _)| *id).collect();
        if let Err(e) = store.mark_workspaces_used(&ids).await {
            tracing::warn!(error = %e, count = ids.len(), "recording workspace use");
        }
        let secs = i32::try_from(FLUSH.as_secs()).unwrap_or(i32::MAX);
        if let Err(e) = store.record_usage(chrono::Utc::now(), secs, &used).await {
            tracing::warn!(error = %e, count = used.len(), "recording usage rollups");
        }
    }

    /// Records a use of `workspace` now, without a stream (a client's usage report): it counts
    /// as used at the next flush; an `app` it names (`vscode`, `ssh`, …) counts for as long as
    /// a report covers.
    pub fn touch(&self, workspace: Uuid, app: Option<&str>) {
        let mut map = self.lock();
        let entry = map.entry(workspace).or_default();
        entry.touched = true;
        if let Some(kind) = app.and_then(Kind::of) {
            entry.reported[kind as usize] = Some(Instant::now() + REPORT_COVERS);
        }
    }

    /// Records a stream of `kind` into `workspace` until the returned guard is dropped.
    pub fn begin(&self, workspace: Uuid, kind: &'static str) -> Active {
        {
            let mut map = self.lock();
            let entry = map.entry(workspace).or_default();
            entry.active += 1;
            entry.touched = true;
            if let Some(k) = Kind::of(kind) {
                entry.open[k as usize] += 1;
                entry.seen[k as usize] = true;
            }
        }
        metrics::counter!("coderd_relay_streams_total", "type" => kind).increment(1);
        metrics::gauge!("coderd_relay_streams_active", "type" => kind).increment(1.0);
        Active {
            usage: self.clone(),
            workspace,
            kind,
            to_agent: metrics::counter!("coderd_relay_bytes_total", "type" => kind, "direction" => "to_agent"),
            to_client: metrics::counter!("coderd_relay_bytes_total", "type" => kind, "direction" => "to_client"),
        }
    }
}

/// One open stream: counts its bytes, and ends its record when dropped.
pub struct Active {
    usage: Usage,
    workspace: Uuid,
    kind: &'static str,
    to_agent: Counter,
    to_client: Counter,
}

impl Active {
    pub fn to_agent(&self, bytes: usize) {
        self.to_agent.increment(bytes as u64);
    }

    pub fn to_client(&self, bytes: usize) {
        self.to_client.increment(bytes as u64);
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        metrics::gauge!("coderd_relay_streams_active", "type" => self.kind).decrement(1.0);
        let mut map = self.usage.lock();
        if let Some(entry) = map.get_mut(&self.workspace) {
            entry.active = entry.active.saturating_sub(1);
            entry.touched = true;
            if let Some(k) = Kind::of(self.kind) {
                entry.open[k as usize] = entry.open[k as usize].saturating_sub(1);
                // It was in use during this interval until now.
                entry.seen[k as usize] = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workspace_counts_as_used_while_connected_and_once_after() {
        let usage = Usage::default();
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        let ids = |used: Vec<(Uuid, UsageKinds)>| {
            let mut ids: Vec<Uuid> = used.into_iter().map(|(id, _)| id).collect();
            ids.sort();
            ids
        };
        let first = usage.begin(a, "ssh");
        let second = usage.begin(b, "tcp");
        let mut both = vec![a, b];
        both.sort();
        assert_eq!(ids(usage.take_used()), both);
        drop(second);
        // `a` is still connected; `b` closed since the last flush.
        assert_eq!(ids(usage.take_used()), both);
        assert_eq!(ids(usage.take_used()), vec![a]);
        drop(first);
        assert_eq!(ids(usage.take_used()), vec![a]);
        assert!(usage.take_used().is_empty());
    }

    #[test]
    fn use_is_told_apart_by_kind_and_reports_last_a_minute() {
        let usage = Usage::default();
        let w = Uuid::new_v4();
        let ssh = usage.begin(w, "ssh");
        usage.touch(w, Some("vscode"));
        let used = usage.take_used();
        assert_eq!(used.len(), 1);
        let kinds = used[0].1;
        assert!(kinds.ssh && kinds.vscode && !kinds.app && !kinds.reconnecting_pty);
        drop(ssh);
        // The stream closed, but the IDE's report still covers the next flushes.
        let kinds = usage.take_used()[0].1;
        assert!(kinds.ssh, "closed since the last flush");
        let kinds = usage.take_used()[0].1;
        assert!(!kinds.ssh && kinds.vscode);
    }
}
