//! The storage key schema: `/registry/<cluster>/<group>/<resource>/<namespace>/<name>`
//! (cluster-scoped objects omit the namespace; the core group is spelled `core`).
//!
//! A logical cluster is the first segment, so deleting a cluster is deleting one prefix, and
//! nothing of one cluster is under another's prefix. Cluster names, namespaces and object names
//! are validated before they reach a key, so no segment contains `/`.

/// Every key starts with this.
pub const KEY_PREFIX: &str = "/registry/";

/// The segment that spells the core (`""`) group.
const CORE: &str = "core";

fn group_segment(group: &str) -> &str {
    if group.is_empty() { CORE } else { group }
}

/// The key of one object.
pub fn object(cluster: &str, group: &str, resource: &str, namespace: &str, name: &str) -> String {
    if namespace.is_empty() {
        format!(
            "{KEY_PREFIX}{cluster}/{}/{resource}/{name}",
            group_segment(group)
        )
    } else {
        format!(
            "{KEY_PREFIX}{cluster}/{}/{resource}/{namespace}/{name}",
            group_segment(group)
        )
    }
}

/// The prefix of a resource's objects in a cluster, optionally in one namespace.
pub fn collection(cluster: &str, group: &str, resource: &str, namespace: &str) -> String {
    if namespace.is_empty() {
        format!("{KEY_PREFIX}{cluster}/{}/{resource}/", group_segment(group))
    } else {
        format!(
            "{KEY_PREFIX}{cluster}/{}/{resource}/{namespace}/",
            group_segment(group)
        )
    }
}

/// The prefix of everything in a logical cluster.
pub fn cluster(cluster: &str) -> String {
    format!("{KEY_PREFIX}{cluster}/")
}

/// A key taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed<'a> {
    pub cluster: &'a str,
    pub group: &'a str,
    pub resource: &'a str,
    /// Empty for cluster-scoped objects.
    pub namespace: &'a str,
    pub name: &'a str,
}

/// Parses an object key; `None` for anything that is not one.
pub fn parse(key: &[u8]) -> Option<Parsed<'_>> {
    let s = std::str::from_utf8(key).ok()?.strip_prefix(KEY_PREFIX)?;
    let parts: Vec<&str> = s.split('/').collect();
    let (cluster, group, resource, namespace, name) = match parts.as_slice() {
        [c, g, r, n] => (*c, *g, *r, "", *n),
        [c, g, r, ns, n] => (*c, *g, *r, *ns, *n),
        _ => return None,
    };
    if [cluster, group, resource, name]
        .iter()
        .any(|p| p.is_empty())
    {
        return None;
    }
    let group = if group == CORE { "" } else { group };
    Some(Parsed {
        cluster,
        group,
        resource,
        namespace,
        name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_for_namespaced_and_cluster_scoped_objects() {
        let k = object("root", "apps", "deployments", "default", "web");
        assert_eq!(k, "/registry/root/apps/deployments/default/web");
        let p = parse(k.as_bytes()).unwrap();
        assert_eq!(
            (p.cluster, p.group, p.resource, p.namespace, p.name),
            ("root", "apps", "deployments", "default", "web")
        );
        let k = object("a", "", "namespaces", "", "kube-system");
        assert_eq!(k, "/registry/a/core/namespaces/kube-system");
        assert_eq!(parse(k.as_bytes()).unwrap().group, "");
    }

    #[test]
    fn a_cluster_prefix_never_covers_another_cluster() {
        let a = cluster("a");
        assert!(!object("ab", "", "pods", "x", "p").starts_with(&a));
        assert!(object("a", "", "pods", "x", "p").starts_with(&a));
        assert!(collection("a", "", "pods", "x").starts_with(&a));
    }

    #[test]
    fn odd_keys_do_not_parse() {
        for k in [
            "/registry/a/b",
            "/other/a/core/pods/x/y",
            "/registry/a//pods/x",
            "/registry/a/core/pods/x/y/z",
        ] {
            assert!(parse(k.as_bytes()).is_none(), "{k}");
        }
    }
}
