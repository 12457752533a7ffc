//! The API benchmark: a real API server in this process over HTTPS (HTTP/2, client
//! certificates), driven by 32 concurrent clients — create, get, list and update requests per
//! second with p99 latency — and watch fan-out to 1,000 watchers of one resource. In the same
//! run the raw embedded store does the same operations, and each line prints raw ÷ API.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{Value, json};
use storage::Storage;
use tokio::sync::Mutex;

use crate::report::{Better, Samples};

const CLIENTS: usize = 32;
const VALUE: usize = 1024;

/// An HTTP/2 connection to the server.
#[derive(Clone)]
pub(crate) struct Conn {
    tx: SendRequest<Full<Bytes>>,
}

impl Conn {
    pub(crate) async fn connect(
        addr: std::net::SocketAddr,
        tls: Arc<rustls::ClientConfig>,
    ) -> anyhow::Result<Conn> {
        let tcp = tokio::net::TcpStream::connect(addr).await?;
        tcp.set_nodelay(true)?;
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1")?.to_owned();
        let stream = tokio_rustls::TlsConnector::from(tls)
            .connect(name, tcp)
            .await?;
        let (tx, conn) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
                .await?;
        tokio::spawn(conn);
        Ok(Conn { tx })
    }

    pub(crate) async fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<Bytes>,
    ) -> anyhow::Result<(u16, Bytes)> {
        let req = http::Request::builder()
            .method(method)
            .uri(format!("https://127.0.0.1{path}"))
            .header("content-type", "application/json")
            .body(Full::new(body.unwrap_or_default()))?;
        let mut tx = self.tx.clone();
        tx.ready().await?;
        let resp = tx.send_request(req).await?;
        let status = resp.status().as_u16();
        let bytes = resp.into_body().collect().await?.to_bytes();
        Ok((status, bytes))
    }
}

fn cm(name: &str, payload: &str) -> Bytes {
    Bytes::from(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"v": payload}}).to_string())
}

struct Line {
    ops: f64,
    p99: Duration,
}

/// Runs `op` from `CLIENTS` tasks for `secs`; op gets (client index, iteration).
async fn drive<F, Fut>(secs: f64, op: F) -> Line
where
    F: Fn(usize, u64) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let op = Arc::new(op);
    let lat = Arc::new(Mutex::new(Samples::default()));
    let count = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let started = Instant::now();
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let op = op.clone();
            let lat = lat.clone();
            let count = count.clone();
            tokio::spawn(async move {
                let mut mine = Vec::new();
                let mut i = 0;
                while Instant::now() < deadline {
                    let t = Instant::now();
                    op(c, i).await;
                    mine.push(t.elapsed());
                    i += 1;
                }
                count.fetch_add(i, Ordering::Relaxed);
                lat.lock().await.0.extend(mine);
            })
        })
        .collect();
    for t in tasks {
        let _ = t.await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let lat = lat.lock().await;
    Line {
        ops: count.load(Ordering::Relaxed) as f64 / elapsed,
        p99: lat.percentile(0.99),
    }
}

/// The raw store's rate for the same operations at the same concurrency.
async fn raw(store: Arc<dyn Storage>, secs: f64) -> (f64, f64, f64, f64) {
    let value = Bytes::from(vec![b'x'; VALUE + 200]);
    let s = store.clone();
    let v = value.clone();
    let create = drive(secs, move |c, i| {
        let s = s.clone();
        let v = v.clone();
        async move {
            s.create(format!("/raw/c/{c}/{i}").as_bytes(), v)
                .await
                .expect("raw create");
        }
    })
    .await;
    let s = store.clone();
    let get = drive(secs, move |c, i| {
        let s = s.clone();
        async move {
            let _ = s
                .get(format!("/raw/c/{c}/{}", i % 100).as_bytes())
                .await
                .expect("raw get");
        }
    })
    .await;
    let s = store.clone();
    let list = drive(secs, move |c, _| {
        let s = s.clone();
        async move {
            let l = s
                .list(format!("/raw/c/{c}/1").as_bytes(), Default::default())
                .await
                .expect("raw list");
            assert!(!l.items.is_empty());
        }
    })
    .await;
    // Updates: each client rewrites its own keys, carrying the revision.
    let revs: Arc<Vec<Mutex<Vec<i64>>>> =
        Arc::new((0..CLIENTS).map(|_| Mutex::new(vec![0; 100])).collect());
    for c in 0..CLIENTS {
        for k in 0..100 {
            let kv = store
                .get(format!("/raw/c/{c}/{k}").as_bytes())
                .await
                .expect("get")
                .expect("exists");
            revs[c].lock().await[k] = kv.mod_revision;
        }
    }
    let s = store.clone();
    let update = drive(secs, move |c, i| {
        let s = s.clone();
        let v = value.clone();
        let revs = revs.clone();
        async move {
            let k = (i % 100) as usize;
            let mut r = revs[c].lock().await;
            r[k] = s
                .update(format!("/raw/c/{c}/{k}").as_bytes(), v, r[k])
                .await
                .expect("raw update")
                .mod_revision;
        }
    })
    .await;
    (create.ops, get.ops, list.ops, update.ops)
}

