//! The API server's port-forward tunnel relay (`TunnelingHandler`, kube-apiserver 1.31+): a
//! client's `SPDY/3.1+portforward.k8s.io` WebSocket is relayed to a SPDY upgrade of the
//! backend. The SPDY frames are not parsed: message payloads go to the backend as bytes and
//! the backend's bytes come back as binary messages.
//!
//! The backend is asked first, with the SPDY protocols found in the client's sub-protocols;
//! its `101` decides the WebSocket sub-protocol (`SPDY/3.1+` and its choice). A backend that
//! refuses has its answer passed to the client as it is, which kubectl then falls back on.

use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response, StatusCode};

use crate::portforward::TUNNEL_PREFIX;
use crate::portforward::tunnel::spdy_protocols;
use crate::remotecommand::status::Status;
use crate::upgrade::{self, Connect, DialError, Target, UpgradeError};
use crate::ws::WsByteStream;

/// Answers a tunnel request by dialing `backend`. The relay runs on a spawned task.
pub async fn portforward<B>(
    mut req: Request<B>,
    connector: Arc<dyn Connect>,
    backend: Target,
) -> Response<Bytes> {
    let protocols = spdy_protocols(&upgrade::offered_websocket_protocols(req.headers()));
    if protocols.is_empty() {
        return upgrade::server::go_http_error(
            Response::builder().status(StatusCode::BAD_REQUEST),
            "unable to upgrade: no tunneling spdy protocols provided",
        );
    }
    // Check the WebSocket handshake itself before bothering the backend.
    let offered: Vec<String> = protocols
        .iter()
        .map(|p| format!("{TUNNEL_PREFIX}{p}"))
        .collect();
    let offered_refs: Vec<&str> = offered.iter().map(String::as_str).collect();
    if let Err(e) = upgrade::server::accept_websocket(req.headers(), &offered_refs) {
        return e.response();
    }
    let io = match connector.connect(&backend.uri).await {
        Ok(io) => io,
        Err(e) => return dial_error(&format!("error dialing backend: {e}")),
    };
    let protocol_refs: Vec<&str> = protocols.iter().map(String::as_str).collect();
    let (chosen, upstream) = match upgrade::client::spdy_over(io, &backend, &protocol_refs).await {
        Ok(ok) => ok,
        Err(DialError::Status {
            status,
            headers,
            body,
        }) => {
            let mut response = Response::new(body);
            *response.status_mut() = status;
            *response.headers_mut() = headers;
            return response;
        }
        Err(DialError::MissingUpgradeHeaders) => {
            return upgrade::server::go_http_error(
                Response::builder().status(StatusCode::INTERNAL_SERVER_ERROR),
                "unable to upgrade: missing upgrade headers in response",
            );
        }
        Err(e) => return dial_error(&format!("error dialing backend: {e}")),
    };
    let websocket_protocol = format!("{TUNNEL_PREFIX}{chosen}");
    let response = match upgrade::server::accept_websocket(req.headers(), &[&websocket_protocol]) {
        Ok((_, response)) => response,
        // The backend chose a protocol the client did not offer: no sub-protocol at all,
        // which the client takes as an upgrade failure.
        Err(UpgradeError::NoCommonWebSocketProtocol { .. }) => {
            match upgrade::server::accept_websocket(req.headers(), &[""]) {
                Ok((_, response)) => response,
                Err(e) => return e.response(),
            }
        }
        Err(e) => return e.response(),
    };
    let on = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        let ws = match upgrade::server::websocket(on).await {
            Ok(ws) => ws,
            Err(e) => {
                tracing::debug!(error = %e, "tunnel: websocket upgrade failed");
                return;
            }
        };
        let mut client = WsByteStream::new(ws);
        let mut upstream = upstream;
        if let Err(e) = tokio::io::copy_bidirectional(&mut client, &mut upstream).await {
            tracing::debug!(error = %e, "tunnel: relay ended");
        }
    });
    response
}

/// A 500 `Status`, as the API server's responder writes a dial failure.
fn dial_error(message: &str) -> Response<Bytes> {
    let status = Status {
        kind: Some("Status".into()),
        api_version: Some("v1".into()),
        status: "Failure".into(),
        message: message.to_string(),
        code: 500,
        ..Status::default()
    };
    Response::builder()
        .status(StatusCode::INTERNAL_SERVER_ERROR)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Bytes::from(serde_json::to_vec(&status).unwrap_or_default()))
        .unwrap_or_default()
}
