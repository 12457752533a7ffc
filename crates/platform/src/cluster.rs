//! The TenantCluster controller: a TenantCluster becomes a logical cluster of the API server
//! (a `LogicalCluster` in the root cluster, annotated with the Kubernetes release its
//! `/version` reports), the kubeconfig Secret ([`crate::kubeconfig`]), and its node groups as
//! Cluster API objects ([`crate::workers`]; the `machines` crate's controllers make the
//! machines). Status: `ControlPlaneReady`, `NodesReady`, `Ready`, version, endpoint, node
//! counts.
//!
//! Deletion runs through a finalizer: the Cluster goes first (its machines are deleted), then
//! the Secret and the LogicalCluster (the API server then deletes every key under the
//! cluster's prefix and its credentials), and the finalizer is released once the
//! LogicalCluster is gone.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use runtime::client::{ClusterClients, ROOT};
use runtime::error::{Result, ignore_not_found};
use runtime::informer::{Change, Informer, ObjectKey, Store};
use runtime::queue::{Action, Queue};

use crate::conditions::{self, Cond};
use crate::endpoint::{self, Hosting};
use crate::install::FIELD_MANAGER;
use crate::kubeconfig::{self, Target};
use crate::resource::{LogicalCluster, Tenant, TenantCluster};
use crate::{naming, spec, workers};

/// `action`, or a reconcile when the kubeconfig's certificates are due, if that comes first.
fn renewal_due(action: Action, at: std::time::SystemTime) -> Action {
    let due = at
        .duration_since(std::time::SystemTime::now())
        .unwrap_or_default()
        .max(std::time::Duration::from_millis(100));
    match action {
        Action::RequeueAfter(d) if d <= due => Action::RequeueAfter(d),
        _ => Action::RequeueAfter(due),
    }
}

/// Holds a TenantCluster until its logical cluster and Secret are gone.
pub const FINALIZER: &str = "platform.matryoshka.dev/tenant-cluster";
/// Labels on the LogicalCluster naming its TenantCluster.
pub const OWNER_NAMESPACE_LABEL: &str = "platform.matryoshka.dev/namespace";
pub const OWNER_NAME_LABEL: &str = "platform.matryoshka.dev/name";

/// The TenantCluster controller.
pub struct TenantClusterController {
    clients: ClusterClients,
    clusters: Store<TenantCluster>,
    logical: Store<LogicalCluster>,
    tenants: Store<Tenant>,
    hosting: Hosting,
    /// Logical clusters given their platform StorageClass by this process.
    classes_done: std::sync::Mutex<std::collections::HashSet<String>>,
    /// The addons applied to each logical cluster (what was applied, to skip repeating it).
    addons_done: std::sync::Mutex<std::collections::HashMap<String, String>>,
    /// The ingress controller's image (None: the `ingressNginx` addon cannot be installed).
    ingress_image: Option<crate::addons::ImageSource>,
    /// The platform's identity provider for `oidc.mode: System`.
    system_oidc: Option<crate::oidc::SystemIssuer>,
    /// What `spec.oidc` last made in each cluster (to skip repeating it).
    oidc_done: std::sync::Mutex<std::collections::HashMap<String, String>>,
    /// Whether Cluster API's CRDs are served (without them a cluster gets no workers).
    cluster_api: bool,
    queue: Arc<Queue<ObjectKey>>,
    /// Lifetime of the kubeconfigs' client certificates.
    client_cert_validity: std::time::Duration,
    /// The machine provider of clusters whose spec names none: `process` where this
    /// platform runs real machines, else `virtual`.
    default_provider: &'static str,
}

