//! `pods/exec`, `pods/attach` and `pods/portforward`: find the pod's kubelet and hand the
//! client's upgrade to it, as kube-apiserver 1.30–1.33 does.
//!
//! - A WebSocket offering `v5.channel.k8s.io` (kubectl 1.30+) is terminated here and run
//!   against the kubelet over SPDY (`streaming::translate::exec`).
//! - A WebSocket offering `SPDY/3.1+portforward.k8s.io` (kubectl 1.31+ port-forward) is
//!   relayed to a SPDY upgrade of the kubelet (`streaming::translate::portforward_tunnel`).
//! - Anything else (SPDY from kubectl 1.27–1.29 and every fallback, the Python client's
//!   `v4.channel.k8s.io` WebSocket) passes through to the kubelet unchanged.
//!
//! Before that: the pod must exist, its container is validated (exec, attach), it must be
//! bound to a node (`pod P does not have a host assigned`), and the node's kubelet must have
//! an address.

use std::sync::Arc;

use apimachinery::status::ApiError;
use bytes::Bytes;
use http::{Request, Response};
use registry::store::Location;
use serde_json::Value;
use streaming::upgrade::{self, Target};

use super::forward;
use super::options::{self, StreamRequest};
use crate::response::Body;
use crate::server::{ApiServer, Ctx};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Which streaming subresource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Exec,
    Attach,
    PortForward,
}

impl Kind {
    pub fn of(subresource: &str) -> Option<Kind> {
        match subresource {
            "exec" => Some(Kind::Exec),
            "attach" => Some(Kind::Attach),
            "portforward" => Some(Kind::PortForward),
            _ => None,
        }
    }
}

/// The pod, read through the store (a 404 with upstream's wording when absent).
pub async fn pod(
    server: &ApiServer,
    ctx: &Ctx,
    namespace: &str,
    name: &str,
) -> Result<Value, ApiError> {
    let res = server
        .catalog()
        .lookup(&ctx.cluster, "", "v1", "pods")
        .ok_or_else(ApiError::no_route)?;
    let loc = Location {
        cluster: &ctx.cluster,
        namespace,
        name,
    };
    server.store().get(&res, &loc).await
}

/// The node a pod is bound to, or upstream's 400.
pub fn node_of(pod: &Value, name: &str) -> Result<String, ApiError> {
    pod.pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .map(String::from)
        .ok_or_else(|| ApiError::bad_request(format!("pod {name} does not have a host assigned")))
}

/// Answers a streaming request.
pub async fn serve<B>(
    server: &Arc<ApiServer>,
    ctx: &Ctx,
    kind: Kind,
    namespace: &str,
    name: &str,
    req: Request<B>,
    peer: Option<&str>,
) -> Result<Response<Body>, ApiError>
where
    B: hyper::body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    let pod = pod(server, ctx, namespace, name).await?;
    let (path, options) = match kind {
        Kind::Exec | Kind::Attach => {
            let opts = StreamRequest::from_query(&ctx.query);
            let container = options::container(&pod, name, opts.container.as_deref())?;
            let verb = if kind == Kind::Exec { "exec" } else { "attach" };
            let query = opts.kubelet_query(kind == Kind::Exec);
            (
                format!("/{verb}/{namespace}/{name}/{container}?{query}"),
                Some(opts),
            )
        }
        Kind::PortForward => {
            let ports = options::forward_ports(&ctx.query)?;
            let mut path = format!("/portForward/{namespace}/{name}");
            if !ports.is_empty() {
                let list: Vec<String> = ports.iter().map(u16::to_string).collect();
                let q = form_urlencoded::Serializer::new(String::new())
                    .append_pair("port", &list.join(","))
                    .finish();
                path = format!("{path}?{q}");
            }
            (path, None)
        }
    };
    let node = node_of(&pod, name)?;
    let location = server.kubelet.location(server, &ctx.cluster, &node)?;
    let uri = location.uri(&path)?;
    let connector = server.kubelet.connector(server, &ctx.cluster)?;
    let offered = upgrade::offered_websocket_protocols(req.headers());
    let websocket = upgrade::is_websocket_request(req.headers());
    if websocket
        && let Some(opts) = &options
        && offered.iter().any(|p| p == streaming::remotecommand::V5)
    {
        return Ok(to_body(streaming::translate::exec(
            req,
            opts.streams(),
            connector,
            Target::new(uri),
        )));
    }
    if websocket
        && kind == Kind::PortForward
        && offered
            .iter()
            .any(|p| p.starts_with(streaming::portforward::TUNNEL_PREFIX))
    {
        return Ok(to_body(
            streaming::translate::portforward_tunnel(req, connector, Target::new(uri)).await,
        ));
    }
    if !upgrade::is_upgrade_request(req.headers()) {
        // Upstream's upgrade-aware handler requires the upgrade.
        return Err(ApiError::bad_request("Upgrade request required"));
    }
    forward::forward(req, &uri, connector.as_ref(), peer).await
}

fn to_body(r: Response<Bytes>) -> Response<Body> {
    r.map(crate::response::full)
}
