//! The state one SPDY connection shares between its reader task, its writer task and the
//! stream handles the application holds.
//!
//! Everything sits behind one mutex (frames are handled in microseconds; the socket I/O is
//! outside the lock). The reader turns frames into state changes and wakes the handles; the
//! handles queue data and control frames and wake the writer; the writer encodes in wire order.

use std::collections::{HashMap, HashSet, VecDeque};
use std::task::Waker;

use bytes::Bytes;
use tokio::sync::{Notify, oneshot};

use super::conn::{Config, Error, Role};
use super::frame::{Frame, RstStatus, StreamId};
use super::headers::Headers;

/// The writer sends at most this many control frames the reader produced before the reader
/// waits: a peer flooding PINGs or invalid streams while not reading cannot grow the queue.
pub(crate) const MAX_CONTROL_QUEUE: usize = 1024;

/// The state shared by every part of a connection.
pub(crate) struct Shared {
    pub(crate) state: parking_lot::Mutex<State>,
    /// Wakes the writer task: frames or data are waiting.
    pub(crate) wake_writer: Notify,
    /// Wakes the reader task when it waits for buffer space or a shorter control queue.
    pub(crate) wake_reader: Notify,
    /// Signalled once the connection has ended.
    pub(crate) finished: Notify,
    pub(crate) config: Config,
}

/// Who reset a stream and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reset {
    Local(RstStatus),
    Remote(RstStatus),
    /// The connection ended before the peer finished the stream.
    Lost,
}

pub(crate) struct State {
    pub(crate) role: Role,
    pub(crate) next_local_id: StreamId,
    pub(crate) last_peer_id: StreamId,
    pub(crate) streams: HashMap<StreamId, StreamState>,
    /// Control frames in the order they must be written, ahead of data.
    pub(crate) control: VecDeque<Frame>,
    /// Streams with data or a FIN to send, in round-robin order.
    pub(crate) sendable: VecDeque<StreamId>,
    /// Streams whose consumed bytes should be acknowledged with a WINDOW_UPDATE.
    pub(crate) window_updates: HashSet<StreamId>,

    /// Whether the peer does flow control (it sent SETTINGS or WINDOW_UPDATE). Go's
    /// spdystream does neither and honours no windows, so windows bind only peers that do.
    pub(crate) peer_flow_control: bool,
    pub(crate) peer_initial_window: i64,
    pub(crate) session_send_window: i64,
    /// Bytes held in stream buffers, not yet read by the application.
    pub(crate) session_recv_buffered: usize,
    /// Bytes read or discarded, not yet acknowledged to the peer.
    pub(crate) session_recv_unacked: u32,

    /// Peer-initiated streams waiting for `Incoming::accept`, with their headers.
    pub(crate) accept_queue: VecDeque<(StreamId, Headers)>,
    pub(crate) accept_waker: Option<Waker>,
    pub(crate) incoming_open: bool,
    pub(crate) peer_streams: usize,

    pub(crate) next_ping_id: u32,
    pub(crate) pings: HashMap<u32, oneshot::Sender<()>>,

    /// `Connection` handles alive; the last one dropped closes the connection.
    pub(crate) handles: usize,
    /// A graceful close was asked (or the peer sent GOAWAY or closed).
    pub(crate) closing: bool,
    pub(crate) goaway_sent: bool,
    pub(crate) goaway_received: bool,
    pub(crate) reader_done: bool,
    pub(crate) writer_done: bool,
    /// Set once the connection can carry nothing more; every operation then fails with it.
    pub(crate) dead: Option<Error>,
}

pub(crate) struct StreamState {
    pub(crate) local: bool,
    pub(crate) recv_handles: usize,
    pub(crate) send_handles: usize,
    pub(crate) in_accept_queue: bool,

    pub(crate) recv_buf: VecDeque<Bytes>,
    pub(crate) recv_buffered: usize,
    pub(crate) recv_fin: bool,
    pub(crate) recv_unacked: u32,
    pub(crate) read_waker: Option<Waker>,

    pub(crate) send_buf: VecDeque<Bytes>,
    pub(crate) send_buffered: usize,
    pub(crate) fin_queued: bool,
    pub(crate) fin_sent: bool,
    pub(crate) send_window: i64,
    pub(crate) in_sendable: bool,
    pub(crate) write_waker: Option<Waker>,

    pub(crate) reset: Option<Reset>,
    /// Local streams: the SYN_REPLY arrived. Peer streams: ours was queued.
    pub(crate) replied: bool,
    pub(crate) reply_headers: Option<Headers>,
    pub(crate) reply_waker: Option<Waker>,
}

