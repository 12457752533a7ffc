//! What kube-apiserver does between a WebSocket client and a SPDY backend (a kubelet): the
//! exec/attach translator (`v5.channel.k8s.io` terminated here, SPDY v4–v1 to the backend)
//! and the port-forward tunnel relay (`SPDY/3.1+portforward.k8s.io`). Both take the client's
//! request and a way to reach the backend, and return the response to send; the session runs
//! on its own task after the upgrade.

pub mod exec;
pub mod tunnel;

pub use exec::exec;
pub use tunnel::portforward as portforward_tunnel;
