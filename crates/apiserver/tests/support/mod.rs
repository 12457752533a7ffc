//! Request-level test support on `testkit`: an API server over a temporary embedded store, and
//! requests handled as the system identity (status code and decoded body).
#![allow(dead_code)]

pub mod webhook;

use std::sync::Arc;

use apiserver::server::ApiServer;
use http::Method;
use serde_json::Value;

#[allow(unused_imports)]
pub use testkit::status::cause_fields;

/// A started server; the directory holds its store and must outlive it.
pub async fn server() -> (tempfile::TempDir, Arc<ApiServer>) {
    let (api, dir) = testkit::Server::start().await.into_parts();
    (dir, api)
}

/// A bodiless request.
pub async fn call(server: &Arc<ApiServer>, method: Method, uri: &str) -> (u16, Value) {
    call_with(server, method, uri, &[], "").await
}

/// A request with headers and a body; the answer's code and JSON body (`Null` if none).
pub async fn call_with(
    server: &Arc<ApiServer>,
    method: Method,
    uri: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, Value) {
    let r = testkit::server::request(server, method, uri, headers, body).await;
    (r.code, r.body)
}
