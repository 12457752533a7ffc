//! SPDY streams as the application holds them: `AsyncRead` + `AsyncWrite`, with half-close.
//!
//! A `Stream` splits into a `RecvStream` and a `SendStream`. Shutting down the send side sends
//! a FIN (`Close()` in spdystream); reading returns EOF once the peer's FIN arrived, and
//! `ConnectionReset` once the peer reset the stream (after what it sent before). Dropping the
//! last send handle finishes the stream like closing a socket: what was written still goes
//! out, then a FIN (`reset` aborts instead); dropping the last receive handle discards
//! further data.
//!
//! Writes are buffered per stream (up to `Config::send_buffer`) and sent by the connection's
//! writer task within the peer's windows; `poll_write` waits when the buffer is full, which is
//! how a slow peer slows the writer down.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, Bytes};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::conn::Error;
use super::frame::{Frame, RstStatus, StreamId};
use super::headers::Headers;
use super::state::{Reset, Shared};

/// A stream: both directions.
pub struct Stream {
    recv: RecvStream,
    send: SendStream,
}

/// The receiving half of a stream.
pub struct RecvStream {
    shared: Arc<Shared>,
    id: StreamId,
    headers: Arc<Headers>,
}

/// The sending half of a stream.
pub struct SendStream {
    shared: Arc<Shared>,
    id: StreamId,
    headers: Arc<Headers>,
}

impl Stream {
    pub(crate) fn new(shared: Arc<Shared>, id: StreamId, headers: Headers) -> Self {
        let headers = Arc::new(headers);
        Self {
            recv: RecvStream {
                shared: shared.clone(),
                id,
                headers: headers.clone(),
            },
            send: SendStream {
                shared,
                id,
                headers,
            },
        }
    }

    /// The stream id.
    pub fn id(&self) -> StreamId {
        self.recv.id
    }

    /// The headers of the SYN_STREAM that opened the stream.
    pub fn headers(&self) -> &Headers {
        &self.recv.headers
    }

    /// Splits into halves that can be used from different tasks.
    pub fn split(self) -> (RecvStream, SendStream) {
        (self.recv, self.send)
    }

    /// Answers a peer-initiated stream with SYN_REPLY (Kubernetes sends empty headers). A
    /// first write replies by itself; a second reply is ignored, as in spdystream.
    pub fn reply(&self, headers: Headers, fin: bool) -> Result<(), Error> {
        self.send.reply(headers, fin)
    }

    /// Waits for the peer's SYN_REPLY to a stream this side opened (Kubernetes clients wait up
    /// to 30 s before using a stream; a Go server drops data that arrives before its reply).
    pub async fn wait_reply(&self, timeout: Duration) -> Result<Headers, Error> {
        wait_reply(&self.send.shared, self.send.id, timeout).await
    }

    /// Resets the stream (RST_STREAM with `status`).
    pub fn reset(&self, status: RstStatus) {
        self.send.reset(status);
    }
}

impl RecvStream {
    /// The stream id.
    pub fn id(&self) -> StreamId {
        self.id
    }

    /// The headers of the SYN_STREAM that opened the stream.
    pub fn headers(&self) -> &Headers {
        &self.headers
    }
}

impl SendStream {
    /// The stream id.
    pub fn id(&self) -> StreamId {
        self.id
    }

    /// The headers of the SYN_STREAM that opened the stream.
    pub fn headers(&self) -> &Headers {
        &self.headers
    }

    /// See [`Stream::reply`].
    pub fn reply(&self, headers: Headers, fin: bool) -> Result<(), Error> {
        let mut st = self.shared.state.lock();
        if let Some(e) = &st.dead {
            return Err(e.clone());
        }
        let id = self.id;
        let Some(s) = st.streams.get_mut(&id) else {
            return Err(Error::Closed);
        };
        if s.local {
            return Err(Error::Protocol(
                "cannot reply to a stream this side opened".into(),
            ));
        }
        if s.replied || s.reset.is_some() {
            return Ok(());
        }
        s.replied = true;
        if fin {
            s.fin_queued = true;
            s.fin_sent = true;
        }
        st.control.push_back(Frame::SynReply {
            stream_id: id,
            fin,
            headers,
        });
        drop(st);
        self.shared.wake_writer.notify_one();
        Ok(())
    }

