//! Request-level test support: an API server over a temporary embedded store, and requests
//! handled as the system identity (status code and decoded body).
#![allow(dead_code)]

pub mod webhook;

use std::sync::Arc;

use apiserver::auth::{UserExt, UserInfo};
use apiserver::server::{ApiServer, Caller};
use bytes::Bytes;
use http::{Method, Request};
use http_body_util::BodyExt;
use serde_json::Value;

/// A started server; the directory holds its store and must outlive it.
pub async fn server() -> (tempfile::TempDir, Arc<ApiServer>) {
    let dir = tempfile::tempdir().unwrap();
    let store = storage::embedded::EmbeddedStore::open(dir.path()).unwrap();
    let server = apiserver::server::start(Arc::new(store)).await.unwrap();
    (dir, server)
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
    let mut req = Request::builder().method(method).uri(uri);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req.body(Bytes::from(body.to_string())).unwrap();
    let resp = server
        .handle(req, Caller::Internal(UserInfo::system()))
        .await;
    let code = resp.status().as_u16();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (code, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

/// The `field` of every cause of a `Status`, in order.
pub fn cause_fields(status: &Value) -> Vec<&str> {
    status["details"]["causes"]
        .as_array()
        .map(|cs| cs.iter().filter_map(|c| c["field"].as_str()).collect())
        .unwrap_or_default()
}
