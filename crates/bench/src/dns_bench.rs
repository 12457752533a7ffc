//! `bench dns`: queries per second and latency of the cluster DNS server on one core.
//!
//! The server (`dns::Server` over a view of 1,000 ClusterIP Services and 100 headless
//! Services of 10 ready endpoints, in 10 namespaces) runs on a current-thread runtime on a
//! thread pinned to CPU 0; the load generator, a plain UDP loop keeping a fixed window of
//! queries in flight, runs on a thread pinned to CPU 1 (`taskset` on the thread's id, so no
//! unsafe code here). Each query kind runs for a fixed time after a warm-up; every answer
//! is checked (rcode and answer count) and counted.
//!
//! Peer: CoreDNS is not packaged by Debian, so its published figure stands in: "Scaling
//! CoreDNS in Kubernetes Clusters" (coredns/deployment) measured 33,669 qps for internal
//! names with both vCPUs of a GCE n1-standard-2 pegged (~1900m), avg latency 2.608 ms from
//! dnsperf — about 16,800 qps per core.

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use dns::view::{EndpointRecord, PortRecord, ServiceKind, ServiceRecord, SliceRecord};
use hickory_proto::op::{Message, MessageType, OpCode, Query};
use hickory_proto::rr::{Name, RecordType};

use crate::report::{Better, Samples};

/// CoreDNS's published internal-name throughput per vCPU (33,669 qps on two pegged vCPUs).
const COREDNS_QPS_PER_CORE: f64 = 33_669.0 / 2.0;
/// CoreDNS's published average latency at that load, in ms.
const COREDNS_AVG_MS: f64 = 2.608;
/// The project's target.
const TARGET_QPS: f64 = 50_000.0;

const NAMESPACES: usize = 10;
const SERVICES: usize = 1_000;
const HEADLESS: usize = 100;
const ENDPOINTS: usize = 10;

