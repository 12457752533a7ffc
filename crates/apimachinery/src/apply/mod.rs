//! Server-side apply.
pub mod value;
