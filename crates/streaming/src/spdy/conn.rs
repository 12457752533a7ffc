//! A SPDY/3.1 connection over any `AsyncRead + AsyncWrite`, client or server.
//!
//! `Connection::new` spawns a reader and a writer task and returns a handle (to open streams,
//! ping, close) and an `Incoming` (streams the peer opens). The behaviour follows what Go's
//! `moby/spdystream` — the other end in every Kubernetes deployment — does and expects:
//!
//! - Stream ids: client odd from 1, server even from 2; ping ids likewise. A PING with the
//!   peer's parity is echoed; one with ours answers `ping()`.
//! - A peer-initiated stream is answered with SYN_REPLY (`Stream::reply`, or implicitly by
//!   the first write): Go drops data on a stream it opened until the reply arrives, and
//!   client-go waits 30 s for it.
//! - Flow control (SPDY/3.1 §2.6.8): we announce our stream window in SETTINGS and raise the
//!   session window with WINDOW_UPDATE, and acknowledge bytes as the application reads them, so
//!   a peer that honours windows never overruns our buffers. spdystream neither sends
//!   WINDOW_UPDATE nor honours windows (it parses and ignores both frames), so our sends obey
//!   the peer's windows only once the peer has shown it does flow control (sent SETTINGS or
//!   WINDOW_UPDATE), and a peer that overruns a window is slowed by no longer reading the
//!   socket until the application catches up — exactly spdystream's own back-pressure.
//!   Memory per connection is thus bounded by the windows, the stream count and one frame.
//! - Close: `close()` sends a FIN on every stream still open for writing, flushes, sends
//!   GOAWAY (after which spdystream reads nothing more) and shuts the socket's write side, then
//!   keeps reading until the peer closes or `Config::close_linger` passes, so the kernel never
//!   resets a socket with unread bytes and truncates what the peer has yet to read.

use std::future::poll_fn;
use std::io;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use thiserror::Error;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{Notify, oneshot};

use super::frame::{self, Frame, FrameError, GoAwayStatus, Limits, RstStatus, Setting, StreamId};
use super::frame::{SETTINGS_INITIAL_WINDOW_SIZE, SETTINGS_MAX_CONCURRENT_STREAMS};
use super::headers::Headers;
use super::state::{MAX_CONTROL_QUEUE, Reset, Shared, State, StreamState};
use super::stream::{self, Stream};
use super::zlib::{HeaderCompressor, HeaderDecompressor};

/// Which end of the connection this is (decides stream and ping id parity).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Client,
    Server,
}

/// Tunables; the defaults suit Kubernetes streaming.
#[derive(Clone, Debug)]
pub struct Config {
    /// Our receive window per stream, announced in SETTINGS; also the most a stream buffers.
    pub stream_window: u32,
    /// Our session receive window; also the most all streams buffer together.
    pub session_window: u32,
    /// How much one stream buffers for sending before writes wait.
    pub send_buffer: usize,
    /// Largest DATA frame we write (client-go copies in 32 KiB buffers too).
    pub max_data_frame: usize,
    /// Peer-initiated streams held at once; more are refused (RST REFUSED_STREAM).
    pub max_concurrent_streams: u32,
    /// What a peer's frames may make the decoder hold.
    pub limits: Limits,
    /// Send a PING this often (client-go: 5 s for exec through the API server, 10 s for the
    /// port-forward tunnel); `None` sends none.
    pub ping_interval: Option<Duration>,
    /// After our GOAWAY, how long we wait for the peer to close before dropping the socket.
    pub close_linger: Duration,
    /// Close the connection after this long without a frame in either direction (the
    /// kubelet's `streamingConnectionIdleTimeout`, 4 h); `None` never.
    pub idle_timeout: Option<Duration>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            stream_window: 256 << 10,
            session_window: 1 << 20,
            send_buffer: 64 << 10,
            max_data_frame: 32 << 10,
            max_concurrent_streams: 1024,
            limits: Limits::default(),
            ping_interval: None,
            close_linger: Duration::from_secs(15),
            idle_timeout: None,
        }
    }
}

