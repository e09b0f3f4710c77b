//! P8: many simulated agents on one coderd. Each holds its own agent connection (the WebSocket
//! and yamux session `coder agent` uses), fetches its manifest and reports `starting` then
//! `ready` as an agent does, then in steady state sends one metadata batch (its 2 keys) every
//! 10 s and a stats report every 30 s. Start offsets are spread evenly over each interval, so
//! the load is steady rather than lockstep.
//!
//! Over a steady-state window that starts after every agent is connected and reporting:
//! coderd's CPU (utime + stime from `/proc/<pid>/stat`, as a share of one core), its RSS
//! (sampled every 500 ms: the window's peak and its end; VmHWM would still hold earlier
//! scenarios' peaks), each call's latency as the agent sees it (call → answer on its stream),
//! and the database's transactions per second (`pg_stat_database` commits + rollbacks of the
//! run's database; the bench's own two reads of it are included and negligible).

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, ensure};
use chrono::Utc;
use codersdk::agentsdk::{
    AgentConnection, LifecycleChange, LifecycleState, MetadataValue, Request, Response, Stats,
};
use futures::StreamExt;
use tokio::task::JoinSet;
use tokio::time::{Instant, MissedTickBehavior};

use crate::deploy::Deployment;
use crate::procs::{DATABASE, Memory};

/// How often each agent reports, as the spec has it.
pub const METADATA_EVERY: Duration = Duration::from_secs(10);
pub const STATS_EVERY: Duration = Duration::from_secs(30);
/// The metadata keys the template declares (a metadata batch updates only declared keys).
pub const KEYS: [&str; 2] = ["load", "disk"];
/// From the last agent connected to the window's start.
const SETTLE: Duration = Duration::from_secs(2);
/// Connections opened at once while ramping up (not measured).
const CONNECTING: usize = 32;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    Metadata,
    Stats,
}

pub struct AgentsRun {
    pub agents: usize,
    /// Ramp-up: connect, manifest, lifecycle for all agents (not measured against a goal).
    pub connect: Duration,
    pub window: Duration,
    /// coderd's CPU over the window, in cores.
    pub cpu: f64,
    /// coderd's RSS before the first agent connected: what earlier scenarios left (the P5
    /// listings grow it to hundreds of MiB, and the allocator keeps much of that).
    pub rss_before: f64,
    pub rss_peak: f64,
    pub rss_end: f64,
    /// Calls sent inside the window and their latencies.
    pub calls: Vec<(Call, Duration)>,
    pub errors: usize,
    pub first_error: Option<String>,
    pub xacts_per_second: f64,
}

