//! `metrics.k8s.io/v1beta1`, served by the API server itself for every logical cluster (what
//! metrics-server serves through aggregation elsewhere): `NodeMetrics` and `PodMetrics`, get
//! and list, in discovery, with metrics-server's Table columns, from the cluster's kubelets
//! ([`scrape`]). `kubectl top nodes` and `kubectl top pods` read them.
//!
//! As metrics-server answers: nodes and pods come from the cluster's objects (label and
//! field selectors apply to them), sorted by name; only Running pods whose every container
//! has a measurement are listed; a missing object is the lister's `node "x" not found` /
//! `pod "x" not found`, an object without metrics a 404 of `nodemetrics.metrics.k8s.io` /
//! `podmetrics.metrics.k8s.io`. CPU is in nanocores (`123456n`), memory the working set in
//! binary units, the window a Go duration (`15.002s`). Watch is not served.

pub mod scrape;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use apimachinery::builtin::Resource;
use apimachinery::fields::FieldSelector;
use apimachinery::labels::Selector;
use apimachinery::quantity::{Format, Quantity};
use apimachinery::status::ApiError;
use http::{Method, Response, StatusCode};
use registry::cache::Filter;
use registry::{DefaultStrategy, ResourceDef};
use serde_json::{Value, json};

use crate::handlers::render;
use crate::negotiate::Output;
use crate::response::Body;
use crate::route::ResourcePath;
use crate::server::{ApiServer, Ctx};
pub use scrape::Scraper;
use scrape::Usage;

pub const GROUP: &str = "metrics.k8s.io";
pub const VERSION: &str = "v1beta1";

static NODE_METRICS: Resource = Resource {
    group: GROUP,
    version: VERSION,
    kind: "NodeMetrics",
    plural: "nodes",
    singular: "",
    namespaced: false,
    short_names: &[],
    categories: &[],
    verbs: &["get", "list"],
    subresources: &[],
};

static POD_METRICS: Resource = Resource {
    kind: "PodMetrics",
    plural: "pods",
    namespaced: true,
    ..NODE_METRICS
};

/// The two resources, for the catalogue (and so for discovery).
pub fn resources() -> Vec<ResourceDef> {
    [&NODE_METRICS, &POD_METRICS]
        .into_iter()
        .map(|r| ResourceDef::builtin(r, Arc::new(DefaultStrategy), None))
        .collect()
}

/// Whether a resource is one of these.
pub fn is_metrics(res: &ResourceDef) -> bool {
    res.group == GROUP
}

pub use apimachinery::time::go_duration;

fn usage_json(u: &Usage) -> Value {
    json!({
        "cpu": Quantity::from_scaled(i128::from(u.cpu_nanocores), -9, Format::DecimalSI).canonical(),
        "memory": Quantity::from_scaled(i128::from(u.memory_bytes), 0, Format::BinarySI).canonical(),
    })
}

fn time(t: jiff::Timestamp) -> String {
    apimachinery::time::format_time(t)
}

fn metadata(obj: &Value, namespaced: bool) -> Value {
    let mut md = json!({
        "name": obj.pointer("/metadata/name").cloned().unwrap_or(Value::Null),
        "creationTimestamp": time(jiff::Timestamp::now()),
    });
    if namespaced {
        md["namespace"] = obj
            .pointer("/metadata/namespace")
            .cloned()
            .unwrap_or(Value::Null);
    }
    if let Some(l) = obj.pointer("/metadata/labels").filter(|l| l.is_object()) {
        md["labels"] = l.clone();
    }
    md
}

fn node_metrics(node: &Value, u: &Usage) -> Value {
    json!({
        "kind": "NodeMetrics",
        "apiVersion": "metrics.k8s.io/v1beta1",
        "metadata": metadata(node, false),
        "timestamp": time(u.timestamp),
        "window": go_duration(u.window),
        "usage": usage_json(u),
    })
}

fn pod_metrics(pod: &Value, containers: &[(String, Usage)]) -> Option<Value> {
    // The earliest container measurement stands for the pod.
    let (_, first) = containers.iter().min_by_key(|(_, u)| u.timestamp)?;
    let list: Vec<Value> = containers
        .iter()
        .map(|(name, u)| json!({"name": name, "usage": usage_json(u)}))
        .collect();
    Some(json!({
        "kind": "PodMetrics",
        "apiVersion": "metrics.k8s.io/v1beta1",
        "metadata": metadata(pod, true),
        "timestamp": time(first.timestamp),
        "window": go_duration(first.window),
        "containers": list,
    }))
}

