//! The real-node (CRI) agent: what a container sees (`env`, `volumes`, `dns`, `security`).
//! The pod workers and the CRI client that call these live beside them.

pub mod api;
pub mod dns;
pub mod env;
pub mod security;
pub mod server;
pub mod stats;
pub mod volumes;
