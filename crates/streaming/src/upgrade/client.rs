//! The client side of an upgrade: dial a SPDY (`POST`, `Upgrade: SPDY/3.1`, one
//! `X-Stream-Protocol-Version` per offered protocol) or WebSocket (`GET`) upgrade over a
//! connected transport, and return the negotiated protocol with the upgraded connection.
//!
//! A refusal comes back as `DialError::Status` with the status, headers and (capped) body, so
//! a caller can decode a `Status` from it or fall back from WebSocket to SPDY as kubectl does on
//! any non-101 answer. `TcpConnect` makes the transport over TCP, or TLS for `https` targets
//! (ALPN forced to HTTP/1.1: upgrades do not exist in HTTP/2).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode, Uri, header};
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::rt::TokioIo;
use thiserror::Error;
use tokio::net::TcpStream;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::{self, handshake::client::generate_key};

use super::server::websocket_config;
use super::{BoxIo, HEADER_PROTOCOL_VERSION, Io, SPDY_31};
use crate::spdy;

/// The most of a refusal's body that is kept.
const MAX_ERROR_BODY: usize = 64 << 10;

/// Where to dial: the request URI (scheme and authority pick the transport, path and query
/// the target) and extra request headers (authorization, impersonation...).
#[derive(Clone, Debug)]
pub struct Target {
    pub uri: Uri,
    pub headers: HeaderMap,
}

impl Target {
    /// A target with no extra headers.
    pub fn new(uri: Uri) -> Self {
        Self {
            uri,
            headers: HeaderMap::new(),
        }
    }
}

/// Opens the transport to a target: TCP, TLS, an in-memory pipe in tests.
pub trait Connect: Send + Sync {
    fn connect<'a>(
        &'a self,
        uri: &'a Uri,
    ) -> Pin<Box<dyn Future<Output = io::Result<BoxIo>> + Send + 'a>>;
}

/// TCP to the URI's authority; TLS on top for `https` and `wss`.
#[derive(Clone, Default)]
pub struct TcpConnect {
    /// The TLS client configuration (trust roots, client certificate). Required for `https`.
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

impl Connect for TcpConnect {
    fn connect<'a>(
        &'a self,
        uri: &'a Uri,
    ) -> Pin<Box<dyn Future<Output = io::Result<BoxIo>> + Send + 'a>> {
        Box::pin(async move {
            let host = uri
                .host()
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "uri has no host"))?;
            let secure = matches!(uri.scheme_str(), Some("https" | "wss"));
            let port = uri.port_u16().unwrap_or(if secure { 443 } else { 80 });
            let bare = host.trim_start_matches('[').trim_end_matches(']');
            let tcp = TcpStream::connect((bare, port)).await?;
            tcp.set_nodelay(true)?;
            if !secure {
                return Ok(Box::new(tcp) as BoxIo);
            }
            let config = self.tls.clone().ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "https target without a TLS config",
                )
            })?;
            let mut config = (*config).clone();
            config.alpn_protocols = vec![b"http/1.1".to_vec()];
            let name = rustls::pki_types::ServerName::try_from(bare.to_string())
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
            let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
                .connect(name, tcp)
                .await?;
            Ok(Box::new(tls) as BoxIo)
        })
    }
}

/// Why a dial failed.
#[derive(Debug, Error)]
pub enum DialError {
    /// The transport could not be opened.
    #[error("unable to connect to {uri}: {source}")]
    Connect {
        uri: Uri,
        #[source]
        source: io::Error,
    },
    /// HTTP failed before a response.
    #[error("upgrade request failed: {0}")]
    Http(#[from] hyper::Error),
    /// The server answered without upgrading (client-go's `UpgradeFailureError`).
    #[error("unable to upgrade connection: {}", String::from_utf8_lossy(.body).trim())]
    Status {
        status: StatusCode,
        headers: HeaderMap,
        body: Bytes,
    },
    /// A 101 without the upgrade headers of the protocol asked for.
    #[error("unable to upgrade: missing upgrade headers in response")]
    MissingUpgradeHeaders,
    /// The server chose a protocol the client did not offer.
    #[error("server chose protocol {chosen:?}, not one of {offered:?}")]
    ProtocolNotOffered {
        chosen: String,
        offered: Vec<String>,
    },
    /// The WebSocket handshake failed otherwise.
    #[error("websocket handshake failed: {0}")]
    WebSocket(#[source] Box<tungstenite::Error>),
}

impl DialError {
    /// Whether the server refused the upgrade with an HTTP answer (kubectl falls back to
    /// SPDY on this, and on nothing else).
    pub fn is_upgrade_failure(&self) -> bool {
        matches!(
            self,
            DialError::Status { .. }
                | DialError::MissingUpgradeHeaders
                | DialError::ProtocolNotOffered { .. }
        )
    }
}

/// Dials a SPDY/3.1 upgrade and starts a client connection on it.
pub async fn spdy(
    connector: &dyn Connect,
    target: &Target,
    protocols: &[&str],
    config: spdy::Config,
) -> Result<(String, spdy::Connection, spdy::Incoming), DialError> {
    let io = connector
        .connect(&target.uri)
        .await
        .map_err(|source| DialError::Connect {
            uri: target.uri.clone(),
            source,
        })?;
    let (protocol, upgraded) = spdy_over(io, target, protocols).await?;
    let (conn, incoming) = spdy::Connection::new(upgraded, spdy::Role::Client, config);
    Ok((protocol, conn, incoming))
}

/// Sends the SPDY upgrade request over `io` and returns the negotiated protocol (`""` if the
/// server named none) and the upgraded transport.
pub async fn spdy_over<T: Io>(
    io: T,
    target: &Target,
    protocols: &[&str],
) -> Result<(String, TokioIo<hyper::upgrade::Upgraded>), DialError> {
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io)).await?;
    tokio::spawn(async move {
        if let Err(e) = conn.with_upgrades().await {
            tracing::debug!(error = %e, "upgrade connection ended");
        }
    });
    let mut builder = Request::builder()
        .method(Method::POST)
        .uri(origin_form(&target.uri))
        .header(header::HOST, host_header(&target.uri))
        .header(header::CONNECTION, "Upgrade")
        .header(header::UPGRADE, SPDY_31);
    for p in protocols {
        builder = builder.header(HEADER_PROTOCOL_VERSION, *p);
    }
    let mut request = builder
        .body(Empty::<Bytes>::new())
        .map_err(|_| DialError::MissingUpgradeHeaders)?;
    merge_headers(request.headers_mut(), &target.headers);
    let response = sender.send_request(request).await?;
    if response.status() != StatusCode::SWITCHING_PROTOCOLS {
        return Err(refusal(response).await);
    }
    let has = |name: header::HeaderName, want: &str| {
        response
            .headers()
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| v.to_ascii_lowercase().contains(want))
    };
    if !has(header::CONNECTION, "upgrade") || !has(header::UPGRADE, "spdy/3.1") {
        return Err(DialError::MissingUpgradeHeaders);
    }
    let chosen = response
        .headers()
        .get(HEADER_PROTOCOL_VERSION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .trim()
        .to_string();
    if !chosen.is_empty() && !protocols.contains(&chosen.as_str()) {
        return Err(DialError::ProtocolNotOffered {
            chosen,
            offered: protocols.iter().map(|s| s.to_string()).collect(),
        });
    }
    let upgraded = hyper::upgrade::on(response).await?;
    Ok((chosen, TokioIo::new(upgraded)))
}

