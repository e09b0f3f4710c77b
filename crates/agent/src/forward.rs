//! Streams coderd opens into the workspace. A TCP stream is joined to `127.0.0.1:<port>` and
//! bytes are copied both ways (and counted for stats); this is what port forwarding and apps
//! build on. SSH streams are closed until the agent has an SSH server.

use std::sync::Arc;
use std::time::Duration;

use codersdk::agentsdk::StreamHeader;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_yamux::StreamHandle;

use crate::stats::Stats;

/// How long dialling a workspace port may take before the client's stream is closed.
const DIAL_TIMEOUT: Duration = Duration::from_secs(10);
const BUFFER: usize = 32 * 1024;

/// Serves the streams coderd opens until the connection ends.
pub(crate) async fn serve(
    mut inbound: mpsc::Receiver<(StreamHeader, StreamHandle)>,
    stats: Arc<Stats>,
) {
    while let Some((header, mut stream)) = inbound.recv().await {
        match header {
            StreamHeader::Tcp { port } => {
                tokio::spawn(forward_tcp(stream, port, stats.clone()));
            }
            StreamHeader::Ssh
            | StreamHeader::Udp { .. }
            | StreamHeader::Pty { .. }
            | StreamHeader::ListeningPorts
            | StreamHeader::Ping => {
                tracing::debug!(?header, "this agent does not serve such streams yet");
                let _ = stream.shutdown().await;
            }
            StreamHeader::Rpc(_) => {
                tracing::warn!("coderd opened an API call stream to the agent; closing it");
                let _ = stream.shutdown().await;
            }
        }
    }
}

async fn forward_tcp(mut stream: StreamHandle, port: u16, stats: Arc<Stats>) {
    let target =
        match tokio::time::timeout(DIAL_TIMEOUT, TcpStream::connect(("127.0.0.1", port))).await {
            Ok(Ok(target)) => target,
            Ok(Err(error)) => {
                tracing::debug!(port, %error, "cannot reach the forwarded port");
                let _ = stream.shutdown().await;
                return;
            }
            Err(_) => {
                tracing::debug!(port, "dialling the forwarded port timed out");
                let _ = stream.shutdown().await;
                return;
            }
        };
    let _open = stats.connection("tcp");
    let (client_read, client_write) = tokio::io::split(stream);
    let (target_read, target_write) = target.into_split();
    // The first error ends both directions: a reset on one side would otherwise leave the
    // other waiting forever.
    if let Err(error) = tokio::try_join!(
        copy(client_read, target_write, |n| stats.received(n)),
        copy(target_read, client_write, |n| stats.sent(n)),
    ) {
        tracing::debug!(port, %error, "a forwarded connection ended with an error");
    }
}

/// Copies until end of file, then closes the writing side (so half-closes pass through),
/// counting each chunk as it goes rather than at the end, so long-lived connections show up in
/// every stats interval.
async fn copy(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    count: impl Fn(usize),
) -> std::io::Result<()> {
    let mut buf = vec![0u8; BUFFER];
    loop {
        let n = from.read(&mut buf).await?;
        if n == 0 {
            return to.shutdown().await;
        }
        to.write_all(&buf[..n]).await?;
        count(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn copy_counts_and_passes_end_of_file() -> anyhow::Result<()> {
        let (mut near, far) = tokio::io::duplex(64);
        let counted = std::sync::atomic::AtomicUsize::new(0);
        let source: &[u8] = &[7u8; 1000];
        let (result, received) = tokio::join!(
            copy(source, far, |n| {
                counted.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
            }),
            async {
                let mut all = Vec::new();
                near.read_to_end(&mut all).await.map(|_| all)
            }
        );
        result?;
        assert_eq!(received?.len(), 1000);
        assert_eq!(counted.into_inner(), 1000);
        Ok(())
    }
}
