//! The external daemon's transport: a WebSocket to
//! `/api/v2/organizations/{org}/provisionerdaemons/serve`, one JSON message per text frame.
//!
//! A pump task per connection moves frames to and from the [`Connection`] channels and keeps
//! the connection honest: it pings every 15 s and declares the connection dead when nothing at
//! all has arrived for 30 s, or a write has been stuck that long, so a half-open TCP connection
//! cannot hold a job's heartbeat hostage.

use std::time::Duration;

use codersdk::client::SESSION_TOKEN_HEADER;
use codersdk::provisionerd::{DaemonMessage, KEY_HEADER, PSK_HEADER, ServeParams, ServerMessage};
use futures::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep_until, timeout};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::{HeaderValue, StatusCode};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use url::Url;

use super::{ConnectError, Connection, Connector};
use crate::error::DaemonError;

pub const PING_INTERVAL: Duration = Duration::from_secs(15);
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// Opening the connection (TCP, TLS, upgrade) may take this long.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
const CHANNEL_CAPACITY: usize = 64;
/// Largest message (and frame: coderd sends each message as one) the daemon accepts: a job
/// carrying the largest archive the default `ArchiveLimits` allow, once base64 added a third.
/// tungstenite's defaults (16 MiB frames) would refuse templates of about 12 MiB.
const MAX_MESSAGE_BYTES: usize = 160 << 20;

/// How the daemon proves who it is; exactly one is sent.
#[derive(Clone, PartialEq, Eq)]
pub enum DaemonAuth {
    /// A user's session token (`Coder-Session-Token`).
    SessionToken(String),
    /// The deployment's pre-shared key.
    Psk(String),
    /// A provisioner key.
    Key(String),
}

impl std::fmt::Debug for DaemonAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self {
            Self::SessionToken(_) => "SessionToken",
            Self::Psk(_) => "Psk",
            Self::Key(_) => "Key",
        };
        write!(f, "{kind}(<redacted>)")
    }
}

impl DaemonAuth {
    fn header(&self) -> (&'static str, &str) {
        match self {
            Self::SessionToken(s) => (SESSION_TOKEN_HEADER, s),
            Self::Psk(s) => (PSK_HEADER, s),
            Self::Key(s) => (KEY_HEADER, s),
        }
    }
}

#[derive(Debug, Clone)]
pub struct WebSocketConnector {
    base: Url,
    organization: String,
    auth: DaemonAuth,
    ping_interval: Duration,
    idle_timeout: Duration,
}

impl WebSocketConnector {
    /// `base` is the deployment URL (`http(s)://host[/base path]`); `organization` a name, an
    /// id, or `default` to let coderd pick (the key's organization, or the default one).
    pub fn new(
        base: Url,
        organization: impl Into<String>,
        auth: DaemonAuth,
    ) -> Result<Self, DaemonError> {
        if !matches!(base.scheme(), "http" | "https") || base.cannot_be_a_base() {
            return Err(DaemonError::Config(format!(
                "the coderd URL must be http:// or https://, not {base}"
            )));
        }
        Ok(Self {
            base,
            organization: organization.into(),
            auth,
            ping_interval: PING_INTERVAL,
            idle_timeout: IDLE_TIMEOUT,
        })
    }

    /// Overrides the keepalive timing (tests use short ones).
    pub fn with_keepalive(mut self, ping_interval: Duration, idle_timeout: Duration) -> Self {
        self.ping_interval = ping_interval;
        self.idle_timeout = idle_timeout;
        self
    }

    /// The serve endpoint with the daemon's parameters as its query.
    pub fn serve_url(&self, params: &ServeParams) -> Result<Url, ConnectError> {
        let mut url = self.base.clone();
        let scheme = if url.scheme() == "https" { "wss" } else { "ws" };
        url.set_scheme(scheme).map_err(|()| {
            ConnectError::Incompatible(format!("cannot use {} for a WebSocket", self.base))
        })?;
        url.path_segments_mut()
            .map_err(|()| {
                ConnectError::Incompatible(format!("{} cannot be a base URL", self.base))
            })?
            .pop_if_empty()
            .extend([
                "api",
                "v2",
                "organizations",
                &self.organization,
                "provisionerdaemons",
                "serve",
            ]);
        let query = serde_urlencoded::to_string(params).map_err(|e| {
            ConnectError::Incompatible(format!("encoding the daemon's parameters: {e}"))
        })?;
        url.set_query(Some(&query));
        Ok(url)
    }
}

