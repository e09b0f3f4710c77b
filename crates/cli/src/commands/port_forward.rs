//! `coder port-forward <workspace> --tcp [bind:]local[:remote] --udp …`: local listeners whose
//! every TCP connection (and every UDP peer) gets its own relay stream to the workspace's
//! port. Streams are opened per connection, so forwarding outlives coderd restarts and sleep.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use codersdk::Client;
use codersdk::relay::Target;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, UdpSocket};
use tokio::sync::{Mutex, mpsc};
use uuid::Uuid;

use crate::GlobalArgs;
use crate::reach::{self, Wait};

/// How much one read moves between a local connection and its relay stream.
const COPY_CHUNK: usize = 256 << 10;

/// A UDP peer's stream closes after this long without a datagram either way.
const UDP_IDLE: Duration = Duration::from_secs(120);

#[derive(Debug, clap::Args)]
pub struct PortForwardArgs {
    /// The workspace: `[owner/]workspace[.agent]`.
    pub workspace: String,
    /// TCP ports to forward: `[bind:]local[:remote]`, ranges (`9000-9005`) and comma lists.
    #[arg(short = 'p', long = "tcp", env = "CODER_PORT_FORWARD_TCP")]
    pub tcp: Vec<String>,
    /// UDP ports to forward, in the same forms.
    #[arg(long = "udp", env = "CODER_PORT_FORWARD_UDP")]
    pub udp: Vec<String>,
    /// Do not start the workspace when it is stopped.
    #[arg(long, env = "CODER_SSH_DISABLE_AUTOSTART")]
    pub disable_autostart: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Forward {
    /// `None`: both 127.0.0.1 and ::1.
    pub bind: Option<IpAddr>,
    pub local: u16,
    pub remote: u16,
}

fn ports(s: &str) -> anyhow::Result<Vec<u16>> {
    let parse = |p: &str| -> anyhow::Result<u16> {
        let port: u16 = p.parse().with_context(|| format!("{p:?} is not a port"))?;
        if port == 0 {
            bail!("port 0 cannot be forwarded");
        }
        Ok(port)
    };
    match s.split_once('-') {
        Some((a, b)) => {
            let (a, b) = (parse(a)?, parse(b)?);
            if a > b {
                bail!("{s:?}: a range goes from low to high");
            }
            Ok((a..=b).collect())
        }
        None => Ok(vec![parse(s)?]),
    }
}

/// Parses one `--tcp`/`--udp` value: comma-separated `[bind:]local[:remote]` items.
pub fn parse_specs(value: &str) -> anyhow::Result<Vec<Forward>> {
    let mut out = Vec::new();
    for item in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (bind, rest) = if let Some(v6) = item.strip_prefix('[') {
            let (addr, rest) = v6
                .split_once("]:")
                .with_context(|| format!("{item:?}: use [address]:local[:remote]"))?;
            (Some(addr.parse::<IpAddr>()?), rest)
        } else {
            let parts: Vec<&str> = item.split(':').collect();
            match parts.as_slice() {
                [_] | [_, _] => (None, item),
                [addr, ..] => (
                    Some(
                        addr.parse::<IpAddr>()
                            .with_context(|| format!("{item:?}: {addr:?} is not an IP address"))?,
                    ),
                    &item[addr.len() + 1..],
                ),
                [] => bail!("empty port specification"),
            }
        };
        let (local, remote) = match rest.split_once(':') {
            Some((l, r)) => (ports(l)?, ports(r)?),
            None => (ports(rest)?, ports(rest)?),
        };
        if local.len() != remote.len() {
            bail!("{item:?}: the local and remote ranges differ in length");
        }
        out.extend(
            local
                .into_iter()
                .zip(remote)
                .map(|(local, remote)| Forward {
                    bind,
                    local,
                    remote,
                }),
        );
    }
    Ok(out)
}

fn addresses(forward: &Forward) -> Vec<SocketAddr> {
    match forward.bind {
        Some(ip) => vec![SocketAddr::new(ip, forward.local)],
        None => vec![
            SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), forward.local),
            SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), forward.local),
        ],
    }
}

pub async fn run(global: &GlobalArgs, args: PortForwardArgs) -> anyhow::Result<()> {
    let mut tcp = Vec::new();
    for spec in &args.tcp {
        tcp.extend(parse_specs(spec).with_context(|| format!("--tcp {spec:?}"))?);
    }
    let mut udp = Vec::new();
    for spec in &args.udp {
        udp.extend(parse_specs(spec).with_context(|| format!("--udp {spec:?}"))?);
    }
    if tcp.is_empty() && udp.is_empty() {
        bail!("nothing to forward: pass --tcp and/or --udp");
    }
    let client = global.client()?;
    let reached = reach::reach(&client, &args.workspace, !args.disable_autostart, Wait::No).await?;
    let agent = reached.agent.id;
    let mut tasks = tokio::task::JoinSet::new();
    for forward in &tcp {
        let mut bound = 0;
        for addr in addresses(forward) {
            match TcpListener::bind(addr).await {
                Ok(listener) => {
                    bound += 1;
                    eprintln!(
                        "Forwarding {addr} (tcp) to port {} in the workspace",
                        forward.remote
                    );
                    tasks.spawn(serve_tcp(client.clone(), agent, listener, forward.remote));
                }
                Err(e) if forward.bind.is_none() && addr.is_ipv6() => {
                    eprintln!("warning: not listening on {addr}: {e}");
                }
                Err(e) => return Err(e).with_context(|| format!("listening on {addr}")),
            }
        }
        if bound == 0 {
            bail!("could not listen on local port {}", forward.local);
        }
    }
    for forward in &udp {
        for addr in addresses(forward) {
            match UdpSocket::bind(addr).await {
                Ok(socket) => {
                    eprintln!(
                        "Forwarding {addr} (udp) to port {} in the workspace",
                        forward.remote
                    );
                    tasks.spawn(serve_udp(client.clone(), agent, socket, forward.remote));
                }
                Err(e) if forward.bind.is_none() && addr.is_ipv6() => {
                    eprintln!("warning: not listening on {addr}: {e}");
                }
                Err(e) => return Err(e).with_context(|| format!("listening on {addr}")),
            }
        }
    }
    eprintln!("Ready; press Ctrl+C to stop.");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => Ok(()),
        Some(ended) = tasks.join_next() => {
            ended?.context("a listener failed")
        }
    }
}

