//! `bench ingress`: the ingress controller's proxy (`ingress::proxy`) against nginx — what
//! ingress-nginx runs — on one core each, for a small response.
//!
//! Both proxy the same backend (a small HTTP server of this process answering `ok`, on its
//! own thread) for host `a.test` with the headers ingress-nginx sets and keep-alive upstream
//! connections (ingress-nginx's `upstream-keepalive-connections`). Ours runs on one thread (a
//! current-thread runtime); nginx with `worker_processes 1`. The same load generator drives
//! each in turn: `--connections` keep-alive HTTP/1.1 connections (default 64) sending `GET /`
//! back to back for the measured seconds after a warm-up; figures are requests per second
//! and the latency percentiles. Target: ours ≥ 0.8× nginx's requests per second.

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use ingress::proxy::{Proxy, Routes};
use ingress::rules::{BackendRef, ServicePort, Table};
use serde_json::json;
use tokio::net::{TcpListener, TcpStream};

use crate::report::{Better, Samples, header, line};

const HOST: &str = "a.test";

/// Serves on a loopback listener of its own from a thread of its own (one core at most):
/// `serve` gets the listener.
fn on_thread<F, Fut>(serve: F) -> anyhow::Result<SocketAddr>
where
    F: FnOnce(TcpListener) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    l.set_nonblocking(true)?;
    let addr = l.local_addr()?;
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        rt.block_on(async move {
            let l = TcpListener::from_std(l).expect("listener");
            serve(l).await
        });
    });
    Ok(addr)
}

/// The backend: `ok` to every request, on a thread of its own.
fn start_backend() -> anyhow::Result<SocketAddr> {
    on_thread(|l| async move {
        loop {
            let Ok((s, _)) = l.accept().await else { return };
            let _ = s.set_nodelay(true);
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(|_req: Request<Incoming>| async {
                    Ok::<_, std::convert::Infallible>(Response::new(Full::new(Bytes::from_static(
                        b"ok",
                    ))))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(s), svc)
                    .await;
            });
        }
    })
}