/// Connection-level failures, as every stream and waiter sees them.
#[derive(Clone, Debug, Error)]
pub enum Error {
    /// The connection has ended.
    #[error("spdy connection closed")]
    Closed,
    /// The connection is closing (GOAWAY sent or received): no new streams.
    #[error("spdy connection is going away")]
    GoingAway,
    /// All 2^31 stream ids of this side are used.
    #[error("spdy stream ids exhausted")]
    IdsExhausted,
    /// The stream was reset.
    #[error("spdy stream {0} was reset: {1:?}")]
    Reset(StreamId, RstStatus),
    /// The peer did not answer a new stream in time.
    #[error("timed out waiting for the reply to spdy stream {0}")]
    ReplyTimeout(StreamId),
    /// The peer broke the protocol.
    #[error("spdy protocol error: {0}")]
    Protocol(String),
    /// The transport failed.
    #[error("spdy transport error: {0}")]
    Io(Arc<io::Error>),
    /// No frame moved for `Config::idle_timeout`.
    #[error("spdy connection idle for too long")]
    IdleTimeout,
}

/// A snapshot of what a connection holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stats {
    /// Streams tracked.
    pub streams: usize,
    /// Bytes received and not yet read by the application.
    pub recv_buffered: usize,
    /// Bytes written by the application and not yet sent.
    pub send_buffered: usize,
    /// Control frames waiting for the writer.
    pub control_queued: usize,
}

/// A handle on a connection. Clones share it; dropping the last one closes it gracefully.
pub struct Connection {
    shared: Arc<Shared>,
}

/// Streams the peer opens, in the order it opened them.
pub struct Incoming {
    shared: Arc<Shared>,
}

impl Connection {
    /// Starts a connection over `io` (already upgraded) and spawns its tasks.
    pub fn new<T>(io: T, role: Role, config: Config) -> (Connection, Incoming)
    where
        T: AsyncRead + AsyncWrite + Send + 'static,
    {
        let shared = Arc::new(Shared {
            state: parking_lot::Mutex::new(State::new(role, &config)),
            wake_writer: Notify::new(),
            wake_reader: Notify::new(),
            finished: Notify::new(),
            config,
        });
        {
            let mut st = shared.state.lock();
            // Announce our windows; spdystream parses and ignores both frames.
            st.control.push_back(Frame::Settings {
                clear: false,
                entries: vec![
                    Setting {
                        flags: 0,
                        id: SETTINGS_MAX_CONCURRENT_STREAMS,
                        value: shared.config.max_concurrent_streams,
                    },
                    Setting {
                        flags: 0,
                        id: SETTINGS_INITIAL_WINDOW_SIZE,
                        value: shared.config.stream_window,
                    },
                ],
            });
            if shared.config.session_window > 65536 {
                st.control.push_back(Frame::WindowUpdate {
                    stream_id: 0,
                    delta: shared.config.session_window - 65536,
                });
            }
        }
        let (reader, writer) = tokio::io::split(io);
        tokio::spawn(read_loop(shared.clone(), reader));
        tokio::spawn(write_loop(shared.clone(), writer));
        (
            Connection {
                shared: shared.clone(),
            },
            Incoming { shared },
        )
    }

    /// Opens a stream (SYN_STREAM) with `headers`; `fin` opens it half-closed. The stream can
    /// be written at once, but a Go peer drops data sent before its reply: use
    /// [`Stream::wait_reply`] or [`Connection::open_and_wait`].
    pub fn open(&self, headers: Headers, fin: bool) -> Result<Stream, Error> {
        let mut st = self.shared.state.lock();
        if let Some(e) = st.unusable() {
            return Err(e);
        }
        let id = st.next_local_id;
        if id > 0x7fff_ffff {
            return Err(Error::IdsExhausted);
        }
        st.next_local_id += 2;
        let mut s = StreamState::new(true, st.peer_initial_window);
        if fin {
            s.fin_queued = true;
            s.fin_sent = true;
        }
        st.streams.insert(id, s);
        st.control.push_back(Frame::SynStream {
            stream_id: id,
            associated_to: 0,
            priority: 0,
            fin,
            unidirectional: false,
            headers: headers.clone(),
        });
        drop(st);
        self.shared.wake_writer.notify_one();
        Ok(Stream::new(self.shared.clone(), id, headers))
    }

    /// Opens a stream and waits for its reply, as client-go's `CreateStream` does.
    pub async fn open_and_wait(
        &self,
        headers: Headers,
        timeout: Duration,
    ) -> Result<Stream, Error> {
        let stream = self.open(headers, false)?;
        stream::wait_reply(&self.shared, stream.id(), timeout).await?;
        Ok(stream)
    }

