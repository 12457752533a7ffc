//! The API server's side of the upgrade-aware reverse proxy ([`streaming::proxy`]): its
//! failures as kube-apiserver reports them.

use apimachinery::status::ApiError;
use bytes::Bytes;
use http::{Request, Response, Uri};
use streaming::proxy::ForwardError;
use streaming::upgrade::Connect;

use crate::response::Body;

pub use streaming::proxy::relay;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Sends `req` to `target` over `connector` and returns what to answer the client. `target`
/// carries the path and query to request.
pub async fn forward<B>(
    req: Request<B>,
    target: &Uri,
    connector: &dyn Connect,
    peer: Option<&str>,
) -> Result<Response<Body>, ApiError>
where
    B: hyper::body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    streaming::proxy::forward(req, target, connector, peer)
        .await
        .map_err(|e| match e {
            ForwardError::Dial { uri, source } => crate::kubelet::dial_error(&uri, &source),
            ForwardError::Handshake(e) => {
                ApiError::unknown(500, format!("error dialing backend: {e}"))
            }
            ForwardError::Request(e) => ApiError::internal(e.to_string()),
            ForwardError::Send(e) => {
                ApiError::unknown(500, format!("error trying to reach service: {e}"))
            }
        })
}