/// Runs `tokens.len()` agents for a `window` of steady state.
pub async fn run(
    deploy: &Deployment,
    tokens: &[String],
    window: Duration,
    progress: &dyn Fn(&str),
) -> anyhow::Result<AgentsRun> {
    let url = deploy.server.url.clone();
    let rss_before = deploy.server.memory()?.rss_mib;
    let ramp = Instant::now();
    let connected: Vec<anyhow::Result<AgentConnection>> = futures::stream::iter(tokens)
        .map(|token| {
            let url = url.clone();
            async move {
                let conn = AgentConnection::connect(&url, token).await?;
                let manifest = match conn.call(Request::GetManifest).await? {
                    Response::Manifest(m) => m,
                    other => anyhow::bail!("asked for the manifest, got {other:?}"),
                };
                ensure!(
                    manifest.metadata.len() == KEYS.len(),
                    "the manifest declares {} metadata keys, not {}",
                    manifest.metadata.len(),
                    KEYS.len()
                );
                let changes = [LifecycleState::Starting, LifecycleState::Ready]
                    .into_iter()
                    .map(|state| LifecycleChange {
                        state,
                        changed_at: Utc::now(),
                    })
                    .collect();
                conn.call(Request::UpdateLifecycle { changes }).await?;
                Ok(conn)
            }
        })
        .buffer_unordered(CONNECTING)
        .collect()
        .await;
    let conns: Vec<Arc<AgentConnection>> = connected
        .into_iter()
        .collect::<anyhow::Result<Vec<_>>>()
        .context("connecting the simulated agents")?
        .into_iter()
        .map(Arc::new)
        .collect();
    let connect = ramp.elapsed();
    progress(&format!(
        "{} agents connected in {:.1} s; steady state for {} s after {} s",
        conns.len(),
        connect.as_secs_f64(),
        window.as_secs(),
        SETTLE.as_secs()
    ));

    // Every agent's first report is at its own offset into the interval, so the load is at its
    // steady rate from `base` on; the window opens after a short settling (the ramp-up's last
    // writes, coderd's batch flushes catching up).
    let base = Instant::now();
    let opens = base + SETTLE;
    let closes = opens + window;
    let n = conns.len() as u32;
    let mut tasks = JoinSet::new();
    for (i, conn) in conns.iter().enumerate() {
        let i = i as u32;
        for (call, every) in [(Call::Metadata, METADATA_EVERY), (Call::Stats, STATS_EVERY)] {
            // Stats offsets run in the opposite order so an agent's two calls rarely coincide.
            let slot = if call == Call::Stats { n - 1 - i } else { i };
            let first = base + every * slot / n.max(1);
            tasks.spawn(report(conn.clone(), call, every, first, (opens, closes)));
        }
    }

    tokio::time::sleep_until(opens).await;
    let cpu_start = deploy.server.cpu()?;
    let xacts_start = xacts(&deploy.pool).await?;
    let measured = Instant::now();
    let mut rss_peak: f64 = 0.0;
    let mut sampler = tokio::time::interval(Duration::from_millis(500));
    while Instant::now() < closes {
        sampler.tick().await;
        rss_peak = rss_peak.max(deploy.server.memory()?.rss_mib);
    }
    let cpu = deploy.server.cpu()? - cpu_start;
    let xacts_end = xacts(&deploy.pool).await?;
    let elapsed = measured.elapsed().as_secs_f64();
    let end: Memory = deploy.server.memory()?;

    let mut calls = Vec::new();
    let mut errors = 0;
    let mut first_error = None;
    while let Some(joined) = tasks.join_next().await {
        let reported = joined?;
        calls.extend(reported.calls);
        errors += reported.errors;
        if first_error.is_none() {
            first_error = reported.first_error;
        }
    }
    ensure!(
        conns.iter().all(|c| !c.is_closed()),
        "an agent connection dropped during the window"
    );
    drop(conns);
    Ok(AgentsRun {
        agents: tokens.len(),
        connect,
        window: Duration::from_secs_f64(elapsed),
        cpu: cpu.as_secs_f64() / elapsed,
        rss_before,
        rss_peak: rss_peak.max(end.rss_mib),
        rss_end: end.rss_mib,
        calls,
        errors,
        first_error,
        xacts_per_second: (xacts_end - xacts_start) as f64 / elapsed,
    })
}

struct Reported {
    calls: Vec<(Call, Duration)>,
    errors: usize,
    first_error: Option<String>,
}

/// One agent's reports of one kind, from `first` every `every` until the window closes.
/// Calls sent inside the window are timed; errors are counted, not fatal (an overloaded
/// server must show up as errors in the result, not end the run).
async fn report(
    conn: Arc<AgentConnection>,
    call: Call,
    every: Duration,
    first: Instant,
    (opens, closes): (Instant, Instant),
) -> Reported {
    let mut out = Reported {
        calls: Vec::new(),
        errors: 0,
        first_error: None,
    };
    let mut ticks = tokio::time::interval_at(first, every);
    // A real agent's next report follows the previous one; it does not burst to catch up.
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut sent = 0u64;
    loop {
        // Stop at the window's end rather than waiting for a tick past it (up to 30 s away).
        let at = tokio::select! {
            at = ticks.tick() => at,
            () = tokio::time::sleep_until(closes) => return out,
        };
        if at >= closes {
            return out;
        }
        sent += 1;
        let request = match call {
            Call::Metadata => Request::BatchUpdateMetadata {
                values: KEYS
                    .iter()
                    .map(|key| MetadataValue {
                        key: (*key).to_string(),
                        collected_at: Utc::now(),
                        age: 0,
                        value: format!("{key} {sent}"),
                        error: String::new(),
                    })
                    .collect(),
            },
            Call::Stats => Request::UpdateStats(Stats {
                connection_count: 1,
                rx_bytes: 1024 * sent as i64,
                tx_bytes: 2048 * sent as i64,
                session_count_ssh: 1,
                ..Default::default()
            }),
        };
        let started = Instant::now();
        let result = conn.call(request).await;
        let took = started.elapsed();
        let inside = started >= opens;
        match result {
            Ok(_) if inside => out.calls.push((call, took)),
            Ok(_) => {}
            Err(e) => {
                out.errors += 1;
                if out.first_error.is_none() {
                    out.first_error = Some(e.to_string());
                }
            }
        }
    }
}

/// Transactions committed or rolled back in the run's database so far. `pg_stat_database`
/// lags by up to a second (backends flush their counters at most once a second), which over
/// a window of tens of seconds is within the figure's noise.
async fn xacts(pool: &sqlx::PgPool) -> anyhow::Result<i64> {
    Ok(sqlx::query_scalar(
        "SELECT (xact_commit + xact_rollback)::int8 FROM pg_stat_database WHERE datname = $1",
    )
    .bind(DATABASE)
    .fetch_one(pool)
    .await?)
}
