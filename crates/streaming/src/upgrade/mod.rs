//! HTTP/1.1 connection upgrades on hyper 1, for SPDY/3.1 and WebSocket, both ends.
//!
//! Kubernetes streams start as an HTTP request that the server answers with `101 Switching
//! Protocols`; the sub-protocol (remotecommand version, port-forward) is negotiated on the way:
//! SPDY offers it in `X-Stream-Protocol-Version` headers, WebSocket in
//! `Sec-WebSocket-Protocol`. In both the server picks the first protocol the client offers that
//! it supports (`httpstream.Handshake`, `wsstream` `handshake`).
//!
//! `server` answers upgrade requests (and says no with upstream's status and text); `client`
//! dials them over any connected transport (`connect` makes one over TCP or TLS).

pub mod client;
pub mod server;

use http::HeaderMap;
use tokio::io::{AsyncRead, AsyncWrite};

pub use client::{Connect, DialError, Target, TcpConnect};
pub use server::UpgradeError;

/// The SPDY version in the `Upgrade` header.
pub const SPDY_31: &str = "SPDY/3.1";
/// The header a SPDY client offers protocols in, and the server answers with its choice.
pub const HEADER_PROTOCOL_VERSION: &str = "X-Stream-Protocol-Version";
/// The header a server lists its protocols in when none of the client's fit.
pub const HEADER_ACCEPTED_PROTOCOL_VERSIONS: &str = "X-Accepted-Stream-Protocol-Versions";

/// A byte stream an upgraded connection runs over.
pub trait Io: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Io for T {}

/// A boxed transport.
pub type BoxIo = Box<dyn Io>;

/// Whether the request asks for a connection upgrade (`Connection` contains `upgrade`).
pub fn is_upgrade_request(headers: &HeaderMap) -> bool {
    headers
        .get_all(http::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.to_ascii_lowercase().contains("upgrade"))
}

/// Whether the request is a WebSocket upgrade (`Upgrade: websocket` and `Connection: upgrade`).
pub fn is_websocket_request(headers: &HeaderMap) -> bool {
    let websocket = headers
        .get(http::header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
    websocket && is_upgrade_request(headers)
}

/// Whether the request is a SPDY/3.1 upgrade.
pub fn is_spdy_request(headers: &HeaderMap) -> bool {
    let spdy = headers
        .get(http::header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().contains("spdy/3.1"));
    spdy && is_upgrade_request(headers)
}

/// The protocols a SPDY client offers: every `X-Stream-Protocol-Version` value, comma lists
/// split and trimmed, empty entries dropped.
pub fn offered_stream_protocols(headers: &HeaderMap) -> Vec<String> {
    comma_values(headers, HEADER_PROTOCOL_VERSION)
}

/// The sub-protocols a WebSocket client offers (`Sec-WebSocket-Protocol`, comma lists split).
pub fn offered_websocket_protocols(headers: &HeaderMap) -> Vec<String> {
    comma_values(headers, "sec-websocket-protocol")
}

fn comma_values(headers: &HeaderMap, name: &str) -> Vec<String> {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

/// The first client-offered protocol the server supports.
pub fn negotiate<'a>(offered: &[String], supported: &[&'a str]) -> Option<&'a str> {
    offered
        .iter()
        .find_map(|o| supported.iter().find(|s| **s == o.as_str()).copied())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (n, v) in pairs {
            h.append(
                http::HeaderName::from_bytes(n.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    #[test]
    fn upgrade_kinds_are_told_apart_case_insensitively() {
        let spdy = headers(&[("Connection", "Upgrade"), ("Upgrade", "SPDY/3.1")]);
        assert!(is_spdy_request(&spdy) && !is_websocket_request(&spdy));
        let ws = headers(&[
            ("connection", "keep-alive, upgrade"),
            ("upgrade", "WebSocket"),
        ]);
        assert!(is_websocket_request(&ws) && !is_spdy_request(&ws));
        assert!(!is_upgrade_request(&headers(&[("Upgrade", "websocket")])));
    }

    #[test]
    fn the_first_offered_protocol_the_server_supports_wins() {
        let h = headers(&[
            ("X-Stream-Protocol-Version", "v5.channel.k8s.io"),
            (
                "X-Stream-Protocol-Version",
                "v4.channel.k8s.io, v3.channel.k8s.io",
            ),
            ("X-Stream-Protocol-Version", " ,channel.k8s.io"),
        ]);
        let offered = offered_stream_protocols(&h);
        assert_eq!(
            offered,
            [
                "v5.channel.k8s.io",
                "v4.channel.k8s.io",
                "v3.channel.k8s.io",
                "channel.k8s.io"
            ]
        );
        assert_eq!(
            negotiate(&offered, &["channel.k8s.io", "v4.channel.k8s.io"]),
            Some("v4.channel.k8s.io")
        );
        assert_eq!(negotiate(&offered, &["portforward.k8s.io"]), None);
    }
}
