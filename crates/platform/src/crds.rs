//! The platform's CustomResourceDefinitions (`platform.matryoshka.dev/v1alpha1`): `Tenant` and
//! `TenantCluster`, as real CRD objects with structural schemas, descriptions (so `kubectl
//! explain` works), defaults, printer columns and the status subresource.
//!
//! The schema carries what a schema can say (types, defaults, enums, immutability of
//! `storageClass` as a CEL transition rule); the rules that need code or other objects live in
//! [`crate::admission`]. Fields follow the seed's `kubernetes` and `tenant` applications
//! (spec: cozystack.md §1, §4).

use serde_json::{Value, json};

pub const GROUP: &str = "platform.matryoshka.dev";
pub const VERSION: &str = "v1alpha1";
pub const API_VERSION: &str = "platform.matryoshka.dev/v1alpha1";
pub const TENANTS: &str = "tenants";
pub const TENANT_CLUSTERS: &str = "tenantclusters";
pub const CLUSTER_BACKUPS: &str = "clusterbackups";

fn string(desc: &str) -> Value {
    json!({"type": "string", "description": desc})
}

fn string_default(desc: &str, default: &str) -> Value {
    json!({"type": "string", "description": desc, "default": default})
}

/// A Kubernetes quantity written as a string or a number (`2`, `500m`, `4Gi`).
fn quantity(desc: &str) -> Value {
    json!({"x-kubernetes-int-or-string": true, "description": desc,
        "anyOf": [{"type": "integer"}, {"type": "string"}]})
}

fn boolean(desc: &str, default: bool) -> Value {
    json!({"type": "boolean", "description": desc, "default": default})
}

fn object(desc: &str, props: Value) -> Value {
    json!({"type": "object", "description": desc, "properties": props, "default": {}})
}

fn resources(desc: &str) -> Value {
    object(
        desc,
        json!({
            "cpu": quantity("CPU (cores or millicores); set together with memory."),
            "memory": quantity("Memory; set together with cpu."),
        }),
    )
}

fn component(desc: &str, preset: &str) -> Value {
    object(
        desc,
        json!({
            "resources": resources("Explicit resources; they override the preset key by key."),
            "resourcesPreset": string_default(
                "A resource preset <series>.<size> (t1, c1, s1, u1, m1 × nano … 4xlarge).",
                preset,
            ),
        }),
    )
}

fn conditions() -> Value {
    json!({
        "type": "array",
        "description": "The latest observations of the object's state.",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
        "items": {
            "type": "object",
            "required": ["type", "status"],
            "properties": {
                "type": string("The condition's type (Ready, ...)."),
                "status": string("True, False or Unknown."),
                "reason": string("A CamelCase reason for the last transition."),
                "message": string("A human-readable explanation."),
                "lastTransitionTime": {"type": "string", "format": "date-time", "description": "When the status last changed."},
                "observedGeneration": {"type": "integer", "format": "int64", "description": "The generation the condition was computed from."},
            },
        },
    })
}

fn node_group() -> Value {
    json!({
        "type": "object",
        "description": "A group of worker nodes of one shape.",
        "properties": {
            "minReplicas": {"type": "integer", "minimum": 0, "default": 0, "description": "Nodes kept running at least (the autoscaler's minimum)."},
            "maxReplicas": {"type": "integer", "minimum": 0, "default": 10, "description": "Nodes the group may grow to."},
            "instanceType": string_default("The worker's instance type (u1.medium, ...); ignored for sizing when resources are set.", "u1.medium"),
            "diskSize": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}], "default": "20Gi", "description": "The worker's system disk."},
            "storageClass": string("The StorageClass of the worker's disk (default: the cluster's storageClass)."),
            "roles": {"type": "array", "items": {"type": "string"}, "description": "Each role r labels the nodes node-role.kubernetes.io/r."},
            "resources": resources("Explicit worker size (cpu and memory, both or neither) instead of the instance type's."),
            "gpus": {"type": "array", "description": "GPUs passed through to each worker.", "items": {"type": "object", "properties": {"name": string("The GPU device name (nvidia.com/A400).")}}},
            "kubelet": object("Kubelet reservations and eviction thresholds (automatic when unset).", json!({
                "systemReservedMemory": string("Memory reserved for the OS (e.g. 256Mi)."),
                "kubeReservedMemory": string("Memory reserved for the kubelet and runtime."),
                "systemReservedCpu": string("CPU reserved for the OS (e.g. 50m)."),
                "kubeReservedCpu": string("CPU reserved for the kubelet and runtime."),
                "evictionHardMemory": string_default("Hard eviction threshold of memory.available: a percentage or a quantity.", "7%"),
                "evictionSoftMemory": string_default("Soft eviction threshold of memory.available (same kind as the hard one, and above it).", "10%"),
            })),
            "maxUnhealthy": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}], "description": "Overrides nodeHealthCheck.maxUnhealthy for this group."},
            "nodeStartupTimeout": string("Overrides nodeHealthCheck.nodeStartupTimeout for this group."),
            "logSerialConsole": {"type": "boolean", "description": "Log the worker's serial console."},
            "ephemeralStorage": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}], "description": "Removed: renamed to diskSize (refused when set)."},
        },
    })
}

