//! The WebSocket transport against a tiny coderd-side server on loopback.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use codersdk::provisionerd::{
    DaemonMessage, KEY_HEADER, PROTOCOL_VERSION, PSK_HEADER, ServeParams, ServerMessage, Transition,
};
use futures::{SinkExt, StreamExt};
use provisionerd::engines::echo::EchoTemplate;
use provisionerd::{DaemonAuth, DaemonError, WebSocketConnector};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::StatusCode;
use tokio_util::sync::CancellationToken;
use url::Url;
use uuid::Uuid;

use crate::harness::{WAIT, build_job, config};

/// What the server saw of an upgrade request.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    params: ServeParams,
    headers: Vec<(String, String)>,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Refuses an upgrade with this status and body.
type Refusal = Option<(StatusCode, String)>;

struct Server {
    url: Url,
    accepted: mpsc::UnboundedReceiver<(Seen, WebSocketStream<TcpStream>)>,
    refused: mpsc::UnboundedReceiver<Seen>,
}

impl Server {
    async fn start(refusal: Refusal) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let url = Url::parse(&format!("http://{}", listener.local_addr()?))?;
        let (accepted_tx, accepted) = mpsc::unbounded_channel();
        let (refused_tx, refused) = mpsc::unbounded_channel();
        let refusal = Arc::new(refusal);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let refusal = refusal.clone();
                let accepted_tx = accepted_tx.clone();
                let refused_tx = refused_tx.clone();
                tokio::spawn(async move {
                    let mut seen = None;
                    #[expect(
                        clippy::result_large_err,
                        reason = "tungstenite dictates the callback's type"
                    )]
                    let callback = |request: &Request, response: Response| {
                        let observed = observe(request);
                        seen = Some(observed.clone());
                        match refusal.as_ref() {
                            None => Ok(response),
                            Some((status, body)) => {
                                let _ = refused_tx.send(observed);
                                let mut refuse = ErrorResponse::new(Some(body.clone()));
                                *refuse.status_mut() = *status;
                                Err(refuse)
                            }
                        }
                    };
                    if let Ok(socket) = tokio_tungstenite::accept_hdr_async(stream, callback).await
                        && let Some(seen) = seen
                    {
                        let _ = accepted_tx.send((seen, socket));
                    }
                });
            }
        });
        Ok(Self {
            url,
            accepted,
            refused,
        })
    }

    /// A connector to this server authenticating with a PSK.
    fn psk_connector(&self) -> anyhow::Result<WebSocketConnector> {
        Ok(WebSocketConnector::new(
            self.url.clone(),
            "default",
            DaemonAuth::Psk("psk".into()),
        )?)
    }

    /// Accepts a connection, welcomes the daemon and takes its `Ready`.
    async fn ready_peer(&mut self) -> anyhow::Result<WsPeer> {
        let mut peer = self.accept().await?;
        peer.welcome().await?;
        match peer.recv().await? {
            DaemonMessage::Ready => Ok(peer),
            other => bail!("expected Ready, got {other:?}"),
        }
    }

    async fn accept(&mut self) -> anyhow::Result<WsPeer> {
        let (seen, socket) = tokio::time::timeout(WAIT, self.accepted.recv())
            .await
            .context("the daemon did not connect")?
            .context("server gone")?;
        Ok(WsPeer { seen, socket })
    }
}

fn observe(request: &Request) -> Seen {
    let query = request.uri().query().unwrap_or_default();
    Seen {
        path: request.uri().path().to_string(),
        params: serde_urlencoded::from_str(query).unwrap_or_default(),
        headers: request
            .headers()
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or_default().to_string()))
            .collect(),
    }
}

struct WsPeer {
    seen: Seen,
    socket: WebSocketStream<TcpStream>,
}

impl WsPeer {
    async fn send(&mut self, message: &ServerMessage) -> anyhow::Result<()> {
        self.socket
            .send(Message::text(serde_json::to_string(message)?))
            .await?;
        Ok(())
    }

    async fn welcome(&mut self) -> anyhow::Result<()> {
        self.send(&ServerMessage::Welcome {
            daemon_id: Uuid::new_v4(),
            daemon_name: self.seen.params.name.clone(),
            protocol_version: PROTOCOL_VERSION.into(),
        })
        .await
    }

    /// The next protocol message, skipping keepalive frames.
    async fn recv(&mut self) -> anyhow::Result<DaemonMessage> {
        loop {
            let frame = tokio::time::timeout(WAIT, self.socket.next())
                .await
                .context("the daemon said nothing")?
                .context("the daemon hung up")??;
            match frame {
                Message::Text(text) => return Ok(serde_json::from_str(text.as_str())?),
                Message::Ping(_) | Message::Pong(_) => {}
                other => bail!("unexpected frame {other:?}"),
            }
        }
    }

