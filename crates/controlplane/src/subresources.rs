//! The subresources that are objects of their own, as upstream's `BindingREST`,
//! `EvictionREST`, `ScaleREST` and `FinalizeREST`: what a binding, an eviction, a scale and a
//! namespace finalization do to the object they address. (`status` is the write pipeline with a
//! subresource; `token` is in [`crate::tokens`].)

use apimachinery::labels::label_selector_from_json;
use apimachinery::meta;
use apimachinery::status::ApiError;
use apimachinery::{FieldError, Path};
use registry::ResourceDef;
use registry::store::{DeleteOptions, Location, WriteOptions};
use serde_json::{Value, json};

use crate::ControlPlane;

/// Paths of the scale subresource: built-ins use `.spec.replicas` and `.status.replicas`.
fn scale_paths(res: &ResourceDef) -> (String, String, Option<String>) {
    match &res.scale {
        Some(s) => (
            s.spec_replicas.clone(),
            s.status_replicas.clone(),
            s.label_selector.clone(),
        ),
        None => (".spec.replicas".into(), ".status.replicas".into(), None),
    }
}

fn pointer(json_path: &str) -> String {
    json_path
        .trim_start_matches('.')
        .split('.')
        .fold(String::new(), |acc, p| format!("{acc}/{p}"))
}

/// The `autoscaling/v1 Scale` view of an object.
pub fn scale_of(res: &ResourceDef, obj: &Value) -> Value {
    let (spec_p, status_p, sel_p) = scale_paths(res);
    let spec = obj
        .pointer(&pointer(&spec_p))
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let status = obj
        .pointer(&pointer(&status_p))
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let selector = match sel_p {
        Some(p) => obj
            .pointer(&pointer(&p))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        None => obj
            .pointer("/spec/selector")
            .map(|s| {
                if s.get("matchLabels").is_some() || s.get("matchExpressions").is_some() {
                    label_selector_from_json(s, &Path::new("spec.selector"))
                        .map(|s| s.to_string())
                        .unwrap_or_default()
                } else {
                    // ReplicationControllers have a plain map selector.
                    s.as_object()
                        .map(|m| {
                            m.iter()
                                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                                .collect::<Vec<_>>()
                                .join(",")
                        })
                        .unwrap_or_default()
                }
            })
            .unwrap_or_default(),
    };
    let m = meta::metadata(obj);
    let mut md = json!({});
    for f in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(v) = m.get(f) {
            md[f] = v.clone();
        }
    }
    let mut status_obj = json!({"replicas": status});
    if !selector.is_empty() {
        status_obj["selector"] = json!(selector);
    }
    json!({"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": md, "spec": {"replicas": spec}, "status": status_obj})
}

/// How a scale write changes the Scale: replaced by a new one, or merge-patched.
pub enum ScaleChange {
    Replace(Value),
    MergePatch(Value),
}

/// The Scale of the object at `loc`.
pub async fn get_scale(
    cp: &ControlPlane,
    res: &ResourceDef,
    loc: &Location<'_>,
) -> Result<Value, ApiError> {
    let obj = cp.store.get(res, loc).await?;
    Ok(scale_of(res, &obj))
}

/// Writes the replicas of the object at `loc` from a new or patched Scale; returns the
/// resulting Scale.
pub async fn update_scale(
    cp: &ControlPlane,
    res: &ResourceDef,
    loc: &Location<'_>,
    change: ScaleChange,
    dry_run: bool,
) -> Result<Value, ApiError> {
    let body = match &change {
        ScaleChange::Replace(b) | ScaleChange::MergePatch(b) => b,
    };
    apimachinery::depth::check(body)?;
    let (spec_p, _, _) = scale_paths(res);
    let ptr = pointer(&spec_p);
    let opts = WriteOptions {
        dry_run,
        ..Default::default()
    };
    let (stored, _) = cp
        .store
        .update_with(res, loc, &opts, |cur| {
            let cur = cur.ok_or_else(|| ApiError::not_found(&res.plural, &res.group, loc.name))?;
            let new_scale = match &change {
                ScaleChange::Replace(b) => b.clone(),
                ScaleChange::MergePatch(p) => crate::patching::merge_patch(&scale_of(res, cur), p),
            };
            let replicas = new_scale
                .pointer("/spec/replicas")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            if replicas < 0 {
                return Err(ApiError::invalid(
                    "Scale",
                    "autoscaling",
                    loc.name,
                    &vec![FieldError::invalid(
                        "spec.replicas",
                        json!(replicas),
                        "must be greater than or equal to 0",
                    )]
                    .into(),
                ));
            }
            // Only a resourceVersion the client sent is a precondition; the one a patch
            // inherits from the current object is not (concurrent writers retry).
            let sent_rv = meta::resource_version(body).to_string();
            let mut next = cur.clone();
            set_pointer(&mut next, &ptr, json!(replicas));
            if sent_rv.is_empty() {
                meta::remove(&mut next, "resourceVersion");
            } else {
                meta::set(&mut next, "resourceVersion", sent_rv);
            }
            Ok(next)
        })
        .await?;
    Ok(scale_of(res, &stored))
}

