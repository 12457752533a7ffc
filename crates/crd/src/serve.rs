//! What the server serves for a CRD: one [`ResourceDef`] per served version.
//!
//! Each carries the CRD's names, scope, short names and categories, every verb, its
//! subresources (`status`; `scale` answering `autoscaling/v1 Scale`), the printer columns
//! (`Printer::Custom`, which falls back to a single `Age` column when there are none), the
//! deprecation warning, a [`CustomStrategy`] and the structural schema used for pruning,
//! strict field validation and server-side apply — with `apiVersion`, `kind` and `metadata`
//! (ObjectMeta) filled in, as upstream publishes them.

use std::cmp::Ordering;
use std::sync::{Arc, LazyLock};

use apimachinery::schema::{Gvk, Schema, SchemaRef, Type};
use registry::{Printer, ResourceDef, ScalePaths, SubresourceDef};
use serde_json::Value;

use crate::spec::{Crd, is_true, version_schema};
use crate::strategy::CustomStrategy;

/// Upstream's discovery verbs of a custom resource, in its order.
pub const VERBS: &[&str] = &[
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "create",
    "update",
    "watch",
];
const GPU: &[&str] = &["get", "patch", "update"];

static OBJECT_META: LazyLock<SchemaRef> = LazyLock::new(|| {
    openapi::builtin_schema("", "v1", "ConfigMap")
        .and_then(|s| s.field("metadata").cloned())
        .unwrap_or_else(Schema::any)
});

fn string_schema() -> SchemaRef {
    Arc::new(Schema {
        ty: Type::String,
        ..Schema::default()
    })
}

/// The structural schema of a version (`openapi::compile_structural`) with `apiVersion`,
/// `kind` and `metadata` present.
pub fn structural_schema(schema: &Value) -> SchemaRef {
    let mut s = (*openapi::compile_structural(schema)).clone();
    s.ty = Type::Object;
    s.properties.insert("apiVersion".into(), string_schema());
    s.properties.insert("kind".into(), string_schema());
    s.properties.insert("metadata".into(), OBJECT_META.clone());
    Arc::new(s)
}

/// Upstream `CompareKubeAwareVersionStrings`: `v2 > v1 > v1beta2 > v1beta1 > v1alpha1 >`
/// anything else (compared reversed-lexically).
pub fn compare_versions(a: &str, b: &str) -> Ordering {
    fn parse(v: &str) -> Option<(u64, u8, u64)> {
        let rest = v.strip_prefix('v')?;
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let major: u64 = rest[..digits].parse().ok()?;
        let tail = &rest[digits..];
        let (kind, minor) = if tail.is_empty() {
            (2, 0)
        } else if let Some(m) = tail.strip_prefix("beta") {
            (1, m.parse().ok()?)
        } else if let Some(m) = tail.strip_prefix("alpha") {
            (0, m.parse().ok()?)
        } else {
            return None;
        };
        Some((major, kind, minor))
    }
    if a == b {
        return Ordering::Equal;
    }
    match (parse(a), parse(b)) {
        (None, None) => b.cmp(a),
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some((ma, ka, na)), Some((mb, kb, nb))) => ka.cmp(&kb).then(ma.cmp(&mb)).then(na.cmp(&nb)),
    }
}

/// Upstream `defaultDeprecationWarning`.
pub fn default_deprecation_warning(crd: &Value, version: &str) -> String {
    let c = Crd(crd);
    let mut msg = format!("{}/{version} {} is deprecated", c.group(), c.kind());
    let mut newer: Vec<&str> = c
        .versions()
        .iter()
        .filter(|v| is_true(v, "served") && !is_true(v, "deprecated"))
        .filter_map(|v| v.get("name").and_then(Value::as_str))
        .filter(|n| compare_versions(version, n) == Ordering::Less)
        .collect();
    newer.sort_by(|a, b| compare_versions(b, a));
    if let Some(best) = newer.first() {
        msg.push_str(&format!("; use {}/{best} {}", c.group(), c.kind()));
    }
    msg
}

