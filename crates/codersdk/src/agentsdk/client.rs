//! The agent's end of its connection: dial coderd, run the yamux session, make API calls, and
//! receive the streams coderd opens.

use std::io;

use futures::{SinkExt, StreamExt};
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::tungstenite;
use tokio_yamux::{Config, Control, Session, StreamHandle};
use url::Url;

use super::transport::WsIo;
use super::{RPC_PATH, Request, Response, StreamHeader, exchange, read_frame};
use crate::ClientError;

/// A live connection to coderd.
pub struct AgentConnection {
    control: Control,
    /// The task driving the session: dropping the connection stops it, which closes the socket.
    driver: tokio::task::JoinHandle<()>,
    /// Streams coderd opened (clients reaching into the workspace), with their headers read.
    pub inbound: mpsc::Receiver<(StreamHeader, StreamHandle)>,
    closed: watch::Receiver<bool>,
}

/// yamux settings both ends use: keepalive pings every 15 s; yamux drops a session whose pings
/// go unanswered for 30 s, so a silently dead connection is noticed within 45 s at worst.
pub fn yamux_config() -> Config {
    Config {
        keepalive_interval: std::time::Duration::from_secs(15),
        ..Config::default()
    }
}

/// Drives a yamux session: hands each stream the peer opens, with its header, to `inbound`,
/// and flips `closed` when the session ends.
pub fn drive<T>(
    mut session: Session<T>,
    inbound: mpsc::Sender<(StreamHeader, StreamHandle)>,
    closed: watch::Sender<bool>,
) -> tokio::task::JoinHandle<()>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        while let Some(Ok(mut stream)) = session.next().await {
            let inbound = inbound.clone();
            tokio::spawn(async move {
                if let Ok(Some(header)) = read_frame::<_, StreamHeader>(&mut stream).await {
                    let _ = inbound.send((header, stream)).await;
                }
            });
        }
        let _ = closed.send(true);
    })
}

impl AgentConnection {
    /// Dials `<coderd>/api/v2/workspaceagents/me/rpc` with the agent's token.
    pub async fn connect(coderd: &Url, token: &str) -> Result<Self, ClientError> {
        let url = Url::parse(&format!(
            "{}{RPC_PATH}",
            coderd.as_str().trim_end_matches('/')
        ))?;
        let request = crate::logs::websocket_request(url, Some(token), &Default::default())?;
        // TCP_NODELAY: each API call is a few small writes (yamux frame headers and bodies);
        // with Nagle on, the later ones wait for coderd's delayed ACK, ~40 ms per call.
        let (socket, _) = tokio_tungstenite::connect_async_with_config(request, None, true)
            .await
            .map_err(crate::logs::websocket_error)?;
        let (sink, stream) = socket.split();
        let incoming = stream.filter_map(|msg| async move {
            match msg {
                Ok(tungstenite::Message::Binary(bytes)) => Some(Ok(bytes)),
                Ok(tungstenite::Message::Close(_)) => None,
                Ok(_) => None,
                Err(e) => Some(Err(io::Error::other(e))),
            }
        });
        let outgoing = sink
            .sink_map_err(io::Error::other)
            .with(|bytes: bytes::Bytes| async move {
                Ok::<_, io::Error>(tungstenite::Message::Binary(bytes))
            });
        let session = Session::new_client(WsIo::new(incoming, outgoing), yamux_config());
        let control = session.control();
        let (inbound_tx, inbound) = mpsc::channel(16);
        let (closed_tx, closed) = watch::channel(false);
        let driver = drive(session, inbound_tx, closed_tx);
        Ok(Self {
            control,
            driver,
            inbound,
            closed,
        })
    }

    /// One API call on its own stream.
    pub async fn call(&self, request: Request) -> Result<Response, ClientError> {
        let mut control = self.control.clone();
        let stream = control
            .open_stream()
            .await
            .map_err(|e| ClientError::Decode(format!("opening a stream to coderd: {e}")))?;
        let response = exchange::<_, _, Response>(stream, &StreamHeader::Rpc(request))
            .await
            .map_err(|e| ClientError::Decode(format!("talking to coderd: {e}")))?
            .ok_or_else(|| {
                ClientError::Decode("coderd closed the stream without answering".into())
            })?;
        match response {
            Response::Error { message } => Err(ClientError::Api {
                status: 400,
                response: crate::Response::new(message),
            }),
            other => Ok(other),
        }
    }

    /// Resolves when the connection is gone.
    pub async fn closed(&self) {
        let mut closed = self.closed.clone();
        let _ = closed.wait_for(|c| *c).await;
    }

    pub fn is_closed(&self) -> bool {
        *self.closed.borrow()
    }
}

impl Drop for AgentConnection {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agentsdk::reply;

    /// A call and an answer both far larger than yamux's 256 KiB stream window must not stall
    /// waiting for window updates.
    #[tokio::test]
    async fn calls_larger_than_the_stream_window_go_through() {
        let (a, b) = tokio::io::duplex(64 << 10);
        let client = Session::new_client(a, yamux_config());
        let server = Session::new_server(b, yamux_config());
        let mut control = client.control();
        let (client_in, _client_inbound) = mpsc::channel(1);
        let (server_in, mut server_inbound) = mpsc::channel(1);
        let (c_closed, _) = watch::channel(false);
        let (s_closed, _) = watch::channel(false);
        drive(client, client_in, c_closed);
        drive(server, server_in, s_closed);
        let big = "y".repeat(3 << 20);
        tokio::spawn(async move {
            while let Some((header, stream)) = server_inbound.recv().await {
                let StreamHeader::Rpc(Request::UpdateStartup(info)) = header else {
                    continue;
                };
                let answer = Response::Error {
                    message: info.version,
                };
                reply(stream, &answer).await.expect("reply");
            }
        });
        let stream = control.open_stream().await.expect("open");
        let request = StreamHeader::Rpc(Request::UpdateStartup(crate::agentsdk::StartupInfo {
            version: big.clone(),
            ..Default::default()
        }));
        let answer = tokio::time::timeout(
            std::time::Duration::from_secs(20),
            exchange::<_, _, Response>(stream, &request),
        )
        .await
        .expect("no stall")
        .expect("exchange");
        assert_eq!(answer, Some(Response::Error { message: big }));
    }
}
