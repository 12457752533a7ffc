//! Cluster API's labels, annotations, finalizers and naming rules (spec: capi-kubevirt.md §1.1,
//! §1.3, §1.6, §1.9), and this crate's own.

use rand::Rng;

pub const CLUSTER_NAME_LABEL: &str = "cluster.x-k8s.io/cluster-name";
pub const DEPLOYMENT_NAME_LABEL: &str = "cluster.x-k8s.io/deployment-name";
pub const SET_NAME_LABEL: &str = "cluster.x-k8s.io/set-name";
pub const TEMPLATE_HASH_LABEL: &str = "machine-template-hash";

pub const REVISION_ANNOTATION: &str = "machinedeployment.clusters.x-k8s.io/revision";
pub const DESIRED_REPLICAS_ANNOTATION: &str =
    "machinedeployment.clusters.x-k8s.io/desired-replicas";
pub const MAX_REPLICAS_ANNOTATION: &str = "machinedeployment.clusters.x-k8s.io/max-replicas";
pub const PAUSED_ANNOTATION: &str = "cluster.x-k8s.io/paused";
pub const DELETE_MACHINE_ANNOTATION: &str = "cluster.x-k8s.io/delete-machine";
pub const SKIP_REMEDIATION_ANNOTATION: &str = "cluster.x-k8s.io/skip-remediation";
pub const REMEDIATE_MACHINE_ANNOTATION: &str = "cluster.x-k8s.io/remediate-machine";
pub const EXCLUDE_DRAIN_ANNOTATION: &str = "machine.cluster.x-k8s.io/exclude-node-draining";

/// Annotations the Machine controller writes on its Node.
pub const NODE_CLUSTER_NAME_ANNOTATION: &str = "cluster.x-k8s.io/cluster-name";
pub const NODE_CLUSTER_NAMESPACE_ANNOTATION: &str = "cluster.x-k8s.io/cluster-namespace";
pub const NODE_MACHINE_ANNOTATION: &str = "cluster.x-k8s.io/machine";
pub const NODE_OWNER_KIND_ANNOTATION: &str = "cluster.x-k8s.io/owner-kind";
pub const NODE_OWNER_NAME_ANNOTATION: &str = "cluster.x-k8s.io/owner-name";
pub const NODE_LABELS_FROM_MACHINE_ANNOTATION: &str = "cluster.x-k8s.io/labels-from-machine";

pub const AUTOSCALER_MIN_ANNOTATION: &str =
    "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size";
pub const AUTOSCALER_MAX_ANNOTATION: &str =
    "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size";
pub const MAX_NODE_PROVISION_TIME_ANNOTATION: &str =
    "cluster.x-k8s.io/autoscaling-options-maxnodeprovisiontime";
pub const CAPACITY_CPU_ANNOTATION: &str = "capacity.cluster-autoscaler.kubernetes.io/cpu";
pub const CAPACITY_MEMORY_ANNOTATION: &str = "capacity.cluster-autoscaler.kubernetes.io/memory";

pub const CLUSTER_FINALIZER: &str = "cluster.cluster.x-k8s.io";
pub const MACHINE_FINALIZER: &str = "machine.cluster.x-k8s.io";
pub const INFRA_MACHINE_FINALIZER: &str = "infrastructure.matryoshka.dev/machine";

/// On a `Cluster`: the logical cluster of this Matryoshka that is the workload cluster (its
/// Nodes are the machines' nodes). Cluster API reads a `<cluster>-kubeconfig` Secret; the
/// platform's controllers reach every logical cluster through the API directly.
pub const LOGICAL_CLUSTER_ANNOTATION: &str = "infrastructure.matryoshka.dev/logical-cluster";

/// Upstream's random-suffix alphabet: no vowels (no words), no look-alike digits.
const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// Five random characters of upstream's alphabet.
pub fn random_suffix() -> String {
    let mut rng = rand::rng();
    (0..5)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

/// `<base>-<5 random>`, the base trimmed so the name fits 63 characters (MachineSets from
/// their MachineDeployment, Machines from their MachineSet).
pub fn generate(base: &str) -> String {
    let base: String = base.chars().take(57).collect();
    format!("{}-{}", base.trim_end_matches('-'), random_suffix())
}

/// FNV-1a (32 bits) of `bytes`: the template hash upstream puts in `machine-template-hash`.
pub fn fnv32a(bytes: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in bytes {
        h ^= u32::from(*b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_names_fit_sixty_three_characters_and_use_no_vowels() {
        let long = "x".repeat(80);
        let n = generate(&long);
        assert_eq!(n.len(), 63);
        let s = generate("kubernetes-a-md0");
        let suffix = s.strip_prefix("kubernetes-a-md0-").expect("prefix kept");
        assert_eq!(suffix.len(), 5);
        assert!(suffix.bytes().all(|b| ALPHABET.contains(&b)));
    }

    #[test]
    fn fnv32a_matches_the_reference_vectors() {
        assert_eq!(fnv32a(b""), 0x811c_9dc5);
        assert_eq!(fnv32a(b"a"), 0xe40c_292c);
        assert_eq!(fnv32a(b"foobar"), 0xbf9c_f968);
    }
}
