//! `matryoshka ingress-controller`: the tenant clusters' ingress controller (the `ingress`
//! crate), as the `ingressNginx` addon's DaemonSet runs it — in a pod, with the pod's
//! service account (in-cluster configuration), or from a kubeconfig.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use anyhow::Context;

#[derive(clap::Args, Debug)]
pub struct IngressArgs {
    /// The IngressClass served.
    #[arg(long, default_value = ingress::CLASS)]
    pub ingress_class: String,
    /// The controller value of the IngressClass served.
    #[arg(long, default_value = ingress::CONTROLLER)]
    pub controller_class: String,
    /// Also serve Ingresses that name no class.
    #[arg(long)]
    pub watch_ingress_without_class: bool,
    /// `namespace/name` of the Service whose address is published in the Ingresses' status.
    #[arg(long)]
    pub publish_service: Option<String>,
    /// The Lease electing the status writer (in the pod's namespace).
    #[arg(long, default_value = "ingress-nginx-leader")]
    pub election_id: String,
    #[arg(long, default_value_t = 80)]
    pub http_port: u16,
    #[arg(long, default_value_t = 443)]
    pub https_port: u16,
    /// The address listened on.
    #[arg(long, default_value_t = IpAddr::V6(Ipv6Addr::UNSPECIFIED))]
    pub bind_address: IpAddr,
    /// A kubeconfig instead of the pod's in-cluster configuration.
    #[arg(long)]
    pub kubeconfig: Option<std::path::PathBuf>,
}

pub async fn run(args: IngressArgs) -> anyhow::Result<()> {
    let config = match &args.kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?
        }
        None => kube::Config::incluster().context("the in-cluster configuration")?,
    };
    let clients = runtime::client::ClusterClients::new(Arc::new(runtime::client::Kubeconfig::new(
        config, false,
    )))
    .with_user_agent("nginx-ingress-controller");
    let publish_service = match &args.publish_service {
        Some(s) => Some(
            s.split_once('/')
                .map(|(ns, n)| (ns.to_string(), n.to_string()))
                .context("--publish-service is namespace/name")?,
        ),
        None => None,
    };
    let namespace = std::env::var("POD_NAMESPACE")
        .ok()
        .or_else(|| {
            std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace").ok()
        })
        .unwrap_or_else(|| "default".into());
    let identity =
        std::env::var("POD_NAME").unwrap_or_else(|_| format!("ingress-{}", std::process::id()));
    let mut election = runtime::leader::LeaderConfig::named(args.election_id.clone(), identity);
    election.namespace = namespace;
    let options = ingress::Options {
        class: args.ingress_class,
        controller: args.controller_class,
        watch_without_class: args.watch_ingress_without_class,
        publish_service,
        http: SocketAddr::new(args.bind_address, args.http_port),
        https: SocketAddr::new(args.bind_address, args.https_port),
        election: Some(election),
    };
    tracing::info!(http = %options.http, https = %options.https, class = %options.class, "serving Ingresses");
    ingress::run(clients, options, async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing a SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    })
    .await?;
    Ok(())
}
