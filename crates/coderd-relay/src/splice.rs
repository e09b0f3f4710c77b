//! Splicing a client's WebSocket onto an agent's yamux stream, in one task that owns both.
//!
//! Back-pressure: a WebSocket message is read from the client only once the previous one was
//! written into the yamux stream (which waits for the agent's window), and the stream is read
//! only once the previous message went out to the client. Nothing is buffered beyond one
//! message each way and the yamux windows.
//!
//! One tokio-yamux property shapes this: frames for a stream sit in an 8-frame channel until the
//! stream is polled, and when that channel is full the whole session stops reading, stalling
//! every other stream of the agent. So while the client is slow to take output, the stream is
//! still polled (`poll_peek` with no room), which moves its frames into the stream's own buffer
//! — bounded by its receive window — without granting the agent more window.
//!
//! Raw streams (TCP, UDP, SSH, ping) carry bytes in binary messages; an empty binary message is
//! the end of one direction (a half-close), both ways. When the agent's connection is gone the
//! client gets a close frame saying so instead.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use axum::extract::ws::{CloseFrame, Message, WebSocket, close_code};
use bytes::{Bytes, BytesMut};
use futures::{Sink, Stream};
use tokio::io::{AsyncWrite, ReadBuf};
use tokio::sync::watch;
use tokio_util::sync::WaitForCancellationFutureOwned;
use tokio_yamux::StreamHandle;

use coderd_core::relay_usage::Active;

/// Largest binary message sent to the client: what one read of the stream may return. Large
/// messages keep the per-message framing cost small.
const CHUNK: usize = 256 << 10;

/// How client messages become bytes for the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Inbound {
    /// Binary messages are the payload; an empty one ends the client's direction.
    Raw,
    /// Text or binary messages are Coder's reconnecting-PTY JSON, re-framed for the agent.
    Pty,
}

/// Why the splice ended, for the log.
#[derive(Debug)]
pub(super) enum Ended {
    Done,
    ClientGone,
    AgentGone,
    Shutdown,
    Error(String),
}

pub(super) struct Splice {
    socket: WebSocket,
    stream: StreamHandle,
    inbound: Inbound,
    /// Flips when the agent's whole connection ends.
    agent_closed: watch::Receiver<bool>,
    shutdown: Pin<Box<WaitForCancellationFutureOwned>>,
    active: Active,
    /// Bytes from the client not yet written into the stream.
    to_agent: Bytes,
    client_eof: bool,
    stream_shut: bool,
    buf: BytesMut,
    /// A message for the client waiting for the socket to take it.
    to_client: Option<Message>,
    agent_eof: bool,
    flush: bool,
    /// Set once a close frame is queued: only flushing remains.
    closing: Option<Ended>,
}

impl Splice {
    pub(super) fn new(
        socket: WebSocket,
        stream: StreamHandle,
        inbound: Inbound,
        agent_closed: watch::Receiver<bool>,
        shutdown: tokio_util::sync::CancellationToken,
        active: Active,
    ) -> Self {
        Self {
            socket,
            stream,
            inbound,
            agent_closed,
            shutdown: Box::pin(shutdown.cancelled_owned()),
            active,
            to_agent: Bytes::new(),
            client_eof: false,
            stream_shut: false,
            buf: BytesMut::new(),
            to_client: None,
            agent_eof: false,
            flush: false,
            closing: None,
        }
    }

    /// Turns a client message into bytes for the agent; `None` for messages that carry none.
    fn decode(&self, message: Message) -> Result<Option<Bytes>, Ended> {
        match (self.inbound, message) {
            (Inbound::Raw, Message::Binary(bytes)) => Ok(Some(bytes)),
            (Inbound::Pty, Message::Binary(bytes)) => pty_frame(&bytes).map(Some),
            (Inbound::Pty, Message::Text(text)) => pty_frame(text.as_bytes()).map(Some),
            (_, Message::Close(_)) => Err(Ended::ClientGone),
            _ => Ok(None),
        }
    }

