//! The admission benchmark: ConfigMap creates through the API server (in process, 8
//! concurrent clients) with no admission configured, with one validating and one mutating
//! webhook served by a local HTTPS server that answers at once, and with one
//! ValidatingAdmissionPolicy. Each configuration runs in a fresh logical cluster of the same
//! server; the figures are creates/s and p50/p99 latency, and what the admission adds to the
//! p50 (upstream's `apiserver_admission_webhook_admission_duration_seconds` measures the same
//! per call). Targets: a local webhook adds ≤ 1 ms p50; a policy adds ≤ 10 % to create cost.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use apiserver::server::{ApiServer, Caller};
use base64::Engine;
use bytes::Bytes;
use controlplane::auth::{UserExt, UserInfo};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{Value, json};

use crate::report::{Better, Samples, header, line};

const CLIENTS: usize = 8;

async fn send(server: &Arc<ApiServer>, method: &str, uri: &str, body: &Value) -> (u16, Bytes) {
    let req = http::Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .body(Bytes::from(body.to_string()))
        .expect("request");
    let resp = server
        .handle(req, Caller::Internal(UserInfo::system()))
        .await;
    let code = resp.status().as_u16();
    let bytes = resp
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    (code, bytes)
}

async fn must(server: &Arc<ApiServer>, uri: &str, body: Value) -> anyhow::Result<()> {
    let (code, b) = send(server, "POST", uri, &body).await;
    anyhow::ensure!(code == 201, "{uri}: {code} {}", String::from_utf8_lossy(&b));
    Ok(())
}

/// A webhook server answering every review at once: allowed, with a one-label patch at
/// `/mutate`. Returns its port and CA bundle.
async fn webhook_server() -> anyhow::Result<(u16, String)> {
    let ca = pki::Ca::generate("bench-webhook-ca")?;
    let pair = ca.issue_server("hooks", &["127.0.0.1".to_string()])?;
    let chain =
        CertificateDer::pem_slice_iter(pair.cert_pem.as_bytes()).collect::<Result<Vec<_>, _>>()?;
    let key = PrivateKeyDer::from_pem_slice(pair.key_pem.as_bytes())?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(cfg));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    let patch = base64::engine::general_purpose::STANDARD
        .encode(r#"[{"op":"add","path":"/metadata/labels","value":{"mutated":"yes"}}]"#);
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            let patch = patch.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let svc = hyper::service::service_fn(
                    move |req: http::Request<hyper::body::Incoming>| {
                        let patch = patch.clone();
                        async move {
                            let mutate = req.uri().path() == "/mutate";
                            let body = req
                                .into_body()
                                .collect()
                                .await
                                .map(|b| b.to_bytes())
                                .unwrap_or_default();
                            let review: Value =
                                serde_json::from_slice(&body).unwrap_or(Value::Null);
                            let mut response =
                                json!({"uid": review["request"]["uid"], "allowed": true});
                            if mutate {
                                response["patchType"] = json!("JSONPatch");
                                response["patch"] = json!(patch);
                            }
                            let out = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response});
                            Ok::<_, Infallible>(http::Response::new(Full::new(Bytes::from(
                                out.to_string(),
                            ))))
                        }
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    Ok((
        port,
        base64::engine::general_purpose::STANDARD.encode(ca.pair.cert_pem.as_bytes()),
    ))
}

struct Run {
    ops: f64,
    p50: Duration,
    p99: Duration,
    /// Process CPU time per create (user + system), in microseconds.
    cpu_us: f64,
}

/// This process's CPU time (user + system) from `/proc/self/stat`, in clock ticks.
fn cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let num = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
    // utime and stime are fields 14 and 15 of the line: 12 and 13 after the ')'.
    num(11) + num(12)
}

/// Clock ticks per second (Linux's USER_HZ).
const TICKS_PER_SEC: f64 = 100.0;

