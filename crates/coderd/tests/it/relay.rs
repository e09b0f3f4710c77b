//! The relay through the real HTTP API: streams into a workspace opened by the SDK's client,
//! authorised per workspace, spliced onto the agent's yamux connection. The agent's end is the
//! protocol's own client (`AgentConnection`) answering streams as the agent does: real TCP and
//! UDP sockets behind it. The real agent binary is exercised end to end in the CLI's tests.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use codersdk::agentsdk::{
    AgentConnection, ListeningPort, ListeningPorts, PtyInput, StreamHeader, StreamOpen, read_frame,
    write_frame,
};
use codersdk::relay::Target;
use testutil::{TestApp, eventually};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use uuid::Uuid;

use crate::agents::{agent_id, workspace_for};

/// An agent on the protocol's client: serves TCP, ping, listening ports and PTY streams the
/// way the agent does (answer first, then payload); refuses SSH.
pub(crate) struct TestAgent {
    connection: Option<AgentConnection>,
    /// Streams coderd opened to it.
    opened: Arc<AtomicUsize>,
}

impl TestAgent {
    pub(crate) async fn connect(app: &TestApp, token: &str) -> anyhow::Result<Self> {
        let mut connection = AgentConnection::connect(&app.url, token).await?;
        let mut inbound = std::mem::replace(&mut connection.inbound, mpsc::channel(1).1);
        let opened = Arc::new(AtomicUsize::new(0));
        let count = opened.clone();
        tokio::spawn(async move {
            while let Some((header, stream)) = inbound.recv().await {
                count.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(serve_stream(header, stream));
            }
        });
        Ok(Self {
            connection: Some(connection),
            opened,
        })
    }

    /// Drops the connection as a killed agent would.
    fn kill(&mut self) {
        self.connection = None;
    }
}

async fn serve_stream(header: StreamHeader, mut stream: tokio_yamux::StreamHandle) {
    let refuse = |reason: &str| StreamOpen::Refused {
        reason: reason.into(),
    };
    match header {
        StreamHeader::Tcp { port } => match TcpStream::connect(("127.0.0.1", port)).await {
            Ok(target) => {
                if write_frame(&mut stream, &StreamOpen::Ok).await.is_ok() {
                    let _ = codersdk::agentsdk::pipe(stream, target).await;
                }
            }
            Err(_) => {
                let reason = format!("nothing is listening on port {port} in the workspace");
                let _ = write_frame(&mut stream, &refuse(&reason)).await;
            }
        },
        StreamHeader::Ping => {
            if write_frame(&mut stream, &StreamOpen::Ok).await.is_ok() {
                let (mut r, mut w) = tokio::io::split(stream);
                let _ = tokio::io::copy(&mut r, &mut w).await;
                let _ = w.shutdown().await;
            }
        }
        StreamHeader::ListeningPorts => {
            let _ = write_frame(&mut stream, &StreamOpen::Ok).await;
            let ports = ListeningPorts {
                ports: vec![ListeningPort {
                    process_name: "python3".into(),
                    network: "tcp".into(),
                    port: 8000,
                }],
            };
            let _ = write_frame(&mut stream, &ports).await;
            let _ = stream.shutdown().await;
        }
        StreamHeader::Pty {
            width,
            height,
            command,
            ..
        } => {
            let _ = write_frame(&mut stream, &StreamOpen::Ok).await;
            let (mut r, mut w) = tokio::io::split(stream);
            let hello = format!("pty {width}x{height} running {command:?}\r\n");
            if w.write_all(hello.as_bytes()).await.is_err() {
                return;
            }
            // Echo input, and say when the size changes.
            while let Ok(Some(input)) = read_frame::<_, PtyInput>(&mut r).await {
                let mut out = input.data.clone();
                if input.width > 0 {
                    out.push_str(&format!("[resized {}x{}]", input.width, input.height));
                }
                if w.write_all(out.as_bytes()).await.is_err() {
                    return;
                }
            }
        }
        StreamHeader::Ssh | StreamHeader::Udp { .. } | StreamHeader::Rpc(_) => {
            let _ = write_frame(&mut stream, &refuse("not served by this test agent")).await;
        }
    }
}

/// A TCP server that echoes each connection until its client half-closes.
pub(crate) async fn echo_server() -> anyhow::Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut r, mut w) = socket.into_split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
                let _ = w.shutdown().await;
            });
        }
    });
    Ok(port)
}

