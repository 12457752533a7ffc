//! The node agent's CRI mode: a kubelet-equivalent that runs real containers through a CRI
//! runtime (containerd), joining any cluster as a real node.
//!
//! The parts, in the order a pod meets them:
//!
//! - [`layout`]: where everything lives under the data directory (containerd's root and state,
//!   CNI configuration, pod directories, container logs).
//! - `containerd` supervisor: when nothing answers at the CRI endpoint, the agent starts its own
//!   `containerd` with a generated configuration and stops it on exit.
//! - `cri`: the CRI `runtime.v1` client (tonic over a unix socket) with typed errors.
//! - `cni`: the node's network configuration (bridge + host-local on the node's podCIDR +
//!   portmap + loopback), written as a network add-on would.
//! - pod workers: a watch of the node's pods and one worker per pod that syncs what the API
//!   asks for with what the runtime runs (sandbox, init containers, sidecars, restarts with
//!   back-off, probes, hooks, graceful termination), and writes the status as the kubelet
//!   computes it.
//! - node status: registration, capacity and allocatable, conditions, node info, images,
//!   the Lease.
//! - What a container sees is built by [`env`], [`volumes`], [`dns`] and [`security`]
//!   (environment, mounts, `/etc/hosts` and `resolv.conf`, security context).
//! - [`api`]: what the kubelet's HTTP server (logs, exec, attach, port-forward, stats) asks
//!   of the agent, as the [`api::KubeletApi`] trait.
//!
//! **Stopping the agent leaves pods running**, as stopping a kubelet does: containers belong
//! to their shims, which outlive containerd; the next start adopts them (identity from the
//! CRI labels the kubelet sets). Draining a node is deleting its pods first; tests stop the
//! agent with [`Teardown::RemovePods`], which removes every sandbox before it exits.

pub mod agent;
pub mod api;
pub mod backoff;
pub mod cgroups;
pub mod cni;
pub mod config;
pub mod containerd;
pub mod context;
pub mod cri;
pub mod dns;
pub mod env;
pub mod events;
pub mod hooks;
pub mod host;
pub mod images;
pub mod labels;
pub mod layout;
pub mod machine;
pub mod node_status;
pub mod pods;
pub mod probes;
pub mod resources;
pub mod runtime_state;
pub mod security;
pub mod server;
pub mod server_api;
pub mod stats;
pub mod status;
pub mod summary;
pub mod volumes;
pub mod worker;

pub use api::KubeletApi;
pub use config::{KubeletConfig, KubeletTiming};
pub use context::PodContext;
pub use layout::Layout;

use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use agent::{Agent, NodeFacts};
use containerd::{Containerd, ContainerdError};
use cri::{CriClient, CriError};

