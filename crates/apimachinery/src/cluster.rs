//! The names by which logical clusters are addressed and marked, shared by the server, which
//! routes and annotates, and its clients, which read the marks back.
//!
//! A request path `/clusters/<name>/...` addresses a logical cluster; a path without the
//! prefix addresses the [`ROOT`] cluster. The system identity may list and watch every cluster
//! at once under `/clusters/*` ([`ALL_CLUSTERS`]); each object of such a response carries its
//! cluster in the [`CLUSTER_ANNOTATION`], which is never stored.

/// The name of the root (management) cluster: served without a path prefix, home of the
/// `LogicalCluster` objects and of resources served only there.
pub const ROOT: &str = "root";

/// The pseudo-cluster of cross-cluster list and watch (`/clusters/*/...`), reserved to the
/// system identity.
pub const ALL_CLUSTERS: &str = "*";

/// The annotation naming an object's cluster in cross-cluster responses (never stored).
pub const CLUSTER_ANNOTATION: &str = "matryoshka.dev/cluster";

/// The annotation on a `LogicalCluster` naming the Kubernetes release its `/version` reports
/// (`v1.35.6`); tenant clusters of the platform choose theirs.
pub const VERSION_ANNOTATION: &str = "core.matryoshka.dev/kubernetes-version";
