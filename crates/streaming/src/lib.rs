//! Kubernetes' streaming protocols, with no knowledge of an API server or a kubelet: what
//! exec, attach, port-forward and their proxies put on the wire.
//!
//! - `spdy`: SPDY/3.1 connections and streams (flow control, header compression), talking to
//!   Go's `moby/spdystream` as kubectl, client-go, the kubelet and containerd do.
//! - `upgrade`: HTTP/1.1 upgrades on hyper 1, server and client side, for SPDY and WebSocket.
//! - `ws`: WebSocket helpers (channel framing, a byte-stream view of binary messages).
//! - `remotecommand`: exec/attach protocols v1–v5 over SPDY and WebSocket, both ends.
//! - `portforward`: port-forward over SPDY, legacy WebSocket and the WebSocket tunnel.
//! - `translate`: what kube-apiserver does between a WebSocket client and a SPDY backend.
//! - `proxy`: the upgrade-aware reverse proxy and the kubelet client's TLS configuration.

pub mod io;
pub mod portforward;
pub mod proxy;
pub mod remotecommand;
pub mod spdy;
pub mod translate;
pub mod upgrade;
pub mod ws;