/// Why the agent could not start.
#[derive(Debug, thiserror::Error)]
pub enum KubeletError {
    #[error("containerd: {0}")]
    Containerd(#[from] ContainerdError),
    #[error("the container runtime: {0}")]
    Cri(#[from] CriError),
    #[error("{0}")]
    Node(#[from] crate::Error),
    #[error("the kubelet API: {0}")]
    Server(#[from] server::ServerError),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

/// A running CRI node agent.
pub struct Kubelet {
    agent: Arc<Agent>,
    containerd: Mutex<Option<Containerd>>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    api: Arc<server_api::AgentApi>,
    server: Mutex<Option<server::RunningServer>>,
}

fn containerd_is_ours(endpoint: &str, layout: &Layout) -> bool {
    cri::socket_path(endpoint).is_ok_and(|p| p == layout.containerd_socket())
}

/// Whether a CRI runtime answers at `endpoint`.
pub async fn runtime_answers(endpoint: &str) -> bool {
    match CriClient::new(endpoint) {
        Ok(c) => c.ping(Duration::from_secs(2)).await.is_ok(),
        Err(_) => false,
    }
}

impl Kubelet {
    /// Starts the agent for the cluster `client` addresses: the runtime (its own containerd
    /// when nothing answers at the configured endpoint), the Node, the pod network, the pod
    /// watch, the relist and the heartbeats.
    pub async fn start(
        client: kube::Client,
        mut config: KubeletConfig,
    ) -> Result<Kubelet, KubeletError> {
        let layout = Layout::new(&config.data_dir);
        std::fs::create_dir_all(layout.root()).map_err(|e| KubeletError::Io {
            what: format!("creating {}", layout.root().display()),
            source: e,
        })?;
        let own_endpoint = format!("unix://{}", layout.containerd_socket().display());
        let (endpoint, containerd) = if runtime_answers(&config.cri_endpoint).await {
            tracing::info!(endpoint = %config.cri_endpoint, "using the container runtime that answers there");
            (config.cri_endpoint.clone(), None)
        } else if runtime_answers(&own_endpoint).await {
            tracing::info!(endpoint = %own_endpoint, "using the containerd a previous agent left running");
            (own_endpoint, None)
        } else {
            tracing::info!(endpoint = %config.cri_endpoint, "no container runtime answers; starting containerd");
            let c = Containerd::start(&layout, &config.containerd).await?;
            (c.endpoint(), Some(c))
        };
        let cri = CriClient::new(&endpoint)?;
        let version = cri.version().await?;
        if containerd_is_ours(&endpoint, &layout)
            && matches!(
                cri.image_status(&config.containerd.sandbox_image).await,
                Ok(None)
            )
        {
            tracing::warn!(
                image = %config.containerd.sandbox_image,
                "the sandbox image is not present locally: pods cannot start until it is imported"
            );
        }
        let runtime_version = format!(
            "{}://{}",
            version.runtime_name,
            version.runtime_version.trim_start_matches('v')
        );
        let git_version = client
            .apiserver_version()
            .await
            .map(|v| v.git_version)
            .unwrap_or_else(|_| "v1.33.0".to_string());
        let major_minor = git_version
            .trim_start_matches('v')
            .splitn(3, '.')
            .take(2)
            .collect::<Vec<_>>()
            .join(".");
        // The kubelet API's port is bound first: the Node reports it in daemonEndpoints.
        let listener = server::bind(std::net::SocketAddr::new(
            config.kubelet_address,
            config.kubelet_port,
        ))
        .await?;
        if let Ok(addr) = listener.local_addr() {
            config.kubelet_port = addr.port();
        }
        let machine = machine::read_machine(layout.root());
        let sizing = node_status::sizing(&config, &machine)?;
        let (node_uid, pod_cidr) = node_status::register(&client, &config, &sizing).await?;
        // The network add-on's part: the CNI list on the node's subnet.
        if let Some(cidr) = pod_cidr {
            let conf_dir = if containerd.is_some() {
                layout.cni_conf_dir()
            } else {
                config
                    .cni_conf_dir
                    .clone()
                    .unwrap_or_else(|| layout.cni_conf_dir())
            };
            let net = cni::PodNetwork {
                name: format!("matryoshka-{}", config.bridge),
                bridge: config.bridge.clone(),
                subnet: cidr,
                ipam_dir: layout.cni_ipam_dir(),
                mtu: 0,
                masquerade: config.cni_masquerade,
            };
            cni::write(&conf_dir, &net).map_err(|e| KubeletError::Io {
                what: format!("writing the CNI configuration in {}", conf_dir.display()),
                source: e,
            })?;
            if let Err(e) = cri.update_runtime_config(&cidr.to_string()).await {
                tracing::debug!(error = %e, "the runtime did not take the pod CIDR");
            }
        }
        let node_ip = config.node_ip.unwrap_or_else(machine::default_ip);
        let allocatable: std::collections::BTreeMap<_, _> = sizing
            .allocatable()
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| {
                (
                    k,
                    k8s_openapi::apimachinery::pkg::api::resource::Quantity(v),
                )
            })
            .collect();
        let objects: Arc<dyn volumes::ObjectSource> =
            Arc::new(volumes::ApiSource::new(client.clone()));
        let recorder = events::Recorder::start(client.clone(), &config.node_name);
        let (shutdown, _) = watch::channel(false);
        let (pods_synced, _) = watch::channel(false);
        let backoff =
            backoff::Backoff::new(config.timing.backoff_initial, config.timing.backoff_max);
        let image_backoff =
            backoff::Backoff::new(config.timing.backoff_initial, config.timing.backoff_max);
        let agent = Arc::new_cyclic(|weak: &std::sync::Weak<Agent>| {
            let w = weak.clone();
            let wake: probes::Waker = Arc::new(move |uid: &str| {
                if let Some(a) = w.upgrade() {
                    a.wake(uid);
                }
            });
            Agent {
                layout: layout.clone(),
                client: client.clone(),
                reader: runtime_state::RuntimeReader::new(cri.clone()),
                images: images::ImageManager::new(
                    cri.clone(),
                    client.clone(),
                    image_backoff,
                    recorder.clone(),
                ),
                probes: probes::ProbeManager::new(
                    cri.clone(),
                    recorder.clone(),
                    major_minor.clone(),
                    wake,
                ),
                recorder: recorder.clone(),
                backoff,
                volumes: volumes::VolumeManager::new(
                    volumes::VolumeConfig {
                        root_dir: layout.root().to_path_buf(),
                        node_allocatable: allocatable.clone(),
                    },
                    objects.clone(),
                ),
                objects: objects.clone(),
                services: RwLock::new(None),
                dns: dns::DnsSettings {
                    cluster_dns: config.dns.servers.iter().map(|s| s.to_string()).collect(),
                    cluster_domain: config.dns.domain.clone(),
                    resolv_conf: Some(config.dns.host_resolv_conf.clone()),
                    node_ips: vec![node_ip.to_string()],
                },
                security: security::SecurityOptions {
                    seccomp_default: false,
                    seccomp_profile_root: layout.root().join("seccomp"),
                },
                facts: RwLock::new(NodeFacts {
                    host_ips: vec![node_ip.to_string()],
                    allocatable,
                    memory_bytes: sizing.memory_bytes.unwrap_or(0.0) as i64,
                    pod_cidr,
                }),
                pods: RwLock::new(Default::default()),
                workers: Mutex::new(Default::default()),
                cleaning: Mutex::new(Default::default()),
                pods_synced,
                oom_floor: resources::oom_score_floor(),
                version: major_minor.clone(),
                git_version: git_version.clone(),
                shutdown,
                cri: cri.clone(),
                config,
            }
        });
        let client_ca_pem = match agent.config.client_ca_pem.clone() {
            Some(pem) => Some(pem),
            None => cluster_ca(&client).await,
        };
        let api = Arc::new(server_api::AgentApi::new(agent.clone()));
        let serving =
            server::ServingCert::self_signed(&agent.config.node_name, &[node_ip.to_string()])
                .map_err(server::ServerError::from)?;
        let kubelet_api = server::start_on(
            listener,
            server::Config {
                listen: std::net::SocketAddr::new(
                    agent.config.kubelet_address,
                    agent.config.kubelet_port,
                ),
                serving,
                client_ca_pem,
                anonymous: false,
                limits: server::Limits::default(),
            },
            api.clone(),
            Arc::new(server::KubeReviewer::new(client.clone())),
        )?;
        let identity = node_status::NodeIdentity {
            machine,
            sizing,
            runtime_version,
        };
        let mut tasks = vec![
            tokio::spawn(node_status::run(agent.clone(), identity, node_uid)),
            tokio::spawn(pods::watch(agent.clone())),
            tokio::spawn(pods::watch_services(agent.clone())),
            tokio::spawn(pods::relist(agent.clone())),
        ];
        if agent.config.server_tls_bootstrap {
            let slot = kubelet_api.serving();
            let mut stopping = agent.shutdown.subscribe();
            let keep = crate::bootstrap::keep_serving_certificate(
                client.clone(),
                agent.config.node_name.clone(),
                vec![agent.config.node_name.clone()],
                vec![node_ip.to_string()],
                move |issued| {
                    slot.replace(&server::ServingCert {
                        cert_pem: issued.cert_pem.clone(),
                        key_pem: issued.key_pem.clone(),
                    })
                    .map_err(|e| e.to_string())
                },
            );
            // Like every task of the agent, it ends when the agent stops.
            tasks.push(tokio::spawn(async move {
                tokio::select! {
                    () = keep => {}
                    _ = stopping.wait_for(|s| *s) => {}
                }
            }));
        }
        tracing::info!(node = %agent.config.node_name, endpoint = %endpoint, "the node agent runs pods through CRI");
        Ok(Kubelet {
            api,
            server: Mutex::new(Some(kubelet_api)),
            agent,
            containerd: Mutex::new(containerd),
            tasks: Mutex::new(tasks),
        })
    }

    /// What the kubelet HTTP server serves.
    pub fn api(&self) -> Arc<dyn KubeletApi> {
        self.api.clone()
    }

    /// Where the kubelet API listens.
    pub fn api_addr(&self) -> Option<std::net::SocketAddr> {
        self.server.lock().as_ref().map(|s| s.addr())
    }

    /// The CRI client of the runtime in use.
    pub fn cri(&self) -> CriClient {
        self.agent.cri.clone()
    }

    pub fn node_name(&self) -> &str {
        &self.agent.config.node_name
    }

    pub fn layout(&self) -> &Layout {
        &self.agent.layout
    }

    /// The process ID of the agent's own containerd, if it runs one.
    pub fn containerd_pid(&self) -> Option<u32> {
        self.containerd.lock().as_ref().and_then(|c| c.pid())
    }

    /// Stops the agent: its tasks and pod workers; with [`Teardown::RemovePods`] every
    /// sandbox first; then its own containerd (containers keep running under their shims
    /// otherwise).
    pub async fn shutdown(self) {
        let teardown = self.agent.config.teardown;
        self.stop(teardown).await;
    }

    /// Stops the agent with `teardown` whatever its configuration says.
    pub async fn stop(self, teardown: Teardown) {
        let agent = self.agent.clone();
        agent.shutdown.send_replace(true);
        let kubelet_api = self.server.lock().take();
        if let Some(s) = kubelet_api {
            s.stop().await;
        }
        let tasks: Vec<JoinHandle<()>> = std::mem::take(&mut *self.tasks.lock());
        for t in tasks {
            let _ = t.await;
        }
        let workers: Vec<_> = agent.workers.lock().drain().map(|(_, w)| w.task).collect();
        for t in workers {
            let _ = t.await;
        }
        if teardown == Teardown::RemovePods
            && let Ok(sandboxes) = agent.cri.list_pod_sandboxes().await
        {
            {
                let mut uids: Vec<String> = sandboxes
                    .iter()
                    .filter_map(|s| s.labels.get(labels::POD_UID).cloned())
                    .collect();
                uids.sort();
                uids.dedup();
                for uid in uids {
                    worker::kill::remove_pod(&agent, &uid, None).await;
                }
            }
        }
        let containerd = self.containerd.lock().take();
        if let Some(mut c) = containerd {
            c.stop().await;
        }
        tracing::info!(node = %agent.config.node_name, "the node agent stopped");
    }

    /// Kills the agent's own containerd at once (tests: a runtime crash); the agent goes on
    /// and reconnects when a containerd answers again.
    pub async fn kill_containerd(&self) {
        let taken = self.containerd.lock().take();
        if let Some(mut c) = taken {
            c.kill().await;
        }
    }

    /// Starts the agent's own containerd again after [`Self::kill_containerd`].
    pub async fn restart_containerd(&self) -> Result<(), KubeletError> {
        let c = Containerd::start(&self.agent.layout, &self.agent.config.containerd).await?;
        *self.containerd.lock() = Some(c);
        Ok(())
    }
}

/// How long the agent waits for the cluster's CA bundle when none is configured.
const CLUSTER_CA_WAIT: Duration = Duration::from_secs(30);

/// The cluster's CA bundle, from the `kube-root-ca.crt` ConfigMap of `kube-system` (every
/// cluster publishes it to every namespace), waiting up to [`CLUSTER_CA_WAIT`] for it.
async fn cluster_ca(client: &kube::Client) -> Option<String> {
    use k8s_openapi::api::core::v1::ConfigMap;
    let api: kube::Api<ConfigMap> = kube::Api::namespaced(client.clone(), "kube-system");
    let deadline = tokio::time::Instant::now() + CLUSTER_CA_WAIT;
    loop {
        match api.get_opt("kube-root-ca.crt").await {
            Ok(Some(cm)) => {
                if let Some(pem) = cm.data.and_then(|mut d| d.remove("ca.crt")) {
                    return Some(pem);
                }
            }
            // A node identity may not read it (only what its pods reference): waiting
            // changes nothing.
            Err(kube::Error::Api(e)) if e.code == 403 => {
                tracing::warn!(
                    "kube-root-ca.crt may not be read with this identity (give --client-ca-file): the kubelet API takes no client certificates"
                );
                return None;
            }
            _ => {}
        }
        if tokio::time::Instant::now() >= deadline {
            tracing::warn!(
                "no kube-root-ca.crt in kube-system: the kubelet API takes no client certificates"
            );
            return None;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// What stopping the agent does to the pods it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Teardown {
    /// Leave them running (a kubelet restart); the next agent on the same data directory
    /// adopts them.
    #[default]
    KeepPods,
    /// Stop and remove every pod sandbox first (a machine being retired, and tests).
    RemovePods,
}

/// Runs a CRI node for the cluster `client` addresses until `shutdown` completes
/// (`matryoshka node --runtime cri`, and the real node of `matryoshka up`).
pub async fn run_until(
    client: kube::Client,
    config: KubeletConfig,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), KubeletError> {
    let kubelet = Kubelet::start(client, config).await?;
    shutdown.await;
    kubelet.shutdown().await;
    Ok(())
}