/// Sets a value at a JSON pointer, creating objects on the way.
pub fn set_pointer(obj: &mut Value, ptr: &str, value: Value) {
    let parts: Vec<&str> = ptr.trim_start_matches('/').split('/').collect();
    let mut cur = obj;
    for (i, p) in parts.iter().enumerate() {
        if !cur.is_object() {
            *cur = json!({});
        }
        let map = cur.as_object_mut().expect("an object");
        if i + 1 == parts.len() {
            map.insert(p.to_string(), value);
            return;
        }
        cur = map.entry(p.to_string()).or_insert_with(|| json!({}));
    }
}

/// The legacy `bindings` resource: binds the pod the Binding's `metadata.name` names in
/// `namespace` (upstream serves both forms with one `BindingREST`).
pub async fn bind_named(
    cp: &ControlPlane,
    cluster: &str,
    namespace: &str,
    binding: &Value,
    dry_run: bool,
) -> Result<(), ApiError> {
    let name = meta::name(binding).to_string();
    if name.is_empty() {
        return Err(ApiError::invalid(
            "Binding",
            "",
            "",
            &vec![FieldError::required(
                "metadata.name",
                "name or generateName is required",
            )]
            .into(),
        ));
    }
    let pods = cp
        .catalog
        .lookup(cluster, "", "v1", "pods")
        .ok_or_else(ApiError::no_route)?;
    let pod = Location {
        cluster,
        namespace,
        name: &name,
    };
    bind(cp, &pods, &pod, binding, dry_run).await
}

/// `pods/binding`: assigns the pod at `loc` to the Binding's target node, once.
pub async fn bind(
    cp: &ControlPlane,
    res: &ResourceDef,
    loc: &Location<'_>,
    binding: &Value,
    dry_run: bool,
) -> Result<(), ApiError> {
    let node = binding
        .pointer("/target/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if node.is_empty() {
        return Err(ApiError::invalid(
            "Binding",
            "",
            loc.name,
            &vec![FieldError::required("target.name", "")].into(),
        ));
    }
    let opts = WriteOptions {
        dry_run,
        subresource: Some("binding".into()),
        ..Default::default()
    };
    cp.store
        .update_with(res, loc, &opts, |cur| {
            let cur = cur.ok_or_else(|| ApiError::not_found(&res.plural, &res.group, loc.name))?;
            if meta::deletion_timestamp(cur).is_some() {
                return Err(ApiError::conflict(
                    "pods",
                    "",
                    loc.name,
                    "pod is being deleted, cannot be assigned to a host",
                ));
            }
            if let Some(existing) = cur
                .pointer("/spec/nodeName")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
            {
                return Err(ApiError::conflict(
                    "pods/binding",
                    "",
                    loc.name,
                    &format!(
                        "pod {} is already assigned to node \"{existing}\"",
                        loc.name
                    ),
                ));
            }
            let mut next = cur.clone();
            next["spec"]["nodeName"] = json!(node);
            meta::remove(&mut next, "resourceVersion");
            Ok(next)
        })
        .await?;
    Ok(())
}

/// `pods/eviction`: deletes the pod at `loc` if its disruption budgets allow, taking one
/// disruption from the budget.
pub async fn evict(
    cp: &ControlPlane,
    res: &ResourceDef,
    loc: &Location<'_>,
    eviction: &Value,
    dry_run: bool,
) -> Result<(), ApiError> {
    let mut opts = DeleteOptions {
        dry_run,
        ..Default::default()
    };
    if let Some(d) = eviction.get("deleteOptions") {
        opts.grace_period_seconds = d.get("gracePeriodSeconds").and_then(Value::as_i64);
        opts.precondition_uid = d
            .pointer("/preconditions/uid")
            .and_then(Value::as_str)
            .map(String::from);
    }
    crate::admission::check_eviction(cp, loc, dry_run).await?;
    cp.store.delete(res, loc, &opts).await?;
    Ok(())
}

/// `namespaces/finalize`: replaces the namespace's `spec.finalizers`; returns the namespace.
pub async fn finalize(
    cp: &ControlPlane,
    res: &ResourceDef,
    loc: &Location<'_>,
    body: &Value,
    dry_run: bool,
) -> Result<Value, ApiError> {
    let finalizers = body
        .pointer("/spec/finalizers")
        .cloned()
        .unwrap_or(json!([]));
    let opts = WriteOptions {
        dry_run,
        subresource: Some("finalize".into()),
        ..Default::default()
    };
    let (stored, _) = cp
        .store
        .update_with(res, loc, &opts, |cur| {
            let cur = cur.ok_or_else(|| ApiError::not_found(&res.plural, &res.group, loc.name))?;
            let mut next = cur.clone();
            next["spec"]["finalizers"] = finalizers.clone();
            meta::remove(&mut next, "resourceVersion");
            Ok(next)
        })
        .await?;
    Ok(stored)
}
