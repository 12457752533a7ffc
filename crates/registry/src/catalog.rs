//! The catalogue of served resources per logical cluster: the built-in resources (shared by
//! every cluster) plus each cluster's custom resources.
//!
//! Lookups are by (cluster, group, version, plural); discovery walks everything a cluster
//! serves. A cluster without CRDs costs nothing here.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::RwLock;

use crate::resource::ResourceDef;

/// The name of the root cluster, where root-only resources are served.
use apimachinery::cluster::ROOT;

/// Served resources.
pub struct Catalog {
    builtins: Vec<Arc<ResourceDef>>,
    by_gvr: HashMap<(String, String, String), Arc<ResourceDef>>,
    /// Custom resources per cluster, in CRD order.
    custom: RwLock<HashMap<String, Vec<Arc<ResourceDef>>>>,
}

impl Catalog {
    pub fn new(builtins: Vec<ResourceDef>) -> Self {
        let builtins: Vec<Arc<ResourceDef>> = builtins.into_iter().map(Arc::new).collect();
        let by_gvr = builtins
            .iter()
            .map(|r| {
                (
                    (r.group.clone(), r.version.clone(), r.plural.clone()),
                    r.clone(),
                )
            })
            .collect();
        Catalog {
            builtins,
            by_gvr,
            custom: RwLock::new(HashMap::new()),
        }
    }

    /// The resource a request addresses, if the cluster serves it.
    pub fn lookup(
        &self,
        cluster: &str,
        group: &str,
        version: &str,
        plural: &str,
    ) -> Option<Arc<ResourceDef>> {
        if let Some(r) =
            self.by_gvr
                .get(&(group.to_string(), version.to_string(), plural.to_string()))
        {
            return (!r.root_only || cluster == ROOT).then(|| r.clone());
        }
        let custom = self.custom.read();
        if cluster == "*" {
            // The cross-cluster pseudo-cluster serves a custom resource any cluster defines.
            return custom
                .values()
                .flat_map(|defs| defs.iter())
                .find(|r| r.group == group && r.version == version && r.plural == plural)
                .cloned();
        }
        custom
            .get(cluster)?
            .iter()
            .find(|r| r.group == group && r.version == version && r.plural == plural)
            .cloned()
    }

    /// A built-in resource by group and plural (any version).
    pub fn builtin(&self, group: &str, plural: &str) -> Option<Arc<ResourceDef>> {
        self.builtins
            .iter()
            .find(|r| r.group == group && r.plural == plural)
            .cloned()
    }

    /// Everything a cluster serves: built-ins first, then custom resources.
    pub fn all(&self, cluster: &str) -> Vec<Arc<ResourceDef>> {
        let mut out: Vec<Arc<ResourceDef>> = self
            .builtins
            .iter()
            .filter(|r| !r.root_only || cluster == ROOT)
            .cloned()
            .collect();
        if let Some(c) = self.custom.read().get(cluster) {
            out.extend(c.iter().cloned());
        }
        out
    }

    /// Replaces the custom resources of one CRD (all its served versions) in a cluster.
    pub fn set_custom(&self, cluster: &str, group: &str, plural: &str, defs: Vec<ResourceDef>) {
        let mut custom = self.custom.write();
        let list = custom.entry(cluster.to_string()).or_default();
        list.retain(|r| !(r.group == group && r.plural == plural));
        list.extend(defs.into_iter().map(Arc::new));
        if list.is_empty() {
            custom.remove(cluster);
        }
    }

    /// Replaces every custom resource a cluster serves (after its CRDs changed).
    pub fn replace_custom(&self, cluster: &str, defs: Vec<ResourceDef>) {
        let mut custom = self.custom.write();
        if defs.is_empty() {
            custom.remove(cluster);
        } else {
            custom.insert(
                cluster.to_string(),
                defs.into_iter().map(Arc::new).collect(),
            );
        }
    }

    /// Replaces the strategy of a built-in resource (a layer above provides it).
    pub fn with_builtin_strategy(
        mut self,
        group: &str,
        plural: &str,
        strategy: Arc<dyn crate::Strategy>,
    ) -> Self {
        for r in self
            .builtins
            .iter_mut()
            .filter(|r| r.group == group && r.plural == plural)
        {
            let mut def = ResourceDef::clone(r);
            def.strategy = strategy.clone();
            *r = Arc::new(def);
        }
        self.by_gvr = self
            .builtins
            .iter()
            .map(|r| {
                (
                    (r.group.clone(), r.version.clone(), r.plural.clone()),
                    r.clone(),
                )
            })
            .collect();
        self
    }

    /// Forgets every custom resource of a cluster (the cluster was deleted).
    /// Clusters serving custom resources.
    pub fn custom_clusters(&self) -> usize {
        self.custom.read().len()
    }

    pub fn remove_cluster(&self, cluster: &str) {
        self.custom.write().remove(cluster);
    }
}
