//! The calling end of exec and attach (kubectl's, or the API server's when it re-dials a
//! kubelet).
//!
//! `start_spdy` opens the streams in client-go's order — error, stdin, stdout, stderr (not with
//! a tty), resize (tty, v3 on) — waiting for each reply as `CreateStream` does, since a Go
//! server drops data sent before it. `start_websocket` multiplexes the channels; with v5,
//! shutting stdin down sends CLOSE for channel 0. Either gives a `ClientSession`; `outcome`
//! reads the error stream to its end and decodes it for the negotiated version.

use std::io;
use std::time::Duration;

use thiserror::Error;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::WebSocketStream;

use super::status::Outcome;
use super::{
    CHANNEL_ERROR, CHANNEL_RESIZE, CHANNEL_STDERR, CHANNEL_STDIN, CHANNEL_STDOUT, STREAM_ERROR,
    STREAM_RESIZE, STREAM_STDERR, STREAM_STDIN, STREAM_STDOUT, STREAM_TYPE, StreamOptions,
    TerminalSize, Version,
};
use crate::io::{Reader, Writer, is_end_of_stream};
use crate::spdy::{self, Headers};
use crate::upgrade::Io;
use crate::ws::{Encoding, Mux};

/// How long the server has to answer a new stream (client-go's `createStreamResponseTimeout`).
pub const STREAM_REPLY_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a client session failed.
#[derive(Debug, Error)]
pub enum ClientError {
    #[error("unsupported remotecommand protocol {0:?}")]
    UnknownProtocol(String),
    #[error(transparent)]
    Spdy(#[from] spdy::Error),
    #[error("error reading the error stream: {0}")]
    Io(#[from] io::Error),
    /// The error stream did not decode (client-go's "error stream protocol error").
    #[error("{0}")]
    Protocol(String),
}

/// A started exec or attach session, calling side.
pub struct ClientSession {
    pub protocol: String,
    pub version: Version,
    pub stdin: Option<Writer>,
    pub stdout: Option<Reader>,
    pub stderr: Option<Reader>,
    pub resize: Option<ResizeSender>,
    error: Reader,
    transport: Transport,
}

enum Transport {
    Spdy {
        conn: spdy::Connection,
        _held: Vec<spdy::RecvStream>,
    },
    Ws {
        mux: Mux,
    },
}

/// Sends terminal sizes, one JSON object and a newline each (Go's `json.Encoder`).
pub struct ResizeSender {
    writer: Writer,
}

impl ResizeSender {
    pub async fn send(&mut self, size: TerminalSize) -> io::Result<()> {
        let mut line = serde_json::to_vec(&size).map_err(io::Error::other)?;
        line.push(b'\n');
        self.writer.write_all(&line).await
    }
}

/// Starts a session on a SPDY connection whose upgrade negotiated `protocol`.
pub async fn start_spdy(
    conn: spdy::Connection,
    protocol: &str,
    options: StreamOptions,
) -> Result<ClientSession, ClientError> {
    let version =
        Version::of(protocol).ok_or_else(|| ClientError::UnknownProtocol(protocol.into()))?;
    let open = |kind: &str| {
        let headers: Headers = [(STREAM_TYPE, kind)].into_iter().collect();
        conn.open_and_wait(headers, STREAM_REPLY_TIMEOUT)
    };
    let mut held = Vec::new();
    let (error, mut error_send) = open(STREAM_ERROR).await?.split();
    // Nothing is ever written to the error stream by a client.
    let _ = error_send.shutdown().await;
    let stdin = if options.stdin {
        let (recv, send) = open(STREAM_STDIN).await?.split();
        held.push(recv);
        Some(Writer::Spdy(send))
    } else {
        None
    };
    let stdout = if options.stdout {
        let (recv, mut send) = open(STREAM_STDOUT).await?.split();
        let _ = send.shutdown().await;
        Some(Reader::Spdy(recv))
    } else {
        None
    };
    let stderr = if options.stderr && !options.tty {
        let (recv, mut send) = open(STREAM_STDERR).await?.split();
        let _ = send.shutdown().await;
        Some(Reader::Spdy(recv))
    } else {
        None
    };
    let resize = if options.tty && version.resizes() {
        let (recv, send) = open(STREAM_RESIZE).await?.split();
        held.push(recv);
        Some(ResizeSender {
            writer: Writer::Spdy(send),
        })
    } else {
        None
    };
    Ok(ClientSession {
        protocol: protocol.to_string(),
        version,
        stdin,
        stdout,
        stderr,
        resize,
        error: Reader::Spdy(error),
        transport: Transport::Spdy { conn, _held: held },
    })
}

/// Starts a session on a WebSocket whose handshake negotiated `protocol`.
pub fn start_websocket<S: Io>(
    ws: WebSocketStream<S>,
    protocol: &str,
    options: StreamOptions,
) -> Result<ClientSession, ClientError> {
    let version =
        Version::of(protocol).ok_or_else(|| ClientError::UnknownProtocol(protocol.into()))?;
    let encoding = if protocol.contains("base64") {
        Encoding::Base64
    } else {
        Encoding::Binary
    };
    let readable = [false, options.stdout, options.stderr, true, false];
    let (mux, mut readers) = Mux::new(ws, encoding, version == Version::V5, &readable);
    let mut take = |ch: u8| {
        readers
            .get_mut(usize::from(ch))
            .and_then(Option::take)
            .map(Reader::Ws)
    };
    let stdout = take(CHANNEL_STDOUT);
    let stderr = take(CHANNEL_STDERR);
    let Some(error) = take(CHANNEL_ERROR) else {
        return Err(ClientError::Protocol("no error channel".into()));
    };
    Ok(ClientSession {
        protocol: protocol.to_string(),
        version,
        stdin: options
            .stdin
            .then(|| Writer::Ws(mux.writer(CHANNEL_STDIN, true))),
        stdout,
        stderr,
        resize: options.tty.then(|| ResizeSender {
            writer: Writer::Ws(mux.writer(CHANNEL_RESIZE, false)),
        }),
        error,
        transport: Transport::Ws { mux },
    })
}

impl ClientSession {
    /// Reads the error stream to its end (the server ends it after the command) and decodes
    /// the outcome. Keep reading stdout and stderr meanwhile: their data shares the transport.
    pub async fn outcome(&mut self) -> Result<Outcome, ClientError> {
        let mut message = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            match self.error.read(&mut chunk).await {
                Ok(0) => break,
                Ok(n) => {
                    message.extend_from_slice(&chunk[..n]);
                    if message.len() > 1 << 20 {
                        return Err(ClientError::Protocol("error stream too long".into()));
                    }
                }
                // The kubelet resets its streams when it closes; what came before counts.
                Err(e) if is_end_of_stream(&e) => break,
                Err(e) => return Err(e.into()),
            }
        }
        Outcome::decode(&message, self.version).map_err(ClientError::Protocol)
    }

    /// Ends the session: the SPDY connection closes, a WebSocket is closed with 1000.
    pub async fn close(self) {
        match self.transport {
            Transport::Spdy { conn, .. } => {
                conn.close();
                conn.closed().await;
            }
            Transport::Ws { mut mux } => mux.close(1000, Duration::from_secs(5)).await,
        }
    }
}
