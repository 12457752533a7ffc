//! Cluster DNS: the Kubernetes DNS-based service discovery specification, served by
//! Matryoshka itself on `hickory-server`, one server per logical cluster.
//!
//! - [`view`]: one cluster's records (namespaces, Services, EndpointSlices, optionally pod
//!   IPs), compact and read-mostly; [`convert`] reduces API objects to them and
//!   [`informer`] keeps them current from kube-rs watches.
//! - [`name`] reads query names in the schema's shapes; [`resolve`] answers them (A, AAAA,
//!   SRV, PTR, CNAME, TXT, SOA, NS; NXDOMAIN/NODATA with the zone's SOA) as CoreDNS's
//!   `kubernetes` plugin does; [`zone`] holds the zone's own records and settings.
//! - [`forward`] sends other names to upstream resolvers; [`handler`] is the hickory request
//!   handler (EDNS, truncation); [`server`] binds UDP and TCP and ties the pieces together
//!   ([`ClusterDns`]).
//! - [`kube_dns`]: the `kube-system/kube-dns` Service and the per-node EndpointSlices that
//!   put the servers behind it.
//!
//! # Per-cluster views
//!
//! Matryoshka serves many logical clusters; each cluster's pods must see only their own
//! cluster's names. The cluster of a query is decided by **which server receives it**, and a
//! server holds only one cluster's data:
//!
//! - A node belongs to one cluster, and its node agent starts one [`ClusterDns`] with that
//!   cluster's client (`/clusters/<name>`, or a plain endpoint). The API server scopes that
//!   client's watches to its cluster, so the view never holds another cluster's objects; a
//!   client of the cross-cluster view is detected (its objects carry
//!   `matryoshka.dev/cluster`) and stops the informer.
//! - The server listens on the node's address; pods reach it as the `kube-dns` cluster IP
//!   through the node's Service rules (DNAT to the endpoint `kube_dns::publish_node`
//!   published, `internalTrafficPolicy: Local`). A pod can only reach its own node's
//!   server that way, and that server knows only its own cluster.
//! - A process that must serve several clusters on one host runs one server per cluster,
//!   each on its own listen address; no socket is shared between views.
//!
//! There is no query-time lookup of "which cluster", so there is no filter to forget: a name
//! of cluster B is not in cluster A's view, and the answer is NXDOMAIN. (Keying a shared
//! server by source IP was rejected: pod IPs of different clusters may overlap, and
//! a missed or stale IP mapping would leak names across clusters.)
//!
//! ```no_run
//! # async fn f(client: kube::Client) -> dns::Result<()> {
//! let config = dns::Config {
//!     listen: vec!["10.0.0.5:53".parse().unwrap()],
//!     ..dns::Config::default()
//! };
//! let server = dns::ClusterDns::start(client.clone(), config).await?;
//! server.synced(std::time::Duration::from_secs(30)).await?;
//! dns::kube_dns::publish_node(&client, "node-a", "node-uid", "10.0.0.5".parse().unwrap(), 53)
//!     .await?;
//! # Ok(()) }
//! ```

pub mod convert;
pub mod error;
pub mod forward;
pub mod handler;
pub mod informer;
pub mod kube_dns;
pub mod name;
pub mod resolve;
pub mod server;
pub mod view;
pub mod zone;

pub use error::{Error, Result};
pub use server::{ClusterDns, Config, Server, Upstream};
pub use view::View;
pub use zone::{PodMode, Zone};
