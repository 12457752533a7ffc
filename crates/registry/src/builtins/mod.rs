//! Strategies of the built-in resources, one file per resource with special rules; every other
//! built-in resource uses the default strategy.

mod core;

use std::sync::Arc;

use apimachinery::builtin;

use crate::resource::ResourceDef;
use crate::strategy::{DefaultStrategy, Strategy};

/// The strategy of a built-in resource.
pub fn strategy(r: &builtin::Resource) -> Arc<dyn Strategy> {
    match (r.group, r.plural) {
        ("", "namespaces") => Arc::new(core::NamespaceStrategy),
        ("", "services") => Arc::new(core::ServiceStrategy),
        ("", "pods") => Arc::new(core::PodStrategy),
        ("", "events") => Arc::new(core::EventStrategy),
        ("", "secrets") => Arc::new(core::SecretStrategy),
        ("", "nodes") => Arc::new(core::NodeStrategy),
        ("rbac.authorization.k8s.io", _) => Arc::new(core::RbacStrategy),
        _ => Arc::new(DefaultStrategy),
    }
}

/// Every built-in resource with its strategy.
pub fn resources() -> Vec<ResourceDef> {
    builtin::RESOURCES
        .iter()
        .chain(std::iter::once(&openapi::CUSTOM_RESOURCE_DEFINITIONS))
        .map(|r| {
            ResourceDef::builtin(
                r,
                strategy(r),
                openapi::builtin_schema(r.group, r.version, r.kind),
            )
        })
        .collect()
}
