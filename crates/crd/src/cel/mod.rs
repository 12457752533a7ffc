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
//!   transition rules and ratcheting;
//! - [`limits`]: size and nesting bounds checked before an expression is parsed;
//! - [`cost`]: the cost model, estimated over the schema when a CRD is written and over the
//!   values before each evaluation.

pub mod cost;
pub mod eval;
pub mod library;
pub mod limits;
pub mod rule;
pub mod value;

/// Compiles an expression in the shared environment after checking it against
/// [`limits`]: the only way this project parses CEL.
pub fn compile(source: &str) -> Result<cel::Program, String> {
    limits::check(source)?;
    library::ENV.compile(source).map_err(|e| e.to_string())
}

pub use eval::validate;
pub use rule::Rule;
