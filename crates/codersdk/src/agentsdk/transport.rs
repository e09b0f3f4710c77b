//! Byte streams over WebSocket messages, and length-prefixed JSON frames over byte streams.
//!
//! yamux needs a plain byte stream; a WebSocket carries messages. [`WsIo`] turns binary messages
//! into a stream (and writes into messages), whatever WebSocket library sits underneath: the
//! caller maps its message type to and from `Bytes`.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use futures::{Sink, Stream};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};

use super::MAX_FRAME;

type BoxStream = Pin<Box<dyn Stream<Item = io::Result<Bytes>> + Send>>;
type BoxSink = Pin<Box<dyn Sink<Bytes, Error = io::Error> + Send>>;

/// A byte stream over a message stream: reads concatenate incoming binary messages, each write
/// becomes one outgoing message.
pub struct WsIo {
    incoming: BoxStream,
    outgoing: BoxSink,
    pending: Bytes,
}

impl WsIo {
    /// `incoming` yields the payloads of binary messages (and ends when the socket closes);
    /// `outgoing` sends payloads as binary messages.
    pub fn new(
        incoming: impl Stream<Item = io::Result<Bytes>> + Send + 'static,
        outgoing: impl Sink<Bytes, Error = io::Error> + Send + 'static,
    ) -> Self {
        Self {
            incoming: Box::pin(incoming),
            outgoing: Box::pin(outgoing),
            pending: Bytes::new(),
        }
    }
}

impl AsyncRead for WsIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        while self.pending.is_empty() {
            match ready!(self.incoming.as_mut().poll_next(cx)) {
                Some(Ok(message)) => self.pending = message,
                Some(Err(e)) => return Poll::Ready(Err(e)),
                None => return Poll::Ready(Ok(())),
            }
        }
        let n = self.pending.len().min(buf.remaining());
        buf.put_slice(&self.pending.split_to(n));
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for WsIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        ready!(self.outgoing.as_mut().poll_ready(cx))?;
        self.outgoing
            .as_mut()
            .start_send(Bytes::copy_from_slice(buf))?;
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.outgoing.as_mut().poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.outgoing.as_mut().poll_close(cx)
    }
}

/// Writes one frame: a 4-byte big-endian length, then the JSON.
pub async fn write_frame<W: AsyncWrite + Unpin, T: Serialize>(
    w: &mut W,
    value: &T,
) -> io::Result<()> {
    let json = serde_json::to_vec(value).map_err(io::Error::other)?;
    if json.len() > MAX_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "frame too large",
        ));
    }
    let len = u32::try_from(json.len()).map_err(io::Error::other)?;
    w.write_all(&len.to_be_bytes()).await?;
    w.write_all(&json).await?;
    w.flush().await
}

/// Reads one frame; `None` when the stream ended cleanly before a frame started.
pub async fn read_frame<R: AsyncRead + Unpin, T: DeserializeOwned>(
    r: &mut R,
) -> io::Result<Option<T>> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("frame of {len} bytes is too large"),
        ));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).await?;
    serde_json::from_slice(&body)
        .map(Some)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Sends `request` and reads the single answer on one stream. Two properties of tokio-yamux
/// shape this: the peer's window updates are processed on a stream's read side, so a request
/// larger than the 256 KiB stream window only gets through if the stream is read while it is
/// written (both happen together here); and a stream whose writing half was shut down stops
/// granting window updates, so a large answer would stall — frames are length-delimited, so the
/// request needs no half-close.
pub async fn exchange<S, Q, A>(stream: S, request: &Q) -> io::Result<Option<A>>
where
    S: AsyncRead + AsyncWrite,
    Q: Serialize,
    A: DeserializeOwned,
{
    let (mut reader, mut writer) = tokio::io::split(stream);
    let (written, answer) = tokio::join!(
        write_frame(&mut writer, request),
        read_frame::<_, A>(&mut reader)
    );
    written?;
    answer
}

/// Writes `value` as the stream's last frame while draining whatever the peer still sends, for
/// the same reason as [`exchange`].
pub async fn reply<S, T>(stream: S, value: &T) -> io::Result<()>
where
    S: AsyncRead + AsyncWrite,
    T: Serialize,
{
    let (mut reader, mut writer) = tokio::io::split(stream);
    let mut discard = tokio::io::sink();
    let (written, _) = tokio::join!(
        async {
            write_frame(&mut writer, value).await?;
            writer.shutdown().await
        },
        tokio::io::copy(&mut reader, &mut discard)
    );
    written
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::{SinkExt, StreamExt};

    #[tokio::test]
    async fn frames_round_trip_through_message_streams() {
        let (tx, rx) = futures::channel::mpsc::unbounded::<Bytes>();
        let sink = tx.sink_map_err(io::Error::other);
        let loopback = WsIo::new(rx.map(Ok), sink);
        let (mut reader, mut writer) = tokio::io::split(loopback);
        write_frame(&mut writer, &serde_json::json!({"hello": "world"}))
            .await
            .expect("write");
        write_frame(&mut writer, &vec![1u8; 100_000])
            .await
            .expect("write");
        let first: serde_json::Value = read_frame(&mut reader).await.expect("read").expect("frame");
        assert_eq!(first["hello"], "world");
        let second: Vec<u8> = read_frame(&mut reader).await.expect("read").expect("frame");
        assert_eq!(second.len(), 100_000);
    }

    #[tokio::test]
    async fn oversized_frames_are_refused() {
        let mut buf = Vec::new();
        buf.extend_from_slice(&((MAX_FRAME as u32) + 1).to_be_bytes());
        let mut reader = &buf[..];
        let err = read_frame::<_, serde_json::Value>(&mut reader)
            .await
            .expect_err("too large");
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    }
}
