//! The CRD benchmark: 100 CRDs with 10 custom resources each — time until every CRD is served
//! (Established and answering) and all objects are written — and the validation cost of a large
//! custom resource (~200 KiB against the Cluster API MachineDeployment schema) against a plain
//! JSON parse of the same bytes, the baseline ratio.

use crate::clusters_bench::call;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

fn crd(i: usize) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("things{i}.bench.example.com")},
        "spec": {
            "group": "bench.example.com",
            "scope": "Namespaced",
            "names": {"plural": format!("things{i}"), "singular": format!("thing{i}"), "kind": format!("Thing{i}"), "listKind": format!("Thing{i}List")},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "properties": {
                    "size": {"type": "integer", "minimum": 0},
                    "name": {"type": "string", "maxLength": 64},
                }}}}},
            }],
        },
    })
}

/// A MachineDeployment of about 200 KiB whose bulk is in the spec (labels, annotations and
/// selectors of the template, taints, readiness gates): all of it walked by validation.
fn big_machine_deployment() -> Value {
    let mut labels = serde_json::Map::new();
    let mut annotations = serde_json::Map::new();
    for i in 0..1150 {
        labels.insert(
            format!("example.com/label-{i:04}"),
            json!(format!("value-{i:04}")),
        );
        annotations.insert(
            format!("example.com/annotation-{i:04}"),
            json!(format!(
                "a longer annotation value number {i} with some text in it"
            )),
        );
    }
    let expressions: Vec<Value> = (0..120)
        .map(|i| {
            json!({"key": format!("key-{i}"), "operator": "In",
                   "values": (0..8).map(|j| format!("v{i}-{j}")).collect::<Vec<_>>()})
        })
        .collect();
    let taints: Vec<Value> = (0..32)
        .map(|i| json!({"key": format!("example.com/taint-{i}"), "value": format!("v{i}"), "effect": "NoSchedule", "propagation": "Always"}))
        .collect();
    let gates: Vec<Value> = (0..32)
        .map(|i| json!({"conditionType": format!("Gate{i}"), "polarity": "Positive"}))
        .collect();
    json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
        "metadata": {"name": "md-0", "namespace": "default"},
        "spec": {
            "clusterName": "tenant-a", "replicas": 3,
            "rollout": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": "25%"}}},
            "selector": {"matchLabels": labels.clone(), "matchExpressions": expressions},
            "template": {
                "metadata": {"labels": labels, "annotations": annotations},
                "spec": {"clusterName": "tenant-a", "version": "v1.33.1",
                         "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfigTemplate", "name": "md-0"}},
                         "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "KubevirtMachineTemplate", "name": "md-0"},
                         "deletion": {"nodeDrainTimeoutSeconds": 300},
                         "taints": taints, "readinessGates": gates}}}
    })
}

pub async fn run(quick: bool) -> anyhow::Result<()> {
    let (server, _data) = crate::setup::server().await?;
    let (count, per) = if quick { (20, 10) } else { (100, 10) };
    println!("CRD benchmark: {count} CRDs with {per} custom resources each (API in process)");

    let started = Instant::now();
    for i in 0..count {
        let (code, b) = call(
            &server,
            "POST",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            Some(crd(i)),
        )
        .await;
        anyhow::ensure!(
            code == 201,
            "crd {i}: {code} {}",
            String::from_utf8_lossy(&b)
        );
    }
    // Served: every CRD answers a list, then gets its objects.
    for i in 0..count {
        let path = format!("/apis/bench.example.com/v1/namespaces/default/things{i}");
        let deadline = Instant::now() + Duration::from_secs(60);
        while call(&server, "GET", &path, None).await.0 != 200 {
            anyhow::ensure!(Instant::now() < deadline, "CRD {i} never served");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    let served = started.elapsed();
    let writes = futures::future::join_all((0..count).flat_map(|i| (0..per).map(move |j| (i, j))).map(|(i, j)| {
        let server = server.clone();
        async move {
            let body = json!({"apiVersion": "bench.example.com/v1", "kind": format!("Thing{i}"), "metadata": {"name": format!("t{j}")}, "spec": {"size": j, "name": "n"}});
            call(&server, "POST", &format!("/apis/bench.example.com/v1/namespaces/default/things{i}"), Some(body)).await.0
        }
    }))
    .await;
    anyhow::ensure!(
        writes.iter().all(|c| *c == 201),
        "every custom resource is created"
    );
    let all = started.elapsed();

    // Validation of a large object against a real schema, vs parsing its bytes.
    let md_crd: Value = crate::yaml_file(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(
        "../../../shared/testdata/crds/cluster-api/cluster.x-k8s.io_machinedeployments.yaml",
    ))?;
    let (_, strategy) = crd::served_versions(&md_crd)
        .into_iter()
        .find(|(d, _)| d.version == "v1beta2")
        .ok_or_else(|| anyhow::anyhow!("the v1beta2 version"))?;
    let obj = big_machine_deployment();
    let bytes = serde_json::to_vec(&obj)?;
    let rounds = if quick { 50 } else { 300 };
    let t = Instant::now();
    for _ in 0..rounds {
        let v: Value = serde_json::from_slice(&bytes)?;
        std::hint::black_box(v);
    }
    let parse = t.elapsed() / rounds;
    // The write path's schema work: defaulting, pruning and validation (schema and CEL).
    let t = Instant::now();
    for _ in 0..rounds {
        let mut o = obj.clone();
        registry::Strategy::default(&*strategy, &mut o);
        strategy.prune(&mut o);
        let r = strategy.validate_object(&o, None);
        anyhow::ensure!(r.errors.is_empty(), "the object is valid: {:?}", r.errors);
    }
    let validate = t.elapsed() / rounds;

    println!();
    println!(
        "{count} CRDs established and served in {:.0} ms; with {} objects written {:.0} ms",
        served.as_secs_f64() * 1e3,
        count * per,
        all.as_secs_f64() * 1e3
    );
    println!(
        "validation of a {} KiB MachineDeployment: {:.0} µs; JSON parse of the same bytes {:.0} µs; validate÷parse {:.2}x",
        bytes.len() / 1024,
        validate.as_secs_f64() * 1e6,
        parse.as_secs_f64() * 1e6,
        validate.as_secs_f64() / parse.as_secs_f64()
    );
    Ok(())
}
