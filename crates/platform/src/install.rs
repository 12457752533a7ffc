//! What the platform puts in the root cluster before its controllers start: the CRDs (waited
//! for until Established), the tenant ClusterRoles, and the root tenant's namespace
//! `tenant-root` with its bindings — all through the Kubernetes API, with server-side apply so
//! a restart converges instead of failing on what exists.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::discovery::ApiResource;
use kube::runtime::wait::{await_condition, conditions};
use serde_json::{Value, json};

use runtime::error::{Error, Result};

use crate::{crds, naming, rbac};

/// The field manager of everything the platform writes.
pub const FIELD_MANAGER: &str = "matryoshka-platform";

/// How long install waits for a CRD to be Established.
const ESTABLISH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Server-side applies `obj` (any kind) through `client`.
pub async fn apply(client: &kube::Client, obj: &Value) -> Result<()> {
    let api_version = obj["apiVersion"].as_str().unwrap_or("v1");
    let kind = obj["kind"].as_str().unwrap_or("");
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let plural = match kind {
        "ClusterRole" => "clusterroles",
        "ClusterRoleBinding" => "clusterrolebindings",
        "RoleBinding" => "rolebindings",
        "Namespace" => "namespaces",
        "ResourceQuota" => "resourcequotas",
        "LimitRange" => "limitranges",
        "CustomResourceDefinition" => "customresourcedefinitions",
        "Secret" => "secrets",
        "Service" => "services",
        "EndpointSlice" => "endpointslices",
        "StorageClass" => "storageclasses",
        "ServiceAccount" => "serviceaccounts",
        "Role" => "roles",
        "IngressClass" => "ingressclasses",
        "DaemonSet" => "daemonsets",
        "DataStore" => "datastores",
        other => return Err(Error::Config(format!("cannot apply a {other}"))),
    };
    let ar = ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: api_version.into(),
        kind: kind.into(),
        plural: plural.into(),
    };
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let api: Api<DynamicObject> = match obj.pointer("/metadata/namespace").and_then(Value::as_str) {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    };
    api.patch(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(obj),
    )
    .await?;
    Ok(())
}

/// The root tenant's namespace.
pub fn root_namespace() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": naming::ROOT_NAMESPACE, "labels": crate::tenant::namespace_labels(naming::ROOT_NAMESPACE)},
    })
}

/// Installs the CRDs, roles and `tenant-root` into the root cluster through `root`.
pub async fn install(root: &kube::Client) -> Result<()> {
    for crd in crds::all() {
        apply(root, &crd).await?;
    }
    for crd in crds::all() {
        established(root, &crd).await?;
    }
    for role in rbac::cluster_roles() {
        apply(root, &role).await?;
    }
    apply(root, &root_namespace()).await?;
    for b in rbac::role_bindings(naming::ROOT_NAMESPACE) {
        apply(root, &b).await?;
    }
    Ok(())
}

/// Applies one more CRD and waits until it is served.
pub async fn install_crd(root: &kube::Client, crd: &Value) -> Result<()> {
    apply(root, crd).await?;
    established(root, crd).await
}

async fn established(root: &kube::Client, crd: &Value) -> Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(root.clone());
    let name = crd["metadata"]["name"].as_str().unwrap_or("").to_string();
    let wait = await_condition(api, &name, conditions::is_crd_established());
    match tokio::time::timeout(ESTABLISH_TIMEOUT, wait).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(Error::Retry(format!("waiting for CRD {name}: {e}"))),
        Err(_) => Err(Error::Retry(format!("CRD {name} was not established"))),
    }
}
