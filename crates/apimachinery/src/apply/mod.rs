//! Server-side apply (`application/apply-patch+yaml`) and managed-fields tracking.
//!
//! A port of the semantics of sigs.k8s.io/structured-merge-diff (field paths and sets,
//! schema-driven merge, compare and removal, ownership and conflicts) and of the upstream API
//! server's field manager around it (managed-fields encoding, server-owned metadata, reset
//! fields, the client-side-apply upgrade path). Objects are canonical JSON values and shapes
//! come from [`crate::schema::Schema`].

mod conflict;
mod fieldset;
mod managed;
mod merge;
mod path;
mod shape;
pub(crate) mod typed;
mod updater;
pub(crate) mod value;

pub use conflict::{ApplyConflict, ApplyError, Conflict};
pub use fieldset::{FieldSet, FieldsV1Error};
pub use managed::{
    MAX_UPDATE_MANAGERS, ManagedFieldsEntry, Operation, entries_for_update,
    set_object_managed_fields,
};
pub use path::{FieldPath, OrdValue, PathElement, PathError};
pub use typed::{Comparison, to_field_set};
pub use updater::{
    BEFORE_FIRST_APPLY, LAST_APPLIED_ANNOTATION, apply, reset_fields, update_managed_fields,
};
