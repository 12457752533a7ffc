//! A DNS server for one cluster: its configuration, its UDP and TCP sockets on hickory's
//! `ServerFuture`, and [`ClusterDns`], the server together with the informer that feeds it.
//!
//! One [`Server`] answers from exactly one [`View`]; every socket it listens on serves that
//! view and no other. A process that serves several clusters runs one server per cluster,
//! each on its own addresses.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hickory_server::ServerFuture;
use tokio::net::{TcpListener, UdpSocket};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::error::{Error, Result};
use crate::forward::{self, Forwarder};
use crate::handler::Handler;
use crate::view::View;
use crate::zone::{self, PodMode, Zone};

/// Where forwarded queries go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Upstream {
    /// The `nameserver`s of a resolv.conf (the node's `/etc/resolv.conf` by default), read
    /// at start.
    ResolvConf(PathBuf),
    /// These servers, in order.
    Servers(Vec<SocketAddr>),
    /// No forwarding: names outside the cluster are refused.
    Disabled,
}

/// A cluster DNS server's settings. Defaults follow kubeadm's CoreDNS: `cluster.local`,
/// TTL 5 s, `pods insecure`, forwarding to `/etc/resolv.conf` with 1000 queries in flight.
#[derive(Debug, Clone)]
pub struct Config {
    /// The cluster domain (kubelet `clusterDomain`).
    pub zone: String,
    /// The TTL of every answer, at most 3600 s.
    pub ttl: u32,
    pub pods: PodMode,
    pub upstream: Upstream,
    /// Addresses to serve on, each over UDP and TCP (port 0: any free port, the same for
    /// both).
    pub listen: Vec<SocketAddr>,
    /// How long an idle TCP connection is kept.
    pub tcp_timeout: Duration,
    /// How long one upstream has to answer.
    pub forward_timeout: Duration,
    pub max_concurrent_forwards: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            zone: zone::DEFAULT_ZONE.into(),
            ttl: zone::DEFAULT_TTL,
            pods: PodMode::Insecure,
            upstream: Upstream::ResolvConf(forward::RESOLV_CONF.into()),
            listen: vec![SocketAddr::from(([0, 0, 0, 0], 53))],
            tcp_timeout: Duration::from_secs(10),
            forward_timeout: forward::DEFAULT_TIMEOUT,
            max_concurrent_forwards: forward::DEFAULT_MAX_CONCURRENT,
        }
    }
}

/// Whether forwarding to `upstream` would send queries back to a server on `listen`.
fn loops(listen: &[SocketAddr], upstream: SocketAddr) -> bool {
    listen.iter().any(|l| {
        l == &upstream
            || (l.ip().is_unspecified()
                && l.port() == upstream.port()
                && (upstream.ip().is_loopback() || upstream.ip().is_unspecified()))
    })
}

impl Config {
    fn forwarder(&self) -> Result<Option<Forwarder>> {
        let servers = match &self.upstream {
            Upstream::Disabled => return Ok(None),
            Upstream::Servers(s) => s.clone(),
            Upstream::ResolvConf(path) => forward::read_resolv_conf(path)?,
        };
        if let Some(s) = servers.iter().find(|s| loops(&self.listen, **s)) {
            return Err(Error::Config(format!(
                "upstream {s} is this server itself: queries would loop"
            )));
        }
        if servers.is_empty() {
            tracing::warn!(upstream = ?self.upstream, "no upstream resolver: names outside the cluster are refused");
            return Ok(None);
        }
        Ok(Some(Forwarder::new(
            servers,
            self.forward_timeout,
            self.max_concurrent_forwards,
        )))
    }
}

