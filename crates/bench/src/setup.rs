//! What the in-process benchmarks start: an API server on a fresh embedded store, and the
//! control plane (controllers, scheduler) beside it.

use std::sync::Arc;
use std::time::Duration;

use apiserver::ApiServer;
use runtime::client::ClusterClients;
use runtime::shared::{Shutdown, ShutdownTrigger};
use tokio::task::JoinHandle;

/// Clients over `server`'s in-memory transport, as the system identity.
pub fn clients(server: &Arc<ApiServer>) -> ClusterClients {
    ClusterClients::in_memory(apiserver::local::LocalService::system(server.clone()))
}

/// An API server on a new embedded store under `target/bench-data` (removed with the guard).
pub async fn server() -> anyhow::Result<(Arc<ApiServer>, tempfile::TempDir)> {
    let (server, _, data) = server_and_store(apiserver::server::fresh_config()?).await?;
    Ok((server, data))
}

/// [`server`] with `config`, and its store.
pub async fn server_and_store(
    config: apiserver::server::Config,
) -> anyhow::Result<(
    Arc<ApiServer>,
    Arc<storage::embedded::EmbeddedStore>,
    tempfile::TempDir,
)> {
    let dir = std::env::current_dir()?.join("target/bench-data");
    std::fs::create_dir_all(&dir)?;
    let data = tempfile::tempdir_in(&dir)?;
    let store = Arc::new(storage::embedded::EmbeddedStore::open(data.path())?);
    let server = apiserver::server::start_with(store.clone(), config)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok((server, store, data))
}

/// Serves `server` over HTTPS on a free loopback port with `options`, as `matryoshka up`
/// does; the address and the root CA (which issued the serving certificate).
pub async fn serve_https(
    server: &Arc<ApiServer>,
    mut options: apiserver::serve::Options,
) -> anyhow::Result<(std::net::SocketAddr, pki::Ca)> {
    // `SEATS=N` sets the server's request seats (`matryoshka up --max-requests-inflight`).
    if let Some(n) = std::env::var("SEATS").ok().and_then(|v| v.parse().ok()) {
        options.flow.seats = n;
    }
    let ca = pki::Ca {
        pair: server.control_plane().config().root_ca.clone(),
    };
    let serving = ca.issue_server("bench", &["127.0.0.1".to_string()])?;
    let tls = apiserver::serve::tls_config(apiserver::serve::ServingCert::new(
        &serving.cert_pem,
        &serving.key_pem,
    )?)?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(apiserver::serve::serve_with(
        server.clone(),
        listener,
        tls,
        options,
        std::future::pending(),
    ));
    Ok((addr, ca))
}

/// Tasks running until [`Background::stop`]: the controllers and the scheduler, and whatever
/// else a benchmark adds.
pub struct Background {
    trigger: ShutdownTrigger,
    pub shutdown: Shutdown,
    tasks: Vec<JoinHandle<()>>,
}

impl Background {
    /// Starts the controllers and the scheduler over `server`.
    pub fn control_plane(server: &Arc<ApiServer>) -> Self {
        let (trigger, shutdown) = Shutdown::new();
        let mut bg = Background {
            trigger,
            shutdown,
            tasks: Vec::new(),
        };
        let s = bg.shutdown.clone();
        bg.spawn(controllers::run(
            clients(server),
            controllers::Options::default()
                .with_ca(server.control_plane().config().root_ca.cert_pem.clone()),
            s.clone().wait(),
        ));
        bg.spawn(scheduler::run(
            clients(server),
            scheduler::Options::default(),
            s.wait(),
        ));
        bg
    }

    /// Runs one more task until the stop (it should end on [`Background::shutdown`]).
    pub fn spawn<T, E>(&mut self, f: impl Future<Output = Result<T, E>> + Send + 'static)
    where
        T: Send + 'static,
        E: Send + 'static,
    {
        self.tasks.push(tokio::spawn(async move {
            let _ = f.await;
        }));
    }

    /// Triggers the shutdown and gives each task five seconds to end.
    pub async fn stop(self) {
        self.trigger.trigger();
        for t in self.tasks {
            let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
        }
    }
}

/// Registers the platform's admission, installs it with Cluster API's CRDs (the shared test
/// data) and runs its controllers (and the machine controllers) in `background`.
pub async fn platform(
    server: &Arc<ApiServer>,
    background: &mut Background,
) -> anyhow::Result<ClusterClients> {
    platform_with(server, background, platform::Options::default()).await
}

/// [`platform`] with the platform's `options`.
pub async fn platform_with(
    server: &Arc<ApiServer>,
    background: &mut Background,
    options: platform::Options,
) -> anyhow::Result<ClusterClients> {
    for (group, plural, v) in platform::admission::validators() {
        server
            .control_plane()
            .admission()
            .register(group, plural, v);
    }
    for (group, plural, m) in platform::admission::mutators() {
        server
            .control_plane()
            .admission()
            .register_mutator(group, plural, m);
    }
    let clients = clients(server);
    platform::install(&clients)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let capi = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/testdata/crds/cluster-api");
    platform::install_machines(&clients, Some(&capi))
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    background.spawn(platform::run_controllers(
        clients.clone(),
        options,
        background.shutdown.clone().wait(),
    ));
    Ok(clients)
}
