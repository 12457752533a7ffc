//! Typed handles for the objects the platform controllers watch: `Tenant`, `TenantCluster`
//! (this crate's CRDs) and the API server's root-only `LogicalCluster`. Specs and statuses stay
//! JSON: the schema lives in the CRD ([`crate::crds`]) and the readers in [`crate::spec`].

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::{ClusterResourceScope, NamespaceResourceScope};
use serde::{Deserialize, Serialize};
use serde_json::Value;

macro_rules! resource {
    ($ty:ident, $kind:literal, $group:literal, $version:literal, $plural:literal, $scope:ty) => {
        #[doc = concat!("A `", $kind, "` object (spec and status as JSON).")]
        #[derive(Clone, Debug, Default, Serialize, Deserialize)]
        pub struct $ty {
            #[serde(default)]
            pub metadata: ObjectMeta,
            #[serde(default)]
            pub spec: Value,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub status: Option<Value>,
        }

        impl kube::Resource for $ty {
            type DynamicType = ();
            type Scope = $scope;
            fn kind(_: &()) -> Cow<'_, str> {
                $kind.into()
            }
            fn group(_: &()) -> Cow<'_, str> {
                $group.into()
            }
            fn version(_: &()) -> Cow<'_, str> {
                $version.into()
            }
            fn plural(_: &()) -> Cow<'_, str> {
                $plural.into()
            }
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }

        impl $ty {
            /// A status field, if set.
            pub fn status_field(&self, pointer: &str) -> Option<&Value> {
                self.status.as_ref().and_then(|s| s.pointer(pointer))
            }
        }
    };
}

resource!(
    Tenant,
    "Tenant",
    "platform.matryoshka.dev",
    "v1alpha1",
    "tenants",
    NamespaceResourceScope
);
resource!(
    TenantCluster,
    "TenantCluster",
    "platform.matryoshka.dev",
    "v1alpha1",
    "tenantclusters",
    NamespaceResourceScope
);
resource!(
    ClusterBackup,
    "ClusterBackup",
    "platform.matryoshka.dev",
    "v1alpha1",
    "clusterbackups",
    NamespaceResourceScope
);
resource!(
    LogicalCluster,
    "LogicalCluster",
    "core.matryoshka.dev",
    "v1alpha1",
    "logicalclusters",
    ClusterResourceScope
);
