//! `bench kubelet`: pod start latency and density of the CRI node agent on a real containerd.
//!
//! One agent runs on this machine with its own containerd and the cached test images
//! (`mtest sleep infinity`, which acts on SIGTERM as PID 1). Figures:
//!
//! - **start latency**: create → `Running` with every container ready, one pod at a time
//!   (no queueing in the number), p50 and p99 over `--pods` pods;
//! - **raw CRI**, measured in the same run on the same containerd: `RunPodSandbox` +
//!   `CreateContainer` + `StartContainer` of an equivalent pod, one at a time — the
//!   runtime's own cost, which the agent's latency is compared with (overhead ratio);
//! - **density**: `--density` pods running at once, the process's RSS growth per pod (the
//!   in-process API server is in the same process, so this is an upper bound of the agent's),
//!   and the time to delete them all until the API has none left.
//!
//! Peers: upstream's pod-startup SLO (p99 ≤ 5 s without image pulls) and the raw CRI calls.
//! Targets: p50 < 300 ms, p99 < 1 s, the agent's p50 ≤ 1.5× the raw CRI calls' p50.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::Context;
use futures::StreamExt;
use k8s_cri::v1 as cri;
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use node::kubelet::{Kubelet, KubeletConfig, Teardown};

use crate::clusters_bench::rss_bytes;
use crate::report::{self, Better, Samples};

/// Upstream's pod-startup SLO for pods without image pulls (p99).
const SLO_P99: Duration = Duration::from_secs(5);

pub struct Args {
    pub pods: usize,
    pub density: usize,
}

fn unique() -> String {
    format!("{:08x}", rand::random::<u32>())
}

