//! Port-forward over SPDY (`portforward.k8s.io`), both ends.
//!
//! For every local connection the client opens an error stream and then a data stream, both
//! with headers `streamType`, `port` and `requestID` (a counter from 0), and half-closes the
//! error stream at once. The server answers streams whose `port` and `streamType` are valid
//! and resets the others, pairs them by `requestID` (old clients without one: the error
//! stream's id, and the data stream's id minus 2), waits up to 30 s for a pair to complete,
//! then runs the forwarder on the data stream, writes its error (if any) on the error stream
//! and finishes both.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

use super::{Duplex, Forwarder, HEADER_PORT, HEADER_REQUEST_ID, STREAM_DATA, STREAM_ERROR};
use crate::io::{Reader, Writer, is_end_of_stream};
use crate::remotecommand::STREAM_TYPE;
use crate::spdy::{self, Headers, RstStatus};

/// How long a pair has to complete (the kubelet's stream creation timeout).
pub const PAIR_TIMEOUT: Duration = Duration::from_secs(30);

/// Serves port-forward streams until the connection ends.
pub async fn serve(
    conn: spdy::Connection,
    mut incoming: spdy::Incoming,
    forwarder: Arc<dyn Forwarder>,
    pair_timeout: Duration,
) {
    let mut pairs: HashMap<String, Pair> = HashMap::new();
    let (expired_tx, mut expired_rx) = mpsc::unbounded_channel::<String>();
    loop {
        let stream = tokio::select! {
            s = incoming.accept() => match s {
                Some(s) => s,
                None => break,
            },
            Some(id) = expired_rx.recv() => {
                if let Some(mut pair) = pairs.remove(&id) {
                    let msg = format!("(conn={:p}, request={id}) timed out waiting for streams", &conn);
                    pair.print_error(&msg).await;
                }
                continue;
            }
        };
        let headers = stream.headers().clone();
        if let Err(reason) = validate(&headers) {
            tracing::debug!(%reason, "portforward: stream rejected");
            stream.reset(RstStatus::Cancel);
            continue;
        }
        let _ = stream.reply(Headers::new(), false);
        let kind = headers.get(STREAM_TYPE).unwrap_or("").to_string();
        let request_id = match headers.get(HEADER_REQUEST_ID) {
            Some(id) if !id.is_empty() => id.to_string(),
            // Old clients: consecutive odd ids per pair.
            _ if kind == STREAM_ERROR => stream.id().to_string(),
            _ => stream.id().saturating_sub(2).to_string(),
        };
        let pair = pairs.entry(request_id.clone()).or_insert_with(|| {
            let expired = expired_tx.clone();
            let id = request_id.clone();
            tokio::spawn(async move {
                tokio::time::sleep(pair_timeout).await;
                let _ = expired.send(id);
            });
            Pair::default()
        });
        let slot = if kind == STREAM_DATA {
            &mut pair.data
        } else {
            &mut pair.error
        };
        if slot.is_some() {
            let msg = format!(
                "error processing stream for request {request_id}: {kind} stream already assigned"
            );
            pair.print_error(&msg).await;
            continue;
        }
        *slot = Some(stream);
        if pair.data.is_some() && pair.error.is_some() {
            let Some(pair) = pairs.remove(&request_id) else {
                continue;
            };
            let (Some(data), Some(error)) = (pair.data, pair.error) else {
                continue;
            };
            tokio::spawn(forward(data, error, forwarder.clone()));
        }
    }
}

#[derive(Default)]
struct Pair {
    data: Option<spdy::Stream>,
    error: Option<spdy::Stream>,
}

impl Pair {
    /// Writes `msg` on the pair's error stream, if it has one yet.
    async fn print_error(&mut self, msg: &str) {
        tracing::debug!(%msg, "portforward");
        if let Some(error) = &mut self.error {
            let _ = error.write_all(msg.as_bytes()).await;
        }
    }
}

