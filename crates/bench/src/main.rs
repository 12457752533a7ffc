//! `bench`: Matryoshka's benchmarks. Each prints its figures next to a peer measured in the
//! same run (a real etcd, the raw store) and the ratio between them.
//!
//! Usage: `cargo run --release -p bench -- <storage|api|admission|isolation|crds|dns|kubelet [--pods N] [--density M]|proxy|clusters [--count N] [--parallel P]|churn [--cycles N] [--count N] [--server-only] [--pause S] [--tenant-clusters]|workloads [--nodes N] [--pods P] [--clusters C]|platform [--count N] [--parallel P]|machines [--pods N] [--roll N] [--provider process]|tenant-services [--count N]|ingress [--connections N]|oidc|console [--clusters N]|syncer [--clusters N]|backup [--objects N]> [--quick]`.

mod admission_bench;
mod api_bench;
mod backup_bench;
mod churn_bench;
mod clusters_bench;
mod console_bench;
mod crds_bench;
mod dns_bench;
mod ingress_bench;
mod isolation_bench;
mod kubelet_bench;
mod machines_bench;
mod oidc_bench;
mod platform_bench;
mod process_platform;
mod proxy_bench;
mod report;
mod setup;
mod storage_bench;
mod syncer_bench;
mod tenant_services_bench;
mod workloads_bench;

/// jemalloc rather than the C library's malloc: with its background threads it hands memory
/// freed for a while back to the system (its decay), so a platform that creates and deletes
/// clusters all day settles at what it holds instead of at its high-water mark (glibc's arenas
/// keep freed pages mapped; the churn soak of BENCHMARKS.md shows the difference).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> anyhow::Result<()> {
    // Warnings (a dropped watch, a failing reconcile) explain a stalled run; RUST_LOG overrides.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    match args.first().map(String::as_str) {
        Some("storage") => rt.block_on(storage_bench::run(quick)),
        Some("api") => rt.block_on(api_bench::run(quick)),
        Some("admission") => rt.block_on(admission_bench::run(quick)),
        Some("backup") => {
            let objects = args
                .iter()
                .position(|a| a == "--objects")
                .and_then(|i| args.get(i + 1))
                .and_then(|v| v.parse().ok());
            rt.block_on(backup_bench::run(quick, objects))
        }
        Some("isolation") => rt.block_on(isolation_bench::run(quick)),
        Some("crds") => rt.block_on(crds_bench::run(quick)),
        Some("dns") => rt.block_on(dns_bench::run(quick)),
        Some("proxy") => rt.block_on(proxy_bench::run(quick)),
        Some("oidc") => rt.block_on(oidc_bench::run(quick)),
        Some("syncer") => {
            let clusters = args
                .iter()
                .position(|a| a == "--clusters")
                .and_then(|i| args.get(i + 1))
                .and_then(|v| v.parse().ok());
            rt.block_on(syncer_bench::run(quick, clusters))
        }
        Some("console") => {
            let clusters = args
                .iter()
                .position(|a| a == "--clusters")
                .and_then(|i| args.get(i + 1))
                .and_then(|v| v.parse().ok());
            rt.block_on(console_bench::run(quick, clusters))
        }
        Some("ingress") => {
            let connections = args
                .iter()
                .position(|a| a == "--connections")
                .and_then(|i| args.get(i + 1))
                .and_then(|v| v.parse().ok());
            rt.block_on(ingress_bench::run(quick, connections))
        }
        Some("kubelet") => {
            let num = |flag: &str, default: usize| {
                args.iter()
                    .position(|a| a == flag)
                    .and_then(|i| args.get(i + 1))
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(default)
            };
            rt.block_on(kubelet_bench::run(
                quick,
                kubelet_bench::Args {
                    pods: num("--pods", 100),
                    density: num("--density", 250),
                },
            ))
        }
        Some("platform") => {
            let num = |flag: &str| {
                args.iter()
                    .position(|a| a == flag)
                    .and_then(|i| args.get(i + 1))
                    .and_then(|v| v.parse().ok())
            };
            rt.block_on(platform_bench::run(
                quick,
                num("--count"),
                num("--parallel").unwrap_or(4),
            ))
        }
        Some("tenant-services") => {
            let count = args
                .iter()
                .position(|a| a == "--count")
                .and_then(|i| args.get(i + 1))
                .and_then(|v| v.parse().ok())
                .unwrap_or(if quick { 5 } else { 20 });
            rt.block_on(tenant_services_bench::run(count))
        }
        Some("machines") => {
            let num = |flag: &str, default: usize| {
                args.iter()
                    .position(|a| a == flag)
                    .and_then(|i| args.get(i + 1))
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(default)
            };
            let process = args
                .iter()
                .position(|a| a == "--provider")
                .and_then(|i| args.get(i + 1))
                .is_some_and(|p| p == "process");
            rt.block_on(machines_bench::run(
                num("--pods", if quick { 5 } else { 20 }),
                num("--roll", if quick { 5 } else { 20 }),
                process,
            ))
        }
        Some("workloads") => {
            let num = |flag: &str, default: usize| {
                args.iter()
                    .position(|a| a == flag)
                    .and_then(|i| args.get(i + 1))
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(default)
            };
            rt.block_on(workloads_bench::run(workloads_bench::Args {
                nodes: num("--nodes", if quick { 100 } else { 1000 }),
                pods: num("--pods", if quick { 2000 } else { 100_000 }),
                clusters: num("--clusters", if quick { 50 } else { 1000 }),
            }))
        }
        Some("churn") => {
            let num = |flag: &str| {
                args.iter()
                    .position(|a| a == flag)
                    .and_then(|i| args.get(i + 1))
                    .and_then(|v| v.parse().ok())
            };
            let server_only = args.iter().any(|a| a == "--server-only");
            if args.iter().any(|a| a == "--tenant-clusters") {
                return rt.block_on(churn_bench::run_tenant_clusters(
                    quick,
                    num("--cycles"),
                    num("--count"),
                ));
            }
            rt.block_on(churn_bench::run(
                quick,
                num("--cycles"),
                num("--count"),
                server_only,
                num("--pause").map(|s| s as u64),
            ))
        }
        Some("clusters") => {
            let count = args
                .iter()
                .position(|a| a == "--count")
                .and_then(|i| args.get(i + 1))
                .and_then(|c| c.parse().ok());
            let parallel = args
                .iter()
                .position(|a| a == "--parallel")
                .and_then(|i| args.get(i + 1))
                .and_then(|c| c.parse().ok())
                .unwrap_or(4);
            rt.block_on(clusters_bench::run(quick, count, parallel))
        }
        _ => {
            eprintln!(
                "usage: bench <storage|api|admission|isolation|crds|dns|kubelet [--pods N] [--density M]|proxy|clusters [--count N] [--parallel P]|churn [--cycles N] [--count N] [--server-only] [--pause S] [--tenant-clusters]|workloads [--nodes N] [--pods P] [--clusters C]|platform [--count N] [--parallel P]|machines [--pods N] [--roll N] [--provider process]|tenant-services [--count N]|ingress [--connections N]|oidc|console [--clusters N]|syncer [--clusters N]|backup [--objects N]> [--quick]"
            );
            std::process::exit(2);
        }
    }
}

/// Reads a YAML file into JSON.
pub fn yaml_file(path: &std::path::Path) -> anyhow::Result<serde_json::Value> {
    let text = std::fs::read_to_string(path)?;
    Ok(serde_saphyr::from_str(&text)?)
}
