//! Kubernetes' WebSocket channel framing, and a multiplexer that turns one WebSocket into
//! per-channel readers and writers.
//!
//! `channel.k8s.io` (and `v4.`/`v5.`): each binary message is one channel byte and the data.
//! `base64.channel.k8s.io` (and `v4.`): each text message is the channel as an ASCII digit and
//! the data in standard base64 (the server accepts either message type, as Go's
//! `x/net/websocket` does). `v5.channel.k8s.io` adds CLOSE: the binary message `[255, n]`
//! half-closes channel `n`. Data for channels nobody reads, or past the last channel, is
//! dropped (`wsstream`'s "ignore" channels).
//!
//! The multiplexer runs a reader task and a writer task. Each channel buffers a few messages;
//! when one is full the reader stops reading the socket, so a slow consumer slows the peer
//! instead of growing memory. `WsByteStream` is the other view used by the port-forward
//! tunnel: binary message payloads as one byte stream.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bytes::{Buf, Bytes};
use futures::{Sink, SinkExt, Stream, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_util::sync::PollSender;

use crate::upgrade::Io;

/// The v5 CLOSE signal's first byte.
pub const STREAM_CLOSE: u8 = 255;
/// The most one message written by a channel writer carries.
pub const MAX_MESSAGE_DATA: usize = 32 << 10;
/// Messages a channel holds before the reader stops reading the socket.
const CHANNEL_DEPTH: usize = 16;

/// How channel data is carried in messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// Binary messages, channel byte first.
    Binary,
    /// Text messages, channel digit first, base64 data.
    Base64,
}

/// Encodes channel data as a message.
pub fn encode(channel: u8, data: &[u8], encoding: Encoding) -> Message {
    match encoding {
        Encoding::Binary => {
            let mut v = Vec::with_capacity(data.len() + 1);
            v.push(channel);
            v.extend_from_slice(data);
            Message::Binary(v.into())
        }
        Encoding::Base64 => {
            let mut s = String::with_capacity(data.len() * 4 / 3 + 5);
            s.push(char::from(b'0'.wrapping_add(channel)));
            STANDARD.encode_string(data, &mut s);
            Message::text(s)
        }
    }
}

/// A decoded data message.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// Data on a channel.
    Data(u8, Bytes),
    /// v5 CLOSE of a channel.
    Close(u8),
}

/// Decodes a data message; `None` for control messages and empty ones. `v5` enables CLOSE.
pub fn decode(message: Message, encoding: Encoding, v5: bool) -> io::Result<Option<Frame>> {
    let mut data = match message {
        Message::Binary(b) => b,
        Message::Text(t) => Bytes::from(t.as_str().as_bytes().to_vec()),
        _ => return Ok(None),
    };
    if data.is_empty() {
        return Ok(None);
    }
    if v5 && data[0] == STREAM_CLOSE {
        if data.len() != 2 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "a single channel byte must follow the stream close signal",
            ));
        }
        return Ok(Some(Frame::Close(data[1])));
    }
    let first = data[0];
    data.advance(1);
    match encoding {
        Encoding::Binary => Ok(Some(Frame::Data(first, data))),
        Encoding::Base64 => {
            let decoded = STANDARD
                .decode(&data)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            Ok(Some(Frame::Data(first.wrapping_sub(b'0'), decoded.into())))
        }
    }
}

/// One WebSocket carrying numbered channels.
pub struct Mux {
    out: mpsc::Sender<Message>,
    encoding: Encoding,
    v5: bool,
    peer_closed: watch::Receiver<bool>,
}

/// What the peer sends on one channel.
pub struct ChannelReader {
    rx: mpsc::Receiver<Bytes>,
    pending: Bytes,
}

/// Writes to one channel; each write is one message.
pub struct ChannelWriter {
    out: PollSender<Message>,
    channel: u8,
    encoding: Encoding,
    /// Send v5 CLOSE on shutdown.
    close_signal: bool,
    closed: bool,
}

