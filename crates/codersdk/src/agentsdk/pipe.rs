//! Copying both ways between a yamux stream and another byte stream (a TCP connection, a
//! child's pipes) without deadlocking on tokio-yamux's windows.
//!
//! tokio-yamux processes a stream's incoming frames — data *and* the window updates its writer
//! waits for — only when the stream is polled for reading. A plain bidirectional copy stops
//! reading the stream while the other side is slow to take what was read, so with both
//! directions busy (an echo, a build streaming output while it reads input) the writer waits
//! for a window update nobody processes, and the frames pile up until the whole yamux session
//! stops reading. [`pipe`] keeps polling the stream (`poll_peek` with no room) while its output
//! waits: that moves frames into the stream's own buffer, which the receive window bounds,
//! without granting the peer any more window.
//!
//! A limit this cannot lift: a stream processes no frame after the peer's FIN, window updates
//! included, so after one side half-closes the other can send at most one window (256 KiB).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_yamux::StreamHandle;

/// Bytes read at once each way.
const BUFFER: usize = 64 << 10;

/// One direction's buffer: bytes read and not yet written.
struct Half {
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    read_done: bool,
    shut: bool,
    total: u64,
}

impl Half {
    fn new() -> Self {
        Self {
            buf: vec![0; BUFFER].into_boxed_slice(),
            start: 0,
            end: 0,
            read_done: false,
            shut: false,
            total: 0,
        }
    }

    fn empty(&self) -> bool {
        self.start == self.end
    }

    /// Reads into the buffer when it is empty; returns whether anything happened.
    fn poll_fill<R: AsyncRead + Unpin>(
        &mut self,
        cx: &mut Context<'_>,
        from: &mut R,
    ) -> io::Result<bool> {
        if !self.empty() || self.read_done {
            return Ok(false);
        }
        let mut read = ReadBuf::new(&mut self.buf);
        match Pin::new(from).poll_read(cx, &mut read) {
            Poll::Ready(Ok(())) => {
                let n = read.filled().len();
                if n == 0 {
                    self.read_done = true;
                }
                self.start = 0;
                self.end = n;
                Ok(true)
            }
            Poll::Ready(Err(e)) => Err(e),
            Poll::Pending => Ok(false),
        }
    }

    /// Writes what is buffered, then shuts the writer down after the reader's end. Returns
    /// (anything happened, the writer is blocked).
    fn poll_drain<W: AsyncWrite + Unpin>(
        &mut self,
        cx: &mut Context<'_>,
        to: &mut W,
    ) -> io::Result<(bool, bool)> {
        let mut moved = false;
        while !self.empty() {
            match Pin::new(&mut *to).poll_write(cx, &self.buf[self.start..self.end]) {
                Poll::Ready(Ok(0)) => return Err(io::ErrorKind::WriteZero.into()),
                Poll::Ready(Ok(n)) => {
                    self.start += n;
                    self.total += n as u64;
                    moved = true;
                }
                Poll::Ready(Err(e)) => return Err(e),
                Poll::Pending => return Ok((moved, true)),
            }
        }
        if self.read_done && !self.shut {
            match Pin::new(&mut *to).poll_shutdown(cx) {
                Poll::Ready(result) => {
                    result?;
                    self.shut = true;
                    moved = true;
                }
                Poll::Pending => return Ok((moved, true)),
            }
        } else if !moved {
            // Interactive writers (a terminal) must not wait for more bytes.
            let _ = Pin::new(&mut *to).poll_flush(cx)?;
        }
        Ok((moved, false))
    }
}

/// Copies `stream` → `other` and `other` → `stream` until both directions ended (each end
/// passed on as a shutdown); returns the bytes copied (from the stream, to the stream). The
/// first error ends both directions.
pub async fn pipe<O>(stream: StreamHandle, other: O) -> io::Result<(u64, u64)>
where
    O: AsyncRead + AsyncWrite + Unpin,
{
    Pipe {
        stream,
        other,
        down: Half::new(),
        up: Half::new(),
    }
    .await
}

struct Pipe<O> {
    stream: StreamHandle,
    other: O,
    /// stream → other
    down: Half,
    /// other → stream
    up: Half,
}

impl<O: AsyncRead + AsyncWrite + Unpin> Future for Pipe<O> {
    type Output = io::Result<(u64, u64)>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        loop {
            let mut moved = this.down.poll_fill(cx, &mut this.stream)?;
            let (drained, blocked) = this.down.poll_drain(cx, &mut this.other)?;
            moved |= drained;
            if blocked {
                // Keep the stream's frames (and window updates) moving; see the module docs.
                let mut none = ReadBuf::new(&mut []);
                if let Poll::Ready(Err(e)) = this.stream.poll_peek(cx, &mut none) {
                    return Poll::Ready(Err(e));
                }
            }
            moved |= this.up.poll_fill(cx, &mut this.other)?;
            moved |= this.up.poll_drain(cx, &mut this.stream)?.0;
            if this.down.shut && this.up.shut {
                return Poll::Ready(Ok((this.down.total, this.up.total)));
            }
            if !moved {
                return Poll::Pending;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agentsdk::{drive, yamux_config};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::sync::{mpsc, watch};
    use tokio_yamux::Session;

    /// An echo behind a yamux stream, with far more in flight each way than every window and
    /// buffer on the path: a copy that stops reading the stream while its output is full
    /// deadlocks here.
    #[tokio::test]
    async fn an_echo_larger_than_every_window_completes() {
        let (a, b) = tokio::io::duplex(64 << 10);
        let client = Session::new_client(a, yamux_config());
        let server = Session::new_server(b, yamux_config());
        let mut control = client.control();
        let (client_in, _client_inbound) = mpsc::channel(1);
        let (c_closed, _) = watch::channel(false);
        drive(client, client_in, c_closed);
        let mut server = server;
        tokio::spawn(async move {
            use futures::StreamExt;
            while let Some(Ok(stream)) = server.next().await {
                tokio::spawn(async move {
                    // The echo: a pipe whose other side loops back into itself.
                    let (near, far) = tokio::io::duplex(16 << 10);
                    tokio::spawn(async move {
                        let (mut r, mut w) = tokio::io::split(far);
                        let _ = tokio::io::copy(&mut r, &mut w).await;
                        let _ = w.shutdown().await;
                    });
                    pipe(stream, near).await.expect("pipe");
                });
            }
        });
        let stream = control.open_stream().await.expect("open");
        let (mut r, mut w) = tokio::io::split(stream);
        let data: Vec<u8> = (0..8u32 << 20).map(|i| (i % 253) as u8).collect();
        let sent = data.clone();
        let result = tokio::time::timeout(std::time::Duration::from_secs(30), async move {
            let writer = tokio::spawn(async move {
                w.write_all(&sent).await.expect("write");
                w
            });
            // Everything comes back before this side half-closes: tokio-yamux processes no
            // window update after a FIN, so what follows a half-close is capped by the window.
            let mut back = vec![0u8; data.len()];
            r.read_exact(&mut back).await.expect("read");
            let mut w = writer.await.expect("writer");
            w.shutdown().await.expect("shutdown");
            let mut rest = Vec::new();
            r.read_to_end(&mut rest).await.expect("the end");
            assert!(rest.is_empty());
            back
        })
        .await
        .expect("no deadlock");
        let data: Vec<u8> = (0..8u32 << 20).map(|i| (i % 253) as u8).collect();
        assert!(result == data, "{} bytes of {}", result.len(), data.len());
    }
}
