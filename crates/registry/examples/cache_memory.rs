//! Memory and time of the watch cache's compact object form against a decoded
//! `serde_json::Value`, for a typical scheduled, running pod with managedFields.
//!
//! `cargo run --release -p registry --example cache_memory [count]` runs itself once per form
//! (so one form's freed memory cannot serve the other) and prints the resident bytes each
//! cached pod costs, then the time of the operations the forms trade: preparing an event,
//! decoding on demand, evaluating a selector, writing a list and a cross-cluster watch line.

use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use apimachinery::fields::FieldSelector;
use apimachinery::labels::Selector;
use registry::builtins::PodStrategy;
use registry::cache::{CachedObject, selector_predicate};
use serde_json::{Value, json};

fn pod(i: usize) -> Value {
    let name = format!("web-7d4b9c8f6d-{i:05}");
    let fields_spec = json!({"f:metadata": {"f:generateName": {}, "f:labels": {".": {}, "f:app": {}, "f:pod-template-hash": {}}, "f:ownerReferences": {".": {}, "k:{\"uid\":\"6f1c\"}": {}}}, "f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {".": {}, "f:image": {}, "f:imagePullPolicy": {}, "f:name": {}, "f:ports": {".": {}, "k:{\"containerPort\":8080,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}, "f:protocol": {}}}, "f:resources": {".": {}, "f:limits": {".": {}, "f:memory": {}}, "f:requests": {".": {}, "f:cpu": {}, "f:memory": {}}}, "f:terminationMessagePath": {}, "f:terminationMessagePolicy": {}}}, "f:dnsPolicy": {}, "f:enableServiceLinks": {}, "f:restartPolicy": {}, "f:schedulerName": {}, "f:securityContext": {}, "f:terminationGracePeriodSeconds": {}}});
    let fields_status = json!({"f:status": {"f:conditions": {"k:{\"type\":\"ContainersReady\"}": {".": {}, "f:lastProbeTime": {}, "f:lastTransitionTime": {}, "f:status": {}, "f:type": {}}, "k:{\"type\":\"Initialized\"}": {".": {}, "f:lastProbeTime": {}, "f:lastTransitionTime": {}, "f:status": {}, "f:type": {}}, "k:{\"type\":\"Ready\"}": {".": {}, "f:lastProbeTime": {}, "f:lastTransitionTime": {}, "f:status": {}, "f:type": {}}}, "f:containerStatuses": {}, "f:hostIP": {}, "f:hostIPs": {}, "f:phase": {}, "f:podIP": {}, "f:podIPs": {".": {}, "k:{\"ip\":\"10.244.3.17\"}": {".": {}, "f:ip": {}}}, "f:startTime": {}}});
    let condition = |t: &str| json!({"type": t, "status": "True", "lastProbeTime": null, "lastTransitionTime": "2025-01-01T00:00:05Z"});
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "generateName": "web-7d4b9c8f6d-",
            "namespace": "team-a",
            "uid": format!("8a3f2c1e-0000-4000-8000-{i:012}"),
            "creationTimestamp": "2025-01-01T00:00:00Z",
            "labels": {"app": "web", "pod-template-hash": "7d4b9c8f6d"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d4b9c8f6d", "uid": "6f1c2b3a-1111-4222-8333-444455556666", "controller": true, "blockOwnerDeletion": true}],
            "managedFields": [
                {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1", "time": "2025-01-01T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": fields_spec},
                {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": "2025-01-01T00:00:05Z", "fieldsType": "FieldsV1", "fieldsV1": fields_status, "subresource": "status"},
            ],
        },
        "spec": {
            "containers": [{
                "name": "web",
                "image": "registry.example.com/web:1.4.2",
                "imagePullPolicy": "IfNotPresent",
                "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                "resources": {"limits": {"memory": "128Mi"}, "requests": {"cpu": "100m", "memory": "64Mi"}},
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "volumeMounts": [{"name": "kube-api-access-x7k2p", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}],
            }],
            "dnsPolicy": "ClusterFirst",
            "enableServiceLinks": true,
            "nodeName": format!("vnode-{:04}", i % 1000),
            "preemptionPolicy": "PreemptLowerPriority",
            "priority": 0,
            "restartPolicy": "Always",
            "schedulerName": "default-scheduler",
            "securityContext": {},
            "serviceAccount": "default",
            "serviceAccountName": "default",
            "terminationGracePeriodSeconds": 30,
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            ],
            "volumes": [{"name": "kube-api-access-x7k2p", "projected": {"defaultMode": 420, "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
            ]}}],
        },
        "status": {
            "phase": "Running",
            "conditions": [condition("Initialized"), condition("Ready"), condition("ContainersReady"), condition("PodScheduled")],
            "hostIP": "172.18.0.3",
            "hostIPs": [{"ip": "172.18.0.3"}],
            "podIP": "10.244.3.17",
            "podIPs": [{"ip": "10.244.3.17"}],
            "startTime": "2025-01-01T00:00:01Z",
            "qosClass": "Burstable",
            "containerStatuses": [{"name": "web", "image": "registry.example.com/web:1.4.2", "imageID": "", "containerID": "virtual://web", "ready": true, "restartCount": 0, "started": true, "state": {"running": {"startedAt": "2025-01-01T00:00:04Z"}}, "lastState": {}}],
        },
    })
}

/// Resident memory of this process, from `/proc/self/status` (0 where there is none).
fn rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// Holds `count` pods in one form and prints the resident bytes per pod.
fn hold(form: &str, count: usize) {
    let raw: Vec<Vec<u8>> = (0..count)
        .map(|i| serde_json::to_vec(&pod(i)).expect("a pod encodes"))
        .collect();
    let before = rss();
    let per_pod = match form {
        "value" => {
            let held: Vec<Value> = raw
                .iter()
                .enumerate()
                .filter_map(|(i, r)| registry::cache::decode(r, i as i64 + 1))
                .collect();
            let grown = rss().saturating_sub(before);
            std::hint::black_box(&held);
            grown / held.len().max(1) as u64
        }
        _ => {
            let cluster: Arc<str> = Arc::from("tenant-a");
            let held: Vec<CachedObject> = raw
                .iter()
                .enumerate()
                .filter_map(|(i, r)| {
                    CachedObject::from_stored(r, i as i64 + 1, cluster.clone(), &PodStrategy, false)
                })
                .collect();
            let grown = rss().saturating_sub(before);
            std::hint::black_box(&held);
            grown / held.len().max(1) as u64
        }
    };
    println!("{form}: {per_pod} resident bytes per cached pod ({count} pods)");
}

/// Mean time of `f` over `n` runs, in microseconds.
fn time(n: usize, mut f: impl FnMut()) -> f64 {
    let start = Instant::now();
    for _ in 0..n {
        f();
    }
    start.elapsed().as_secs_f64() * 1e6 / n as f64
}

fn timings() {
    let raw = serde_json::to_vec(&pod(1)).expect("a pod encodes");
    println!("a typical pod: {} bytes of JSON", raw.len());
    let cluster: Arc<str> = Arc::from("tenant-a");
    let n = 20_000;
    let decode = time(n, || {
        std::hint::black_box(registry::cache::decode(&raw, 7));
    });
    let prepare = time(n, || {
        std::hint::black_box(CachedObject::from_stored(
            &raw,
            7,
            cluster.clone(),
            &PodStrategy,
            false,
        ));
    });
    println!(
        "feed, per event: decode to Value {decode:.1} µs; prepare compact form {prepare:.1} µs"
    );
    let value = registry::cache::decode(&raw, 7).expect("a pod");
    let obj = CachedObject::from_stored(&raw, 7, cluster, &PodStrategy, false).expect("a pod");
    let on_demand = time(n, || {
        std::hint::black_box(obj.value());
    });
    println!("decoding on demand (internal loops, GET rv=0, Table/protobuf): {on_demand:.1} µs");
    let labels = Selector::parse("app=web,tier!=db").expect("a selector");
    let fields = FieldSelector::parse("spec.nodeName=vnode-0001").expect("a selector");
    let pred = selector_predicate(
        Some(labels.clone()),
        Some(fields.clone()),
        Arc::new(PodStrategy),
    );
    let by_value = time(n, || {
        std::hint::black_box(
            labels.matches_object(&value)
                && fields.matches(&|f| registry::strategy::field_value(&PodStrategy, &value, f)),
        );
    });
    let by_attrs = time(n, || {
        std::hint::black_box(pred(&obj));
    });
    println!(
        "label+field selector: on a Value {by_value:.2} µs; on the compact form {by_attrs:.2} µs"
    );
    let to_vec = time(n, || {
        std::hint::black_box(serde_json::to_vec(&value).expect("encodes"));
    });
    let splice = time(n, || {
        let mut out = Vec::with_capacity(obj.json().len() + 64);
        obj.write_json(&mut out, false);
        std::hint::black_box(out);
    });
    let annotated_value = time(n, || {
        let mut v = value.clone();
        apimachinery::meta::metadata_mut(&mut v)
            .entry("annotations")
            .or_insert_with(|| json!({}))["matryoshka.dev/cluster"] = json!("tenant-a");
        std::hint::black_box(serde_json::to_vec(&v).expect("encodes"));
    });
    let annotated_splice = time(n, || {
        let mut out = Vec::with_capacity(obj.json().len() + 64);
        obj.write_json(&mut out, true);
        std::hint::black_box(out);
    });
    println!(
        "one list item / watch line: serialize a Value {to_vec:.1} µs, splice {splice:.2} µs; \
         cross-cluster: clone+annotate+serialize {annotated_value:.1} µs, splice {annotated_splice:.2} µs"
    );
}

fn main() {
    let mut args = std::env::args().skip(1);
    match args.next().as_deref() {
        Some(form @ ("value" | "compact")) => {
            let count = args.next().and_then(|c| c.parse().ok()).unwrap_or(100_000);
            hold(form, count);
        }
        other => {
            let count = other.unwrap_or("100000").to_string();
            let Ok(me) = std::env::current_exe() else {
                eprintln!("cannot find this program to run it again");
                return;
            };
            for form in ["value", "compact"] {
                match Command::new(&me).args([form, &count]).status() {
                    Ok(s) if s.success() => {}
                    other => eprintln!("the {form} run failed: {other:?}"),
                }
            }
            timings();
        }
    }
}
