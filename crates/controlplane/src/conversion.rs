//! CRD conversion webhooks (`spec.conversion.strategy: Webhook`): the
//! [`registry::Converter`] of every served version of such a CRD, so the store writes the
//! storage version and every reader gets the version it asked for.
//!
//! One `ConversionReview` (v1, or v1beta1 when that is all the CRD lists) carries every object
//! of a read or write that is not at the wanted version, sent as admission webhooks are
//! (`clientConfig` URL or a Service of the CRD's cluster, `caBundle`), with upstream's 30 s
//! timeout. The answer is checked as upstream checks it: same uid, `result.status: Success`,
//! as many objects as sent, each at the wanted `apiVersion` and of the same kind; only labels
//! and annotations of a converted object's metadata are taken, the rest is kept from the
//! original. A failure is a 500 `conversion webhook for <from>, Kind=<kind> failed: <why>`.

use std::sync::{Arc, Weak};
use std::time::Duration;

use apimachinery::meta;
use apimachinery::status::ApiError;
use registry::{Converter, ResourceDef};
use serde_json::{Value, json};

use crate::ControlPlane;
use crate::admission::webhook::client;
use crate::admission::webhook::config::{Target, client_config, strings};

/// Upstream's timeout of conversion webhook calls.
const TIMEOUT: Duration = Duration::from_secs(30);

/// A CRD's conversion webhook in one cluster.
pub struct WebhookConverter {
    cp: Weak<ControlPlane>,
    cluster: String,
    kind: String,
    storage_api_version: String,
    target: Target,
    ca_bundle: Option<Vec<u8>>,
    review_version: &'static str,
}

impl WebhookConverter {
    /// The converter of `crd` (in `cluster`), if it converts with a webhook.
    pub fn of(cp: &Arc<ControlPlane>, cluster: &str, crd: &Value) -> Option<Arc<Self>> {
        if !crd::webhook_conversion(crd) {
            return None;
        }
        let webhook = crd.pointer("/spec/conversion/webhook")?;
        let (target, ca_bundle) = client_config(webhook.get("clientConfig")?);
        let versions = strings(webhook, "conversionReviewVersions");
        let review_version = if versions.iter().any(|v| v == "v1") || versions.is_empty() {
            "v1"
        } else {
            "v1beta1"
        };
        let group = crd.pointer("/spec/group").and_then(Value::as_str)?;
        let storage = crd
            .pointer("/spec/versions")
            .and_then(Value::as_array)?
            .iter()
            .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
            .and_then(|v| v.get("name").and_then(Value::as_str))?;
        Some(Arc::new(WebhookConverter {
            cp: Arc::downgrade(cp),
            cluster: cluster.to_string(),
            kind: crd
                .pointer("/spec/names/kind")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            storage_api_version: format!("{group}/{storage}"),
            target,
            ca_bundle,
            review_version,
        }))
    }

    /// Checks one converted object against the original and keeps the original's metadata
    /// but for labels and annotations.
    fn accept(
        &self,
        i: usize,
        original: &Value,
        mut converted: Value,
        want: &str,
    ) -> Result<Value, String> {
        let got = meta::api_version(&converted);
        if got != want {
            return Err(format!(
                "invalid converted object at index {i}: invalid apiVersion {got:?}, expected {want:?}"
            ));
        }
        let (kind, orig_kind) = (
            converted.get("kind").and_then(Value::as_str).unwrap_or(""),
            original.get("kind").and_then(Value::as_str).unwrap_or(""),
        );
        if kind != orig_kind {
            return Err(format!(
                "invalid converted object at index {i}: invalid kind {kind:?}, expected {orig_kind:?}"
            ));
        }
        let mut metadata = meta::metadata(original).clone();
        let new_meta = meta::metadata(&converted);
        for k in ["labels", "annotations"] {
            match new_meta.get(k) {
                Some(v) => {
                    metadata.insert(k.into(), v.clone());
                }
                None => {
                    metadata.remove(k);
                }
            }
        }
        converted["metadata"] = Value::Object(metadata);
        Ok(converted)
    }
}

#[async_trait::async_trait]
impl Converter for WebhookConverter {
    fn storage_api_version(&self) -> &str {
        &self.storage_api_version
    }

    async fn convert(
        &self,
        objects: Vec<Value>,
        api_version: &str,
    ) -> Result<Vec<Value>, ApiError> {
        let from = objects
            .first()
            .map(|o| meta::api_version(o).to_string())
            .unwrap_or_default();
        let failed = |why: String| {
            ApiError::internal(format!(
                "conversion webhook for {from}, Kind={} failed: {why}",
                self.kind
            ))
        };
        let cp = self
            .cp
            .upgrade()
            .ok_or_else(|| failed("the server is shutting down".into()))?;
        let uid = uuid::Uuid::new_v4().to_string();
        let review = json!({
            "apiVersion": format!("apiextensions.k8s.io/{}", self.review_version),
            "kind": "ConversionReview",
            "request": {"uid": uid, "desiredAPIVersion": api_version, "objects": objects},
        });
        let answer = client::call(
            &cp,
            &self.cluster,
            &self.target,
            self.ca_bundle.as_deref(),
            &review,
            TIMEOUT,
        )
        .await
        .map_err(|e| failed(e.0))?;
        let response = answer
            .get("response")
            .ok_or_else(|| failed("no response in the ConversionReview".into()))?;
        let got_uid = response.get("uid").and_then(Value::as_str).unwrap_or("");
        if got_uid != uid {
            return Err(failed(format!(
                "expected response.uid={uid:?}, got {got_uid:?}"
            )));
        }
        let status = response.pointer("/result/status").and_then(Value::as_str);
        if status != Some("Success") {
            let message = response
                .pointer("/result/message")
                .and_then(Value::as_str)
                .unwrap_or("");
            return Err(failed(message.to_string()));
        }
        let converted = response
            .get("convertedObjects")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if converted.len() != objects.len() {
            return Err(failed(format!(
                "expected {} converted objects, got {}",
                objects.len(),
                converted.len()
            )));
        }
        objects
            .iter()
            .zip(converted)
            .enumerate()
            .map(|(i, (o, c))| self.accept(i, o, c, api_version))
            .collect::<Result<Vec<_>, _>>()
            .map_err(failed)
    }
}

/// The served definitions of `crd` in `cluster`, with its converter when it has one.
pub fn resource_defs(cp: &Arc<ControlPlane>, cluster: &str, crd: &Value) -> Vec<ResourceDef> {
    let converter = WebhookConverter::of(cp, cluster, crd);
    crd::resource_defs(crd)
        .into_iter()
        .map(|mut d| {
            if let Some(c) = &converter {
                d.converter = Some(c.clone());
            }
            d
        })
        .collect()
}
