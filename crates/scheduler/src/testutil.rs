//! Builders for unit tests: pods and nodes from JSON, and a cache holding them.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::cache::Cache;
use crate::nodeinfo::NodeSpec;
use crate::podinfo::PodInfo;

pub const CLUSTER: &str = "a";

/// A pod named `name` in namespace `d` requesting `cpu`, with `extra` merged into it.
pub fn pod(name: &str, cpu: &str, extra: Value) -> Arc<PodInfo> {
    let mut p = json!({"metadata": {"name": name, "namespace": "d"}, "spec": {"containers": [
        {"name": "c", "resources": {"requests": {"cpu": cpu}}}]}});
    merge(&mut p, &extra);
    Arc::new(PodInfo::new(
        &Arc::from(CLUSTER),
        &serde_json::from_value(p).unwrap(),
    ))
}

/// A node with `cpu`, 110 pods and `labels`.
pub fn node(cpu: &str, labels: Value) -> NodeSpec {
    NodeSpec::new(
        &serde_json::from_value(json!({"metadata": {"name": "x", "labels": labels},
            "status": {"allocatable": {"cpu": cpu, "memory": "64Gi", "pods": "110"}}}))
        .unwrap(),
    )
}

/// A cache with `nodes` (name, cpu, labels) and `pods` (each with `spec.nodeName` set).
pub fn cache(nodes: &[(&str, &str, Value)], pods: &[Arc<PodInfo>]) -> Cache {
    let mut c = Cache::default();
    let cluster: Arc<str> = Arc::from(CLUSTER);
    for (name, cpu, labels) in nodes {
        c.upsert_node(&cluster, name, node(cpu, labels.clone()));
    }
    for p in pods {
        c.upsert_assigned(p.clone());
    }
    c
}

fn merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                merge(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (t, p) => *t = p.clone(),
    }
}
