//! `matryoshka up`: storage, certificates, the API server and the in-process components, with
//! a graceful drain on SIGTERM or Ctrl-C.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use apiserver::certs::{self, Ca};
use storage::Storage;

/// Flags of `matryoshka up` (named after kube-apiserver's where one exists).
#[derive(clap::Args, Debug, Clone)]
pub struct UpArgs {
    /// Where data, certificates and admin.conf live.
    #[arg(long, default_value = "./matryoshka-data")]
    pub data_dir: PathBuf,
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind_address: IpAddr,
    /// The HTTPS port.
    #[arg(long, default_value_t = 6443)]
    pub secure_port: u16,
    /// etcd endpoints (comma-separated); the embedded store is used when empty.
    #[arg(long, value_delimiter = ',')]
    pub etcd_servers: Vec<String>,
    /// The key prefix in etcd.
    #[arg(long, default_value = "/matryoshka")]
    pub etcd_prefix: String,
}

fn hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// The serving certificate's names: localhost, loopback, the bind address, the hostname, and
/// the in-cluster service names.
fn sans(bind: IpAddr) -> Vec<String> {
    let mut s = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "kubernetes".to_string(),
        "kubernetes.default".to_string(),
        "kubernetes.default.svc".to_string(),
        "kubernetes.default.svc.cluster.local".to_string(),
        "10.96.0.1".to_string(),
    ];
    if !bind.is_unspecified() {
        s.push(bind.to_string());
    }
    if let Some(h) = hostname() {
        s.push(h);
    }
    s.dedup();
    s
}

async fn open_storage(args: &UpArgs) -> anyhow::Result<Arc<dyn Storage>> {
    if args.etcd_servers.is_empty() {
        let dir = args.data_dir.join("store");
        let store = storage::embedded::EmbeddedStore::open(&dir)
            .with_context(|| format!("opening the store in {}", dir.display()))?;
        Ok(Arc::new(store))
    } else {
        let store =
            storage::etcd::EtcdStore::connect(&args.etcd_servers, args.etcd_prefix.as_bytes())
                .await
                .with_context(|| {
                    format!("connecting to etcd at {}", args.etcd_servers.join(","))
                })?;
        Ok(Arc::new(store))
    }
}

/// Creates or loads the PKI: the cluster CA, the serving certificate and the admin client.
fn pki(dir: &Path, bind: IpAddr) -> anyhow::Result<(Ca, certs::CertPair, certs::CertPair)> {
    let pki = dir.join("pki");
    std::fs::create_dir_all(&pki)?;
    let ca = Ca::load_or_create(&pki, "ca", "matryoshka-ca")?;
    // Serving and admin certificates are re-issued at every start: cheap, and they never get
    // close to expiring.
    let serving = ca.issue_server("kube-apiserver", &sans(bind))?;
    let admin = ca.issue_client("kubernetes-admin", &["system:masters"])?;
    Ok((ca, serving, admin))
}

pub async fn run(args: UpArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    std::fs::create_dir_all(&args.data_dir)
        .with_context(|| format!("creating {}", args.data_dir.display()))?;
    let (ca, serving, admin) = pki(&args.data_dir, args.bind_address)?;
    let storage = open_storage(&args).await?;
    let server = apiserver::server::start(storage)
        .await
        .map_err(|e| anyhow::anyhow!("starting the API server: {e}"))?;

    let addr = SocketAddr::new(args.bind_address, args.secure_port);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("listening on {addr}"))?;
    let tls = apiserver::serve::tls_config(&serving.cert_pem, &serving.key_pem, &ca.pair.cert_pem)?;
    let host = if args.bind_address.is_unspecified() {
        "127.0.0.1".to_string()
    } else {
        args.bind_address.to_string()
    };
    let url = if host.contains(':') {
        format!("https://[{host}]:{}", args.secure_port)
    } else {
        format!("https://{host}:{}", args.secure_port)
    };
    let kubeconfig = certs::kubeconfig(
        "matryoshka",
        &url,
        &ca.pair.cert_pem,
        "kubernetes-admin",
        &admin,
    );
    let admin_path = args.data_dir.join("admin.conf");
    certs::write_private(&admin_path, &kubeconfig)?;
    tracing::info!(
        address = %addr,
        kubeconfig = %admin_path.display(),
        storage = if args.etcd_servers.is_empty() { "embedded" } else { "etcd" },
        startup_ms = started.elapsed().as_millis() as u64,
        "matryoshka is serving"
    );
    apiserver::serve::serve(server, listener, tls, shutdown_signal()).await;
    tracing::info!("stopped");
    Ok(())
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: draining"),
        _ = tokio::signal::ctrl_c() => tracing::info!("interrupt: draining"),
    }
}
