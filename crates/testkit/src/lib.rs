//! Test support shared by the tests of every crate (a dev-dependency only).
//!
//! - [`Server`]: a real API server over a temporary embedded store, its in-memory clients
//!   (as the system or as any user), logical clusters created as `LogicalCluster` objects and
//!   awaited until Ready, and raw requests answered with their code, headers and JSON body.
//! - [`wait`]: waiting on watches ([`wait::wait_list`], [`wait::wait_for`]) and polling
//!   against a deadline ([`wait::eventually`]); nothing sleeps as synchronisation.
//! - [`status`]: reading `Status` errors (`api_error`, the fields of its causes).
//! - [`oidc`]: an OIDC issuer on loopback (HTTPS, discovery, a key set the test rotates).
//!
//! Crate-specific harnesses (the controllers' stand-in kubelet, the scheduler's node and pod
//! builders, the platform's HTTPS server) build on these.

pub mod oidc;
pub mod server;
pub mod status;
pub mod wait;

pub use server::{Reply, Server};
pub use wait::{PATIENCE, eventually, wait_for, wait_list};
