//! The reverse proxy: HTTP and HTTPS listeners (HTTP/1.1 and HTTP/2), each request routed by
//! the [`Table`] to a ready endpoint of its backend Service (round-robin), with what
//! ingress-nginx does around it: `X-Forwarded-*` and `X-Real-IP` headers, hop-by-hop headers
//! dropped, the body limit (413), HTTPS redirection of hosts with TLS (308), 503 when a
//! backend has no ready endpoint, 502/504 when it fails or is too slow, the next endpoint
//! tried when one refuses the connection (for requests whose body is small enough to keep),
//! and upgraded connections (WebSocket) carried through.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Request, Response, StatusCode, Uri};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use parking_lot::RwLock;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::rules::{BackendRef, Decision, Table};
use crate::tls::Certificates;

type BoxError = Box<dyn std::error::Error + Send + Sync>;
/// The body type of requests sent upstream and responses sent back.
pub type Body = BoxBody<Bytes, BoxError>;

/// ingress-nginx's `proxy-connect-timeout` default.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// ingress-nginx's `proxy-read-timeout` default (until the response's headers).
pub const READ_TIMEOUT: Duration = Duration::from_secs(60);
/// Request bodies up to this size are read before forwarding, so they can be retried.
pub const RETRY_BUFFER: u64 = 64 << 10;
/// Connections served at once per listener; more wait in the kernel's backlog.
pub const MAX_CONNECTIONS: usize = 8192;

/// What the proxy routes by: the table and the ready endpoints of every backend it names.
#[derive(Debug, Default)]
pub struct Routes {
    pub table: Table,
    pub endpoints: HashMap<BackendRef, Vec<SocketAddr>>,
}

/// The proxy, shared by its listeners.
pub struct Proxy {
    routes: RwLock<Arc<Routes>>,
    pub certificates: Arc<Certificates>,
    client: Client<HttpConnector, Body>,
    next: AtomicUsize,
}

fn text(status: StatusCode, body: &'static str) -> Response<Body> {
    let mut r = Response::new(
        Full::new(Bytes::from_static(body.as_bytes()))
            .map_err(|never| match never {})
            .boxed(),
    );
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// Headers meaningful for one connection only (RFC 9110 §7.6.1), never forwarded.
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
];

fn strip_hop_by_hop(h: &mut HeaderMap) {
    // Headers the Connection header names are hop-by-hop too.
    let named: Vec<HeaderName> = h
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|n| HeaderName::from_bytes(n.trim().as_bytes()).ok())
        .collect();
    for n in named {
        h.remove(n);
    }
    for n in HOP_BY_HOP {
        h.remove(n);
    }
    h.remove(header::UPGRADE);
}

/// The request's host without its port (`Host` or the HTTP/2 authority).
fn request_host<B>(req: &Request<B>) -> Option<String> {
    let raw = req
        .uri()
        .authority()
        .map(|a| a.as_str().to_string())
        .or_else(|| {
            req.headers()
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .map(str::to_string)
        })?;
    let host = if let Some(rest) = raw.strip_prefix('[') {
        rest.split(']').next().unwrap_or("").to_string()
    } else {
        raw.rsplit_once(':')
            .map(|(h, _)| h.to_string())
            .unwrap_or(raw)
    };
    Some(host)
}

