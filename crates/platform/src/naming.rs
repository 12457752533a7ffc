//! Names in the tenant tree (spec: cozystack.md §4.2): a tenant's namespace, its ancestors,
//! and the names of what a TenantCluster owns.
//!
//! Tenant `foo` created in `tenant-root` owns namespace `tenant-foo`; tenant `bar` created in
//! `tenant-foo` owns `tenant-foo-bar`. Tenant names have no dashes, so every dash-prefix of a
//! tenant namespace is an ancestor's namespace.

/// The root tenant's namespace, present from the first start.
pub const ROOT_NAMESPACE: &str = "tenant-root";
/// Tenant namespaces begin with this.
pub const NAMESPACE_PREFIX: &str = "tenant-";
/// Namespaces are DNS labels.
pub const MAX_NAMESPACE_LEN: usize = 63;
/// The pattern of tenant names.
pub const TENANT_NAME_PATTERN: &str = "^[a-z][a-z0-9]*$";

/// Whether `name` is a valid tenant name (`^[a-z][a-z0-9]*$`).
pub fn valid_tenant_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
}

/// Whether `ns` is a tenant's namespace.
pub fn is_tenant_namespace(ns: &str) -> bool {
    ns == ROOT_NAMESPACE || ns.starts_with(NAMESPACE_PREFIX) && ns.len() > NAMESPACE_PREFIX.len()
}

/// The namespace of tenant `name` created in namespace `parent`.
pub fn tenant_namespace(parent: &str, name: &str) -> String {
    if parent == ROOT_NAMESPACE {
        format!("{NAMESPACE_PREFIX}{name}")
    } else {
        format!("{parent}-{name}")
    }
}

/// The tenant namespaces from the root down to `ns` itself (`tenant-root`, `tenant-a`,
/// `tenant-a-b` for `tenant-a-b`).
pub fn chain(ns: &str) -> Vec<String> {
    let mut out = vec![ROOT_NAMESPACE.to_string()];
    if ns == ROOT_NAMESPACE || !ns.starts_with(NAMESPACE_PREFIX) {
        return out;
    }
    let rest = &ns[NAMESPACE_PREFIX.len()..];
    let mut acc = String::from("tenant");
    for part in rest.split('-') {
        acc.push('-');
        acc.push_str(part);
        out.push(acc.clone());
    }
    out
}

/// The namespace of the tenant that owns tenant namespace `ns` (`None` for the root).
pub fn parent_namespace(ns: &str) -> Option<String> {
    if ns == ROOT_NAMESPACE {
        return None;
    }
    let c = chain(ns);
    c.len().checked_sub(2).map(|i| c[i].clone())
}

/// The Tenant object that owns tenant namespace `ns`: (namespace it lives in, its name).
pub fn tenant_of_namespace(ns: &str) -> Option<(String, String)> {
    let parent = parent_namespace(ns)?;
    let name = ns.rsplit('-').next()?.to_string();
    Some((parent, name))
}

/// The release name of a TenantCluster (`kubernetes-<name>`), the prefix of what it owns.
pub fn release(cluster: &str) -> String {
    format!("kubernetes-{cluster}")
}

/// The TenantCluster a release name belongs to (the inverse of [`release`]).
pub fn cluster_of_release(release: &str) -> Option<&str> {
    release.strip_prefix("kubernetes-")
}

/// The Secret holding a TenantCluster's kubeconfigs.
pub fn kubeconfig_secret(cluster: &str) -> String {
    format!("kubernetes-{cluster}-admin-kubeconfig")
}

/// The logical cluster serving TenantCluster `name` of namespace `ns`: unique across
/// namespaces (`tenant-foo-team-x`), a DNS label.
pub fn logical_cluster(ns: &str, name: &str) -> String {
    let full = format!("{ns}-{name}");
    if full.len() <= MAX_NAMESPACE_LEN {
        return full;
    }
    // Too long: a prefix and a stable hash of the whole.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in full.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    let prefix: String = full.chars().take(MAX_NAMESPACE_LEN - 17).collect();
    format!("{}-{h:016x}", prefix.trim_end_matches('-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn children_of_root_get_tenant_prefix_and_deeper_ones_their_parents_namespace() {
        assert_eq!(tenant_namespace("tenant-root", "foo"), "tenant-foo");
        assert_eq!(tenant_namespace("tenant-foo", "bar"), "tenant-foo-bar");
    }

    #[test]
    fn the_chain_lists_every_ancestor_from_the_root() {
        assert_eq!(
            chain("tenant-a-b-c"),
            ["tenant-root", "tenant-a", "tenant-a-b", "tenant-a-b-c"]
        );
        assert_eq!(chain("tenant-root"), ["tenant-root"]);
        assert_eq!(parent_namespace("tenant-a"), Some("tenant-root".into()));
        assert_eq!(parent_namespace("tenant-a-b"), Some("tenant-a".into()));
        assert_eq!(
            tenant_of_namespace("tenant-a-b-c"),
            Some(("tenant-a-b".into(), "c".into()))
        );
    }

    #[test]
    fn tenant_names_have_no_dashes_or_leading_digits() {
        assert!(valid_tenant_name("foo1"));
        assert!(!valid_tenant_name("foo-bar"));
        assert!(!valid_tenant_name("1foo"));
        assert!(!valid_tenant_name(""));
        assert!(!valid_tenant_name("Foo"));
    }

    #[test]
    fn long_logical_cluster_names_stay_dns_labels() {
        let n = logical_cluster(&"tenant-".repeat(8), "x");
        assert!(n.len() <= 63, "{n}");
        assert_eq!(logical_cluster("tenant-foo", "team-x"), "tenant-foo-team-x");
    }
}
