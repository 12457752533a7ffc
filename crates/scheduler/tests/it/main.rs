//! Scheduler integration tests against the in-process API server (one test binary).

mod clusters;
mod common;
mod filters;
mod leader;
mod lifecycle;
mod spread;
