//! Typed handles for the objects the platform controllers watch: `Tenant`, `TenantCluster`,
//! `ClusterBackup` (this crate's CRDs) and the API server's root-only `LogicalCluster`. Specs
//! and statuses stay JSON: the schema lives in the CRD ([`crate::crds`]) and the readers in
//! [`crate::spec`].

runtime::json_resource!(
    Tenant,
    "Tenant",
    "platform.matryoshka.dev",
    "v1alpha1",
    "tenants",
    Namespaced
);
runtime::json_resource!(
    TenantCluster,
    "TenantCluster",
    "platform.matryoshka.dev",
    "v1alpha1",
    "tenantclusters",
    Namespaced
);
runtime::json_resource!(
    ClusterBackup,
    "ClusterBackup",
    "platform.matryoshka.dev",
    "v1alpha1",
    "clusterbackups",
    Namespaced
);
runtime::json_resource!(
    LogicalCluster,
    "LogicalCluster",
    "core.matryoshka.dev",
    "v1alpha1",
    "logicalclusters",
    Cluster
);
