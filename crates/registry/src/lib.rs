//! Resources over storage: what each resource is ([`ResourceDef`]), how it behaves
//! ([`Strategy`]), the generic [`store::Store`] that serves them all and the [`cache::WatchCache`]
//! that serves lists and watches from memory.
//!
//! **Architecture Invariant:** the registry speaks in objects (`serde_json::Value`) and
//! `ApiError`s; it knows nothing of HTTP. Only the apiserver crate does.

pub mod builtins;
pub mod cache;
pub mod catalog;
pub mod hooks;
pub mod key;
pub mod resource;
pub mod shards;
pub mod store;
pub mod strategy;
pub mod validation;

pub use resource::{Converter, Printer, ResourceDef, ScalePaths, SubresourceDef};
pub use strategy::{DefaultStrategy, NameRule, Strategy};
