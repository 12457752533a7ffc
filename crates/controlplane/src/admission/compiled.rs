//! Admission configuration compiled once per version of its object: webhook configurations
//! and admission policies are parsed (selectors, CEL programs) when first used at a
//! resourceVersion and kept in a process-wide table keyed by the object's uid, so a write pays
//! for a list of the cluster's configurations, not for compiling them again.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use registry::cache::CachedObject;
use serde_json::Value;

/// Beyond this many entries the table starts over (deleted objects leave entries behind).
const MAX_ENTRIES: usize = 4096;

/// Compiled forms by uid, with the resourceVersion each was compiled at.
pub struct Compiled<T> {
    table: Mutex<HashMap<String, (i64, Arc<T>)>>,
}

impl<T> Default for Compiled<T> {
    fn default() -> Self {
        Compiled {
            table: Mutex::new(HashMap::new()),
        }
    }
}

impl<T> Compiled<T> {
    /// The compiled form of a cached object, built by `build` (from the decoded object)
    /// unless this version was built before: a hit decodes nothing.
    pub fn get(&self, obj: &CachedObject, build: impl FnOnce(&Value) -> T) -> Arc<T> {
        let uid = obj.uid();
        if let Some((at, c)) = self.table.lock().get(uid)
            && *at == obj.rev
        {
            return c.clone();
        }
        let c = Arc::new(build(&obj.value()));
        let mut table = self.table.lock();
        if table.len() >= MAX_ENTRIES {
            table.clear();
        }
        table.insert(uid.to_string(), (obj.rev, c.clone()));
        c
    }
}
