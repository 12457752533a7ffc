//! Pods on a virtual node: the lifecycle state machine and the statuses it reports.

pub mod lifecycle;
pub mod runtime;
pub mod status;
