//! The kinds the machine controllers read and write: Cluster API's core kinds (served by the
//! upstream CRDs, `cluster.x-k8s.io/v1beta2`) and this crate's infrastructure kinds
//! (`infrastructure.matryoshka.dev/v1alpha1`, [`crate::crds`]).

use serde_json::Value;

runtime::json_resource!(
    Cluster,
    "Cluster",
    "cluster.x-k8s.io",
    "v1beta2",
    "clusters",
    Namespaced
);
runtime::json_resource!(
    MachineDeployment,
    "MachineDeployment",
    "cluster.x-k8s.io",
    "v1beta2",
    "machinedeployments",
    Namespaced
);
runtime::json_resource!(
    MachineSet,
    "MachineSet",
    "cluster.x-k8s.io",
    "v1beta2",
    "machinesets",
    Namespaced
);
runtime::json_resource!(
    Machine,
    "Machine",
    "cluster.x-k8s.io",
    "v1beta2",
    "machines",
    Namespaced
);
runtime::json_resource!(
    MachineHealthCheck,
    "MachineHealthCheck",
    "cluster.x-k8s.io",
    "v1beta2",
    "machinehealthchecks",
    Namespaced
);
runtime::json_resource!(
    MatryoshkaMachine,
    "MatryoshkaMachine",
    "infrastructure.matryoshka.dev",
    "v1alpha1",
    "matryoshkamachines",
    Namespaced
);
runtime::json_resource!(
    MatryoshkaMachineTemplate,
    "MatryoshkaMachineTemplate",
    "infrastructure.matryoshka.dev",
    "v1alpha1",
    "matryoshkamachinetemplates",
    Namespaced
);

/// The Cluster API group and the version this crate writes.
pub const CAPI_GROUP: &str = "cluster.x-k8s.io";
pub const CAPI_API_VERSION: &str = "cluster.x-k8s.io/v1beta2";
/// This crate's infrastructure group and version.
pub const INFRA_GROUP: &str = "infrastructure.matryoshka.dev";
pub const INFRA_API_VERSION: &str = "infrastructure.matryoshka.dev/v1alpha1";

/// A string at `pointer` of a JSON value.
pub fn str_at<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str)
}

/// An integer at `pointer` of a JSON value.
pub fn int_at(v: &Value, pointer: &str) -> Option<i64> {
    v.pointer(pointer).and_then(Value::as_i64)
}
