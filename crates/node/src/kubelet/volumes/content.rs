//! The content of configMap, secret, downwardAPI and projected volumes: reading their
//! sources (immutable objects once), service-account tokens, and writing the payload with the
//! atomic writer and fsGroup ownership (upstream's `SetUpAt` of those plugins and projected
//! `collectData`).

use std::io;
use std::path::Path;

use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Volume};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::atomic::{self, FileProjection, Payload};
use super::payload::{self, aggregate, mode_or_default};
use super::setup::Run;
use super::source::SourceError;
use super::{ObjectKind, ObjectRef, ownership};
use crate::kubelet::env::fieldpath::go_quote;

/// What a volume read last time.
#[derive(Debug, Clone)]
pub(super) struct Cached {
    pub immutable: bool,
    /// The object, kept only when immutable (it is never read again).
    pub object: Option<CachedObject>,
}

#[derive(Debug, Clone)]
pub(super) enum CachedObject {
    ConfigMap(ConfigMap),
    Secret(Secret),
}

impl Run<'_> {
    /// Writes the payload of a configMap, secret, downwardAPI or projected volume.
    pub(super) async fn write_content(&mut self, v: &Volume, dir: &Path) -> Result<bool, String> {
        let payload = self.payload(v).await?;
        let fs_group = self.fs_group;
        let set_perms = |_: &Path| -> io::Result<()> {
            match fs_group {
                Some(gid) => ownership::set_volume_ownership(dir, gid, true, false),
                None => Ok(()),
            }
        };
        atomic::write(dir, &payload, Some(&set_perms)).map_err(|e| e.to_string())
    }

    async fn payload(&mut self, v: &Volume) -> Result<Payload, String> {
        if let Some(s) = &v.config_map {
            let optional = s.optional.unwrap_or(false);
            let cm = self.config_map(&s.name, optional).await?;
            return payload::config_map_payload(
                s.items.as_deref(),
                cm.as_ref(),
                mode_or_default(s.default_mode),
                optional,
            );
        }
        if let Some(s) = &v.secret {
            let name = s.secret_name.clone().unwrap_or_default();
            let optional = s.optional.unwrap_or(false);
            let secret = self.secret(&name, optional).await?;
            return payload::secret_payload(
                s.items.as_deref(),
                secret.as_ref(),
                mode_or_default(s.default_mode),
                optional,
            );
        }
        if let Some(d) = &v.downward_api {
            return payload::downward_api_payload(
                d.items.as_deref().unwrap_or_default(),
                self.ctx.pod,
                &self.ctx.config.node_allocatable,
                mode_or_default(d.default_mode),
            );
        }
        if let Some(p) = &v.projected {
            return self.projected_payload(p).await;
        }
        Ok(Payload::new())
    }

    /// Every source of a projected volume in one payload (upstream `collectData`): each source
    /// is attempted and the errors are reported together.
    async fn projected_payload(
        &mut self,
        p: &k8s_openapi::api::core::v1::ProjectedVolumeSource,
    ) -> Result<Payload, String> {
        let default_mode = mode_or_default(p.default_mode);
        let mut out = Payload::new();
        let mut errs = Vec::new();
        for s in p.sources.iter().flatten() {
            let part = if let Some(c) = &s.config_map {
                let optional = c.optional.unwrap_or(false);
                match self.config_map(&c.name, optional).await {
                    Ok(cm) => payload::config_map_payload(
                        c.items.as_deref(),
                        cm.as_ref(),
                        default_mode,
                        optional,
                    ),
                    Err(e) => Err(e),
                }
            } else if let Some(c) = &s.secret {
                let optional = c.optional.unwrap_or(false);
                match self.secret(&c.name, optional).await {
                    Ok(secret) => payload::secret_payload(
                        c.items.as_deref(),
                        secret.as_ref(),
                        default_mode,
                        optional,
                    ),
                    Err(e) => Err(e),
                }
            } else if let Some(d) = &s.downward_api {
                payload::downward_api_payload(
                    d.items.as_deref().unwrap_or_default(),
                    self.ctx.pod,
                    &self.ctx.config.node_allocatable,
                    default_mode,
                )
            } else if let Some(t) = &s.service_account_token {
                self.token_payload(t, default_mode).await
            } else if s.cluster_trust_bundle.is_some() {
                Err("clusterTrustBundle projections are not supported on this node".to_string())
            } else {
                Ok(Payload::new())
            };
            match part {
                Ok(files) => out.extend(files),
                Err(e) => errs.push(e),
            }
        }
        if errs.is_empty() {
            Ok(out)
        } else {
            Err(aggregate(&errs))
        }
    }

    async fn token_payload(
        &mut self,
        t: &k8s_openapi::api::core::v1::ServiceAccountTokenProjection,
        default_mode: u32,
    ) -> Result<Payload, String> {
        let pod = self.ctx.pod;
        let sa = pod
            .spec
            .as_ref()
            .and_then(|s| s.service_account_name.clone())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "default".to_string());
        let request = TokenRequest {
            metadata: ObjectMeta::default(),
            spec: TokenRequestSpec {
                audiences: t
                    .audience
                    .iter()
                    .filter(|a| !a.is_empty())
                    .cloned()
                    .collect(),
                expiration_seconds: t.expiration_seconds,
                bound_object_ref: Some(BoundObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some("Pod".into()),
                    name: pod.metadata.name.clone(),
                    uid: pod.metadata.uid.clone(),
                }),
            },
            status: None,
        };
        let ns = self.namespace().to_string();
        let tr = self
            .ctx
            .tokens
            .get(self.ctx.source, &ns, &sa, &request)
            .await?;
        let token = tr.status.map(|s| s.token).unwrap_or_default();
        // With an fsGroup, ownership adds group read (0640) after writing.
        let mode = if self.fs_user.is_some() || self.fs_group.is_some() {
            0o600
        } else {
            default_mode
        };
        let mut file = FileProjection::new(token, mode);
        file.fs_user = self.fs_user;
        Ok([(t.path.clone(), file)].into())
    }

    /// ConfigMap `name`: `None` when missing and optional; missing and required is upstream's
    /// `configmap "<name>" not found`.
    async fn config_map(
        &mut self,
        name: &str,
        optional: bool,
    ) -> Result<Option<ConfigMap>, String> {
        let key = self.key(ObjectKind::ConfigMap, name);
        if let Some(Cached {
            object: Some(CachedObject::ConfigMap(cm)),
            ..
        }) = self.ctx.cached.get(&key)
        {
            let cm = cm.clone();
            self.objects.insert(
                key,
                Cached {
                    immutable: true,
                    object: Some(CachedObject::ConfigMap(cm.clone())),
                },
            );
            return Ok(Some(cm));
        }
        let found = self.ctx.source.config_map(self.namespace(), name).await;
        let found = self.record(
            key,
            found,
            |cm: &ConfigMap| cm.immutable == Some(true),
            CachedObject::ConfigMap,
        )?;
        match found {
            Some(cm) => Ok(Some(cm)),
            None if optional => Ok(None),
            None => Err(format!("configmap {} not found", go_quote(name))),
        }
    }

    /// Secret `name`, as [`config_map`](Self::config_map) (`secret "<name>" not found`).
    async fn secret(&mut self, name: &str, optional: bool) -> Result<Option<Secret>, String> {
        let key = self.key(ObjectKind::Secret, name);
        if let Some(Cached {
            object: Some(CachedObject::Secret(s)),
            ..
        }) = self.ctx.cached.get(&key)
        {
            let s = s.clone();
            self.objects.insert(
                key,
                Cached {
                    immutable: true,
                    object: Some(CachedObject::Secret(s.clone())),
                },
            );
            return Ok(Some(s));
        }
        let found = self.ctx.source.secret(self.namespace(), name).await;
        let found = self.record(
            key,
            found,
            |s: &Secret| s.immutable == Some(true),
            CachedObject::Secret,
        )?;
        match found {
            Some(s) => Ok(Some(s)),
            None if optional => Ok(None),
            None => Err(format!("secret {} not found", go_quote(name))),
        }
    }

    fn key(&self, kind: ObjectKind, name: &str) -> ObjectRef {
        ObjectRef {
            kind,
            namespace: self.namespace().to_string(),
            name: name.to_string(),
        }
    }

    /// Remembers what a lookup found (watched unless immutable).
    fn record<T: Clone>(
        &mut self,
        key: ObjectRef,
        found: Result<Option<T>, SourceError>,
        immutable: impl Fn(&T) -> bool,
        wrap: impl Fn(T) -> CachedObject,
    ) -> Result<Option<T>, String> {
        let found = found.map_err(|e| e.to_string());
        let entry = match &found {
            Ok(Some(o)) if immutable(o) => Cached {
                immutable: true,
                object: Some(wrap(o.clone())),
            },
            _ => Cached {
                immutable: false,
                object: None,
            },
        };
        self.objects.insert(key, entry);
        found
    }
}
