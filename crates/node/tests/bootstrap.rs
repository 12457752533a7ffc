//! TLS bootstrap over a connection that breaks. Regression: a process machine's agent exited
//! when one poll of its CertificateSigningRequest met a connection the server had just closed
//! (`client error (SendRequest)`), so the machine never joined; requests that get no answer
//! are now sent again until the deadline.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use apiserver::local::LocalService;
use http::{Request, Response};
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use kube::api::{Api, Patch, PatchParams};
use node::bootstrap::{Purpose, request_certificate};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The in-process service, but the requests numbered in `broken` get no answer.
#[derive(Clone)]
struct Breaking {
    inner: LocalService,
    seen: Arc<AtomicUsize>,
    broken: &'static [usize],
}

impl tower::Service<Request<kube::client::Body>> for Breaking {
    type Response = Response<apiserver::response::Body>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<kube::client::Body>) -> Self::Future {
        let n = self.seen.fetch_add(1, Ordering::SeqCst);
        if self.broken.contains(&n) {
            return Box::pin(async { Err("connection closed before the answer".into()) });
        }
        let fut = tower::Service::call(&mut self.inner, req);
        Box::pin(async move { fut.await.map_err(|never| match never {}) })
    }
}

#[tokio::test]
async fn a_certificate_request_survives_connections_that_break() {
    let server = testkit::Server::start().await;
    let client = kube::Client::new(
        Breaking {
            inner: LocalService::system(server.api.clone()),
            seen: Arc::default(),
            // The create, then the first read of the request.
            broken: &[0, 2],
        },
        "default",
    );
    // Stand in for the signer: give every request a certificate.
    let signer = testkit::server::clients(&server.api)
        .cluster(runtime::client::ROOT)
        .unwrap();
    let signing = tokio::spawn(async move {
        let api: Api<CertificateSigningRequest> = Api::all(signer);
        loop {
            for csr in api.list(&Default::default()).await.unwrap().items {
                let name = csr.metadata.name.clone().unwrap();
                if csr.status.and_then(|s| s.certificate).is_none() {
                    let patch = serde_json::json!({"status": {"certificate": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="}});
                    let _ = api
                        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let issued = request_certificate(
        &client,
        "n1",
        Purpose::Client,
        &[],
        &[],
        Duration::from_secs(20),
    )
    .await
    .expect("a certificate despite the broken connections");
    assert!(issued.cert_pem.contains("BEGIN CERTIFICATE"));
    signing.abort();
}