impl Mux {
    /// Starts multiplexing `ws`. `readable[i]` says whether channel `i` is read (others are
    /// ignored); the readers come back in channel order.
    pub fn new<S: Io>(
        ws: WebSocketStream<S>,
        encoding: Encoding,
        v5: bool,
        readable: &[bool],
    ) -> (Mux, Vec<Option<ChannelReader>>) {
        let (out_tx, mut out_rx) = mpsc::channel::<Message>(CHANNEL_DEPTH);
        let (closed_tx, closed_rx) = watch::channel(false);
        let mut senders = Vec::new();
        let mut readers = Vec::new();
        for &r in readable {
            if r {
                let (tx, rx) = mpsc::channel(CHANNEL_DEPTH);
                senders.push(Some(tx));
                readers.push(Some(ChannelReader {
                    rx,
                    pending: Bytes::new(),
                }));
            } else {
                senders.push(None);
                readers.push(None);
            }
        }
        let (mut sink, mut stream) = ws.split();
        tokio::spawn(async move {
            while let Some(message) = out_rx.recv().await {
                let close = matches!(message, Message::Close(_));
                if sink.send(message).await.is_err() || close {
                    break;
                }
            }
            let _ = sink.flush().await;
        });
        tokio::spawn(async move {
            while let Some(message) = stream.next().await {
                let Ok(message) = message else {
                    break;
                };
                if matches!(message, Message::Close(_)) {
                    // The peer is done: readers see EOF; keep polling so the close reply goes out.
                    senders.clear();
                    let _ = closed_tx.send(true);
                    continue;
                }
                match decode(message, encoding, v5) {
                    Ok(Some(Frame::Data(ch, data))) => {
                        if let Some(Some(tx)) = senders.get(usize::from(ch))
                            && !data.is_empty()
                        {
                            // A reader that went away just drops its channel's data.
                            let _ = tx.send(data).await;
                        }
                    }
                    Ok(Some(Frame::Close(ch))) => {
                        if let Some(slot) = senders.get_mut(usize::from(ch)) {
                            *slot = None;
                        } else {
                            tracing::debug!(ch, "websocket: close for an unknown channel");
                            break;
                        }
                    }
                    Ok(None) => {}
                    Err(e) => {
                        tracing::debug!(error = %e, "websocket: bad message");
                        if v5 {
                            break;
                        }
                    }
                }
            }
            drop(senders);
            let _ = closed_tx.send(true);
        });
        (
            Mux {
                out: out_tx,
                encoding,
                v5,
                peer_closed: closed_rx,
            },
            readers,
        )
    }

    /// A writer for `channel`. With `close_signal` (v5 only) shutting it down sends CLOSE.
    pub fn writer(&self, channel: u8, close_signal: bool) -> ChannelWriter {
        ChannelWriter {
            out: PollSender::new(self.out.clone()),
            channel,
            encoding: self.encoding,
            close_signal: close_signal && self.v5,
            closed: false,
        }
    }

    /// Sends one message on `channel` (the readiness signal is an empty one).
    pub async fn send(&self, channel: u8, data: &[u8]) -> io::Result<()> {
        self.out
            .send(encode(channel, data, self.encoding))
            .await
            .map_err(|_| io::Error::from(io::ErrorKind::BrokenPipe))
    }

    /// Sends a WebSocket close (`code`, normally 1000) and waits up to `wait` for the peer to
    /// close its side, so that nothing it has yet to read is lost to a TCP reset.
    pub async fn close(&mut self, code: u16, wait: Duration) {
        let frame = CloseFrame {
            code: CloseCode::from(code),
            reason: "".into(),
        };
        let _ = self.out.send(Message::Close(Some(frame))).await;
        let _ = tokio::time::timeout(wait, self.peer_closed.wait_for(|c| *c)).await;
    }

    /// Waits until the peer closed the WebSocket (or it failed).
    pub async fn peer_closed(&mut self) {
        let _ = self.peer_closed.wait_for(|c| *c).await;
    }
}

