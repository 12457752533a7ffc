//! The in-memory transport: a tower `Service` over the API server, so in-process components
//! (controllers, scheduler, node agents, platform) use an ordinary Kubernetes client (kube-rs)
//! with no socket and no TLS. They go through exactly the same routing, validation and
//! admission as external clients.
//!
//! There is no connection to upgrade, so exec, attach and port-forward (and any upgrade
//! through a proxy subresource) are refused with a 400 saying so; plain proxied requests and
//! `pods/log` work.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};

use crate::auth::{UserExt, UserInfo};
use crate::response::{self, Body};
use crate::serve::read_body;
use crate::server::{ApiServer, Caller};

/// A tower service that hands requests to the API server as `user`.
#[derive(Clone)]
pub struct LocalService {
    server: Arc<ApiServer>,
    user: UserInfo,
    /// Authenticate each request's own credentials instead of trusting `user`.
    authenticate: bool,
    /// When authenticating: the client certificate chain the requests present.
    peer: Option<Arc<crate::authn::PeerCerts>>,
}

impl LocalService {
    /// A service acting as the system identity.
    pub fn system(server: Arc<ApiServer>) -> Self {
        LocalService {
            server,
            user: UserInfo::system(),
            authenticate: false,
            peer: None,
        }
    }

    pub fn as_user(server: Arc<ApiServer>, user: UserInfo) -> Self {
        LocalService {
            server,
            user,
            authenticate: false,
            peer: None,
        }
    }

    /// A service whose requests are authenticated from their own `Authorization` header, as
    /// a network client's are (the console sends its signed-in user's token).
    pub fn authenticating(server: Arc<ApiServer>) -> Self {
        LocalService {
            server,
            user: UserInfo::system(),
            authenticate: true,
            peer: None,
        }
    }

    /// A service whose requests are authenticated as a TLS client presenting `peer` (the
    /// certificate a browser showed the console), and by their own headers.
    pub fn authenticating_peer(server: Arc<ApiServer>, peer: Arc<crate::authn::PeerCerts>) -> Self {
        LocalService {
            server,
            user: UserInfo::system(),
            authenticate: true,
            peer: Some(peer),
        }
    }
}

impl<B> tower::Service<Request<B>> for LocalService
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = Response<Body>;
    type Error = std::convert::Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let server = self.server.clone();
        let caller = if self.authenticate {
            Caller::Tls(self.peer.clone())
        } else {
            Caller::Internal(self.user.clone())
        };
        Box::pin(async move {
            if crate::connect::handles(req.uri().path()) {
                // No connection to hand over: upgrades cannot work here.
                if streaming::upgrade::is_upgrade_request(req.headers()) {
                    let e = crate::connect::in_process_refusal(req.uri().path());
                    return Ok(response::error(&e));
                }
                return Ok(match read_body(req).await {
                    Ok(req) => {
                        let req = req.map(http_body_util::Full::new);
                        crate::connect::serve(&server, req, &caller, None).await
                    }
                    Err(e) => response::error(&e),
                });
            }
            Ok(match read_body(req).await {
                Ok(req) => server.handle(req, caller).await,
                Err(e) => response::error(&e),
            })
        })
    }
}
