//! CEL validation rules (`x-kubernetes-validations`) of custom resources.
//!
//! Rules are compiled once per CRD version with the `cel` crate (a CEL interpreter: parsing,
//! macros and evaluation, but no type checker) in an environment with the standard library,
//! cel-go's strings and lists extensions and the Kubernetes list functions this crate adds
//! ([`library`]). `self` is the value of the schema node the rule is on; `oldSelf` its
//! correlated old value on update (an `optional` when `optionalOldSelf` is set).
//!
//! - [`rule`]: one compiled rule and its checks at CRD validation time;
//! - [`value`]: how a JSON value becomes a CEL value (field-name escaping, numbers, the
//!   restricted `metadata` of a resource root);
//! - [`eval`]: evaluation over an object, with upstream's messages, `fieldPath`, `reason`,
//!   transition rules and ratcheting.

pub mod eval;
pub mod library;
pub mod rule;
pub mod value;

pub use eval::validate;
pub use rule::Rule;
