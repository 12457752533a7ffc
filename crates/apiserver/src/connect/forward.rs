//! An upgrade-aware reverse proxy (upstream's `UpgradeAwareHandler`): a request is re-sent to
//! a backend (a kubelet, a pod, a service endpoint) with the client's method, headers, query
//! and body, and the answer comes back as the backend wrote it. For an upgrade request a
//! `101` is relayed with the backend's headers and the two connections are then spliced, so
//! SPDY and WebSocket protocols pass through untouched.
//!
//! The client's credentials stay here: `Authorization` and the impersonation headers are
//! removed (kube-apiserver drops them once it has authenticated), and the backend sees the
//! API server's own identity (its client certificate).

use std::convert::Infallible;

use apimachinery::status::ApiError;
use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode, Uri, header};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use streaming::upgrade::Connect;

use crate::response::Body;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Headers that describe the hop, not the request.
fn hop_by_hop(name: &header::HeaderName, upgrade: bool) -> bool {
    let n = name.as_str();
    n == "host"
        || n == "authorization"
        || n.starts_with("impersonate-")
        || n == "proxy-authorization"
        || (!upgrade
            && matches!(
                n,
                "connection" | "upgrade" | "keep-alive" | "te" | "trailer"
            ))
}

/// The client request's headers as sent on, with `X-Forwarded-For` added.
fn forwarded_headers(from: &HeaderMap, upgrade: bool, peer: Option<&str>) -> HeaderMap {
    let mut out = HeaderMap::new();
    for (name, value) in from {
        if !hop_by_hop(name, upgrade) {
            out.append(name.clone(), value.clone());
        }
    }
    if let Some(ip) = peer {
        let v = match out.get("x-forwarded-for").and_then(|v| v.to_str().ok()) {
            Some(prev) => format!("{prev}, {ip}"),
            None => ip.to_string(),
        };
        if let Ok(v) = v.parse() {
            out.insert("x-forwarded-for", v);
        }
    }
    out
}

/// A streamed response body from a backend, ending (rather than failing) if the backend
/// breaks off.
pub fn relay(body: Incoming) -> Body {
    let frames = futures::stream::unfold(Some(body), |state| async move {
        let mut body = state?;
        loop {
            match body.frame().await {
                Some(Ok(f)) => {
                    if f.is_data() || f.is_trailers() {
                        return Some((Ok::<_, Infallible>(f), Some(body)));
                    }
                }
                Some(Err(e)) => {
                    tracing::debug!(error = %e, "proxy: backend body ended early");
                    return None;
                }
                None => return None,
            }
        }
    });
    http_body_util::StreamBody::new(frames).boxed_unsync()
}

/// Sends `req` to `target` over `connector` and returns what to answer the client. `target`
/// carries the path and query to request.
pub async fn forward<B>(
    mut req: Request<B>,
    target: &Uri,
    connector: &dyn Connect,
    peer: Option<&str>,
) -> Result<Response<Body>, ApiError>
where
    B: hyper::body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    let upgrade = streaming::upgrade::is_upgrade_request(req.headers());
    let io = connector
        .connect(target)
        .await
        .map_err(|e| crate::kubelet::dial_error(target, &e))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| ApiError::unknown(500, format!("error dialing backend: {e}")))?;
    tokio::spawn(async move {
        let _ = conn.with_upgrades().await;
    });
    let headers = forwarded_headers(req.headers(), upgrade, peer);
    let client_on = upgrade.then(|| hyper::upgrade::on(&mut req));
    let (parts, body) = req.into_parts();
    let mut backend = Request::builder()
        .method(parts.method)
        .uri(target.path_and_query().map(|p| p.as_str()).unwrap_or("/"))
        .body(body)
        .map_err(|e| ApiError::internal(e.to_string()))?;
    *backend.headers_mut() = headers;
    if let Some(a) = target.authority()
        && let Ok(v) = a.as_str().parse()
    {
        backend.headers_mut().insert(header::HOST, v);
    }
    let mut answer = sender
        .send_request(backend)
        .await
        .map_err(|e| ApiError::unknown(500, format!("error trying to reach service: {e}")))?;
    if let (Some(client_on), StatusCode::SWITCHING_PROTOCOLS) = (client_on, answer.status()) {
        let mut relayed = Response::new(crate::response::empty());
        *relayed.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
        *relayed.headers_mut() = answer.headers().clone();
        let backend_on = hyper::upgrade::on(&mut answer);
        tokio::spawn(async move {
            match tokio::try_join!(client_on, backend_on) {
                Ok((client, backend)) => {
                    let mut client = TokioIo::new(client);
                    let mut backend = TokioIo::new(backend);
                    if let Err(e) = tokio::io::copy_bidirectional(&mut client, &mut backend).await {
                        tracing::debug!(error = %e, "proxy: upgraded connection ended");
                    }
                }
                Err(e) => tracing::debug!(error = %e, "proxy: upgrade failed"),
            }
        });
        return Ok(relayed);
    }
    let (parts, body) = answer.into_parts();
    let mut out = Response::from_parts(parts, relay(body));
    // Hyper frames the relayed body itself.
    out.headers_mut().remove(header::TRANSFER_ENCODING);
    out.headers_mut().remove(header::CONNECTION);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_stay_and_hop_headers_go_unless_upgrading() {
        let mut h = HeaderMap::new();
        h.insert("authorization", "Bearer secret".parse().unwrap());
        h.insert("impersonate-user", "bob".parse().unwrap());
        h.insert("connection", "Upgrade".parse().unwrap());
        h.insert("upgrade", "SPDY/3.1".parse().unwrap());
        h.insert(
            "x-stream-protocol-version",
            "v4.channel.k8s.io".parse().unwrap(),
        );
        h.insert("host", "api:6443".parse().unwrap());
        let up = forwarded_headers(&h, true, Some("10.0.0.9"));
        assert!(up.get("authorization").is_none() && up.get("impersonate-user").is_none());
        assert!(up.get("host").is_none());
        assert_eq!(up["upgrade"], "SPDY/3.1");
        assert_eq!(up["x-stream-protocol-version"], "v4.channel.k8s.io");
        assert_eq!(up["x-forwarded-for"], "10.0.0.9");
        let plain = forwarded_headers(&h, false, None);
        assert!(plain.get("connection").is_none() && plain.get("upgrade").is_none());
    }
}
