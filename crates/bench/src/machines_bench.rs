//! The machines benchmark: worker machines of a TenantCluster through Cluster API and the
//! autoscaler: from an unschedulable pod to that pod Running on a new machine (each pod needs
//! a machine of its own; p50 and p90 of 20, the first one scaling from zero), and a node group
//! of 20 machines rolled to a new instance type (total time).
//!
//! Two providers: `virtual` (default) runs everything in this process (platform, machine
//! controllers, controllers and scheduler; machines are virtual nodes); `process` runs
//! `matryoshka up --machine-provider process` (the binary beside this one: build both with
//! `cargo build --release -p bench -p matryoshka`), so every machine is a real node agent with
//! its own network namespace and containerd, joining with a bootstrap token, and every pod a
//! real container pulled from the platform's registry.
//!
//! Peers, published (neither runs here: Cluster API's Go controllers and KubeVirt need what this
//! machine lacks): Cozystack's Cluster API with KubeVirt VMs takes minutes per node, and the
//! cluster autoscaler scans every 10 s. The lines compare with the targets (3 s, 60 s).
//!
//! Usage: `cargo run --release -p bench -- machines [--pods N] [--roll N] [--provider process]`.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use machines::resource::MachineDeployment;
use serde_json::{Value, json};

use crate::report::{Better, Samples, header, line};

const NAMESPACE: &str = "tenant-root";

pub(crate) fn tenant_clusters(root: &kube::Client) -> Api<DynamicObject> {
    let ar = ApiResource {
        group: "platform.matryoshka.dev".into(),
        version: "v1alpha1".into(),
        api_version: "platform.matryoshka.dev/v1alpha1".into(),
        kind: "TenantCluster".into(),
        plural: "tenantclusters".into(),
    };
    Api::namespaced_with(root.clone(), NAMESPACE, &ar)
}

pub(crate) async fn until<F, Fut>(what: &str, limit: Duration, mut f: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    while !f().await {
        anyhow::ensure!(Instant::now() < deadline, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

pub(crate) async fn create_cluster(
    root: &kube::Client,
    name: &str,
    group: Value,
) -> anyhow::Result<()> {
    let tc: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "platform.matryoshka.dev/v1alpha1", "kind": "TenantCluster",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"nodeGroups": {"md0": group}},
    }))?;
    let api = tenant_clusters(root);
    api.create(&PostParams::default(), &tc).await?;
    until(
        &format!("{name} Ready"),
        Duration::from_secs(300),
        || async {
            api.get(name).await.ok().is_some_and(|o| {
                o.data
                    .pointer("/status/conditions")
                    .and_then(Value::as_array)
                    .is_some_and(|cs| {
                        cs.iter()
                            .any(|c| c["type"] == "Ready" && c["status"] == "True")
                    })
            })
        },
    )
    .await
}

/// Where the benchmark's platform runs.
enum Platform {
    InProcess {
        clients: runtime::client::ClusterClients,
        background: crate::setup::Background,
        _data: tempfile::TempDir,
        _server: std::sync::Arc<apiserver::server::ApiServer>,
    },
    Process(crate::process_platform::ProcessPlatform),
}

impl Platform {
    fn root(&self) -> anyhow::Result<kube::Client> {
        match self {
            Platform::InProcess { clients, .. } => Ok(clients.cluster("root")?),
            Platform::Process(p) => Ok(p.root.clone()),
        }
    }

    async fn tenant(&self, name: &str) -> anyhow::Result<kube::Client> {
        match self {
            Platform::InProcess { clients, .. } => {
                Ok(clients.cluster(&platform::naming::logical_cluster(NAMESPACE, name))?)
            }
            Platform::Process(p) => p.tenant_cluster_client(NAMESPACE, name).await,
        }
    }

    async fn stop(self) {
        match self {
            Platform::InProcess { background, .. } => background.stop().await,
            Platform::Process(p) => p.stop().await,
        }
    }
}

pub async fn run(pods: usize, roll: usize, process: bool) -> anyhow::Result<()> {
    let platform = if process {
        let p = crate::process_platform::ProcessPlatform::start(&[
            "--machine-provider",
            "process",
            "--machine-bridge",
            "mtbench0",
            "--machine-subnet",
            "10.242.0.0/24",
            "--machine-dns-upstream",
            "none",
        ])
        .await?;
        p.import_test_images()?;
        println!(
            "machines benchmark: process machines (a node agent, network namespace and containerd each), autoscaler scan every 1 s"
        );
        Platform::Process(p)
    } else {
        let (server, data) = crate::setup::server().await?;
        let mut background = crate::setup::Background::control_plane(&server);
        let clients = crate::setup::platform(&server, &mut background).await?;
        println!("machines benchmark: virtual machines, autoscaler scan every 1 s, in process");
        Platform::InProcess {
            clients,
            background,
            _data: data,
            _server: server,
        }
    };
    let result = measure(&platform, pods, roll, process).await;
    if let (Err(_), Platform::Process(p)) = (&result, &platform) {
        eprintln!("{}", p.diagnostics());
    }
    platform.stop().await;
    result
}

