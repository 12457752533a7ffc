//! Kubernetes protobuf <-> JSON for built-in types.
pub(crate) mod message;
#[allow(dead_code)]
pub(crate) mod table;
