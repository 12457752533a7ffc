//! The host's Events about synced objects, copied into their tenant clusters.

use std::sync::Weak;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use runtime::client::ROOT;
use runtime::error::{Result, ignore_not_found};
use runtime::informer::ObjectKey;
use serde_json::json;

use crate::host::{Host, HostRef};
use crate::{Syncer, names};

/// Copies a host's Events about synced pods and Services into their tenant clusters, until
/// the syncer or the host is gone.
pub(crate) async fn host_events(syncer: Weak<Syncer>, host_ref: HostRef, host: Weak<Host>) {
    let Some(api) = host.upgrade().map(|h| h.watched::<Event>()) else {
        return;
    };
    let stream = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .applied_objects();
    futures::pin_mut!(stream);
    while let Some(ev) = stream.next().await {
        let Ok(ev) = ev else { continue };
        let (Some(s), Some(h)) = (syncer.upgrade(), host.upgrade()) else {
            return;
        };
        if let Err(e) = s.copy_event(&host_ref, &h, &ev).await {
            tracing::debug!(error = %e, "copying a host event");
        }
    }
}

impl Syncer {
    pub(crate) async fn copy_event(
        &self,
        host_ref: &HostRef,
        host: &Host,
        ev: &Event,
    ) -> Result<()> {
        let obj = &ev.involved_object;
        let (Some(ns), Some(name)) = (obj.namespace.as_deref(), obj.name.as_deref()) else {
            return Ok(());
        };
        let host_key = ObjectKey::new(ROOT, ns, name);
        let meta = match obj.kind.as_deref() {
            Some("Pod") => host.pods.store().get(&host_key).map(|p| p.metadata.clone()),
            Some("Service") => host.services.get(&host_key).map(|s| s.metadata.clone()),
            _ => None,
        };
        let Some(meta) = meta else { return Ok(()) };
        let Some(key) = self.tenant_key(host_ref, &meta) else {
            return Ok(());
        };
        let suffix = ev
            .metadata
            .name
            .as_deref()
            .and_then(|n| n.rsplit('.').next())
            .unwrap_or("0");
        let mut copy = ev.clone();
        copy.metadata = ObjectMeta {
            name: Some(format!("{}.{suffix}", key.name)),
            namespace: Some(key.namespace.clone()),
            ..ObjectMeta::default()
        };
        copy.involved_object = ObjectReference {
            namespace: Some(key.namespace.clone()),
            name: Some(key.name.clone()),
            uid: meta
                .annotations
                .as_ref()
                .and_then(|a| a.get(names::OBJECT_UID).cloned()),
            field_path: obj.field_path.clone(),
            kind: obj.kind.clone(),
            api_version: obj.api_version.clone(),
            resource_version: None,
        };
        copy.message = copy.message.map(|m| m.replace(name, &key.name));
        copy.related = None;
        let api: Api<Event> = Api::namespaced(self.clients.cluster(&key.cluster)?, &key.namespace);
        match api.create(&PostParams::default(), &copy).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 => {
                let patch = json!({"count": copy.count, "lastTimestamp": copy.last_timestamp,
                    "message": copy.message, "eventTime": copy.event_time});
                ignore_not_found(
                    api.patch(
                        copy.metadata.name.as_deref().unwrap_or_default(),
                        &PatchParams::default(),
                        &Patch::Merge(&patch),
                    )
                    .await,
                )?;
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }
}
