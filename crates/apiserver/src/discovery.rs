//! Discovery: legacy (`/api`, `/apis`, `/apis/<g>`, per group-version resource lists) and
//! aggregated (`apidiscovery.k8s.io` v2 and v2beta1, chosen by the `Accept` header), each
//! computed for the requesting cluster (its own CRDs included).

use std::collections::BTreeMap;
use std::sync::Arc;

use apimachinery::status::ApiError;
use http::{Response, StatusCode, header};
use registry::ResourceDef;
use serde_json::{Value, json};

use crate::negotiate;
use crate::response::{self, Body};
use crate::server::{ApiServer, Ctx};

/// A group's versions, preferred first, each with its resources.
type Versions = Vec<(String, Vec<Arc<ResourceDef>>)>;

/// Groups a cluster serves, in order, each with its versions (preferred first) and resources.
fn grouped(server: &ApiServer, cluster: &str) -> Vec<(String, Versions)> {
    let mut groups: Vec<(String, Versions)> = Vec::new();
    for r in server.catalog().all(cluster) {
        let gi = match groups.iter().position(|(g, _)| *g == r.group) {
            Some(i) => i,
            None => {
                groups.push((r.group.clone(), Vec::new()));
                groups.len() - 1
            }
        };
        let versions = &mut groups[gi].1;
        match versions.iter_mut().find(|(v, _)| *v == r.version) {
            Some((_, rs)) => rs.push(r),
            None => versions.push((r.version.clone(), vec![r])),
        }
    }
    for (_, versions) in &mut groups {
        versions.sort_by_key(|v| std::cmp::Reverse(version_priority(&v.0)));
    }
    groups
}

/// Kubernetes version ordering: GA > beta > alpha > other, higher numbers first.
pub fn version_priority(v: &str) -> (u8, u32, u32) {
    let Some(rest) = v.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let Ok(major) = digits.parse::<u32>() else {
        return (0, 0, 0);
    };
    let tail = &rest[digits.len()..];
    let num = |s: &str| s.parse::<u32>().ok();
    if tail.is_empty() {
        (3, major, 0)
    } else if let Some(n) = tail.strip_prefix("beta").and_then(num) {
        (2, major, n)
    } else if let Some(n) = tail.strip_prefix("alpha").and_then(num) {
        (1, major, n)
    } else {
        (0, 0, 0)
    }
}

fn group_version(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    }
}

/// `GET /api`
pub fn core_versions(server: &ApiServer, ctx: &Ctx) -> Response<Body> {
    if let Some(v) = negotiate::aggregated_discovery(ctx.header("accept")) {
        let groups = grouped(server, &ctx.cluster);
        let items: Vec<Value> = groups
            .iter()
            .filter(|(g, _)| g.is_empty())
            .map(|(g, vs)| aggregated_group(g, vs))
            .collect();
        return aggregated(v, items);
    }
    let addr = ctx.header("host").unwrap_or("127.0.0.1:6443").to_string();
    response::json(
        StatusCode::OK,
        &json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": addr}],
        }),
    )
}

fn api_group(group: &str, versions: &[(String, Vec<Arc<ResourceDef>>)]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|(v, _)| json!({"groupVersion": group_version(group, v), "version": v}))
        .collect();
    json!({"name": group, "versions": vs, "preferredVersion": vs[0].clone()})
}

/// `GET /apis`
pub fn groups(server: &ApiServer, ctx: &Ctx) -> Response<Body> {
    let groups = grouped(server, &ctx.cluster);
    if let Some(v) = negotiate::aggregated_discovery(ctx.header("accept")) {
        let items: Vec<Value> = groups
            .iter()
            .filter(|(g, _)| !g.is_empty())
            .map(|(g, vs)| aggregated_group(g, vs))
            .collect();
        return aggregated(v, items);
    }
    let list: Vec<Value> = groups
        .iter()
        .filter(|(g, _)| !g.is_empty())
        .map(|(g, vs)| api_group(g, vs))
        .collect();
    response::json(
        StatusCode::OK,
        &json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": list}),
    )
}

/// `GET /apis/<group>`
pub fn group(server: &ApiServer, ctx: &Ctx, group: &str) -> Result<Response<Body>, ApiError> {
    let groups = grouped(server, &ctx.cluster);
    let (g, vs) = groups
        .iter()
        .find(|(g, _)| g == group && !g.is_empty())
        .ok_or_else(ApiError::no_route)?;
    let mut v = api_group(g, vs);
    v["kind"] = json!("APIGroup");
    v["apiVersion"] = json!("v1");
    Ok(response::json(StatusCode::OK, &v))
}

