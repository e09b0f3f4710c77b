//! Streams into a workspace through coderd's relay: [`Client::connect_agent`] opens one
//! (SSH, TCP or UDP to a port, ping) and hands back a byte stream; [`Client::agent_pty`] attaches
//! to a reconnecting PTY; [`Client::listening_ports`] lists what listens in the workspace.
//!
//! On the wire a stream is a WebSocket of binary messages, one direction's end being an empty
//! binary message; coderd answers the upgrade only once the agent accepted the stream, so a
//! refusal arrives as an ordinary API error.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use futures::{Sink, Stream};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use uuid::Uuid;

use crate::agentsdk::{ListeningPorts, PtyInput};
use crate::{Client, ClientError};

/// The largest message written at once; larger writes are split (coderd reads at most 4 MiB).
const MAX_WRITE: usize = 1 << 20;

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// What to reach inside the workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The agent's SSH server.
    Ssh,
    /// A TCP port on the workspace's loopback.
    Tcp(u16),
    /// A UDP port on the workspace's loopback; datagrams are framed (2-byte big-endian length).
    Udp(u16),
    /// The agent echoes every byte: round trips through the whole path.
    Ping,
}

impl Target {
    fn query(self) -> String {
        match self {
            Self::Ssh => "type=ssh".into(),
            Self::Ping => "type=ping".into(),
            Self::Tcp(port) => format!("type=tcp&port={port}"),
            Self::Udp(port) => format!("type=udp&port={port}"),
        }
    }
}

impl Client {
    /// Opens a WebSocket to `path_and_query` with the session token in a header (never in the
    /// URL, so it stays out of logs) and Nagle off: interactive traffic is small writes.
    async fn websocket(&self, path_and_query: &str) -> Result<Socket, ClientError> {
        let request = crate::logs::websocket_request(
            self.endpoint(path_and_query)?,
            self.token(),
            self.headers(),
        )?;
        let (socket, _) = tokio_tungstenite::connect_async_with_config(request, None, true)
            .await
            .map_err(crate::logs::websocket_error)?;
        Ok(socket)
    }

    /// Opens one stream to `target` in the workspace of `agent`.
    pub async fn connect_agent(
        &self,
        agent: Uuid,
        target: Target,
    ) -> Result<RelayStream, ClientError> {
        let socket = self
            .websocket(&format!(
                "/api/v2/workspaceagents/{agent}/connect?{}",
                target.query()
            ))
            .await?;
        Ok(RelayStream::new(socket))
    }

    /// Attaches to the reconnecting PTY `reconnect` of `agent` (creating it, running `command` or
    /// the login shell, if the agent has none by that id).
    pub async fn agent_pty(
        &self,
        agent: Uuid,
        reconnect: Uuid,
        width: u16,
        height: u16,
        command: &str,
    ) -> Result<PtyConnection, ClientError> {
        let mut query = url::form_urlencoded::Serializer::new(String::new());
        query
            .append_pair("reconnect", &reconnect.to_string())
            .append_pair("width", &width.to_string())
            .append_pair("height", &height.to_string())
            .append_pair("command", command);
        let socket = self
            .websocket(&format!(
                "/api/v2/workspaceagents/{agent}/pty?{}",
                query.finish()
            ))
            .await?;
        Ok(PtyConnection { socket })
    }

    /// The TCP ports listening inside the workspace of `agent`.
    pub async fn listening_ports(&self, agent: Uuid) -> Result<ListeningPorts, ClientError> {
        self.get(&format!("/api/v2/workspaceagents/{agent}/listening-ports"))
            .await
    }
}

/// An error for a close frame: coderd says why a stream ended when it was not its peer's doing
/// (the agent disconnected, coderd is shutting down).
fn closed_error(frame: Option<&tungstenite::protocol::CloseFrame>) -> Option<io::Error> {
    let frame = frame?;
    if frame.code == CloseCode::Normal {
        return None;
    }
    let reason = if frame.reason.is_empty() {
        format!("coderd closed the stream ({})", frame.code)
    } else {
        frame.reason.to_string()
    };
    Some(io::Error::new(io::ErrorKind::ConnectionAborted, reason))
}

fn lost(e: tungstenite::Error) -> io::Error {
    match e {
        tungstenite::Error::Io(e) => e,
        tungstenite::Error::ConnectionClosed | tungstenite::Error::AlreadyClosed => {
            io::Error::new(io::ErrorKind::ConnectionAborted, "the stream is closed")
        }
        other => io::Error::new(
            io::ErrorKind::ConnectionAborted,
            format!("the connection to coderd was lost: {other}"),
        ),
    }
}

