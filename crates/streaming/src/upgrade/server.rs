//! The server side of an upgrade: negotiate, answer `101` or refuse as upstream does, then
//! take the upgraded connection from hyper.
//!
//! Refusals matter to clients: kubectl 1.30+ falls back from WebSocket to SPDY on any non-101
//! answer, and client-go reports a SPDY refusal's body. So a SPDY refusal is Go's `http.Error`
//! (plain text, a trailing newline), and a WebSocket one is `403` with no body, which is what
//! `golang.org/x/net/websocket` answers when the sub-protocol handshake fails.

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Response, StatusCode, header};
use hyper::upgrade::{OnUpgrade, Upgraded};
use hyper_util::rt::TokioIo;
use thiserror::Error;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};

use super::{
    HEADER_ACCEPTED_PROTOCOL_VERSIONS, HEADER_PROTOCOL_VERSION, SPDY_31, is_spdy_request,
    is_upgrade_request, negotiate, offered_stream_protocols, offered_websocket_protocols,
};

/// Why an upgrade request is refused; `response()` is what upstream sends for it.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum UpgradeError {
    /// A SPDY request without `X-Stream-Protocol-Version` (400).
    #[error("unable to upgrade: X-Stream-Protocol-Version is required")]
    ProtocolRequired,
    /// No SPDY protocol in common (403, with `X-Accepted-Stream-Protocol-Versions`).
    #[error(
        "unable to upgrade: unable to negotiate protocol: client supports {}, server accepts {}",
        go_list(.client),
        go_list(.server)
    )]
    NoCommonProtocol {
        client: Vec<String>,
        server: Vec<String>,
    },
    /// `Connection: Upgrade` and `Upgrade: SPDY/3.1` are missing (400).
    #[error("unable to upgrade: missing upgrade headers in request")]
    MissingUpgradeHeaders,
    /// No WebSocket sub-protocol in common (403, empty body).
    #[error(
        "requested protocol(s) are not supported: {}; supports {}",
        go_list(.client),
        go_list(.server)
    )]
    NoCommonWebSocketProtocol {
        client: Vec<String>,
        server: Vec<String>,
    },
    /// A WebSocket request without a key or with another version than 13 (400).
    #[error("bad websocket handshake: {0}")]
    BadWebSocketRequest(&'static str),
}

impl UpgradeError {
    /// The HTTP status upstream answers with.
    pub fn status(&self) -> StatusCode {
        match self {
            UpgradeError::ProtocolRequired
            | UpgradeError::MissingUpgradeHeaders
            | UpgradeError::BadWebSocketRequest(_) => StatusCode::BAD_REQUEST,
            UpgradeError::NoCommonProtocol { .. }
            | UpgradeError::NoCommonWebSocketProtocol { .. } => StatusCode::FORBIDDEN,
        }
    }

    /// The full refusal, headers and body as upstream writes them.
    pub fn response(&self) -> Response<Bytes> {
        let mut builder = Response::builder().status(self.status());
        match self {
            UpgradeError::NoCommonWebSocketProtocol { .. } => {
                return builder.body(Bytes::new()).unwrap_or_default();
            }
            UpgradeError::BadWebSocketRequest(_) => {
                builder = builder.header("Sec-WebSocket-Version", "13");
            }
            UpgradeError::NoCommonProtocol { server, .. } => {
                for p in server {
                    builder = builder.header(HEADER_ACCEPTED_PROTOCOL_VERSIONS, p.as_str());
                }
            }
            _ => {}
        }
        go_http_error(builder, &self.to_string())
    }
}

/// A plain-text error as Go's `http.Error` writes it.
pub fn go_http_error(builder: http::response::Builder, message: &str) -> Response<Bytes> {
    builder
        .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .header("X-Content-Type-Options", "nosniff")
        .body(Bytes::from(format!("{message}\n")))
        .unwrap_or_default()
}

/// Go's `%v` of a string slice: `[a b c]`.
pub(crate) fn go_list(items: &[String]) -> String {
    format!("[{}]", items.join(" "))
}