/// Our proxy on one thread, routing `a.test` to `backend`.
fn start_ours(backend: SocketAddr) -> anyhow::Result<SocketAddr> {
    let ingress: k8s_openapi::api::networking::v1::Ingress = serde_json::from_value(json!({
        "metadata": {"namespace": "bench", "name": "web", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"rules": [{"host": HOST, "http": {"paths": [{"path": "/", "pathType": "Prefix",
            "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]},
    }))?;
    on_thread(move |l| async move {
        let certs = Arc::new(ingress::tls::Certificates::new(
            ingress::tls::fake_certificate().expect("a certificate"),
        ));
        let proxy = Proxy::new(certs);
        proxy.set_routes(Routes {
            table: Table::build(&[Arc::new(ingress)]),
            endpoints: [(
                BackendRef {
                    namespace: "bench".into(),
                    service: "web".into(),
                    port: ServicePort::Number(80),
                },
                vec![backend],
            )]
            .into(),
        });
        proxy.serve_http(l, std::future::pending()).await;
    })
}

/// nginx, one worker, proxying `a.test` to `backend` as ingress-nginx configures it.
struct Nginx {
    child: Child,
    _dir: tempfile::TempDir,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SIGTERM: the master stops its workers (a SIGKILL would leave them running).
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while std::time::Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

fn start_nginx(backend: SocketAddr) -> anyhow::Result<(Nginx, SocketAddr)> {
    let bin = ["/usr/sbin/nginx", "/usr/bin/nginx"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .context("nginx is missing (scripts/ensure-deps installs it)")?;
    let dir = tempfile::tempdir()?;
    let d = dir.path().display();
    let port = free_port()?;
    let conf = format!(
        r#"worker_processes 1;
error_log {d}/error.log warn;
pid {d}/nginx.pid;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  client_body_temp_path {d}/body;
  proxy_temp_path {d}/proxy;
  fastcgi_temp_path {d}/fastcgi;
  uwsgi_temp_path {d}/uwsgi;
  scgi_temp_path {d}/scgi;
  keepalive_requests 10000;
  upstream backend {{ server {backend}; keepalive 320; keepalive_requests 10000; }}
  server {{
    listen 127.0.0.1:{port};
    server_name {HOST};
    location / {{
      proxy_pass http://backend;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $host;
      proxy_set_header X-Real-IP $remote_addr;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Host $host;
      proxy_set_header X-Forwarded-Port $server_port;
      proxy_set_header X-Forwarded-Proto $scheme;
      proxy_set_header X-Forwarded-Scheme $scheme;
    }}
  }}
}}
"#
    );
    let path = dir.path().join("nginx.conf");
    std::fs::write(&path, conf)?;
    let child = Command::new(bin)
        .arg("-p")
        .arg(dir.path())
        .arg("-c")
        .arg(&path)
        .args(["-g", "daemon off;"])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting nginx")?;
    Ok((
        Nginx { child, _dir: dir },
        SocketAddr::from(([127, 0, 0, 1], port)),
    ))
}

/// Waits until `addr` answers 200 for `a.test`.
async fn ready(addr: SocketAddr) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(s) = TcpStream::connect(addr).await
            && let Ok((mut send, conn)) =
                hyper::client::conn::http1::handshake(TokioIo::new(s)).await
        {
            tokio::spawn(conn);
            let req = Request::builder()
                .uri("/")
                .header("host", HOST)
                .body(Empty::<Bytes>::new())?;
            if let Ok(r) = send.send_request(req).await
                && r.status() == 200
            {
                return Ok(());
            }
        }
        if Instant::now() > deadline {
            bail!("{addr} does not answer");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

struct Load {
    rps: f64,
    latencies: Samples,
    errors: usize,
}

/// `connections` keep-alive connections sending `GET /` for `warmup` then `measure`.
async fn load(
    addr: SocketAddr,
    connections: usize,
    warmup: Duration,
    measure: Duration,
) -> anyhow::Result<Load> {
    let start = Instant::now() + warmup;
    let end = start + measure;
    let mut tasks = Vec::new();
    for _ in 0..connections {
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut errors = 0usize;
            let s = TcpStream::connect(addr).await?;
            s.set_nodelay(true)?;
            let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(s)).await?;
            tokio::spawn(conn);
            loop {
                let now = Instant::now();
                if now >= end {
                    break;
                }
                let req = Request::builder()
                    .uri("/")
                    .header("host", HOST)
                    .body(Empty::<Bytes>::new())?;
                let ok = match send.send_request(req).await {
                    Ok(r) => {
                        let status = r.status();
                        r.into_body().collect().await.is_ok() && status == 200
                    }
                    Err(_) => false,
                };
                if now >= start {
                    if ok {
                        lat.push(now.elapsed());
                    } else {
                        errors += 1;
                    }
                }
                if !ok {
                    break;
                }
            }
            Ok::<_, anyhow::Error>((lat, errors))
        }));
    }
    let mut all = Vec::new();
    let mut errors = 0;
    for t in tasks {
        let (lat, e) = t.await??;
        all.extend(lat);
        errors += e;
    }
    Ok(Load {
        rps: all.len() as f64 / measure.as_secs_f64(),
        latencies: Samples(all),
        errors,
    })
}

pub async fn run(quick: bool, connections: Option<usize>) -> anyhow::Result<()> {
    let connections = connections.unwrap_or(64);
    let (warmup, measure) = if quick {
        (Duration::from_millis(500), Duration::from_secs(2))
    } else {
        (Duration::from_secs(1), Duration::from_secs(5))
    };
    let backend = start_backend()?;
    let ours = start_ours(backend)?;
    let (_nginx, peer) = start_nginx(backend)?;
    ready(ours).await?;
    ready(peer).await?;
    // Alternate, twice each, and keep each one's better run (noise of a shared machine).
    let mut best: [Option<Load>; 2] = [None, None];
    for _ in 0..2 {
        for (i, addr) in [ours, peer].into_iter().enumerate() {
            let l = load(addr, connections, warmup, measure).await?;
            if l.errors > 0 {
                bail!("{} requests failed against {addr}", l.errors);
            }
            if best[i].as_ref().is_none_or(|b| l.rps > b.rps) {
                best[i] = Some(l);
            }
        }
    }
    let [Some(o), Some(n)] = best else {
        bail!("no measurement")
    };
    println!(
        "ingress proxy, one core each, {connections} keep-alive connections, GET / → 2-byte response, {} s measured",
        measure.as_secs()
    );
    header("matryoshka", "nginx 1 worker");
    line("requests per second", o.rps, n.rps, "req/s", Better::Higher);
    for (name, p) in [("p50", 0.50), ("p99", 0.99)] {
        line(
            &format!("latency {name}"),
            o.latencies.percentile(p).as_secs_f64() * 1e3,
            n.latencies.percentile(p).as_secs_f64() * 1e3,
            "ms",
            Better::Lower,
        );
    }
    let ratio = o.rps / n.rps;
    println!(
        "target: ≥ 0.80× nginx's requests per second — {}",
        if ratio >= 0.8 { "met" } else { "NOT met" }
    );
    Ok(())
}