fn tenant_cluster_spec() -> Value {
    json!({
        "type": "object",
        "description": "The desired tenant Kubernetes cluster.",
        "default": {},
        "properties": {
            "version": string_default("The Kubernetes minor version (v1.31 … v1.35); the patch release is pinned by the platform.", "v1.35"),
            "storageClass": {"type": "string", "default": "replicated", "description": "The default StorageClass inside the tenant cluster (immutable; workers mode machines: the platform's volumes; mode shared: the host's StorageClasses are the cluster's).",
                "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "storageClass is immutable"}]},
            "dataStore": {"type": "string", "description": "The DataStore the cluster's keys live in (default: its tenant's; immutable).",
                "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "dataStore is immutable"}]},
            "host": string_default("The API server's external hostname (default kubernetes-<name>.<tenant host>).", ""),
            "maxNodeProvisionTime": string_default("How long a node may take to join before it is replaced.", "30m"),
            "controlPlane": object("The control plane.", json!({
                "replicas": {"type": "integer", "minimum": 1, "default": 2, "description": "API server replicas."},
                "apiServer": component("The API server.", "c1.medium"),
                "controllerManager": component("The controller manager.", "t1.micro"),
                "scheduler": component("The scheduler.", "t1.micro"),
                "konnectivity": object("The konnectivity proxy.", json!({"server": component("The konnectivity server.", "t1.micro")})),
            })),
            "workers": object("Where the worker machines come from.", json!({
                "mode": {"type": "string", "enum": ["machines", "shared"], "default": "machines", "description": "machines: worker machines of the cluster's own (node groups, from the provider); shared: no machines, the cluster's pods run on the host cluster's nodes in this namespace, synchronised by the platform's syncer and placed by the host's scheduler (vcluster's model). Immutable.",
                    "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "mode is immutable"}]},
                "hostCluster": {"type": "object", "description": "mode shared: the cluster the pods run on. Default: the platform's root cluster, in this namespace; or any Kubernetes cluster given by a kubeconfig Secret (the syncer is only its API client). Immutable.",
                    "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "hostCluster is immutable"},
                        {"rule": "!has(self.__namespace__) || has(self.kubeconfigSecretRef)", "message": "namespace is taken only with kubeconfigSecretRef: on the root cluster the pods run in the TenantCluster's namespace"}],
                    "properties": {
                        "kubeconfigSecretRef": {"type": "object", "required": ["name"], "description": "A Secret of this namespace holding the host's kubeconfig.", "properties": {
                            "name": {"type": "string", "minLength": 1, "description": "The Secret's name."},
                            "key": {"type": "string", "description": "The key holding the kubeconfig (default value, as Cluster API's kubeconfig Secrets)."},
                        }},
                        "namespace": {"type": "string", "maxLength": 63, "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "description": "The namespace on the host the pods run in (default: this namespace's name; made when missing)."},
                    }},
                "provider": {"type": "string", "enum": ["process", "virtual"], "description": "The machine provider: process (a real node agent with its own network namespace and containerd per machine) or virtual (nodes that run no containers). Default: process where the platform can run real machines, else virtual; changing it replaces every machine."},
            })),
            "nodeGroups": {"type": "object", "description": "Worker node groups by name (when empty, one group md0 of u1.medium with no minimum).", "additionalProperties": node_group()},
            "nodeHealthCheck": object("When unhealthy nodes are replaced.", json!({
                "maxUnhealthy": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}], "default": "50%", "description": "How many nodes may be unhealthy before remediation stops: N or N%."},
                "nodeStartupTimeout": string_default("How long a node may take to become Ready.", "20m"),
                "readyUnknownTimeout": string_default("How long Ready=Unknown is tolerated.", "5m"),
                "readyFalseTimeout": string_default("How long Ready=False is tolerated.", "10m"),
            })),
            "addons": {"type": "object", "default": {}, "x-kubernetes-preserve-unknown-fields": true, "description": "Addons installed in the tenant cluster (ingressNginx is installed; the others are recorded).",
                "properties": {
                    "ingressNginx": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "description": "The cluster's ingress controller (IngressClass nginx) on the nodes of role ingress-nginx.", "properties": {
                        "enabled": boolean("Install the ingress controller.", false),
                        "exposeMethod": {"type": "string", "enum": ["Proxied", "LoadBalancer"], "default": "Proxied", "description": "LoadBalancer: its Service gets an address from the platform's pool; Proxied: NodePorts 30000 (http) and 30001 (https)."},
                        "hosts": {"type": "array", "items": {"type": "string"}, "description": "Hostnames the platform routes to the controller (recorded)."},
                    }},
                }},
            "oidc": object("Authentication of the tenant cluster's users with OIDC.", json!({
                "mode": {"type": "string", "enum": ["None", "System", "CustomConfig"], "default": "None", "description": "None, System (the platform's identity provider) or CustomConfig."},
                "customConfig": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "description": "An AuthenticationConfiguration inline (config) or in a Secret (secretRef)."},
                "users": {"type": "array", "description": "Users bound in the tenant cluster.", "items": {"type": "object", "properties": {
                    "email": string("The user's email (the username)."),
                    "role": {"type": "string", "enum": ["admin", "view"], "description": "admin (cluster-admin) or view."},
                }}},
            })),
        },
    })
}