/// Label and field selectors of a list, applied to the nodes or pods.
struct Selectors {
    labels: Option<Selector>,
    fields: Option<FieldSelector>,
}

impl Selectors {
    fn parse(ctx: &Ctx) -> Result<Selectors, ApiError> {
        let labels = match ctx
            .query
            .get("labelSelector")
            .filter(|s| !s.trim().is_empty())
        {
            Some(s) => Some(Selector::parse(s).map_err(|e| ApiError::bad_request(e.to_string()))?),
            None => None,
        };
        let fields = match ctx
            .query
            .get("fieldSelector")
            .filter(|s| !s.trim().is_empty())
        {
            Some(s) => {
                Some(FieldSelector::parse(s).map_err(|e| ApiError::bad_request(e.to_string()))?)
            }
            None => None,
        };
        Ok(Selectors { labels, fields })
    }

    fn matches(&self, obj: &Value) -> bool {
        let field = |f: &str| -> Option<String> {
            match f {
                "metadata.name" => obj.pointer("/metadata/name"),
                "metadata.namespace" => obj.pointer("/metadata/namespace"),
                _ => None,
            }
            .and_then(Value::as_str)
            .map(String::from)
        };
        self.labels.as_ref().is_none_or(|l| l.matches_object(obj))
            && self.fields.as_ref().is_none_or(|f| f.matches(&field))
    }
}

/// Answers a `metrics.k8s.io` request.
pub async fn handle(
    server: &Arc<ApiServer>,
    ctx: &Ctx,
    res: &ResourceDef,
    p: &ResourcePath,
) -> Result<Response<Body>, ApiError> {
    let kind = if res.namespaced {
        "podmetrics"
    } else {
        "nodemetrics"
    };
    let get = matches!(ctx.method, Method::GET | Method::HEAD);
    if !get || p.subresource.is_some() || p.watch_prefix || ctx.query.flag("watch") {
        let verb = if get { "watch" } else { ctx.method.as_str() };
        return Err(ApiError::method_not_allowed(
            verb,
            &format!("{kind}.{GROUP}"),
        ));
    }
    let out = render::output(ctx)?;
    let cache = server.store().cache(&ctx.cluster)?;
    let filter = Filter {
        cluster: Some(ctx.cluster.clone()),
        namespace: (res.namespaced && !p.namespace.is_empty()).then(|| p.namespace.clone()),
        ..Filter::default()
    };
    let points = server.resource_metrics.points(server, &ctx.cluster).await;
    if !res.namespaced {
        let nodes: Vec<Value> = match &p.name {
            Some(name) => {
                let node = cache
                    .get("", "nodes", &ctx.cluster, "", name)
                    .ok_or_else(|| ApiError::not_found("node", "", name))?;
                vec![(*node.value()).clone()]
            }
            None => {
                let sel = Selectors::parse(ctx)?;
                cache
                    .list("", "nodes", &filter)
                    .0
                    .iter()
                    .map(|o| (*o.value()).clone())
                    .filter(|n| sel.matches(n))
                    .collect()
            }
        };
        let mut items: Vec<Value> = nodes
            .iter()
            .filter_map(|n| {
                let name = n.pointer("/metadata/name").and_then(Value::as_str)?;
                let u = points.nodes.get(name)?.usage()?;
                Some(node_metrics(n, &u))
            })
            .collect();
        drop(points);
        items.sort_by(|a, b| name_of(a).cmp(name_of(b)));
        return answer(ctx, out, res, p, items, kind);
    }
    let pods: Vec<Value> = match &p.name {
        Some(name) => {
            let pod = cache
                .get("", "pods", &ctx.cluster, &p.namespace, name)
                .ok_or_else(|| ApiError::not_found("pod", "", name))?;
            vec![(*pod.value()).clone()]
        }
        None => {
            let sel = Selectors::parse(ctx)?;
            cache
                .list("", "pods", &filter)
                .0
                .iter()
                .map(|o| (*o.value()).clone())
                .filter(|pod| sel.matches(pod))
                .collect()
        }
    };
    let mut items = Vec::new();
    for pod in &pods {
        if pod.pointer("/status/phase").and_then(Value::as_str) != Some("Running") {
            continue;
        }
        let ns = pod
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("");
        let name = name_of(pod);
        let mut containers: Vec<(String, Usage)> = Vec::new();
        let mut complete = true;
        for ((cns, cpod, cname), pair) in &points.containers {
            if cns != ns || cpod != name {
                continue;
            }
            match pair.usage() {
                Some(u) => containers.push((cname.clone(), u)),
                None => complete = false,
            }
        }
        if !complete || containers.is_empty() {
            continue;
        }
        containers.sort_by(|a, b| a.0.cmp(&b.0));
        if let Some(m) = pod_metrics(pod, &containers) {
            items.push(m);
        }
    }
    drop(points);
    items.sort_by(|a, b| {
        let key = |v: &Value| {
            (
                v.pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                name_of(v).to_string(),
            )
        };
        key(a).cmp(&key(b))
    });
    answer(ctx, out, res, p, items, kind)
}