    async fn result(&mut self, job_id: Uuid) -> anyhow::Result<DaemonMessage> {
        loop {
            match self.recv().await? {
                DaemonMessage::Update { .. } => {}
                message @ (DaemonMessage::Complete { .. } | DaemonMessage::Fail { .. }) => {
                    return Ok(message);
                }
                other => bail!("unexpected message while job {job_id} runs: {other:?}"),
            }
        }
    }
}

struct Daemon {
    _work_root: tempfile::TempDir,
    shutdown: CancellationToken,
    task: JoinHandle<Result<(), DaemonError>>,
}

impl Daemon {
    fn start(connector: WebSocketConnector) -> anyhow::Result<Self> {
        let work_root = tempfile::tempdir()?;
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(provisionerd::run(
            connector,
            config(work_root.path()),
            shutdown.clone(),
        ));
        Ok(Self {
            _work_root: work_root,
            shutdown,
            task,
        })
    }

    async fn stopped(&mut self) -> anyhow::Result<Result<(), DaemonError>> {
        Ok(tokio::time::timeout(WAIT, &mut self.task)
            .await
            .context("the daemon did not stop")??)
    }

    async fn shut_down(mut self) -> anyhow::Result<()> {
        self.shutdown.cancel();
        self.stopped().await?.context("the daemon failed")
    }
}

#[tokio::test]
async fn runs_a_job_over_a_websocket() -> anyhow::Result<()> {
    let mut server = Server::start(None).await?;
    let connector = WebSocketConnector::new(
        server.url.clone(),
        "default",
        DaemonAuth::SessionToken("session-token".into()),
    )?;
    let daemon = Daemon::start(connector)?;

    let mut peer = server.accept().await?;
    assert_eq!(
        peer.seen.path,
        "/api/v2/organizations/default/provisionerdaemons/serve"
    );
    assert_eq!(peer.seen.params.name, "test-daemon");
    assert_eq!(peer.seen.params.provisioners, "echo");
    assert_eq!(peer.seen.params.protocol_version, PROTOCOL_VERSION);
    assert_eq!(
        peer.seen.header("Coder-Session-Token"),
        Some("session-token")
    );
    assert_eq!(peer.seen.header(PSK_HEADER), None);
    assert_eq!(peer.seen.header(KEY_HEADER), None);

    peer.welcome().await?;
    assert_eq!(peer.recv().await?, DaemonMessage::Ready);
    let job = build_job(&EchoTemplate::default(), Transition::Start, b"");
    peer.send(&ServerMessage::Job(Box::new(job.clone())))
        .await?;
    let result = peer.result(job.job_id).await?;
    assert!(
        matches!(result, DaemonMessage::Complete { job_id, .. } if job_id == job.job_id),
        "{result:?}"
    );
    assert!(
        matches!(result, DaemonMessage::Complete { ready: true, .. }),
        "the result doubles as Ready: {result:?}"
    );
    peer.send(&ServerMessage::Finished { job_id: job.job_id })
        .await?;
    // No Ready: the next job goes straight in.
    let next = build_job(&EchoTemplate::default(), Transition::Stop, b"");
    peer.send(&ServerMessage::Job(Box::new(next.clone())))
        .await?;
    let result = peer.result(next.job_id).await?;
    assert!(
        matches!(result, DaemonMessage::Complete { job_id, .. } if job_id == next.job_id),
        "{result:?}"
    );

    daemon.shut_down().await
}

#[tokio::test]
async fn sends_exactly_one_credential() -> anyhow::Result<()> {
    for (auth, header) in [
        (DaemonAuth::Psk("the-psk".into()), PSK_HEADER),
        (DaemonAuth::Key("the-key".into()), KEY_HEADER),
    ] {
        let mut server = Server::start(None).await?;
        let connector = WebSocketConnector::new(server.url.clone(), "my-org", auth.clone())?;
        let daemon = Daemon::start(connector)?;
        let peer = server.accept().await?;
        assert_eq!(
            peer.seen.path,
            "/api/v2/organizations/my-org/provisionerdaemons/serve"
        );
        let secret = match &auth {
            DaemonAuth::Psk(s) | DaemonAuth::Key(s) | DaemonAuth::SessionToken(s) => s.as_str(),
        };
        assert_eq!(peer.seen.header(header), Some(secret));
        let credentials = [PSK_HEADER, KEY_HEADER, "Coder-Session-Token"]
            .iter()
            .filter(|h| peer.seen.header(h).is_some())
            .count();
        assert_eq!(credentials, 1);
        daemon.shut_down().await?;
    }
    Ok(())
}

