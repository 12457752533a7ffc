//! Test helpers: an HTTP/1.1 server on loopback that hands upgrade requests to a handler, and
//! a toy command that exercises every stream.

#![allow(dead_code)]

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use streaming::io::{Reader, Writer};
use streaming::portforward::{self, Duplex, Forwarder};
use streaming::remotecommand::{self, Outcome, ServerSession, StreamOptions, TerminalSize};
use streaming::{spdy, upgrade};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub const T: Duration = Duration::from_secs(20);

pub async fn within<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(T, f).await.expect("timed out")
}

/// Serves HTTP/1.1 with upgrades on 127.0.0.1; every request goes to `handler`.
pub async fn serve<H, F>(handler: H) -> SocketAddr
where
    H: Fn(Request<Incoming>) -> F + Send + Sync + 'static,
    F: Future<Output = Response<Bytes>> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let handler = Arc::new(handler);
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let handler = handler.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req| {
                    let handler = handler.clone();
                    async move {
                        let response = handler(req).await;
                        Ok::<_, std::convert::Infallible>(response.map(Full::new))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tcp), service)
                    .with_upgrades()
                    .await;
            });
        }
    });
    addr
}

/// The toy command: stdin upper-cased to stdout, a line on stderr, then `exit` (from the
/// first stdin line `exit N`, else 0). With no stdin it prints `hello` and exits 0.
pub async fn run_toy(mut session: ServerSession) {
    let mut stdout = session.stdout.take();
    let mut stderr = session.stderr.take();
    let mut code = 0;
    if let Some(mut stdin) = session.stdin.take() {
        let mut input = Vec::new();
        let _ = stdin.read_to_end(&mut input).await;
        let text = String::from_utf8_lossy(&input).to_string();
        if let Some(rest) = text.strip_prefix("exit ") {
            code = rest.trim().parse().unwrap_or(1);
        }
        if let Some(out) = stdout.as_mut() {
            out.write_all(text.to_uppercase().as_bytes()).await.unwrap();
        }
    } else if let Some(out) = stdout.as_mut() {
        out.write_all(b"hello").await.unwrap();
    }
    if let Some(mut resize) = session.resize.take() {
        // Echo the first size so tests see it arrived.
        if let Some(size) = resize.recv().await
            && let Some(out) = stdout.as_mut()
        {
            out.write_all(format!(" {}x{}", size.width, size.height).as_bytes())
                .await
                .unwrap();
        }
    }
    if let Some(err) = stderr.as_mut() {
        err.write_all(b"to stderr").await.unwrap();
    }
    for w in [stdout, stderr].into_iter().flatten() {
        let mut w: Writer = w;
        w.shutdown().await.unwrap();
    }
    session.set_close_wait(Duration::from_secs(5));
    let outcome = if code == 0 {
        Outcome::Success
    } else {
        Outcome::ExitCode {
            code,
            message: format!("command terminated with exit code {code}"),
        }
    };
    session.finish(outcome).await.unwrap();
}

/// Reads a reader to its end, treating a reset as the end (as Go does).
pub async fn read_all(reader: Option<Reader>) -> Vec<u8> {
    let Some(mut r) = reader else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match r.read(&mut buf).await {
            Ok(0) => return out,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if streaming::io::is_end_of_stream(&e) => return out,
            Err(e) => panic!("read failed: {e}"),
        }
    }
}

/// The kubelet's exec endpoint, minus the container: SPDY or WebSocket per the request.
pub async fn exec(mut req: Request<Incoming>) -> Response<Bytes> {
    let opts = match StreamOptions::from_query(req.uri().query().unwrap_or("")) {
        Ok(o) => o,
        Err(e) => {
            return upgrade::server::go_http_error(Response::builder().status(400), &e);
        }
    };
    if upgrade::is_websocket_request(req.headers()) {
        match upgrade::server::accept_websocket(
            req.headers(),
            &remotecommand::KUBELET_WEBSOCKET_PROTOCOLS
                .iter()
                .chain(&[remotecommand::V5])
                .copied()
                .collect::<Vec<_>>(),
        ) {
            Err(e) => e.response(),
            Ok((protocol, response)) => {
                let on = hyper::upgrade::on(&mut req);
                tokio::spawn(async move {
                    let ws = upgrade::server::websocket(on).await.unwrap();
                    let session = remotecommand::server::accept_websocket(ws, &protocol, opts)
                        .await
                        .unwrap();
                    run_toy(session).await;
                });
                response
            }
        }
    } else {
        match upgrade::server::accept_spdy(req.headers(), &remotecommand::SPDY_PROTOCOLS) {
            Err(e) => e.response(),
            Ok((protocol, response)) => {
                let on = hyper::upgrade::on(&mut req);
                tokio::spawn(async move {
                    let io = upgrade::server::upgraded(on).await.unwrap();
                    let (conn, incoming) =
                        spdy::Connection::new(io, spdy::Role::Server, spdy::Config::default());
                    let session = remotecommand::server::accept_spdy(
                        conn,
                        incoming,
                        &protocol,
                        opts,
                        remotecommand::server::STREAM_CREATION_TIMEOUT,
                    )
                    .await
                    .unwrap();
                    run_toy(session).await;
                });
                response
            }
        }
    }
}