    /// Queues a close frame; the splice ends once it is flushed.
    fn close(&mut self, code: u16, reason: &str, ended: Ended) {
        self.to_client = Some(Message::Close(Some(CloseFrame {
            code,
            reason: reason.into(),
        })));
        self.closing = Some(ended);
    }

    /// Client → agent. Returns whether anything moved.
    fn poll_inbound(&mut self, cx: &mut Context<'_>) -> Result<bool, Ended> {
        let mut moved = false;
        if self.to_agent.is_empty() && !self.client_eof {
            match Pin::new(&mut self.socket).poll_next(cx) {
                Poll::Ready(Some(Ok(message))) => {
                    moved = true;
                    match self.decode(message)? {
                        Some(bytes) if bytes.is_empty() && self.inbound == Inbound::Raw => {
                            self.client_eof = true;
                        }
                        Some(bytes) => self.to_agent = bytes,
                        None => {}
                    }
                }
                Poll::Ready(Some(Err(_)) | None) => return Err(Ended::ClientGone),
                Poll::Pending => {}
            }
        }
        while !self.to_agent.is_empty() {
            match Pin::new(&mut self.stream).poll_write(cx, &self.to_agent) {
                Poll::Ready(Ok(n)) => {
                    self.active.to_agent(n);
                    let _ = self.to_agent.split_to(n);
                    moved = true;
                }
                Poll::Ready(Err(_)) => return Err(Ended::AgentGone),
                Poll::Pending => break,
            }
        }
        if self.client_eof
            && self.to_agent.is_empty()
            && !self.stream_shut
            && let Poll::Ready(result) = Pin::new(&mut self.stream).poll_shutdown(cx)
        {
            result.map_err(|_| Ended::AgentGone)?;
            self.stream_shut = true;
            moved = true;
        }
        Ok(moved)
    }

    /// Agent → client. Returns whether anything moved.
    fn poll_outbound(&mut self, cx: &mut Context<'_>) -> Result<bool, Ended> {
        let mut moved = false;
        if self.to_client.is_none() && !self.agent_eof {
            self.buf.reserve(CHUNK);
            match tokio_util::io::poll_read_buf(Pin::new(&mut self.stream), cx, &mut self.buf) {
                Poll::Ready(Ok(0)) => {
                    moved = true;
                    self.agent_eof = true;
                    if *self.agent_closed.borrow() {
                        self.close(
                            close_code::ERROR,
                            "the workspace agent disconnected",
                            Ended::AgentGone,
                        );
                    } else if self.inbound == Inbound::Raw {
                        self.to_client = Some(Message::Binary(Bytes::new()));
                    } else {
                        self.close(close_code::NORMAL, "the terminal closed", Ended::Done);
                    }
                }
                Poll::Ready(Ok(n)) => {
                    moved = true;
                    self.active.to_client(n);
                    self.to_client = Some(Message::Binary(self.buf.split().freeze()));
                }
                Poll::Ready(Err(_)) => {
                    moved = true;
                    self.agent_eof = true;
                    self.close(
                        close_code::ERROR,
                        "the workspace agent disconnected",
                        Ended::AgentGone,
                    );
                }
                Poll::Pending => {}
            }
        }
        if let Some(message) = self.to_client.take() {
            match Pin::new(&mut self.socket).poll_ready(cx) {
                Poll::Ready(Ok(())) => {
                    Pin::new(&mut self.socket)
                        .start_send(message)
                        .map_err(|_| Ended::ClientGone)?;
                    self.flush = true;
                    moved = true;
                }
                Poll::Ready(Err(_)) => return Err(Ended::ClientGone),
                Poll::Pending => {
                    self.to_client = Some(message);
                    // Keep the stream's frames moving (see the module docs).
                    let mut none = ReadBuf::new(&mut []);
                    if let Poll::Ready(Err(_)) = self.stream.poll_peek(cx, &mut none) {
                        return Err(Ended::AgentGone);
                    }
                }
            }
        }
        if self.flush {
            match Pin::new(&mut self.socket).poll_flush(cx) {
                Poll::Ready(Ok(())) => self.flush = false,
                Poll::Ready(Err(_)) => return Err(Ended::ClientGone),
                Poll::Pending => {}
            }
        }
        Ok(moved)
    }

