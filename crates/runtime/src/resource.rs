//! Typed handles for resources whose schema lives in a CRD: metadata typed, spec and status
//! JSON. The platform's and the machine controllers' kinds are declared with
//! [`json_resource!`](crate::json_resource); their readers interpret the JSON leniently
//! (admission or the CRD's schema has already refused what is wrong).

/// Re-exports the macro's expansion names, so a crate using it needs none of them itself.
#[doc(hidden)]
pub mod __private {
    pub use k8s_openapi;
    pub use kube;
    pub use serde;
    pub use serde_json;
}

/// Declares `$ty`, a kube `Resource` of the given kind, group, version and plural whose
/// `spec` and `status` are JSON, with `status_field(pointer)`.
///
/// `json_resource!(Machine, "Machine", "cluster.x-k8s.io", "v1beta2", "machines", Namespaced);`
/// (`Namespaced` or `Cluster` scope).
#[macro_export]
macro_rules! json_resource {
    ($ty:ident, $kind:literal, $group:literal, $version:literal, $plural:literal, Namespaced) => {
        $crate::json_resource!(@def $ty, $kind, $group, $version, $plural,
            $crate::resource::__private::kube::core::NamespaceResourceScope);
    };
    ($ty:ident, $kind:literal, $group:literal, $version:literal, $plural:literal, Cluster) => {
        $crate::json_resource!(@def $ty, $kind, $group, $version, $plural,
            $crate::resource::__private::kube::core::ClusterResourceScope);
    };
    (@def $ty:ident, $kind:literal, $group:literal, $version:literal, $plural:literal, $scope:ty) => {
        #[doc = concat!("A `", $kind, "` object (`", $group, "/", $version, "`; spec and status as JSON).")]
        #[derive(
            Clone,
            Debug,
            Default,
            $crate::resource::__private::serde::Serialize,
            $crate::resource::__private::serde::Deserialize,
        )]
        #[serde(crate = "::runtime::resource::__private::serde")]
        pub struct $ty {
            #[serde(default)]
            pub metadata: $crate::resource::__private::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
            #[serde(default)]
            pub spec: $crate::resource::__private::serde_json::Value,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub status: Option<$crate::resource::__private::serde_json::Value>,
        }

        impl $crate::resource::__private::kube::Resource for $ty {
            type DynamicType = ();
            type Scope = $scope;
            fn kind(_: &()) -> ::std::borrow::Cow<'_, str> {
                $kind.into()
            }
            fn group(_: &()) -> ::std::borrow::Cow<'_, str> {
                $group.into()
            }
            fn version(_: &()) -> ::std::borrow::Cow<'_, str> {
                $version.into()
            }
            fn plural(_: &()) -> ::std::borrow::Cow<'_, str> {
                $plural.into()
            }
            fn meta(&self) -> &$crate::resource::__private::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &self.metadata
            }
            fn meta_mut(
                &mut self,
            ) -> &mut $crate::resource::__private::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &mut self.metadata
            }
        }

        impl $ty {
            /// A status field, if set.
            pub fn status_field(&self, pointer: &str) -> Option<&$crate::resource::__private::serde_json::Value> {
                self.status.as_ref().and_then(|s| s.pointer(pointer))
            }
        }
    };
}
