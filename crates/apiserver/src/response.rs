//! Building HTTP responses: JSON objects, `Status` errors, plain text, streams, gzip.

use std::convert::Infallible;
use std::io::Write;

use apimachinery::status::ApiError;
use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use serde::Serialize;
use tokio::sync::mpsc;

/// The body of every response.
pub type Body = UnsyncBoxBody<Bytes, Infallible>;

/// Responses at least this large are gzipped when the client accepts it (upstream's threshold).
const GZIP_MIN: usize = 128 * 1024;

pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed_unsync()
}

pub fn empty() -> Body {
    full(Bytes::new())
}

/// A response with the given status, content type and body.
pub fn bytes(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(full(body));
    *r.status_mut() = status;
    if let Ok(v) = HeaderValue::from_str(content_type) {
        r.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    r
}

/// A JSON response.
pub fn json<T: Serialize + ?Sized>(status: StatusCode, value: &T) -> Response<Body> {
    match serde_json::to_vec(value) {
        Ok(b) => bytes(status, "application/json", b),
        Err(e) => error(&ApiError::internal(format!(
            "failed to encode the response: {e}"
        ))),
    }
}

/// A `Status` error response.
pub fn error(e: &ApiError) -> Response<Body> {
    let status = StatusCode::from_u16(e.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut r = bytes(status, "application/json", e.to_status_bytes());
    if let Some(secs) = e.retry_after_seconds
        && (e.code == 429 || e.code == 503)
    {
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    r
}

pub fn text(status: StatusCode, body: impl Into<String>) -> Response<Body> {
    bytes(status, "text/plain; charset=utf-8", body.into())
}

/// A streaming response fed by a channel of chunks (watch, log follow).
pub fn stream(content_type: &str, rx: mpsc::Receiver<Bytes>) -> Response<Body> {
    let s = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|chunk| (Ok::<_, Infallible>(http_body::Frame::data(chunk)), rx))
    });
    let mut r = Response::new(StreamBody::new(s).boxed_unsync());
    if let Ok(v) = HeaderValue::from_str(content_type) {
        r.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    r
}

/// Gzips a full response body when it is large and the client accepts gzip.
pub fn maybe_gzip(accept_encoding: Option<&str>, body: Vec<u8>) -> (Vec<u8>, bool) {
    let wants = accept_encoding.is_some_and(|a| a.split(',').any(|e| e.trim().starts_with("gzip")));
    if !wants || body.len() < GZIP_MIN {
        return (body, false);
    }
    let mut enc = flate2::write::GzEncoder::new(
        Vec::with_capacity(body.len() / 4),
        flate2::Compression::fast(),
    );
    if enc.write_all(&body).is_err() {
        return (body, false);
    }
    match enc.finish() {
        Ok(z) => (z, true),
        Err(_) => (body, false),
    }
}