pub async fn run(quick: bool) -> anyhow::Result<()> {
    let secs = if quick { 1.5 } else { 4.0 };
    let dir = std::env::current_dir()?.join("target/bench-data");
    std::fs::create_dir_all(&dir)?;
    let api_dir = tempfile::tempdir_in(&dir)?;
    let raw_dir = tempfile::tempdir_in(&dir)?;

    // The server, over HTTPS like `matryoshka up`.
    let storage: Arc<dyn Storage> =
        Arc::new(storage::embedded::EmbeddedStore::open(api_dir.path())?);
    let server = apiserver::server::start(storage)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let (addr, ca) = crate::setup::serve_https(&server, Default::default()).await?;
    let client_tls = client_config(&ca)?;
    let conns: Vec<Conn> = {
        let mut v = Vec::new();
        for _ in 0..CLIENTS {
            v.push(Conn::connect(addr, client_tls.clone()).await?);
        }
        v
    };
    let conns = Arc::new(conns);
    println!(
        "API benchmark: {CLIENTS} clients over HTTPS/HTTP2, {secs}s per line, ConfigMaps of ~1 KiB"
    );
    let payload: String = "x".repeat(VALUE);

    // create
    let (c2, p) = (conns.clone(), payload.clone());
    let create = drive(secs, move |c, i| {
        let conn = c2[c].clone();
        let body = cm(&format!("c{c}-{i}"), &p);
        async move {
            let (code, b) = conn
                .send("POST", "/api/v1/namespaces/default/configmaps", Some(body))
                .await
                .expect("create");
            assert_eq!(code, 201, "{}", String::from_utf8_lossy(&b));
        }
    })
    .await;
    // Every client gets at least 100 objects for the reads and updates below.
    for c in 0..CLIENTS {
        for k in 0..100 {
            let (code, _) = conns[c]
                .send(
                    "POST",
                    "/api/v1/namespaces/default/configmaps",
                    Some(cm(&format!("c{c}-{k}"), &payload)),
                )
                .await?;
            anyhow::ensure!(code == 201 || code == 409, "seeding objects: {code}");
        }
    }
    // get
    let c2 = conns.clone();
    let get = drive(secs, move |c, i| {
        let conn = c2[c].clone();
        async move {
            let (code, _) = conn
                .send(
                    "GET",
                    &format!("/api/v1/namespaces/default/configmaps/c{c}-{}", i % 100),
                    None,
                )
                .await
                .expect("get");
            assert_eq!(code, 200);
        }
    })
    .await;
    // list: a namespace of 100 objects
    let c2 = conns.clone();
    for i in 0..100 {
        let (code, _) = c2[0]
            .send(
                "POST",
                "/api/v1/namespaces/kube-public/configmaps",
                Some(cm(&format!("l{i}"), &payload)),
            )
            .await?;
        anyhow::ensure!(code == 201, "seeding the list namespace");
    }
    let list = drive(secs, move |c, _| {
        let conn = c2[c].clone();
        async move {
            let (code, _) = conn
                .send("GET", "/api/v1/namespaces/kube-public/configmaps", None)
                .await
                .expect("list");
            assert_eq!(code, 200);
        }
    })
    .await;
    // update: each client rewrites its own objects with their resourceVersion
    let c2 = conns.clone();
    let state: Arc<Vec<Mutex<Vec<String>>>> = Arc::new(
        (0..CLIENTS)
            .map(|_| Mutex::new(vec![String::new(); 100]))
            .collect(),
    );
    for c in 0..CLIENTS {
        for k in 0..100 {
            let (_, b) = c2[c]
                .send(
                    "GET",
                    &format!("/api/v1/namespaces/default/configmaps/c{c}-{k}"),
                    None,
                )
                .await?;
            let v: Value = serde_json::from_slice(&b)?;
            state[c].lock().await[k] = v["metadata"]["resourceVersion"]
                .as_str()
                .context("rv")?
                .to_string();
        }
    }
    let p = payload.clone();
    let update = drive(secs, move |c, i| {
        let conn = c2[c].clone();
        let state = state.clone();
        let p = p.clone();
        async move {
            let k = (i % 100) as usize;
            let mut st = state[c].lock().await;
            let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("c{c}-{k}"), "resourceVersion": st[k]}, "data": {"v": p}});
            let (code, b) = conn
                .send("PUT", &format!("/api/v1/namespaces/default/configmaps/c{c}-{k}"), Some(Bytes::from(body.to_string())))
                .await
                .expect("update");
            assert_eq!(code, 200, "{}", String::from_utf8_lossy(&b));
            let v: Value = serde_json::from_slice(&b).expect("json");
            st[k] = v["metadata"]["resourceVersion"].as_str().unwrap_or_default().to_string();
        }
    })
    .await;

    let raw_store: Arc<dyn Storage> =
        Arc::new(storage::embedded::EmbeddedStore::open(raw_dir.path())?);
    let (rc, rg, rl, ru) = raw(raw_store, secs).await;

    let (delivered, lag50, lag99) =
        watch_fanout(&conns, if quick { 50 } else { 200 }, &payload).await?;

    println!();
    println!(
        "{:<34} {:>12} {:>10} {:>14} {:>10}",
        "operation", "API req/s", "API p99", "raw store op/s", "raw÷API"
    );
    for (name, line, rawv) in [
        ("create", &create, rc),
        ("get", &get, rg),
        ("list (100 objects)", &list, rl),
        ("update", &update, ru),
    ] {
        println!(
            "{name:<34} {:>12.0} {:>8.1}ms {:>14.0} {:>9.2}x",
            line.ops,
            line.p99.as_secs_f64() * 1e3,
            rawv,
            rawv / line.ops
        );
    }
    println!();
    crate::report::line(
        "watch fan-out: delivered (1,000 watchers)",
        delivered,
        100.0,
        "%",
        Better::Higher,
    );
    println!(
        "watch fan-out lag: p50 {:.1} ms, p99 {:.1} ms (target p99 < 100 ms)",
        lag50.as_secs_f64() * 1e3,
        lag99.as_secs_f64() * 1e3
    );
    println!("targets: >= 5,000 creates/s; create raw÷API <= 2x");
    Ok(())
}

