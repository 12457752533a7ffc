//! Connection tests over in-memory pipes: streams, half-close, pings, close, resets, flow
//! control with a slow reader, and peers that ignore windows or break the protocol.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream};

use super::*;
use crate::spdy::frame::{self, Frame, GoAwayStatus, Limits};
use crate::spdy::zlib::{HeaderCompressor, HeaderDecompressor};

const T: Duration = Duration::from_secs(10);

fn pair(config: Config) -> ((Connection, Incoming), (Connection, Incoming)) {
    let (a, b) = tokio::io::duplex(64 << 10);
    (
        Connection::new(a, Role::Client, config.clone()),
        Connection::new(b, Role::Server, config),
    )
}

fn h(ty: &str) -> Headers {
    [("streamType", ty)].into_iter().collect()
}

async fn within<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(T, f).await.expect("timed out")
}

#[tokio::test]
async fn streams_carry_data_both_ways_and_half_close() {
    let ((client, _ci), (_server, mut incoming)) = pair(Config::default());
    let server = tokio::spawn(async move {
        let mut s = incoming.accept().await.unwrap();
        assert_eq!(s.headers().get("streamtype"), Some("stdin"));
        assert_eq!(s.id(), 1);
        s.reply(Headers::new(), false).unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).await.unwrap();
        s.write_all(b"pong:").await.unwrap();
        s.write_all(&got).await.unwrap();
        s.shutdown().await.unwrap();
    });
    let mut s = within(client.open_and_wait(h("stdin"), T)).await.unwrap();
    s.write_all(b"ping").await.unwrap();
    s.shutdown().await.unwrap();
    let mut back = Vec::new();
    within(s.read_to_end(&mut back)).await.unwrap();
    assert_eq!(back, b"pong:ping");
    server.await.unwrap();
}

#[tokio::test]
async fn pings_are_answered_in_both_directions() {
    let ((client, _ci), (server, _si)) = pair(Config::default());
    within(client.ping()).await.unwrap();
    within(server.ping()).await.unwrap();
    within(client.ping()).await.unwrap();
}

#[tokio::test]
async fn close_delivers_everything_written_then_ends_both_sides() {
    let ((client, _ci), (server_conn, mut incoming)) = pair(Config::default());
    let payload: Vec<u8> = (0..300_000u32).map(|i| i as u8).collect();
    let expected = payload.clone();
    let server = tokio::spawn(async move {
        let mut s = incoming.accept().await.unwrap();
        s.write_all(&payload).await.unwrap();
        // No explicit FIN: close() sends it after the data.
        server_conn.close();
        within(server_conn.closed()).await;
        drop(s);
    });
    let mut s = within(client.open_and_wait(h("stdout"), T)).await.unwrap();
    let mut got = Vec::new();
    within(s.read_to_end(&mut got)).await.unwrap();
    assert_eq!(got.len(), expected.len());
    assert_eq!(got, expected);
    assert!(client.open(h("late"), false).is_err());
    drop(s);
    within(server).await.unwrap();
    within(client.closed()).await;
}

#[tokio::test]
async fn dropping_finishes_a_stream_and_reset_aborts_one() {
    let ((client, _ci), (_server, mut incoming)) = pair(Config::default());
    let s = within(async {
        let open = client.open(h("data"), false).unwrap();
        let accepted = incoming.accept().await.unwrap();
        accepted.reply(Headers::new(), false).unwrap();
        open.wait_reply(T).await.unwrap();
        (open, accepted)
    })
    .await;
    let (mut open, accepted) = s;
    let (_recv, mut send) = accepted.split();
    send.write_all(b"all of it").await.unwrap();
    drop(send);
    let mut buf = Vec::new();
    within(open.read_to_end(&mut buf)).await.unwrap();
    assert_eq!(buf, b"all of it");

    let open = client.open(h("data"), false).unwrap();
    let accepted = within(incoming.accept()).await.unwrap();
    accepted.reply(Headers::new(), false).unwrap();
    open.wait_reply(T).await.unwrap();
    let (mut recv, _send) = open.split();
    let (_r, mut send) = accepted.split();
    send.write_all(b"partial").await.unwrap();
    within(send.flushed()).await;
    send.reset(RstStatus::Cancel);
    let mut buf = Vec::new();
    let err = within(recv.read_to_end(&mut buf)).await.unwrap_err();
    assert_eq!(buf, b"partial");
    assert_eq!(err.kind(), std::io::ErrorKind::ConnectionReset);
}

