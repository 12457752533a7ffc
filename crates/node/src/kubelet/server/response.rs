//! Responses as the kubelet writes them: handler errors are plain text without a trailing
//! newline (go-restful's `WriteErrorString`), proxy errors Go's `http.Error` (with one),
//! JSON for `/pods` and `/stats/summary`, and streamed bodies for logs.

use std::convert::Infallible;

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty, Full, StreamBody};
use tokio::sync::mpsc;

/// Every response body.
pub type Body = BoxBody<Bytes, Infallible>;

pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed()
}

pub fn empty() -> Body {
    Empty::new().boxed()
}

fn with_type(status: StatusCode, content_type: &'static str, body: Body) -> Response<Body> {
    let mut r = Response::new(body);
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

/// A handler error: the text as is.
pub fn text(status: StatusCode, message: impl Into<String>) -> Response<Body> {
    with_type(
        status,
        "text/plain; charset=utf-8",
        full(message.into().into_bytes()),
    )
}

/// Go's `http.Error`: the text and a newline, `nosniff`.
pub fn go_error(status: StatusCode, message: &str) -> Response<Body> {
    let mut r = text(status, format!("{message}\n"));
    r.headers_mut().insert(
        "X-Content-Type-Options",
        HeaderValue::from_static("nosniff"),
    );
    r
}

pub fn json(body: Vec<u8>) -> Response<Body> {
    with_type(StatusCode::OK, "application/json", full(body))
}

pub fn bytes(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Body> {
    with_type(status, content_type, full(body))
}

/// A body fed by a channel of chunks, each sent as soon as it arrives.
pub fn stream(content_type: &'static str, rx: mpsc::Receiver<Bytes>) -> Response<Body> {
    let chunks = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|c| (Ok::<_, Infallible>(http_body::Frame::data(c)), rx))
    });
    with_type(
        StatusCode::OK,
        content_type,
        StreamBody::new(chunks).boxed(),
    )
}
