//! Request routing: a request path taken apart into what it addresses.
//!
//! Kubernetes paths are irregular (`/api/v1/namespaces/{ns}/{res}/{name}/{sub}` next to
//! `/apis/{group}/{version}/...`, the legacy `/watch/` prefix, a namespace's own `status` and
//! `finalize`), so they are parsed by hand. A logical cluster is addressed by the prefix
//! `/clusters/<name>`; the root cluster is served without one.
//!
//! **Architecture Invariant:** the cluster is decided here, once, from the path only — never
//! from a query string, a header or the body — and every later step uses the decided cluster.

use apimachinery::cluster;
pub use apimachinery::cluster::{ALL_CLUSTERS, CLUSTER_ANNOTATION};

/// What a request path addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Version,
    /// `/healthz`, `/livez`, `/readyz` and their sub-checks.
    Health {
        kind: String,
        check: Option<String>,
    },
    Metrics,
    OpenApiV2,
    OpenApiV3Index,
    /// `/openapi/v3/<path>` (e.g. `apis/apps/v1`).
    OpenApiV3(String),
    /// `/api`
    CoreVersions,
    /// `/apis`
    Groups,
    /// `/apis/<group>`
    Group(String),
    /// `/api/v1`, `/apis/<group>/<version>`
    GroupVersion {
        group: String,
        version: String,
    },
    Resource(ResourcePath),
    /// `/.well-known/openid-configuration`
    OidcConfig,
    /// `/openid/v1/jwks`
    Jwks,
    NotFound,
}

/// A path addressing a resource, a collection or a subresource.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResourcePath {
    pub group: String,
    pub version: String,
    /// Empty for cluster-scoped resources and for all-namespace collections.
    pub namespace: String,
    pub resource: String,
    pub name: Option<String>,
    pub subresource: Option<String>,
    /// The deprecated `/watch/` path prefix was used.
    pub watch_prefix: bool,
    /// The rest of the path after a `proxy` subresource (`/` and what follows, kept as sent),
    /// `Some("")` for a bare `proxy`; `None` for every other path.
    pub subpath: Option<String>,
}

/// A routed request: the cluster and what it addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routed {
    pub cluster: String,
    /// For a cross-cluster request: the datastore whose clusters it covers
    /// (`/shards/<datastore>/clusters/*`); empty for the shared store's (`/clusters/*`).
    pub shard: String,
    pub route: Route,
    /// The path within the cluster (without `/clusters/<name>`).
    pub path: String,
}

fn valid_segment(s: &str) -> bool {
    !s.is_empty()
        && s != "."
        && s != ".."
        && !s.contains('%')
        && s.bytes().all(|b| b.is_ascii_graphic())
}

/// A cluster name: a DNS-1123 label.
pub fn valid_cluster_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// Routes a request path (without the query string).
pub fn route(path: &str) -> Routed {
    // A datastore's cross-cluster view: `/shards/<datastore>/clusters/*/...`.
    if let Some(after) = path.strip_prefix("/shards/") {
        let (shard, tail) = after.split_once('/').unwrap_or((after, ""));
        let tail = format!("/{tail}");
        let mut routed = route(&tail);
        if !valid_cluster_name(shard) || routed.cluster != ALL_CLUSTERS || !routed.shard.is_empty()
        {
            return Routed {
                cluster: String::new(),
                shard: String::new(),
                route: Route::NotFound,
                path: String::new(),
            };
        }
        routed.shard = shard.to_string();
        return routed;
    }
    let mut cluster = cluster::ROOT.to_string();
    let mut rest = path;
    if let Some(after) = path.strip_prefix("/clusters/") {
        let (name, tail) = match after.find('/') {
            Some(i) => (&after[..i], &after[i..]),
            None => (after, ""),
        };
        if name == ALL_CLUSTERS {
            let tail = if tail.is_empty() { "/" } else { tail };
            return Routed {
                cluster: ALL_CLUSTERS.to_string(),
                shard: String::new(),
                route: route_in_cluster(tail),
                path: tail.to_string(),
            };
        }
        if !valid_cluster_name(name) || name == cluster::ROOT {
            return Routed {
                cluster: String::new(),
                shard: String::new(),
                route: Route::NotFound,
                path: String::new(),
            };
        }
        cluster = name.to_string();
        rest = if tail.is_empty() { "/" } else { tail };
    }
    Routed {
        cluster,
        shard: String::new(),
        route: route_in_cluster(rest),
        path: rest.to_string(),
    }
}

