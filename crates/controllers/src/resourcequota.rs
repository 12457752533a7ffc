//! The ResourceQuota controller (upstream `pkg/controller/resourcequota`): keeps every quota's
//! `status.hard` equal to `spec.hard` and recounts `status.used` from the objects in its
//! namespace (non-terminal pods' requests and limits, services, claims, object counts).
//!
//! Admission charges creates to `status.used` as they happen; this controller corrects the
//! usage when objects go away (pods finishing or deleted, services and claims deleted are
//! watched) and periodically for everything else ([`ResourceQuotaController::new`]'s
//! `resync`). A quota is recounted when its `spec.hard` differs from `status.hard` too, so a
//! new quota gets its first status at once. Objects are listed through the API, so
//! `count/<resource>.<group>` works for any served resource, custom ones included.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use apimachinery::quota::{self as eval, ResourceList};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, ResourceQuota, Service};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, ListParams, PostParams};
use kube::discovery::{self, Scope};
use serde_json::{Value, json};

use runtime::client::ClusterClients;
use runtime::error::{Error, Result};
use runtime::informer::{Change, ObjectKey, Store};
use runtime::queue::{Action, Queue};
use runtime::shared::Informers;

/// Upstream's `--resource-quota-sync-period` default.
pub const DEFAULT_RESYNC: Duration = Duration::from_secs(300);

/// The ResourceQuota controller.
pub struct ResourceQuotaController {
    clients: ClusterClients,
    quotas: Store<ResourceQuota>,
    queue: Arc<Queue<ObjectKey>>,
    resync: Duration,
}

/// Queues every quota of the namespace of `key`.
fn requeue_namespace(q: &Queue<ObjectKey>, quotas: &Store<ResourceQuota>, key: &ObjectKey) {
    for rq in quotas.list_namespace(&key.cluster, &key.namespace) {
        let name = rq.metadata.name.as_deref().unwrap_or_default();
        q.add(ObjectKey::new(&key.cluster, &key.namespace, name));
    }
}