/// Dials a WebSocket upgrade offering `protocols`; returns the chosen one (`""` for none).
pub async fn websocket(
    connector: &dyn Connect,
    target: &Target,
    protocols: &[&str],
) -> Result<(String, WebSocketStream<BoxIo>), DialError> {
    let io = connector
        .connect(&target.uri)
        .await
        .map_err(|source| DialError::Connect {
            uri: target.uri.clone(),
            source,
        })?;
    websocket_over(io, target, protocols).await
}

/// Sends the WebSocket upgrade request over `io`.
pub async fn websocket_over<T: Io>(
    io: T,
    target: &Target,
    protocols: &[&str],
) -> Result<(String, WebSocketStream<T>), DialError> {
    let ws_uri = format!(
        "ws://{}{}",
        host_header(&target.uri),
        origin_form(&target.uri)
    );
    let mut builder = Request::builder()
        .method(Method::GET)
        .uri(ws_uri)
        .header(header::HOST, host_header(&target.uri))
        .header(header::CONNECTION, "Upgrade")
        .header(header::UPGRADE, "websocket")
        .header("Sec-WebSocket-Version", "13")
        .header("Sec-WebSocket-Key", generate_key());
    if !protocols.is_empty() {
        builder = builder.header("Sec-WebSocket-Protocol", protocols.join(", "));
    }
    let mut request = builder
        .body(())
        .map_err(|_| DialError::MissingUpgradeHeaders)?;
    merge_headers(request.headers_mut(), &target.headers);
    match tokio_tungstenite::client_async_with_config(request, io, Some(websocket_config())).await {
        Ok((ws, response)) => {
            let chosen = response
                .headers()
                .get("sec-websocket-protocol")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string();
            Ok((chosen, ws))
        }
        Err(tungstenite::Error::Http(response)) => {
            let (parts, body) = response.into_parts();
            let mut body = body.unwrap_or_default();
            body.truncate(MAX_ERROR_BODY);
            Err(DialError::Status {
                status: parts.status,
                headers: parts.headers,
                body: Bytes::from(body),
            })
        }
        Err(tungstenite::Error::Protocol(
            tungstenite::error::ProtocolError::SecWebSocketSubProtocolError(_),
        )) => Err(DialError::ProtocolNotOffered {
            chosen: String::new(),
            offered: protocols.iter().map(|s| s.to_string()).collect(),
        }),
        Err(e) => Err(DialError::WebSocket(Box::new(e))),
    }
}

async fn refusal(response: http::Response<hyper::body::Incoming>) -> DialError {
    let (parts, body) = response.into_parts();
    let body = match Limited::new(body, MAX_ERROR_BODY).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => Bytes::new(),
    };
    DialError::Status {
        status: parts.status,
        headers: parts.headers,
        body,
    }
}

fn origin_form(uri: &Uri) -> String {
    uri.path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".to_string())
}

fn host_header(uri: &Uri) -> String {
    uri.authority()
        .map(|a| a.as_str().to_string())
        .unwrap_or_else(|| "localhost".to_string())
}

fn merge_headers(into: &mut HeaderMap, extra: &HeaderMap) {
    for (name, value) in extra {
        into.append(name.clone(), value.clone());
    }
    // An upgrade carries no body.
    into.remove(header::CONTENT_LENGTH);
}