/// Writes `data` while reading it back, then half-closes and expects the end. (What follows a
/// half-close is capped at one yamux window, so the echo comes back first.)
async fn round_trip(
    stream: codersdk::relay::RelayStream,
    data: Vec<u8>,
) -> anyhow::Result<Vec<u8>> {
    let (mut r, mut w) = tokio::io::split(stream);
    let len = data.len();
    let writer = tokio::spawn(async move {
        w.write_all(&data).await?;
        anyhow::Ok(w)
    });
    let mut back = vec![0u8; len];
    r.read_exact(&mut back).await?;
    let mut w = writer.await??;
    w.shutdown().await?;
    let mut rest = Vec::new();
    r.read_to_end(&mut rest).await?;
    anyhow::ensure!(rest.is_empty(), "{} bytes after the echo", rest.len());
    Ok(back)
}

/// Half-closes right after writing, as `nc -N` does, and reads the answer after that.
async fn write_then_read(
    stream: codersdk::relay::RelayStream,
    data: &[u8],
) -> anyhow::Result<Vec<u8>> {
    let (mut r, mut w) = tokio::io::split(stream);
    w.write_all(data).await?;
    w.shutdown().await?;
    let mut back = Vec::new();
    r.read_to_end(&mut back).await?;
    Ok(back)
}