fn scale_paths(subresources: Option<&Value>) -> Option<ScalePaths> {
    let scale = subresources?.get("scale").filter(|s| !s.is_null())?;
    let f = |k: &str| scale.get(k).and_then(Value::as_str).map(str::to_string);
    Some(ScalePaths {
        spec_replicas: f("specReplicasPath").unwrap_or_default(),
        status_replicas: f("statusReplicasPath").unwrap_or_default(),
        label_selector: f("labelSelectorPath").filter(|s| !s.is_empty()),
    })
}

/// The resources a CRD serves: one per served version. Call it for a valid, established CRD.
pub fn resource_defs(crd: &Value) -> Vec<ResourceDef> {
    served_versions(crd).into_iter().map(|(d, _)| d).collect()
}

/// Whether the CRD converts between its versions with a webhook (`spec.conversion.strategy`).
pub fn webhook_conversion(crd: &Value) -> bool {
    crd.pointer("/spec/conversion/strategy")
        .and_then(Value::as_str)
        == Some("Webhook")
}

/// [`resource_defs`] with each definition's strategy as its concrete type (the same `Arc`),
/// for callers that convert and default objects on their way out ([`CustomStrategy::read`]).
pub fn served_versions(crd: &Value) -> Vec<(ResourceDef, Arc<CustomStrategy>)> {
    let c = Crd(crd);
    let group = c.group();
    let storage = c.storage_version().unwrap_or_default();
    c.versions()
        .iter()
        .filter(|v| is_true(v, "served"))
        .filter_map(|v| {
            let version = v.get("name").and_then(Value::as_str)?;
            let subresources = v.get("subresources").filter(|s| !s.is_null());
            let status = subresources
                .and_then(|s| s.get("status"))
                .is_some_and(|s| !s.is_null());
            let scale = scale_paths(subresources);
            let mut subs = Vec::new();
            if status {
                subs.push(SubresourceDef {
                    name: "status".into(),
                    group: group.into(),
                    version: version.into(),
                    kind: c.kind().into(),
                    verbs: GPU.iter().map(|s| s.to_string()).collect(),
                });
            }
            if scale.is_some() {
                subs.push(SubresourceDef {
                    name: "scale".into(),
                    group: "autoscaling".into(),
                    version: "v1".into(),
                    kind: "Scale".into(),
                    verbs: GPU.iter().map(|s| s.to_string()).collect(),
                });
            }
            let schema = version_schema(v);
            let selectable = v
                .get("selectableFields")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let mut strategy = CustomStrategy::new(
                group,
                version,
                if storage.is_empty() { version } else { storage },
                schema,
                scale.clone(),
                &selectable,
            );
            if webhook_conversion(crd) {
                strategy = strategy.converted_outside();
            }
            let strategy = Arc::new(strategy);
            let deprecation_warning = is_true(v, "deprecated").then(|| {
                v.get("deprecationWarning")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| default_deprecation_warning(crd, version))
            });
            let structural = schema.map(|s| {
                let mut st = (*structural_schema(s)).clone();
                st.gvk = vec![Gvk {
                    group: group.into(),
                    version: version.into(),
                    kind: c.kind().into(),
                }];
                Arc::new(st)
            });
            let def = ResourceDef {
                group: group.into(),
                version: version.into(),
                kind: c.kind().into(),
                list_kind: c.list_kind(),
                plural: c.plural().into(),
                singular: c.singular(),
                namespaced: c.namespaced(),
                short_names: c.short_names(),
                categories: c.categories(),
                verbs: VERBS.iter().map(|s| s.to_string()).collect(),
                subresources: subs,
                strategy: strategy.clone(),
                schema: structural,
                printer: Printer::Custom(
                    v.get("additionalPrinterColumns")
                        .cloned()
                        .unwrap_or(Value::Null),
                ),
                custom: true,
                scale,
                deprecation_warning,
                root_only: false,
                converter: None,
            };
            Some((def, strategy))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_aware_version_order() {
        let mut vs = vec![
            "v1alpha1", "v2", "foo", "v1", "v1beta2", "v1beta1", "v10", "bar",
        ];
        vs.sort_by(|a, b| compare_versions(b, a));
        assert_eq!(
            vs,
            vec![
                "v10", "v2", "v1", "v1beta2", "v1beta1", "v1alpha1", "bar", "foo"
            ]
        );
    }
}
