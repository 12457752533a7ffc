//! A client for a kubeconfig file whose client certificate is renewed in place — the platform
//! re-writes admin kubeconfigs before their certificates expire, as a kubelet's certificate
//! manager re-writes `kubelet-client-current.pem`.
//!
//! Every new TLS connection presents the file's current certificate (a rustls
//! [`ResolvesClientCert`]); a background task looks at the file every second and, when the
//! certificate in it changed, closes every connection opened with the old one, so pooled
//! connections and open watches move to a connection with the new certificate (the API server
//! checks a certificate's validity on every request, so an old connection would start failing
//! at its expiry). kube-rs builds a client's TLS configuration once, hence this module; the
//! rest of the stack (base URI, authentication, extra headers, timeouts) is kube-rs's own.

use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::rt::TokioExecutor;
use kube::client::ConfigExt;
use parking_lot::{Mutex, RwLock};
use rustls::client::ResolvesClientCert;
use rustls::sign::CertifiedKey;
use tower::ServiceBuilder;

use crate::error::{Error, Result};

/// How often the kubeconfig file is looked at.
const POLL: Duration = Duration::from_secs(1);

/// A client for the kubeconfig at `path` (its `context`, or the current one) that follows the
/// file's client certificate as it is renewed. A kubeconfig without a client certificate gives
/// a plain kube-rs client.
pub async fn client(path: &Path, context: Option<&str>) -> Result<kube::Client> {
    let config = read(path, context).await?;
    let Some(identity) = identity_pem(&config.auth_info).map_err(|e| config_err(path, e))? else {
        return Ok(kube::Client::try_from(config)?);
    };
    let key = certified_key(&identity).map_err(|e| config_err(path, e))?;
    let (generation, _) = tokio::sync::watch::channel(0u64);
    let state = Arc::new(Identity {
        path: path.to_path_buf(),
        context: context.map(String::from),
        current: RwLock::new(key),
        identity: Mutex::new(identity),
        seen: Mutex::new(std::fs::read(path).unwrap_or_default()),
        generation,
    });
    tokio::spawn(follow(Arc::downgrade(&state)));
    let mut tls = config.rustls_client_config()?;
    tls.client_auth_cert_resolver = state.clone();
    // A resumed session keeps the certificate of the session it resumes, so connections
    // made after a renewal would still be the old certificate's: no resumption (client-go
    // does not resume either).
    tls.resumption = rustls::client::Resumption::disabled();
    let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
    http.enforce_http(false);
    let mut builder = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http();
    if let Some(name) = &config.tls_server_name {
        let name = rustls::pki_types::ServerName::try_from(name.clone())
            .map_err(|e| config_err(path, e))?;
        builder =
            builder.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name));
    }
    let mut timeouts =
        hyper_timeout::TimeoutConnector::new(builder.enable_http1().wrap_connector(http));
    timeouts.set_connect_timeout(config.connect_timeout);
    timeouts.set_read_timeout(config.read_timeout);
    timeouts.set_write_timeout(config.write_timeout);
    let connector = Closing {
        inner: timeouts,
        generation: state.generation.subscribe(),
        _identity: state,
    };
    let http: hyper_util::client::legacy::Client<_, kube::client::Body> =
        hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build(connector);
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(tower::BoxError::from)
        .service(http);
    Ok(kube::Client::new(service, config.default_namespace.clone()))
}

async fn read(path: &Path, context: Option<&str>) -> Result<kube::Config> {
    let kc = kube::config::Kubeconfig::read_from(path).map_err(|e| config_err(path, e))?;
    let opts = kube::config::KubeConfigOptions {
        context: context.map(str::to_string),
        ..Default::default()
    };
    kube::Config::from_custom_kubeconfig(kc, &opts)
        .await
        .map_err(|e| config_err(path, e))
}

fn config_err(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Config(format!("kubeconfig {}: {e}", path.display()))
}

/// The client certificate and key of a kubeconfig user (PEM), from `*-data` or from files, as
/// kube-rs reads them (which it keeps to itself).
fn identity_pem(auth: &kube::config::AuthInfo) -> std::result::Result<Option<Vec<u8>>, String> {
    use base64::Engine;
    use secrecy::ExposeSecret;
    let load = |data: Option<&str>,
                file: Option<&String>|
     -> std::result::Result<Option<Vec<u8>>, String> {
        match (data, file) {
            (Some(d), _) => base64::engine::general_purpose::STANDARD
                .decode(d.trim())
                .map(Some)
                .map_err(|e| e.to_string()),
            (None, Some(f)) => std::fs::read(f).map(Some).map_err(|e| format!("{f}: {e}")),
            (None, None) => Ok(None),
        }
    };
    let cert = load(
        auth.client_certificate_data.as_deref(),
        auth.client_certificate.as_ref(),
    )?;
    let key = load(
        auth.client_key_data.as_ref().map(|k| k.expose_secret()),
        auth.client_key.as_ref(),
    )?;
    match (cert, key) {
        (None, None) => Ok(None),
        (Some(mut cert), Some(key)) => {
            cert.push(b'\n');
            cert.extend_from_slice(&key);
            Ok(Some(cert))
        }
        _ => Err("a client certificate needs its key".into()),
    }
}