#[tokio::test]
async fn a_slow_reader_bounds_buffers_and_does_not_stall_other_streams() {
    let config = Config {
        stream_window: 64 << 10,
        session_window: 1 << 20,
        ..Config::default()
    };
    let ((client, _ci), (server_conn, mut incoming)) = pair(config);
    let accept = tokio::spawn(async move {
        let bulk = incoming.accept().await.unwrap();
        bulk.reply(Headers::new(), false).unwrap();
        let chat = incoming.accept().await.unwrap();
        chat.reply(Headers::new(), false).unwrap();
        (bulk, chat, incoming)
    });
    let mut bulk = within(client.open_and_wait(h("bulk"), T)).await.unwrap();
    let mut chat = within(client.open_and_wait(h("chat"), T)).await.unwrap();
    let (mut bulk_rx, mut chat_rx, _incoming) = within(accept).await.unwrap();
    // 4 MiB into a stream nobody reads yet: the writer must stop at the window.
    let writer = tokio::spawn(async move {
        let chunk = vec![7u8; 16 << 10];
        for _ in 0..256 {
            bulk.write_all(&chunk).await.unwrap();
        }
        bulk.shutdown().await.unwrap();
        bulk
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let stats = server_conn.stats();
    assert!(stats.recv_buffered <= 64 << 10, "{stats:?}");
    assert!(!writer.is_finished());
    // The other stream still flows while the first is blocked.
    chat.write_all(b"hello").await.unwrap();
    let mut five = [0u8; 5];
    within(chat_rx.read_exact(&mut five)).await.unwrap();
    assert_eq!(&five, b"hello");
    // Now read slowly; every byte arrives and buffers stay bounded.
    let mut total = 0usize;
    let mut buf = vec![0u8; 8 << 10];
    loop {
        let n = within(bulk_rx.read(&mut buf)).await.unwrap();
        if n == 0 {
            break;
        }
        assert!(buf[..n].iter().all(|b| *b == 7));
        total += n;
        assert!(server_conn.stats().recv_buffered <= 64 << 10);
        if total % (512 << 10) < n {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    assert_eq!(total, 4 << 20);
    within(writer).await.unwrap();
}

/// A raw peer that writes frames with our codec and reads what we send.
struct RawPeer {
    io: DuplexStream,
    deflate: HeaderCompressor,
    inflate: HeaderDecompressor,
    buf: BytesMut,
}

impl RawPeer {
    fn new(io: DuplexStream) -> Self {
        Self {
            io,
            deflate: HeaderCompressor::new().unwrap(),
            inflate: HeaderDecompressor::new(),
            buf: BytesMut::new(),
        }
    }

    async fn send(&mut self, frame: Frame) {
        let mut out = BytesMut::new();
        frame::encode(&frame, &mut self.deflate, &mut out).unwrap();
        self.io.write_all(&out).await.unwrap();
    }

    /// The next frame, or `None` at EOF.
    async fn recv(&mut self) -> Option<Frame> {
        loop {
            if let Some(f) =
                frame::decode(&mut self.buf, &mut self.inflate, &Limits::default()).unwrap()
            {
                return Some(f);
            }
            let n = within(self.io.read_buf(&mut self.buf)).await.unwrap();
            if n == 0 {
                return None;
            }
        }
    }

    async fn recv_until(&mut self, want: impl Fn(&Frame) -> bool) -> Frame {
        loop {
            let f = self.recv().await.expect("eof before the expected frame");
            if want(&f) {
                return f;
            }
        }
    }
}

fn syn(stream_id: u32, ty: &str) -> Frame {
    Frame::SynStream {
        stream_id,
        associated_to: 0,
        priority: 0,
        fin: false,
        unidirectional: false,
        headers: h(ty),
    }
}

#[tokio::test]
async fn a_peer_that_ignores_windows_is_slowed_instead_of_buffered_without_bound() {
    // spdystream: no SETTINGS, no WINDOW_UPDATE, one frame per write of any size.
    let (ours, theirs) = tokio::io::duplex(1 << 20);
    let (conn, mut incoming) = Connection::new(
        ours,
        Role::Server,
        Config {
            stream_window: 64 << 10,
            session_window: 256 << 10,
            ..Config::default()
        },
    );
    let mut peer = RawPeer::new(theirs);
    peer.send(syn(1, "stdin")).await;
    let mut s = within(incoming.accept()).await.unwrap();
    let sender = tokio::spawn(async move {
        for _ in 0..64 {
            peer.send(Frame::Data {
                stream_id: 1,
                fin: false,
                data: Bytes::from(vec![1u8; 32 << 10]),
            })
            .await;
        }
        peer.send(Frame::Data {
            stream_id: 1,
            fin: true,
            data: Bytes::new(),
        })
        .await;
        peer
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    // 2 MiB were offered; we hold at most a window plus one frame.
    assert!(conn.stats().recv_buffered <= (64 << 10) + (32 << 10));
    assert!(!sender.is_finished());
    let mut got = Vec::new();
    within(s.read_to_end(&mut got)).await.unwrap();
    assert_eq!(got.len(), 2 << 20);
    within(sender).await.unwrap();
}

#[tokio::test]
async fn our_sends_obey_the_windows_of_a_peer_that_announces_them() {
    let (ours, theirs) = tokio::io::duplex(1 << 20);
    let (client, _incoming) = Connection::new(ours, Role::Client, Config::default());
    let mut peer = RawPeer::new(theirs);
    peer.send(Frame::Settings {
        clear: false,
        entries: vec![frame::Setting {
            flags: 0,
            id: frame::SETTINGS_INITIAL_WINDOW_SIZE,
            value: 1000,
        }],
    })
    .await;
    // Our echo of the peer's PING proves the SETTINGS before it were handled.
    peer.send(Frame::Ping { id: 2 }).await;
    peer.recv_until(|f| *f == Frame::Ping { id: 2 }).await;
    let mut s = client.open(h("stdin"), false).unwrap();
    let writer = tokio::spawn(async move {
        s.write_all(&[9u8; 5000]).await.unwrap();
        s
    });
    let mut received = 0;
    let mut stream_id = 0;
    while received < 1000 {
        if let Frame::Data {
            stream_id: id,
            data,
            ..
        } = peer.recv_until(|f| matches!(f, Frame::Data { .. })).await
        {
            stream_id = id;
            received += data.len();
        }
    }
    assert_eq!(received, 1000);
    // Nothing more until the window opens.
    let more = tokio::time::timeout(Duration::from_millis(200), peer.recv()).await;
    assert!(
        !matches!(more, Ok(Some(Frame::Data { .. }))),
        "sent past the window: {more:?}"
    );
    peer.send(Frame::WindowUpdate {
        stream_id,
        delta: 4000,
    })
    .await;
    while received < 5000 {
        if let Frame::Data { data, .. } = peer.recv_until(|f| matches!(f, Frame::Data { .. })).await
        {
            received += data.len();
        }
    }
    assert_eq!(received, 5000);
    drop(within(writer).await.unwrap());
}

#[tokio::test]
async fn a_reused_stream_id_ends_the_connection_with_a_protocol_error() {
    let (ours, theirs) = tokio::io::duplex(1 << 20);
    let (conn, mut incoming) = Connection::new(ours, Role::Server, Config::default());
    let mut peer = RawPeer::new(theirs);
    peer.send(syn(3, "a")).await;
    peer.send(syn(1, "b")).await;
    let goaway = peer.recv_until(|f| matches!(f, Frame::GoAway { .. })).await;
    assert_eq!(
        goaway,
        Frame::GoAway {
            last_good_stream_id: 3,
            status: GoAwayStatus::ProtocolError
        }
    );
    within(conn.closed()).await;
    let _ = incoming.accept().await;
}

#[tokio::test]
async fn streams_past_the_concurrency_limit_are_refused() {
    let (ours, theirs) = tokio::io::duplex(1 << 20);
    let (_conn, _incoming) = Connection::new(
        ours,
        Role::Server,
        Config {
            max_concurrent_streams: 2,
            ..Config::default()
        },
    );
    let mut peer = RawPeer::new(theirs);
    for id in [1, 3, 5] {
        peer.send(syn(id, "x")).await;
    }
    let rst = peer
        .recv_until(|f| matches!(f, Frame::RstStream { .. }))
        .await;
    assert_eq!(
        rst,
        Frame::RstStream {
            stream_id: 5,
            status: RstStatus::RefusedStream
        }
    );
}

#[tokio::test]
async fn a_ping_flood_from_a_peer_that_never_reads_is_bounded() {
    // The peer's read side is never drained: our writer blocks, so the reader must stop too.
    let (ours, mut theirs) = tokio::io::duplex(4 << 10);
    let (conn, _incoming) = Connection::new(ours, Role::Server, Config::default());
    let mut deflate = HeaderCompressor::new().unwrap();
    let mut out = BytesMut::new();
    for i in 0..20_000u32 {
        frame::encode(&Frame::Ping { id: 2 * i + 1 }, &mut deflate, &mut out).unwrap();
    }
    let flood = tokio::spawn(async move {
        let _ = theirs.write_all(&out).await;
        theirs
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(conn.stats().control_queued <= crate::spdy::state::MAX_CONTROL_QUEUE);
    assert!(
        !flood.is_finished(),
        "every ping was read without being answered"
    );
    flood.abort();
}

#[tokio::test]
async fn header_frames_and_unknown_frames_are_tolerated() {
    let (ours, theirs) = tokio::io::duplex(1 << 20);
    let (_conn, mut incoming) = Connection::new(ours, Role::Server, Config::default());
    let mut peer = RawPeer::new(theirs);
    peer.send(syn(1, "stdout")).await;
    let mut s = within(incoming.accept()).await.unwrap();
    peer.send(Frame::Headers {
        stream_id: 1,
        fin: false,
        headers: h("ignored"),
    })
    .await;
    peer.io
        .write_all(&[0x80, 3, 0, 10, 0, 0, 0, 2, 0xaa, 0xbb])
        .await
        .unwrap();
    peer.send(Frame::Data {
        stream_id: 1,
        fin: true,
        data: Bytes::from_static(b"ok"),
    })
    .await;
    let mut got = Vec::new();
    within(s.read_to_end(&mut got)).await.unwrap();
    assert_eq!(got, b"ok");
}

#[allow(dead_code)]
fn assert_io<T: AsyncRead + AsyncWrite + Send + Unpin + 'static>() {}

#[test]
fn streams_are_async_io() {
    assert_io::<Stream>();
}