/// Negotiates a SPDY upgrade (protocol first, then the upgrade headers, in the kubelet's
/// order) and returns the chosen protocol with the `101` to send.
pub fn accept_spdy(
    headers: &HeaderMap,
    supported: &[&str],
) -> Result<(String, Response<Bytes>), UpgradeError> {
    let offered = offered_stream_protocols(headers);
    if offered.is_empty() {
        return Err(UpgradeError::ProtocolRequired);
    }
    let Some(chosen) = negotiate(&offered, supported) else {
        return Err(UpgradeError::NoCommonProtocol {
            client: offered,
            server: supported.iter().map(|s| s.to_string()).collect(),
        });
    };
    if !is_spdy_request(headers) {
        return Err(UpgradeError::MissingUpgradeHeaders);
    }
    let response = Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header(header::CONNECTION, "Upgrade")
        .header(header::UPGRADE, SPDY_31)
        .header(HEADER_PROTOCOL_VERSION, chosen)
        .body(Bytes::new())
        .unwrap_or_default();
    Ok((chosen.to_string(), response))
}

/// Negotiates a WebSocket upgrade. `""` in `supported` accepts a client that offers no
/// sub-protocol (the kubelet serves that as `channel.k8s.io`). Returns the chosen protocol
/// (`""` for none) and the `101` to send.
pub fn accept_websocket(
    headers: &HeaderMap,
    supported: &[&str],
) -> Result<(String, Response<Bytes>), UpgradeError> {
    if !is_upgrade_request(headers) {
        return Err(UpgradeError::BadWebSocketRequest("missing upgrade headers"));
    }
    let key = headers
        .get("sec-websocket-key")
        .ok_or(UpgradeError::BadWebSocketRequest(
            "missing Sec-WebSocket-Key",
        ))?;
    if headers
        .get("sec-websocket-version")
        .map(HeaderValue::as_bytes)
        != Some(b"13")
    {
        return Err(UpgradeError::BadWebSocketRequest("unsupported version"));
    }
    let offered = offered_websocket_protocols(headers);
    let chosen = if offered.is_empty() {
        supported.iter().find(|s| s.is_empty()).copied()
    } else {
        negotiate(&offered, supported)
    };
    let Some(chosen) = chosen else {
        return Err(UpgradeError::NoCommonWebSocketProtocol {
            client: offered,
            server: supported.iter().map(|s| s.to_string()).collect(),
        });
    };
    let mut builder = Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header(header::CONNECTION, "Upgrade")
        .header(header::UPGRADE, "websocket")
        .header("Sec-WebSocket-Accept", derive_accept_key(key.as_bytes()));
    if !chosen.is_empty() {
        builder = builder.header("Sec-WebSocket-Protocol", chosen);
    }
    Ok((
        chosen.to_string(),
        builder.body(Bytes::new()).unwrap_or_default(),
    ))
}

/// The upgraded connection, once hyper has sent the `101`.
pub async fn upgraded(on: OnUpgrade) -> Result<TokioIo<Upgraded>, hyper::Error> {
    Ok(TokioIo::new(on.await?))
}

/// The WebSocket on an upgraded connection (server role). Frames are capped well above what
/// clients send (client-go writes 32 KiB) so a peer cannot make one message cost much.
pub async fn websocket(on: OnUpgrade) -> Result<WebSocketStream<TokioIo<Upgraded>>, hyper::Error> {
    let io = upgraded(on).await?;
    Ok(WebSocketStream::from_raw_socket(io, Role::Server, Some(websocket_config())).await)
}