/// Pins the calling thread to `cpu` with `taskset` (by thread id, from /proc/thread-self).
fn pin_current_thread(cpu: usize) -> anyhow::Result<()> {
    let link = std::fs::read_link("/proc/thread-self").context("reading /proc/thread-self")?;
    let tid = link
        .file_name()
        .and_then(|t| t.to_str())
        .context("no thread id in /proc/thread-self")?
        .to_string();
    let out = std::process::Command::new("taskset")
        .args(["-p", "-c", &cpu.to_string(), &tid])
        .output()
        .context("running taskset (util-linux)")?;
    if !out.status.success() {
        bail!("taskset failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(())
}

fn http() -> Box<[PortRecord]> {
    Box::new([PortRecord {
        name: "http".into(),
        protocol: "tcp".into(),
        port: Some(80),
    }])
}

/// Fills `view` with `services` ClusterIP and `headless` headless Services (each with
/// `endpoints` ready endpoints) over `namespaces` namespaces.
fn populate(
    view: &dns::View,
    namespaces: usize,
    services: usize,
    headless: usize,
    endpoints: usize,
) {
    view.update(|u| {
        for n in 0..namespaces {
            u.upsert_namespace(&format!("ns-{n}"));
        }
        for i in 0..services {
            let ip = std::net::Ipv4Addr::from(0x0a60_0000u32 + 100 + i as u32);
            u.upsert_service(
                &format!("ns-{}", i % namespaces),
                &format!("svc-{i}"),
                ServiceRecord {
                    kind: ServiceKind::ClusterIp(Box::new([ip.into()])),
                    ports: http(),
                    publish_not_ready: false,
                },
            );
        }
        for i in 0..headless {
            let ns = format!("ns-{}", i % namespaces);
            let name = format!("hl-{i}");
            u.upsert_service(
                &ns,
                &name,
                ServiceRecord {
                    kind: ServiceKind::Headless,
                    ports: http(),
                    publish_not_ready: false,
                },
            );
            let eps = (0..endpoints)
                .map(|e| EndpointRecord {
                    address: std::net::Ipv4Addr::from(0x0af4_0000u32 + (i * endpoints + e) as u32)
                        .into(),
                    hostname: Some(format!("{name}-{e}").into()),
                    ready: true,
                })
                .collect();
            u.upsert_slice(
                &ns,
                &format!("{name}-abcde"),
                &name,
                SliceRecord {
                    ports: http(),
                    endpoints: eps,
                },
            );
        }
    });
}

fn query_bytes(name: &str) -> anyhow::Result<Vec<u8>> {
    let mut m = Message::new();
    m.set_id(0)
        .set_message_type(MessageType::Query)
        .set_op_code(OpCode::Query)
        .set_recursion_desired(true)
        .add_query(Query::query(Name::from_ascii(name)?, RecordType::A));
    Ok(m.to_vec()?)
}

/// What one load run measured.
struct Run {
    qps: f64,
    latency: Samples,
    bad: u64,
    lost: u64,
}

/// Keeps `window` queries in flight against `server` for `duration` (after `warmup`),
/// cycling through `queries`; answers must have `rcode` and at least `min_answers` records.
fn load(
    server: SocketAddr,
    queries: &[Vec<u8>],
    window: usize,
    warmup: Duration,
    duration: Duration,
    rcode: u8,
    min_answers: u16,
) -> anyhow::Result<Run> {
    let sock = UdpSocket::bind("127.0.0.1:0")?;
    sock.connect(server)?;
    sock.set_read_timeout(Some(Duration::from_millis(20)))?;
    let mut sent_at: Vec<Option<Instant>> = vec![None; 65536];
    let mut next_id: u16 = 0;
    let mut next_q = 0usize;
    let mut in_flight = 0usize;
    let mut buf = vec![0u8; 4096];
    let mut latency = Samples::default();
    let (mut answered, mut bad, mut lost) = (0u64, 0u64, 0u64);
    let start = Instant::now();
    let measure_from = start + warmup;
    let end = measure_from + duration;
    let mut last_sweep = start;
    let mut packet = Vec::new();
    while Instant::now() < end {
        while in_flight < window {
            while sent_at[next_id as usize].is_some() {
                next_id = next_id.wrapping_add(1);
            }
            packet.clear();
            packet.extend_from_slice(&queries[next_q % queries.len()]);
            next_q += 1;
            packet[..2].copy_from_slice(&next_id.to_be_bytes());
            sock.send(&packet)?;
            sent_at[next_id as usize] = Some(Instant::now());
            next_id = next_id.wrapping_add(1);
            in_flight += 1;
        }
        match sock.recv(&mut buf) {
            Ok(n) if n >= 12 => {
                let id = u16::from_be_bytes([buf[0], buf[1]]);
                if let Some(at) = sent_at[id as usize].take() {
                    in_flight -= 1;
                    let now = Instant::now();
                    if now >= measure_from {
                        answered += 1;
                        latency.0.push(now - at);
                        let ancount = u16::from_be_bytes([buf[6], buf[7]]);
                        if buf[3] & 0x0f != rcode || ancount < min_answers {
                            bad += 1;
                        }
                    }
                }
            }
            Ok(_) => bad += 1,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(e.into()),
        }
        // Queries unanswered for a second are lost (UDP): free their slots.
        let now = Instant::now();
        if now - last_sweep > Duration::from_millis(500) {
            last_sweep = now;
            for slot in sent_at.iter_mut() {
                if slot.is_some_and(|at| now - at > Duration::from_secs(1)) {
                    *slot = None;
                    in_flight -= 1;
                    lost += 1;
                }
            }
        }
    }
    Ok(Run {
        qps: answered as f64 / duration.as_secs_f64(),
        latency,
        bad,
        lost,
    })
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Resident memory per record: a fresh view of 10,000 Services and 10,000 headless ones
/// with 10 endpoints each.
fn memory() -> (f64, f64) {
    let before = crate::clusters_bench::rss_bytes();
    let v = dns::View::new();
    populate(&v, 100, 10_000, 0, 0);
    let mid = crate::clusters_bench::rss_bytes();
    populate(&v, 100, 0, 10_000, 10);
    let after = crate::clusters_bench::rss_bytes();
    let per_service = mid.saturating_sub(before) as f64 / 10_000.0;
    // Each headless Service: one service record, one slice, ten endpoints.
    let per_endpoint = (after.saturating_sub(mid) as f64 / 10_000.0 - per_service).max(0.0) / 10.0;
    drop(v);
    (per_service, per_endpoint)
}

pub async fn run(quick: bool) -> anyhow::Result<()> {
    let (warmup, duration) = if quick {
        (Duration::from_millis(300), Duration::from_secs(1))
    } else {
        (Duration::from_secs(1), Duration::from_secs(5))
    };
    // First, before the runs leave freed memory the allocator would reuse.
    let (per_service, per_endpoint) = memory();
    let view = Arc::new(dns::View::new());
    populate(&view, NAMESPACES, SERVICES, HEADLESS, ENDPOINTS);
    view.set_synced();

    // The server: one thread, one current-thread runtime, CPU 0.
    let (addr_tx, addr_rx) = mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server_view = view.clone();
    let server = std::thread::spawn(move || -> anyhow::Result<()> {
        pin_current_thread(0)?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        rt.block_on(async move {
            let config = dns::Config {
                listen: vec!["127.0.0.1:0".parse()?],
                upstream: dns::Upstream::Disabled,
                ..dns::Config::default()
            };
            let server = dns::Server::start(server_view, &config).await?;
            addr_tx.send(server.addrs()[0])?;
            let _ = stop_rx.await;
            server.shutdown().await;
            anyhow::Ok(())
        })
    });
    let addr = addr_rx
        .recv_timeout(Duration::from_secs(10))
        .context("the DNS server did not start")?;

    let cluster_ip: Vec<Vec<u8>> = (0..SERVICES)
        .map(|i| query_bytes(&format!("svc-{i}.ns-{}.svc.cluster.local.", i % NAMESPACES)))
        .collect::<anyhow::Result<_>>()?;
    let headless: Vec<Vec<u8>> = (0..HEADLESS)
        .map(|i| query_bytes(&format!("hl-{i}.ns-{}.svc.cluster.local.", i % NAMESPACES)))
        .collect::<anyhow::Result<_>>()?;
    let missing: Vec<Vec<u8>> = (0..SERVICES)
        .map(|i| {
            query_bytes(&format!(
                "api-{i}.example.com.ns-{}.svc.cluster.local.",
                i % NAMESPACES
            ))
        })
        .collect::<anyhow::Result<_>>()?;

    // The load generator: CPU 1.
    let load_gen =
        std::thread::spawn(move || -> anyhow::Result<Vec<(&'static str, usize, Run)>> {
            pin_current_thread(1)?;
            let mut out = Vec::new();
            for (what, queries, window, rcode, min) in [
                ("ClusterIP A, 1 in flight", &cluster_ip, 1, 0, 1),
                ("ClusterIP A", &cluster_ip, 64, 0, 1),
                (
                    "headless A (10 endpoints)",
                    &headless,
                    64,
                    0,
                    ENDPOINTS as u16,
                ),
                ("NXDOMAIN (search-list expansion)", &missing, 64, 3, 0),
            ] {
                let r = load(addr, queries, window, warmup, duration, rcode, min)?;
                out.push((what, window, r));
            }
            Ok(out)
        });
    let runs = load_gen
        .join()
        .map_err(|_| anyhow::anyhow!("the load generator panicked"))??;
    let _ = stop_tx.send(());
    server
        .join()
        .map_err(|_| anyhow::anyhow!("the DNS server thread panicked"))??;

    println!(
        "cluster DNS on one core (server pinned to CPU 0, load on CPU 1): {SERVICES} ClusterIP + {HEADLESS} headless Services × {ENDPOINTS} endpoints, {:.0} s per row, UDP over loopback",
        duration.as_secs_f64()
    );
    println!(
        "{:<36} {:>8} {:>12} {:>9} {:>9} {:>9} {:>6} {:>6}",
        "query", "window", "qps", "p50 ms", "p99 ms", "avg ms", "bad", "lost"
    );
    for (what, window, r) in &runs {
        let avg = if r.latency.0.is_empty() {
            0.0
        } else {
            ms(r.latency.0.iter().sum::<Duration>()) / r.latency.0.len() as f64
        };
        println!(
            "{what:<36} {window:>8} {:>12.0} {:>9.3} {:>9.3} {avg:>9.3} {:>6} {:>6}",
            r.qps,
            ms(r.latency.percentile(0.5)),
            ms(r.latency.percentile(0.99)),
            r.bad,
            r.lost
        );
        if r.bad > 0 {
            bail!("{what}: {} answers were wrong", r.bad);
        }
    }
    println!(
        "memory: {per_service:.0} B per ClusterIP Service, {per_endpoint:.0} B per endpoint (RSS growth over 10,000 each)"
    );
    println!();
    crate::report::header("matryoshka", "CoreDNS (pub.)");
    let main = &runs[1].2;
    crate::report::line(
        "Service A lookups per core",
        main.qps,
        COREDNS_QPS_PER_CORE,
        "qps",
        Better::Higher,
    );
    let avg = ms(main.latency.0.iter().sum::<Duration>()) / main.latency.0.len().max(1) as f64;
    crate::report::line(
        "avg latency at that load",
        avg,
        COREDNS_AVG_MS,
        "ms",
        Better::Lower,
    );
    println!(
        "target ≥ {TARGET_QPS:.0} qps per core: {}",
        if main.qps >= TARGET_QPS {
            "met"
        } else {
            "NOT met"
        }
    );
    Ok(())
}
