//! Streams coderd opens into the workspace, each answered before any payload: TCP and UDP
//! forwarding (counted in stats), ping, listening ports, and refusals that say why.

use std::time::Duration;

use anyhow::Context as _;
use codersdk::agentsdk::{self, ListeningPorts, StreamHeader, StreamOpen};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio_yamux::StreamHandle;

use crate::harness::{echo_server, ready_agent};

const WAIT: Duration = Duration::from_secs(10);

/// A port nothing listens on (bound, then released).
fn closed_port() -> anyhow::Result<u16> {
    let unused = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(unused.local_addr()?.port())
}

#[tokio::test]
async fn tcp_streams_reach_workspace_ports_and_are_counted() -> anyhow::Result<()> {
    let port = echo_server().await?;
    let (peer, _agent) = ready_agent().await?;

    let mut stream = peer.open_ok(StreamHeader::Tcp { port }).await?;
    stream.write_all(b"ping").await?;
    let mut reply = [0u8; 4];
    tokio::time::timeout(WAIT, stream.read_exact(&mut reply)).await??;
    assert_eq!(&reply, b"ping");
    stream.shutdown().await?;
    let mut rest = Vec::new();
    tokio::time::timeout(WAIT, stream.read_to_end(&mut rest)).await??;
    assert!(rest.is_empty(), "the half-close went through and back");

    peer.wait_for("stats with the connection", |p| {
        p.stats()
            .iter()
            .any(|s| s.connections_by_proto.get("tcp") == Some(&1))
    })
    .await?;
    let stats = peer.stats();
    let rx: i64 = stats.iter().map(|s| s.rx_bytes).sum();
    let tx: i64 = stats.iter().map(|s| s.tx_bytes).sum();
    assert_eq!((rx, tx), (4, 4), "{stats:?}");
    Ok(())
}

/// Far more in flight both ways than every window and buffer on the path, as an echo puts it:
/// the forward must keep both directions moving.
#[tokio::test]
async fn tcp_echoes_larger_than_every_window_complete() -> anyhow::Result<()> {
    const SIZE: usize = 8 << 20;
    let port = echo_server().await?;
    let (peer, _agent) = ready_agent().await?;
    let stream = peer.open_ok(StreamHeader::Tcp { port }).await?;
    let (mut reader, mut writer) = tokio::io::split(stream);
    let data: Vec<u8> = (0..SIZE).map(|i| (i % 251) as u8).collect();
    let sent = data.clone();
    let writing = tokio::spawn(async move {
        writer.write_all(&sent).await?;
        Ok::<_, std::io::Error>(writer)
    });
    let mut back = vec![0u8; SIZE];
    tokio::time::timeout(Duration::from_secs(30), reader.read_exact(&mut back))
        .await
        .context("the echo stalled")??;
    writing.await??;
    assert!(back == data, "the echo differs");
    Ok(())
}

#[tokio::test]
async fn tcp_reaches_services_listening_only_on_ipv6_loopback() -> anyhow::Result<()> {
    let Ok(service) = tokio::net::TcpListener::bind("[::1]:0").await else {
        // The host has no IPv6 loopback: nothing to fall back to.
        return Ok(());
    };
    let port = service.local_addr()?.port();
    tokio::spawn(async move {
        if let Ok((mut conn, _)) = service.accept().await {
            let _ = conn.write_all(b"v6").await;
        }
    });
    let (peer, _agent) = ready_agent().await?;
    let mut stream = peer.open_ok(StreamHeader::Tcp { port }).await?;
    let mut reply = [0u8; 2];
    tokio::time::timeout(WAIT, stream.read_exact(&mut reply)).await??;
    assert_eq!(&reply, b"v6");
    Ok(())
}