/// Creates ConfigMaps in `cluster` from `CLIENTS` tasks for `secs`.
async fn creates(
    server: &Arc<ApiServer>,
    cluster: &str,
    run: &str,
    clients: usize,
    secs: f64,
) -> Run {
    let uri = format!("/clusters/{cluster}/api/v1/namespaces/default/configmaps");
    let count = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let started = Instant::now();
    let ticks = cpu_ticks();
    let tasks: Vec<_> = (0..clients)
        .map(|c| {
            let (server, uri, count) = (server.clone(), uri.clone(), count.clone());
            let run = run.to_string();
            tokio::spawn(async move {
                let mut lat = Vec::new();
                let mut i = 0u64;
                while Instant::now() < deadline {
                    let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": format!("{run}-{c}-{i}")}, "data": {"k": "v"}});
                    let t = Instant::now();
                    let (code, b) = send(&server, "POST", &uri, &body).await;
                    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&b));
                    lat.push(t.elapsed());
                    i += 1;
                }
                count.fetch_add(i, Ordering::Relaxed);
                lat
            })
        })
        .collect();
    let mut all = Samples::default();
    for t in tasks {
        all.0.extend(t.await.unwrap_or_default());
    }
    let n = count.load(Ordering::Relaxed).max(1) as f64;
    Run {
        cpu_us: (cpu_ticks() - ticks) as f64 / TICKS_PER_SEC * 1e6 / n,
        ops: n / started.elapsed().as_secs_f64(),
        p50: all.percentile(0.5),
        p99: all.percentile(0.99),
    }
}