impl StreamState {
    pub(crate) fn new(local: bool, send_window: i64) -> Self {
        Self {
            local,
            recv_handles: 1,
            send_handles: 1,
            in_accept_queue: false,
            recv_buf: VecDeque::new(),
            recv_buffered: 0,
            recv_fin: false,
            recv_unacked: 0,
            read_waker: None,
            send_buf: VecDeque::new(),
            send_buffered: 0,
            fin_queued: false,
            fin_sent: false,
            send_window,
            in_sendable: false,
            write_waker: None,
            reset: None,
            replied: false,
            reply_headers: None,
            reply_waker: None,
        }
    }

    pub(crate) fn wake_all(&mut self) {
        for waker in [
            self.read_waker.take(),
            self.write_waker.take(),
            self.reply_waker.take(),
        ]
        .into_iter()
        .flatten()
        {
            waker.wake();
        }
    }

    /// Whether the send side can carry nothing more (FIN written or reset).
    fn send_done(&self) -> bool {
        self.reset.is_some() || self.fin_sent
    }
}

impl State {
    pub(crate) fn new(role: Role, config: &Config) -> Self {
        let (first_id, first_ping) = match role {
            Role::Client => (1, 1),
            Role::Server => (2, 2),
        };
        let _ = config;
        Self {
            role,
            next_local_id: first_id,
            last_peer_id: 0,
            streams: HashMap::new(),
            control: VecDeque::new(),
            sendable: VecDeque::new(),
            window_updates: HashSet::new(),
            peer_flow_control: false,
            peer_initial_window: 65536,
            session_send_window: 65536,
            session_recv_buffered: 0,
            session_recv_unacked: 0,
            accept_queue: VecDeque::new(),
            accept_waker: None,
            incoming_open: true,
            peer_streams: 0,
            next_ping_id: first_ping,
            pings: HashMap::new(),
            handles: 1,
            closing: false,
            goaway_sent: false,
            goaway_received: false,
            reader_done: false,
            writer_done: false,
            dead: None,
        }
    }

    /// Whether `id` has the parity of streams (or pings) this side initiates.
    pub(crate) fn is_local_id(&self, id: u32) -> bool {
        match self.role {
            Role::Client => id % 2 == 1,
            Role::Server => id.is_multiple_of(2),
        }
    }

    /// Queues data or a FIN of `id` for the writer.
    pub(crate) fn mark_sendable(&mut self, id: StreamId) {
        if let Some(s) = self.streams.get_mut(&id)
            && !s.in_sendable
        {
            s.in_sendable = true;
            self.sendable.push_back(id);
        }
    }

    /// Resets a stream from this side: drops what it had to send, tells the peer.
    pub(crate) fn reset_local(&mut self, id: StreamId, status: RstStatus) {
        let Some(s) = self.streams.get_mut(&id) else {
            return;
        };
        if s.reset.is_some() {
            return;
        }
        s.reset = Some(Reset::Local(status));
        s.send_buf.clear();
        s.send_buffered = 0;
        s.wake_all();
        self.control.push_back(Frame::RstStream {
            stream_id: id,
            status,
        });
        self.release_recv(id);
        self.maybe_remove(id);
    }

    /// Discards what a stream has buffered for reading and acknowledges it to the peer.
    pub(crate) fn release_recv(&mut self, id: StreamId) {
        let Some(s) = self.streams.get_mut(&id) else {
            return;
        };
        let n = s.recv_buffered;
        s.recv_buf.clear();
        s.recv_buffered = 0;
        self.session_recv_buffered -= n;
        self.session_recv_unacked = self.session_recv_unacked.saturating_add(n as u32);
    }

    /// Forgets a stream nobody holds once its send side is done. Data the peer still sends on
    /// it is then discarded (and acknowledged) as data of an unknown stream.
    pub(crate) fn maybe_remove(&mut self, id: StreamId) {
        let Some(s) = self.streams.get(&id) else {
            return;
        };
        if s.recv_handles == 0 && s.send_handles == 0 && !s.in_accept_queue && s.send_done() {
            let local = s.local;
            self.release_recv(id);
            self.streams.remove(&id);
            self.window_updates.remove(&id);
            if !local {
                self.peer_streams -= 1;
            }
        }
    }

    /// Ends the connection for everyone: streams fail, waiters wake.
    pub(crate) fn kill(&mut self, error: Error) {
        if self.dead.is_none() {
            self.dead = Some(error);
        }
        for s in self.streams.values_mut() {
            s.wake_all();
        }
        if let Some(w) = self.accept_waker.take() {
            w.wake();
        }
        self.pings.clear();
    }

    /// The error an operation on a dead or closing connection fails with.
    pub(crate) fn unusable(&self) -> Option<Error> {
        if let Some(e) = &self.dead {
            return Some(e.clone());
        }
        if self.closing || self.goaway_received || self.goaway_sent {
            return Some(Error::GoingAway);
        }
        None
    }

    /// Whether every stream has sent all it buffered and its FIN (the point where a GOAWAY
    /// may go out without cutting anything off).
    pub(crate) fn all_flushed(&self) -> bool {
        self.control.is_empty() && self.streams.values().all(|s| s.send_done())
    }
}
