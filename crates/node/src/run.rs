//! Entry points: a group of virtual nodes that runs until shutdown, in process (for
//! `matryoshka up --virtual-nodes N`, over the in-memory transport) or out of process from a
//! kubeconfig (`matryoshka node --virtual`), against Matryoshka or any Kubernetes cluster.

use std::future::Future;
use std::path::PathBuf;

use crate::agent::VirtualNodes;
use crate::config::{NodeTemplate, Options};
use crate::error::{Error, Result};
use crate::sizing::SizingInput;

/// The default node name prefix: nodes are `virtual-node-0`, `virtual-node-1`, ...
pub const DEFAULT_NAME_PREFIX: &str = "virtual-node-";

/// `count` nodes named `<name_prefix><i>`, all from one template.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeGroup {
    pub name_prefix: String,
    pub count: usize,
    pub template: NodeTemplate,
}

impl NodeGroup {
    /// `count` nodes of `instance_type` with `roles`.
    pub fn new(name_prefix: &str, count: usize, instance_type: &str, roles: &[&str]) -> Self {
        NodeGroup {
            name_prefix: name_prefix.to_string(),
            count,
            template: NodeTemplate::new(instance_type, roles),
        }
    }
}

/// Registers the group's nodes in the cluster `client` addresses and runs them until
/// `shutdown` completes; then stops their heartbeats (the Nodes stay, as a stopped kubelet's
/// do). In process, `client` comes from
/// `runtime::client::ClusterClients::in_memory(apiserver::local::LocalService::system(server)).cluster(name)`.
pub async fn run_virtual_nodes(
    client: kube::Client,
    group: &NodeGroup,
    options: Options,
    shutdown: impl Future<Output = ()>,
) -> Result<()> {
    let nodes = VirtualNodes::start(client, options).await?;
    if let Err(e) = nodes
        .add_many(&group.name_prefix, group.count, &group.template)
        .await
    {
        nodes.shutdown().await;
        return Err(e);
    }
    tracing::info!(
        count = group.count,
        prefix = %group.name_prefix,
        instance_type = group.template.sizing.instance_type.as_deref().unwrap_or(""),
        "virtual nodes are running"
    );
    shutdown.await;
    nodes.shutdown().await;
    tracing::info!("virtual nodes stopped");
    Ok(())
}

/// What `matryoshka node --virtual` is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliArgs {
    /// The kubeconfig of the cluster to join (its server URL addresses the logical cluster).
    pub kubeconfig: PathBuf,
    /// A kubeconfig context other than the current one.
    pub context: Option<String>,
    pub count: usize,
    pub name_prefix: String,
    pub instance_type: String,
    pub roles: Vec<String>,
    /// The worker disk (`ephemeral-storage` capacity); 20Gi when unset.
    pub disk_size: Option<String>,
}

impl CliArgs {
    /// The node group the arguments describe.
    pub fn group(&self) -> NodeGroup {
        NodeGroup {
            name_prefix: self.name_prefix.clone(),
            count: self.count,
            template: NodeTemplate {
                sizing: SizingInput {
                    disk_size: self.disk_size.clone(),
                    ..SizingInput::instance_type(&self.instance_type)
                },
                roles: self.roles.clone(),
                ..NodeTemplate::default()
            },
        }
    }
}

/// A client for the kubeconfig at `path` (and `context`, or the current one), following the
/// file's client certificate as the platform renews it ([`runtime::renewing`]).
pub async fn client_from_kubeconfig(
    path: &std::path::Path,
    context: Option<&str>,
) -> Result<kube::Client> {
    runtime::renewing::client(path, context)
        .await
        .map_err(|e| Error::Kubeconfig {
            path: path.display().to_string(),
            reason: e.to_string(),
        })
}

/// `matryoshka node --virtual`: runs the nodes the arguments describe until `shutdown`.
pub async fn run_cli(args: CliArgs, shutdown: impl Future<Output = ()>) -> Result<()> {
    let client = client_from_kubeconfig(&args.kubeconfig, args.context.as_deref()).await?;
    run_virtual_nodes(client, &args.group(), Options::default(), shutdown).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_arguments_make_a_node_group() {
        let args = CliArgs {
            kubeconfig: "k".into(),
            context: None,
            count: 3,
            name_prefix: "vn-".into(),
            instance_type: "u1.large".into(),
            roles: vec!["worker".into()],
            disk_size: Some("40Gi".into()),
        };
        let g = args.group();
        assert_eq!((g.name_prefix.as_str(), g.count), ("vn-", 3));
        assert_eq!(g.template.sizing.instance_type.as_deref(), Some("u1.large"));
        assert_eq!(g.template.sizing.disk_size.as_deref(), Some("40Gi"));
        assert_eq!(g.template.roles, vec!["worker".to_string()]);
    }

    #[tokio::test]
    async fn a_missing_kubeconfig_is_reported_with_its_path() {
        let Err(e) = client_from_kubeconfig(std::path::Path::new("/nonexistent/kc"), None).await
        else {
            panic!("a missing file gives a client");
        };
        assert!(
            e.to_string().starts_with("kubeconfig /nonexistent/kc:"),
            "{e}"
        );
    }
}