fn validate(headers: &Headers) -> Result<(), String> {
    let port = headers
        .get(HEADER_PORT)
        .filter(|p| !p.is_empty())
        .ok_or_else(|| format!("{HEADER_PORT:?} header is required"))?;
    let port: u16 = port
        .parse()
        .map_err(|e| format!("unable to parse {port:?} as a port: {e}"))?;
    if port < 1 {
        return Err(format!("port \"{port}\" must be > 0"));
    }
    match headers.get(STREAM_TYPE) {
        None | Some("") => Err(format!("{STREAM_TYPE:?} header is required")),
        Some(STREAM_DATA | STREAM_ERROR) => Ok(()),
        Some(other) => Err(format!("invalid stream type {other:?}")),
    }
}

async fn forward(data: spdy::Stream, error: spdy::Stream, forwarder: Arc<dyn Forwarder>) {
    let port: u16 = data
        .headers()
        .get(HEADER_PORT)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    let (data_recv, data_send) = data.split();
    let (_error_recv, mut error_send) = error.split();
    let duplex = Duplex {
        reader: Reader::Spdy(data_recv),
        writer: Writer::Spdy(data_send),
    };
    if let Err(msg) = forwarder.forward(port, duplex).await {
        tracing::debug!(%msg, "portforward: forwarding failed");
        let _ = error_send.write_all(msg.as_bytes()).await;
    }
    let _ = error_send.shutdown().await;
}

/// The calling end: forwards connections over one SPDY connection.
pub struct Client {
    conn: spdy::Connection,
    next_request: AtomicU64,
}

/// One forwarded connection.
pub struct Forwarded {
    /// The bytes to and from the pod's port.
    pub data: spdy::Stream,
    error: spdy::RecvStream,
}

impl Client {
    pub fn new(conn: spdy::Connection) -> Self {
        Self {
            conn,
            next_request: AtomicU64::new(0),
        }
    }

    /// The connection (to ping or close it).
    pub fn connection(&self) -> &spdy::Connection {
        &self.conn
    }

    /// Opens the stream pair for one connection to `port`, as client-go does.
    pub async fn open(&self, port: u16) -> Result<Forwarded, spdy::Error> {
        let request = self
            .next_request
            .fetch_add(1, Ordering::Relaxed)
            .to_string();
        let port = port.to_string();
        let headers = |kind: &str| -> Headers {
            [
                (STREAM_TYPE, kind),
                (HEADER_PORT, port.as_str()),
                (HEADER_REQUEST_ID, request.as_str()),
            ]
            .into_iter()
            .collect()
        };
        let timeout = crate::remotecommand::client::STREAM_REPLY_TIMEOUT;
        let error = self
            .conn
            .open_and_wait(headers(STREAM_ERROR), timeout)
            .await?;
        let (error_recv, mut error_send) = error.split();
        // We never write to the error stream.
        let _ = error_send.shutdown().await;
        let data = self
            .conn
            .open_and_wait(headers(STREAM_DATA), timeout)
            .await?;
        Ok(Forwarded {
            data,
            error: error_recv,
        })
    }
}

impl Forwarded {
    /// What the server reported on the error stream once it finished it (`None`: nothing).
    pub async fn error(self) -> Option<String> {
        ErrorStream { inner: self.error }.message().await
    }

    /// Splits into the data stream and the error reader (so both can be used at once).
    pub fn into_parts(self) -> (spdy::Stream, ErrorStream) {
        (self.data, ErrorStream { inner: self.error })
    }
}

/// The error stream of a forwarded connection.
pub struct ErrorStream {
    inner: spdy::RecvStream,
}

impl ErrorStream {
    /// See [`Forwarded::error`].
    pub async fn message(self) -> Option<String> {
        let mut text = Vec::new();
        let mut inner = self.inner;
        let mut buf = [0u8; 1024];
        loop {
            match inner.read(&mut buf).await {
                Ok(0) => break,
                Ok(n) if text.len() < 64 << 10 => text.extend_from_slice(&buf[..n]),
                Ok(_) => {}
                Err(e) if is_end_of_stream(&e) => break,
                Err(e) => return Some(e.to_string()),
            }
        }
        (!text.is_empty()).then(|| String::from_utf8_lossy(&text).into_owned())
    }
}
