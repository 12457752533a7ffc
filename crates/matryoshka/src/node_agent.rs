//! `matryoshka node`: runs node agents that join a cluster from a kubeconfig. Only virtual
//! nodes exist so far (`--virtual`: KWOK-style, no containers run).

use std::path::PathBuf;

/// Flags of `matryoshka node`.
#[derive(clap::Args, Debug, Clone)]
pub struct NodeArgs {
    /// Run virtual nodes: they register, heartbeat and report pods as running, but run no
    /// containers.
    #[arg(long = "virtual")]
    pub virtual_nodes: bool,
    /// The kubeconfig of the cluster to join (a logical cluster's kubeconfig points at it).
    #[arg(long)]
    pub kubeconfig: PathBuf,
    /// The kubeconfig context to use instead of the current one.
    #[arg(long)]
    pub context: Option<String>,
    /// How many nodes to run.
    #[arg(long, default_value_t = 1)]
    pub count: usize,
    /// Nodes are named `<prefix>0`, `<prefix>1`, ...
    #[arg(long, default_value = node::run::DEFAULT_NAME_PREFIX)]
    pub name_prefix: String,
    /// The instance type that sizes each node (`u1.medium`, `cx1.2xlarge`, `gn1.xlarge`...).
    #[arg(long, default_value = "u1.medium")]
    pub instance_type: String,
    /// Node roles (comma-separated): each becomes `node-role.kubernetes.io/<role>`.
    #[arg(long, value_delimiter = ',')]
    pub roles: Vec<String>,
    /// The node disk (ephemeral-storage capacity), 20Gi by default.
    #[arg(long)]
    pub disk_size: Option<String>,
}

pub async fn run(args: NodeArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.virtual_nodes,
        "only virtual nodes exist so far: pass --virtual"
    );
    let cli = node::CliArgs {
        kubeconfig: args.kubeconfig,
        context: args.context,
        count: args.count,
        name_prefix: args.name_prefix,
        instance_type: args.instance_type,
        roles: args.roles,
        disk_size: args.disk_size,
    };
    node::run_cli(cli, shutdown_signal()).await?;
    Ok(())
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: stopping the nodes"),
        _ = tokio::signal::ctrl_c() => tracing::info!("interrupt: stopping the nodes"),
    }
}
