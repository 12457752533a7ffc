//! `pods/log`: the options checked here (422 `PodLogOptions` when invalid), the pod and its
//! container, then the kubelet's `/containerLogs` streamed back as `text/plain`.
//!
//! A pod not bound to a node has no logs yet: an empty 200, as upstream's `LogLocation`
//! answers with no location. A pod on a virtual node gets one line saying there are none
//! (virtual nodes' addresses are never dialled). A kubelet refusal becomes a `Status` as upstream's response
//! checker makes it: a 400 keeps the kubelet's text (`container "c" in pod "p" is waiting to
//! start: ContainerCreating`), a 500 is an InternalError with it, anything else the generic
//! message of its code.

use std::sync::Arc;

use apimachinery::status::{ApiError, Reason};
use http::{Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use registry::ResourceDef;
use registry::store::Location;
use serde_json::Value;

use super::options::{self, LogRequest};
use crate::response::{self, Body};
use crate::server::{ApiServer, Ctx};

/// The most of a kubelet's error body that is read (upstream's `maxReadLength`).
const MAX_ERROR_BODY: usize = 50_000;

pub async fn log(
    server: &Arc<ApiServer>,
    ctx: &Ctx,
    res: &ResourceDef,
    loc: &Location<'_>,
) -> Result<Response<Body>, ApiError> {
    let opts = LogRequest::from_query(&ctx.query, loc.name)?;
    let pod = server.store().get(res, loc).await?;
    let container = options::container(&pod, loc.name, opts.container.as_deref())?;
    let Some(node) = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
    else {
        return Ok(response::bytes(StatusCode::OK, "text/plain", Vec::new()));
    };
    if server.kubelet.is_virtual_node(server, &ctx.cluster, node) {
        return Ok(response::text(
            StatusCode::OK,
            format!(
                "pod {} runs on virtual node {node}: virtual nodes run no containers, so there are no logs\n",
                loc.name
            ),
        ));
    }
    let location = server.kubelet.location(server, &ctx.cluster, node)?;
    let mut path = format!("/containerLogs/{}/{}/{container}", loc.namespace, loc.name);
    let query = opts.kubelet_query();
    if !query.is_empty() {
        path = format!("{path}?{query}");
    }
    let uri = location.uri(&path)?;
    let answer = server.kubelet.get(server, &ctx.cluster, &uri).await?;
    let status = answer.status().as_u16();
    if !(200..=206).contains(&status) {
        let body = Limited::new(answer.into_body(), MAX_ERROR_BODY)
            .collect()
            .await
            .map(|c| c.to_bytes())
            .unwrap_or_default();
        return Err(checked(status, &String::from_utf8_lossy(&body), loc.name));
    }
    let mut r = Response::new(crate::connect::forward::relay(answer.into_body()));
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain"),
    );
    Ok(r)
}

/// Upstream's `GenericHttpResponseChecker` for `pods/log`.
pub fn checked(code: u16, body: &str, name: &str) -> ApiError {
    match code {
        500 => ApiError::internal(body),
        400 => ApiError::bad_request(body),
        _ => {
            let (reason, message) = match code {
                409 => (Reason::Conflict, "the server reported a conflict".to_string()),
                404 => (
                    Reason::NotFound,
                    "the server could not find the requested resource".to_string(),
                ),
                401 => (
                    Reason::Unauthorized,
                    "the server has asked for the client to provide credentials".to_string(),
                ),
                403 => (Reason::Forbidden, body.to_string()),
                405 => (
                    Reason::MethodNotAllowed,
                    "the server does not allow this method on the requested resource".to_string(),
                ),
                422 => (
                    Reason::Invalid,
                    "the server rejected our request due to an error in our request".to_string(),
                ),
                504 => (
                    Reason::Timeout,
                    "the server was unable to return a response in the time allotted, but may still be processing the request".to_string(),
                ),
                429 => (
                    Reason::TooManyRequests,
                    "the server has received too many requests and has asked us to try again later".to_string(),
                ),
                c if c >= 500 => (
                    Reason::InternalError,
                    format!(
                        "an error on the server ({body:?}) has prevented the request from succeeding"
                    ),
                ),
                c => (
                    Reason::Unknown,
                    format!("the server responded with the status code {c} but did not return more information"),
                ),
            };
            let mut e = ApiError::new(code, reason, format!("{message} ( pods/log {name})"));
            e.kind = Some("pods/log".into());
            e.group = Some(String::new());
            e.name = Some(name.to_string());
            e
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubelet_refusals_become_upstreams_statuses() {
        let e = checked(
            400,
            "container \"c\" in pod \"p\" is waiting to start: ContainerCreating",
            "p",
        );
        assert_eq!(
            (e.code, e.reason, e.message.as_str()),
            (
                400,
                Reason::BadRequest,
                "container \"c\" in pod \"p\" is waiting to start: ContainerCreating"
            )
        );
        let e = checked(500, "boom", "p");
        assert_eq!(e.message, "Internal error occurred: boom");
        let e = checked(404, "pod \"p\" does not exist", "p");
        assert_eq!(e.reason, Reason::NotFound);
        assert_eq!(
            e.message,
            "the server could not find the requested resource ( pods/log p)"
        );
        let e = checked(
            403,
            "Forbidden (user=x, verb=get, resource=nodes, subresource(s)=[proxy])",
            "p",
        );
        assert_eq!(
            e.message,
            "Forbidden (user=x, verb=get, resource=nodes, subresource(s)=[proxy]) ( pods/log p)"
        );
    }
}
