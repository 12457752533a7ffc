//! Port-forward over the legacy WebSocket protocol (the Python client's `portforward()`).
//!
//! The ports come from the request's query, one pair of channels each: `2i` carries data both
//! ways, `2i+1` errors from the server. The server first writes the port as an unsigned 16-bit
//! little-endian integer on both channels of every pair (clients check it), then forwards one
//! connection per port; the session ends when every forward has.

use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::WebSocketStream;

use super::{Duplex, Forwarder};
use crate::io::{Reader, Writer, is_end_of_stream};
use crate::upgrade::Io;
use crate::ws::{Encoding, Mux};

/// Serves the ports on a WebSocket whose handshake negotiated `protocol`.
pub async fn serve<S: Io>(
    ws: WebSocketStream<S>,
    protocol: &str,
    ports: &[u16],
    forwarder: Arc<dyn Forwarder>,
    close_wait: Duration,
) {
    let encoding = encoding_of(protocol);
    let readable: Vec<bool> = ports.iter().flat_map(|_| [true, false]).collect();
    let (mut mux, mut readers) = Mux::new(ws, encoding, false, &readable);
    let mut forwards = Vec::new();
    for (i, &port) in ports.iter().enumerate() {
        let data_ch = (2 * i) as u8;
        let prefix = port.to_le_bytes();
        if mux.send(data_ch, &prefix).await.is_err()
            || mux.send(data_ch + 1, &prefix).await.is_err()
        {
            return;
        }
        let Some(Some(reader)) = readers.get_mut(2 * i).map(Option::take) else {
            continue;
        };
        let duplex = Duplex {
            reader: Reader::Ws(reader),
            writer: Writer::Ws(mux.writer(data_ch, false)),
        };
        let mut error = mux.writer(data_ch + 1, false);
        let forwarder = forwarder.clone();
        forwards.push(async move {
            if let Err(msg) = forwarder.forward(port, duplex).await {
                let _ = error.write_all(msg.as_bytes()).await;
            }
        });
    }
    join_all(forwards).await;
    mux.close(1000, close_wait).await;
}

fn encoding_of(protocol: &str) -> Encoding {
    if protocol.contains("base64") {
        Encoding::Base64
    } else {
        Encoding::Binary
    }
}

/// One forwarded port, calling side.
pub struct Port {
    pub port: u16,
    /// Bytes from the pod.
    pub data: Reader,
    /// Bytes to the pod.
    pub input: Writer,
    /// Error text from the server.
    pub error: Reader,
}

/// Errors of the calling side.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("websocket ended before the port header of channel {0}")]
    MissingHeader(u8),
    #[error("channel {channel} announced port {got}, expected {expected}")]
    WrongPort {
        channel: u8,
        got: u16,
        expected: u16,
    },
}

/// Sets up the channels of `ports` on a WebSocket and checks each pair's port header, as the
/// Python client does.
pub async fn connect<S: Io>(
    ws: WebSocketStream<S>,
    protocol: &str,
    ports: &[u16],
) -> Result<(Mux, Vec<Port>), ClientError> {
    let readable: Vec<bool> = ports.iter().flat_map(|_| [true, true]).collect();
    let (mux, mut readers) = Mux::new(ws, encoding_of(protocol), false, &readable);
    let mut out = Vec::new();
    for (i, &port) in ports.iter().enumerate() {
        let mut data = readers[2 * i].take().map(Reader::Ws);
        let mut error = readers[2 * i + 1].take().map(Reader::Ws);
        for (ch, reader) in [(2 * i, &mut data), (2 * i + 1, &mut error)] {
            let ch = ch as u8;
            let Some(r) = reader.as_mut() else {
                return Err(ClientError::MissingHeader(ch));
            };
            let mut header = [0u8; 2];
            match r.read_exact(&mut header).await {
                Ok(_) => {}
                Err(e) if is_end_of_stream(&e) => return Err(ClientError::MissingHeader(ch)),
                Err(_) => return Err(ClientError::MissingHeader(ch)),
            }
            let got = u16::from_le_bytes(header);
            if got != port {
                return Err(ClientError::WrongPort {
                    channel: ch,
                    got,
                    expected: port,
                });
            }
        }
        let (Some(data), Some(error)) = (data, error) else {
            return Err(ClientError::MissingHeader((2 * i) as u8));
        };
        out.push(Port {
            port,
            data,
            input: Writer::Ws(mux.writer((2 * i) as u8, false)),
            error,
        });
    }
    Ok((mux, out))
}