fn tenant_cluster_status() -> Value {
    json!({
        "type": "object",
        "description": "The observed state of the tenant cluster.",
        "properties": {
            "conditions": conditions(),
            "version": string("The Kubernetes release the cluster runs (v1.35.6)."),
            "endpoint": string("The URL of the cluster's API server."),
            "host": string("The hostname the cluster's API server is served at (TLS SNI)."),
            "logicalCluster": string("The logical cluster serving it."),
            "kubeconfigSecret": string("The Secret holding the admin kubeconfigs."),
            "desiredNodes": {"type": "integer", "description": "Nodes the node groups ask for."},
            "readyNodes": {"type": "integer", "description": "Nodes that are Ready."},
            "nodes": {"type": "string", "description": "Ready nodes out of desired (2/2)."},
            "workers": {"type": "object", "description": "Shared workers: where the cluster's pods run.", "properties": {
                "mode": string("shared."),
                "hostNamespace": string("The namespace on the host the pods run in."),
                "hostCluster": string("root (the platform's root cluster) or secret/<name> (the cluster of that kubeconfig Secret)."),
            }},
            "observedGeneration": {"type": "integer", "format": "int64", "description": "The generation last reconciled."},
        },
    })
}

fn tenant_spec() -> Value {
    json!({
        "type": "object",
        "description": "The desired tenant: a namespace in the tenant tree with inherited access and quotas.",
        "default": {},
        "properties": {
            "host": string_default("The tenant's apex domain (default <name>.<parent host>).", ""),
            "etcd": boolean("Run the tenant's own etcd (a DataStore named after its namespace); its new clusters keep their keys there.", false),
            "dataStore": string("The DataStore the tenant's new clusters are bound to (unless etcd is set or a cluster names its own)."),
            "monitoring": boolean("Run the tenant's own monitoring.", false),
            "ingress": boolean("Run the tenant's own ingress controller.", false),
            "seaweedfs": boolean("Run the tenant's own object storage.", false),
            "gateway": {"type": "boolean", "description": "Run the tenant's own Gateway API gateway (inherited when unset)."},
            "computeplane": boolean("Run the tenant's own compute plane.", false),
            "schedulingClass": string_default("The SchedulingClass of the tenant's workloads.", ""),
            "resourceQuotas": {"type": "object", "description": "Quotas of the tenant's namespace (cpu, memory, storage, pods, ...); a child may not claim more than its parent has left.",
                "additionalProperties": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]}},
        },
    })
}

fn tenant_status() -> Value {
    json!({
        "type": "object",
        "description": "The observed state of the tenant.",
        "properties": {
            "namespace": string("The tenant's namespace."),
            "dataStore": string("The DataStore of the tenant's own etcd (spec.etcd), which its new clusters are bound to."),
            "conditions": conditions(),
            "observedGeneration": {"type": "integer", "format": "int64", "description": "The generation last reconciled."},
        },
    })
}

fn crd(
    kind: &str,
    plural: &str,
    short: &[&str],
    spec: Value,
    status: Value,
    columns: Value,
) -> Value {
    let mut c = definition(kind, plural, "Namespaced", short, &["platform", "all"]);
    c["spec"]["versions"] = json!([{
        "name": VERSION,
        "served": true,
        "storage": true,
        "subresources": {"status": {}},
        "additionalPrinterColumns": columns,
        "schema": {"openAPIV3Schema": {
            "type": "object",
            "description": format!("{kind} of the Matryoshka platform."),
            "properties": {
                "apiVersion": string("The versioned schema of this representation of an object."),
                "kind": string("The REST resource this object represents."),
                "metadata": {"type": "object"},
                "spec": spec,
                "status": status,
            },
        }},
    }]);
    c
}