fn terminal(p: &Pod) -> bool {
    matches!(
        p.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

impl ResourceQuotaController {
    pub fn new(informers: &Informers, resync: Duration) -> Result<Arc<Self>> {
        let queue: Arc<Queue<ObjectKey>> = Queue::new();
        let quotas_inf = informers.get::<ResourceQuota>()?;
        let quotas = quotas_inf.store();
        let q = queue.clone();
        quotas_inf.on_change(move |c| match c {
            Change::Added(k, _) => q.add((*k).clone()),
            Change::Updated { key, old, new } => {
                let hard = |r: &ResourceQuota| r.spec.as_ref().and_then(|s| s.hard.clone());
                let status_hard = new.status.as_ref().and_then(|s| s.hard.clone());
                if hard(old) != hard(new) || hard(new) != status_hard {
                    q.add((*key).clone());
                }
            }
            Change::Deleted(..) => {}
        });
        let (q, s) = (queue.clone(), quotas.clone());
        informers.get::<Pod>()?.on_change(move |c| match c {
            Change::Deleted(k, _) => requeue_namespace(&q, &s, k),
            Change::Updated { key, old, new } => {
                let resized = old.spec.as_ref().map(|s| &s.containers)
                    != new.spec.as_ref().map(|s| &s.containers);
                if (!terminal(old) && terminal(new)) || resized {
                    requeue_namespace(&q, &s, key);
                }
            }
            Change::Added(..) => {}
        });
        let (q, s) = (queue.clone(), quotas.clone());
        informers.get::<Service>()?.on_change(move |c| match c {
            Change::Deleted(k, _) => requeue_namespace(&q, &s, k),
            Change::Updated { key, old, new } => {
                let ty = |x: &Service| x.spec.as_ref().and_then(|s| s.type_.clone());
                if ty(old) != ty(new) {
                    requeue_namespace(&q, &s, key);
                }
            }
            Change::Added(..) => {}
        });
        let (q, s) = (queue.clone(), quotas.clone());
        informers
            .get::<PersistentVolumeClaim>()?
            .on_change(move |c| {
                if let Change::Deleted(k, _) = c {
                    requeue_namespace(&q, &s, k);
                }
            });
        Ok(Arc::new(ResourceQuotaController {
            clients: informers.clients().clone(),
            quotas,
            queue,
            resync,
        }))
    }

    pub fn queue(&self) -> Arc<Queue<ObjectKey>> {
        self.queue.clone()
    }

    /// Recounts one quota and writes its status when it changed.
    pub async fn reconcile(&self, key: ObjectKey) -> Result<Action> {
        let Some(rq) = self.quotas.get(&key) else {
            return Ok(Action::AwaitChange);
        };
        if rq.metadata.deletion_timestamp.is_some() {
            return Ok(Action::AwaitChange);
        }
        let quota = serde_json::to_value(&*rq)?;
        let hard = eval::parse_list(quota.pointer("/spec/hard"));
        let client = self.clients.cluster(&key.cluster)?;
        let used = self.count(&client, &key.namespace, &quota, &hard).await?;
        let old_hard = eval::parse_list(quota.pointer("/status/hard"));
        let old_used = eval::parse_list(quota.pointer("/status/used"));
        if old_hard != hard || old_used != used || quota.pointer("/status/used").is_none() {
            let mut next = (*rq).clone();
            next.status = Some(serde_json::from_value(json!({
                "hard": eval::to_json(&hard),
                "used": eval::to_json(&used),
            }))?);
            let api: Api<ResourceQuota> = Api::namespaced(client, &key.namespace);
            match api
                .replace_status(&key.name, &PostParams::default(), &next)
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => return Ok(Action::AwaitChange),
                Err(e) => return Err(e.into()),
            }
        }
        Ok(Action::RequeueAfter(self.resync))
    }

    /// The usage of every resource `hard` names, counted from the namespace's objects.
    async fn count(
        &self,
        client: &kube::Client,
        namespace: &str,
        quota: &Value,
        hard: &ResourceList,
    ) -> Result<ResourceList> {
        let sources: BTreeSet<(String, String)> =
            hard.keys().filter_map(|k| eval::source_of(k)).collect();
        let now = registry_now();
        let mut used = ResourceList::new();
        for (group, plural) in sources {
            let Some(ar) = api_resource(client, &group, &plural).await? else {
                continue;
            };
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &ar);
            let list = api.list(&ListParams::default()).await?;
            for o in list.items {
                let v = serde_json::to_value(&o)?;
                if eval::scopes_match(quota, &group, &plural, &v) {
                    let u = eval::usage(&group, &plural, &v, now);
                    eval::add(&mut used, &eval::mask(&u, hard.keys()));
                }
            }
        }
        for k in hard.keys() {
            used.entry(k.clone())
                .or_insert_with(|| "0".parse().expect("zero is a quantity"));
        }
        Ok(used
            .into_iter()
            .filter(|(k, _)| hard.contains_key(k))
            .collect())
    }
}

fn registry_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// The namespaced resource `plural` of `group` at its preferred version (core: `v1`).
async fn api_resource(
    client: &kube::Client,
    group: &str,
    plural: &str,
) -> Result<Option<ApiResource>> {
    if group.is_empty() {
        return Ok(Some(ApiResource {
            group: String::new(),
            version: "v1".into(),
            api_version: "v1".into(),
            kind: String::new(),
            plural: plural.into(),
        }));
    }
    let g = match discovery::group(client, group).await {
        Ok(g) => g,
        Err(kube::Error::Api(s)) if s.code == 404 => return Ok(None),
        Err(kube::Error::Discovery(_)) => return Ok(None),
        Err(e) => return Err(Error::from(e)),
    };
    Ok(g.recommended_resources()
        .into_iter()
        .find(|(ar, caps)| ar.plural == plural && caps.scope == Scope::Namespaced)
        .map(|(ar, _)| ar))
}
