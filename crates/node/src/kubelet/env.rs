//! A container's environment, as upstream's `makeEnvironmentVariables` builds it: `envFrom`
//! sources in order, then `env` in order with `$(VAR)` expansion against what came before
//! and the service variables, `valueFrom` (`fieldRef`, `resourceFieldRef`,
//! `configMapKeyRef`, `secretKeyRef`), then the service-link variables (always those of the
//! `kubernetes` Service of `default`).
//!
//! Owned by the "podconfig" work; this is the interface the pod workers call, with a
//! placeholder that passes literal values through until the full version lands.

use k8s_cri::v1::KeyValue;
use k8s_openapi::api::core::v1::Container;

use super::context::PodContext;

/// Why a container's environment cannot be built. The message becomes the container's
/// waiting message with reason `CreateContainerConfigError`, in upstream's wording
/// (`configmap "x" not found`, `couldn't find key k in ConfigMap ns/x`,
/// `services have not yet been read at least once, cannot construct envvars`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvError {
    #[error("{0}")]
    Config(String),
}

/// Builds environments. One per agent; it may keep caches (the Services of each namespace,
/// from a watch it owns) and reads ConfigMaps and Secrets through the client.
pub struct EnvResolver {
    #[allow(dead_code)]
    client: kube::Client,
}

impl EnvResolver {
    /// A resolver reading the cluster `client` addresses. Tasks it starts end when it is
    /// dropped.
    pub fn new(client: kube::Client) -> Self {
        EnvResolver { client }
    }

    /// The environment of `container` in the pod of `ctx`, in order.
    pub async fn container_env(
        &self,
        ctx: &PodContext<'_>,
        container: &Container,
    ) -> Result<Vec<KeyValue>, EnvError> {
        let _ = ctx;
        // Placeholder: literal values only.
        Ok(container
            .env
            .iter()
            .flatten()
            .filter(|e| e.value_from.is_none())
            .map(|e| KeyValue {
                key: e.name.clone(),
                value: e.value.clone().unwrap_or_default(),
            })
            .collect())
    }
}
