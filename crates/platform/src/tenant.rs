//! The Tenant controller: a Tenant becomes its namespace (§4.2) labelled with its ancestry,
//! the RBAC bindings of the tree (§4.4, [`crate::rbac`]), and its quotas as a ResourceQuota
//! and LimitRange (§4.6, [`crate::quota`]); status gives the namespace and `Ready`.
//!
//! Deleting a Tenant deletes its namespace, held by a finalizer until the namespace is gone:
//! the namespace controller empties it, which deletes the child Tenants and TenantClusters in
//! it, whose own finalizers cascade further down the tree.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::{Map, Value, json};

use runtime::client::{ClusterClients, ROOT};
use runtime::error::{Result, ignore_not_found};
use runtime::informer::{Change, Informer, ObjectKey, Store};
use runtime::queue::{Action, Queue};

use crate::conditions::{self, Cond};
use crate::datastore::ManagedEtcds;
use crate::install::{FIELD_MANAGER, apply};
use crate::resource::Tenant;
use crate::{naming, quota, rbac};

/// Holds a Tenant until its namespace is gone.
pub const FINALIZER: &str = "platform.matryoshka.dev/tenant";
/// The label naming a namespace's tenant (its namespace itself) on tenant namespaces.
pub const TENANT_LABEL: &str = "platform.matryoshka.dev/tenant";
/// Ancestry labels: `tenant.matryoshka.dev/<ns>` for each namespace on the chain.
pub const ANCESTOR_PREFIX: &str = "tenant.matryoshka.dev/";
/// How often a deleting Tenant looks whether its namespace is gone.
const DELETE_POLL: Duration = Duration::from_millis(200);

/// The labels of tenant namespace `ns`: the tenant, and every ancestor (itself included).
pub fn namespace_labels(ns: &str) -> Value {
    let mut m = Map::new();
    m.insert(TENANT_LABEL.into(), json!(ns));
    for a in naming::chain(ns) {
        m.insert(format!("{ANCESTOR_PREFIX}{a}"), json!(""));
    }
    Value::Object(m)
}

/// The Tenant controller.
pub struct TenantController {
    clients: ClusterClients,
    tenants: Store<Tenant>,
    queue: Arc<Queue<ObjectKey>>,
    /// Tenants' own etcds (`None`: the platform runs none).
    etcds: Option<Arc<ManagedEtcds>>,
}

/// How often a tenant whose etcd is on its way looks again.
const DATASTORE_POLL: Duration = Duration::from_secs(1);

/// Whether a Tenant asks for its own etcd.
pub fn wants_etcd(t: &Tenant) -> bool {
    t.spec.get("etcd").and_then(Value::as_bool) == Some(true)
}

impl TenantController {
    pub fn new(
        clients: ClusterClients,
        tenants: &Informer<Tenant>,
        etcds: Option<Arc<ManagedEtcds>>,
    ) -> Arc<Self> {
        let queue = Queue::new();
        let q = queue.clone();
        tenants.on_change(move |c| {
            if !matches!(c, Change::Deleted(..)) {
                q.add(c.key().clone());
            }
        });
        Arc::new(TenantController {
            clients,
            tenants: tenants.store(),
            queue,
            etcds,
        })
    }

    pub fn queue(&self) -> Arc<Queue<ObjectKey>> {
        self.queue.clone()
    }

