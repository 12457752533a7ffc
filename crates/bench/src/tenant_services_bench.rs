//! The platform's services in a tenant cluster on process machines:
//!
//! - LoadBalancer Services: the time from creating a `type: LoadBalancer` Service in the
//!   tenant cluster to its address answering HTTP from this machine (the cloud controller's
//!   infra Service, the platform's allocator and proxy, the tenant node's NodePort, the pod);
//! - volumes: the time from creating a claim of the cluster's default StorageClass (the
//!   platform's volumes) and a pod using it to the pod Running (the infra claim and its
//!   directory volume, the tenant volume, binding, scheduling, the kubelet's mount).
//!
//! Runs `matryoshka up --machine-provider process --load-balancer-ip-range …` (the binary
//! beside this one: build both with `cargo build --release -p bench -p matryoshka`).
//!
//! Usage: `cargo run --release -p bench -- tenant-services [--count N]`.
//!
//! The LoadBalancer peer is cloud-provider-kubevirt as Cozystack configures it: it creates the
//! infra Service and then polls it every `creationPollInterval` = 5 s for an address, so no
//! tenant LoadBalancer gets one in under 5 s (published configuration; no KubeVirt here). The
//! volumes' peer (kubevirt-csi: a CDI DataVolume, then a hotplug into the VM) does not run here
//! and publishes no figure.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Service};
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::machines_bench::{create_cluster, until};
use crate::report::{Better, Samples, header, line};

const POOL: &str = "127.2.0.10-127.2.0.250";

/// The body of `GET /hostname` on `addr`, if it answers 200.
fn http_get(addr: std::net::SocketAddr) -> Option<String> {
    let mut c = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    c.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        c,
        "GET /hostname HTTP/1.1\r\nHost: lb\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    c.read_to_string(&mut out).ok()?;
    let (head, body) = out.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_string())
}

pub async fn run(count: usize) -> anyhow::Result<()> {
    let p = crate::process_platform::ProcessPlatform::start(&[
        "--machine-provider",
        "process",
        "--machine-bridge",
        "mtbench1",
        "--machine-subnet",
        "10.242.1.0/24",
        "--machine-dns-upstream",
        "none",
        "--load-balancer-ip-range",
        POOL,
    ])
    .await?;
    p.import_test_images()?;
    println!(
        "tenant-services benchmark: {count} LoadBalancer Services and {count} volumes of a tenant cluster on one process machine, pool {POOL}"
    );
    let result = measure(&p, count).await;
    if result.is_err() {
        eprintln!("{}", p.diagnostics());
    }
    p.stop().await;
    result
}

async fn measure(p: &crate::process_platform::ProcessPlatform, count: usize) -> anyhow::Result<()> {
    create_cluster(
        &p.root,
        "lb",
        json!({"minReplicas": 1, "maxReplicas": 1, "instanceType": "u1.medium"}),
    )
    .await?;
    let tenant = p.tenant_cluster_client("tenant-root", "lb").await?;
    let deploys: Api<Deployment> = Api::namespaced(tenant.clone(), "default");
    let web: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{
                    "name": "main", "image": "docker.io/matryoshka/mtest:1",
                    "args": ["serve-http", "--port", "8080"],
                    "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 1},
                }]},
            },
        },
    }))?;
    deploys.create(&PostParams::default(), &web).await?;
    until("web ready", Duration::from_secs(180), || async {
        deploys
            .get("web")
            .await
            .ok()
            .and_then(|d| d.status?.ready_replicas)
            == Some(1)
    })
    .await?;
    let services: Api<Service> = Api::namespaced(tenant.clone(), "default");
    let mut address = Samples::default();
    let mut answer = Samples::default();
    for i in 0..count {
        let name = format!("web-{i}");
        let svc: Service = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"type": "LoadBalancer", "selector": {"app": "web"},
                     "ports": [{"port": 80, "targetPort": 8080}]},
        }))?;
        let start = Instant::now();
        services.create(&PostParams::default(), &svc).await?;
        let mut ip = None;
        let deadline = start + Duration::from_secs(60);
        while ip.is_none() {
            anyhow::ensure!(Instant::now() < deadline, "{name}: no address in 60 s");
            ip = services
                .get_status(&name)
                .await
                .ok()
                .and_then(|s| s.status?.load_balancer?.ingress?.first()?.ip.clone());
            if ip.is_none() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        address.0.push(start.elapsed());
        let addr: std::net::SocketAddr = format!("{}:80", ip.unwrap_or_default()).parse()?;
        loop {
            anyhow::ensure!(Instant::now() < deadline, "{name}: {addr} never answered");
            let got = tokio::task::spawn_blocking(move || http_get(addr)).await?;
            if got.is_some_and(|b| b.starts_with("web-")) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        answer.0.push(start.elapsed());
    }
    // Volumes: a claim and a pod using it, each to Running.
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(tenant.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(tenant.clone(), "default");
    let mut volume = Samples::default();
    for i in 0..count {
        let name = format!("data-{i}");
        let claim: PersistentVolumeClaim = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Mi"}}},
        }))?;
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {
                "terminationGracePeriodSeconds": 1,
                "containers": [{"name": "c", "image": "docker.io/matryoshka/mtest:1",
                    "args": ["sleep", "infinity"],
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": name}}],
            },
        }))?;
        let start = Instant::now();
        claims.create(&PostParams::default(), &claim).await?;
        pods.create(&PostParams::default(), &pod).await?;
        until(
            &format!("{name} Running"),
            Duration::from_secs(60),
            || async {
                pods.get(&name)
                    .await
                    .ok()
                    .and_then(|p| p.status?.phase)
                    .as_deref()
                    == Some("Running")
            },
        )
        .await?;
        volume.0.push(start.elapsed());
    }
    header("Matryoshka", "target");
    line(
        "LoadBalancer Service create → address in status, p50",
        address.percentile(0.5).as_secs_f64() * 1000.0,
        1000.0,
        "ms",
        Better::Lower,
    );
    line(
        "LoadBalancer Service create → address answers HTTP, p50",
        answer.percentile(0.5).as_secs_f64() * 1000.0,
        1000.0,
        "ms",
        Better::Lower,
    );
    line(
        "LoadBalancer Service create → address answers HTTP, p90",
        answer.percentile(0.9).as_secs_f64() * 1000.0,
        1000.0,
        "ms",
        Better::Lower,
    );
    line(
        "claim + pod create → pod Running with the volume, p50",
        volume.percentile(0.5).as_secs_f64() * 1000.0,
        1000.0,
        "ms",
        Better::Lower,
    );
    line(
        "claim + pod create → pod Running with the volume, p90",
        volume.percentile(0.9).as_secs_f64() * 1000.0,
        1000.0,
        "ms",
        Better::Lower,
    );
    println!(
        "peer (published configuration): cloud-provider-kubevirt polls the infra Service every 5 s → ≥ 5 s; ratio {:.1}×",
        5.0 / answer.percentile(0.5).as_secs_f64().max(1e-6)
    );
    Ok(())
}