    fn step(&mut self, cx: &mut Context<'_>) -> Poll<Ended> {
        loop {
            if let Some(ended) = self.closing.take() {
                // Only the close frame (and what precedes it) is left to send.
                if let Some(message) = self.to_client.take() {
                    match Pin::new(&mut self.socket).poll_ready(cx) {
                        Poll::Ready(Ok(())) => {
                            let _ = Pin::new(&mut self.socket).start_send(message);
                        }
                        Poll::Ready(Err(_)) => return Poll::Ready(ended),
                        Poll::Pending => {
                            self.to_client = Some(message);
                            self.closing = Some(ended);
                            return Poll::Pending;
                        }
                    }
                }
                return match Pin::new(&mut self.socket).poll_flush(cx) {
                    Poll::Pending => {
                        self.closing = Some(ended);
                        Poll::Pending
                    }
                    Poll::Ready(_) => Poll::Ready(ended),
                };
            }
            if self.shutdown.as_mut().poll(cx).is_ready() {
                self.close(close_code::AWAY, "coderd is shutting down", Ended::Shutdown);
                continue;
            }
            let inbound = match self.poll_inbound(cx) {
                Ok(moved) => moved,
                Err(Ended::AgentGone) => {
                    self.close(
                        close_code::ERROR,
                        "the workspace agent disconnected",
                        Ended::AgentGone,
                    );
                    continue;
                }
                Err(Ended::Error(message)) => {
                    self.close(close_code::INVALID, &message, Ended::Error(message.clone()));
                    continue;
                }
                Err(ended) => return Poll::Ready(ended),
            };
            let outbound = match self.poll_outbound(cx) {
                Ok(moved) => moved,
                Err(ended) => return Poll::Ready(ended),
            };
            if self.closing.is_some() {
                continue;
            }
            if self.agent_eof && self.client_eof && self.stream_shut && self.to_client.is_none() {
                self.close(close_code::NORMAL, "", Ended::Done);
                continue;
            }
            if !inbound && !outbound {
                return Poll::Pending;
            }
        }
    }
}

impl Future for Splice {
    type Output = Ended;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Ended> {
        let this = self.get_mut();
        let ended = ready!(this.step(cx));
        Poll::Ready(ended)
    }
}

/// One of Coder's reconnecting-PTY client messages (`{data, height, width}`), as the agent's
/// length-prefixed [`PtyInput`](codersdk::agentsdk::PtyInput) frame.
fn pty_frame(json: &[u8]) -> Result<Bytes, Ended> {
    let input: codersdk::agentsdk::PtyInput = serde_json::from_slice(json)
        .map_err(|e| Ended::Error(format!("a terminal message is not valid JSON: {e}")))?;
    let body = serde_json::to_vec(&input).map_err(|e| Ended::Error(e.to_string()))?;
    let len = u32::try_from(body.len()).map_err(|e| Ended::Error(e.to_string()))?;
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&len.to_be_bytes());
    frame.extend_from_slice(&body);
    Ok(frame.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pty_messages_become_length_prefixed_frames() {
        let frame = pty_frame(br#"{"data":"ls\r","height":24,"width":80}"#).expect("frame");
        let len = u32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize;
        assert_eq!(len, frame.len() - 4);
        let input: codersdk::agentsdk::PtyInput =
            serde_json::from_slice(&frame[4..]).expect("json");
        assert_eq!(
            (input.data.as_str(), input.height, input.width),
            ("ls\r", 24, 80)
        );
        assert!(pty_frame(b"not json").is_err());
    }
}