#[tokio::test]
async fn answers_larger_than_the_stream_window_get_through() -> anyhow::Result<()> {
    const ANSWER: usize = 2 << 20;
    let service = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = service.local_addr()?.port();
    tokio::spawn(async move {
        if let Ok((mut conn, _)) = service.accept().await {
            let mut request = [0u8; 14];
            let _ = conn.read_exact(&mut request).await;
            let _ = conn.write_all(&vec![b'x'; ANSWER]).await;
        }
    });
    let (peer, _agent) = ready_agent().await?;
    let mut stream = peer.open_ok(StreamHeader::Tcp { port }).await?;
    stream.write_all(b"GET everything").await?;
    let mut answer = vec![0u8; ANSWER];
    tokio::time::timeout(WAIT, stream.read_exact(&mut answer)).await??;
    assert_eq!(answer.len(), ANSWER);
    Ok(())
}

/// Reads what is left of a refused stream: it must end right after the answer.
async fn assert_closed(mut stream: StreamHandle) -> anyhow::Result<()> {
    let mut rest = Vec::new();
    tokio::time::timeout(WAIT, stream.read_to_end(&mut rest))
        .await
        .context("a refused stream was left open")??;
    assert!(rest.is_empty(), "payload after a refusal: {rest:?}");
    Ok(())
}

#[tokio::test]
async fn streams_to_closed_ports_are_refused_with_the_reason() -> anyhow::Result<()> {
    let port = closed_port()?;
    let (peer, _agent) = ready_agent().await?;
    let (answer, stream) = peer.open_answered(StreamHeader::Tcp { port }).await?;
    assert_eq!(
        answer,
        StreamOpen::Refused {
            reason: format!("nothing is listening on port {port} in the workspace")
        }
    );
    assert_closed(stream).await
}

/// Writes one framed datagram.
async fn send_datagram(stream: &mut StreamHandle, payload: &[u8]) -> anyhow::Result<()> {
    let len = u16::try_from(payload.len())?;
    stream.write_all(&len.to_be_bytes()).await?;
    stream.write_all(payload).await?;
    stream.flush().await?;
    Ok(())
}

async fn recv_datagram(stream: &mut StreamHandle) -> anyhow::Result<Vec<u8>> {
    tokio::time::timeout(WAIT, async {
        let mut len = [0u8; 2];
        stream.read_exact(&mut len).await?;
        let mut payload = vec![0u8; usize::from(u16::from_be_bytes(len))];
        stream.read_exact(&mut payload).await?;
        Ok(payload)
    })
    .await
    .context("no datagram came back")?
}

#[tokio::test]
async fn udp_streams_carry_framed_datagrams_each_with_its_own_socket() -> anyhow::Result<()> {
    // Echoes each datagram with the sender's port, so the test sees one socket per stream.
    let service = tokio::net::UdpSocket::bind("127.0.0.1:0").await?;
    let port = service.local_addr()?.port();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 65_535];
        while let Ok((n, from)) = service.recv_from(&mut buf).await {
            let mut reply = buf[..n].to_vec();
            reply.extend_from_slice(format!(" from {}", from.port()).as_bytes());
            let _ = service.send_to(&reply, from).await;
        }
    });
    let (peer, _agent) = ready_agent().await?;
    let mut first = peer.open_ok(StreamHeader::Udp { port }).await?;
    let mut second = peer.open_ok(StreamHeader::Udp { port }).await?;

    send_datagram(&mut first, b"one").await?;
    send_datagram(&mut second, b"two").await?;
    let one = String::from_utf8(recv_datagram(&mut first).await?)?;
    let two = String::from_utf8(recv_datagram(&mut second).await?)?;
    let first_port = one.strip_prefix("one from ").context(one.clone())?;
    let second_port = two.strip_prefix("two from ").context(two.clone())?;
    assert_ne!(first_port, second_port, "streams share a socket");

    // Datagram boundaries survive, up to the largest UDP payload over loopback.
    let big = vec![b'u'; 60_000];
    send_datagram(&mut first, &big).await?;
    send_datagram(&mut first, b"").await?;
    assert_eq!(
        recv_datagram(&mut first).await?.len(),
        60_000 + one.len() - 3
    );
    assert_eq!(
        recv_datagram(&mut first).await?,
        format!(" from {first_port}").into_bytes()
    );

    peer.wait_for("stats with the UDP streams", |p| {
        p.stats()
            .iter()
            .any(|s| s.connections_by_proto.get("udp") == Some(&2))
    })
    .await
}

