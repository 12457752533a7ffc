//! Which objects a list or watch covers: a cluster, a namespace and a predicate (label and
//! field selectors) evaluated on the cached form, without decoding objects.

use std::sync::Arc;

use apimachinery::fields::FieldSelector;
use apimachinery::labels::Selector;

use super::object::CachedObject;
use crate::strategy::Strategy;

/// A filter over objects (label and field selectors), built by the API server.
pub type Predicate = Arc<dyn Fn(&CachedObject) -> bool + Send + Sync>;

/// The predicate of a label and a field selector over a resource whose selectable fields
/// `strategy` defines (upstream `SelectionPredicate`): labels are read from the cached label
/// set, fields from the values extracted when the object was cached.
pub fn selector_predicate(
    labels: Option<Selector>,
    fields: Option<FieldSelector>,
    strategy: Arc<dyn Strategy>,
) -> Predicate {
    Arc::new(move |obj: &CachedObject| {
        labels.as_ref().is_none_or(|l| l.matches(obj.labels()))
            && fields
                .as_ref()
                .is_none_or(|f| f.matches(&|name| obj.field(&*strategy, name)))
    })
}

/// Which objects of a resource a list or watch covers.
#[derive(Clone, Default)]
pub struct Filter {
    /// `None`: every cluster (system controllers only).
    pub cluster: Option<String>,
    /// `None` or empty: every namespace.
    pub namespace: Option<String>,
    pub predicate: Option<Predicate>,
}

impl Filter {
    /// The cache-key prefix the filter's objects share.
    pub(super) fn prefix(&self) -> String {
        match (
            &self.cluster,
            self.namespace.as_deref().filter(|n| !n.is_empty()),
        ) {
            (Some(c), Some(ns)) => format!("{c}/{ns}/"),
            (Some(c), None) => format!("{c}/"),
            (None, _) => String::new(),
        }
    }

    /// Whether an object of `cluster` in `namespace` is within the filter's scope.
    pub(super) fn covers(&self, cluster: &str, namespace: &str) -> bool {
        if let Some(c) = &self.cluster
            && c != cluster
        {
            return false;
        }
        match self.namespace.as_deref() {
            Some(ns) if !ns.is_empty() => ns == namespace,
            _ => true,
        }
    }

    /// Whether the predicate accepts `obj` (scope aside).
    pub fn matches(&self, obj: &CachedObject) -> bool {
        self.predicate.as_ref().is_none_or(|p| p(obj))
    }
}
