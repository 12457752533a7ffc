//! Where volumes and environments read their API objects: ConfigMaps, Secrets, claims and
//! volumes, and service-account tokens (TokenRequest).
//!
//! [`ObjectSource`] is the one seam to the API: [`ApiSource`] reads through a `kube::Client`
//! with plain GETs; an agent with informer caches can implement the trait over them (the
//! kubelet reads ConfigMaps and Secrets from watch-based caches).

use async_trait::async_trait;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{
    ConfigMap, PersistentVolume, PersistentVolumeClaim, Secret, ServiceAccount,
};
use kube::api::{Api, PostParams};

/// A failed lookup other than "not found"; the message is reported to the user as is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SourceError(pub String);

impl From<kube::Error> for SourceError {
    fn from(e: kube::Error) -> Self {
        match e {
            kube::Error::Api(s) => SourceError(s.message),
            other => SourceError(other.to_string()),
        }
    }
}

/// The API objects volumes and environments need. `Ok(None)` is "not found".
#[async_trait]
pub trait ObjectSource: Send + Sync {
    async fn config_map(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ConfigMap>, SourceError>;
    async fn secret(&self, namespace: &str, name: &str) -> Result<Option<Secret>, SourceError>;
    async fn persistent_volume_claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<PersistentVolumeClaim>, SourceError>;
    async fn persistent_volume(&self, name: &str) -> Result<Option<PersistentVolume>, SourceError>;
    /// `POST .../serviceaccounts/<name>/token`.
    async fn request_token(
        &self,
        namespace: &str,
        service_account: &str,
        request: &TokenRequest,
    ) -> Result<TokenRequest, SourceError>;
}

/// An [`ObjectSource`] that asks the API server every time.
#[derive(Clone)]
pub struct ApiSource {
    client: kube::Client,
}

impl ApiSource {
    pub fn new(client: kube::Client) -> Self {
        ApiSource { client }
    }
}

#[async_trait]
impl ObjectSource for ApiSource {
    async fn config_map(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ConfigMap>, SourceError> {
        Ok(Api::<ConfigMap>::namespaced(self.client.clone(), namespace)
            .get_opt(name)
            .await?)
    }

    async fn secret(&self, namespace: &str, name: &str) -> Result<Option<Secret>, SourceError> {
        Ok(Api::<Secret>::namespaced(self.client.clone(), namespace)
            .get_opt(name)
            .await?)
    }

    async fn persistent_volume_claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<PersistentVolumeClaim>, SourceError> {
        Ok(
            Api::<PersistentVolumeClaim>::namespaced(self.client.clone(), namespace)
                .get_opt(name)
                .await?,
        )
    }

    async fn persistent_volume(&self, name: &str) -> Result<Option<PersistentVolume>, SourceError> {
        Ok(Api::<PersistentVolume>::all(self.client.clone())
            .get_opt(name)
            .await?)
    }

    async fn request_token(
        &self,
        namespace: &str,
        service_account: &str,
        request: &TokenRequest,
    ) -> Result<TokenRequest, SourceError> {
        Ok(
            Api::<ServiceAccount>::namespaced(self.client.clone(), namespace)
                .create_token_request(service_account, &PostParams::default(), request)
                .await?,
        )
    }
}
