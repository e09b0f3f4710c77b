//! `coder ssh --network-info-dir`: a JSON file per SSH connection that Coder's VS Code extension
//! and JetBrains plugin read for their status bars (latency, the hop it goes through, byte
//! rates). It is named after the parent process, the `ssh` whose ProxyCommand this is, because
//! that is the process the IDE knows. There is no peer-to-peer path here: every connection goes
//! through coderd's relay, which stands where Coder's DERP relay would, so `derp_latency` is the
//! round trip to coderd and `latency` the whole path to the agent.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use codersdk::Client;
use codersdk::relay::{RelayStream, Target};
use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use uuid::Uuid;

/// The name the relay goes by in the file (Coder's clients show it as the relay region).
pub const RELAY_NAME: &str = "coderd";
/// How long a probe may take before the reading is left as it was.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Bytes moved by the connection, both ways, as the copy loops count them.
#[derive(Debug, Default)]
pub struct Counters {
    pub up: AtomicU64,
    pub down: AtomicU64,
}

/// Coder's network info, field for field.
#[derive(Debug, Default, Serialize)]
struct Info {
    p2p: bool,
    /// Milliseconds, the whole path (this machine → coderd → agent and back).
    latency: f64,
    preferred_derp: String,
    derp_latency: BTreeMap<String, f64>,
    upload_bytes_sec: u64,
    download_bytes_sec: u64,
    using_coder_connect: bool,
}

/// The file this process reports into: `<dir>/<parent pid>.json`. Creates the directory
/// (owner-only) and writes a first reading, so that an unusable directory fails the command
/// before the connection is made.
pub fn prepare(dir: &Path) -> anyhow::Result<PathBuf> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("--network-info-dir: cannot create {}", dir.display()))?;
    let path = dir.join(format!("{}.json", std::os::unix::process::parent_id()));
    write(&path, &Info::default())
        .with_context(|| format!("--network-info-dir: cannot write {}", path.display()))?;
    Ok(path)
}

/// Writes a reading every `interval` until the process ends: round trips to coderd (an API
/// call) and through the relay to the agent (bytes it echoes on a stream of its own), and the
/// byte rates since the last reading.
pub async fn report(
    client: Client,
    agent: Uuid,
    path: PathBuf,
    interval: Duration,
    counters: Arc<Counters>,
) {
    let mut echo: Option<RelayStream> = None;
    let mut last = (Instant::now(), 0u64, 0u64);
    let mut info = Info {
        preferred_derp: RELAY_NAME.into(),
        ..Info::default()
    };
    let mut tick = tokio::time::interval(interval);
    loop {
        tick.tick().await;
        if let Some(coderd) = time(client.build_info()).await {
            info.derp_latency.insert(RELAY_NAME.into(), coderd);
        }
        if echo.is_none() {
            echo = client.connect_agent(agent, Target::Ping).await.ok();
        }
        if let Some(stream) = echo.as_mut() {
            match time(round_trip(stream)).await {
                Some(whole) => info.latency = whole,
                None => echo = None,
            }
        }
        let now = Instant::now();
        let (up, down) = (
            counters.up.load(Ordering::Relaxed),
            counters.down.load(Ordering::Relaxed),
        );
        let seconds = now.duration_since(last.0).as_secs_f64().max(0.001);
        info.upload_bytes_sec = ((up - last.1) as f64 / seconds) as u64;
        info.download_bytes_sec = ((down - last.2) as f64 / seconds) as u64;
        last = (now, up, down);
        if let Err(error) = write(&path, &info) {
            tracing::warn!(%error, path = %path.display(), "writing the network info");
        }
    }
}

/// How long `work` took, in milliseconds, if it succeeded in time.
async fn time<T, E>(work: impl std::future::Future<Output = Result<T, E>>) -> Option<f64> {
    let started = Instant::now();
    match tokio::time::timeout(PROBE_TIMEOUT, work).await {
        Ok(Ok(_)) => Some(started.elapsed().as_secs_f64() * 1000.0),
        _ => None,
    }
}

async fn round_trip(stream: &mut RelayStream) -> std::io::Result<()> {
    let mut echoed = [0u8; 8];
    stream.write_all(&[1, 2, 3, 4, 5, 6, 7, 8]).await?;
    stream.read_exact(&mut echoed).await?;
    Ok(())
}

/// Replaces the file in one step (a reader never sees half a reading), readable by its owner.
fn write(path: &Path, info: &Info) -> std::io::Result<()> {
    let partial = path.with_extension("json.partial");
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(&partial)?;
    file.write_all(&serde_json::to_vec(info)?)?;
    std::fs::rename(&partial, path)
}
