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
use streaming::remotecommand::{Outcome, ServerSession};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

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
