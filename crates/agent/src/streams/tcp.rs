//! TCP forwarding: a stream is joined to a port on the workspace's loopback, bytes copied both
//! ways and counted for stats. Port forwarding and workspace apps build on this.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio_yamux::StreamHandle;

use codersdk::agentsdk::pipe;

use super::{Counted, accept, refuse};
use crate::stats::Stats;

/// How long dialling a workspace port may take before the client is told it timed out.
const DIAL_TIMEOUT: Duration = Duration::from_secs(10);

pub(super) async fn forward(mut stream: StreamHandle, port: u16, stats: Arc<Stats>) {
    let target = match dial(port).await {
        Ok(target) => target,
        Err(reason) => return refuse(stream, reason).await,
    };
    if accept(&mut stream).await.is_err() {
        return;
    }
    let _open = stats.connection("tcp");
    if let Err(error) = pipe(stream, Counted::workspace(target, stats.clone())).await {
        tracing::debug!(port, %error, "a forwarded connection ended with an error");
    }
}

/// Connects to `127.0.0.1:<port>`, or `[::1]:<port>` when nothing listens on the IPv4 one
/// (development servers that bind `localhost` often get only `::1`). The error is the reason
/// the client is shown.
pub(super) async fn dial(port: u16) -> Result<TcpStream, String> {
    let dial_both = async {
        match connect(Ipv4Addr::LOCALHOST.into(), port).await {
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                connect(Ipv6Addr::LOCALHOST.into(), port).await
            }
            other => other,
        }
    };
    match tokio::time::timeout(DIAL_TIMEOUT, dial_both).await {
        Ok(Ok(target)) => Ok(target),
        // The IPv6 attempt fails with "refused" too, or with "unavailable" on hosts without
        // IPv6: either way nothing listens.
        Ok(Err(e))
            if matches!(
                e.kind(),
                io::ErrorKind::ConnectionRefused | io::ErrorKind::AddrNotAvailable
            ) =>
        {
            Err(format!(
                "nothing is listening on port {port} in the workspace"
            ))
        }
        Ok(Err(e)) => Err(format!(
            "cannot connect to port {port} in the workspace: {e}"
        )),
        Err(_) => Err(format!(
            "connecting to port {port} in the workspace timed out after {}s",
            DIAL_TIMEOUT.as_secs()
        )),
    }
}

async fn connect(ip: IpAddr, port: u16) -> io::Result<TcpStream> {
    let stream = TcpStream::connect(SocketAddr::new(ip, port)).await?;
    // Interactive traffic (terminals, editors' protocols) goes in small writes.
    stream.set_nodelay(true)?;
    Ok(stream)
}