#[tokio::test]
async fn udp_streams_survive_datagrams_nobody_receives() -> anyhow::Result<()> {
    let port = {
        let unused = std::net::UdpSocket::bind("127.0.0.1:0")?;
        unused.local_addr()?.port()
    };
    let (peer, _agent) = ready_agent().await?;
    let mut stream = peer.open_ok(StreamHeader::Udp { port }).await?;
    send_datagram(&mut stream, b"lost").await?;
    send_datagram(&mut stream, b"lost too").await?;
    // Now a service starts on that port and the same stream reaches it.
    let service = tokio::net::UdpSocket::bind(("127.0.0.1", port)).await?;
    send_datagram(&mut stream, b"found").await?;
    let mut buf = [0u8; 64];
    let (n, from) = tokio::time::timeout(WAIT, async {
        loop {
            let (n, from) = service.recv_from(&mut buf).await?;
            if &buf[..n] == b"found" {
                return Ok::<_, std::io::Error>((n, from));
            }
        }
    })
    .await??;
    service.send_to(&buf[..n], from).await?;
    assert_eq!(recv_datagram(&mut stream).await?, b"found");
    Ok(())
}

#[tokio::test]
async fn ping_streams_echo() -> anyhow::Result<()> {
    let (peer, _agent) = ready_agent().await?;
    let mut stream = peer.open_ok(StreamHeader::Ping).await?;
    for probe in [&b"1"[..], b"probe two", &[0u8; 100_000]] {
        stream.write_all(probe).await?;
        let mut echo = vec![0u8; probe.len()];
        tokio::time::timeout(WAIT, stream.read_exact(&mut echo)).await??;
        assert_eq!(echo, probe);
    }
    Ok(())
}

#[tokio::test]
async fn listening_ports_name_their_processes_and_leave_out_the_agents() -> anyhow::Result<()> {
    // A listener of another process (perl is part of every Debian system), and one of the
    // agent's own process (the test runs the agent in-process).
    let mut child = tokio::process::Command::new("perl")
        .args([
            "-MIO::Socket::INET",
            "-e",
            "$| = 1; my $s = IO::Socket::INET->new(Listen => 5, LocalAddr => '127.0.0.1:0') \
             or die $!; print $s->sockport, \"\\n\"; sleep 60",
        ])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("perl must be installed")?;
    let mut line = String::new();
    let stdout = child.stdout.take().context("piped")?;
    tokio::time::timeout(WAIT, tokio::io::BufReader::new(stdout).read_line(&mut line)).await??;
    let theirs: u16 = line.trim().parse().context(line.clone())?;
    let own = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let own = own.local_addr()?.port();

    let (peer, _agent) = ready_agent().await?;
    let mut stream = peer.open_ok(StreamHeader::ListeningPorts).await?;
    let ports: ListeningPorts = agentsdk::read_frame(&mut stream)
        .await?
        .context("no ports frame")?;
    let found = ports
        .ports
        .iter()
        .find(|p| p.port == theirs)
        .with_context(|| format!("{theirs} not listed: {ports:?}"))?;
    assert_eq!(
        (found.process_name.as_str(), found.network.as_str()),
        ("perl", "tcp")
    );
    assert!(ports.ports.iter().all(|p| p.port != own), "{ports:?}");
    assert!(ports.ports.iter().all(|p| p.port >= 9), "{ports:?}");
    assert_closed(stream).await
}

#[tokio::test]
async fn streams_the_agent_cannot_serve_are_refused() -> anyhow::Result<()> {
    let (peer, _agent) = ready_agent().await?;
    let (answer, stream) = peer
        .open_answered(StreamHeader::Rpc(agentsdk::Request::GetManifest))
        .await?;
    assert!(matches!(answer, StreamOpen::Refused { .. }), "{answer:?}");
    assert_closed(stream).await
}