/// A CRD of the platform's group without its versions.
pub(crate) fn definition(
    kind: &str,
    plural: &str,
    scope: &str,
    short: &[&str],
    categories: &[&str],
) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{GROUP}"), "labels": {"app.kubernetes.io/part-of": "matryoshka-platform"}},
        "spec": {
            "group": GROUP,
            "scope": scope,
            "names": {
                "kind": kind,
                "listKind": format!("{kind}List"),
                "plural": plural,
                "singular": kind.to_lowercase(),
                "shortNames": short,
                "categories": categories,
            },
        },
    })
}

fn ready_column() -> Value {
    json!({"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"})
}

fn age_column() -> Value {
    json!({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"})
}

/// The `TenantCluster` CRD.
pub fn tenant_cluster_crd() -> Value {
    crd(
        "TenantCluster",
        TENANT_CLUSTERS,
        &["tc"],
        tenant_cluster_spec(),
        tenant_cluster_status(),
        json!([
            ready_column(),
            {"name": "Version", "type": "string", "jsonPath": ".status.version"},
            {"name": "Nodes", "type": "string", "jsonPath": ".status.nodes"},
            age_column(),
        ]),
    )
}

/// The `Tenant` CRD.
pub fn tenant_crd() -> Value {
    crd(
        "Tenant",
        TENANTS,
        &["tnt"],
        tenant_spec(),
        tenant_status(),
        json!([
            {"name": "Namespace", "type": "string", "jsonPath": ".status.namespace"},
            ready_column(),
            age_column(),
        ]),
    )
}

/// The `ClusterBackup` CRD: backups of a TenantCluster of the same namespace, on a schedule,
/// kept up to a count ([`crate::backup`]).
pub fn cluster_backup_crd() -> Value {
    crd(
        "ClusterBackup",
        CLUSTER_BACKUPS,
        &["cbk"],
        json!({
            "type": "object",
            "description": "What to back up and when.",
            "required": ["cluster"],
            "properties": {
                "cluster": string("The TenantCluster of this namespace to back up."),
                "schedule": string_default("When to back up, a cron schedule (`0 3 * * *`); empty: once, now.", ""),
                "retention": {"type": "integer", "minimum": 1, "maximum": 100, "default": 7,
                    "description": "How many backups are kept; the oldest beyond it are deleted."},
                "suspend": boolean("Take no new backups while set.", false),
            },
        }),
        json!({
            "type": "object",
            "description": "The backups taken and the last outcome.",
            "properties": {
                "conditions": conditions(),
                "lastBackupTime": {"type": "string", "format": "date-time", "description": "When the last backup completed."},
                "nextBackupTime": {"type": "string", "format": "date-time", "description": "When the next backup is due."},
                "backups": {"type": "array", "description": "The backups kept, oldest first.", "items": {
                    "type": "object",
                    "properties": {
                        "file": string("Where the backup is, on the platform (restore it with `matryoshka backup restore FILE --as NAME`)."),
                        "time": {"type": "string", "format": "date-time", "description": "When it was taken."},
                        "revision": {"type": "integer", "format": "int64", "description": "The storage revision every object was read at."},
                        "keys": {"type": "integer", "format": "int64", "description": "How many keys it holds."},
                        "bytes": {"type": "integer", "format": "int64", "description": "Its size."},
                    },
                }},
            },
        }),
        json!([
            {"name": "Cluster", "type": "string", "jsonPath": ".spec.cluster"},
            {"name": "Schedule", "type": "string", "jsonPath": ".spec.schedule"},
            {"name": "Last Backup", "type": "date", "jsonPath": ".status.lastBackupTime"},
            ready_column(),
            age_column(),
        ]),
    )
}

/// Every CRD of the platform.
pub fn all() -> Vec<Value> {
    vec![
        tenant_crd(),
        tenant_cluster_crd(),
        cluster_backup_crd(),
        crate::usage::record_crd(),
        crate::usage::report_crd(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_crds_pass_the_api_servers_crd_validation() {
        for mut c in all() {
            crd::default_crd(&mut c);
            let errs = crd::validate_crd(&c);
            assert!(errs.is_empty(), "{}: {errs:?}", c["metadata"]["name"]);
        }
    }

    #[test]
    fn tenant_clusters_print_ready_version_nodes_and_age() {
        let c = tenant_cluster_crd();
        let names: Vec<&str> = c["spec"]["versions"][0]["additionalPrinterColumns"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c["name"].as_str())
            .collect();
        assert_eq!(names, ["Ready", "Version", "Nodes", "Age"]);
    }
}