impl Connector for WebSocketConnector {
    async fn connect(&self, params: &ServeParams) -> Result<Connection, ConnectError> {
        let url = self.serve_url(params)?;
        let mut request = url
            .as_str()
            .into_client_request()
            .map_err(|e| ConnectError::Incompatible(format!("invalid serve URL: {e}")))?;
        let (name, secret) = self.auth.header();
        let value = HeaderValue::from_str(secret).map_err(|_| {
            ConnectError::Unauthorized(format!(
                "the credential for {name} is not a valid header value"
            ))
        })?;
        request.headers_mut().insert(name, value);

        let limits = WebSocketConfig::default()
            .max_message_size(Some(MAX_MESSAGE_BYTES))
            .max_frame_size(Some(MAX_MESSAGE_BYTES));
        let connecting = tokio_tungstenite::connect_async_with_config(request, Some(limits), true);
        let socket = match timeout(CONNECT_TIMEOUT, connecting).await {
            Err(_) => {
                return Err(ConnectError::Transient(format!(
                    "connecting to coderd timed out after {CONNECT_TIMEOUT:?}"
                )));
            }
            Ok(Err(tungstenite::Error::Http(response))) => {
                let status = response.status();
                return Err(refusal(
                    status,
                    response.body().as_deref().unwrap_or_default(),
                ));
            }
            Ok(Err(e)) => {
                return Err(ConnectError::Transient(format!(
                    "connecting to coderd: {e}"
                )));
            }
            Ok(Ok((socket, _))) => socket,
        };

        let (daemon_tx, pump_rx) = mpsc::channel(CHANNEL_CAPACITY);
        let (pump_tx, daemon_rx) = mpsc::channel(CHANNEL_CAPACITY);
        let keepalive = Keepalive {
            ping_interval: self.ping_interval,
            idle_timeout: self.idle_timeout,
        };
        tokio::spawn(pump(socket, pump_rx, pump_tx, keepalive));
        Ok(Connection {
            outgoing: daemon_tx,
            incoming: daemon_rx,
        })
    }
}

/// Classifies a refused upgrade, carrying coderd's `{message, detail}`.
fn refusal(status: StatusCode, body: &[u8]) -> ConnectError {
    let message = match serde_json::from_slice::<codersdk::Response>(body) {
        Ok(r) if r.detail.is_empty() => r.message,
        Ok(r) => format!("{}: {}", r.message, r.detail),
        Err(_) => {
            let text = String::from_utf8_lossy(body);
            text.trim().chars().take(512).collect()
        }
    };
    let message = if message.is_empty() {
        status.to_string()
    } else {
        format!("{status}: {message}")
    };
    match status.as_u16() {
        401 => ConnectError::Unauthorized(message),
        403 => ConnectError::Forbidden(message),
        408 | 429 => ConnectError::Transient(message),
        400..=499 => ConnectError::Incompatible(message),
        _ => ConnectError::Transient(message),
    }
}