impl Proxy {
    pub fn new(certificates: Arc<Certificates>) -> Arc<Self> {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(60))
            .pool_timer(TokioTimer::new())
            .build(connector);
        Arc::new(Proxy {
            routes: RwLock::new(Arc::new(Routes::default())),
            certificates,
            client,
            next: AtomicUsize::new(0),
        })
    }

    /// Replaces what the proxy routes by.
    pub fn set_routes(&self, routes: Routes) {
        *self.routes.write() = Arc::new(routes);
    }

    pub fn routes(&self) -> Arc<Routes> {
        self.routes.read().clone()
    }

    /// Serves plain HTTP on `listener` until `shutdown`.
    pub async fn serve_http(
        self: Arc<Self>,
        listener: TcpListener,
        shutdown: impl std::future::Future<Output = ()>,
    ) {
        self.serve(listener, None, shutdown).await
    }

    /// Serves HTTPS on `listener` until `shutdown`.
    pub async fn serve_https(
        self: Arc<Self>,
        listener: TcpListener,
        shutdown: impl std::future::Future<Output = ()>,
    ) {
        let acceptor =
            tokio_rustls::TlsAcceptor::from(crate::tls::server_config(self.certificates.clone()));
        self.serve(listener, Some(acceptor), shutdown).await
    }

    async fn serve(
        self: Arc<Self>,
        listener: TcpListener,
        tls: Option<tokio_rustls::TlsAcceptor>,
        shutdown: impl std::future::Future<Output = ()>,
    ) {
        let limit = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        tokio::pin!(shutdown);
        loop {
            let permit = tokio::select! {
                p = limit.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => return },
                () = &mut shutdown => return,
            };
            let (stream, peer) = tokio::select! {
                a = listener.accept() => match a {
                    Ok(a) => a,
                    Err(e) => {
                        tracing::debug!(error = %e, "accepting a connection");
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        continue;
                    }
                },
                () = &mut shutdown => return,
            };
            let _ = stream.set_nodelay(true);
            let proxy = self.clone();
            let tls = tls.clone();
            tokio::spawn(async move {
                let _permit = permit;
                match tls {
                    None => proxy.connection(TokioIo::new(stream), peer, false).await,
                    Some(acceptor) => {
                        let accepted =
                            tokio::time::timeout(Duration::from_secs(10), acceptor.accept(stream))
                                .await;
                        match accepted {
                            Ok(Ok(s)) => proxy.connection(TokioIo::new(s), peer, true).await,
                            Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake"),
                            Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                        }
                    }
                }
            });
        }
    }

    async fn connection<IO>(self: Arc<Self>, io: IO, peer: SocketAddr, https: bool)
    where
        IO: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    {
        let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
            let proxy = self.clone();
            async move { Ok::<_, Infallible>(proxy.handle(req, peer, https).await) }
        });
        let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(Duration::from_secs(60));
        builder.http2().timer(TokioTimer::new());
        if let Err(e) = builder.serve_connection_with_upgrades(io, svc).await {
            tracing::debug!(%peer, error = %e, "connection ended with an error");
        }
    }

    /// Answers one request.
    pub async fn handle(
        &self,
        mut req: Request<Incoming>,
        peer: SocketAddr,
        https: bool,
    ) -> Response<Body> {
        let routes = self.routes();
        let host = request_host(&req).unwrap_or_default();
        let path = req.uri().path().to_string();
        let (backend, options) = match routes.table.decide(&host, &path) {
            Decision::NotFound => return text(StatusCode::NOT_FOUND, "default backend - 404\n"),
            Decision::Backend(b, o) => (b, o),
        };
        if !https && options.ssl_redirect && routes.table.tls_for(&host).is_some() {
            let pq = req
                .uri()
                .path_and_query()
                .map(|p| p.as_str())
                .unwrap_or("/");
            let mut r = text(StatusCode::PERMANENT_REDIRECT, "");
            if let Ok(v) = HeaderValue::from_str(&format!("https://{host}{pq}")) {
                r.headers_mut().insert(header::LOCATION, v);
            }
            return r;
        }
        let declared = req
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if options.max_body > 0 && declared.is_some_and(|n| n > options.max_body) {
            return text(
                StatusCode::PAYLOAD_TOO_LARGE,
                "413 Request Entity Too Large\n",
            );
        }
        let endpoints = routes
            .endpoints
            .get(backend)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        if endpoints.is_empty() {
            tracing::debug!(%backend, "no ready endpoint");
            return text(
                StatusCode::SERVICE_UNAVAILABLE,
                "503 Service Temporarily Unavailable\n",
            );
        }
        let upgrade = req.headers().get(header::UPGRADE).cloned();
        let client_upgrade = upgrade.as_ref().map(|_| hyper::upgrade::on(&mut req));
        let (mut parts, body) = req.into_parts();
        let pq = parts
            .uri
            .path_and_query()
            .map(|p| p.as_str().to_string())
            .unwrap_or_else(|| "/".into());
        strip_hop_by_hop(&mut parts.headers);
        forwarded_headers(&mut parts.headers, &host, peer, https);
        if !parts.headers.contains_key(header::HOST)
            && let Ok(v) = HeaderValue::from_str(&host)
        {
            parts.headers.insert(header::HOST, v);
        }
        if let Some(u) = &upgrade {
            parts.headers.insert(header::UPGRADE, u.clone());
            parts
                .headers
                .insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        }
        let limit = if options.max_body > 0 {
            usize::try_from(options.max_body).unwrap_or(usize::MAX)
        } else {
            usize::MAX
        };
        // A small body of known length is read first, so a refused connection can be tried
        // on the next endpoint (nginx's `proxy_next_upstream error`); a larger or chunked one
        // streams through, to one endpoint.
        let small =
            hyper::body::Body::is_end_stream(&body) || declared.is_some_and(|n| n <= RETRY_BUFFER);
        let (buffered, mut streaming): (Option<Bytes>, Option<Body>) = if small {
            match Limited::new(body, limit).collect().await {
                Ok(b) => (Some(b.to_bytes()), None),
                Err(e) if e.is::<http_body_util::LengthLimitError>() => {
                    return text(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        "413 Request Entity Too Large\n",
                    );
                }
                Err(_) => return text(StatusCode::BAD_REQUEST, "400 Bad Request\n"),
            }
        } else {
            (None, Some(Limited::new(body, limit).boxed()))
        };
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let attempts = if buffered.is_some() {
            endpoints.len()
        } else {
            1
        };
        let mut last = None;
        for i in 0..attempts {
            let to = endpoints[(start + i) % endpoints.len()];
            let Ok(uri) = format!("http://{to}{pq}").parse::<Uri>() else {
                return text(StatusCode::BAD_REQUEST, "400 Bad Request\n");
            };
            let mut out = Request::builder()
                .method(parts.method.clone())
                .uri(uri)
                .version(http::Version::HTTP_11)
                .body(match &buffered {
                    Some(b) => Full::new(b.clone()).map_err(|never| match never {}).boxed(),
                    None => streaming.take().unwrap_or_else(empty),
                })
                .expect("a request from parts that were valid");
            *out.headers_mut() = parts.headers.clone();
            match tokio::time::timeout(READ_TIMEOUT, self.client.request(out)).await {
                Err(_) => return text(StatusCode::GATEWAY_TIMEOUT, "504 Gateway Time-out\n"),
                Ok(Ok(resp)) => return respond(resp, client_upgrade).await,
                Ok(Err(e)) => {
                    tracing::debug!(endpoint = %to, %backend, error = %e, "upstream failed");
                    if limited(&e) {
                        return text(
                            StatusCode::PAYLOAD_TOO_LARGE,
                            "413 Request Entity Too Large\n",
                        );
                    }
                    let connect = e.is_connect();
                    last = Some(e);
                    if !connect {
                        break;
                    }
                }
            }
        }
        tracing::debug!(%backend, error = ?last, "no endpoint answered");
        text(StatusCode::BAD_GATEWAY, "502 Bad Gateway\n")
    }
}

