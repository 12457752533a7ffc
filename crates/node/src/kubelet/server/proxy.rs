//! Proxying exec, attach and port-forward to the runtime's streaming server, as the kubelet's
//! `proxyStream` does with an upgrade-aware proxy: the client's upgrade request is sent to
//! the one-shot URL the runtime handed out (method and protocol headers unchanged, so SPDY
//! and every WebSocket sub-protocol reach containerd's own implementation), the runtime's
//! answer is relayed (a `101` with its negotiated protocol, or its refusal with body), and
//! after a `101` bytes are copied both ways until either side ends or the connection has
//! been idle for the streaming idle timeout (`streamingConnectionIdleTimeout`, 4 h).
//!
//! A request that does not ask for an upgrade gets upstream's 500 `Upgrade request required`.
//! The client's `Authorization` header is not passed on: the runtime needs no credential.

use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode, Uri, header};
use http_body_util::{BodyExt, Empty, Limited};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use super::response::{self, Body};

/// How long dialing the runtime's streaming server may take.
const DIAL_TIMEOUT: Duration = Duration::from_secs(10);
/// The most of a refusal's body passed on.
const MAX_REFUSAL: usize = 64 << 10;

/// Proxies an upgrade request to `url`.
pub async fn stream(mut req: Request<Incoming>, url: &str, idle: Duration) -> Response<Body> {
    if !streaming::upgrade::is_upgrade_request(req.headers()) {
        return response::go_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Upgrade request required",
        );
    }
    let target: Uri = match url.parse() {
        Ok(u) => u,
        Err(e) => {
            return response::go_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("invalid streaming URL {url:?}: {e}"),
            );
        }
    };
    if target.scheme_str() != Some("http") {
        return response::go_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("unsupported streaming URL scheme in {url:?}"),
        );
    }
    let authority = target
        .authority()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let tcp = match tokio::time::timeout(DIAL_TIMEOUT, TcpStream::connect(authority.as_str())).await
    {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => return dial_error(&authority, &e.to_string()),
        Err(_) => return dial_error(&authority, "i/o timeout"),
    };
    let _ = tcp.set_nodelay(true);
    let (mut sender, conn) = match hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await {
        Ok(x) => x,
        Err(e) => return dial_error(&authority, &e.to_string()),
    };
    tokio::spawn(async move {
        let _ = conn.with_upgrades().await;
    });

    let mut backend = Request::builder()
        .method(req.method().clone())
        .uri(target.path_and_query().map(|p| p.as_str()).unwrap_or("/"));
    for (name, value) in req.headers() {
        if name == header::HOST || name == header::AUTHORIZATION || name == header::CONTENT_LENGTH {
            continue;
        }
        backend = backend.header(name, value);
    }
    backend = backend.header(header::HOST, authority.as_str());
    let client_on = hyper::upgrade::on(&mut req);
    let backend = match backend.body(Empty::<Bytes>::new()) {
        Ok(r) => r,
        Err(e) => return response::go_error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    };
    let mut answer = match sender.send_request(backend).await {
        Ok(r) => r,
        Err(e) => return dial_error(&authority, &e.to_string()),
    };
    if answer.status() != StatusCode::SWITCHING_PROTOCOLS {
        let (parts, body) = answer.into_parts();
        let body = Limited::new(body, MAX_REFUSAL)
            .collect()
            .await
            .map(|c| c.to_bytes())
            .unwrap_or_default();
        let mut r = Response::from_parts(parts, response::full(body));
        r.headers_mut().remove(header::TRANSFER_ENCODING);
        return r;
    }
    let mut relayed = Response::builder().status(StatusCode::SWITCHING_PROTOCOLS);
    for (name, value) in answer.headers() {
        relayed = relayed.header(name, value);
    }
    let backend_on = hyper::upgrade::on(&mut answer);
    tokio::spawn(async move {
        let (client, backend) = match tokio::try_join!(client_on, backend_on) {
            Ok(pair) => pair,
            Err(e) => {
                tracing::debug!(error = %e, "kubelet: stream upgrade failed");
                return;
            }
        };
        let idle_out = copy_until_idle(TokioIo::new(client), TokioIo::new(backend), idle).await;
        if idle_out {
            tracing::debug!("kubelet: streaming connection closed after its idle timeout");
        }
    });
    relayed
        .body(response::empty())
        .unwrap_or_else(|_| response::go_error(StatusCode::INTERNAL_SERVER_ERROR, "bad upgrade"))
}

fn dial_error(authority: &str, cause: &str) -> Response<Body> {
    // Upstream's responder writes the proxy error as a 500.
    response::go_error(
        StatusCode::INTERNAL_SERVER_ERROR,
        &format!("error dialing backend: dial tcp {authority}: {cause}"),
    )
}

/// Copies between `a` and `b` until both directions ended or nothing moved for `idle`;
/// returns whether the idle timeout ended it.
pub async fn copy_until_idle<A, B>(a: A, b: B, idle: Duration) -> bool
where
    A: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    let (mut ar, mut aw) = tokio::io::split(a);
    let (mut br, mut bw) = tokio::io::split(b);
    let mut from_a = vec![0u8; 32 << 10];
    let mut from_b = vec![0u8; 32 << 10];
    let (mut a_open, mut b_open) = (true, true);
    let sleep = tokio::time::sleep(idle);
    tokio::pin!(sleep);
    while a_open || b_open {
        tokio::select! {
            r = ar.read(&mut from_a), if a_open => match r {
                Ok(0) | Err(_) => {
                    a_open = false;
                    let _ = bw.shutdown().await;
                }
                Ok(n) => {
                    if bw.write_all(&from_a[..n]).await.is_err() {
                        return false;
                    }
                }
            },
            r = br.read(&mut from_b), if b_open => match r {
                Ok(0) | Err(_) => {
                    b_open = false;
                    let _ = aw.shutdown().await;
                }
                Ok(n) => {
                    if aw.write_all(&from_b[..n]).await.is_err() {
                        return false;
                    }
                }
            },
            () = &mut sleep => return true,
        }
        sleep.as_mut().reset(tokio::time::Instant::now() + idle);
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn an_idle_stream_is_closed_after_the_timeout() {
        let (a, _a_peer) = tokio::io::duplex(64);
        let (b, _b_peer) = tokio::io::duplex(64);
        let idle = Duration::from_secs(4 * 3600);
        let started = tokio::time::Instant::now();
        assert!(copy_until_idle(a, b, idle).await);
        assert!(started.elapsed() >= idle);
    }

    #[tokio::test(start_paused = true)]
    async fn traffic_keeps_a_stream_open_and_eof_ends_it() {
        let (a, mut a_peer) = tokio::io::duplex(64);
        let (b, mut b_peer) = tokio::io::duplex(64);
        let idle = Duration::from_secs(10);
        let copy = tokio::spawn(copy_until_idle(a, b, idle));
        for _ in 0..3 {
            tokio::time::sleep(Duration::from_secs(8)).await;
            a_peer.write_all(b"ping").await.unwrap();
            let mut got = [0u8; 4];
            b_peer.read_exact(&mut got).await.unwrap();
            assert_eq!(&got, b"ping");
        }
        drop(a_peer);
        drop(b_peer);
        assert!(!copy.await.unwrap());
    }
}