/// Decodes `%XX` escapes (as Go's `url.PathUnescape`); a `%` not followed by two hex digits
/// stays as it is, and bytes that do not form UTF-8 become U+FFFD.
pub fn percent_decode(s: &str) -> String {
    if !s.contains('%') {
        return s.to_string();
    }
    let bytes = s.as_bytes();
    let hex = |b: u8| (b as char).to_digit(16);
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn route_in_cluster(path: &str) -> Route {
    if let Some(r) = proxy_route(path) {
        return r;
    }
    // Go's net/http hands kube-apiserver the decoded path (`system%3Aaggregate-to-admin` is
    // `system:aggregate-to-admin`; the Python client encodes `:` that way). A proxy's tail
    // (above) is the backend's and stays as sent.
    let decoded = percent_decode(path);
    let path = decoded.as_str();
    // Empty segments (`//`) are not collapsed: upstream answers 404 for them too.
    let trimmed = path
        .strip_suffix('/')
        .filter(|p| !p.is_empty())
        .unwrap_or(path);
    let segs: Vec<&str> = trimmed.split('/').skip(1).collect();
    if segs.iter().any(|s| !valid_segment(s)) && trimmed != "/" {
        return Route::NotFound;
    }
    match segs.as_slice() {
        ["version"] => Route::Version,
        [kind @ ("healthz" | "livez" | "readyz")] => Route::Health {
            kind: kind.to_string(),
            check: None,
        },
        [kind @ ("healthz" | "livez" | "readyz"), check] => Route::Health {
            kind: kind.to_string(),
            check: Some(check.to_string()),
        },
        ["metrics"] => Route::Metrics,
        ["openapi", "v2"] => Route::OpenApiV2,
        ["openapi", "v3"] => Route::OpenApiV3Index,
        ["openapi", "v3", rest @ ..] => Route::OpenApiV3(rest.join("/")),
        [".well-known", "openid-configuration"] => Route::OidcConfig,
        ["openid", "v1", "jwks"] => Route::Jwks,
        ["api"] => Route::CoreVersions,
        ["api", "v1"] => Route::GroupVersion {
            group: String::new(),
            version: "v1".into(),
        },
        ["api", "v1", rest @ ..] => resource_route("", "v1", rest),
        ["apis"] => Route::Groups,
        ["apis", g] => Route::Group(g.to_string()),
        ["apis", g, v] => Route::GroupVersion {
            group: g.to_string(),
            version: v.to_string(),
        },
        ["apis", g, v, rest @ ..] => resource_route(g, v, rest),
        _ => Route::NotFound,
    }
}

/// A `proxy` subresource with what follows it (`.../pods/<name>/proxy/<path>`,
/// `.../nodes/<name>/proxy/<path>`): the segments up to `proxy` are checked as any others,
/// the rest is the proxied path, passed on as it is.
fn proxy_route(path: &str) -> Option<Route> {
    let segs: Vec<&str> = path.split('/').skip(1).collect();
    let (group, version, rest) = match segs.as_slice() {
        ["api", "v1", rest @ ..] => ("", "v1", rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return None,
    };
    let (namespace, resource, name, tail) = match rest {
        ["namespaces", ns, res, name, "proxy", tail @ ..] => (*ns, *res, *name, tail),
        [res, name, "proxy", tail @ ..] if *res != "namespaces" => ("", *res, *name, tail),
        _ => return None,
    };
    let (namespace, resource, name) = (
        percent_decode(namespace),
        percent_decode(resource),
        percent_decode(name),
    );
    let (namespace, resource, name) = (namespace.as_str(), resource.as_str(), name.as_str());
    let head = [group, version, namespace, resource, name];
    if head
        .iter()
        .enumerate()
        .any(|(i, s)| !valid_segment(s) && !(s.is_empty() && (i == 0 || i == 2)))
    {
        return Some(Route::NotFound);
    }
    let subpath = if tail.is_empty() {
        String::new()
    } else {
        format!("/{}", tail.join("/"))
    };
    Some(Route::Resource(ResourcePath {
        group: group.into(),
        version: version.into(),
        namespace: namespace.into(),
        resource: resource.into(),
        name: Some(name.into()),
        subresource: Some("proxy".into()),
        watch_prefix: false,
        subpath: Some(subpath),
    }))
}

fn resource_route(group: &str, version: &str, rest: &[&str]) -> Route {
    let (watch_prefix, rest) = match rest {
        ["watch", tail @ ..] => (true, tail),
        _ => (false, rest),
    };
    let base = ResourcePath {
        group: group.into(),
        version: version.into(),
        watch_prefix,
        ..Default::default()
    };
    let p = |ns: &str, res: &str, name: Option<&str>, sub: Option<&str>| {
        Route::Resource(ResourcePath {
            namespace: ns.into(),
            resource: res.into(),
            name: name.map(String::from),
            subresource: sub.map(String::from),
            ..base.clone()
        })
    };
    match rest {
        [res] => p("", res, None, None),
        // A namespace's own subresources.
        ["namespaces", name, sub @ ("status" | "finalize")] if group.is_empty() => {
            p("", "namespaces", Some(name), Some(sub))
        }
        ["namespaces", ns, res] => p(ns, res, None, None),
        ["namespaces", ns, res, name] => p(ns, res, Some(name), None),
        ["namespaces", ns, res, name, sub] => p(ns, res, Some(name), Some(sub)),
        [res, name] => p("", res, Some(name), None),
        [res, name, sub] => p("", res, Some(name), Some(sub)),
        _ => Route::NotFound,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_encoded_segments_are_decoded_as_go_does() {
        let p = res("/apis/rbac.authorization.k8s.io/v1/clusterroles/system%3Aaggregate-to-admin");
        assert_eq!(p.name.as_deref(), Some("system:aggregate-to-admin"));
        assert_eq!(percent_decode("a%2"), "a%2");
        assert_eq!(percent_decode("%zz%41"), "%zzA");
        assert_eq!(percent_decode("%C3%A9%e9"), "é\u{fffd}");
    }

    fn res(path: &str) -> ResourcePath {
        match route(path).route {
            Route::Resource(r) => r,
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn namespaced_and_cluster_scoped_paths_are_taken_apart() {
        let r = res("/apis/apps/v1/namespaces/default/deployments/web/scale");
        assert_eq!(
            (
                r.group.as_str(),
                r.namespace.as_str(),
                r.resource.as_str(),
                r.name.as_deref(),
                r.subresource.as_deref()
            ),
            ("apps", "default", "deployments", Some("web"), Some("scale"))
        );
        let r = res("/api/v1/nodes/n1/status");
        assert_eq!(
            (
                r.namespace.as_str(),
                r.resource.as_str(),
                r.subresource.as_deref()
            ),
            ("", "nodes", Some("status"))
        );
        let r = res("/api/v1/namespaces/kube-system/finalize");
        assert_eq!(
            (
                r.resource.as_str(),
                r.name.as_deref(),
                r.subresource.as_deref()
            ),
            ("namespaces", Some("kube-system"), Some("finalize"))
        );
        let r = res("/api/v1/namespaces/kube-system");
        assert_eq!(
            (r.resource.as_str(), r.name.as_deref()),
            ("namespaces", Some("kube-system"))
        );
        let r = res("/api/v1/watch/namespaces/default/pods");
        assert!(r.watch_prefix);
        assert_eq!(r.resource, "pods");
    }

    #[test]
    fn cluster_prefixes_select_the_cluster_and_nothing_else() {
        let r = route("/clusters/tenant-a/api/v1/namespaces/default/pods");
        assert_eq!(r.cluster, "tenant-a");
        assert!(matches!(r.route, Route::Resource(_)));
        assert_eq!(route("/api/v1/pods").cluster, cluster::ROOT);
        assert_eq!(route("/clusters/a").route, Route::NotFound);
        assert_eq!(route("/clusters/a/").route, Route::NotFound);
        for bad in [
            "/clusters/A/api",
            "/clusters/../api",
            "/clusters//api",
            "/clusters/a%2fb/api",
            "/clusters/root/api",
        ] {
            assert_eq!(route(bad).route, Route::NotFound, "{bad}");
        }
        let r = route("/shards/ds-1/clusters/*/api/v1/pods");
        assert_eq!(
            (r.cluster.as_str(), r.shard.as_str()),
            (ALL_CLUSTERS, "ds-1")
        );
        assert!(matches!(r.route, Route::Resource(_)));
        for bad in [
            "/shards/ds-1/api/v1/pods",
            "/shards/ds-1/clusters/a/api/v1/pods",
            "/shards/DS/clusters/*/api/v1/pods",
            "/shards//clusters/*/api",
            "/shards/a/shards/b/clusters/*/api",
        ] {
            assert_eq!(route(bad).route, Route::NotFound, "{bad}");
        }
    }

    #[test]
    fn version_and_health_paths_accept_a_trailing_slash() {
        assert_eq!(route("/version/").route, Route::Version);
        assert_eq!(route("/version").route, Route::Version);
        assert_eq!(
            route("/readyz/ping").route,
            Route::Health {
                kind: "readyz".into(),
                check: Some("ping".into())
            }
        );
    }

    #[test]
    fn proxy_paths_keep_what_follows_as_sent() {
        let r = res("/api/v1/namespaces/default/pods/web:8080/proxy/a/b/");
        assert_eq!(
            (
                r.namespace.as_str(),
                r.resource.as_str(),
                r.name.as_deref(),
                r.subresource.as_deref(),
                r.subpath.as_deref()
            ),
            (
                "default",
                "pods",
                Some("web:8080"),
                Some("proxy"),
                Some("/a/b/")
            )
        );
        let r = res("/api/v1/nodes/n1/proxy/stats/summary");
        assert_eq!(
            (
                r.namespace.as_str(),
                r.name.as_deref(),
                r.subpath.as_deref()
            ),
            ("", Some("n1"), Some("/stats/summary"))
        );
        // Encoded and dotted parts after `proxy/` are the backend's business.
        let r = res("/api/v1/namespaces/ns/services/s/proxy/%2e%2e//x");
        assert_eq!(r.subpath.as_deref(), Some("/%2e%2e//x"));
        assert_eq!(res("/api/v1/nodes/n1/proxy").subpath.as_deref(), Some(""));
        assert_eq!(res("/api/v1/nodes/n1/proxy/").subpath.as_deref(), Some("/"));
        // The part before `proxy` is checked as everywhere.
        assert_eq!(
            route("/api/v1/namespaces/../pods/p/proxy/x").route,
            Route::NotFound
        );
        // Other paths have no subpath.
        assert_eq!(res("/api/v1/namespaces/ns/pods/p/exec").subpath, None);
    }

    #[test]
    fn dotted_and_empty_segments_are_not_routed() {
        for bad in [
            "/api/v1/namespaces/../pods",
            "/api//v1/pods",
            "/apis/apps/v1/namespaces/a/deployments/x/y/z",
            "/api/v1/pods/%2e%2e",
        ] {
            assert_eq!(route(bad).route, Route::NotFound, "{bad}");
        }
        let r = route("/shards/ds-1/clusters/*/api/v1/pods");
        assert_eq!(
            (r.cluster.as_str(), r.shard.as_str()),
            (ALL_CLUSTERS, "ds-1")
        );
        assert!(matches!(r.route, Route::Resource(_)));
        for bad in [
            "/shards/ds-1/api/v1/pods",
            "/shards/ds-1/clusters/a/api/v1/pods",
            "/shards/DS/clusters/*/api/v1/pods",
            "/shards//clusters/*/api",
            "/shards/a/shards/b/clusters/*/api",
        ] {
            assert_eq!(route(bad).route, Route::NotFound, "{bad}");
        }
    }
}
