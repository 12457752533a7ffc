//! Isolation under attack: one logical cluster floods the server — 32 clients creating
//! ConfigMaps as fast as they can, plus 50 connections that never finish their headers —
//! while a second cluster measures its own requests (a create and a get, one at a time).
//! Both clusters' admins talk HTTPS/HTTP2 to a real API server in this process, as tenants
//! do. The peer is the quiet cluster itself without the flood, measured in the same run;
//! the target (from upstream's API Priority and Fairness, which keeps other flows' latency
//! within their share) is a quiet p99 at most twice its unloaded p99.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use base64::Engine;
use bytes::Bytes;
use serde_json::json;

use crate::api_bench::Conn;
use crate::clusters_bench::call;
use crate::report::{Better, Samples, header, line};

const FLOODERS: usize = 32;
const SLOW: usize = 50;

/// The TLS client configuration of `cluster`'s admin (from its admin kubeconfig Secret).
async fn admin_tls(
    server: &Arc<apiserver::ApiServer>,
    cluster: &str,
) -> anyhow::Result<Arc<rustls::ClientConfig>> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let (code, body) = call(
        server,
        "GET",
        &format!("/api/v1/namespaces/matryoshka-system/secrets/{cluster}-admin-kubeconfig"),
        None,
    )
    .await;
    anyhow::ensure!(code == 200, "the {cluster} kubeconfig: {code}");
    let secret: serde_json::Value = serde_json::from_slice(&body)?;
    let b64 = base64::engine::general_purpose::STANDARD;
    let conf = String::from_utf8(
        b64.decode(
            secret["data"]["admin.conf"]
                .as_str()
                .ok_or_else(|| anyhow::anyhow!("no admin.conf"))?,
        )?,
    )?;
    let field = |name: &str| -> anyhow::Result<Vec<u8>> {
        let v = conf
            .lines()
            .find_map(|l| l.trim().strip_prefix(&format!("{name}: ")))
            .ok_or_else(|| anyhow::anyhow!("{name} in the kubeconfig"))?;
        Ok(b64.decode(v.trim().trim_matches('"'))?)
    };
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(&field("certificate-authority-data")?) {
        roots.add(c?)?;
    }
    let certs = CertificateDer::pem_slice_iter(&field("client-certificate-data")?)
        .collect::<Result<Vec<_>, _>>()?;
    let key = PrivateKeyDer::from_pem_slice(&field("client-key-data")?)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_client_auth_cert(certs, key)?;
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(cfg))
}

async fn logical_cluster(server: &Arc<apiserver::ApiServer>, name: &str) -> anyhow::Result<()> {
    let lc = json!({"apiVersion": "core.matryoshka.dev/v1alpha1", "kind": "LogicalCluster", "metadata": {"name": name}});
    let uri = "/apis/core.matryoshka.dev/v1alpha1/logicalclusters";
    let (code, _) = call(server, "POST", uri, Some(lc)).await;
    anyhow::ensure!(code == 201, "create {name}: {code}");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, body) = call(server, "GET", &format!("{uri}/{name}"), None).await;
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        if v.pointer("/status/phase").and_then(|p| p.as_str()) == Some("Ready") {
            return Ok(());
        }
        anyhow::ensure!(Instant::now() < deadline, "{name} never became Ready");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn cm(name: &str) -> Bytes {
    Bytes::from(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}})
            .to_string(),
    )
}

/// The quiet cluster's requests for `secs`: a create then a get, one at a time; the
/// latencies of both, and of the creates and the gets apart.
async fn measure(quiet: &Conn, tag: &str, secs: f64) -> (Samples, Samples, Samples) {
    let mut s = Samples::default();
    let (mut creates, mut gets) = (Samples::default(), Samples::default());
    let started = Instant::now();
    let mut i = 0;
    while started.elapsed().as_secs_f64() < secs {
        i += 1;
        let name = format!("{tag}-{i}");
        let t = Instant::now();
        let (code, body) = quiet
            .send(
                "POST",
                "/clusters/quiet/api/v1/namespaces/default/configmaps",
                Some(cm(&name)),
            )
            .await
            .expect("create");
        assert_eq!(code, 201, "{}", String::from_utf8_lossy(&body));
        s.0.push(t.elapsed());
        creates.0.push(t.elapsed());
        let t = Instant::now();
        let (code, _) = quiet
            .send(
                "GET",
                &format!("/clusters/quiet/api/v1/namespaces/default/configmaps/{name}"),
                None,
            )
            .await
            .expect("get");
        assert_eq!(code, 200);
        s.0.push(t.elapsed());
        gets.0.push(t.elapsed());
    }
    (s, creates, gets)
}

