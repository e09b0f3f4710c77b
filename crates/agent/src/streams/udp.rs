//! UDP forwarding: a stream carries one client "connection" (its datagrams to one port), each
//! datagram framed as a 2-byte big-endian length and its bytes. The agent gives every stream a
//! UDP socket of its own, connected to `127.0.0.1:<port>`, so replies find their way back to
//! the right client, and ends the stream after [`IDLE_TIMEOUT`] without a datagram either way
//! (UDP has no close to say the client is gone).

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::UdpSocket;
use tokio::time::Instant;
use tokio_yamux::StreamHandle;

use super::{accept, refuse};
use crate::stats::Stats;

/// How long a UDP stream lives without a datagram in either direction.
pub(crate) const IDLE_TIMEOUT: Duration = Duration::from_secs(120);
/// The largest UDP payload.
const MAX_DATAGRAM: usize = u16::MAX as usize;

pub(super) async fn forward(mut stream: StreamHandle, port: u16, stats: Arc<Stats>) {
    let socket = match connect(port).await {
        Ok(socket) => socket,
        Err(error) => {
            let reason =
                format!("cannot open a UDP socket to port {port} in the workspace: {error}");
            return refuse(stream, reason).await;
        }
    };
    if accept(&mut stream).await.is_err() {
        return;
    }
    let _open = stats.connection("udp");
    let activity = Activity::new();
    let (client_read, client_write) = tokio::io::split(stream);
    // Each direction runs on its own: a half-read frame must never be abandoned because a
    // datagram arrived the other way.
    let result = tokio::select! {
        r = to_workspace(client_read, &socket, &activity, &stats) => r,
        r = to_client(&socket, client_write, &activity, &stats) => r,
        () = activity.idle(IDLE_TIMEOUT) => {
            tracing::debug!(port, "a UDP stream was idle too long");
            Ok(())
        }
    };
    if let Err(error) = result {
        tracing::debug!(port, %error, "a UDP stream ended with an error");
    }
}

async fn connect(port: u16) -> io::Result<UdpSocket> {
    let socket = UdpSocket::bind(("127.0.0.1", 0)).await?;
    socket.connect(("127.0.0.1", port)).await?;
    Ok(socket)
}

/// Client frames → datagrams, until the client ends the stream.
async fn to_workspace(
    mut from: impl AsyncRead + Unpin,
    socket: &UdpSocket,
    activity: &Activity,
    stats: &Stats,
) -> io::Result<()> {
    let mut buf = vec![0u8; MAX_DATAGRAM];
    loop {
        let mut len = [0u8; 2];
        match from.read_exact(&mut len).await {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e),
        }
        let datagram = &mut buf[..usize::from(u16::from_be_bytes(len))];
        from.read_exact(datagram).await?;
        activity.touch();
        stats.received(datagram.len());
        match socket.send(datagram).await {
            // An earlier datagram found no listener (ICMP port unreachable); UDP drops it and
            // so does the agent: the service may start listening later.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
            other => {
                other?;
            }
        }
    }
}

/// Datagrams → client frames, until the stream breaks.
async fn to_client(
    socket: &UdpSocket,
    mut to: impl AsyncWrite + Unpin,
    activity: &Activity,
    stats: &Stats,
) -> io::Result<()> {
    let mut buf = vec![0u8; 2 + MAX_DATAGRAM];
    loop {
        let n = match socket.recv(&mut buf[2..]).await {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => continue,
            Err(e) => return Err(e),
        };
        activity.touch();
        let len = u16::try_from(n).map_err(io::Error::other)?;
        buf[..2].copy_from_slice(&len.to_be_bytes());
        to.write_all(&buf[..2 + n]).await?;
        to.flush().await?;
        stats.sent(n);
    }
}

/// When a datagram last went either way.
struct Activity {
    start: Instant,
    last_ms: AtomicU64,
}

impl Activity {
    fn new() -> Self {
        Self {
            start: Instant::now(),
            last_ms: AtomicU64::new(0),
        }
    }

    fn touch(&self) {
        let ms = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    /// Resolves once nothing happened for `timeout`.
    async fn idle(&self, timeout: Duration) {
        loop {
            let last = self.start + Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
            if last.elapsed() >= timeout {
                return;
            }
            tokio::time::sleep_until(last + timeout).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn idle_waits_for_quiet_since_the_last_touch() {
        let activity = Activity::new();
        tokio::time::advance(Duration::from_secs(50)).await;
        activity.touch();
        let started = Instant::now();
        activity.idle(Duration::from_secs(60)).await;
        assert_eq!(started.elapsed(), Duration::from_secs(60));
    }
}