async fn measure(
    platform: &Platform,
    pods: usize,
    roll: usize,
    process: bool,
) -> anyhow::Result<()> {
    let root = platform.root()?;
    let image = if process {
        json!({"image": "docker.io/matryoshka/mtest:1", "args": ["sleep", "infinity"]})
    } else {
        json!({"image": "app:1"})
    };
    // 1. Unschedulable pod → Running on a new machine.
    create_cluster(
        &root,
        "scale",
        json!({"minReplicas": 0, "maxReplicas": pods + 1, "instanceType": "u1.medium"}),
    )
    .await?;
    let tenant = platform.tenant("scale").await?;
    let pod_api: Api<Pod> = Api::namespaced(tenant.clone(), "default");
    let mut lat = Samples::default();
    for i in 0..pods {
        let mut container =
            json!({"name": "c", "resources": {"requests": {"cpu": "600m", "memory": "64Mi"}}});
        if let (Some(c), Some(i)) = (container.as_object_mut(), image.as_object()) {
            c.extend(i.clone());
        }
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": format!("p{i}")},
            "spec": {"terminationGracePeriodSeconds": 1, "containers": [container]},
        }))?;
        let start = Instant::now();
        pod_api.create(&PostParams::default(), &pod).await?;
        let name = format!("p{i}");
        until(
            &format!("{name} Running"),
            Duration::from_secs(120),
            || async {
                pod_api
                    .get(&name)
                    .await
                    .ok()
                    .and_then(|p| p.status?.phase)
                    .as_deref()
                    == Some("Running")
            },
        )
        .await?;
        lat.0.push(start.elapsed());
        if i == 0 {
            println!(
                "  first pod (scale from zero): {:.2} s",
                start.elapsed().as_secs_f64()
            );
        }
    }

    // The first cluster's machines go before the second's come.
    if process {
        tenant_clusters(&root)
            .delete("scale", &Default::default())
            .await?;
        until(
            "the first cluster gone",
            Duration::from_secs(300),
            || async {
                tenant_clusters(&root)
                    .get_opt("scale")
                    .await
                    .ok()
                    .flatten()
                    .is_none()
            },
        )
        .await?;
    }

    // 2. A group of `roll` machines rolled to a new instance type.
    create_cluster(
        &root,
        "roll",
        json!({"minReplicas": roll, "maxReplicas": roll, "instanceType": "u1.medium"}),
    )
    .await?;
    let mds: Api<MachineDeployment> = Api::namespaced(root.clone(), NAMESPACE);
    let template_of = |md: &MachineDeployment| {
        md.spec
            .pointer("/template/spec/infrastructureRef/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let old_template = template_of(&mds.get("kubernetes-roll-md0").await?);
    let start = Instant::now();
    tenant_clusters(&root)
        .patch(
            "roll",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"nodeGroups": {"md0": {"instanceType": "u1.large"}}}})),
        )
        .await?;
    until("the group rolled", Duration::from_secs(600), || async {
        let Ok(md) = mds.get("kubernetes-roll-md0").await else {
            return false;
        };
        let st = |f: &str| {
            md.status_field(&format!("/{f}"))
                .and_then(Value::as_i64)
                .unwrap_or(-1)
        };
        template_of(&md) != old_template
            && st("observedGeneration") == md.metadata.generation.unwrap_or(0)
            && st("upToDateReplicas") == roll as i64
            && st("replicas") == roll as i64
            && st("availableReplicas") == roll as i64
    })
    .await?;
    let rolled = start.elapsed();

    header("Matryoshka", "target");
    line(
        "unschedulable pod → Running on a new machine, p50",
        lat.percentile(0.5).as_secs_f64(),
        3.0,
        "s",
        Better::Lower,
    );
    line(
        "unschedulable pod → Running on a new machine, p90",
        lat.percentile(0.9).as_secs_f64(),
        3.0,
        "s",
        Better::Lower,
    );
    line(
        &format!("roll {roll} machines to a new instance type"),
        rolled.as_secs_f64(),
        60.0,
        "s",
        Better::Lower,
    );
    println!(
        "peers (published): Cluster API + KubeVirt VMs: minutes per node; the cluster autoscaler scans every 10 s"
    );
    Ok(())
}
