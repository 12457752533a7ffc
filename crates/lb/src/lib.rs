//! The platform's load balancer — what MetalLB is to a bare-metal cluster, for the root
//! cluster: `type: LoadBalancer` Services of the root cluster (the tenant clusters' infra
//! Services among them) get an address from the pool the operator gives
//! (`matryoshka up --load-balancer-ip-range`), and traffic to that address and port is carried
//! to the Service's endpoints.
//!
//! - [`pool`]: the address pool (ranges and CIDRs);
//! - [`allocator`]: assigns and releases addresses (under leader election: one writer);
//! - [`proxy`]: the listeners, on every replica.
//!
//! **Architecture Invariant:** an API client of the root cluster only (through `runtime`);
//! it touches no kernel state but the sockets it listens on.

pub mod allocator;
pub mod pool;
pub mod proxy;

use std::future::Future;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use runtime::client::{ClusterClients, ROOT};
use runtime::error::Result;
use runtime::events::Recorder;
use runtime::informer::{Change, Informer};
use runtime::queue::{Queue, run_workers};
use runtime::shared::Shutdown;

pub use pool::Pool;

/// How the load balancer runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// The addresses it hands out.
    pub pool: Pool,
    /// This replica's identity in the allocator's leader election (None: it always leads).
    pub leader_identity: Option<String>,
}

/// The component's name in Events and its Lease.
pub const COMPONENT: &str = "matryoshka-load-balancer";

/// Runs the allocator and the proxy through `clients` until `shutdown`.
pub async fn run(
    clients: ClusterClients,
    options: Options,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<()> {
    let services = Informer::<Service>::root(&clients)?;
    let slices = Informer::<EndpointSlice>::root(&clients)?;
    let recorder = Recorder::start(clients.clone(), COMPONENT);
    let proxy = proxy::Proxy::new(
        options.pool.clone(),
        services.store(),
        slices.store(),
        recorder.clone(),
    );
    let p = proxy.clone();
    services.on_change(move |_| p.changed.notify_one());
    let (stop, stopped) = Shutdown::new();
    let mut tasks = vec![
        tokio::spawn(services.clone().run(stopped.clone().wait())),
        tokio::spawn(slices.clone().run(stopped.clone().wait())),
    ];
    let p = proxy.clone();
    let proxy_stop = stopped.clone();
    tasks.push(tokio::spawn(async move {
        let stopping = proxy_stop.wait();
        tokio::pin!(stopping);
        loop {
            p.sync();
            tokio::select! {
                () = p.changed.notified() => {}
                () = &mut stopping => break,
            }
        }
        p.close_all();
    }));
    let allocator = Arc::new(allocator::Allocator {
        pool: options.pool.clone(),
        services: services.store(),
        client: clients.cluster(ROOT)?,
        recorder,
        queue: parking_lot::Mutex::new(Queue::new()),
        pending: Default::default(),
    });
    let a = allocator.clone();
    services.on_change(move |c| match c {
        Change::Deleted(_, svc) => a.wake(svc, true),
        other => a.wake(other.object(), false),
    });
    let informer = services.clone();
    let allocate = move |term: Shutdown| {
        let allocator = allocator.clone();
        let informer = informer.clone();
        async move {
            informer.wait_synced().await;
            let queue = allocator.new_term();
            let a = allocator.clone();
            let workers = tokio::spawn(run_workers(
                "load-balancer-allocator",
                queue.clone(),
                1,
                move |k| {
                    let a = a.clone();
                    async move { a.reconcile(k).await }
                },
            ));
            term.wait().await;
            queue.shut_down();
            let _ = workers.await;
            Ok(())
        }
    };
    let election = match &options.leader_identity {
        Some(id) => {
            let config = runtime::leader::LeaderConfig::named(COMPONENT, id.clone());
            let client = clients.cluster(ROOT)?;
            tokio::spawn(runtime::leader::run_while_leading(
                client,
                config,
                stopped.clone().wait(),
                allocate,
            ))
        }
        None => {
            let s = stopped.clone();
            tokio::spawn(async move {
                let _ = allocate(s).await;
            })
        }
    };
    shutdown.await;
    stop.trigger();
    let _ = election.await;
    for t in tasks {
        let _ = t.await;
    }
    Ok(())
}
