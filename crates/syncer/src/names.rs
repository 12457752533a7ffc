//! Name translation between a tenant cluster and its host namespace, as vcluster does it
//! (spec: peers.md §2.5): a namespaced tenant object `<name>` of namespace `<ns>` of tenant
//! cluster `<vc>` is `<name>-x-<ns>-x-<vc>` in the host namespace, hashed when longer than a
//! DNS label; host objects carry vcluster's ownership labels and annotations.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

/// The label naming the tenant cluster a host object belongs to.
pub const MANAGED_BY: &str = "vcluster.loft.sh/managed-by";
/// The label holding the tenant namespace of a host object.
pub const NAMESPACE: &str = "vcluster.loft.sh/namespace";
/// Labels reserved to the syncer on host objects: a tenant label with one of these keys is
/// kept under a translated key.
const RESERVED: &[&str] = &[
    MANAGED_BY,
    NAMESPACE,
    "vcluster.loft.sh/controlled-by",
    "release",
];

pub const OBJECT_NAME: &str = "vcluster.loft.sh/object-name";
pub const OBJECT_NAMESPACE: &str = "vcluster.loft.sh/object-namespace";
pub const OBJECT_UID: &str = "vcluster.loft.sh/object-uid";
pub const OBJECT_KIND: &str = "vcluster.loft.sh/object-kind";
pub const OBJECT_HOST_NAME: &str = "vcluster.loft.sh/object-host-name";
pub const OBJECT_HOST_NAMESPACE: &str = "vcluster.loft.sh/object-host-namespace";

/// The longest name that is kept whole.
const MAX: usize = 63;

/// vcluster's `SafeConcatName`: the parts joined by `-`; above 63 characters, the first 52, a
/// `-` and the first 10 hex digits of the SHA-256 of the whole (`.-` made `-`).
pub fn safe_concat(parts: &[&str]) -> String {
    let full = parts.join("-");
    if full.len() <= MAX {
        return full;
    }
    let digest = Sha256::digest(full.as_bytes());
    let hex: String = digest.iter().take(5).map(|b| format!("{b:02x}")).collect();
    // Names are ASCII (DNS labels and subdomains), so byte 52 is a character boundary; a
    // non-ASCII name cannot have passed validation, but is cut at a boundary all the same.
    let mut cut = 52;
    while !full.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}-{hex}", &full[..cut]).replace(".-", "-")
}

/// The host name of a namespaced tenant object.
pub fn host_name(name: &str, namespace: &str, cluster: &str) -> String {
    safe_concat(&[name, "x", namespace, "x", cluster])
}

/// The key a reserved tenant label is kept under on the host.
fn translated_label(key: &str, cluster: &str) -> String {
    let digest = Sha256::digest(key.as_bytes());
    let hex: String = digest.iter().take(5).map(|b| format!("{b:02x}")).collect();
    format!("vcluster.loft.sh/label-{cluster}-x-{hex}")
}

/// A host object's labels: the tenant's (reserved keys translated) and the ownership markers.
pub fn host_labels(
    tenant: Option<&BTreeMap<String, String>>,
    namespace: &str,
    cluster: &str,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (k, v) in tenant.into_iter().flatten() {
        if RESERVED.contains(&k.as_str()) {
            out.insert(translated_label(k, cluster), v.clone());
        } else {
            out.insert(k.clone(), v.clone());
        }
    }
    out.insert(MANAGED_BY.into(), cluster.into());
    out.insert(NAMESPACE.into(), namespace.into());
    out
}

/// Ownership annotations of a host object made from tenant object `kind` `namespace/name`.
pub fn host_annotations(
    tenant: Option<&BTreeMap<String, String>>,
    kind: &str,
    namespace: &str,
    name: &str,
    uid: &str,
    host_namespace: &str,
    host_name: &str,
) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = tenant
        .into_iter()
        .flatten()
        .filter(|(k, _)| {
            !k.starts_with("vcluster.loft.sh/")
                && k.as_str() != "kubectl.kubernetes.io/last-applied-configuration"
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    out.insert(OBJECT_NAME.into(), name.into());
    out.insert(OBJECT_NAMESPACE.into(), namespace.into());
    out.insert(OBJECT_UID.into(), uid.into());
    out.insert(OBJECT_KIND.into(), kind.into());
    out.insert(OBJECT_HOST_NAME.into(), host_name.into());
    out.insert(OBJECT_HOST_NAMESPACE.into(), host_namespace.into());
    out
}

/// The tenant object a host object was made from: (cluster label, namespace, name).
pub fn tenant_of(
    labels: Option<&BTreeMap<String, String>>,
    annotations: Option<&BTreeMap<String, String>>,
) -> Option<(String, String, String)> {
    let cluster = labels?.get(MANAGED_BY)?.clone();
    let a = annotations?;
    Some((
        cluster,
        a.get(OBJECT_NAMESPACE)?.clone(),
        a.get(OBJECT_NAME)?.clone(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_are_joined_with_x_separators() {
        assert_eq!(
            host_name("web-0", "default", "demo"),
            "web-0-x-default-x-demo"
        );
    }

    #[test]
    fn long_names_keep_52_characters_and_a_hash_of_the_whole() {
        let name = "a".repeat(60);
        let host = host_name(&name, "default", "demo");
        assert_eq!(host.len(), 63);
        assert!(host.starts_with(&"a".repeat(52)));
        let full = format!("{name}-x-default-x-demo");
        let digest = Sha256::digest(full.as_bytes());
        let hex: String = digest.iter().take(5).map(|b| format!("{b:02x}")).collect();
        assert_eq!(&host[53..], hex);
        // Stable, and different for another cluster.
        assert_eq!(host, host_name(&name, "default", "demo"));
        assert_ne!(host, host_name(&name, "default", "other"));
    }

    #[test]
    fn a_dot_before_the_hash_separator_is_dropped() {
        let name = format!("{}.{}", "a".repeat(51), "b".repeat(20));
        let host = host_name(&name, "default", "demo");
        assert!(!host.contains(".-"), "{host}");
    }

    #[test]
    fn reserved_labels_are_translated_and_the_markers_cannot_be_forged() {
        let tenant: BTreeMap<String, String> = [
            ("app".to_string(), "web".to_string()),
            (MANAGED_BY.to_string(), "other".to_string()),
        ]
        .into();
        let host = host_labels(Some(&tenant), "default", "demo");
        assert_eq!(host["app"], "web");
        assert_eq!(host[MANAGED_BY], "demo");
        assert_eq!(host[NAMESPACE], "default");
        assert!(host.values().any(|v| v == "other"));
    }

    #[test]
    fn a_host_object_names_its_tenant_object() {
        let labels = host_labels(None, "default", "demo");
        let ann = host_annotations(
            None,
            "Pod",
            "default",
            "web",
            "u1",
            "tenant-x",
            "web-x-default-x-demo",
        );
        assert_eq!(
            tenant_of(Some(&labels), Some(&ann)),
            Some(("demo".into(), "default".into(), "web".into()))
        );
    }
}
