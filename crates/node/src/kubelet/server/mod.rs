//! The kubelet's HTTPS API (upstream's port 10250), over a [`KubeletApi`]: what the API
//! server proxies `pods/log`, `pods/exec`, `pods/attach`, `pods/portforward` and
//! `nodes/proxy` to, and what metrics collectors scrape.
//!
//! - [`tls`]: the serving certificate (given, or self-signed for the node's addresses) and
//!   the handshake, which takes client certificates from anyone;
//! - [`auth`]: client certificates against the client-CA bundle, bearer tokens through
//!   TokenReview, authorization through SubjectAccessReview ([`review`]), both cached
//!   ([`cache`]);
//! - [`routes`]: the paths and their methods; [`handlers`]: `/pods`, `/run`, `/healthz`,
//!   `/stats/summary`, `/metrics/resource` ([`metrics`]), `/metrics`;
//! - [`proxy`]: exec, attach and port-forward handed to the runtime's streaming server;
//! - [`logs`] serves `/containerLogs`.
//!
//! Bounded: at most [`Limits::max_connections`] connections (more wait to be accepted),
//! request heads up to 1 MiB (Go's `MaxHeaderBytes`), no request body is ever buffered,
//! streams close after [`Limits::stream_idle_timeout`] without traffic.

pub mod auth;
pub mod cache;
pub mod handlers;
pub mod logs;
pub mod metrics;
pub mod proxy;
pub mod response;
pub mod review;
pub mod routes;
pub mod tls;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::Request;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use rustls::pki_types::CertificateDer;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio_rustls::TlsAcceptor;

use crate::kubelet::api::KubeletApi;
pub use auth::{Auth, ClientCa};
pub use review::{KubeReviewer, Reviewer};
pub use tls::{ServingCert, ServingSlot};

/// The kubelet's default API port.
pub const DEFAULT_PORT: u16 = 10250;

/// Bounds on what clients can make the server hold.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Connections served at once; further ones wait in the listen queue.
    pub max_connections: usize,
    /// The largest request head (request line and headers).
    pub max_header_bytes: usize,
    /// How long the TLS handshake and the request head may take.
    pub handshake_timeout: Duration,
    /// A stream (exec, attach, port-forward) with no traffic for this long is closed
    /// (`streamingConnectionIdleTimeout`, 4 h).
    pub stream_idle_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            // A bound, not an upstream figure: Go's server has none.
            max_connections: 1024,
            max_header_bytes: 1 << 20,
            handshake_timeout: Duration::from_secs(10),
            stream_idle_timeout: Duration::from_secs(4 * 3600),
        }
    }
}

/// How the server is set up.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where to listen (port 0 picks one; [`RunningServer::addr`] tells which).
    pub listen: SocketAddr,
    pub serving: ServingCert,
    /// The client-CA bundle (PEM) client certificates must chain to; none: certificates are
    /// not an authentication method.
    pub client_ca_pem: Option<String>,
    /// Serve requests without credentials as `system:anonymous` (off, as upstream's
    /// recommended configuration and kubeadm's).
    pub anonymous: bool,
    pub limits: Limits,
}

/// Why the server did not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    #[error("{0}")]
    ClientCa(String),
    #[error("failed to listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// What every request handler shares.
pub(crate) struct Shared {
    pub api: Arc<dyn KubeletApi>,
    pub auth: Auth,
    pub limits: Limits,
    pub counters: handlers::Counters,
}