    /// Sends a PING and waits for its echo.
    pub async fn ping(&self) -> Result<Duration, Error> {
        let (tx, rx) = oneshot::channel();
        {
            let mut st = self.shared.state.lock();
            if let Some(e) = &st.dead {
                return Err(e.clone());
            }
            let id = st.next_ping_id;
            st.next_ping_id = if id > 0x7fff_fffd { id % 2 + 1 } else { id + 2 };
            st.pings.insert(id, tx);
            st.control.push_back(Frame::Ping { id });
        }
        self.shared.wake_writer.notify_one();
        let start = Instant::now();
        rx.await.map_err(|_| self.error())?;
        Ok(start.elapsed())
    }

    /// Closes gracefully (see the module docs). Streams keep what they have received.
    pub fn close(&self) {
        begin_close(&self.shared);
    }

    /// Waits until the connection has ended.
    pub async fn closed(&self) {
        loop {
            let notified = self.shared.finished.notified();
            if self.shared.state.lock().dead.is_some() {
                return;
            }
            notified.await;
        }
    }

    /// What the connection holds right now (for tests and metrics).
    pub fn stats(&self) -> Stats {
        let st = self.shared.state.lock();
        Stats {
            streams: st.streams.len(),
            recv_buffered: st.session_recv_buffered,
            send_buffered: st.streams.values().map(|s| s.send_buffered).sum(),
            control_queued: st.control.len(),
        }
    }

    /// Whether the connection has ended.
    pub fn is_closed(&self) -> bool {
        self.shared.state.lock().dead.is_some()
    }

    fn error(&self) -> Error {
        self.shared
            .state
            .lock()
            .dead
            .clone()
            .unwrap_or(Error::Closed)
    }
}