async fn cluster(server: &Arc<ApiServer>, name: &str) -> anyhow::Result<()> {
    must(
        server,
        "/apis/core.matryoshka.dev/v1alpha1/logicalclusters",
        json!({"apiVersion": "core.matryoshka.dev/v1alpha1", "kind": "LogicalCluster", "metadata": {"name": name}}),
    )
    .await?;
    let deadline = Instant::now() + Duration::from_secs(20);
    while !server.cluster_exists(name).await {
        anyhow::ensure!(Instant::now() < deadline, "{name} never ready");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(())
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// The admission a measured cluster is given.
#[derive(Clone, Copy, PartialEq)]
enum Setup {
    Plain,
    Webhooks,
    Policy,
}

/// Configures `setup` in the cluster `bench` of `server`.
async fn configure(
    server: &Arc<ApiServer>,
    setup: Setup,
    port: u16,
    ca_bundle: &str,
) -> anyhow::Result<()> {
    let rules = json!([{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]);
    let hook = |name: &str, path: &str| {
        json!({"name": name, "rules": rules, "sideEffects": "None", "admissionReviewVersions": ["v1"],
            "clientConfig": {"url": format!("https://127.0.0.1:{port}{path}"), "caBundle": ca_bundle}})
    };
    let reg = "/clusters/bench/apis/admissionregistration.k8s.io/v1";
    let objects = match setup {
        Setup::Plain => vec![],
        Setup::Webhooks => vec![
            (
                "validatingwebhookconfigurations",
                json!({"metadata": {"name": "v"}, "webhooks": [hook("v.bench.example.com", "/validate")]}),
            ),
            (
                "mutatingwebhookconfigurations",
                json!({"metadata": {"name": "m"}, "webhooks": [hook("m.bench.example.com", "/mutate")]}),
            ),
        ],
        Setup::Policy => vec![
            (
                "validatingadmissionpolicies",
                json!({"metadata": {"name": "small"}, "spec": {"failurePolicy": "Fail",
                    "matchConstraints": {"resourceRules": rules},
                    "validations": [{"expression": "!has(object.data) || object.data.size() < 100", "message": "too many keys"}]}}),
            ),
            (
                "validatingadmissionpolicybindings",
                json!({"metadata": {"name": "small"}, "spec": {"policyName": "small", "validationActions": ["Deny"]}}),
            ),
        ],
    };
    for (plural, obj) in objects {
        must(server, &format!("{reg}/{plural}"), obj).await?;
    }
    Ok(())
}

/// Creates/s with 8 clients and latency with one (no queueing behind other requests), on a
/// server of its own so every setup starts from the same empty store.
async fn measure(
    setup: Setup,
    port: u16,
    ca_bundle: &str,
    secs: f64,
) -> anyhow::Result<(Run, Run)> {
    let (server, _dir) = crate::setup::server().await?;
    cluster(&server, "bench").await?;
    configure(&server, setup, port, ca_bundle).await?;
    creates(&server, "bench", "warm", CLIENTS, 0.3).await;
    let many = creates(&server, "bench", "run", CLIENTS, secs).await;
    let one = creates(&server, "bench", "one", 1, secs).await;
    Ok((many, one))
}

/// The median of each figure over rounds.
fn median_of(rounds: Vec<(Run, Run)>) -> (Run, Run) {
    fn med(mut v: Vec<f64>) -> f64 {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    }
    fn of(runs: Vec<&Run>) -> Run {
        let d = |f: &dyn Fn(&Run) -> Duration| {
            Duration::from_secs_f64(med(runs.iter().map(|r| f(r).as_secs_f64()).collect()))
        };
        Run {
            ops: med(runs.iter().map(|r| r.ops).collect()),
            p50: d(&|r| r.p50),
            p99: d(&|r| r.p99),
            cpu_us: med(runs.iter().map(|r| r.cpu_us).collect()),
        }
    }
    (
        of(rounds.iter().map(|(m, _)| m).collect()),
        of(rounds.iter().map(|(_, o)| o).collect()),
    )
}

pub async fn run(quick: bool) -> anyhow::Result<()> {
    let secs = if quick { 1.5 } else { 4.0 };
    let (port, ca_bundle) = webhook_server().await?;
    println!(
        "Admission benchmark: ConfigMap creates from {CLIENTS} in-process clients (latency: 1 client), {secs}s per line"
    );
    // Rounds alternate the setups; each figure is the median over the rounds (a loaded
    // 2-core machine varies from run to run more than the admission costs).
    let rounds = if quick { 1 } else { 3 };
    let mut runs: Vec<Vec<(Run, Run)>> = vec![Vec::new(), Vec::new(), Vec::new()];
    for _ in 0..rounds {
        for (i, setup) in [Setup::Plain, Setup::Webhooks, Setup::Policy]
            .into_iter()
            .enumerate()
        {
            runs[i].push(measure(setup, port, &ca_bundle, secs).await?);
        }
    }
    let mut median = runs.into_iter().map(median_of);
    let (plain, plain1) = median.next().context("plain")?;
    let (hooks, hooks1) = median.next().context("webhooks")?;
    let (policy, policy1) = median.next().context("policy")?;
    header("with admission", "without");
    let rows = [
        (
            "creates/s, 1 validating + 1 mutating webhook",
            hooks.ops,
            plain.ops,
            "ops/s",
            Better::Higher,
        ),
        (
            "create p50 (1 client), webhooks",
            us(hooks1.p50),
            us(plain1.p50),
            "µs",
            Better::Lower,
        ),
        (
            "create p99 (1 client), webhooks",
            us(hooks1.p99),
            us(plain1.p99),
            "µs",
            Better::Lower,
        ),
        (
            "creates/s, 1 ValidatingAdmissionPolicy",
            policy.ops,
            plain.ops,
            "ops/s",
            Better::Higher,
        ),
        (
            "create p50 (1 client), policy",
            us(policy1.p50),
            us(plain1.p50),
            "µs",
            Better::Lower,
        ),
        (
            "create p99 (1 client), policy",
            us(policy1.p99),
            us(plain1.p99),
            "µs",
            Better::Lower,
        ),
    ];
    for (what, ours, peer, unit, better) in rows {
        line(what, ours, peer, unit, better);
    }
    line(
        "CPU per create, webhooks (+ webhook server)",
        hooks.cpu_us,
        plain.cpu_us,
        "µs",
        Better::Lower,
    );
    line(
        "CPU per create, policy",
        policy.cpu_us,
        plain.cpu_us,
        "µs",
        Better::Lower,
    );
    let per_hook = (us(hooks1.p50) - us(plain1.p50)) / 2.0 / 1000.0;
    let cost = (policy.cpu_us / plain.cpu_us - 1.0) * 100.0;
    println!(
        "a webhook call adds {per_hook:.2} ms to the p50 (target ≤ 1 ms: {}); the policy adds {cost:.1} % to the CPU cost of a create (target ≤ 10 %: {})",
        if per_hook <= 1.0 { "met" } else { "missed" },
        if cost <= 10.0 { "met" } else { "missed" },
    );
    Ok(())
}