#[derive(Debug, Clone, Copy)]
struct Keepalive {
    ping_interval: Duration,
    idle_timeout: Duration,
}

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Runs until either side hangs up or the connection is found dead; dropping `incoming` then
/// tells the runner.
async fn pump(
    socket: Socket,
    mut outgoing: mpsc::Receiver<DaemonMessage>,
    incoming: mpsc::Sender<ServerMessage>,
    keepalive: Keepalive,
) {
    let (mut sink, mut stream) = socket.split();
    let mut ping = tokio::time::interval_at(
        Instant::now() + keepalive.ping_interval,
        keepalive.ping_interval,
    );
    let mut last_heard = Instant::now();
    loop {
        let frame = tokio::select! {
            message = outgoing.recv() => match message {
                Some(message) => match serde_json::to_string(&message) {
                    Ok(text) => Message::text(text),
                    Err(e) => {
                        tracing::error!(error = %e, "cannot encode a message for coderd");
                        continue;
                    }
                },
                None => Message::Close(None),
            },
            frame = stream.next() => {
                last_heard = Instant::now();
                match frame {
                    Some(Ok(Message::Text(text))) => {
                        match serde_json::from_str::<ServerMessage>(text.as_str()) {
                            Ok(message) => {
                                if incoming.send(message).await.is_err() {
                                    break;
                                }
                            }
                            // A newer coderd may say things this daemon does not know.
                            Err(e) => tracing::warn!(error = %e, "ignoring an unknown message from coderd"),
                        }
                        continue;
                    }
                    Some(Ok(Message::Close(_))) | None => {
                        tracing::debug!("coderd closed the connection");
                        break;
                    }
                    Some(Err(e)) => {
                        tracing::warn!(error = %e, "connection to coderd failed");
                        break;
                    }
                    Some(Ok(_)) => continue,
                }
            }
            _ = ping.tick() => Message::Ping(Default::default()),
            () = sleep_until(last_heard + keepalive.idle_timeout) => {
                tracing::warn!(timeout = ?keepalive.idle_timeout, "nothing heard from coderd; the connection is dead");
                break;
            }
        };
        let closing = matches!(frame, Message::Close(_));
        match timeout(keepalive.idle_timeout, sink.send(frame)).await {
            Ok(Ok(())) if !closing => {}
            Ok(Ok(())) => break,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "writing to coderd failed");
                break;
            }
            Err(_) => {
                tracing::warn!("writing to coderd is stuck; the connection is dead");
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connector(base: &str, org: &str) -> WebSocketConnector {
        let base = Url::parse(base).expect("test URL");
        WebSocketConnector::new(base, org, DaemonAuth::Psk("secret".into())).expect("valid")
    }

    #[test]
    fn serve_url_keeps_base_path_and_encodes_params() -> Result<(), ConnectError> {
        let params = ServeParams {
            name: "my daemon".into(),
            provisioners: "echo,terraform".into(),
            tags: r#"{"env":"on-prem"}"#.into(),
            version: "0.1.0".into(),
            protocol_version: "1.0".into(),
        };
        let url = connector("https://coder.example.com/base/", "my org").serve_url(&params)?;
        assert_eq!(url.scheme(), "wss");
        assert_eq!(
            url.path(),
            "/base/api/v2/organizations/my%20org/provisionerdaemons/serve"
        );
        let query: ServeParams =
            serde_urlencoded::from_str(url.query().unwrap_or_default()).expect("query parses");
        assert_eq!(query, params);

        let url = connector("http://127.0.0.1:3000", "default").serve_url(&params)?;
        assert!(url.as_str().starts_with(
            "ws://127.0.0.1:3000/api/v2/organizations/default/provisionerdaemons/serve?"
        ));
        Ok(())
    }

    #[test]
    fn only_http_urls_are_accepted() {
        let base = Url::parse("ftp://example.com").expect("test URL");
        assert!(WebSocketConnector::new(base, "default", DaemonAuth::Key("k".into())).is_err());
    }

    #[test]
    fn refusals_map_to_causes() {
        let body = br#"{"message":"Unauthorized.","detail":"The PSK is invalid."}"#;
        assert_eq!(
            refusal(StatusCode::UNAUTHORIZED, body),
            ConnectError::Unauthorized(
                "401 Unauthorized: Unauthorized.: The PSK is invalid.".into()
            )
        );
        assert!(
            matches!(refusal(StatusCode::FORBIDDEN, b""), ConnectError::Forbidden(m) if m == "403 Forbidden")
        );
        assert!(matches!(
            refusal(StatusCode::BAD_REQUEST, br#"{"message":"Incompatible API version."}"#),
            ConnectError::Incompatible(m) if m.contains("Incompatible API version.")
        ));
        assert!(matches!(
            refusal(StatusCode::BAD_GATEWAY, b"<html>"),
            ConnectError::Transient(_)
        ));
        assert!(matches!(
            refusal(StatusCode::TOO_MANY_REQUESTS, b""),
            ConnectError::Transient(_)
        ));
    }

    #[test]
    fn auth_debug_hides_the_secret() {
        let shown = format!("{:?}", DaemonAuth::Key("super-secret".into()));
        assert!(!shown.contains("super-secret"), "{shown}");
    }
}