/// The certificate and key of a kubeconfig identity (PEM certificate chain, then key).
fn certified_key(pem: &[u8]) -> std::result::Result<Arc<CertifiedKey>, String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    if certs.is_empty() {
        return Err("no client certificate".into());
    }
    let key = PrivateKeyDer::from_pem_slice(pem).map_err(|e| e.to_string())?;
    let provider = rustls::crypto::ring::default_provider();
    CertifiedKey::from_der(certs, key, &provider)
        .map(Arc::new)
        .map_err(|e| e.to_string())
}

/// The identity every new connection presents.
struct Identity {
    path: PathBuf,
    context: Option<String>,
    current: RwLock<Arc<CertifiedKey>>,
    /// The PEM it was made from, to tell a new certificate from a re-written file.
    identity: Mutex<Vec<u8>>,
    /// The file's contents when last read.
    seen: Mutex<Vec<u8>>,
    /// Bumped when the certificate changes: connections opened before close.
    generation: tokio::sync::watch::Sender<u64>,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity")
            .field("path", &self.path)
            .finish()
    }
}

impl ResolvesClientCert for Identity {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[rustls::SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        Some(self.current.read().clone())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

impl Identity {
    /// Re-reads the file if it changed; true when its certificate did.
    async fn refresh(&self) -> bool {
        // The file is small: its bytes tell a change where a modification time (of kernel
        // tick granularity) may not.
        let Ok(now) = std::fs::read(&self.path) else {
            return false;
        };
        if *self.seen.lock() == now {
            return false;
        }
        let pem = match read(&self.path, self.context.as_deref()).await {
            Ok(c) => identity_pem(&c.auth_info).ok().flatten(),
            Err(e) => {
                // Half-written, say: tried again at the next look.
                tracing::debug!(error = %e, "re-reading the kubeconfig");
                return false;
            }
        };
        *self.seen.lock() = now;
        let Some(pem) = pem.filter(|p| *p != *self.identity.lock()) else {
            return false;
        };
        match certified_key(&pem) {
            Ok(key) => {
                *self.current.write() = key;
                *self.identity.lock() = pem;
                self.generation.send_modify(|g| *g += 1);
                tracing::info!(path = %self.path.display(), "client certificate renewed; reconnecting");
                true
            }
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "the kubeconfig's new client certificate is unusable");
                false
            }
        }
    }
}

/// Looks at the file every [`POLL`] until the client is gone.
async fn follow(state: Weak<Identity>) {
    let mut tick = tokio::time::interval(POLL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(state) = state.upgrade() else { return };
        state.refresh().await;
    }
}

/// A connector whose connections close once the identity they were opened with is replaced.
#[derive(Clone)]
struct Closing<C> {
    inner: C,
    generation: tokio::sync::watch::Receiver<u64>,
    /// Keeps the identity (and so its follower) alive as long as the client.
    _identity: Arc<Identity>,
}

impl<C> tower::Service<http::Uri> for Closing<C>
where
    C: tower::Service<http::Uri> + Send,
    C::Future: Send + 'static,
{
    type Response = ClosingStream<C::Response>;
    type Error = C::Error;
    type Future =
        Pin<Box<dyn Future<Output = std::result::Result<Self::Response, C::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<std::result::Result<(), C::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let mut rx = self.generation.clone();
        rx.mark_unchanged();
        let connecting = self.inner.call(uri);
        Box::pin(async move {
            let inner = connecting.await?;
            Ok(ClosingStream {
                inner,
                replaced: Box::pin(async move {
                    let _ = rx.changed().await;
                }),
                closed: false,
            })
        })
    }
}

/// A connection that fails its reads and writes once its identity is replaced, so the pool
/// drops it and the next request opens a new one.
struct ClosingStream<T> {
    inner: T,
    replaced: Pin<Box<dyn Future<Output = ()> + Send>>,
    closed: bool,
}

impl<T> ClosingStream<T> {
    fn closed(&mut self, cx: &mut Context<'_>) -> bool {
        if !self.closed && self.replaced.as_mut().poll(cx).is_ready() {
            self.closed = true;
        }
        self.closed
    }
}

fn replaced() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionAborted,
        "the client certificate was renewed",
    )
}

impl<T: Read + Unpin> Read for ClosingStream<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.closed(cx) {
            return Poll::Ready(Err(replaced()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<T: Write + Unpin> Write for ClosingStream<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.closed(cx) {
            return Poll::Ready(Err(replaced()));
        }
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

impl<T: Connection> Connection for ClosingStream<T> {
    fn connected(&self) -> Connected {
        self.inner.connected()
    }
}
