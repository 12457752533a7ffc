//! `pods/proxy`, `nodes/proxy` and `services/proxy`: where each sends a request, as
//! upstream's `ResourceLocation` functions decide, then the upgrade-aware proxy
//! ([`super::forward`]).
//!
//! The name may carry a scheme and a port: `name`, `name:port`, `https:name:port`.
//! - A pod is reached at its first pod IP (which must be a global unicast address:
//!   `address not allowed`), on the given port or the first declared container port.
//! - A node's kubelet is reached at its preferred address with the API server's kubelet
//!   credentials when no port, or the kubelet's own port, is asked for; another port is
//!   proxied like a pod.
//! - A service goes to one of its ready endpoint addresses that is a pod with that IP, on
//!   the endpoint port of the service port asked for (by name or number), picked at random.
//!
//! The proxied path is what follows `proxy/` in the URL (or the `path` parameter), the query
//! the client's. A bare `.../proxy` without a path is redirected (301) to `.../proxy/`.
//! Responses are passed on as they come (no rewriting of links in HTML bodies, which
//! upstream's proxy transport does).

use std::net::IpAddr;
use std::sync::Arc;

use apimachinery::status::ApiError;
use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode, Uri, header};
use rand::Rng;
use serde_json::Value;
use streaming::upgrade::{Connect, TcpConnect};

use super::exec::pod;
use super::forward;
use crate::response::Body;
use crate::route::ResourcePath;
use crate::server::{ApiServer, Ctx};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// `scheme:name:port` taken apart (`SplitSchemeNamePort`); `None` when it is not valid.
pub fn split_scheme_name_port(id: &str) -> Option<(&str, &str, &str)> {
    let parts: Vec<&str> = id.split(':').collect();
    let (scheme, name, port) = match parts.as_slice() {
        [n] => ("", *n, ""),
        [n, p] => ("", *n, *p),
        [s, n, p] => (*s, *n, *p),
        _ => return None,
    };
    (!name.is_empty() && matches!(scheme, "" | "http" | "https")).then_some((scheme, name, port))
}

/// The path to request at the backend: the URL's subpath, else the `path` parameter.
fn proxied_path(p: &ResourcePath, ctx: &Ctx) -> String {
    let sub = p.subpath.clone().unwrap_or_default();
    let path = if sub.is_empty() {
        ctx.query.get("path").unwrap_or("").to_string()
    } else {
        sub
    };
    if path.is_empty() || path.starts_with('/') {
        path
    } else {
        format!("/{path}")
    }
}

/// The client's query, minus the proxy's own `path` parameter.
fn client_query(uri: &Uri) -> String {
    uri.query().map(|q| format!("?{q}")).unwrap_or_default()
}

fn redirect(uri: &Uri) -> Response<Body> {
    let mut r = Response::new(crate::response::empty());
    *r.status_mut() = StatusCode::MOVED_PERMANENTLY;
    let location = format!("{}/{}", uri.path(), client_query(uri));
    if let Ok(v) = HeaderValue::from_str(&location) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    r
}

fn backend_uri(
    scheme: &str,
    host: &str,
    port: Option<&str>,
    path_and_query: &str,
) -> Result<Uri, ApiError> {
    let scheme = if scheme.is_empty() { "http" } else { scheme };
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_string()
    };
    let authority = match port {
        Some(p) if !p.is_empty() => format!("{host}:{p}"),
        _ => host,
    };
    let pq = if path_and_query.is_empty() {
        "/"
    } else {
        path_and_query
    };
    format!("{scheme}://{authority}{pq}")
        .parse()
        .map_err(|e| ApiError::bad_request(format!("invalid proxy location: {e}")))
}

/// How pods and service endpoints are reached: plain TCP, or TLS without verification for
/// `https` (upstream's proxy transport skips verification).
fn pod_connector() -> Result<Arc<dyn Connect>, ApiError> {
    Ok(Arc::new(TcpConnect {
        tls: Some(crate::kubelet::insecure_tls()?),
    }))
}