/// A byte stream into the workspace. Reads end at the other side's end of data; `shutdown`
/// ends ours while reads go on.
pub struct RelayStream {
    socket: Socket,
    pending: Bytes,
    read_done: bool,
    write_done: bool,
    /// Bytes of the caller's last write handed to the socket but not yet flushed.
    queued: usize,
    /// Why coderd closed the stream, for the writes that fail after it did.
    closed: Option<String>,
}

impl RelayStream {
    fn new(socket: Socket) -> Self {
        Self {
            socket,
            pending: Bytes::new(),
            read_done: false,
            write_done: false,
            queued: 0,
            closed: None,
        }
    }
}

impl RelayStream {
    /// A failed socket operation as an I/O error: coderd's reason when it closed the stream.
    fn lost(&self, e: tungstenite::Error) -> io::Error {
        match &self.closed {
            Some(reason) => io::Error::new(io::ErrorKind::ConnectionAborted, reason.clone()),
            None => lost(e),
        }
    }
}

impl AsyncRead for RelayStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        while self.pending.is_empty() {
            if self.read_done {
                return Poll::Ready(Ok(()));
            }
            match ready!(Pin::new(&mut self.socket).poll_next(cx)) {
                Some(Ok(Message::Binary(bytes))) => {
                    if bytes.is_empty() {
                        self.read_done = true;
                    }
                    self.pending = bytes;
                }
                Some(Ok(Message::Close(frame))) => {
                    self.read_done = true;
                    if let Some(e) = closed_error(frame.as_ref()) {
                        self.closed = Some(e.to_string());
                        return Poll::Ready(Err(e));
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Poll::Ready(Err(self.lost(e))),
                None => {
                    self.read_done = true;
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::ConnectionAborted,
                        "the connection to coderd ended",
                    )));
                }
            }
        }
        let n = self.pending.len().min(buf.remaining());
        let chunk = self.pending.split_to(n);
        buf.put_slice(&chunk);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for RelayStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        if self.write_done {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the stream was shut down for writing",
            )));
        }
        if self.queued == 0 {
            ready!(Pin::new(&mut self.socket).poll_ready(cx)).map_err(|e| self.lost(e))?;
            let n = buf.len().min(MAX_WRITE);
            Pin::new(&mut self.socket)
                .start_send(Message::Binary(Bytes::copy_from_slice(&buf[..n])))
                .map_err(|e| self.lost(e))?;
            self.queued = n;
        }
        // A write is done once it left for coderd: callers that never flush (a writer that
        // then waits for the answer) must not leave it in the socket's buffer. Until then the
        // caller retries with the same bytes, as `AsyncWrite` callers do after `Pending`.
        ready!(Pin::new(&mut self.socket).poll_flush(cx)).map_err(|e| self.lost(e))?;
        Poll::Ready(Ok(std::mem::take(&mut self.queued)))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.socket)
            .poll_flush(cx)
            .map_err(|e| self.lost(e))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if !self.write_done {
            ready!(Pin::new(&mut self.socket).poll_ready(cx)).map_err(|e| self.lost(e))?;
            Pin::new(&mut self.socket)
                .start_send(Message::Binary(Bytes::new()))
                .map_err(|e| self.lost(e))?;
            self.write_done = true;
        }
        Pin::new(&mut self.socket)
            .poll_flush(cx)
            .map_err(|e| self.lost(e))
    }
}

/// An attached reconnecting PTY: output arrives raw, input and resizes go as Coder's JSON.
pub struct PtyConnection {
    socket: Socket,
}

impl PtyConnection {
    /// Sends input bytes and/or a new size (0 keeps the current one).
    pub async fn send(&mut self, input: &PtyInput) -> Result<(), ClientError> {
        use futures::SinkExt;
        let json = serde_json::to_string(input).map_err(|e| ClientError::Decode(e.to_string()))?;
        self.socket
            .send(Message::Text(json.into()))
            .await
            .map_err(|e| ClientError::WebSocket(Box::new(e)))
    }

    /// The next piece of output; `None` when the terminal or the connection ended.
    pub async fn recv(&mut self) -> Option<Result<Bytes, ClientError>> {
        use futures::StreamExt;
        loop {
            match self.socket.next().await? {
                Ok(Message::Binary(bytes)) => return Some(Ok(bytes)),
                Ok(Message::Text(text)) => return Some(Ok(Bytes::from(text.as_str().to_owned()))),
                Ok(Message::Close(frame)) => {
                    return closed_error(frame.as_ref())
                        .map(|e| Err(ClientError::Decode(e.to_string())));
                }
                Ok(_) => {}
                Err(e) => return Some(Err(ClientError::WebSocket(Box::new(e)))),
            }
        }
    }
}