fn name_of(v: &Value) -> &str {
    v.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn answer(
    ctx: &Ctx,
    out: Output,
    res: &ResourceDef,
    p: &ResourcePath,
    items: Vec<Value>,
    kind: &str,
) -> Result<Response<Body>, ApiError> {
    let single = p.name.is_some();
    if single && items.is_empty() {
        let name = p.name.clone().unwrap_or_default();
        let name = if res.namespaced {
            format!("{}/{name}", p.namespace)
        } else {
            name
        };
        return Err(ApiError::not_found(kind, GROUP, &name));
    }
    let value = match out {
        Output::Table => table(ctx, &items),
        Output::Metadata => {
            let metas: Vec<Value> = items.iter().map(render::partial_metadata).collect();
            if single {
                metas.into_iter().next().unwrap_or(Value::Null)
            } else {
                json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": {}, "items": metas})
            }
        }
        _ if single => items.into_iter().next().unwrap_or(Value::Null),
        _ => json!({
            "kind": format!("{}List", res.kind),
            "apiVersion": "metrics.k8s.io/v1beta1",
            "metadata": {},
            "items": items,
        }),
    };
    let out = if out == Output::Protobuf {
        Output::Json
    } else {
        out
    };
    Ok(render::send(ctx, StatusCode::OK, out, &value))
}

/// metrics-server's Table: `Name`, one column per resource (sorted), `Window`.
fn table(ctx: &Ctx, items: &[Value]) -> Value {
    let v1beta1 = ctx
        .header("accept")
        .is_some_and(|a| a.contains("as=Table;v=v1beta1") && !a.contains("as=Table;v=v1;"));
    let include = ctx.query.get("includeObject").unwrap_or("Metadata");
    let columns = json!([
        {"name": "Name", "type": "string", "format": "name", "description": "Name of the resource", "priority": 0},
        {"name": "cpu", "type": "string", "format": "quantity", "description": "", "priority": 0},
        {"name": "memory", "type": "string", "format": "quantity", "description": "", "priority": 0},
        {"name": "Window", "type": "string", "format": "duration", "description": "", "priority": 0},
    ]);
    let rows: Vec<Value> = items
        .iter()
        .map(|m| {
            // A pod's usage is the sum of its containers'.
            let (cpu, memory) = match m.get("containers").and_then(Value::as_array) {
                Some(cs) => {
                    let sum = |key: &str, format: Format| {
                        cs.iter()
                            .filter_map(|c| c.pointer(&format!("/usage/{key}")))
                            .filter_map(|q| Quantity::from_json(q).ok())
                            .fold(Quantity::zero(format), |a, b| a.add(&b))
                            .canonical()
                    };
                    (sum("cpu", Format::DecimalSI), sum("memory", Format::BinarySI))
                }
                None => (
                    m.pointer("/usage/cpu").and_then(Value::as_str).unwrap_or("").to_string(),
                    m.pointer("/usage/memory").and_then(Value::as_str).unwrap_or("").to_string(),
                ),
            };
            let mut row = json!({"cells": [name_of(m), cpu, memory, m.get("window").cloned().unwrap_or(Value::Null)]});
            match include {
                "None" => {}
                "Object" => row["object"] = m.clone(),
                _ => row["object"] = render::partial_metadata(m),
            }
            row
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": if v1beta1 { "meta.k8s.io/v1beta1" } else { "meta.k8s.io/v1" },
        "metadata": {},
        "columnDefinitions": columns,
        "rows": rows,
    })
}
