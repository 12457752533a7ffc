//! Port-forward, both ends: over SPDY (`portforward.k8s.io`, a data and an error stream per
//! forwarded connection, paired by `requestID`), over the legacy WebSocket protocol (ports from
//! the query, channels `2i` data and `2i+1` error, each opened with the port as two
//! little-endian bytes), and the WebSocket tunnel `SPDY/3.1+portforward.k8s.io` of kubectl
//! 1.31+ (the SPDY protocol carried in binary WebSocket messages).
//!
//! The serving end takes a `Forwarder`: given a port and the client's byte stream, it connects
//! to the pod (the kubelet dials `localhost:<port>` inside the pod's network namespace) and
//! copies until either side ends; its error text goes back on the error stream.

pub mod spdy;
pub mod tunnel;
pub mod websocket;

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::io::{Reader, Writer};

/// The SPDY port-forward protocol.
pub const PROTOCOL_V1: &str = "portforward.k8s.io";
/// The WebSocket sub-protocol prefix of the tunnel (`SPDY/3.1+portforward.k8s.io`).
pub const TUNNEL_PREFIX: &str = "SPDY/3.1+";
/// The kubelet's legacy WebSocket protocols (`""`: none offered).
pub const WEBSOCKET_PROTOCOLS: [&str; 3] = ["v4.channel.k8s.io", "v4.base64.channel.k8s.io", ""];

/// Stream headers.
pub const HEADER_PORT: &str = "port";
pub const HEADER_REQUEST_ID: &str = "requestID";
pub const STREAM_DATA: &str = "data";
pub const STREAM_ERROR: &str = "error";

/// One forwarded connection's byte stream, as a forwarder sees it.
pub struct Duplex {
    pub reader: Reader,
    pub writer: Writer,
}

impl AsyncRead for Duplex {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.reader).poll_read(cx, buf)
    }
}

impl AsyncWrite for Duplex {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.writer).poll_write(cx, data)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.writer).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.writer).poll_shutdown(cx)
    }
}

/// Connects a forwarded stream to the pod. `Err` carries the whole text the client gets on
/// the error stream (the kubelet writes `error forwarding port <p> to pod <name>, uid <uid>:
/// <cause>`).
pub trait Forwarder: Send + Sync + 'static {
    fn forward(
        &self,
        port: u16,
        stream: Duplex,
    ) -> Pin<Box<dyn Future<Output = Result<(), String>> + Send + 'static>>;
}

impl<F, Fut> Forwarder for F
where
    F: Fn(u16, Duplex) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    fn forward(
        &self,
        port: u16,
        stream: Duplex,
    ) -> Pin<Box<dyn Future<Output = Result<(), String>> + Send + 'static>> {
        Box::pin(self(port, stream))
    }
}

/// Copies between a forwarded stream and a connection to the pod until the pod's side ends or
/// the client stops sending, as the kubelet's and containerd's forwarders do.
pub async fn pump<T>(stream: Duplex, target: T) -> io::Result<()>
where
    T: AsyncRead + AsyncWrite + Unpin,
{
    let Duplex {
        mut reader,
        mut writer,
    } = stream;
    let (mut target_read, mut target_write) = tokio::io::split(target);
    let to_pod = crate::io::copy_then_close(&mut reader, &mut target_write);
    let from_pod = crate::io::copy_then_close(&mut target_read, &mut writer);
    tokio::pin!(to_pod, from_pod);
    // The pod closing its side ends the forward; the client closing its side only half-closes.
    tokio::select! {
        r = &mut from_pod => r.map(|_| ()),
        r = &mut to_pod => {
            r?;
            from_pod.await.map(|_| ())
        }
    }
}

/// The ports of a legacy WebSocket request: every value of `key` (the kubelet reads `port`,
/// the API server's own parameter is `ports`), comma lists split, each 1–65535; the kubelet's
/// errors otherwise.
pub fn ports_from_query(query: &str, key: &str) -> Result<Vec<u16>, String> {
    let values: Vec<String> = crate::remotecommand::form_pairs(query)
        .filter(|(k, _)| k == key)
        .map(|(_, v)| v)
        .collect();
    if values.is_empty() {
        return Err(format!("query parameter {key:?} is required"));
    }
    let mut ports = Vec::new();
    for value in values {
        if value.is_empty() {
            return Err(format!("query parameter {key:?} cannot be empty"));
        }
        for p in value.split(',') {
            let port: u16 = p
                .parse()
                .map_err(|e| format!("unable to parse {value:?} as a port: {e}"))?;
            if port < 1 {
                return Err(format!("port {value:?} must be > 0"));
            }
            ports.push(port);
        }
    }
    Ok(ports)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_come_from_repeated_and_comma_separated_values() {
        assert_eq!(
            ports_from_query("port=80,443&port=8080", "port").unwrap(),
            [80, 443, 8080]
        );
        assert_eq!(ports_from_query("ports=1", "ports").unwrap(), [1]);
        assert_eq!(
            ports_from_query("x=1", "port").unwrap_err(),
            "query parameter \"port\" is required"
        );
        assert!(ports_from_query("port=0", "port").is_err());
        assert!(ports_from_query("port=70000", "port").is_err());
        assert!(ports_from_query("port=", "port").is_err());
    }
}
