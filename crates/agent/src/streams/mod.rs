//! Streams coderd opens into the workspace: each starts with a [`StreamHeader`], and the agent
//! answers it with one [`StreamOpen`] frame before any payload byte, so a client learns at once
//! why a stream cannot open instead of watching it close. This module dispatches on the header
//! and owns the answer; the kinds of stream live in the submodules.

pub(crate) mod ports;
mod tcp;
mod udp;

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use codersdk::agentsdk::{StreamHeader, StreamOpen, write_frame};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::sync::mpsc;
use tokio_yamux::StreamHandle;

use crate::login::Logins;
use crate::pty::Terminals;
use crate::stats::Stats;

const BUFFER: usize = 32 * 1024;

/// What serving client streams needs from the rest of the agent. It outlives connections:
/// terminals survive a reconnect.
pub(crate) struct Services {
    pub(crate) stats: Arc<Stats>,
    pub(crate) logins: Logins,
    pub(crate) terminals: Arc<Terminals>,
}

/// Serves the streams coderd opens until the connection ends.
pub(crate) async fn serve(
    mut inbound: mpsc::Receiver<(StreamHeader, StreamHandle)>,
    services: Arc<Services>,
) {
    while let Some((header, stream)) = inbound.recv().await {
        let stats = &services.stats;
        match header {
            StreamHeader::Tcp { port } => {
                tokio::spawn(tcp::forward(stream, port, stats.clone()));
            }
            StreamHeader::Udp { port } => {
                tokio::spawn(udp::forward(stream, port, stats.clone()));
            }
            StreamHeader::Ping => {
                tokio::spawn(echo(stream));
            }
            StreamHeader::ListeningPorts => {
                tokio::spawn(ports::answer(stream));
            }
            StreamHeader::Ssh => {
                tokio::spawn(crate::ssh::serve(stream, services.clone()));
            }
            StreamHeader::Pty {
                id,
                width,
                height,
                command,
            } => {
                tokio::spawn(crate::pty::attach(
                    stream,
                    services.terminals.clone(),
                    (id, width, height, command),
                    services.logins.clone(),
                    stats.clone(),
                ));
            }
            StreamHeader::Rpc(_) => {
                tokio::spawn(refuse(
                    stream,
                    "API calls go from the agent to coderd, not the other way".into(),
                ));
            }
        }
    }
}

/// Tells the client its stream is open: payload follows.
pub(crate) async fn accept(stream: &mut StreamHandle) -> io::Result<()> {
    write_frame(stream, &StreamOpen::Ok).await
}

/// Tells the client why its stream cannot open, and closes it.
pub(crate) async fn refuse(mut stream: StreamHandle, reason: String) {
    tracing::debug!(%reason, "refusing a client stream");
    if write_frame(&mut stream, &StreamOpen::Refused { reason })
        .await
        .is_ok()
    {
        let _ = stream.shutdown().await;
    }
}

/// Round-trip probe: every byte goes straight back.
async fn echo(mut stream: StreamHandle) {
    if accept(&mut stream).await.is_err() {
        return;
    }
    let (reader, writer) = tokio::io::split(stream);
    if let Err(error) = copy(reader, writer, |_| {}).await {
        tracing::debug!(%error, "a ping stream ended with an error");
    }
}

/// A stream whose bytes are counted in the stats as they pass.
pub(crate) struct Counted<S> {
    inner: S,
    stats: Arc<Stats>,
    /// Whether reads come from the client (the client's stream) or go to it (the workspace
    /// side of a forward).
    reads_from_client: bool,
}

impl<S> Counted<S> {
    /// The client's stream: what is read was received, what is written was sent.
    pub(crate) fn client(inner: S, stats: Arc<Stats>) -> Self {
        Self {
            inner,
            stats,
            reads_from_client: true,
        }
    }

    /// The workspace's end of a forward: what is read goes to the client.
    pub(crate) fn workspace(inner: S, stats: Arc<Stats>) -> Self {
        Self {
            inner,
            stats,
            reads_from_client: false,
        }
    }

    fn count(&self, read: bool, bytes: usize) {
        if read == self.reads_from_client {
            self.stats.received(bytes);
        } else {
            self.stats.sent(bytes);
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Counted<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        self.count(true, buf.filled().len() - before);
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Counted<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = polled {
            self.count(false, n);
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Copies until end of file, then closes the writing side (so half-closes pass through),
/// counting each chunk as it goes rather than at the end, so long-lived connections show up in
/// every stats interval.
pub(crate) async fn copy(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    count: impl Fn(usize),
) -> io::Result<()> {
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
