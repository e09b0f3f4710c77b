//! Streams coderd opens into the workspace: TCP forwarding (counted in stats) and SSH (closed
//! until the agent serves it).

use std::time::Duration;

use codersdk::agentsdk::StreamHeader;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::harness::{TOKEN, TestAgent, manifest};
use crate::peer::Peer;

async fn ready_agent() -> anyhow::Result<(Peer, TestAgent)> {
    let peer = Peer::start(TOKEN, manifest(vec![])).await?;
    let agent = TestAgent::connect(&peer.url)?;
    peer.wait_for("a connected agent", |p| !p.lifecycle().is_empty())
        .await?;
    Ok((peer, agent))
}

#[tokio::test]
async fn tcp_streams_reach_workspace_ports_and_are_counted() -> anyhow::Result<()> {
    let service = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = service.local_addr()?.port();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = service.accept().await {
            tokio::spawn(async move {
                let (mut r, mut w) = conn.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    let (peer, _agent) = ready_agent().await?;

    let mut stream = peer.open(StreamHeader::Tcp { port }).await?;
    stream.write_all(b"ping").await?;
    let mut reply = [0u8; 4];
    tokio::time::timeout(Duration::from_secs(5), stream.read_exact(&mut reply)).await??;
    assert_eq!(&reply, b"ping");
    stream.shutdown().await?;
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut rest)).await??;
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
    let mut stream = peer.open(StreamHeader::Tcp { port }).await?;
    stream.write_all(b"GET everything").await?;
    let mut answer = vec![0u8; ANSWER];
    tokio::time::timeout(Duration::from_secs(10), stream.read_exact(&mut answer)).await??;
    assert_eq!(answer.len(), ANSWER);
    Ok(())
}

#[tokio::test]
async fn streams_to_closed_ports_and_ssh_streams_are_closed() -> anyhow::Result<()> {
    let unused = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = unused.local_addr()?.port();
    drop(unused);
    let (peer, _agent) = ready_agent().await?;
    for header in [StreamHeader::Tcp { port }, StreamHeader::Ssh] {
        let mut stream = peer.open(header.clone()).await?;
        let mut rest = Vec::new();
        tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut rest))
            .await
            .map_err(|_| anyhow::anyhow!("{header:?} stream left open"))??;
        assert!(rest.is_empty());
    }
    Ok(())
}