impl AsyncRead for ChannelReader {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.pending.is_empty() {
            match ready!(self.rx.poll_recv(cx)) {
                Some(data) => self.pending = data,
                None => return Poll::Ready(Ok(())),
            }
        }
        let n = self.pending.len().min(buf.remaining());
        buf.put_slice(&self.pending[..n]);
        self.pending.advance(n);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for ChannelWriter {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.closed {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
        if data.is_empty() {
            return Poll::Ready(Ok(0));
        }
        ready!(self.out.poll_reserve(cx))
            .map_err(|_| io::Error::from(io::ErrorKind::BrokenPipe))?;
        let n = data.len().min(MAX_MESSAGE_DATA);
        let message = encode(self.channel, &data[..n], self.encoding);
        self.out
            .send_item(message)
            .map_err(|_| io::Error::from(io::ErrorKind::BrokenPipe))?;
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.closed {
            return Poll::Ready(Ok(()));
        }
        if self.close_signal {
            ready!(self.out.poll_reserve(cx))
                .map_err(|_| io::Error::from(io::ErrorKind::BrokenPipe))?;
            let message = Message::Binary(vec![STREAM_CLOSE, self.channel].into());
            self.out
                .send_item(message)
                .map_err(|_| io::Error::from(io::ErrorKind::BrokenPipe))?;
        }
        self.closed = true;
        Poll::Ready(Ok(()))
    }
}

/// A WebSocket whose binary messages carry one byte stream (the port-forward tunnel: SPDY
/// frames cut at arbitrary points). Writes become one message each; shutdown sends close 1000;
/// a close 1000 from the peer reads as EOF, any other end as an error.
pub struct WsByteStream<S> {
    ws: WebSocketStream<S>,
    pending: Bytes,
    eof: bool,
}

impl<S> WsByteStream<S> {
    pub fn new(ws: WebSocketStream<S>) -> Self {
        Self {
            ws,
            pending: Bytes::new(),
            eof: false,
        }
    }
}

impl<S: Io> AsyncRead for WsByteStream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            if !self.pending.is_empty() {
                let n = self.pending.len().min(buf.remaining());
                buf.put_slice(&self.pending[..n]);
                self.pending.advance(n);
                return Poll::Ready(Ok(()));
            }
            if self.eof {
                return Poll::Ready(Ok(()));
            }
            match ready!(Pin::new(&mut self.ws).poll_next(cx)) {
                Some(Ok(Message::Binary(data))) => self.pending = data,
                Some(Ok(Message::Close(frame))) => {
                    self.eof = true;
                    let normal = frame.as_ref().is_none_or(|f| f.code == CloseCode::Normal);
                    if !normal {
                        return Poll::Ready(Err(io::Error::new(
                            io::ErrorKind::ConnectionAborted,
                            format!("websocket closed: {frame:?}"),
                        )));
                    }
                }
                Some(Ok(Message::Text(_))) => {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "invalid message type received",
                    )));
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Poll::Ready(Err(io::Error::other(e))),
                None => {
                    self.eof = true;
                    return Poll::Ready(Err(io::ErrorKind::UnexpectedEof.into()));
                }
            }
        }
    }
}

impl<S: Io> AsyncWrite for WsByteStream<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        ready!(Pin::new(&mut self.ws).poll_ready(cx)).map_err(io::Error::other)?;
        let n = data.len().min(MAX_MESSAGE_DATA * 2);
        Pin::new(&mut self.ws)
            .start_send(Message::Binary(Bytes::copy_from_slice(&data[..n])))
            .map_err(io::Error::other)?;
        Poll::Ready(Ok(n))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.ws)
            .poll_flush(cx)
            .map_err(io::Error::other)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match ready!(Pin::new(&mut self.ws).poll_close(cx)) {
            Ok(()) => Poll::Ready(Ok(())),
            // Closing an already closed socket is fine.
            Err(tokio_tungstenite::tungstenite::Error::ConnectionClosed) => Poll::Ready(Ok(())),
            Err(e) => Poll::Ready(Err(io::Error::other(e))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_messages_encode_as_upstream_documents() {
        // wsstream's own examples: "foo\n" on stdin, "\n" on stdout.
        assert_eq!(
            encode(0, b"foo\n", Encoding::Binary),
            Message::Binary(vec![0, 102, 111, 111, 10].into())
        );
        assert_eq!(encode(1, b"\n", Encoding::Base64), Message::text("1Cg=="));
        // The readiness signal: an empty message on stdout.
        assert_eq!(
            encode(1, b"", Encoding::Binary),
            Message::Binary(vec![1].into())
        );
        assert_eq!(encode(1, b"", Encoding::Base64), Message::text("1"));
    }

    #[test]
    fn channel_messages_decode_including_v5_close() {
        let d = |m, e, v5| decode(m, e, v5).unwrap();
        assert_eq!(
            d(
                Message::Binary(vec![2, b'x'].into()),
                Encoding::Binary,
                false
            ),
            Some(Frame::Data(2, Bytes::from_static(b"x")))
        );
        assert_eq!(
            d(Message::text("0Zm9vCg=="), Encoding::Base64, false),
            Some(Frame::Data(0, Bytes::from_static(b"foo\n")))
        );
        assert_eq!(
            d(Message::Binary(vec![255, 0].into()), Encoding::Binary, true),
            Some(Frame::Close(0))
        );
        // Without v5, 255 is just a channel number.
        assert_eq!(
            d(
                Message::Binary(vec![255, 0].into()),
                Encoding::Binary,
                false
            ),
            Some(Frame::Data(255, Bytes::from_static(&[0])))
        );
        assert!(decode(Message::Binary(vec![255].into()), Encoding::Binary, true).is_err());
        assert!(decode(Message::text("1***"), Encoding::Base64, false).is_err());
        assert_eq!(d(Message::Ping(Bytes::new()), Encoding::Binary, true), None);
        assert_eq!(
            d(Message::Binary(Bytes::new()), Encoding::Binary, true),
            None
        );
    }
}