    /// See [`Stream::reset`].
    pub fn reset(&self, status: RstStatus) {
        self.shared.state.lock().reset_local(self.id, status);
        self.shared.wake_writer.notify_one();
    }

    /// Waits until everything written so far has been handed to the socket (or the stream or
    /// connection failed).
    pub async fn flushed(&self) {
        std::future::poll_fn(|cx| {
            let mut st = self.shared.state.lock();
            let dead = st.dead.is_some();
            match st.streams.get_mut(&self.id) {
                Some(s)
                    if s.reset.is_none()
                        && !dead
                        && (s.send_buffered > 0 || (s.fin_queued && !s.fin_sent)) =>
                {
                    s.write_waker = Some(cx.waker().clone());
                    Poll::Pending
                }
                _ => Poll::Ready(()),
            }
        })
        .await
    }
}

pub(crate) async fn wait_reply(
    shared: &Arc<Shared>,
    id: StreamId,
    timeout: Duration,
) -> Result<Headers, Error> {
    let wait = std::future::poll_fn(|cx| {
        let mut st = shared.state.lock();
        let dead = st.dead.clone();
        let Some(s) = st.streams.get_mut(&id) else {
            return Poll::Ready(Err(Error::Closed));
        };
        if s.replied {
            return Poll::Ready(Ok(s.reply_headers.clone().unwrap_or_default()));
        }
        match s.reset {
            Some(Reset::Remote(status) | Reset::Local(status)) => {
                return Poll::Ready(Err(Error::Reset(id, status)));
            }
            Some(Reset::Lost) => return Poll::Ready(Err(dead.unwrap_or(Error::Closed))),
            None => {}
        }
        if let Some(e) = dead {
            return Poll::Ready(Err(e));
        }
        s.reply_waker = Some(cx.waker().clone());
        Poll::Pending
    });
    tokio::time::timeout(timeout, wait)
        .await
        .unwrap_or(Err(Error::ReplyTimeout(id)))
}

impl AsyncRead for RecvStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let shared = &self.shared;
        let mut st = shared.state.lock();
        let stream_window = shared.config.stream_window;
        let session_window = shared.config.session_window;
        let dead = st.dead.clone();
        let Some(s) = st.streams.get_mut(&self.id) else {
            return Poll::Ready(Ok(()));
        };
        if let Some(chunk) = s.recv_buf.front_mut() {
            let n = chunk.len().min(buf.remaining());
            buf.put_slice(&chunk[..n]);
            chunk.advance(n);
            if chunk.is_empty() {
                s.recv_buf.pop_front();
            }
            s.recv_buffered -= n;
            let mut wake_writer = false;
            if !s.recv_fin && s.reset.is_none() {
                s.recv_unacked = s.recv_unacked.saturating_add(n as u32);
                if s.recv_unacked >= stream_window / 4 {
                    wake_writer = true;
                }
            }
            st.session_recv_buffered -= n;
            st.session_recv_unacked = st.session_recv_unacked.saturating_add(n as u32);
            if wake_writer {
                st.window_updates.insert(self.id);
            }
            let wake_writer = wake_writer || st.session_recv_unacked >= session_window / 4;
            drop(st);
            if wake_writer {
                shared.wake_writer.notify_one();
            }
            shared.wake_reader.notify_one();
            return Poll::Ready(Ok(()));
        }
        if s.recv_fin {
            return Poll::Ready(Ok(()));
        }
        match s.reset {
            Some(Reset::Remote(status) | Reset::Local(status)) => {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::ConnectionReset,
                    Error::Reset(self.id, status),
                )));
            }
            Some(Reset::Lost) => {
                let e = dead.unwrap_or(Error::Closed);
                return Poll::Ready(Err(io::Error::new(io::ErrorKind::UnexpectedEof, e)));
            }
            None => {}
        }
        if let Some(e) = dead {
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::UnexpectedEof, e)));
        }
        s.read_waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