fn api_status<T>(result: Result<T, codersdk::ClientError>) -> (u16, String) {
    match result {
        Ok(_) => (0, "the request succeeded".into()),
        Err(e) => (e.status().unwrap_or(0), e.to_string()),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn tcp_streams_reach_workspace_ports_with_back_pressure_and_half_close() -> anyhow::Result<()>
{
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let token = Uuid::new_v4().to_string();
    let ws = workspace_for(&app, &owner, "me", "dev", &token).await?;
    let agent = agent_id(&ws);

    // Not connected yet: says so, with the agent's status.
    let (status, message) = api_status(owner.connect_agent(agent, Target::Tcp(1)).await);
    assert_eq!(status, 502, "{message}");
    assert!(message.contains("not connected"), "{message}");
    assert!(message.contains("connecting"), "{message}");
    // Listing its ports is a question about a state the agent is not in: 400, as Coder answers.
    let (status, message) = api_status(owner.listening_ports(agent).await);
    assert_eq!(status, 400, "{message}");
    assert!(message.contains("not connected"), "{message}");

    let test_agent = TestAgent::connect(&app, &token).await?;
    eventually(Duration::from_secs(10), "the agent connected", || async {
        Ok(owner.workspace_agent(agent).await?.status == "connected")
    })
    .await?;

    // 16 MiB each way: far more than every window on the path.
    let port = echo_server().await?;
    let data: Vec<u8> = (0..16u32 << 20).map(|i| (i % 251) as u8).collect();
    let stream = owner.connect_agent(agent, Target::Tcp(port)).await?;
    let back =
        tokio::time::timeout(Duration::from_secs(60), round_trip(stream, data.clone())).await??;
    assert!(
        back == data,
        "{} bytes came back of {}",
        back.len(),
        data.len()
    );

    // A half-close passes through: the server answers after the client's end.
    let stream = owner.connect_agent(agent, Target::Tcp(port)).await?;
    assert_eq!(write_then_read(stream, b"half").await?, b"half");

    // Several at once, each its own stream.
    let mut all = Vec::new();
    for i in 0..8u8 {
        let owner = owner.clone();
        all.push(tokio::spawn(async move {
            let stream = owner.connect_agent(agent, Target::Tcp(port)).await?;
            round_trip(stream, vec![i; 100_000]).await
        }));
    }
    for (i, task) in all.into_iter().enumerate() {
        assert_eq!(task.await??, vec![i as u8; 100_000]);
    }

    // Nothing listening: the agent's reason, at once.
    let closed = TcpListener::bind("127.0.0.1:0").await?.local_addr()?.port();
    let (status, message) = api_status(owner.connect_agent(agent, Target::Tcp(closed)).await);
    assert_eq!(status, 502, "{message}");
    assert!(
        message.contains(&format!("nothing is listening on port {closed}")),
        "{message}"
    );
    // A port is required.
    let (status, message) = api_status(owner.connect_agent(agent, Target::Tcp(0)).await);
    assert_eq!(status, 400, "{message}");

    // Ping echoes.
    let stream = owner.connect_agent(agent, Target::Ping).await?;
    assert_eq!(round_trip(stream, b"ping".to_vec()).await?, b"ping");

    // The listening ports, in Coder's shape.
    let ports = owner.listening_ports(agent).await?;
    assert_eq!(ports.ports[0].port, 8000);
    let raw: serde_json::Value = owner
        .get(&format!("/api/v2/workspaceagents/{agent}/listening-ports"))
        .await?;
    assert_eq!(
        raw,
        serde_json::json!({"ports": [{"process_name": "python3", "network": "tcp", "port": 8000}]})
    );

    // /metrics counts streams and bytes per type.
    let text = reqwest::get(app.url.join("/metrics")?)
        .await?
        .text()
        .await?;
    for needle in [
        "coderd_relay_streams_total{type=\"tcp\"}",
        "coderd_relay_bytes_total{type=\"tcp\",direction=\"to_agent\"}",
        "coderd_relay_bytes_total{type=\"tcp\",direction=\"to_client\"}",
        "coderd_relay_streams_active{type=\"tcp\"}",
        "coderd_relay_open_failures_total{type=\"tcp\",reason=\"refused\"}",
    ] {
        assert!(text.contains(needle), "{needle} missing from /metrics");
    }

    // Using the workspace bumps its last_used_at.
    let before = owner.workspace(ws.id).await?.last_used_at;
    let _open = owner.connect_agent(agent, Target::Tcp(port)).await?;
    eventually(Duration::from_secs(25), "last_used_at bumped", || async {
        Ok(owner.workspace(ws.id).await?.last_used_at > before)
    })
    .await?;
    drop(test_agent);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn only_those_who_may_connect_to_the_workspace_open_streams() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let (alice, _) = app.user(&owner, "alice", &[]).await?;
    let (bob, _) = app.user(&owner, "bob", &[]).await?;
    let (auditor, _) = app.user(&owner, "tadmin", &["template-admin"]).await?;
    let token = Uuid::new_v4().to_string();
    let ws = workspace_for(&app, &owner, "alice", "alices", &token).await?;
    let agent = agent_id(&ws);
    let test_agent = TestAgent::connect(&app, &token).await?;
    let port = echo_server().await?;
    eventually(Duration::from_secs(10), "the agent connected", || async {
        Ok(owner.workspace_agent(agent).await?.status == "connected")
    })
    .await?;

    // Another member: 404 on every kind of stream, and nothing reaches the agent.
    for target in [
        Target::Tcp(port),
        Target::Ssh,
        Target::Ping,
        Target::Udp(53),
    ] {
        let (status, message) = api_status(bob.connect_agent(agent, target).await);
        assert_eq!(status, 404, "{target:?}: {message}");
    }
    let pty = bob.agent_pty(agent, Uuid::new_v4(), 80, 24, "").await;
    assert_eq!(pty.err().and_then(|e| e.status()), Some(404));
    let ports = bob.listening_ports(agent).await;
    assert_eq!(ports.err().and_then(|e| e.status()), Some(404));
    // Unknown agents look the same.
    let (status, _) = api_status(bob.connect_agent(Uuid::new_v4(), Target::Ping).await);
    assert_eq!(status, 404);
    // Who may read workspaces but not connect: 403.
    let (status, _) = api_status(auditor.connect_agent(agent, Target::Ping).await);
    assert_eq!(status, 403);
    // The agent's own token is no session token.
    let as_agent = app.client().with_token(&token);
    let (status, _) = api_status(as_agent.connect_agent(agent, Target::Tcp(port)).await);
    assert_eq!(status, 401);
    let (status, _) = api_status(app.client().connect_agent(agent, Target::Ping).await);
    assert_eq!(status, 401);
    assert_eq!(test_agent.opened.load(Ordering::SeqCst), 0);

    // The owner of the workspace, and a site owner, may.
    let stream = alice.connect_agent(agent, Target::Tcp(port)).await?;
    assert_eq!(round_trip(stream, b"alice".to_vec()).await?, b"alice");
    let stream = owner.connect_agent(agent, Target::Ping).await?;
    assert_eq!(round_trip(stream, b"owner".to_vec()).await?, b"owner");
    assert_eq!(test_agent.opened.load(Ordering::SeqCst), 2);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn site_owners_cannot_connect_to_others_workspaces_when_disabled() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| {
        o.provisioner_daemons = 1;
        o.deployment.disable_owner_workspace_access = true;
    })
    .await?;
    let (owner, _) = app.owner().await?;
    let (alice, _) = app.user(&owner, "alice", &[]).await?;
    let token = Uuid::new_v4().to_string();
    let ws = workspace_for(&app, &owner, "alice", "alices", &token).await?;
    let agent = agent_id(&ws);
    let _test_agent = TestAgent::connect(&app, &token).await?;
    eventually(Duration::from_secs(10), "the agent connected", || async {
        Ok(owner.workspace_agent(agent).await?.status == "connected")
    })
    .await?;
    let (status, message) = api_status(owner.connect_agent(agent, Target::Ping).await);
    assert_eq!(status, 403, "{message}");
    assert!(
        message.contains("disable-owner-workspace-access"),
        "{message}"
    );
    let stream = alice.connect_agent(agent, Target::Ping).await?;
    assert_eq!(round_trip(stream, b"mine".to_vec()).await?, b"mine");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stream_whose_agent_dies_ends_with_the_reason() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let token = Uuid::new_v4().to_string();
    let ws = workspace_for(&app, &owner, "me", "dev", &token).await?;
    let agent = agent_id(&ws);
    let mut test_agent = TestAgent::connect(&app, &token).await?;
    eventually(Duration::from_secs(10), "the agent connected", || async {
        Ok(owner.workspace_agent(agent).await?.status == "connected")
    })
    .await?;
    let stream = owner.connect_agent(agent, Target::Ping).await?;
    let (mut r, mut w) = tokio::io::split(stream);
    w.write_all(b"x").await?;
    let mut one = [0u8; 1];
    r.read_exact(&mut one).await?;
    test_agent.kill();
    let mut rest = Vec::new();
    let err = tokio::time::timeout(Duration::from_secs(5), r.read_to_end(&mut rest))
        .await?
        .expect_err("the stream fails");
    assert!(
        err.to_string().contains("the workspace agent disconnected"),
        "{err}"
    );
    // And new streams say it is not connected.
    let (status, message) = api_status(owner.connect_agent(agent, Target::Ping).await);
    assert_eq!(status, 502, "{message}");
    // A reconnected agent serves again.
    let _again = TestAgent::connect(&app, &token).await?;
    let stream = owner.connect_agent(agent, Target::Ping).await?;
    assert_eq!(round_trip(stream, b"back".to_vec()).await?, b"back");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn the_pty_endpoint_speaks_coders_framing() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let token = Uuid::new_v4().to_string();
    let ws = workspace_for(&app, &owner, "me", "dev", &token).await?;
    let agent = agent_id(&ws);
    let _test_agent = TestAgent::connect(&app, &token).await?;
    eventually(Duration::from_secs(10), "the agent connected", || async {
        Ok(owner.workspace_agent(agent).await?.status == "connected")
    })
    .await?;
    let mut pty = owner
        .agent_pty(agent, Uuid::new_v4(), 100, 30, "htop")
        .await?;
    let mut seen = String::new();
    let mut expect = async |pty: &mut codersdk::relay::PtyConnection, what: &str| {
        while !seen.contains(what) {
            let chunk = tokio::time::timeout(Duration::from_secs(5), pty.recv())
                .await?
                .ok_or_else(|| anyhow::anyhow!("the terminal ended; saw {seen:?}"))??;
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
        anyhow::Ok(())
    };
    expect(&mut pty, "pty 100x30 running \"htop\"").await?;
    pty.send(&PtyInput {
        data: "echo hi\r".into(),
        ..Default::default()
    })
    .await?;
    expect(&mut pty, "echo hi\r").await?;
    pty.send(&PtyInput {
        height: 40,
        width: 120,
        ..Default::default()
    })
    .await?;
    expect(&mut pty, "[resized 120x40]").await?;
    // The reconnect id is required.
    let err = owner
        .get::<serde_json::Value>(&format!("/api/v2/workspaceagents/{agent}/pty"))
        .await
        .expect_err("no reconnect id");
    assert_eq!(err.status(), Some(400));
    Ok(())
}