    pub async fn reconcile(&self, key: ObjectKey) -> Result<Action> {
        let Some(t) = self.tenants.get(&key) else {
            return Ok(Action::AwaitChange);
        };
        let root = self.clients.cluster(ROOT)?;
        let api: Api<Tenant> = Api::namespaced(root.clone(), &key.namespace);
        let ns = naming::tenant_namespace(&key.namespace, &key.name);
        let finalizers = t.metadata.finalizers.clone().unwrap_or_default();
        if t.metadata.deletion_timestamp.is_some() {
            if !finalizers.iter().any(|f| f == FINALIZER) {
                return Ok(Action::AwaitChange);
            }
            let namespaces: Api<Namespace> = Api::all(root.clone());
            if ignore_not_found(namespaces.get(&ns).await)?.is_some() {
                ignore_not_found(namespaces.delete(&ns, &DeleteParams::default()).await)?;
                return Ok(Action::RequeueAfter(DELETE_POLL));
            }
            // Its clusters are gone with the namespace: so goes its etcd.
            if let Some(e) = &self.etcds
                && !e.remove(&root, &ns).await?
            {
                return Ok(Action::RequeueAfter(DELETE_POLL));
            }
            let rest: Vec<String> = finalizers.into_iter().filter(|f| f != FINALIZER).collect();
            let patch = json!({"metadata": {"finalizers": rest, "resourceVersion": t.metadata.resource_version}});
            ignore_not_found(
                api.patch(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await,
            )?;
            return Ok(Action::AwaitChange);
        }
        if !naming::valid_tenant_name(&key.name) || !naming::is_tenant_namespace(&key.namespace) {
            // Admission refuses these; one written around it is left alone.
            return Ok(Action::AwaitChange);
        }
        if !finalizers.iter().any(|f| f == FINALIZER) {
            let mut f = finalizers.clone();
            f.push(FINALIZER.into());
            let patch = json!({"metadata": {"finalizers": f, "resourceVersion": t.metadata.resource_version}});
            api.patch(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            return Ok(Action::AwaitChange);
        }
        apply(
            &root,
            &json!({
                "apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": ns, "labels": namespace_labels(&ns),
                    "annotations": {"platform.matryoshka.dev/owner": format!("{}/{}", key.namespace, key.name)}},
            }),
        )
        .await?;
        for b in rbac::role_bindings(&ns) {
            apply(&root, &b).await?;
        }
        let quotas = t
            .spec
            .get("resourceQuotas")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        self.quotas(&root, &ns, &quotas).await?;
        let (datastore, pending) = self.datastore(&root, &ns, wants_etcd(&t)).await?;
        let old = t.status.as_ref();
        let mut conds = vec![Cond {
            type_: "Ready",
            ok: true,
            reason: "Reconciled",
            message: "the tenant's namespace, access and quotas are in place",
        }];
        let datastore_message;
        if wants_etcd(&t) {
            datastore_message = pending
                .clone()
                .unwrap_or_else(|| format!("the tenant's etcd (DataStore {ns}) answers"));
            conds.push(Cond {
                type_: "DatastoreReady",
                ok: pending.is_none(),
                reason: if pending.is_none() {
                    "Running"
                } else if self.etcds.is_none() {
                    "NotSupported"
                } else {
                    "Starting"
                },
                message: &datastore_message,
            });
        }
        let mut status = json!({
            "namespace": ns,
            "observedGeneration": t.metadata.generation,
            "conditions": conditions::merge(
                old.and_then(|s| s.get("conditions")),
                &conds,
                &conditions::now(),
            ),
        });
        if let Some(ds) = &datastore {
            status["dataStore"] = json!(ds);
        }
        if old != Some(&status) {
            let mut patch = json!({"status": status});
            if datastore.is_none() && old.is_some_and(|o| o.get("dataStore").is_some()) {
                patch["status"]["dataStore"] = Value::Null;
            }
            api.patch_status(
                &key.name,
                &PatchParams::apply(FIELD_MANAGER),
                &Patch::Merge(patch),
            )
            .await?;
        }
        if pending.is_some() && self.etcds.is_some() {
            return Ok(Action::RequeueAfter(DATASTORE_POLL));
        }
        Ok(Action::AwaitChange)
    }

    /// The tenant's own etcd: run while `wanted`, taken down (once no cluster uses it) when
    /// not. The DataStore its clusters are bound to, and why it is not ready yet if it is not.
    async fn datastore(
        &self,
        root: &kube::Client,
        ns: &str,
        wanted: bool,
    ) -> Result<(Option<String>, Option<String>)> {
        let Some(etcds) = &self.etcds else {
            let why = wanted.then(|| {
                "this platform runs no datastores for tenants (matryoshka up runs them)".to_string()
            });
            return Ok((None, why));
        };
        if wanted {
            let pending = etcds.ensure(root, ns).await?;
            return Ok((Some(ns.to_string()), pending));
        }
        // Taken down only once no cluster uses it; until then it keeps serving them (and the
        // tenant looks again).
        if etcds.remove(root, ns).await? {
            Ok((None, None))
        } else {
            Ok((Some(ns.to_string()), Some("being removed".into())))
        }
    }

    async fn quotas(
        &self,
        root: &kube::Client,
        ns: &str,
        quotas: &Map<String, Value>,
    ) -> Result<()> {
        use k8s_openapi::api::core::v1::{LimitRange, ResourceQuota};
        if quotas.is_empty() {
            let rq: Api<ResourceQuota> = Api::namespaced(root.clone(), ns);
            ignore_not_found(rq.delete(quota::QUOTA_NAME, &DeleteParams::default()).await)?;
            let lr: Api<LimitRange> = Api::namespaced(root.clone(), ns);
            ignore_not_found(
                lr.delete(quota::LIMIT_RANGE_NAME, &DeleteParams::default())
                    .await,
            )?;
            return Ok(());
        }
        apply(root, &quota::resource_quota(ns, quotas)).await?;
        apply(root, &quota::limit_range(ns)).await
    }
}