#[tokio::test]
async fn refused_credentials_stop_the_daemon_with_coderds_message() -> anyhow::Result<()> {
    let body = r#"{"message":"Invalid provisioner daemon PSK.","detail":"Check CODER_PROVISIONER_DAEMON_PSK."}"#;
    for (status, expected) in [
        (
            StatusCode::UNAUTHORIZED,
            "coderd rejected the daemon's credentials: 401 Unauthorized: Invalid provisioner daemon PSK.: Check CODER_PROVISIONER_DAEMON_PSK.",
        ),
        (
            StatusCode::FORBIDDEN,
            "the daemon is not allowed to serve this organization: 403 Forbidden: Invalid provisioner daemon PSK.: Check CODER_PROVISIONER_DAEMON_PSK.",
        ),
    ] {
        let mut server = Server::start(Some((status, body.into()))).await?;
        let connector = WebSocketConnector::new(
            server.url.clone(),
            "default",
            DaemonAuth::Psk("wrong".into()),
        )?;
        let mut daemon = Daemon::start(connector)?;
        let error = daemon.stopped().await?.expect_err("the daemon stops");
        assert_eq!(error.to_string(), expected);
        let attempts = std::iter::from_fn(|| server.refused.try_recv().ok()).count();
        assert_eq!(attempts, 1, "no retry after a {status}");
    }
    Ok(())
}

#[tokio::test]
async fn server_errors_are_retried() -> anyhow::Result<()> {
    let mut server =
        Server::start(Some((StatusCode::SERVICE_UNAVAILABLE, "starting".into()))).await?;
    let daemon = Daemon::start(server.psk_connector()?)?;
    for _ in 0..3 {
        tokio::time::timeout(WAIT, server.refused.recv())
            .await
            .context("the daemon did not retry")?;
    }
    assert!(!daemon.task.is_finished());
    daemon.shut_down().await
}

#[tokio::test]
async fn a_silent_connection_is_declared_dead_and_replaced() -> anyhow::Result<()> {
    let mut server = Server::start(None).await?;
    let connector = server
        .psk_connector()?
        .with_keepalive(Duration::from_millis(100), Duration::from_millis(400));
    let daemon = Daemon::start(connector)?;
    let first = server.ready_peer().await?;
    // Stop reading: pings go unanswered, and the daemon must give up on this connection.
    server.ready_peer().await?;
    drop(first);
    daemon.shut_down().await
}

#[tokio::test]
async fn a_closed_socket_leads_to_resending_the_result() -> anyhow::Result<()> {
    let mut server = Server::start(None).await?;
    let daemon = Daemon::start(server.psk_connector()?)?;
    let mut peer = server.ready_peer().await?;
    let job = build_job(&EchoTemplate::default(), Transition::Start, b"");
    peer.send(&ServerMessage::Job(Box::new(job.clone())))
        .await?;
    let first = peer.result(job.job_id).await?;
    peer.socket.close(None).await?;

    let mut peer = server.accept().await?;
    peer.welcome().await?;
    assert_eq!(peer.recv().await?, first, "the same result again");
    peer.send(&ServerMessage::Finished { job_id: job.job_id })
        .await?;
    let next = build_job(&EchoTemplate::default(), Transition::Stop, b"");
    peer.send(&ServerMessage::Job(Box::new(next.clone())))
        .await?;
    let result = peer.result(next.job_id).await?;
    assert!(
        matches!(result, DaemonMessage::Complete { job_id, .. } if job_id == next.job_id),
        "the daemon is idle after the confirmation: {result:?}"
    );
    daemon.shut_down().await
}

#[tokio::test]
async fn large_templates_fit_in_one_message() -> anyhow::Result<()> {
    // Over tungstenite's default 16 MiB frame limit once base64-encoded.
    let mut server = Server::start(None).await?;
    let daemon = Daemon::start(server.psk_connector()?)?;
    let mut peer = server.ready_peer().await?;
    let big = vec![b'x'; 13 << 20];
    let mut job = build_job(&EchoTemplate::default(), Transition::Start, b"");
    job.template_source_archive = provisionerd::engines::echo::archive_with_files(
        &EchoTemplate::default(),
        &[("big.bin", &big)],
    )
    .into();
    peer.send(&ServerMessage::Job(Box::new(job.clone())))
        .await?;
    let result = peer.result(job.job_id).await?;
    assert!(
        matches!(result, DaemonMessage::Complete { .. }),
        "{result:?}"
    );
    daemon.shut_down().await
}
