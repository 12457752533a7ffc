//! The OpenAPI documents each cluster serves: built-in documents are shared by every cluster;
//! a cluster's custom resources add documents of its own (set by CRD serving).

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use openapi::DocumentSet;
use parking_lot::RwLock;

static BUILTIN_ONLY: LazyLock<Arc<DocumentSet>> = LazyLock::new(|| Arc::new(DocumentSet::new()));

/// The OpenAPI documents of every cluster with custom resources.
#[derive(Default)]
pub struct ClusterDocuments {
    sets: RwLock<HashMap<String, Arc<DocumentSet>>>,
}

impl ClusterDocuments {
    /// The document set a cluster serves.
    pub fn get(&self, cluster: &str) -> Arc<DocumentSet> {
        self.sets
            .read()
            .get(cluster)
            .cloned()
            .unwrap_or_else(|| BUILTIN_ONLY.clone())
    }

    /// Clusters with documents of their own.
    pub fn clusters(&self) -> usize {
        self.sets.read().len()
    }

    /// Replaces a cluster's document set (after its CRDs changed).
    pub fn set(&self, cluster: &str, set: Option<DocumentSet>) {
        let mut sets = self.sets.write();
        match set {
            Some(s) => {
                sets.insert(cluster.to_string(), Arc::new(s));
            }
            None => {
                sets.remove(cluster);
            }
        }
    }
}