/// Answers a proxy request for a pod, node or service.
pub async fn serve<B>(
    server: &Arc<ApiServer>,
    ctx: &Ctx,
    p: &ResourcePath,
    req: Request<B>,
    peer: Option<&str>,
) -> Result<Response<Body>, ApiError>
where
    B: hyper::body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    let id = p.name.clone().unwrap_or_default();
    let path = proxied_path(p, ctx);
    let what = match p.resource.as_str() {
        "pods" => "pod",
        "nodes" => "node",
        _ => "service",
    };
    let (scheme, name, port) = split_scheme_name_port(&id)
        .ok_or_else(|| ApiError::bad_request(format!("invalid {what} request {id:?}")))?;
    let (target, connector): (Uri, Arc<dyn Connect>) = match p.resource.as_str() {
        "pods" => {
            let pod = pod(server, ctx, &p.namespace, name).await?;
            let port = if port.is_empty() {
                first_container_port(&pod)
            } else {
                Some(port.to_string())
            };
            let ip = pod
                .pointer("/status/podIPs/0/ip")
                .and_then(Value::as_str)
                .unwrap_or("");
            if !global_unicast(ip) {
                return Err(ApiError::bad_request("address not allowed"));
            }
            let pq = format!("{path}{}", client_query(req.uri()));
            (
                backend_uri(scheme, ip, port.as_deref(), &pq)?,
                pod_connector()?,
            )
        }
        "nodes" => {
            let location = server.kubelet.location(server, &ctx.cluster, name)?;
            let pq = format!("{path}{}", client_query(req.uri()));
            if port.is_empty() || port == location.port.to_string() {
                (
                    location.uri(if pq.is_empty() { "/" } else { &pq })?,
                    server.kubelet.connector(server, &ctx.cluster)?,
                )
            } else {
                (
                    backend_uri(scheme, &location.host, Some(port), &pq)?,
                    pod_connector()?,
                )
            }
        }
        _ => {
            let (ip, port) = service_endpoint(server, ctx, &p.namespace, name, port, &id)?;
            let pq = format!("{path}{}", client_query(req.uri()));
            (
                backend_uri(scheme, &ip, Some(&port.to_string()), &pq)?,
                pod_connector()?,
            )
        }
    };
    if path.is_empty() && !streaming::upgrade::is_upgrade_request(req.headers()) {
        return Ok(redirect(req.uri()));
    }
    forward::forward(req, &target, connector.as_ref(), peer).await
}

fn first_container_port(pod: &Value) -> Option<String> {
    pod.pointer("/spec/containers")
        .and_then(Value::as_array)?
        .iter()
        .find_map(|c| c.pointer("/ports/0/containerPort").and_then(Value::as_i64))
        .map(|p| p.to_string())
}

/// Go's `IP.IsGlobalUnicast`: not unspecified, loopback, multicast, link-local or the IPv4
/// broadcast address.
pub fn global_unicast(ip: &str) -> bool {
    match ip.parse::<IpAddr>() {
        Ok(IpAddr::V4(v4)) => {
            !(v4.is_unspecified()
                || v4.is_loopback()
                || v4.is_multicast()
                || v4.is_link_local()
                || v4.is_broadcast())
        }
        Ok(IpAddr::V6(v6)) => {
            !(v6.is_unspecified()
                || v6.is_loopback()
                || v6.is_multicast()
                || (v6.segments()[0] & 0xffc0) == 0xfe80)
        }
        Err(_) => false,
    }
}

