//! The hostnames logical clusters are served at besides their path: a LogicalCluster's
//! `spec.hostnames` (the platform writes a tenant cluster's `host` and its in-cluster
//! Service names there). A TLS client naming one of them by SNI is served that cluster's
//! paths without the `/clusters/<name>` prefix, with a serving certificate carrying the name.
//!
//! A hostname belongs to the first cluster that claims it: a later claim by another cluster
//! is ignored (and logged) until the first lets go, so one tenant cannot take over another's
//! name.

use std::collections::HashMap;

use parking_lot::RwLock;
use serde_json::Value;

/// How many hostnames one cluster may have.
pub const MAX_HOSTNAMES: usize = 16;

#[derive(Default)]
pub struct Hostnames {
    inner: RwLock<Inner>,
}

#[derive(Default)]
struct Inner {
    by_host: HashMap<String, String>,
    by_cluster: HashMap<String, Vec<String>>,
}

/// The hostnames a LogicalCluster asks for (lowercased; a trailing dot dropped).
pub fn requested(obj: &Value) -> Vec<String> {
    obj.pointer("/spec/hostnames")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(|h| h.trim_end_matches('.').to_ascii_lowercase())
                .filter(|h| !h.is_empty())
                .take(MAX_HOSTNAMES)
                .collect()
        })
        .unwrap_or_default()
}

impl Hostnames {
    /// Sets `cluster`'s hostnames (empty: none).
    pub fn set(&self, cluster: &str, hosts: Vec<String>) {
        let mut inner = self.inner.write();
        let Inner {
            by_host,
            by_cluster,
        } = &mut *inner;
        if let Some(old) = by_cluster.remove(cluster) {
            for h in old {
                if by_host.get(&h).map(String::as_str) == Some(cluster) {
                    by_host.remove(&h);
                }
            }
        }
        let mut held = Vec::new();
        for h in hosts {
            match by_host.get(&h) {
                Some(owner) if owner != cluster => {
                    tracing::warn!(cluster, host = %h, owner = %owner, "hostname already served for another cluster; ignored");
                }
                _ => {
                    by_host.insert(h.clone(), cluster.to_string());
                    held.push(h);
                }
            }
        }
        if !held.is_empty() {
            by_cluster.insert(cluster.to_string(), held);
        }
    }

    /// The cluster served at `host`.
    pub fn cluster(&self, host: &str) -> Option<String> {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.inner.read().by_host.get(&host).cloned()
    }

    /// How many hostnames are served.
    pub fn len(&self) -> usize {
        self.inner.read().by_host.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_hostname_belongs_to_the_first_cluster_that_claims_it() {
        let h = Hostnames::default();
        h.set(
            "a",
            vec!["api.a.example".into(), "kubernetes-a.ns.svc".into()],
        );
        h.set("b", vec!["api.a.example".into(), "api.b.example".into()]);
        assert_eq!(h.cluster("API.A.example.").as_deref(), Some("a"));
        assert_eq!(h.cluster("api.b.example").as_deref(), Some("b"));
        // When the first lets go, the name is free for the next claim.
        h.set("a", vec![]);
        assert_eq!(h.cluster("api.a.example"), None);
        assert_eq!(h.cluster("kubernetes-a.ns.svc"), None);
        h.set("b", vec!["api.a.example".into()]);
        assert_eq!(h.cluster("api.a.example").as_deref(), Some("b"));
        assert_eq!(h.cluster("api.b.example"), None);
        assert_eq!(h.len(), 1);
    }

    #[test]
    fn requested_hostnames_are_lowercased_and_bounded() {
        let many: Vec<String> = (0..40).map(|i| format!("h{i}.example")).collect();
        let obj = json!({"spec": {"hostnames": many}});
        assert_eq!(requested(&obj).len(), MAX_HOSTNAMES);
        let obj = json!({"spec": {"hostnames": ["Api.Example.", ""]}});
        assert_eq!(requested(&obj), vec!["api.example"]);
    }
}