fn pod(name: &str, node: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some(node.into()),
            termination_grace_period_seconds: Some(5),
            automount_service_account_token: Some(false),
            containers: vec![Container {
                name: "main".into(),
                image: Some(testimages::MTEST.into()),
                args: Some(vec!["sleep".into(), "infinity".into()]),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        status: None,
    }
}

fn ready(p: &Pod) -> bool {
    let Some(s) = p.status.as_ref() else {
        return false;
    };
    s.phase.as_deref() == Some("Running") && s.container_statuses.iter().flatten().all(|c| c.ready)
}

/// Every pod of the namespace, kept current by a watch; `ready_at` records when each first
/// became ready.
struct Tracker {
    ready_at: HashMap<String, Instant>,
    present: HashMap<String, ()>,
}

async fn track(api: Api<Pod>, tx: tokio::sync::mpsc::UnboundedSender<(String, bool, bool)>) {
    let mut stream = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    while let Some(ev) = stream.next().await {
        let send = |p: &Pod, gone: bool| {
            let _ = tx.send((p.metadata.name.clone().unwrap_or_default(), ready(p), gone));
        };
        match ev {
            Ok(Event::Apply(p) | Event::InitApply(p)) => send(&p, false),
            Ok(Event::Delete(p)) => send(&p, true),
            _ => {}
        }
    }
}

impl Tracker {
    fn apply(&mut self, (name, ready, gone): (String, bool, bool)) {
        if gone {
            self.present.remove(&name);
            return;
        }
        self.present.insert(name.clone(), ());
        if ready {
            self.ready_at.entry(name).or_insert_with(Instant::now);
        }
    }
}

/// The raw CRI calls of one pod like the benchmark's; its sandbox ID.
async fn raw_pod(
    c: &node::kubelet::cri::CriClient,
    layout: &node::kubelet::Layout,
    cgroup_root: &str,
    i: usize,
) -> anyhow::Result<String> {
    let uid = format!("00000000-0000-4000-8000-{i:012}");
    let name = format!("raw-{i}");
    let ns = cri::NamespaceOption {
        pid: cri::NamespaceMode::Container as i32,
        ..Default::default()
    };
    let sandbox = cri::PodSandboxConfig {
        metadata: Some(cri::PodSandboxMetadata {
            name: name.clone(),
            uid: uid.clone(),
            namespace: "raw".into(),
            attempt: 0,
        }),
        hostname: name.clone(),
        log_directory: layout.pod_log_dir("raw", &name, &uid).display().to_string(),
        labels: HashMap::from([("matryoshka.dev/bench".to_string(), "raw".to_string())]),
        linux: Some(cri::LinuxPodSandboxConfig {
            cgroup_parent: format!(
                "{}/kubepods/besteffort/pod{uid}",
                cgroup_root.trim_end_matches('/')
            ),
            security_context: Some(cri::LinuxSandboxSecurityContext {
                namespace_options: Some(ns.clone()),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let id = c.run_pod_sandbox(sandbox.clone()).await?;
    let config = cri::ContainerConfig {
        metadata: Some(cri::ContainerMetadata {
            name: "main".into(),
            attempt: 0,
        }),
        image: Some(cri::ImageSpec {
            image: testimages::MTEST.into(),
            ..Default::default()
        }),
        args: vec!["sleep".into(), "infinity".into()],
        log_path: "main/0.log".into(),
        linux: Some(cri::LinuxContainerConfig {
            resources: Some(cri::LinuxContainerResources {
                cpu_shares: 2,
                oom_score_adj: 1000,
                ..Default::default()
            }),
            security_context: Some(cri::LinuxContainerSecurityContext {
                namespace_options: Some(ns),
                ..Default::default()
            }),
        }),
        ..Default::default()
    };
    let cid = c.create_container(&id, config, sandbox).await?;
    c.start_container(&cid).await?;
    Ok(id)
}

async fn wait_for(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<(String, bool, bool)>,
    tracker: &mut Tracker,
    limit: Duration,
    done: impl Fn(&Tracker) -> bool,
) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + limit;
    while !done(tracker) {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(ev)) => tracker.apply(ev),
            Ok(None) => anyhow::bail!("the pod watch ended"),
            Err(_) => anyhow::bail!("timed out after {limit:?}"),
        }
    }
    Ok(())
}

pub async fn run(quick: bool, args: Args) -> anyhow::Result<()> {
    let pods_n = if quick { args.pods.min(20) } else { args.pods };
    let density = if quick {
        args.density.min(50)
    } else {
        args.density
    };
    let images: Vec<_> = [testimages::mtest(), testimages::pause()]
        .into_iter()
        .map(|a| {
            a.map(|a| a.path.clone())
                .map_err(|e| anyhow::anyhow!("{e}"))
        })
        .collect::<anyhow::Result<_>>()?;
    let (server, _data) = crate::setup::server().await?;
    let client = crate::setup::clients(&server)
        .cluster("root")
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let dir = tempfile::Builder::new().prefix("mkb").tempdir_in("/tmp")?;
    let id = unique();
    let node_name = format!("bench-{id}");
    let mut config = KubeletConfig::new(&node_name, dir.path());
    config.cri_endpoint = format!(
        "unix://{}",
        dir.path().join("containerd/containerd.sock").display()
    );
    config.containerd.sandbox_image = testimages::PAUSE.into();
    config.containerd.preload = images;
    config.bridge = format!("mkb{}", &id[..6]);
    config.cgroup_root = format!("/mbench-{id}");
    config.pod_cidr = Some(
        "10.252.0.0/23"
            .parse()
            .map_err(|e| anyhow::anyhow!("{e:?}"))?,
    );
    config.teardown = Teardown::RemovePods;
    config.kubelet_address = std::net::Ipv4Addr::LOCALHOST.into();
    config.kubelet_port = 0;
    config.client_ca_pem = Some(server.control_plane().config().root_ca.cert_pem.clone());
    let kubelet = Kubelet::start(client.clone(), config.clone())
        .await
        .context("starting the agent")?;
    let result = measure(&client, &kubelet, &config, pods_n, density).await;
    kubelet.shutdown().await;
    // What the agent's teardown cannot remove: the bridge and the (empty) cgroup root.
    let _ = std::process::Command::new("ip")
        .args(["link", "delete", &config.bridge])
        .status();
    if let Ok(rd) = std::fs::read_dir("/sys/fs/cgroup") {
        for h in rd.flatten() {
            remove_cgroups(&h.path().join(config.cgroup_root.trim_start_matches('/')));
        }
    }
    result
}

fn remove_cgroups(dir: &std::path::Path) {
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_cgroups(&e.path());
            }
        }
    }
    let _ = std::fs::remove_dir(dir);
}

