//! `/metrics`: Prometheus text with upstream's metric names —
//! `apiserver_request_total{verb,resource,code}` and `apiserver_request_duration_seconds`.
//!
//! Labels never carry a cluster name: metrics must not reveal which clusters exist.

use http::{Method, Response, StatusCode};

use crate::response::{self, Body};
use crate::route::Route;
use crate::server::Query;

pub use controlplane::metrics::Metrics;

/// The `verb` and `resource` labels of a request, upstream style (`LIST`, `WATCH`, `GET` ...
/// and the resource plural, empty for non-resource paths).
pub fn labels(method: &Method, route: &Route, query: &Query) -> (String, String) {
    match route {
        Route::Resource(p) => {
            // Streams and proxies count as CONNECT, as upstream's `OverrideMetricsVerb`.
            if matches!(
                p.subresource.as_deref(),
                Some("log" | "exec" | "attach" | "portforward" | "proxy")
            ) {
                return ("CONNECT".to_string(), p.resource.clone());
            }
            let verb = match *method {
                Method::GET if p.watch_prefix || query.flag("watch") => "WATCH",
                Method::GET if p.name.is_none() => "LIST",
                Method::DELETE if p.name.is_none() => "DELETECOLLECTION",
                Method::POST => "POST",
                Method::PUT => "PUT",
                Method::PATCH => "PATCH",
                Method::DELETE => "DELETE",
                _ => "GET",
            };
            (verb.to_string(), p.resource.clone())
        }
        _ => (method.as_str().to_string(), String::new()),
    }
}

/// The Prometheus text exposition of `metrics` for `cluster` (the root cluster's carries its
/// collectors' metrics too).
pub fn render(metrics: &Metrics, cluster: &str) -> Response<Body> {
    response::bytes(
        StatusCode::OK,
        "text/plain; version=0.0.4; charset=utf-8",
        metrics.render_for(cluster == apimachinery::cluster::ROOT),
    )
}