/// WebSocket limits used on both ends.
pub fn websocket_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .max_message_size(Some(16 << 20))
        .max_frame_size(Some(16 << 20))
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

    const SPDY: [(&str, &str); 2] = [("Connection", "Upgrade"), ("Upgrade", "SPDY/3.1")];

    #[test]
    fn a_spdy_upgrade_answers_the_first_offered_supported_protocol() {
        let mut h = headers(&SPDY);
        h.append(
            HEADER_PROTOCOL_VERSION,
            "v5.channel.k8s.io".parse().unwrap(),
        );
        h.append(
            HEADER_PROTOCOL_VERSION,
            "v4.channel.k8s.io".parse().unwrap(),
        );
        let (chosen, response) =
            accept_spdy(&h, &["v4.channel.k8s.io", "v3.channel.k8s.io"]).unwrap();
        assert_eq!(chosen, "v4.channel.k8s.io");
        assert_eq!(response.status(), 101);
        assert_eq!(response.headers()["upgrade"], "SPDY/3.1");
        assert_eq!(response.headers()["connection"], "Upgrade");
        assert_eq!(
            response.headers()[HEADER_PROTOCOL_VERSION],
            "v4.channel.k8s.io"
        );
    }

    #[test]
    fn spdy_refusals_carry_upstreams_status_and_text() {
        let e = accept_spdy(&headers(&SPDY), &["portforward.k8s.io"]).unwrap_err();
        assert_eq!(e, UpgradeError::ProtocolRequired);
        let r = e.response();
        assert_eq!(r.status(), 400);
        assert_eq!(
            r.body(),
            "unable to upgrade: X-Stream-Protocol-Version is required\n"
        );
        assert_eq!(r.headers()["content-type"], "text/plain; charset=utf-8");

        let mut h = headers(&SPDY);
        h.append(
            HEADER_PROTOCOL_VERSION,
            "v9.channel.k8s.io".parse().unwrap(),
        );
        let r = accept_spdy(&h, &["v4.channel.k8s.io", "v3.channel.k8s.io"])
            .unwrap_err()
            .response();
        assert_eq!(r.status(), 403);
        assert_eq!(
            r.body(),
            "unable to upgrade: unable to negotiate protocol: client supports \
             [v9.channel.k8s.io], server accepts [v4.channel.k8s.io v3.channel.k8s.io]\n"
        );
        let accepted: Vec<_> = r
            .headers()
            .get_all(HEADER_ACCEPTED_PROTOCOL_VERSIONS)
            .iter()
            .collect();
        assert_eq!(accepted, ["v4.channel.k8s.io", "v3.channel.k8s.io"]);

        let h = headers(&[(HEADER_PROTOCOL_VERSION, "portforward.k8s.io")]);
        assert_eq!(
            accept_spdy(&h, &["portforward.k8s.io"]).unwrap_err(),
            UpgradeError::MissingUpgradeHeaders
        );
    }

    #[test]
    fn a_websocket_upgrade_negotiates_or_refuses_without_a_body() {
        let base = [
            ("Connection", "Upgrade"),
            ("Upgrade", "websocket"),
            ("Sec-WebSocket-Version", "13"),
            ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ];
        let mut h = headers(&base);
        h.append(
            "Sec-WebSocket-Protocol",
            "v5.channel.k8s.io, v4.channel.k8s.io".parse().unwrap(),
        );
        let (chosen, r) = accept_websocket(&h, &["v4.channel.k8s.io", "channel.k8s.io"]).unwrap();
        assert_eq!(chosen, "v4.channel.k8s.io");
        assert_eq!(r.status(), 101);
        // RFC 6455's own example key.
        assert_eq!(
            r.headers()["sec-websocket-accept"],
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
        assert_eq!(r.headers()["sec-websocket-protocol"], "v4.channel.k8s.io");

        let e = accept_websocket(&h, &["v5.channel.k8s.io"].map(|_| "x")).unwrap_err();
        assert_eq!(e.response().status(), 403);
        assert!(e.response().body().is_empty());

        // No sub-protocol offered: accepted only where "" is supported, answered without one.
        let plain = headers(&base);
        let (chosen, r) = accept_websocket(&plain, &["", "channel.k8s.io"]).unwrap();
        assert_eq!(chosen, "");
        assert!(r.headers().get("sec-websocket-protocol").is_none());
        assert!(accept_websocket(&plain, &["v5.channel.k8s.io"]).is_err());
    }
}