fn empty() -> Body {
    http_body_util::Empty::new()
        .map_err(|never| match never {})
        .boxed()
}

/// Whether a failed upstream request failed because the client's body exceeded the limit.
fn limited(e: &hyper_util::client::legacy::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(s) = source {
        if s.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        source = s.source();
    }
    false
}

/// `X-Forwarded-For` (appended), `-Host`, `-Port`, `-Proto`, `-Scheme` and `X-Real-IP`.
fn forwarded_headers(h: &mut HeaderMap, host: &str, peer: SocketAddr, https: bool) {
    let ip = peer.ip().to_string();
    let xff = match h.get("x-forwarded-for").and_then(|v| v.to_str().ok()) {
        Some(prev) if !prev.is_empty() => format!("{prev}, {ip}"),
        _ => ip.clone(),
    };
    let proto = if https { "https" } else { "http" };
    let port = if https { "443" } else { "80" };
    for (k, v) in [
        ("x-forwarded-for", xff.as_str()),
        ("x-real-ip", ip.as_str()),
        ("x-forwarded-host", host),
        ("x-forwarded-port", port),
        ("x-forwarded-proto", proto),
        ("x-forwarded-scheme", proto),
    ] {
        if let Ok(v) = HeaderValue::from_str(v) {
            h.insert(HeaderName::from_static(k), v);
        }
    }
}

/// The upstream's response as the client gets it; a `101 Switching Protocols` joins the two
/// upgraded connections.
async fn respond(
    mut resp: Response<Incoming>,
    client_upgrade: Option<hyper::upgrade::OnUpgrade>,
) -> Response<Body> {
    if resp.status() == StatusCode::SWITCHING_PROTOCOLS
        && let Some(client) = client_upgrade
    {
        let upstream = hyper::upgrade::on(&mut resp);
        tokio::spawn(async move {
            let (Ok(c), Ok(u)) = (client.await, upstream.await) else {
                return;
            };
            let mut c = TokioIo::new(c);
            let mut u = TokioIo::new(u);
            let _ = tokio::io::copy_bidirectional(&mut c, &mut u).await;
        });
        let (parts, _) = resp.into_parts();
        return Response::from_parts(parts, empty());
    }
    let (mut parts, body) = resp.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    Response::from_parts(parts, body.map_err(|e| Box::new(e) as BoxError).boxed())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_drops_its_port_and_ipv6_brackets() {
        let r = Request::builder()
            .uri("/x")
            .header("host", "a.example.com:8080")
            .body(())
            .unwrap();
        assert_eq!(request_host(&r).as_deref(), Some("a.example.com"));
        let r = Request::builder()
            .uri("/x")
            .header("host", "[::1]:80")
            .body(())
            .unwrap();
        assert_eq!(request_host(&r).as_deref(), Some("::1"));
        let r = Request::builder()
            .uri("https://b.example.com/x")
            .body(())
            .unwrap();
        assert_eq!(request_host(&r).as_deref(), Some("b.example.com"));
    }

    #[test]
    fn hop_by_hop_headers_and_those_connection_names_are_dropped() {
        let mut h = HeaderMap::new();
        h.insert("connection", HeaderValue::from_static("close, x-secret"));
        h.insert("x-secret", HeaderValue::from_static("1"));
        h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        h.insert("x-kept", HeaderValue::from_static("1"));
        strip_hop_by_hop(&mut h);
        assert_eq!(h.len(), 1);
        assert!(h.contains_key("x-kept"));
    }

    #[test]
    fn forwarded_for_appends_the_peer() {
        let mut h = HeaderMap::new();
        h.insert("x-forwarded-for", HeaderValue::from_static("1.2.3.4"));
        forwarded_headers(&mut h, "a", "10.0.0.9:5555".parse().unwrap(), true);
        assert_eq!(h["x-forwarded-for"], "1.2.3.4, 10.0.0.9");
        assert_eq!(h["x-real-ip"], "10.0.0.9");
        assert_eq!(h["x-forwarded-proto"], "https");
        assert_eq!(h["x-forwarded-host"], "a");
    }
}