/// What a client session saw.
pub struct Result_ {
    pub protocol: String,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub outcome: Outcome,
}

/// Feeds stdin (then EOF) and a resize, reads stdout and stderr to their ends and the outcome.
pub async fn drive(
    mut session: remotecommand::ClientSession,
    stdin: Option<&'static [u8]>,
    resize: Option<TerminalSize>,
) -> Result_ {
    if let (Some(r), Some(size)) = (session.resize.as_mut(), resize) {
        r.send(size).await.unwrap();
    }
    let mut input: Option<Writer> = session.stdin.take();
    let feed = tokio::spawn(async move {
        if let (Some(w), Some(data)) = (input.as_mut(), stdin) {
            w.write_all(data).await.unwrap();
            w.shutdown().await.unwrap();
        }
        input
    });
    let stdout = tokio::spawn(read_all(session.stdout.take()));
    let stderr = tokio::spawn(read_all(session.stderr.take()));
    let outcome = within(session.outcome()).await.unwrap();
    let stdout = within(stdout).await.unwrap();
    let stderr = within(stderr).await.unwrap();
    drop(feed.await.unwrap());
    let protocol = session.protocol.clone();
    within(session.close()).await;
    Result_ {
        protocol,
        stdout,
        stderr,
        outcome,
    }
}

/// A TCP server that answers every connection with `pong:`, then echoes until EOF.
pub async fn echo_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                let _ = tcp.write_all(b"pong:").await;
                let (mut r, mut w) = tcp.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    addr
}

/// Forwards every port to the echo server; port 1 fails the way a closed pod port does.
pub fn forwarder(echo: SocketAddr) -> Arc<dyn Forwarder> {
    Arc::new(move |port: u16, stream: Duplex| async move {
        if port == 1 {
            return Err(format!(
                "error forwarding port {port} to pod abc, uid : connection refused"
            ));
        }
        let tcp = TcpStream::connect(echo).await.map_err(|e| e.to_string())?;
        portforward::pump(stream, tcp)
            .await
            .map_err(|e| e.to_string())
    })
}

/// The kubelet's port-forward endpoint: SPDY, the legacy WebSocket protocol, or a tunnel.
pub async fn portforward_endpoint(mut req: Request<Incoming>, echo: SocketAddr) -> Response<Bytes> {
    let headers = req.headers().clone();
    if upgrade::is_websocket_request(&headers) {
        let offered = upgrade::offered_websocket_protocols(&headers);
        if offered
            .iter()
            .any(|p| p.starts_with(portforward::TUNNEL_PREFIX))
        {
            let tunnel = format!("{}{}", portforward::TUNNEL_PREFIX, portforward::PROTOCOL_V1);
            let (_, response) = match upgrade::server::accept_websocket(&headers, &[&tunnel]) {
                Ok(ok) => ok,
                Err(e) => return e.response(),
            };
            let on = hyper::upgrade::on(&mut req);
            tokio::spawn(async move {
                let ws = upgrade::server::websocket(on).await.unwrap();
                let (conn, incoming) = portforward::tunnel::serve(ws);
                portforward::spdy::serve(conn, incoming, forwarder(echo), Duration::from_secs(30))
                    .await;
            });
            return response;
        }
        let ports = match portforward::ports_from_query(req.uri().query().unwrap_or(""), "port") {
            Ok(p) => p,
            Err(e) => return upgrade::server::go_http_error(Response::builder().status(400), &e),
        };
        let (protocol, response) =
            match upgrade::server::accept_websocket(&headers, &portforward::WEBSOCKET_PROTOCOLS) {
                Ok(ok) => ok,
                Err(e) => return e.response(),
            };
        let on = hyper::upgrade::on(&mut req);
        tokio::spawn(async move {
            let ws = upgrade::server::websocket(on).await.unwrap();
            portforward::websocket::serve(
                ws,
                &protocol,
                &ports,
                forwarder(echo),
                Duration::from_secs(5),
            )
            .await;
        });
        return response;
    }
    let (_, response) = match upgrade::server::accept_spdy(&headers, &[portforward::PROTOCOL_V1]) {
        Ok(ok) => ok,
        Err(e) => return e.response(),
    };
    let on = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        let io = upgrade::server::upgraded(on).await.unwrap();
        let (conn, incoming) =
            spdy::Connection::new(io, spdy::Role::Server, spdy::Config::default());
        portforward::spdy::serve(conn, incoming, forwarder(echo), Duration::from_secs(30)).await;
    });
    response
}