/// `GET /api/v1`, `GET /apis/<group>/<version>`
pub fn resources(
    server: &ApiServer,
    ctx: &Ctx,
    group: &str,
    version: &str,
) -> Result<Response<Body>, ApiError> {
    let groups = grouped(server, &ctx.cluster);
    let rs = groups
        .iter()
        .find(|(g, _)| g == group)
        .and_then(|(_, vs)| vs.iter().find(|(v, _)| v == version))
        .map(|(_, rs)| rs)
        .ok_or_else(ApiError::no_route)?;
    let mut list = Vec::new();
    for r in rs {
        let mut entry = json!({
            "name": r.plural,
            "singularName": r.singular,
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": r.verbs,
        });
        if !r.short_names.is_empty() {
            entry["shortNames"] = json!(r.short_names);
        }
        if !r.categories.is_empty() {
            entry["categories"] = json!(r.categories);
        }
        entry["storageVersionHash"] = json!(storage_version_hash(r));
        list.push(entry);
        for s in &r.subresources {
            let mut sub = json!({
                "name": format!("{}/{}", r.plural, s.name),
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": s.kind,
                "verbs": s.verbs,
            });
            if s.group != r.group || s.version != r.version {
                sub["group"] = json!(s.group);
                sub["version"] = json!(s.version);
            }
            list.push(sub);
        }
    }
    Ok(response::json(
        StatusCode::OK,
        &json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version(group, version), "resources": list}),
    ))
}

/// A short stable hash of where a resource is stored (upstream exposes one; clients only
/// compare it for equality).
fn storage_version_hash(r: &ResourceDef) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (&r.group, &r.version, &r.kind).hash(&mut h);
    let n = h.finish();
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    (0..11)
        .map(|i| alphabet[((n >> (i * 6)) & 63) as usize] as char)
        .collect()
}

fn aggregated_group(group: &str, versions: &[(String, Vec<Arc<ResourceDef>>)]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|(v, rs)| {
            let resources: Vec<Value> = rs
                .iter()
                .map(|r| {
                    let mut e = json!({
                        "resource": r.plural,
                        "responseKind": {"group": r.group, "version": r.version, "kind": r.kind},
                        "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
                        "singularResource": r.singular,
                        "verbs": r.verbs,
                    });
                    if !r.short_names.is_empty() {
                        e["shortNames"] = json!(r.short_names);
                    }
                    if !r.categories.is_empty() {
                        e["categories"] = json!(r.categories);
                    }
                    if !r.subresources.is_empty() {
                        e["subresources"] = Value::Array(
                            r.subresources
                                .iter()
                                .map(|s| {
                                    json!({
                                        "subresource": s.name,
                                        "responseKind": {"group": s.group, "version": s.version, "kind": s.kind},
                                        "verbs": s.verbs,
                                    })
                                })
                                .collect(),
                        );
                    }
                    e
                })
                .collect();
            json!({"version": v, "resources": resources, "freshness": "Current"})
        })
        .collect();
    json!({"metadata": {"name": group, "creationTimestamp": null}, "versions": vs})
}

fn aggregated(version: &str, items: Vec<Value>) -> Response<Body> {
    let doc = json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": format!("apidiscovery.k8s.io/{version}"),
        "metadata": {},
        "items": items,
    });
    let body = serde_json::to_vec(&doc).unwrap_or_default();
    let etag = {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        body.hash(&mut h);
        format!("\"{:016X}\"", h.finish())
    };
    let mut r = response::bytes(
        StatusCode::OK,
        &format!("application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList"),
        body,
    );
    if let Ok(v) = http::HeaderValue::from_str(&etag) {
        r.headers_mut().insert(header::ETAG, v);
    }
    r.headers_mut()
        .insert(header::VARY, http::HeaderValue::from_static("Accept"));
    r
}

/// Every group-version a cluster serves, as `(group, version)` pairs (for OpenAPI).
pub fn group_versions(
    server: &ApiServer,
    cluster: &str,
) -> BTreeMap<(String, String), Vec<Arc<ResourceDef>>> {
    let mut out = BTreeMap::new();
    for (g, vs) in grouped(server, cluster) {
        for (v, rs) in vs {
            out.insert((g.clone(), v), rs);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::version_priority;

    #[test]
    fn versions_sort_like_kubernetes() {
        let mut v = vec!["v1alpha1", "v2beta1", "v1", "v2", "v1beta2", "foo"];
        v.sort_by_key(|x| std::cmp::Reverse(version_priority(x)));
        assert_eq!(v, vec!["v2", "v1", "v2beta1", "v1beta2", "v1alpha1", "foo"]);
    }
}
