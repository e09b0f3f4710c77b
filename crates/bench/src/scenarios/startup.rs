//! `coder server` start-up with an existing embedded cluster (issue 2): the cluster is created
//! by a first start that is not measured; then each run starts the server on it, times spawn →
//! the first 200 from `/healthz`, lets it idle a moment, reads its RSS, and stops it (which
//! stops the cluster too, so every run starts PostgreSQL as a real restart does). The first,
//! unmeasured server also serves the agent download of P11b.

use std::path::Path;
use std::time::Duration;

use super::agentbin::{self, AgentDownload};
use crate::procs::{Memory, Server, open_dir};

pub struct StartupRun {
    pub ready: Duration,
    pub idle: Memory,
}

/// How long the server idles before its memory is read.
const SETTLE: Duration = Duration::from_secs(1);

pub async fn run(
    coder_bin: &Path,
    dir: &Path,
    runs: usize,
    timeout: Duration,
) -> anyhow::Result<(Vec<StartupRun>, AgentDownload)> {
    let dir = open_dir(dir)?;
    let (first, _) = Server::start(coder_bin, &dir, &[], timeout).await?;
    let download = agentbin::measure(&first.url).await;
    first.stop(timeout).await?;
    let download = download?;
    let mut results = Vec::with_capacity(runs);
    for _ in 0..runs {
        let (server, ready) = Server::start(coder_bin, &dir, &[], timeout).await?;
        tokio::time::sleep(SETTLE).await;
        let idle = server.memory()?;
        server.stop(timeout).await?;
        results.push(StartupRun { ready, idle });
    }
    Ok((results, download))
}