/// A listening server; dropping it stops accepting (open streams finish on their own).
pub struct RunningServer {
    addr: SocketAddr,
    serving: Arc<ServingSlot>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl RunningServer {
    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The serving certificate it presents (replaceable).
    pub fn serving(&self) -> Arc<ServingSlot> {
        self.serving.clone()
    }

    /// Stops accepting and waits for the accept loop to end.
    pub async fn stop(mut self) {
        let _ = self.stop.send(true);
        let _ = (&mut self.task).await;
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        self.task.abort();
    }
}

/// Starts the kubelet API for `api`, authenticating tokens and authorizing requests with
/// `reviewer`.
pub async fn start(
    config: Config,
    api: Arc<dyn KubeletApi>,
    reviewer: Arc<dyn Reviewer>,
) -> Result<RunningServer, ServerError> {
    let listener = bind(config.listen).await?;
    start_on(listener, config, api, reviewer)
}

/// Binds the kubelet API's address (port 0 picks one), so that a caller can learn the port
/// before the [`KubeletApi`] it serves exists.
pub async fn bind(listen: SocketAddr) -> Result<TcpListener, ServerError> {
    TcpListener::bind(listen)
        .await
        .map_err(|source| ServerError::Listen {
            addr: listen,
            source,
        })
}

/// Serves the kubelet API on a listener from [`bind`]; `config.listen` is not used.
pub fn start_on(
    listener: TcpListener,
    config: Config,
    api: Arc<dyn KubeletApi>,
    reviewer: Arc<dyn Reviewer>,
) -> Result<RunningServer, ServerError> {
    let serving = ServingSlot::new(&config.serving)?;
    let tls = tls::server_config(serving.clone())?;
    let client_ca = config
        .client_ca_pem
        .as_deref()
        .map(ClientCa::from_pem)
        .transpose()
        .map_err(ServerError::ClientCa)?;
    let addr = listener
        .local_addr()
        .map_err(|source| ServerError::Listen {
            addr: config.listen,
            source,
        })?;
    let shared = Arc::new(Shared {
        auth: Auth::new(api.node_name(), client_ca, config.anonymous, reviewer),
        api,
        limits: config.limits.clone(),
        counters: handlers::Counters::default(),
    });
    let (stop, stopped) = watch::channel(false);
    let task = tokio::spawn(accept_loop(
        listener,
        TlsAcceptor::from(tls),
        shared,
        stopped,
    ));
    tracing::info!(%addr, "kubelet API listening");
    Ok(RunningServer {
        addr,
        serving,
        stop,
        task,
    })
}

async fn accept_loop(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    shared: Arc<Shared>,
    mut stopped: watch::Receiver<bool>,
) {
    let permits = Arc::new(Semaphore::new(shared.limits.max_connections));
    loop {
        let permit = tokio::select! {
            p = permits.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => return,
            },
            _ = stopped.changed() => return,
        };
        let (tcp, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!(error = %e, "kubelet API: accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stopped.changed() => return,
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let shared = shared.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let timeout = shared.limits.handshake_timeout;
            let tls = match tokio::time::timeout(timeout, acceptor.accept(tcp)).await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    tracing::debug!(%peer, error = %e, "kubelet API: TLS handshake failed");
                    return;
                }
                Err(_) => return,
            };
            let chain: Arc<Vec<CertificateDer<'static>>> = Arc::new(
                tls.get_ref()
                    .1
                    .peer_certificates()
                    .map(|c| c.iter().map(|d| d.clone().into_owned()).collect())
                    .unwrap_or_default(),
            );
            let head = shared.limits.max_header_bytes;
            let svc = service_fn(move |req: Request<Incoming>| {
                let shared = shared.clone();
                let chain = chain.clone();
                async move {
                    Ok::<_, std::convert::Infallible>(handlers::handle(&shared, &chain, req).await)
                }
            });
            let mut builder = auto::Builder::new(TokioExecutor::new());
            builder
                .http1()
                .timer(TokioTimer::new())
                .header_read_timeout(timeout)
                .max_buf_size(head.max(8192));
            builder
                .http2()
                .max_header_list_size(u32::try_from(head).unwrap_or(u32::MAX));
            let conn = builder.serve_connection_with_upgrades(TokioIo::new(tls), svc);
            if let Err(e) = conn.await {
                tracing::debug!(%peer, error = %e, "kubelet API: connection ended with an error");
            }
        });
    }
}
