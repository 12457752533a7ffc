//! The `matryoshka` command.
//!
//! `matryoshka up` runs the whole control plane in the foreground: storage (embedded, or etcd
//! with `--etcd-servers`), the watch cache, the API server over HTTPS and the in-process
//! components. On first start it creates a CA and a serving certificate in the data directory;
//! once it serves it writes `<data-dir>/admin.conf`. `matryoshka image import` pushes image
//! archives into the registry that `up` serves at `/v2/`. `matryoshka pki rotate-ca` rotates a
//! logical cluster's CA in two phases; `matryoshka backup` backs a logical cluster up to a file
//! and restores it as a new one.

mod backup_cmd;
mod console_app;
mod image;
mod ingress_cmd;
mod ingress_image;
mod node_agent;
mod pki_cmd;
mod real_node;
mod s3;
mod up;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "matryoshka",
    version,
    about = "Managed Kubernetes-in-Kubernetes: many tenant clusters from one control plane"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs the control plane in the foreground.
    Up(Box<up::UpArgs>),
    /// Runs a node agent that joins a cluster: a real node (`--runtime cri`) or virtual
    /// nodes (`--virtual`).
    Node(Box<node_agent::NodeArgs>),
    /// Manages the images of the platform's registry.
    #[command(subcommand)]
    Image(image::ImageCommand),
    /// Backups of logical clusters: create one, restore one as a new cluster.
    #[command(subcommand)]
    Backup(backup_cmd::BackupCommand),
    /// Certificate authorities: rotating a logical cluster's CA.
    #[command(subcommand)]
    Pki(pki_cmd::PkiCommand),
    /// The tenant clusters' ingress controller (what the ingressNginx addon runs in a pod).
    IngressController(Box<ingress_cmd::IngressArgs>),
}

/// jemalloc rather than the C library's malloc: with its background threads it hands memory
/// freed for a while back to the system (its decay), so a platform that creates and deletes
/// clusters all day settles at what it holds instead of at its high-water mark (glibc's arenas
/// keep freed pages mapped; the churn soak of BENCHMARKS.md shows the difference).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("MATRYOSHKA_LOG")
                // hickory-server logs every DNS query at info.
                .unwrap_or_else(|_| "info,hickory_server=warn".into()),
        )
        .with_target(false)
        // Logs go to stderr, as kube-apiserver's and the kubelet's do; stdout is for output.
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    match cli.command {
        Command::Up(args) => rt.block_on(up::run(*args)),
        Command::Node(args) => rt.block_on(node_agent::run(*args)),
        Command::Image(cmd) => rt.block_on(image::run(cmd)),
        Command::Pki(cmd) => rt.block_on(pki_cmd::run(cmd)),
        Command::Backup(cmd) => rt.block_on(backup_cmd::run(cmd)),
        Command::IngressController(args) => rt.block_on(ingress_cmd::run(*args)),
    }
}
