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

/// The label of a root `LogicalCluster` saying who places the cluster's pods on nodes. With
/// [`PLACEMENT_HOST`] (a shared tenant cluster, vcluster's model) the platform's scheduler
/// leaves its pods alone: the syncer makes each a host pod, the host's scheduler places that,
/// and the syncer binds the tenant pod to the node chosen. Set when the cluster is made.
pub const PLACEMENT_LABEL: &str = "core.matryoshka.dev/pod-placement";
/// [`PLACEMENT_LABEL`]'s value for clusters whose pods the host's scheduler places.
pub const PLACEMENT_HOST: &str = "host";

/// The label of a root-cluster PersistentVolume the platform provisioned for a logical
/// cluster, naming that cluster. Its `hostPath` directory holds the data of the cluster's
/// volume of the same name, and goes into the cluster's backups. Only the platform writes root
/// objects, so a tenant cannot point a backup at another tenant's directory.
pub const VOLUME_OF_LABEL: &str = "core.matryoshka.dev/volume-of";

/// The name of a logical cluster: `root`, or a tenant cluster's name.
///
/// A cheap-to-clone shared string (one allocation per distinct name handed around by keys,
/// queues and informer stores) that compares, hashes and orders as the name itself, and
/// dereferences to `&str` so it reads like one.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClusterName(std::sync::Arc<str>);

impl ClusterName {
    /// The root (management) cluster.
    pub fn root() -> ClusterName {
        static ROOT_NAME: std::sync::OnceLock<ClusterName> = std::sync::OnceLock::new();
        ROOT_NAME
            .get_or_init(|| ClusterName(std::sync::Arc::from(ROOT)))
            .clone()
    }

    /// Whether this is the root cluster.
    pub fn is_root(&self) -> bool {
        &*self.0 == ROOT
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for ClusterName {
    fn default() -> Self {
        ClusterName::root()
    }
}

impl std::ops::Deref for ClusterName {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for ClusterName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for ClusterName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl From<&str> for ClusterName {
    fn from(s: &str) -> Self {
        if s == ROOT {
            return ClusterName::root();
        }
        ClusterName(std::sync::Arc::from(s))
    }
}

impl From<String> for ClusterName {
    fn from(s: String) -> Self {
        if s == ROOT {
            return ClusterName::root();
        }
        ClusterName(std::sync::Arc::from(s))
    }
}

impl From<&String> for ClusterName {
    fn from(s: &String) -> Self {
        ClusterName::from(s.as_str())
    }
}

impl From<&ClusterName> for ClusterName {
    fn from(s: &ClusterName) -> Self {
        s.clone()
    }
}

impl From<ClusterName> for String {
    fn from(c: ClusterName) -> Self {
        c.0.to_string()
    }
}

impl PartialEq<str> for ClusterName {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for ClusterName {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

impl PartialEq<String> for ClusterName {
    fn eq(&self, other: &String) -> bool {
        &*self.0 == other.as_str()
    }
}

impl PartialEq<ClusterName> for str {
    fn eq(&self, other: &ClusterName) -> bool {
        self == &*other.0
    }
}

impl PartialEq<ClusterName> for &str {
    fn eq(&self, other: &ClusterName) -> bool {
        *self == &*other.0
    }
}

impl PartialEq<ClusterName> for String {
    fn eq(&self, other: &ClusterName) -> bool {
        self.as_str() == &*other.0
    }
}

impl std::fmt::Display for ClusterName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::fmt::Debug for ClusterName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&*self.0, f)
    }
}

impl serde::Serialize for ClusterName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for ClusterName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(ClusterName::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_names_compare_and_read_like_their_strings() {
        let a = ClusterName::from("tenant-a");
        assert_eq!(a, "tenant-a");
        assert_eq!("tenant-a", a);
        assert_eq!(a.len(), 8);
        assert!(ClusterName::from(ROOT).is_root());
        assert!(!a.is_root());
        assert_eq!(format!("{a}/{a:?}"), "tenant-a/\"tenant-a\"");
        let mut names = [
            ClusterName::from("b"),
            ClusterName::root(),
            ClusterName::from("a"),
        ];
        names.sort();
        assert_eq!(names.clone().map(String::from), ["a", "b", "root"]);
        let set: std::collections::BTreeSet<ClusterName> = names.into_iter().collect();
        assert!(set.contains("root"));
    }
}
