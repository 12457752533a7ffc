//! In-process validating admission hooks: the registry of [`Validator`]s (the trait lives in
//! `apimachinery::admission`, so the components implementing it need nothing of the server)
//! and the step of the write path that runs them.
//!
//! A [`Validator`] plays the part of a validating admission webhook for one resource: after a
//! create, update or patch has been decoded and merged, and before it is stored, the server
//! hands it the new object (and the old one on update) with a read-only view of the watch cache
//! ([`Objects`]) for cross-object checks. Its refusal is the answer the client sees — a
//! `422 Invalid` with field causes, or a `403 Forbidden` — exactly as a webhook's would be.
//! Validators are registered at run time on [`ApiServer::admission`] keyed by group and
//! resource, so the components that own a resource (the platform crate for its CRDs) plug in
//! without knowing anything of HTTP.

use std::collections::HashMap;
use std::sync::Arc;

use apimachinery::status::ApiError;
use parking_lot::RwLock;
use registry::cache::Filter;
use registry::store::Location;
use serde_json::Value;

pub use apimachinery::admission::{Mutator, Objects, Operation, Request, Validator};

use crate::{ControlPlane, Requester as Who};

/// Validators keyed by (group, plural).
type ByResource = HashMap<(String, String), Vec<Arc<dyn Validator>>>;
/// Mutators keyed by (group, plural).
type MutatorsByResource = HashMap<(String, String), Vec<Arc<dyn Mutator>>>;

/// The registered validators and mutators, by (group, plural).
#[derive(Default)]
pub struct Validators {
    map: RwLock<ByResource>,
    mutators: RwLock<MutatorsByResource>,
}

impl Validators {
    /// Registers `v` for writes of `group`/`plural` in every cluster.
    pub fn register(&self, group: &str, plural: &str, v: Arc<dyn Validator>) {
        self.map
            .write()
            .entry((group.to_string(), plural.to_string()))
            .or_default()
            .push(v);
    }

    /// Registers `m` for creates of `group`/`plural` in every cluster.
    pub fn register_mutator(&self, group: &str, plural: &str, m: Arc<dyn Mutator>) {
        self.mutators
            .write()
            .entry((group.to_string(), plural.to_string()))
            .or_default()
            .push(m);
    }

    /// Whether writes of `group`/`plural` have validators or mutators (which read the watch
    /// cache).
    pub fn any_for(&self, group: &str, plural: &str) -> bool {
        let key = (group.to_string(), plural.to_string());
        self.map.read().contains_key(&key) || self.mutators.read().contains_key(&key)
    }

    fn mutators_of(&self, group: &str, plural: &str) -> Vec<Arc<dyn Mutator>> {
        self.mutators
            .read()
            .get(&(group.to_string(), plural.to_string()))
            .cloned()
            .unwrap_or_default()
    }

    fn of(&self, group: &str, plural: &str) -> Vec<Arc<dyn Validator>> {
        self.map
            .read()
            .get(&(group.to_string(), plural.to_string()))
            .cloned()
            .unwrap_or_default()
    }
}

/// The objects of the watch cache, as admission hooks (and collectors) read them.
pub struct CacheObjects<'a>(pub &'a ControlPlane);

impl Objects for CacheObjects<'_> {
    fn get(&self, group: &str, plural: &str, cluster: &str, ns: &str, name: &str) -> Option<Value> {
        self.0
            .store
            .cache_for_reads(cluster)
            .get(group, plural, cluster, ns, name)
            .map(|o| o.to_value())
    }

    fn list(&self, group: &str, plural: &str, cluster: &str, namespace: &str) -> Vec<Value> {
        let filter = Filter {
            cluster: Some(cluster.to_string()),
            namespace: (!namespace.is_empty()).then(|| namespace.to_string()),
            ..Filter::default()
        };
        self.0
            .store
            .cache_for_reads(cluster)
            .list(group, plural, &filter)
            .0
            .iter()
            .map(|o| o.to_value())
            .collect()
    }
}

/// Runs the validators registered for `res` on a write of the main resource (subresource
/// writes are not admitted here).
#[allow(clippy::too_many_arguments)]
pub fn validate(
    cp: &ControlPlane,
    who: &Who<'_>,
    res: &registry::ResourceDef,
    loc: &Location<'_>,
    subresource: Option<&str>,
    object: &Value,
    old: Option<&Value>,
    dry_run: bool,
) -> Result<(), ApiError> {
    if subresource.is_some() {
        return Ok(());
    }
    let validators = cp.admission.of(&res.group, &res.plural);
    if validators.is_empty() {
        return Ok(());
    }
    let req = Request {
        cluster: who.cluster,
        operation: if old.is_some() {
            Operation::Update
        } else {
            Operation::Create
        },
        namespace: loc.namespace,
        object,
        old,
        user: who.user,
        dry_run,
    };
    let objects = CacheObjects(cp);
    for v in validators {
        v.validate(&req, &objects)?;
    }
    Ok(())
}

/// Runs the mutators registered for `res` on a create of the main resource, replacing
/// `object` with what they return.
pub fn mutate(
    cp: &ControlPlane,
    who: &Who<'_>,
    res: &registry::ResourceDef,
    loc: &Location<'_>,
    object: &mut Value,
    dry_run: bool,
) -> Result<(), ApiError> {
    let mutators = cp.admission.mutators_of(&res.group, &res.plural);
    let objects = CacheObjects(cp);
    for m in mutators {
        let req = Request {
            cluster: who.cluster,
            operation: Operation::Create,
            namespace: loc.namespace,
            object,
            old: None,
            user: who.user,
            dry_run,
        };
        if let Some(next) = m.mutate(&req, &objects)? {
            *object = next;
        }
    }
    Ok(())
}
