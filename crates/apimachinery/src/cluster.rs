//! The names that address logical clusters, shared by the server and its clients.
//!
//! A logical cluster is served at `/clusters/<name>`; the root (management) cluster at `/`.
//! The server decides a request's cluster from the path; clients build the same paths. Both
//! sides take these names from here, so they cannot drift apart.

/// The name of the root (management) cluster.
pub const ROOT: &str = "root";

/// The pseudo-cluster of cross-cluster list and watch (`/clusters/*/...`), reserved to the
/// server's system identity: every cluster's objects, each annotated with
/// [`CLUSTER_ANNOTATION`].
pub const ALL_CLUSTERS: &str = "*";

/// The annotation naming an object's logical cluster in cross-cluster responses (never
/// stored).
pub const CLUSTER_ANNOTATION: &str = "matryoshka.dev/cluster";

/// The annotation on a LogicalCluster naming the Kubernetes release its `/version` reports
/// (`v1.35.6`); tenant clusters of the platform choose theirs.
pub const VERSION_ANNOTATION: &str = "core.matryoshka.dev/kubernetes-version";