impl AsyncWrite for SendStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let shared = &self.shared;
        let mut st = shared.state.lock();
        let dead = st.dead.clone();
        let id = self.id;
        let Some(s) = st.streams.get_mut(&id) else {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        };
        match s.reset {
            Some(Reset::Remote(status) | Reset::Local(status)) => {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::ConnectionReset,
                    Error::Reset(id, status),
                )));
            }
            Some(Reset::Lost) => {
                let e = dead.unwrap_or(Error::Closed);
                return Poll::Ready(Err(io::Error::new(io::ErrorKind::BrokenPipe, e)));
            }
            None => {}
        }
        if s.fin_queued {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "write on a stream closed for writing",
            )));
        }
        if let Some(e) = dead {
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::BrokenPipe, e)));
        }
        if data.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let room = shared.config.send_buffer.saturating_sub(s.send_buffered);
        if room == 0 {
            s.write_waker = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let n = room.min(data.len());
        s.send_buf.push_back(Bytes::copy_from_slice(&data[..n]));
        s.send_buffered += n;
        let reply = !s.local && !s.replied;
        if reply {
            s.replied = true;
            st.control.push_back(Frame::SynReply {
                stream_id: id,
                fin: false,
                headers: Headers::new(),
            });
        }
        st.mark_sendable(id);
        drop(st);
        shared.wake_writer.notify_one();
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Data is queued on the connection; the writer task sends it as windows allow.
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let shared = &self.shared;
        let mut st = shared.state.lock();
        let id = self.id;
        let Some(s) = st.streams.get_mut(&id) else {
            return Poll::Ready(Ok(()));
        };
        if s.fin_queued || s.reset.is_some() {
            return Poll::Ready(Ok(()));
        }
        s.fin_queued = true;
        if !s.local && !s.replied {
            s.replied = true;
            st.control.push_back(Frame::SynReply {
                stream_id: id,
                fin: false,
                headers: Headers::new(),
            });
        }
        st.mark_sendable(id);
        drop(st);
        shared.wake_writer.notify_one();
        Poll::Ready(Ok(()))
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.recv).poll_read(cx, buf)
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.send).poll_write(cx, data)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.send).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.send).poll_shutdown(cx)
    }
}

impl Drop for RecvStream {
    fn drop(&mut self) {
        let mut st = self.shared.state.lock();
        if let Some(s) = st.streams.get_mut(&self.id) {
            s.recv_handles -= 1;
            if s.recv_handles == 0 {
                st.release_recv(self.id);
                st.maybe_remove(self.id);
            }
        }
        drop(st);
        self.shared.wake_writer.notify_one();
        self.shared.wake_reader.notify_one();
    }
}

impl Drop for SendStream {
    fn drop(&mut self) {
        let mut st = self.shared.state.lock();
        let alive = st.dead.is_none();
        if let Some(s) = st.streams.get_mut(&self.id) {
            s.send_handles -= 1;
            if s.send_handles == 0 {
                if !s.fin_queued && s.reset.is_none() && alive {
                    s.fin_queued = true;
                    if !s.local && !s.replied {
                        s.replied = true;
                        st.control.push_back(Frame::SynReply {
                            stream_id: self.id,
                            fin: false,
                            headers: Headers::new(),
                        });
                    }
                    st.mark_sendable(self.id);
                } else {
                    st.maybe_remove(self.id);
                }
            }
        }
        drop(st);
        self.shared.wake_writer.notify_one();
    }
}
