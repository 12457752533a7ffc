//! SPDY/3.1, as Kubernetes uses it between kubectl, the API server, the kubelet and the
//! container runtime (Go's `moby/spdystream` on the other end).
//!
//! `frame` is the wire codec, `headers` the name/value blocks, `zlib` their compression,
//! `conn` the multiplexed connection with flow control, `stream` the streams it carries.

mod conn;
pub mod frame;
mod headers;
mod state;
mod stream;
mod zlib;

#[cfg(test)]
mod codec_tests;

pub use conn::{Config, Connection, Error, Incoming, Role, Stats};
pub use frame::{RstStatus, StreamId};
pub use headers::{HeaderError, Headers};
pub use stream::{RecvStream, SendStream, Stream};
