//! A strategy is the small per-resource piece of behaviour plugged into the generic store
//! (upstream's `rest.RESTCreateStrategy` and friends): defaulting, server-owned fields on
//! create and update, validation, selectable fields, warnings.
//!
//! The generic store does everything common to all resources: metadata, generation, status
//! handling, preconditions, finalizers. A strategy only says what is special.

use apimachinery::field::ErrorList;
use serde_json::Value;

pub use apimachinery::validation::NameRule;

/// Per-resource behaviour.
pub trait Strategy: Send + Sync + 'static {
    /// Fills defaults in an incoming object (create, update and patch results), before
    /// validation, like upstream's defaulting functions.
    fn default(&self, _obj: &mut Value) {}

    /// Sets server-owned fields on create (initial status, allocated values).
    fn prepare_for_create(&self, _obj: &mut Value) {}

    /// Whether a create through the main resource keeps the status it was sent (Nodes: the
    /// kubelet registers a node with its status).
    fn keeps_status_on_create(&self) -> bool {
        false
    }

    /// Carries server-owned fields over on update.
    fn prepare_for_update(&self, _new: &mut Value, _old: &Value) {}

    /// Whether an update through `/status` takes the request's `metadata.annotations`
    /// (upstream's Deployment status strategy resets only spec and labels: the controller
    /// records the revision annotation with the status, without a new generation).
    fn status_updates_annotations(&self) -> bool {
        false
    }

    /// Validates a new object; every error with its path.
    fn validate(&self, _obj: &Value) -> ErrorList {
        ErrorList::new()
    }

    /// Validates an update (immutable fields); by default the new object's own validation.
    fn validate_update(&self, new: &Value, _old: &Value) -> ErrorList {
        self.validate(new)
    }

    /// The name rule for `metadata.name`.
    fn name_rule(&self) -> NameRule {
        NameRule::DnsSubdomain
    }

    /// Field selectors this resource supports beyond `metadata.name` and `metadata.namespace`.
    fn field_names(&self) -> &[&'static str] {
        &[]
    }

    /// The value of a selectable field (`spec.nodeName`, `status.phase`).
    fn field(&self, _obj: &Value, _name: &str) -> Option<String> {
        None
    }

    /// Warnings to return with a successful write.
    fn warnings(&self, _obj: &Value) -> Vec<String> {
        Vec::new()
    }

    /// Whether something beyond `metadata.finalizers` still holds the object's deletion
    /// (a namespace's `spec.finalizers`).
    fn deletion_pending(&self, _obj: &Value) -> bool {
        false
    }

    /// Marks an object whose deletion has begun (a namespace becomes Terminating).
    fn on_deletion(&self, _obj: &mut Value) {}

    /// The grace period of a graceful deletion (a pod bound to a node: its kubelet stops it and
    /// deletes it with grace 0), or `None` to delete at once. `requested` is the request's
    /// `gracePeriodSeconds`.
    fn graceful_delete(&self, _obj: &Value, _requested: Option<i64>) -> Option<i64> {
        None
    }

    /// Prepares a stored object for a client (custom resources: conversion to the served
    /// version and read-time defaults). Called on every object the server returns.
    fn read(&self, _obj: &mut Value) {}

    /// Whether `read` changes objects (so responses must copy them first).
    fn has_read(&self) -> bool {
        false
    }

    /// Whether an update without `metadata.resourceVersion` is allowed (most resources).
    fn allow_unconditional_update(&self) -> bool {
        true
    }
}

/// The strategy of resources with no special rules.
#[derive(Debug, Default, Clone, Copy)]
pub struct DefaultStrategy;

impl Strategy for DefaultStrategy {}

/// Reads a selectable field generically: `metadata.name`, `metadata.namespace`, then the
/// strategy's own fields.
pub fn field_value(strategy: &dyn Strategy, obj: &Value, name: &str) -> Option<String> {
    match name {
        "metadata.name" => Some(apimachinery::meta::name(obj).to_string()),
        "metadata.namespace" => Some(apimachinery::meta::namespace(obj).to_string()),
        _ => strategy.field(obj, name),
    }
}