impl TenantClusterController {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        clients: ClusterClients,
        clusters: &Informer<TenantCluster>,
        logical: &Informer<LogicalCluster>,
        tenants: &Informer<Tenant>,
        hosting: Hosting,
        cluster_api: bool,
        client_cert_validity: std::time::Duration,
        default_provider: &'static str,
        ingress_image: Option<crate::addons::ImageSource>,
        system_oidc: Option<crate::oidc::SystemIssuer>,
    ) -> Arc<Self> {
        let queue = Queue::new();
        let q = queue.clone();
        clusters.on_change(move |c| {
            if !matches!(c, Change::Deleted(..)) {
                q.add(c.key().clone());
            }
        });
        let q = queue.clone();
        logical.on_change(move |c| {
            let labels = c.object().metadata.labels.as_ref();
            let get = |k: &str| labels.and_then(|l| l.get(k)).cloned();
            if let (Some(ns), Some(name)) = (get(OWNER_NAMESPACE_LABEL), get(OWNER_NAME_LABEL)) {
                q.add(ObjectKey::new(ROOT, &ns, &name));
            }
        });
        // A tenant's host is in its clusters' hostnames (and its descendants').
        let q = queue.clone();
        let cs = clusters.store();
        tenants.on_change(move |c| {
            let t = c.object();
            let ns = crate::naming::tenant_namespace(
                t.metadata.namespace.as_deref().unwrap_or(""),
                t.metadata.name.as_deref().unwrap_or(""),
            );
            for (k, _) in cs.list_cluster(ROOT) {
                if k.namespace == ns || k.namespace.starts_with(&format!("{ns}-")) {
                    q.add(k);
                }
            }
        });
        Arc::new(TenantClusterController {
            clients,
            clusters: clusters.store(),
            logical: logical.store(),
            tenants: tenants.store(),
            hosting,
            classes_done: Default::default(),
            addons_done: Default::default(),
            ingress_image,
            system_oidc,
            oidc_done: Default::default(),
            cluster_api,
            queue,
            client_cert_validity,
            default_provider,
        })
    }

    pub fn queue(&self) -> Arc<Queue<ObjectKey>> {
        self.queue.clone()
    }

    fn lc_api(&self) -> Result<Api<LogicalCluster>> {
        Ok(Api::all(self.clients.cluster(ROOT)?))
    }

    pub async fn reconcile(&self, key: ObjectKey) -> Result<Action> {
        let Some(tc) = self.clusters.get(&key) else {
            return Ok(Action::AwaitChange);
        };
        let lc_name = naming::logical_cluster(&key.namespace, &key.name);
        let root = self.clients.cluster(ROOT)?;
        let api: Api<TenantCluster> = Api::namespaced(root.clone(), &key.namespace);
        let finalizers = tc.metadata.finalizers.clone().unwrap_or_default();
        if tc.metadata.deletion_timestamp.is_some() {
            if !finalizers.iter().any(|f| f == FINALIZER) {
                return Ok(Action::AwaitChange);
            }
            return self.delete(&key, &tc, &lc_name, &api, finalizers).await;
        }
        if !finalizers.iter().any(|f| f == FINALIZER) {
            let mut f = finalizers;
            f.push(FINALIZER.into());
            let patch = json!({"metadata": {"finalizers": f, "resourceVersion": tc.metadata.resource_version}});
            api.patch(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            return Ok(Action::AwaitChange);
        }
        let minor = spec::version(&tc.spec);
        let Some(release) = spec::release_of(minor) else {
            // Admission refuses unknown versions; one written around it waits for a fix.
            return self
                .status(
                    &api,
                    &tc,
                    &[Cond {
                        type_: "Ready",
                        ok: false,
                        reason: "UnsupportedVersion",
                        message: "the version is not supported",
                    }],
                    json!({}),
                )
                .await;
        };
        // 1. The control plane: a logical cluster announcing the chosen release, served at
        // the cluster's hostnames.
        let tenant_host =
            endpoint::tenant_host(&self.tenants, &self.hosting.root_host, &key.namespace);
        let host = endpoint::cluster_host(&tc.spec, &key.name, &tenant_host);
        let hostnames = endpoint::hostnames(&host, &key.namespace, &key.name);
        // Its OIDC issuers; a configuration that cannot be read now leaves the current one.
        let release_name = naming::release(&key.name);
        let authentication = match crate::oidc::desired(
            &root,
            &key.namespace,
            &release_name,
            &tc.spec,
            self.system_oidc.as_ref(),
        )
        .await
        {
            Ok(a) => Some(a),
            Err(e) => {
                tracing::warn!(cluster = %key, error = %e, "the cluster's OIDC configuration");
                None
            }
        };
        let data_store = self.data_store(&tc, &key.namespace);
        let lc = self
            .ensure_logical_cluster(
                &key,
                &lc_name,
                release,
                &hostnames,
                authentication.as_ref(),
                spec::shared_workers(&tc.spec),
                data_store.as_deref(),
            )
            .await?;
        let ready = lc
            .as_ref()
            .and_then(|l| l.status_field("/phase"))
            .and_then(Value::as_str)
            == Some("Ready");
        let Some(lc) = lc.filter(|_| ready) else {
            return self
                .status(
                    &api,
                    &tc,
                    &[
                        Cond {
                            type_: "ControlPlaneReady",
                            ok: false,
                            reason: "Provisioning",
                            message: "the control plane is being provisioned",
                        },
                        Cond {
                            type_: "NodesReady",
                            ok: false,
                            reason: "WaitingForControlPlane",
                            message: "nodes join once the control plane is ready",
                        },
                        Cond {
                            type_: "Ready",
                            ok: false,
                            reason: "Provisioning",
                            message: "the control plane is being provisioned",
                        },
                    ],
                    json!({"logicalCluster": lc_name}),
                )
                .await;
        };
        let path_url = lc
            .status_field("/url")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let url = if self.hosting.host_urls {
            endpoint::host_url(&path_url, &host)
        } else {
            path_url
        };
        // The in-cluster Service `admin.svc` names.
        endpoint::ensure_api_service(&root, &key.namespace, &key.name, &owner(&tc)).await?;
        let serving_ca = lc
            .status_field("/caBundle")
            .and_then(Value::as_str)
            .and_then(kubeconfig::serving_ca)
            .unwrap_or_default();
        // 2. The kubeconfigs.
        let tenant = self.clients.cluster(&lc_name)?;
        let target = Target {
            namespace: &key.namespace,
            name: &key.name,
            logical_cluster: &lc_name,
            url: &url,
            serving_ca: &serving_ca,
            owner: owner(&tc),
        };
        let renew_at =
            kubeconfig::ensure(&root, &tenant, &target, self.client_cert_validity).await?;
        // A shared cluster's classes are its host's (the syncer mirrors them).
        if !spec::shared_workers(&tc.spec) {
            self.ensure_storage_class(&tenant, &lc_name, spec::storage_class(&tc.spec))
                .await?;
        }
        self.ensure_addons(&tenant, &lc_name, &tc.spec).await?;
        self.ensure_oidc(&root, &tenant, &key, &release_name, &tc, &url, &serving_ca)
            .await?;
        // 3. The workers: shared nodes (the syncer runs the pods on the host's nodes), or
        // machines as Cluster API objects.
        if spec::shared_workers(&tc.spec) {
            if self.cluster_api {
                workers::delete(&root, &key.namespace, &release_name).await?;
            }
            return self
                .status(
                    &api,
                    &tc,
                    &[
                        Cond {
                            type_: "ControlPlaneReady",
                            ok: true,
                            reason: "Ready",
                            message: "the control plane is serving",
                        },
                        Cond {
                            type_: "NodesReady",
                            ok: true,
                            reason: "SharedNodes",
                            message: "pods run on the host cluster's nodes, synchronised into this namespace",
                        },
                        Cond {
                            type_: "Ready",
                            ok: true,
                            reason: "Ready",
                            message: "the cluster is ready",
                        },
                    ],
                    json!({"version": release, "endpoint": url, "host": host, "logicalCluster": lc_name,
                        "kubeconfigSecret": naming::kubeconfig_secret(&key.name),
                        "workers": spec::shared_workers_status(&tc.spec, &key.namespace)}),
                )
                .await
                .map(|action| renewal_due(action, renew_at));
        }
        if !self.cluster_api {
            return self
                .status(
                    &api,
                    &tc,
                    &[
                        Cond {
                            type_: "ControlPlaneReady",
                            ok: true,
                            reason: "Ready",
                            message: "the control plane is serving",
                        },
                        Cond {
                            type_: "NodesReady",
                            ok: false,
                            reason: "ClusterAPIMissing",
                            message: "Cluster API is not installed (matryoshka up --cluster-api-crds DIR): no worker machines",
                        },
                        Cond {
                            type_: "Ready",
                            ok: false,
                            reason: "ClusterAPIMissing",
                            message: "Cluster API is not installed: no worker machines",
                        },
                    ],
                    json!({"version": release, "endpoint": url, "host": host, "logicalCluster": lc_name,
                        "kubeconfigSecret": naming::kubeconfig_secret(&key.name)}),
                )
                .await
                .map(|action| renewal_due(action, renew_at));
        }
        let counts = workers::Workers {
            namespace: &key.namespace,
            release: &release_name,
            logical_cluster: &lc_name,
            version: release,
            url: &url,
            serving_ca: &serving_ca,
            spec: &tc.spec,
            owner: owner(&tc),
            default_provider: self.default_provider,
        }
        .ensure(&root)
        .await?;
        let nodes_ready = counts.ready >= counts.desired;
        let nodes_msg = format!(
            "{}/{} nodes ready",
            counts.ready.min(counts.desired),
            counts.desired
        );
        self.status(
            &api,
            &tc,
            &[
                Cond {
                    type_: "ControlPlaneReady",
                    ok: true,
                    reason: "Ready",
                    message: "the control plane is serving",
                },
                Cond {
                    type_: "NodesReady",
                    ok: nodes_ready,
                    reason: if nodes_ready { "Ready" } else { "Joining" },
                    message: &nodes_msg,
                },
                Cond {
                    type_: "Ready",
                    ok: nodes_ready,
                    reason: if nodes_ready {
                        "Ready"
                    } else {
                        "NodesNotReady"
                    },
                    message: if nodes_ready {
                        "the cluster is ready"
                    } else {
                        &nodes_msg
                    },
                },
            ],
            json!({
                "version": release,
                "endpoint": url,
                "host": host,
                "logicalCluster": lc_name,
                "kubeconfigSecret": naming::kubeconfig_secret(&key.name),
                "desiredNodes": counts.desired,
                "readyNodes": counts.ready.min(counts.desired),
                "nodes": format!("{}/{}", counts.ready.min(counts.desired), counts.desired),
            }),
        )
        .await
        .map(|action| renewal_due(action, renew_at))
    }

    /// The tenant cluster's default StorageClass, the platform's volumes (`local` stops being
    /// the default).
    async fn ensure_storage_class(
        &self,
        tenant: &kube::Client,
        lc_name: &str,
        class: &str,
    ) -> Result<()> {
        let done = format!("{lc_name}/{class}");
        if self.classes_done.lock().is_ok_and(|d| d.contains(&done)) {
            return Ok(());
        }
        crate::install::apply(tenant, &machines::volumes::tenant_class(class)).await?;
        let api: Api<k8s_openapi::api::storage::v1::StorageClass> = Api::all(tenant.clone());
        let default = "storageclass.kubernetes.io/is-default-class";
        if let Some(local) = ignore_not_found(api.get("local").await)?
            && local
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(default))
                .map(String::as_str)
                == Some("true")
        {
            let patch = json!({"metadata": {"annotations": {default: "false"}}});
            api.patch("local", &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
        if let Ok(mut d) = self.classes_done.lock() {
            d.insert(done);
        }
        Ok(())
    }

    /// The users of `spec.oidc` bound in the tenant cluster, and the OIDC kubeconfig Secret
    /// of a System-mode cluster (removed otherwise).
    #[allow(clippy::too_many_arguments)]
    async fn ensure_oidc(
        &self,
        root: &kube::Client,
        tenant: &kube::Client,
        key: &ObjectKey,
        release: &str,
        tc: &TenantCluster,
        url: &str,
        serving_ca: &str,
    ) -> Result<()> {
        let wanted =
            json!({"mode": crate::oidc::mode(&tc.spec), "users": tc.spec.pointer("/oidc/users"),
            "url": url, "issuer": self.system_oidc.as_ref().map(|s| s.url.clone())})
            .to_string();
        let memo = format!("{}/{}", key.namespace, key.name);
        if self
            .oidc_done
            .lock()
            .ok()
            .and_then(|d| d.get(&memo).cloned())
            .as_deref()
            == Some(wanted.as_str())
        {
            return Ok(());
        }
        crate::oidc::ensure_users(tenant, release, &tc.spec).await?;
        let secret_name = format!("{release}-oidc-kubeconfig");
        let secrets: Api<k8s_openapi::api::core::v1::Secret> =
            Api::namespaced(root.clone(), &key.namespace);
        match (crate::oidc::mode(&tc.spec), &self.system_oidc) {
            ("System", Some(issuer)) => {
                use base64::Engine as _;
                let doc = crate::oidc::kubeconfig(
                    release,
                    url,
                    serving_ca,
                    &issuer.url,
                    &crate::oidc::client_id(&key.namespace, release),
                );
                crate::install::apply(
                    root,
                    &json!({
                        "apiVersion": "v1", "kind": "Secret",
                        "metadata": {"name": secret_name, "namespace": key.namespace,
                            "ownerReferences": [owner(tc)]},
                        "type": "Opaque",
                        "data": {"kubeconfig": base64::engine::general_purpose::STANDARD.encode(doc)},
                    }),
                )
                .await?;
            }
            _ => {
                ignore_not_found(secrets.delete(&secret_name, &Default::default()).await)?;
            }
        }
        if let Ok(mut d) = self.oidc_done.lock() {
            d.insert(memo, wanted);
        }
        Ok(())
    }

    /// The addons the spec enables installed in the tenant cluster, the others removed.
    async fn ensure_addons(
        &self,
        tenant: &kube::Client,
        lc_name: &str,
        spec: &Value,
    ) -> Result<()> {
        let addon = crate::addons::IngressAddon::from_spec(spec);
        let image = match (&self.ingress_image, addon.enabled) {
            (_, false) => None,
            (None, true) => {
                tracing::warn!(cluster = %lc_name, "addons.ingressNginx is enabled but this platform has no ingress controller image");
                return Ok(());
            }
            (Some(source), true) => Some(source.get().await.map_err(|e| {
                runtime::error::Error::Config(format!("the ingress controller's image: {e}"))
            })?),
        };
        let wanted = match &image {
            Some(image) => format!("ingress {} {image}", addon.expose_method),
            None => "ingress off".to_string(),
        };
        let done = self
            .addons_done
            .lock()
            .ok()
            .and_then(|d| d.get(lc_name).cloned());
        if done.as_deref() == Some(wanted.as_str()) {
            return Ok(());
        }
        match &image {
            Some(image) => crate::addons::ensure_ingress(tenant, &addon, image).await?,
            None => crate::addons::remove_ingress(tenant).await?,
        }
        if let Ok(mut d) = self.addons_done.lock() {
            d.insert(lc_name.to_string(), wanted);
        }
        Ok(())
    }

    /// The DataStore a new cluster of the tenant namespace `ns` is bound to: its own
    /// `spec.dataStore`, else its tenant's etcd (`spec.etcd`, the DataStore named after the
    /// namespace), else the tenant's `spec.dataStore`; none: the shared store.
    fn data_store(&self, tc: &TenantCluster, ns: &str) -> Option<String> {
        let named = |v: Option<&Value>| {
            v.and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(String::from)
        };
        if let Some(ds) = named(tc.spec.get("dataStore")) {
            return Some(ds);
        }
        let (parent, name) = naming::tenant_of_namespace(ns)?;
        let tenant = self.tenants.get(&ObjectKey::new(ROOT, &parent, &name))?;
        if crate::tenant::wants_etcd(&tenant) {
            return Some(ns.to_string());
        }
        named(tenant.spec.get("dataStore"))
    }

    /// The LogicalCluster (created, or its release annotation, hostnames, OIDC and pod
    /// placement brought up to date). A shared cluster's pods are placed by its host's
    /// scheduler (the label [`apimachinery::cluster::PLACEMENT_LABEL`]). A new one is bound to
    /// `data_store`; an existing one keeps its binding.
    #[allow(clippy::too_many_arguments)]
    async fn ensure_logical_cluster(
        &self,
        key: &ObjectKey,
        lc_name: &str,
        release: &str,
        hostnames: &[String],
        authentication: Option<&Option<Value>>,
        shared: bool,
        data_store: Option<&str>,
    ) -> Result<Option<Arc<LogicalCluster>>> {
        let annotation = apimachinery::cluster::VERSION_ANNOTATION;
        let placement_label = apimachinery::cluster::PLACEMENT_LABEL;
        let placement = shared.then_some(apimachinery::cluster::PLACEMENT_HOST);
        let cached = self.logical.get(&ObjectKey::new(ROOT, "", lc_name));
        let api = self.lc_api()?;
        match cached {
            Some(lc) if lc.metadata.deletion_timestamp.is_some() => {
                // A previous cluster of this name is still going away.
                Ok(None)
            }
            Some(lc) => {
                let current = lc
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(annotation));
                let hosts_now = lc.spec.get("hostnames").cloned().unwrap_or(Value::Null);
                let authn_now = lc
                    .spec
                    .get("authentication")
                    .cloned()
                    .unwrap_or(Value::Null);
                let authn_changed =
                    authentication.is_some_and(|a| authn_now != a.clone().unwrap_or(Value::Null));
                let placement_now = lc
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(placement_label))
                    .map(String::as_str);
                if current.map(String::as_str) != Some(release)
                    || hosts_now != json!(hostnames)
                    || authn_changed
                    || placement_now != placement
                {
                    let mut patch = json!({"metadata": {"annotations": {annotation: release},
                            "labels": {placement_label: placement}},
                        "spec": {"hostnames": hostnames}});
                    if let Some(a) = authentication {
                        // null removes it; a new configuration's lists (jwt) replace the
                        // old ones whole.
                        patch["spec"]["authentication"] = a.clone().unwrap_or(Value::Null);
                    }
                    api.patch(lc_name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await?;
                }
                Ok(Some(lc))
            }
            None => {
                let mut spec = json!({"hostnames": hostnames});
                if let Some(Some(a)) = authentication {
                    spec["authentication"] = a.clone();
                }
                if let Some(ds) = data_store {
                    spec["dataStore"] = json!(ds);
                }
                let mut labels =
                    json!({OWNER_NAMESPACE_LABEL: key.namespace, OWNER_NAME_LABEL: key.name});
                if let Some(p) = placement {
                    labels[placement_label] = json!(p);
                }
                let lc: LogicalCluster = serde_json::from_value(json!({
                    "metadata": {
                        "name": lc_name,
                        "labels": labels,
                        "annotations": {annotation: release},
                    },
                    "spec": spec,
                }))?;
                match api.create(&PostParams::default(), &lc).await {
                    Ok(_) => Ok(None),
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(None),
                    Err(e) => Err(e.into()),
                }
            }
        }
    }

    async fn delete(
        &self,
        key: &ObjectKey,
        tc: &TenantCluster,
        lc_name: &str,
        api: &Api<TenantCluster>,
        finalizers: Vec<String>,
    ) -> Result<Action> {
        // What was memoised of the cluster goes with it (a platform that creates and deletes
        // clusters all day keeps nothing of the gone ones).
        if let Ok(mut d) = self.classes_done.lock() {
            d.retain(|c| !c.starts_with(&format!("{lc_name}/")));
        }
        if let Ok(mut d) = self.addons_done.lock() {
            d.remove(lc_name);
        }
        if let Ok(mut d) = self.oidc_done.lock() {
            d.remove(&format!("{}/{}", key.namespace, key.name));
        }
        let root = self.clients.cluster(ROOT)?;
        if self.cluster_api
            && !workers::delete(&root, &key.namespace, &naming::release(&key.name)).await?
        {
            // The Cluster's deletion event brings this key back.
            return Ok(Action::AwaitChange);
        }
        let secrets: Api<Secret> = Api::namespaced(root, &key.namespace);
        ignore_not_found(
            secrets
                .delete(
                    &naming::kubeconfig_secret(&key.name),
                    &DeleteParams::default(),
                )
                .await,
        )?;
        let lcs = self.lc_api()?;
        if ignore_not_found(lcs.get(lc_name).await)?.is_some() {
            ignore_not_found(lcs.delete(lc_name, &DeleteParams::default()).await)?;
            // The LogicalCluster's deletion event brings this key back.
            return Ok(Action::AwaitChange);
        }
        let rest: Vec<String> = finalizers.into_iter().filter(|f| f != FINALIZER).collect();
        let patch = json!({"metadata": {"finalizers": rest, "resourceVersion": tc.metadata.resource_version}});
        ignore_not_found(
            api.patch(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await,
        )?;
        Ok(Action::AwaitChange)
    }

    /// Writes the status when it changed.
    async fn status(
        &self,
        api: &Api<TenantCluster>,
        tc: &TenantCluster,
        conds: &[Cond<'_>],
        fields: Value,
    ) -> Result<Action> {
        let old = tc.status.clone().unwrap_or_else(|| json!({}));
        let mut status = old.clone();
        if let (Some(s), Some(f)) = (status.as_object_mut(), fields.as_object()) {
            for (k, v) in f {
                s.insert(k.clone(), v.clone());
            }
            s.insert(
                "conditions".into(),
                conditions::merge(old.get("conditions"), conds, &conditions::now()),
            );
            s.insert("observedGeneration".into(), json!(tc.metadata.generation));
        }
        if status != old {
            let name = tc.metadata.name.as_deref().unwrap_or("");
            api.patch_status(
                name,
                &PatchParams::apply(FIELD_MANAGER),
                &Patch::Merge(json!({"status": status})),
            )
            .await?;
        }
        Ok(Action::AwaitChange)
    }
}

fn owner(tc: &TenantCluster) -> OwnerReference {
    OwnerReference {
        api_version: crate::crds::API_VERSION.into(),
        kind: "TenantCluster".into(),
        name: tc.metadata.name.clone().unwrap_or_default(),
        uid: tc.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}
