//! The serving end of exec and attach (the kubelet's, or a CRI streaming server's).
//!
//! `accept_spdy` waits (30 s by default, `DefaultStreamCreationTimeout`) for the streams the
//! options call for — error, then stdin/stdout/stderr as asked, and resize for a tty from v3 —
//! answering each with SYN_REPLY; `accept_websocket` sets up the five channels and sends the
//! readiness message (an empty message on the lowest writable channel). Either gives a
//! `ServerSession`: take `stdin`, `stdout`, `stderr` and `resize`, run the command, then
//! `finish` with its outcome, which writes the status, half-closes everything and closes the
//! connection gently (SPDY: FIN, GOAWAY, wait for the peer; WebSocket: close 1000 and wait for
//! the client's close) so no output is lost.

use std::io;
use std::time::Duration;

use thiserror::Error;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_tungstenite::WebSocketStream;

use super::status::Outcome;
use super::{
    CHANNEL_ERROR, CHANNEL_RESIZE, CHANNEL_STDERR, CHANNEL_STDIN, CHANNEL_STDOUT, STREAM_TYPE,
    StreamOptions, TerminalSize, Version,
};
use crate::io::{Reader, Writer};
use crate::spdy::{self, Headers};
use crate::upgrade::Io;
use crate::ws::{self, Encoding, Mux};

/// How long a client has to open its streams.
pub const STREAM_CREATION_TIMEOUT: Duration = Duration::from_secs(30);
/// How long `finish` waits for a WebSocket client to close (the API server's translator
/// waits up to 15 minutes; output a client has not read yet is lost if we close first).
pub const WEBSOCKET_CLOSE_WAIT: Duration = Duration::from_secs(15 * 60);

/// Why a session could not be set up.
#[derive(Debug, Error)]
pub enum AcceptError {
    #[error("unsupported remotecommand protocol {0:?}")]
    UnknownProtocol(String),
    #[error("timed out waiting for client to create streams")]
    Timeout,
    #[error("connection closed before the client created its streams")]
    Closed,
}

/// A set-up exec or attach session, serving side.
pub struct ServerSession {
    /// The negotiated protocol.
    pub protocol: String,
    pub version: Version,
    pub options: StreamOptions,
    pub stdin: Option<Reader>,
    pub stdout: Option<Writer>,
    pub stderr: Option<Writer>,
    /// Terminal sizes, for a tty session.
    pub resize: Option<mpsc::Receiver<TerminalSize>>,
    error: Option<Writer>,
    transport: Transport,
}

enum Transport {
    Spdy {
        conn: spdy::Connection,
        /// The halves of streams we only read, kept so they finish (not reset) at the end.
        held: Vec<spdy::SendStream>,
    },
    Ws {
        mux: Mux,
        close_wait: Duration,
    },
}

/// Sets up a session on an upgraded SPDY connection.
pub async fn accept_spdy(
    conn: spdy::Connection,
    mut incoming: spdy::Incoming,
    protocol: &str,
    options: StreamOptions,
    timeout: Duration,
) -> Result<ServerSession, AcceptError> {
    let version =
        Version::of(protocol).ok_or_else(|| AcceptError::UnknownProtocol(protocol.into()))?;
    let expected = 1
        + usize::from(options.stdin)
        + usize::from(options.stdout)
        + usize::from(options.stderr)
        + usize::from(options.tty && version.resizes());
    let mut session = ServerSession {
        protocol: protocol.to_string(),
        version,
        options,
        stdin: None,
        stdout: None,
        stderr: None,
        resize: None,
        error: None,
        transport: Transport::Spdy {
            conn,
            held: Vec::new(),
        },
    };
    let mut received = 0;
    let deadline = tokio::time::Instant::now() + timeout;
    while received < expected {
        let stream = match tokio::time::timeout_at(deadline, incoming.accept()).await {
            Err(_) => return Err(AcceptError::Timeout),
            Ok(None) => return Err(AcceptError::Closed),
            Ok(Some(stream)) => stream,
        };
        // Every stream is answered, as the kubelet's handler accepts them all.
        let _ = stream.reply(Headers::new(), false);
        let kind = stream.headers().get(STREAM_TYPE).unwrap_or("").to_string();
        let (recv, send) = stream.split();
        let Transport::Spdy { held, .. } = &mut session.transport else {
            unreachable!("a SPDY session has a SPDY transport")
        };
        match kind.as_str() {
            super::STREAM_ERROR => {
                session.error = Some(Writer::Spdy(send));
                if version == Version::V1 {
                    // v1 kubelets reset the error stream once set up; kept for fidelity.
                    if let Some(Writer::Spdy(s)) = &session.error {
                        s.reset(spdy::RstStatus::Cancel);
                    }
                }
            }
            super::STREAM_STDIN => {
                session.stdin = Some(Reader::Spdy(recv));
                held.push(send);
            }
            super::STREAM_STDOUT => session.stdout = Some(Writer::Spdy(send)),
            super::STREAM_STDERR => session.stderr = Some(Writer::Spdy(send)),
            super::STREAM_RESIZE if version.resizes() => {
                session.resize = Some(spawn_resize_decoder(Reader::Spdy(recv)));
                held.push(send);
            }
            other => {
                tracing::debug!(stream_type = other, "remotecommand: unexpected stream type");
                continue;
            }
        }
        received += 1;
    }
    if version == Version::V1
        && let Transport::Spdy { held, .. } = &mut session.transport
    {
        // v1 closes our side of stdin at once (another old kubelet quirk).
        for s in held.iter_mut() {
            let _ = s.shutdown().await;
        }
    }
    Ok(session)
}

