//! The client side of Matryoshka: what every component that talks to the API server is built
//! on (controllers, scheduler, node agent, platform).
//!
//! Components reach clusters only through the Kubernetes API, with kube-rs. In process the
//! transport is a tower service handed in by whoever wires the process (the `matryoshka`
//! binary gives the API server's in-memory transport); out of process it is a kubeconfig over
//! HTTPS. This crate depends on no server crate, so a component built on it can run either way.
//!
//! One instance of a component serves every logical cluster: informers list and watch
//! `/clusters/*/...` (objects keyed by cluster, namespace and name), work queues hold
//! (cluster, object) keys, and writes go to the object's own cluster. Nothing is kept per
//! cluster: watches, tasks and timers are a fixed number per component, memory grows with
//! objects.
//!
//! - [`client`]: a `kube::Client` per cluster ([`ClusterClients`] over a [`ClientFactory`]:
//!   [`client::InMemory`] or [`client::Kubeconfig`]);
//! - [`informer`]: one cross-cluster watch per resource with its indexed [`store`], event
//!   handlers, and [`shared::Informers`] (one informer per resource for every controller);
//! - [`queue`]: the deduplicating work queue with backoff and the reconcile loop driver;
//! - [`leader`]: Lease leader election in the root cluster;
//! - [`shutdown`]: the stop signal of a component's tasks; [`clock`]: injectable wall time;
//! - [`error`]: what goes wrong, and the reconcile outcome "retry later".
//!
//! A component in process:
//!
//! ```ignore
//! // In the binary (or a test), which may know the server:
//! let clients = runtime::ClusterClients::in_memory(apiserver::local::system(server.clone()));
//! // In the component, which knows only `runtime`:
//! let informers = runtime::shared::Informers::new(clients.clone());
//! let pods = informers.get::<Pod>()?;            // every pod of every cluster
//! let (stop, stopped) = runtime::Shutdown::new();
//! let tasks = informers.start(stopped.clone());
//! informers.wait_synced().await;
//! ```

pub mod client;
pub mod clock;
pub mod error;
pub mod informer;
pub mod leader;
pub mod queue;
pub mod shared;
pub mod shutdown;
pub mod store;

pub use client::{ClientFactory, ClusterClients, ROOT};
pub use error::{Error, Result};
pub use informer::{Change, Informer, ObjectKey};
pub use shutdown::{Shutdown, ShutdownTrigger};
