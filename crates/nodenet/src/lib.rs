//! A node's network.
//!
//! - [`proxy`]: Services as kube-proxy's nftables mode programs them (table `ip kube-proxy`).

pub mod error;
pub mod exec;
pub mod nft;
pub mod proxy;
pub mod watch;

pub use error::{Error, Result};