/// Sets up a session on an upgraded WebSocket with the negotiated sub-protocol.
pub async fn accept_websocket<S: Io>(
    ws: WebSocketStream<S>,
    protocol: &str,
    options: StreamOptions,
) -> Result<ServerSession, AcceptError> {
    let version =
        Version::of(protocol).ok_or_else(|| AcceptError::UnknownProtocol(protocol.into()))?;
    let encoding = if protocol.contains("base64") {
        Encoding::Base64
    } else {
        Encoding::Binary
    };
    // stdin (when asked) and resize are read; the rest are written or ignored.
    let readable = [options.stdin, false, false, false, true];
    let (mux, mut readers) = Mux::new(ws, encoding, version == Version::V5, &readable);
    let ready = if options.stdout {
        CHANNEL_STDOUT
    } else if options.stderr {
        CHANNEL_STDERR
    } else {
        CHANNEL_ERROR
    };
    mux.send(ready, &[])
        .await
        .map_err(|_| AcceptError::Closed)?;
    let take = |readers: &mut Vec<Option<ws::ChannelReader>>, ch: u8| {
        readers
            .get_mut(usize::from(ch))
            .and_then(Option::take)
            .map(Reader::Ws)
    };
    let stdin = take(&mut readers, CHANNEL_STDIN);
    let resize_reader = take(&mut readers, CHANNEL_RESIZE);
    Ok(ServerSession {
        protocol: protocol.to_string(),
        version,
        options,
        stdin,
        stdout: options
            .stdout
            .then(|| Writer::Ws(mux.writer(CHANNEL_STDOUT, false))),
        stderr: options
            .stderr
            .then(|| Writer::Ws(mux.writer(CHANNEL_STDERR, false))),
        // The channel always exists; sizes matter only to a tty.
        resize: resize_reader
            .filter(|_| options.tty)
            .map(spawn_resize_decoder),
        error: Some(Writer::Ws(mux.writer(CHANNEL_ERROR, false))),
        transport: Transport::Ws {
            mux,
            close_wait: WEBSOCKET_CLOSE_WAIT,
        },
    })
}

impl ServerSession {
    /// How long `finish` waits for a WebSocket client's close.
    pub fn set_close_wait(&mut self, wait: Duration) {
        if let Transport::Ws { close_wait, .. } = &mut self.transport {
            *close_wait = wait;
        }
    }

    /// Writes the outcome on the error stream and ends the session gently.
    pub async fn finish(mut self, outcome: Outcome) -> io::Result<()> {
        let mut result = Ok(());
        if let Some(mut error) = self.error.take() {
            if let Some(bytes) = outcome.encode(self.version) {
                result = error.write_all(&bytes).await;
            }
            let _ = error.shutdown().await;
        }
        for w in [self.stdout.take(), self.stderr.take()]
            .into_iter()
            .flatten()
        {
            let mut w = w;
            let _ = w.shutdown().await;
        }
        drop(self.stdin.take());
        drop(self.resize.take());
        match self.transport {
            Transport::Spdy { conn, held } => {
                drop(held);
                conn.close();
                conn.closed().await;
            }
            Transport::Ws {
                mut mux,
                close_wait,
            } => mux.close(1000, close_wait).await,
        }
        result
    }
}

/// Decodes a stream of concatenated `TerminalSize` JSON objects, as the kubelet's
/// `handleResizeEvents` does; stops at the first thing that is not one.
fn spawn_resize_decoder(mut reader: Reader) -> mpsc::Receiver<TerminalSize> {
    let (tx, rx) = mpsc::channel(4);
    tokio::spawn(async move {
        let mut buf: Vec<u8> = Vec::new();
        let mut chunk = [0u8; 1024];
        loop {
            let mut stream = serde_json::Deserializer::from_slice(&buf).into_iter::<TerminalSize>();
            let mut sizes = Vec::new();
            let mut consumed = 0;
            let mut broken = false;
            while let Some(item) = stream.next() {
                match item {
                    Ok(size) => {
                        sizes.push(size);
                        consumed = stream.byte_offset();
                    }
                    Err(e) if e.is_eof() => break,
                    Err(_) => {
                        broken = true;
                        break;
                    }
                }
            }
            buf.drain(..consumed);
            for size in sizes {
                if tx.send(size).await.is_err() {
                    return;
                }
            }
            // A resize event is a few dozen bytes; anything this long is not one.
            if broken || buf.len() > 4096 {
                return;
            }
            match reader.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
    });
    rx
}
