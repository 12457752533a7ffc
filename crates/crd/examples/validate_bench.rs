//! Cost of validating a ~200 KiB custom resource against the Cluster API MachineDeployment
//! schema (v1beta2), against the cost of decoding the same bytes with `serde_json`.
//!
//! `cargo run --release -p crd --example validate_bench` (CRDs from `CRD_TESTDATA`, default
//! `/work/shared/testdata/crds`). Prints the time per operation and the ratio.

use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

fn machine_deployment() -> Value {
    let mut labels = Map::new();
    let mut annotations = Map::new();
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

fn time<F: FnMut()>(iterations: u32, mut f: F) -> Duration {
    f();
    let start = Instant::now();
    for _ in 0..iterations {
        f();
    }
    start.elapsed() / iterations
}

fn main() {
    let dir = std::env::var("CRD_TESTDATA").unwrap_or_else(|_| "/work/shared/testdata/crds".into());
    let path = format!("{dir}/cluster-api/cluster.x-k8s.io_machinedeployments.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut crd: Value = serde_saphyr::from_str(&text).expect("the CRD parses");
    crd::default_crd(&mut crd);
    let def = crd::resource_defs(&crd)
        .into_iter()
        .find(|d| d.version == "v1beta2")
        .expect("v1beta2 is served");

    let obj = machine_deployment();
    let bytes = serde_json::to_vec(&obj).expect("serializable");
    let errs = def.strategy.validate(&obj);
    assert!(
        errs.is_empty(),
        "the benchmark object must be valid: {}",
        errs.aggregate_message()
    );
    let mut changed = obj.clone();
    changed["spec"]["replicas"] = json!(4);

    let n = 200;
    let decode = time(n, || {
        let v: Value = serde_json::from_slice(&bytes).expect("valid JSON");
        std::hint::black_box(v);
    });
    let validate = time(n, || {
        std::hint::black_box(def.strategy.validate(&obj));
    });
    let update = time(n, || {
        std::hint::black_box(def.strategy.validate_update(&changed, &obj));
    });
    let default = time(n, || {
        let mut o = obj.clone();
        def.strategy.default(&mut o);
        std::hint::black_box(o);
    });
    let compile = time(20, || {
        std::hint::black_box(crd::resource_defs(&crd));
    });
    println!("object: {} bytes of JSON", bytes.len());
    println!("serde_json::from_slice         {:>10.1?}", decode);
    println!(
        "validate (create)              {:>10.1?}  ({:.2}x decode)",
        validate,
        validate.as_secs_f64() / decode.as_secs_f64()
    );
    println!(
        "validate_update (ratcheting)   {:>10.1?}  ({:.2}x decode)",
        update,
        update.as_secs_f64() / decode.as_secs_f64()
    );
    println!(
        "clone + default                {:>10.1?}  ({:.2}x decode)",
        default,
        default.as_secs_f64() / decode.as_secs_f64()
    );
    println!("resource_defs (compile the CRD) {:>9.1?}", compile);
}