async fn measure(
    client: &kube::Client,
    kubelet: &Kubelet,
    config: &KubeletConfig,
    pods_n: usize,
    density: usize,
) -> anyhow::Result<()> {
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let watch = tokio::spawn(track(api.clone(), tx));
    let mut tracker = Tracker {
        ready_at: HashMap::new(),
        present: HashMap::new(),
    };
    // Warm-up: the first pod pays for the bridge, the image's first snapshot.
    api.create(&PostParams::default(), &pod("warm", &config.node_name))
        .await?;
    wait_for(&mut rx, &mut tracker, Duration::from_secs(60), |t| {
        t.ready_at.contains_key("warm")
    })
    .await?;

    // 1. Start latency, one pod at a time.
    let mut agent = Samples::default();
    for i in 0..pods_n {
        let name = format!("lat-{i}");
        let began = Instant::now();
        api.create(&PostParams::default(), &pod(&name, &config.node_name))
            .await?;
        wait_for(&mut rx, &mut tracker, Duration::from_secs(60), |t| {
            t.ready_at.contains_key(&name)
        })
        .await?;
        agent.0.push(tracker.ready_at[&name] - began);
    }
    // 2. The raw CRI calls, as many, on the same runtime.
    let cri = kubelet.cri();
    let mut raw = Samples::default();
    let mut raw_ids = Vec::new();
    for i in 0..pods_n {
        let began = Instant::now();
        raw_ids.push(raw_pod(&cri, kubelet.layout(), &config.cgroup_root, i).await?);
        raw.0.push(began.elapsed());
    }
    for id in raw_ids {
        let _ = cri.stop_pod_sandbox(&id).await;
        let _ = cri.remove_pod_sandbox(&id).await;
    }
    // 3. Density: this many running at once.
    let before = rss_bytes();
    let began = Instant::now();
    let mut creates = futures::stream::iter(0..density)
        .map(|i| {
            let api = api.clone();
            let p = pod(&format!("dense-{i}"), &config.node_name);
            async move { api.create(&PostParams::default(), &p).await }
        })
        .buffer_unordered(32);
    while let Some(r) = creates.next().await {
        r?;
    }
    wait_for(&mut rx, &mut tracker, Duration::from_secs(600), |t| {
        (0..density).all(|i| t.ready_at.contains_key(&format!("dense-{i}")))
    })
    .await?;
    let all_running = began.elapsed();
    let per_pod = (rss_bytes().saturating_sub(before)) as f64 / density.max(1) as f64 / 1024.0;
    // 4. Delete them all.
    let began = Instant::now();
    let names: Vec<String> = tracker.present.keys().cloned().collect();
    let mut deletes = futures::stream::iter(names)
        .map(|n| {
            let api = api.clone();
            async move { api.delete(&n, &DeleteParams::default()).await.map(|_| ()) }
        })
        .buffer_unordered(32);
    while let Some(r) = deletes.next().await {
        r?;
    }
    wait_for(&mut rx, &mut tracker, Duration::from_secs(600), |t| {
        t.present.is_empty()
    })
    .await?;
    let deleted = began.elapsed();
    watch.abort();

    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "\nCRI node agent on containerd ({} pods one at a time, {density} at once)",
        pods_n
    );
    report::header("agent", "peer");
    report::line(
        "pod start p50 (create → Running) vs raw CRI",
        ms(agent.percentile(0.5)),
        ms(raw.percentile(0.5)),
        "ms",
        Better::Lower,
    );
    report::line(
        "pod start p99 vs raw CRI",
        ms(agent.percentile(0.99)),
        ms(raw.percentile(0.99)),
        "ms",
        Better::Lower,
    );
    report::line(
        "pod start p99 vs upstream SLO (5 s)",
        ms(agent.percentile(0.99)),
        ms(SLO_P99),
        "ms",
        Better::Lower,
    );
    report::line(
        "pod start p50 vs target (300 ms)",
        ms(agent.percentile(0.5)),
        300.0,
        "ms",
        Better::Lower,
    );
    report::line(
        "pod start p99 vs target (1 s)",
        ms(agent.percentile(0.99)),
        1000.0,
        "ms",
        Better::Lower,
    );
    println!(
        "{:<46} {:>16}",
        format!("{density} pods running after"),
        format!("{:.1} s", all_running.as_secs_f64())
    );
    println!(
        "{:<46} {:>16}",
        "process RSS growth per running pod",
        format!("{per_pod:.0} KiB")
    );
    println!(
        "{:<46} {:>16}",
        format!("delete {density} pods until none is left"),
        format!("{:.1} s", deleted.as_secs_f64())
    );
    Ok(())
}