/// A connection that sends half a request head and waits (the server cuts it at its header
/// timeout; it then starts again).
async fn slowloris(addr: std::net::SocketAddr, stop: Arc<AtomicBool>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    while !stop.load(Ordering::Relaxed) {
        let Ok(mut tcp) = tokio::net::TcpStream::connect(addr).await else {
            continue;
        };
        // Not even TLS: a client that opens connections and sends bytes slowly.
        let _ = tcp.write_all(&[0x16, 0x03, 0x01]).await;
        let mut buf = [0u8; 64];
        let _ = tokio::time::timeout(Duration::from_secs(2), tcp.read(&mut buf)).await;
    }
}

pub async fn run(quick: bool) -> anyhow::Result<()> {
    let secs = if quick { 2.0 } else { 6.0 };
    let (server, _dir) = crate::setup::server().await?;
    logical_cluster(&server, "flood").await?;
    logical_cluster(&server, "quiet").await?;
    let options = apiserver::serve::Options {
        header_timeout: Duration::from_secs(2),
        ..Default::default()
    };
    let (addr, _) = crate::setup::serve_https(&server, options).await?;
    let quiet = Conn::connect(addr, admin_tls(&server, "quiet").await?).await?;
    let flood_tls = admin_tls(&server, "flood").await?;
    println!(
        "Isolation benchmark: cluster `flood` creates on {FLOODERS} clients and holds {SLOW} slow connections; cluster `quiet` measures a create and a get at a time, {secs}s each way ({} seats)",
        std::env::var("SEATS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(options.flow.seats)
    );
    // Warm up, then the unloaded figures.
    measure(&quiet, "warm", 0.5).await;
    let (alone, alone_creates, alone_gets) = measure(&quiet, "alone", secs).await;

    let stop = Arc::new(AtomicBool::new(false));
    let created = Arc::new(AtomicU64::new(0));
    let throttled = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    let mut conns = Vec::new();
    for _ in 0..4 {
        conns.push(Conn::connect(addr, flood_tls.clone()).await?);
    }
    for w in 0..FLOODERS {
        let (conn, stop, created, throttled) = (
            conns[w % conns.len()].clone(),
            stop.clone(),
            created.clone(),
            throttled.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let body = cm(&format!("f{w}-{i}"));
                match conn
                    .send(
                        "POST",
                        "/clusters/flood/api/v1/namespaces/default/configmaps",
                        Some(body),
                    )
                    .await
                {
                    Ok((201, _)) => created.fetch_add(1, Ordering::Relaxed),
                    Ok((429, _)) => throttled.fetch_add(1, Ordering::Relaxed),
                    other => panic!("a flood create answered {other:?}"),
                };
            }
        }));
    }
    for _ in 0..SLOW {
        tasks.push(tokio::spawn(slowloris(addr, stop.clone())));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let flood_started = Instant::now();
    let before = created.load(Ordering::Relaxed);
    let (flooded, flooded_creates, flooded_gets) = measure(&quiet, "flooded", secs).await;
    let flood_rate =
        (created.load(Ordering::Relaxed) - before) as f64 / flood_started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        let _ = t.await;
    }

    header("quiet cluster under a flood", "quiet cluster alone");
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    line(
        "quiet p50 (ms)",
        ms(flooded.percentile(0.5)),
        ms(alone.percentile(0.5)),
        "ms",
        Better::Lower,
    );
    line(
        "quiet p99 (ms)",
        ms(flooded.percentile(0.99)),
        ms(alone.percentile(0.99)),
        "ms",
        Better::Lower,
    );
    for (what, ours, peer) in [
        ("quiet create p99 (ms)", &flooded_creates, &alone_creates),
        ("quiet get p99 (ms)", &flooded_gets, &alone_gets),
    ] {
        line(
            what,
            ms(ours.percentile(0.99)),
            ms(peer.percentile(0.99)),
            "ms",
            Better::Lower,
        );
    }
    println!(
        "flood: {flood_rate:.0} creates/s accepted, {} answered 429; quiet: {} requests alone, {} under the flood",
        throttled.load(Ordering::Relaxed),
        alone.0.len(),
        flooded.0.len()
    );
    let ratio = flooded.percentile(0.99).as_secs_f64() / alone.percentile(0.99).as_secs_f64();
    println!(
        "target: quiet p99 under the flood <= 2x its unloaded p99: {ratio:.2}x ({})",
        if ratio <= 2.0 { "met" } else { "NOT met" }
    );
    Ok(())
}