/// A ready endpoint of a service port that is a pod with that IP.
fn service_endpoint(
    server: &ApiServer,
    ctx: &Ctx,
    namespace: &str,
    name: &str,
    port: &str,
    id: &str,
) -> Result<(String, i64), ApiError> {
    let cache = server.store().cache(&ctx.cluster)?;
    let mut port_name = port.to_string();
    if let Ok(number) = port.parse::<i64>() {
        let svc = cache
            .get("", "services", &ctx.cluster, namespace, name)
            .ok_or_else(|| ApiError::not_found("services", "", name))?;
        let svc = svc.value();
        let declared = svc
            .pointer("/spec/ports")
            .and_then(Value::as_array)
            .and_then(|ports| {
                ports
                    .iter()
                    .find(|p| p.get("port").and_then(Value::as_i64) == Some(number))
            })
            .ok_or_else(|| {
                ApiError::service_unavailable(format!(
                    "no service port {number} found for service {name:?}"
                ))
            })?;
        port_name = declared
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
    }
    let eps = cache
        .get("", "endpoints", &ctx.cluster, namespace, name)
        .ok_or_else(|| ApiError::not_found("endpoints", "", name))?;
    let eps = eps.value();
    let subsets = eps
        .get("subsets")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let unavailable =
        || ApiError::service_unavailable(format!("no endpoints available for service {id:?}"));
    if subsets.is_empty() {
        return Err(ApiError::service_unavailable(format!(
            "no endpoints available for service {name:?}"
        )));
    }
    let mut rng = rand::rng();
    let seed = rng.random_range(0..subsets.len());
    for i in 0..subsets.len() {
        let ss = &subsets[(seed + i) % subsets.len()];
        let addresses = ss
            .get("addresses")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if addresses.is_empty() {
            continue;
        }
        let Some(ep_port) = ss
            .get("ports")
            .and_then(Value::as_array)
            .and_then(|ps| {
                ps.iter()
                    .find(|p| p.get("name").and_then(Value::as_str).unwrap_or("") == port_name)
            })
            .and_then(|p| p.get("port").and_then(Value::as_i64))
        else {
            continue;
        };
        let aseed = rng.random_range(0..addresses.len());
        for t in 0..addresses.len() {
            let addr = &addresses[(aseed + t) % addresses.len()];
            let ip = addr.get("ip").and_then(Value::as_str).unwrap_or("");
            if is_pod_address(server, ctx, addr, ip) {
                return Ok((ip.to_string(), ep_port));
            }
        }
    }
    Err(unavailable())
}

/// Only addresses that are pods holding that IP are proxied to (`isValidAddress`).
fn is_pod_address(server: &ApiServer, ctx: &Ctx, addr: &Value, ip: &str) -> bool {
    let Some(target) = addr.get("targetRef") else {
        return false;
    };
    if target.get("kind").and_then(Value::as_str) != Some("Pod") {
        return false;
    }
    let ns = target
        .get("namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    let name = target.get("name").and_then(Value::as_str).unwrap_or("");
    let Some(pod) = server
        .store()
        .cache(&ctx.cluster)
        .ok()
        .and_then(|c| c.get("", "pods", &ctx.cluster, ns, name))
    else {
        return false;
    };
    let pod = pod.value();
    pod.pointer("/status/podIPs")
        .and_then(Value::as_array)
        .is_some_and(|ips| {
            ips.iter()
                .any(|p| p.get("ip").and_then(Value::as_str) == Some(ip))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_an_optional_scheme_and_port() {
        assert_eq!(split_scheme_name_port("web"), Some(("", "web", "")));
        assert_eq!(
            split_scheme_name_port("web:8080"),
            Some(("", "web", "8080"))
        );
        assert_eq!(
            split_scheme_name_port("https:web:443"),
            Some(("https", "web", "443"))
        );
        assert_eq!(split_scheme_name_port("ftp:web:21"), None);
        assert_eq!(split_scheme_name_port(":80"), None);
        assert_eq!(split_scheme_name_port("a:b:c:d"), None);
    }

    #[test]
    fn only_global_unicast_addresses_are_proxied_to() {
        assert!(global_unicast("10.244.0.5"));
        assert!(global_unicast("fd00::5"));
        for bad in [
            "127.0.0.1",
            "0.0.0.0",
            "169.254.1.1",
            "224.0.0.1",
            "::1",
            "fe80::1",
            "",
            "x",
        ] {
            assert!(!global_unicast(bad), "{bad}");
        }
    }

    #[test]
    fn backend_locations_are_built_as_upstream() {
        assert_eq!(
            backend_uri("", "10.0.0.5", Some("8080"), "/a/b/?x=1")
                .unwrap()
                .to_string(),
            "http://10.0.0.5:8080/a/b/?x=1"
        );
        assert_eq!(
            backend_uri("https", "fd00::5", None, "")
                .unwrap()
                .to_string(),
            "https://[fd00::5]/"
        );
    }
}