/// A running DNS server of one cluster's view.
#[derive(Debug)]
pub struct Server {
    addrs: Vec<SocketAddr>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

/// Binds UDP and TCP on `addr`; for port 0, on one port free for both.
async fn bind(addr: SocketAddr) -> Result<(UdpSocket, TcpListener)> {
    let bind_err = |proto, source| Error::Bind {
        proto,
        addr,
        source,
    };
    if addr.port() != 0 {
        let udp = UdpSocket::bind(addr)
            .await
            .map_err(|e| bind_err("udp", e))?;
        let tcp = TcpListener::bind(addr)
            .await
            .map_err(|e| bind_err("tcp", e))?;
        return Ok((udp, tcp));
    }
    let mut last = None;
    for _ in 0..16 {
        let udp = UdpSocket::bind(addr)
            .await
            .map_err(|e| bind_err("udp", e))?;
        let port = udp.local_addr().map_err(|e| bind_err("udp", e))?.port();
        match TcpListener::bind(SocketAddr::new(addr.ip(), port)).await {
            Ok(tcp) => return Ok((udp, tcp)),
            Err(e) => last = Some(e),
        }
    }
    Err(bind_err(
        "tcp",
        last.unwrap_or_else(|| std::io::Error::other("no free port")),
    ))
}

impl Server {
    /// Starts serving `view` as `config` says. Returns once every socket is bound.
    pub async fn start(view: Arc<View>, config: &Config) -> Result<Server> {
        if config.listen.is_empty() {
            return Err(Error::Config("no listen address".into()));
        }
        let zone = Zone::new(&config.zone, config.ttl, config.pods)?;
        let forwarder = config.forwarder()?;
        let mut server = ServerFuture::new(Handler::new(zone, view, forwarder));
        let mut addrs = Vec::new();
        for addr in &config.listen {
            let (udp, tcp) = bind(*addr).await?;
            addrs.push(udp.local_addr().map_err(|source| Error::Bind {
                proto: "udp",
                addr: *addr,
                source,
            })?);
            server.register_socket(udp);
            server.register_listener(tcp, config.tcp_timeout);
        }
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            tokio::select! {
                r = server.block_until_done() => {
                    if let Err(e) = r {
                        tracing::error!(error = %e, "DNS server stopped");
                    }
                }
                _ = stopped => {
                    if let Err(e) = server.shutdown_gracefully().await {
                        tracing::debug!(error = %e, "DNS server shutdown");
                    }
                }
            }
        });
        tracing::info!(?addrs, "cluster DNS serving");
        Ok(Server {
            addrs,
            stop: Some(stop),
            task: Some(task),
        })
    }

    /// The addresses served (UDP and TCP on each), with ports resolved.
    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// Stops serving and closes the sockets.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// The DNS of one logical cluster: a [`View`] fed by that cluster's watches and a [`Server`]
/// answering from it.
#[derive(Debug)]
pub struct ClusterDns {
    view: Arc<View>,
    server: Server,
    informer: JoinHandle<Result<()>>,
}

impl ClusterDns {
    /// Starts watching the cluster `client` addresses and serving its names. `client` must
    /// address one cluster (`/clusters/<name>` or a plain Kubernetes endpoint), never the
    /// cross-cluster view. Queries are answered from the moment this returns (names in the
    /// zone with SERVFAIL until the first lists are in); call [`ClusterDns::synced`] before
    /// advertising the server (publishing its endpoint).
    pub async fn start(client: kube::Client, config: Config) -> Result<ClusterDns> {
        let view = Arc::new(View::new());
        let server = Server::start(view.clone(), &config).await?;
        let informer = tokio::spawn(crate::informer::run(client, view.clone(), config.pods));
        Ok(ClusterDns {
            view,
            server,
            informer,
        })
    }

    pub fn view(&self) -> &Arc<View> {
        &self.view
    }

    /// The addresses served.
    pub fn addrs(&self) -> &[SocketAddr] {
        self.server.addrs()
    }

    /// Waits until every watch has listed the cluster once, at most `timeout`.
    pub async fn synced(&self, timeout: Duration) -> Result<()> {
        tokio::time::timeout(timeout, self.view.synced())
            .await
            .map_err(|_| Error::SyncTimeout(timeout))
    }

    /// Whether the informer has stopped (it stops only on [`Error::CrossCluster`]).
    pub fn informer_finished(&self) -> bool {
        self.informer.is_finished()
    }

    /// Stops the server and the watches.
    pub async fn shutdown(self) {
        self.informer.abort();
        self.server.shutdown().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forwarding_to_the_server_itself_is_refused() {
        let listen = vec!["0.0.0.0:53".parse().unwrap()];
        assert!(loops(&listen, "127.0.0.1:53".parse().unwrap()));
        assert!(!loops(&listen, "10.0.0.2:53".parse().unwrap()));
        let listen = vec!["10.0.0.5:53".parse().unwrap()];
        assert!(loops(&listen, "10.0.0.5:53".parse().unwrap()));
        assert!(!loops(&listen, "127.0.0.1:53".parse().unwrap()));
        let c = Config {
            listen,
            upstream: Upstream::Servers(vec!["10.0.0.5:53".parse().unwrap()]),
            ..Config::default()
        };
        assert!(matches!(c.forwarder(), Err(Error::Config(_))));
    }
}