async fn serve_tcp(
    client: Client,
    agent: Uuid,
    listener: TcpListener,
    remote: u16,
) -> anyhow::Result<()> {
    loop {
        let (mut socket, peer) = listener.accept().await?;
        let _ = socket.set_nodelay(true);
        let client = client.clone();
        tokio::spawn(async move {
            match client.connect_agent(agent, Target::Tcp(remote)).await {
                Ok(mut stream) => {
                    // Every write to the relay is a WebSocket message: 8 KiB ones (the
                    // default) cost a third of the throughput.
                    let _ = tokio::io::copy_bidirectional_with_sizes(
                        &mut socket,
                        &mut stream,
                        COPY_CHUNK,
                        COPY_CHUNK,
                    )
                    .await;
                }
                Err(e) => eprintln!("{peer} → workspace port {remote}: {e}"),
            }
        });
    }
}

type Peers = Arc<Mutex<HashMap<SocketAddr, mpsc::Sender<Vec<u8>>>>>;

async fn serve_udp(
    client: Client,
    agent: Uuid,
    socket: UdpSocket,
    remote: u16,
) -> anyhow::Result<()> {
    let socket = Arc::new(socket);
    let peers: Peers = Arc::default();
    let mut buf = vec![0u8; 65536];
    loop {
        let (n, peer) = socket.recv_from(&mut buf).await?;
        let datagram = buf[..n].to_vec();
        let mut map = peers.lock().await;
        if let Some(tx) = map.get(&peer)
            && tx.try_send(datagram.clone()).is_ok()
        {
            continue;
        }
        // A new peer (or one whose stream ended): a stream of its own.
        let (tx, rx) = mpsc::channel(64);
        let _ = tx.try_send(datagram);
        map.insert(peer, tx);
        tokio::spawn(udp_peer(
            client.clone(),
            agent,
            remote,
            socket.clone(),
            peer,
            rx,
            peers.clone(),
        ));
    }
}

/// One UDP peer's datagrams, each framed as a 2-byte big-endian length and the payload.
async fn udp_peer(
    client: Client,
    agent: Uuid,
    remote: u16,
    socket: Arc<UdpSocket>,
    peer: SocketAddr,
    mut outgoing: mpsc::Receiver<Vec<u8>>,
    peers: Peers,
) {
    let stream = match client.connect_agent(agent, Target::Udp(remote)).await {
        Ok(stream) => stream,
        Err(e) => {
            eprintln!("{peer} → workspace udp port {remote}: {e}");
            peers.lock().await.remove(&peer);
            return;
        }
    };
    let (mut r, mut w) = tokio::io::split(stream);
    let upload = async {
        loop {
            let datagram = match tokio::time::timeout(UDP_IDLE, outgoing.recv()).await {
                Ok(Some(d)) => d,
                _ => return,
            };
            let Ok(len) = u16::try_from(datagram.len()) else {
                continue;
            };
            let mut frame = Vec::with_capacity(2 + datagram.len());
            frame.extend_from_slice(&len.to_be_bytes());
            frame.extend_from_slice(&datagram);
            if w.write_all(&frame).await.is_err() {
                return;
            }
        }
    };
    let download = async {
        let mut len = [0u8; 2];
        let mut payload = vec![0u8; 65536];
        loop {
            if r.read_exact(&mut len).await.is_err() {
                return;
            }
            let n = usize::from(u16::from_be_bytes(len));
            if r.read_exact(&mut payload[..n]).await.is_err() {
                return;
            }
            let _ = socket.send_to(&payload[..n], peer).await;
        }
    };
    tokio::select! {
        () = upload => {}
        () = download => {}
    }
    peers.lock().await.remove(&peer);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(bind: Option<&str>, local: u16, remote: u16) -> Forward {
        Forward {
            bind: bind.map(|b| b.parse().expect("ip")),
            local,
            remote,
        }
    }

    #[test]
    fn port_specifications() {
        assert_eq!(parse_specs("8080").expect("one"), [f(None, 8080, 8080)]);
        assert_eq!(parse_specs("8080:80").expect("pair"), [f(None, 8080, 80)]);
        assert_eq!(
            parse_specs("127.0.0.1:8080:80").expect("bound"),
            [f(Some("127.0.0.1"), 8080, 80)]
        );
        assert_eq!(
            parse_specs("[::1]:8080:80").expect("v6"),
            [f(Some("::1"), 8080, 80)]
        );
        assert_eq!(
            parse_specs("9000-9002:8000-8002,7000").expect("range and list"),
            [
                f(None, 9000, 8000),
                f(None, 9001, 8001),
                f(None, 9002, 8002),
                f(None, 7000, 7000)
            ]
        );
        assert!(parse_specs("9000-9002:8000").is_err());
        assert!(parse_specs("0").is_err());
        assert!(parse_specs("80-70").is_err());
        assert!(parse_specs("nope").is_err());
    }
}