fn client_config(ca: &pki::Ca) -> anyhow::Result<Arc<rustls::ClientConfig>> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from_pem_slice(ca.pair.cert_pem.as_bytes())?)?;
    let admin = ca.issue_client("bench-admin", &["system:masters"])?;
    let cert = CertificateDer::from_pem_slice(admin.cert_pem.as_bytes())?;
    let key = PrivateKeyDer::from_pem_slice(admin.key_pem.as_bytes())?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_client_auth_cert(vec![cert], key)?;
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(cfg))
}

/// 1,000 watchers of the ConfigMaps of one namespace (spread over the client connections as
/// HTTP/2 streams); `writes` updates, each carrying its send time; returns delivered %, p50 and
/// p99 lag.
async fn watch_fanout(
    conns: &Arc<Vec<Conn>>,
    writes: usize,
    payload: &str,
) -> anyhow::Result<(f64, Duration, Duration)> {
    const WATCHERS: usize = 1000;
    let origin = Instant::now();
    let (code, _) = conns[0]
        .send(
            "POST",
            "/api/v1/namespaces",
            Some(Bytes::from(
                json!({"metadata": {"name": "fanout"}}).to_string(),
            )),
        )
        .await?;
    anyhow::ensure!(code == 201, "namespace for the fan-out");
    let (_, b) = conns[0]
        .send("GET", "/api/v1/namespaces/fanout/configmaps", None)
        .await?;
    let rv = serde_json::from_slice::<Value>(&b)?["metadata"]["resourceVersion"]
        .as_str()
        .context("rv")?
        .to_string();
    let mut watchers = Vec::new();
    for w in 0..WATCHERS {
        let conn = conns[w % conns.len()].clone();
        let path = format!("/api/v1/namespaces/fanout/configmaps?watch=true&resourceVersion={rv}");
        let req = http::Request::builder()
            .uri(format!("https://127.0.0.1{path}"))
            .body(Full::new(Bytes::new()))?;
        let mut tx = conn.tx.clone();
        tx.ready().await?;
        let resp = tx.send_request(req).await?;
        anyhow::ensure!(resp.status() == 200, "watch started");
        watchers.push(tokio::spawn(async move {
            let mut body = resp.into_body();
            let mut buf = Vec::new();
            let mut lags = Vec::with_capacity(writes);
            while lags.len() < writes {
                match tokio::time::timeout(Duration::from_secs(60), body.frame()).await {
                    Ok(Some(Ok(frame))) => {
                        if let Some(d) = frame.data_ref() {
                            buf.extend_from_slice(d);
                            while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
                                let line: Vec<u8> = buf.drain(..=pos).collect();
                                if let Ok(ev) = serde_json::from_slice::<Value>(&line)
                                    && let Some(sent) = ev
                                        .pointer("/object/data/sent")
                                        .and_then(Value::as_str)
                                        .and_then(|s| s.parse::<u64>().ok())
                                {
                                    let now = origin.elapsed().as_nanos() as u64;
                                    lags.push(Duration::from_nanos(now.saturating_sub(sent)));
                                }
                            }
                        }
                    }
                    _ => break,
                }
            }
            lags
        }));
    }
    let writer = conns[0].clone();
    for i in 0..writes {
        let sent = origin.elapsed().as_nanos().to_string();
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("w{i}")}, "data": {"sent": sent, "pad": &payload[..200]}});
        let (code, _) = writer
            .send(
                "POST",
                "/api/v1/namespaces/fanout/configmaps",
                Some(Bytes::from(body.to_string())),
            )
            .await?;
        anyhow::ensure!(code == 201);
    }
    let mut all = Samples::default();
    let mut delivered = 0;
    for w in watchers {
        let lags = w.await?;
        delivered += lags.len();
        all.0.extend(lags);
    }
    Ok((
        delivered as f64 * 100.0 / (WATCHERS * writes) as f64,
        all.percentile(0.5),
        all.percentile(0.99),
    ))
}
