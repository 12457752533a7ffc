//! Services: the host Service of a tenant Service, and the host's cluster IP back.

use k8s_openapi::api::core::v1::{Endpoints, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::{DeleteParams, PostParams, Preconditions};
use runtime::client::ROOT;
use runtime::error::{Result, ignore_not_found};
use runtime::informer::ObjectKey;
use runtime::queue::Action;

use crate::{Syncer, translate};

/// How long after re-creating a Service its hand-made Endpoints are put back when deleted.
const RESTORE_WINDOW: std::time::Duration = std::time::Duration::from_secs(30);

impl Syncer {
    pub(crate) async fn service(&self, key: ObjectKey) -> Result<Action> {
        let Some(shared) = self.shared(&key.cluster) else {
            return Ok(Action::AwaitChange);
        };
        // The tenant's own API Service and its DNS Service are not synced.
        if (key.namespace.as_str(), key.name.as_str()) == ("default", "kubernetes")
            || (key.namespace.as_str(), key.name.as_str()) == ("kube-system", "kube-dns")
        {
            return Ok(Action::AwaitChange);
        }
        let target = shared.target();
        let host_name = target.name(&key.namespace, &key.name);
        let on = self.host(&shared)?;
        let host_api: Api<Service> = Api::namespaced(on.client.clone(), &shared.namespace);
        let host = on
            .services
            .get(&ObjectKey::new(ROOT, &shared.namespace, &host_name));
        let Some(tenant) = self.tenant_services.get(&key) else {
            if host.is_some() {
                ignore_not_found(host_api.delete(&host_name, &DeleteParams::default()).await)?;
                self.service_endpoints(&key, None, &on.client, &host_name, &target)
                    .await?;
            }
            return Ok(Action::AwaitChange);
        };
        if tenant.metadata.deletion_timestamp.is_some() {
            return Ok(Action::AwaitChange);
        }
        let want = translate::host_service(&tenant, &target);
        let Some(h) = host else {
            match host_api.create(&PostParams::default(), &want).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(e) => return Err(e.into()),
            }
            return Ok(Action::AwaitChange);
        };
        if translate::service_spec_fields(&h) != translate::service_spec_fields(&want)
            || h.metadata.labels != want.metadata.labels
        {
            let mut updated = (*h).clone();
            let (spec, w) = (
                updated.spec.get_or_insert_with(Default::default),
                want.spec.clone().unwrap_or_default(),
            );
            spec.type_ = w.type_;
            spec.ports = w.ports;
            spec.selector = w.selector;
            spec.session_affinity = w.session_affinity;
            spec.session_affinity_config = w.session_affinity_config;
            spec.publish_not_ready_addresses = w.publish_not_ready_addresses;
            spec.external_name = w.external_name;
            spec.external_traffic_policy = w.external_traffic_policy;
            spec.internal_traffic_policy = w.internal_traffic_policy;
            updated.metadata.labels = want.metadata.labels.clone();
            updated.metadata.annotations = want.metadata.annotations.clone();
            host_api
                .replace(&host_name, &PostParams::default(), &updated)
                .await?;
            return Ok(Action::AwaitChange);
        }
        // The tenant Service takes the host's cluster IP.
        let host_ip = h.spec.as_ref().and_then(|s| s.cluster_ip.clone());
        let tenant_ip = tenant.spec.as_ref().and_then(|s| s.cluster_ip.clone());
        if let Some(ip) = host_ip.filter(|ip| !ip.is_empty() && ip != "None")
            && tenant_ip.as_deref() != Some(ip.as_str())
        {
            self.recreate_with_ip(&key, &tenant, &ip).await?;
            return Ok(Action::AwaitChange);
        }
        self.restore_endpoints(&key).await?;
        self.service_endpoints(&key, Some(&tenant), &on.client, &host_name, &target)
            .await?;
        Ok(Action::AwaitChange)
    }

    /// Keeps a deleted hand-made Endpoints object to put back when its Service was re-created
    /// by this syncer within [`RESTORE_WINDOW`]: the endpoints controller deletes a deleted
    /// Service's Endpoints — also ones written after the deletion, before it noticed — so the
    /// deletion is what is watched for, not the object at the re-creation. Once per
    /// re-creation.
    pub(crate) fn endpoints_deleted(&self, key: &ObjectKey, ep: &Endpoints) {
        let recent = {
            let mut r = self.recreated.lock();
            r.retain(|_, at| at.elapsed() < RESTORE_WINDOW);
            r.remove(key).is_some()
        };
        if !recent {
            return;
        }
        let keep = Endpoints {
            metadata: ObjectMeta {
                name: ep.metadata.name.clone(),
                namespace: ep.metadata.namespace.clone(),
                labels: ep.metadata.labels.clone(),
                annotations: ep.metadata.annotations.clone(),
                ..ObjectMeta::default()
            },
            subsets: ep.subsets.clone(),
        };
        self.restore
            .lock()
            .insert(key.clone(), (std::time::Instant::now(), keep));
    }

    /// Puts back the hand-made Endpoints [`Syncer::endpoints_deleted`] kept, once the Service
    /// is there again.
    async fn restore_endpoints(&self, key: &ObjectKey) -> Result<()> {
        let keep = {
            let mut r = self.restore.lock();
            r.retain(|_, (at, _)| at.elapsed() < RESTORE_WINDOW);
            if self.tenant_endpoints.get(key).is_some() {
                return Ok(());
            }
            r.remove(key).map(|(_, ep)| ep)
        };
        let Some(ep) = keep else { return Ok(()) };
        let api: Api<Endpoints> =
            Api::namespaced(self.clients.cluster(&key.cluster)?, &key.namespace);
        match api.create(&PostParams::default(), &ep).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Re-creates a tenant Service with cluster IP `ip` (vcluster's rule: one IP per Service
    /// on both sides).
    pub(crate) async fn recreate_with_ip(
        &self,
        key: &ObjectKey,
        tenant: &Service,
        ip: &str,
    ) -> Result<()> {
        let api: Api<Service> =
            Api::namespaced(self.clients.cluster(&key.cluster)?, &key.namespace);
        // The tenant's endpoints controller deletes the Endpoints of a deleted Service, even
        // hand-made ones: they are put back after the Service is made again.
        self.recreated
            .lock()
            .insert(key.clone(), std::time::Instant::now());
        let mut fresh = Service {
            metadata: ObjectMeta {
                name: tenant.metadata.name.clone(),
                namespace: tenant.metadata.namespace.clone(),
                labels: tenant.metadata.labels.clone(),
                annotations: tenant.metadata.annotations.clone(),
                owner_references: tenant.metadata.owner_references.clone(),
                finalizers: tenant.metadata.finalizers.clone(),
                ..ObjectMeta::default()
            },
            spec: tenant.spec.clone(),
            status: None,
        };
        if let Some(spec) = fresh.spec.as_mut() {
            spec.cluster_ip = Some(ip.to_string());
            spec.cluster_ips = Some(vec![ip.to_string()]);
        }
        let dp = DeleteParams {
            preconditions: Some(Preconditions {
                uid: tenant.metadata.uid.clone(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match api.delete(&key.name, &dp).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
        match api.create(&PostParams::default(), &fresh).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}
