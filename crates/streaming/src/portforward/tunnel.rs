//! The WebSocket tunnel of kubectl 1.31+: `GET` with `Sec-WebSocket-Protocol:
//! SPDY/3.1+portforward.k8s.io`, after which binary messages carry the raw bytes of a SPDY
//! connection (frames cut wherever the writer's writes fall) running the SPDY port-forward
//! protocol. The client pings every 10 s at the SPDY layer (`tunneling_dialer.go`).

use std::time::Duration;

use tokio_tungstenite::WebSocketStream;

use super::{PROTOCOL_V1, TUNNEL_PREFIX};
use crate::spdy;
use crate::upgrade::{self, Connect, DialError, Io, Target};
use crate::ws::WsByteStream;

/// The SPDY ping period of the tunnel's client.
pub const PING_PERIOD: Duration = Duration::from_secs(10);

/// The sub-protocols a tunnel client offers for SPDY `protocols`.
pub fn tunnel_protocols(protocols: &[&str]) -> Vec<String> {
    protocols
        .iter()
        .map(|p| format!("{TUNNEL_PREFIX}{p}"))
        .collect()
}

/// The SPDY protocols inside a tunnel request's sub-protocols (prefix `SPDY/3.1+`, suffix
/// `.k8s.io`), as the API server's tunnelling handler extracts them.
pub fn spdy_protocols(websocket_protocols: &[String]) -> Vec<String> {
    websocket_protocols
        .iter()
        .filter(|p| p.ends_with(".k8s.io"))
        .filter_map(|p| p.strip_prefix(TUNNEL_PREFIX))
        .map(str::to_string)
        .collect()
}

/// Dials a tunnel and starts the SPDY client connection inside it.
pub async fn dial(
    connector: &dyn Connect,
    target: &Target,
) -> Result<(String, spdy::Connection, spdy::Incoming), DialError> {
    let offered = tunnel_protocols(&[PROTOCOL_V1]);
    let offered: Vec<&str> = offered.iter().map(String::as_str).collect();
    let (chosen, ws) = upgrade::client::websocket(connector, target, &offered).await?;
    let Some(protocol) = chosen.strip_prefix(TUNNEL_PREFIX).map(str::to_string) else {
        return Err(DialError::ProtocolNotOffered {
            chosen,
            offered: offered.iter().map(|s| s.to_string()).collect(),
        });
    };
    let config = spdy::Config {
        ping_interval: Some(PING_PERIOD),
        ..spdy::Config::default()
    };
    let (conn, incoming) = spdy::Connection::new(WsByteStream::new(ws), spdy::Role::Client, config);
    Ok((protocol, conn, incoming))
}

/// The serving end inside an accepted tunnel WebSocket (a kubelet that takes tunnels itself).
pub fn serve<S: Io>(ws: WebSocketStream<S>) -> (spdy::Connection, spdy::Incoming) {
    spdy::Connection::new(
        WsByteStream::new(ws),
        spdy::Role::Server,
        spdy::Config::default(),
    )
}