impl Clone for Connection {
    fn clone(&self) -> Self {
        self.shared.state.lock().handles += 1;
        Connection {
            shared: self.shared.clone(),
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        let last = {
            let mut st = self.shared.state.lock();
            st.handles -= 1;
            st.handles == 0
        };
        if last {
            begin_close(&self.shared);
        }
    }
}

impl Incoming {
    /// The next stream the peer opened; `None` once the connection is closing or closed.
    pub async fn accept(&mut self) -> Option<Stream> {
        poll_fn(|cx| {
            let mut st = self.shared.state.lock();
            while let Some((id, headers)) = st.accept_queue.pop_front() {
                if let Some(s) = st.streams.get_mut(&id)
                    && s.in_accept_queue
                {
                    s.in_accept_queue = false;
                    return Poll::Ready(Some(Stream::new(self.shared.clone(), id, headers)));
                }
            }
            if st.dead.is_some() || st.closing || st.goaway_received {
                return Poll::Ready(None);
            }
            st.accept_waker = Some(cx.waker().clone());
            Poll::Pending
        })
        .await
    }
}

impl Drop for Incoming {
    fn drop(&mut self) {
        let mut st = self.shared.state.lock();
        st.incoming_open = false;
        while let Some((id, _)) = st.accept_queue.pop_front() {
            if let Some(s) = st.streams.get_mut(&id) {
                s.in_accept_queue = false;
                s.recv_handles = 0;
                s.send_handles = 0;
            }
            st.reset_local(id, RstStatus::RefusedStream);
        }
        drop(st);
        self.shared.wake_writer.notify_one();
    }
}

fn begin_close(shared: &Shared) {
    let mut st = shared.state.lock();
    start_closing(&mut st);
    drop(st);
    shared.wake_writer.notify_one();
}

/// FINs every stream still open for writing; the writer sends GOAWAY once all is flushed.
fn start_closing(st: &mut State) {
    if st.closing {
        return;
    }
    st.closing = true;
    let ids: Vec<StreamId> = st.streams.keys().copied().collect();
    for id in ids {
        let Some(s) = st.streams.get_mut(&id) else {
            continue;
        };
        if s.fin_queued || s.reset.is_some() {
            continue;
        }
        if s.in_accept_queue {
            // Never seen by the application: refuse rather than answer.
            st.reset_local(id, RstStatus::RefusedStream);
            continue;
        }
        s.fin_queued = true;
        if !s.local && !s.replied {
            // A Go peer ignores a FIN on a stream it has no reply for.
            s.replied = true;
            st.control.push_back(Frame::SynReply {
                stream_id: id,
                fin: false,
                headers: Headers::new(),
            });
        }
        st.mark_sendable(id);
    }
    if let Some(w) = st.accept_waker.take() {
        w.wake();
    }
}

fn finish_if_done(shared: &Shared, st: &mut State) {
    if st.reader_done && st.writer_done {
        st.kill(Error::Closed);
        shared.finished.notify_waiters();
    }
}

async fn read_loop<R: AsyncRead + Unpin>(shared: Arc<Shared>, mut io: R) {
    let mut buf = BytesMut::with_capacity(16 << 10);
    let mut inflate = HeaderDecompressor::new();
    let limits = shared.config.limits;
    let result: Result<(), Error> = async {
        loop {
            loop {
                match frame::decode(&mut buf, &mut inflate, &limits) {
                    Ok(Some(frame)) => handle_frame(&shared, frame).await?,
                    Ok(None) => break,
                    Err(FrameError::Headers { stream_id, source }) => {
                        tracing::debug!(stream_id, %source, "spdy: invalid header block");
                        let mut st = shared.state.lock();
                        st.control.push_back(Frame::RstStream {
                            stream_id,
                            status: RstStatus::ProtocolError,
                        });
                        drop(st);
                        shared.wake_writer.notify_one();
                    }
                    Err(e) => return Err(Error::Protocol(e.to_string())),
                }
            }
            if buf.capacity() - buf.len() < 4096 {
                buf.reserve(16 << 10);
            }
            let read = io.read_buf(&mut buf);
            let n = match (read_deadline(&shared), shared.config.idle_timeout) {
                (Some(linger), _) => match tokio::time::timeout(linger, read).await {
                    Ok(n) => n,
                    Err(_) => return Ok(()),
                },
                (None, Some(idle)) => match tokio::time::timeout(idle, read).await {
                    Ok(n) => n,
                    Err(_) => return Err(Error::IdleTimeout),
                },
                (None, None) => read.await,
            }
            .map_err(|e| Error::Io(Arc::new(e)))?;
            if n == 0 {
                return Ok(());
            }
        }
    }
    .await;
    let mut st = shared.state.lock();
    match result {
        Ok(()) => {}
        Err(Error::Protocol(msg)) => {
            tracing::debug!(%msg, "spdy: closing the connection on a protocol error");
            // Tell the peer why, then stop; nothing more is read from it.
            let last_good_stream_id = st.last_peer_id;
            st.control.push_back(Frame::GoAway {
                last_good_stream_id,
                status: GoAwayStatus::ProtocolError,
            });
            st.goaway_sent = true;
            st.kill(Error::Protocol(msg));
        }
        Err(e) => st.kill(e),
    }
    st.reader_done = true;
    // Nothing more arrives: streams the peer had not finished fail after what they hold.
    for s in st.streams.values_mut() {
        if !s.recv_fin && s.reset.is_none() {
            s.reset = Some(Reset::Lost);
            s.wake_all();
        }
    }
    start_closing(&mut st);
    finish_if_done(&shared, &mut st);
    drop(st);
    shared.wake_writer.notify_one();
}

/// While the writer has finished (GOAWAY out), reads wait at most the linger time.
fn read_deadline(shared: &Shared) -> Option<Duration> {
    let st = shared.state.lock();
    st.writer_done.then_some(shared.config.close_linger)
}

async fn handle_frame(shared: &Shared, frame: Frame) -> Result<(), Error> {
    // Back-pressure: a peer that makes us queue replies while not reading them waits.
    wait_reader(shared, |st| st.control.len() < MAX_CONTROL_QUEUE).await;
    let mut st = shared.state.lock();
    match frame {
        Frame::SynStream {
            stream_id,
            fin,
            unidirectional,
            headers,
            ..
        } => {
            if st.is_local_id(stream_id) || stream_id <= st.last_peer_id {
                return Err(Error::Protocol(format!(
                    "invalid or reused stream id {stream_id}"
                )));
            }
            st.last_peer_id = stream_id;
            let refuse = st.closing
                || st.goaway_sent
                || !st.incoming_open
                || st.peer_streams >= shared.config.max_concurrent_streams as usize;
            if refuse {
                st.control.push_back(Frame::RstStream {
                    stream_id,
                    status: RstStatus::RefusedStream,
                });
            } else {
                let mut s = StreamState::new(false, st.peer_initial_window);
                s.recv_fin = fin;
                if unidirectional {
                    s.fin_queued = true;
                    s.fin_sent = true;
                }
                s.in_accept_queue = true;
                st.streams.insert(stream_id, s);
                st.peer_streams += 1;
                st.accept_queue.push_back((stream_id, headers));
                if let Some(w) = st.accept_waker.take() {
                    w.wake();
                }
            }
        }
        Frame::SynReply {
            stream_id,
            fin,
            headers,
        } => {
            let duplicate = match st.streams.get_mut(&stream_id) {
                Some(s) if s.local && !s.replied => {
                    s.replied = true;
                    s.reply_headers = Some(headers);
                    s.recv_fin |= fin;
                    s.wake_all();
                    false
                }
                Some(_) => true,
                None => false,
            };
            if duplicate {
                st.reset_local(stream_id, RstStatus::StreamInUse);
            }
        }
        Frame::RstStream { stream_id, status } => {
            if let Some(s) = st.streams.get_mut(&stream_id) {
                if s.reset.is_none() {
                    s.reset = Some(Reset::Remote(status));
                    s.send_buf.clear();
                    s.send_buffered = 0;
                }
                s.wake_all();
                st.maybe_remove(stream_id);
            }
        }
        Frame::Settings { entries, .. } => {
            st.peer_flow_control = true;
            for e in entries {
                if e.id == SETTINGS_INITIAL_WINDOW_SIZE {
                    let new = i64::from(e.value.min(0x7fff_ffff));
                    let delta = new - st.peer_initial_window;
                    st.peer_initial_window = new;
                    for s in st.streams.values_mut() {
                        s.send_window += delta;
                    }
                    requeue_blocked(&mut st);
                }
            }
        }
        Frame::Ping { id } => {
            if st.is_local_id(id) {
                if let Some(tx) = st.pings.remove(&id) {
                    let _ = tx.send(());
                }
            } else {
                st.control.push_back(Frame::Ping { id });
            }
        }
        Frame::GoAway {
            last_good_stream_id,
            ..
        } => {
            st.goaway_received = true;
            // Streams we opened past the peer's last good one were never seen by it.
            let refused: Vec<StreamId> = st
                .streams
                .iter()
                .filter(|(id, s)| s.local && **id > last_good_stream_id && !s.replied)
                .map(|(id, _)| *id)
                .collect();
            for id in refused {
                if let Some(s) = st.streams.get_mut(&id) {
                    s.reset = Some(Reset::Remote(RstStatus::RefusedStream));
                    s.wake_all();
                }
                st.maybe_remove(id);
            }
            start_closing(&mut st);
        }
        Frame::Headers { stream_id, fin, .. } => {
            if let Some(s) = st.streams.get_mut(&stream_id)
                && fin
            {
                s.recv_fin = true;
                s.wake_all();
            }
        }
        Frame::WindowUpdate { stream_id, delta } => {
            st.peer_flow_control = true;
            if stream_id == 0 {
                st.session_send_window += i64::from(delta);
                if st.session_send_window > 0x7fff_ffff {
                    return Err(Error::Protocol("session window overflow".into()));
                }
                requeue_blocked(&mut st);
            } else if let Some(s) = st.streams.get_mut(&stream_id) {
                s.send_window += i64::from(delta);
                if s.send_window > 0x7fff_ffff {
                    st.reset_local(stream_id, RstStatus::FlowControlError);
                } else if !s.send_buf.is_empty() || (s.fin_queued && !s.fin_sent) {
                    st.mark_sendable(stream_id);
                }
            }
        }
        Frame::Data {
            stream_id,
            fin,
            data,
        } => {
            drop(st);
            return handle_data(shared, stream_id, fin, data).await;
        }
        Frame::Unknown { frame_type } => {
            tracing::debug!(frame_type, "spdy: ignoring an unknown control frame");
        }
    }
    drop(st);
    shared.wake_writer.notify_one();
    Ok(())
}

fn requeue_blocked(st: &mut State) {
    let blocked: Vec<StreamId> = st
        .streams
        .iter()
        .filter(|(_, s)| !s.send_buf.is_empty() || (s.fin_queued && !s.fin_sent))
        .map(|(id, _)| *id)
        .collect();
    for id in blocked {
        st.mark_sendable(id);
    }
}

async fn handle_data(
    shared: &Shared,
    id: StreamId,
    fin: bool,
    data: bytes::Bytes,
) -> Result<(), Error> {
    let n = data.len();
    let stream_cap = shared.config.stream_window as usize;
    let session_cap = shared.config.session_window as usize;
    // Wait until the stream and the session have room, or the data has nowhere to go.
    let fits = move |st: &State| match st.streams.get(&id) {
        Some(s) if s.reset.is_none() && !s.recv_fin && s.recv_handles > 0 => {
            (s.recv_buffered == 0 || s.recv_buffered + n <= stream_cap)
                && (st.session_recv_buffered == 0 || st.session_recv_buffered + n <= session_cap)
        }
        _ => true,
    };
    // Once our side is closed (GOAWAY out) or dead, nobody waits for more: drop what has no room.
    wait_reader(shared, |st| fits(st) || st.writer_done || st.dead.is_some()).await;
    let mut st = shared.state.lock();
    let room = fits(&st);
    match st.streams.get_mut(&id) {
        Some(s) if s.reset.is_none() && !s.recv_fin && s.recv_handles > 0 && room => {
            if n > 0 {
                s.recv_buf.push_back(data);
                s.recv_buffered += n;
            }
            s.recv_fin = fin;
            s.wake_all();
            st.session_recv_buffered += n;
        }
        Some(s) => {
            // Reset, detached, finished or out of room: discard, keeping the session window.
            let already_closed = s.recv_fin && s.reset.is_none();
            if !s.recv_fin && fin {
                s.recv_fin = true;
                s.wake_all();
            }
            st.session_recv_unacked = st.session_recv_unacked.saturating_add(n as u32);
            if already_closed {
                st.reset_local(id, RstStatus::StreamAlreadyClosed);
            }
        }
        None => {
            st.session_recv_unacked = st.session_recv_unacked.saturating_add(n as u32);
        }
    }
    drop(st);
    shared.wake_writer.notify_one();
    Ok(())
}

/// Waits (as the reader task) until `ready` holds.
async fn wait_reader(shared: &Shared, ready: impl Fn(&State) -> bool) {
    loop {
        let notified = shared.wake_reader.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if ready(&shared.state.lock()) {
            return;
        }
        notified.await;
    }
}

async fn write_loop<W: AsyncWrite + Unpin>(shared: Arc<Shared>, mut io: W) {
    let result = write_frames(&shared, &mut io).await;
    let _ = io.shutdown().await;
    let mut st = shared.state.lock();
    if let Err(e) = result {
        st.kill(e);
    }
    st.writer_done = true;
    finish_if_done(&shared, &mut st);
    drop(st);
    // The reader may be waiting for room that will never come, or must start lingering.
    shared.wake_reader.notify_one();
}

async fn write_frames<W: AsyncWrite + Unpin>(shared: &Shared, io: &mut W) -> Result<(), Error> {
    let mut deflate = HeaderCompressor::new().map_err(|e| Error::Protocol(e.to_string()))?;
    let mut out = BytesMut::with_capacity(64 << 10);
    let mut frames = Vec::new();
    let mut pings = shared.config.ping_interval.map(|every| {
        let mut interval = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        interval
    });
    loop {
        let notified = shared.wake_writer.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let done = {
            let mut st = shared.state.lock();
            collect(shared, &mut st, &mut frames)
        };
        for frame in frames.drain(..) {
            frame::encode(&frame, &mut deflate, &mut out)
                .map_err(|e| Error::Protocol(e.to_string()))?;
        }
        if !out.is_empty() {
            shared.wake_reader.notify_one();
            io.write_all(&out)
                .await
                .map_err(|e| Error::Io(Arc::new(e)))?;
            io.flush().await.map_err(|e| Error::Io(Arc::new(e)))?;
            out.clear();
            continue;
        }
        if done {
            return Ok(());
        }
        match &mut pings {
            Some(interval) => {
                tokio::select! {
                    _ = notified => {}
                    _ = interval.tick() => {
                        let mut st = shared.state.lock();
                        let id = st.next_ping_id;
                        st.next_ping_id = if id > 0x7fff_fffd { id % 2 + 1 } else { id + 2 };
                        st.control.push_back(Frame::Ping { id });
                    }
                }
            }
            None => notified.await,
        }
    }
}

/// Takes what should be written next, in wire order. Returns whether the writer is done.
fn collect(shared: &Shared, st: &mut State, frames: &mut Vec<Frame>) -> bool {
    if st.dead.is_some() {
        // A protocol error queued a GOAWAY before killing the connection: send that only.
        frames.extend(
            st.control
                .drain(..)
                .filter(|f| matches!(f, Frame::GoAway { .. })),
        );
        return frames.is_empty();
    }
    if st.goaway_sent {
        frames.extend(st.control.drain(..));
        return frames.is_empty();
    }
    frames.extend(st.control.drain(..));

    // Acknowledge what the application consumed.
    let quarter_session = shared.config.session_window / 4;
    if st.session_recv_unacked > 0 && (st.session_recv_unacked >= quarter_session || st.closing) {
        frames.push(Frame::WindowUpdate {
            stream_id: 0,
            delta: st.session_recv_unacked,
        });
        st.session_recv_unacked = 0;
    }
    let updates: Vec<StreamId> = st.window_updates.drain().collect();
    for id in updates {
        if let Some(s) = st.streams.get_mut(&id)
            && !s.recv_fin
            && s.reset.is_none()
            && s.recv_unacked > 0
        {
            frames.push(Frame::WindowUpdate {
                stream_id: id,
                delta: s.recv_unacked,
            });
            s.recv_unacked = 0;
        }
    }

    // Data, round robin, within the peer's windows when it does flow control.
    let max_frame = shared.config.max_data_frame.max(1);
    let mut budget = 256usize << 10;
    let rounds = st.sendable.len();
    for _ in 0..rounds {
        let Some(id) = st.sendable.pop_front() else {
            break;
        };
        let enforce = st.peer_flow_control;
        let session_window = st.session_send_window;
        let Some(s) = st.streams.get_mut(&id) else {
            continue;
        };
        s.in_sendable = false;
        if s.reset.is_some() {
            continue;
        }
        let mut sent = 0usize;
        let mut allowance = if enforce {
            s.send_window.min(session_window).max(0) as usize
        } else {
            usize::MAX
        };
        while budget > 0 && allowance > 0 {
            let Some(chunk) = s.send_buf.front_mut() else {
                break;
            };
            let take = chunk.len().min(max_frame).min(allowance).min(budget);
            let data = chunk.split_to(take);
            if chunk.is_empty() {
                s.send_buf.pop_front();
            }
            s.send_buffered -= take;
            allowance -= take;
            budget -= take;
            sent += take;
            let fin = s.send_buf.is_empty() && s.fin_queued && !s.fin_sent;
            if fin {
                s.fin_sent = true;
            }
            frames.push(Frame::Data {
                stream_id: id,
                fin,
                data,
            });
        }
        if s.send_buf.is_empty() && s.fin_queued && !s.fin_sent {
            s.fin_sent = true;
            frames.push(Frame::Data {
                stream_id: id,
                fin: true,
                data: bytes::Bytes::new(),
            });
        }
        if sent > 0 {
            s.send_window -= sent as i64;
            if let Some(w) = s.write_waker.take() {
                w.wake();
            }
        }
        let more = !s.send_buf.is_empty();
        let fin_done = s.fin_sent;
        if enforce {
            st.session_send_window -= sent as i64;
        }
        if more && (allowance > 0 || !enforce) {
            // Out of budget this round: go to the back of the line.
            st.mark_sendable(id);
        }
        if fin_done {
            if let Some(s) = st.streams.get_mut(&id)
                && let Some(w) = s.write_waker.take()
            {
                w.wake();
            }
            st.maybe_remove(id);
        }
    }

    // Everything flushed after a close: GOAWAY, then the writer is done.
    if st.closing && !st.goaway_sent && st.sendable.is_empty() && st.all_flushed() {
        frames.push(Frame::GoAway {
            last_good_stream_id: st.last_peer_id,
            status: GoAwayStatus::Ok,
        });
        st.goaway_sent = true;
    }
    frames.is_empty() && st.goaway_sent
}

#[cfg(test)]
#[path = "conn_tests.rs"]
mod tests;
