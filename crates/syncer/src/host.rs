//! Where a shared cluster's pods run: by default the root cluster (in the TenantCluster's
//! namespace), or any other Kubernetes cluster named by a kubeconfig in a Secret
//! (`spec.workers.hostCluster`) — the syncer is only an API client of its host.
//!
//! Each host has its own informers (pods, Services, ConfigMaps and Secrets the syncer made,
//! nodes) and its own Events watch. The root host watches every namespace, since every shared
//! cluster of the root shares it; another host watches only its one namespace (its
//! credentials may allow no more), and its nodes. A host made from a Secret is made again
//! when the Secret changes (a renewed certificate) and stops once no shared cluster uses it.

use std::sync::{Arc, Weak};

use k8s_openapi::api::core::v1::{ConfigMap, Node, PersistentVolumeClaim, Pod, Secret, Service};
use k8s_openapi::api::networking::v1::IngressClass;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Api;
use kube::ResourceExt;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use kube::runtime::{WatchStreamExt, watcher};
use runtime::client::ROOT;
use runtime::error::{Error, Result, ignore_not_found};
use runtime::informer::{Informer, Store};
use runtime::queue::Action;
use runtime::shared::{Shutdown, ShutdownTrigger};
use serde_json::{Value, json};

use crate::{HOST_FINALIZER, Item, Shared, Syncer, informer, managed_selector, names};

/// The kubeconfig key read when the reference names none (Cluster API's kubeconfig Secrets).
pub const DEFAULT_KUBECONFIG_KEY: &str = "value";

/// A shared cluster's host.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum HostRef {
    /// The root cluster this syncer runs against.
    Root,
    /// The cluster of the kubeconfig in Secret `secret` (key `key`) of namespace
    /// `secret_namespace` of the root cluster, used in its namespace `namespace`.
    Kubeconfig {
        secret_namespace: String,
        secret: String,
        key: String,
        namespace: String,
    },
}

impl HostRef {
    /// The host a TenantCluster's spec names, and the namespace its pods run in there
    /// (`tc_namespace`: the TenantCluster's namespace of the root cluster). On the root
    /// cluster that is always the TenantCluster's own namespace: a tenant never runs pods in
    /// another namespace of the root.
    pub(crate) fn of_spec(spec: &Value, tc_namespace: &str) -> (HostRef, String) {
        let host = spec.pointer("/workers/hostCluster");
        let Some(secret) = host
            .and_then(|h| h.pointer("/kubeconfigSecretRef/name"))
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
        else {
            return (HostRef::Root, tc_namespace.to_string());
        };
        let namespace = host
            .and_then(|h| h.get("namespace"))
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .unwrap_or(tc_namespace)
            .to_string();
        let key = host
            .and_then(|h| h.pointer("/kubeconfigSecretRef/key"))
            .and_then(Value::as_str)
            .filter(|k| !k.is_empty())
            .unwrap_or(DEFAULT_KUBECONFIG_KEY);
        (
            HostRef::Kubeconfig {
                secret_namespace: tc_namespace.to_string(),
                secret: secret.to_string(),
                key: key.to_string(),
                namespace: namespace.clone(),
            },
            namespace,
        )
    }

    pub(crate) fn is_root(&self) -> bool {
        matches!(self, HostRef::Root)
    }
}

impl std::fmt::Display for HostRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HostRef::Root => f.write_str("the root cluster"),
            HostRef::Kubeconfig {
                secret_namespace,
                secret,
                key,
                ..
            } => write!(
                f,
                "the cluster of Secret {secret_namespace}/{secret} key {key}"
            ),
        }
    }
}

/// How the kubelet proxy reaches another host's pods: through its API server's `pods/log`,
/// `exec`, `attach` and `portforward` (its kubelets are not ours to dial), with the
/// kubeconfig's credentials.
pub(crate) struct HostApi {
    /// The API server's URL (with any path prefix).
    pub(crate) base: String,
    pub(crate) tls: Arc<rustls::ClientConfig>,
    /// The kubeconfig's token (or basic credentials), when it authenticates with one.
    pub(crate) authorization: Option<http::HeaderValue>,
}

/// A connected host: its client and what the syncer watches there.
pub(crate) struct Host {
    pub(crate) client: kube::Client,
    /// Another host's API server for streaming (None: the root, whose kubelets the proxy
    /// dials itself).
    pub(crate) api: Option<HostApi>,
    pub(crate) pods: Arc<Informer<Pod>>,
    pub(crate) services: Store<Service>,
    pub(crate) nodes: Store<Node>,
    pub(crate) config_maps: Store<ConfigMap>,
    pub(crate) secrets: Store<Secret>,
    pub(crate) claims: Store<PersistentVolumeClaim>,
    pub(crate) storage_classes: Store<StorageClass>,
    pub(crate) ingress_classes: Store<IngressClass>,
    /// The resourceVersion of the Secret it was made from (None: the root).
    pub(crate) version: Option<String>,
    /// The namespace its Events are watched in (None: every namespace).
    namespace: Option<String>,
    stop: ShutdownTrigger,
}

impl Drop for Host {
    fn drop(&mut self) {
        self.stop.trigger();
    }
}

impl Host {
    /// Connects to a host: its informers and Events watch run until it is dropped or `term`.
    pub(crate) fn start(
        syncer: Weak<Syncer>,
        host_ref: HostRef,
        client: kube::Client,
        api: Option<HostApi>,
        namespace: Option<String>,
        version: Option<String>,
        term: Shutdown,
    ) -> Arc<Host> {
        fn api_in<K>(client: &kube::Client, namespace: Option<&str>) -> Api<K>
        where
            K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
        {
            match namespace {
                Some(ns) => Api::namespaced(client.clone(), ns),
                None => Api::all(client.clone()),
            }
        }
        let ns = namespace.as_deref();
        let pods = Informer::from_stream(
            "host-pods",
            runtime::lenient::watcher(api_in::<Pod>(&client, ns), managed_selector(), None)
                .default_backoff()
                .modify(slim_host_pod),
        );
        let services =
            informer::<Service>("host-services", api_in(&client, ns), managed_selector());
        let config_maps =
            informer::<ConfigMap>("host-configmaps", api_in(&client, ns), managed_selector());
        let secrets = informer::<Secret>("host-secrets", api_in(&client, ns), managed_selector());
        let claims = informer::<PersistentVolumeClaim>(
            "host-claims",
            api_in(&client, ns),
            managed_selector(),
        );
        let storage_classes = informer::<StorageClass>(
            "host-storageclasses",
            Api::all(client.clone()),
            watcher::Config::default(),
        );
        let ingress_classes = informer::<IngressClass>(
            "host-ingressclasses",
            Api::all(client.clone()),
            watcher::Config::default(),
        );
        let nodes = informer::<Node>(
            "host-nodes",
            Api::all(client.clone()),
            watcher::Config::default(),
        );
        let (stop, stopped) = Shutdown::new();
        let h = Arc::new(Host {
            client,
            api,
            pods: pods.clone(),
            services: services.store(),
            nodes: nodes.store(),
            config_maps: config_maps.store(),
            secrets: secrets.store(),
            claims: claims.store(),
            storage_classes: storage_classes.store(),
            ingress_classes: ingress_classes.store(),
            version,
            namespace,
            stop,
        });
        // Handlers only enqueue, through a weak reference (the syncer owns its hosts).
        let (s, r) = (syncer.clone(), host_ref.clone());
        pods.on_change(move |c| {
            if let Some(s) = s.upgrade()
                && let Some(key) = s.tenant_key(&r, &c.object().metadata)
            {
                s.queue.add(Item::Pod(key));
            }
        });
        let (s, r) = (syncer.clone(), host_ref.clone());
        services.on_change(move |c| {
            if let Some(s) = s.upgrade()
                && let Some(key) = s.tenant_key(&r, &c.object().metadata)
            {
                s.queue.add(Item::Service(key));
            }
        });
        let (s, r) = (syncer.clone(), host_ref.clone());
        claims.on_change(move |c| {
            if let Some(s) = s.upgrade()
                && let Some(key) = s.tenant_key(&r, &c.object().metadata)
            {
                s.queue.add(Item::Claim(key));
            }
        });
        let (s, r) = (syncer.clone(), host_ref.clone());
        nodes.on_change(move |_| {
            if let Some(s) = s.upgrade() {
                s.on_host(&r, Item::Nodes);
            }
        });
        let (s, r) = (syncer.clone(), host_ref.clone());
        storage_classes.on_change(move |_| {
            if let Some(s) = s.upgrade() {
                s.on_host(&r, Item::Classes);
            }
        });
        let (s, r) = (syncer.clone(), host_ref.clone());
        ingress_classes.on_change(move |_| {
            if let Some(s) = s.upgrade() {
                s.on_host(&r, Item::Classes);
            }
        });
        let until = {
            let (stopped, term) = (stopped.clone(), term.clone());
            move || {
                let (a, b) = (stopped.clone(), term.clone());
                async move {
                    tokio::select! {
                        () = a.wait() => {}
                        () = b.wait() => {}
                    }
                }
            }
        };
        tokio::spawn(pods.run(until()));
        tokio::spawn(services.run(until()));
        tokio::spawn(config_maps.run(until()));
        tokio::spawn(secrets.run(until()));
        tokio::spawn(claims.run(until()));
        tokio::spawn(storage_classes.run(until()));
        tokio::spawn(ingress_classes.run(until()));
        tokio::spawn(nodes.run(until()));
        let (s, weak_host) = (syncer, Arc::downgrade(&h));
        let events = until();
        tokio::spawn(async move {
            tokio::select! {
                () = events => {}
                () = crate::events::host_events(s, host_ref, weak_host) => {}
            }
        });
        h
    }

    /// Every namespace (the root) or the host's one namespace, for a namespaced kind.
    pub(crate) fn watched<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        match &self.namespace {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        }
    }
}

/// A cluster a kubeconfig Secret names: its client, its API server for streaming, and the
/// Secret's resourceVersion.
pub(crate) struct Connected {
    pub(crate) client: kube::Client,
    pub(crate) api: HostApi,
    pub(crate) version: Option<String>,
}

/// A host pod as the syncer's store keeps it: what it reads (names, labels, the ownership
/// annotations, the node, the status), not the spec it wrote nor the tokens handed in.
pub(crate) fn slim_host_pod(p: &mut Pod) {
    p.metadata.managed_fields = None;
    if let Some(a) = p.metadata.annotations.as_mut() {
        a.retain(|k, _| {
            !k.starts_with("vcluster.loft.sh/token-")
                && k != "kubectl.kubernetes.io/last-applied-configuration"
        });
    }
    if let Some(spec) = p.spec.take() {
        p.spec = Some(k8s_openapi::api::core::v1::PodSpec {
            node_name: spec.node_name,
            ..Default::default()
        });
    }
}

/// Connects to the cluster of a kubeconfig Secret (the root has no Secret to read).
pub(crate) async fn connect(root: &kube::Client, host_ref: &HostRef) -> Result<Connected> {
    let HostRef::Kubeconfig {
        secret_namespace,
        secret,
        key,
        ..
    } = host_ref
    else {
        return Err(Error::Config(
            "the root cluster is not connected by a kubeconfig".into(),
        ));
    };
    let api: Api<Secret> = Api::namespaced(root.clone(), secret_namespace);
    let Some(s) = api.get_opt(secret).await? else {
        return Err(Error::Retry(format!(
            "the host's kubeconfig Secret {secret_namespace}/{secret} does not exist"
        )));
    };
    let Some(bytes) = s.data.as_ref().and_then(|d| d.get(key)) else {
        return Err(Error::Retry(format!(
            "the host's kubeconfig Secret {secret_namespace}/{secret} has no key {key:?}"
        )));
    };
    let text = String::from_utf8_lossy(&bytes.0);
    let bad = |e: String| {
        Error::Retry(format!(
            "the kubeconfig in Secret {secret_namespace}/{secret} key {key}: {e}"
        ))
    };
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&text).map_err(|e| bad(e.to_string()))?;
    refuse_local_references(&kubeconfig).map_err(bad)?;
    let config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .map_err(|e| bad(e.to_string()))?;
    let api = host_api(&config).map_err(bad)?;
    let client = kube::Client::try_from(config).map_err(|e| bad(e.to_string()))?;
    Ok(Connected {
        client,
        api,
        version: s.metadata.resource_version.clone(),
    })
}

/// The API server of a kubeconfig as the kubelet proxy dials it: its URL, the TLS of its
/// CA and client certificate, and its token.
fn host_api(config: &kube::Config) -> std::result::Result<HostApi, String> {
    use base64::Engine;
    use secrecy::ExposeSecret;
    let b64 = |d: &str| {
        base64::engine::general_purpose::STANDARD
            .decode(d.trim())
            .map_err(|e| e.to_string())
            .and_then(|b| String::from_utf8(b).map_err(|e| e.to_string()))
    };
    let roots = if config.accept_invalid_certs {
        None
    } else {
        let mut roots = rustls::RootCertStore::empty();
        for der in config.root_cert.iter().flatten() {
            roots
                .add(rustls::pki_types::CertificateDer::from(der.clone()))
                .map_err(|e| e.to_string())?;
        }
        Some(roots)
    };
    let auth = &config.auth_info;
    let cert = auth
        .client_certificate_data
        .as_deref()
        .map(b64)
        .transpose()?;
    let key = auth
        .client_key_data
        .as_ref()
        .map(|k| b64(k.expose_secret()))
        .transpose()?;
    let identity = match (&cert, &key) {
        (Some(c), Some(k)) => Some((c.as_str(), k.as_str())),
        (None, None) => None,
        _ => return Err("a client certificate needs its key".into()),
    };
    let tls = streaming::proxy::tls_config(identity, roots)?;
    let authorization = if let Some(token) = &auth.token {
        Some(format!("Bearer {}", token.expose_secret().trim()))
    } else if let (Some(user), Some(password)) = (&auth.username, &auth.password) {
        let pair = format!("{user}:{}", password.expose_secret());
        Some(format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(pair)
        ))
    } else {
        None
    };
    let authorization = authorization
        .map(|a| http::HeaderValue::from_str(&a).map_err(|e| e.to_string()))
        .transpose()?
        .map(|mut v| {
            v.set_sensitive(true);
            v
        });
    Ok(HostApi {
        base: config
            .cluster_url
            .to_string()
            .trim_end_matches('/')
            .to_string(),
        tls: Arc::new(tls),
        authorization,
    })
}

impl Syncer {
    /// Holds a TenantCluster on another host with [`HOST_FINALIZER`], so that its objects
    /// there are deleted before it goes.
    pub(crate) async fn hold(&self, shared: &Shared) -> Result<()> {
        let api = self.tenant_clusters(&shared.tc_namespace)?;
        let Some(tc) = api.get_opt(&shared.name).await? else {
            return Ok(());
        };
        let mut finalizers = tc.metadata.finalizers.clone().unwrap_or_default();
        if finalizers.iter().any(|f| f == HOST_FINALIZER) {
            return Ok(());
        }
        finalizers.push(HOST_FINALIZER.to_string());
        let patch = json!({"metadata": {"finalizers": finalizers,
            "resourceVersion": tc.metadata.resource_version}});
        api.patch(&shared.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        Ok(())
    }

    /// A deleted TenantCluster (or one no longer shared) that [`Syncer::hold`] held: its
    /// objects on its host are deleted, then the finalizer is removed. A host that cannot be
    /// reached because its kubeconfig Secret is gone is left as it is, with a Warning Event.
    pub(crate) async fn release(&self, namespace: &str, name: &str) -> Result<Action> {
        let api = self.tenant_clusters(namespace)?;
        let Some(tc) = api.get_opt(name).await? else {
            return Ok(Action::AwaitChange);
        };
        let held = tc
            .metadata
            .finalizers
            .as_ref()
            .is_some_and(|f| f.iter().any(|f| f == HOST_FINALIZER));
        if !held || (tc.metadata.deletion_timestamp.is_none() && crate::is_shared_mode(&tc)) {
            return Ok(Action::AwaitChange);
        }
        let (host_ref, host_ns) =
            HostRef::of_spec(tc.data.get("spec").unwrap_or(&Value::Null), namespace);
        let root = self.clients.cluster(ROOT)?;
        let connected = if host_ref.is_root() {
            Ok(root.clone())
        } else {
            connect(&root, &host_ref).await.map(|c| c.client)
        };
        match connected {
            Ok(client) => delete_host_objects(&client, &host_ns, name).await?,
            Err(Error::Retry(why)) => {
                self.recorder.record(
                    ROOT,
                    tc_reference(namespace, name, tc.metadata.uid.clone()),
                    runtime::events::WARNING,
                    "HostObjectsLeft",
                    format!("the cluster's objects on its host were not deleted: {why}"),
                );
            }
            Err(e) => return Err(e),
        }
        let finalizers: Vec<String> = tc
            .metadata
            .finalizers
            .clone()
            .unwrap_or_default()
            .into_iter()
            .filter(|f| f != HOST_FINALIZER)
            .collect();
        let patch = json!({"metadata": {"finalizers": finalizers,
            "resourceVersion": tc.metadata.resource_version}});
        ignore_not_found(
            api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await,
        )?;
        Ok(Action::AwaitChange)
    }

    fn tenant_clusters(&self, namespace: &str) -> Result<Api<DynamicObject>> {
        Ok(Api::namespaced_with(
            self.clients.cluster(ROOT)?,
            namespace,
            &crate::tenant_cluster_resource(),
        ))
    }
}

/// A TenantCluster as an Event's object.
pub(crate) fn tc_reference(
    namespace: &str,
    name: &str,
    uid: Option<String>,
) -> k8s_openapi::api::core::v1::ObjectReference {
    k8s_openapi::api::core::v1::ObjectReference {
        api_version: Some(format!(
            "{}/{}",
            crate::PLATFORM_GROUP,
            crate::PLATFORM_VERSION
        )),
        kind: Some("TenantCluster".into()),
        namespace: Some(namespace.to_string()),
        name: Some(name.to_string()),
        uid,
        ..Default::default()
    }
}

/// Deletes what the syncer made for cluster `name` in namespace `namespace` of a host.
async fn delete_host_objects(client: &kube::Client, namespace: &str, name: &str) -> Result<()> {
    let lp = ListParams::default().labels(&format!("{}={name}", names::MANAGED_BY));
    let dp = DeleteParams::default();
    Api::<Pod>::namespaced(client.clone(), namespace)
        .delete_collection(&dp, &lp)
        .await?;
    // Services one by one: not every API server serves deletecollection of Services.
    let services: Api<Service> = Api::namespaced(client.clone(), namespace);
    for s in services.list(&lp).await?.items {
        ignore_not_found(services.delete(&s.name_any(), &dp).await)?;
    }
    Api::<ConfigMap>::namespaced(client.clone(), namespace)
        .delete_collection(&dp, &lp)
        .await?;
    Api::<Secret>::namespaced(client.clone(), namespace)
        .delete_collection(&dp, &lp)
        .await?;
    for (group, kind, plural) in [
        ("networking.k8s.io", "NetworkPolicy", "networkpolicies"),
        ("discovery.k8s.io", "EndpointSlice", "endpointslices"),
    ] {
        let api: Api<DynamicObject> = Api::namespaced_with(
            client.clone(),
            namespace,
            &ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, "v1", kind), plural),
        );
        api.delete_collection(&dp, &lp).await?;
    }
    Ok(())
}

/// A tenant's kubeconfig may carry only inline credentials: an exec or auth-provider plugin
/// would run a command on the platform, and a file path (certificate, key, token file) would
/// read the platform's own files; a proxy would send the platform's requests elsewhere.
fn refuse_local_references(kc: &kube::config::Kubeconfig) -> std::result::Result<(), String> {
    for c in &kc.clusters {
        let Some(cluster) = &c.cluster else { continue };
        if cluster.certificate_authority.is_some() {
            return Err(format!(
                "cluster {:?}: certificate-authority names a file; only certificate-authority-data is taken",
                c.name
            ));
        }
        if cluster.proxy_url.is_some() {
            return Err(format!("cluster {:?}: proxy-url is not taken", c.name));
        }
    }
    for a in &kc.auth_infos {
        let Some(auth) = &a.auth_info else { continue };
        let refused = [
            ("exec", auth.exec.is_some()),
            ("auth-provider", auth.auth_provider.is_some()),
            ("tokenFile", auth.token_file.is_some()),
            ("client-certificate", auth.client_certificate.is_some()),
            ("client-key", auth.client_key.is_some()),
        ];
        if let Some((field, _)) = refused.iter().find(|(_, set)| *set) {
            return Err(format!(
                "user {:?}: {field} is not taken (only inline credentials: token, client-certificate-data, client-key-data)",
                a.name
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_spec_without_a_host_cluster_runs_its_pods_in_the_root_cluster_namespace() {
        let (r, ns) = HostRef::of_spec(&json!({"workers": {"mode": "shared"}}), "tenant-foo");
        assert_eq!((r, ns.as_str()), (HostRef::Root, "tenant-foo"));
        // Another namespace of the root is never taken.
        let (r, ns) = HostRef::of_spec(
            &json!({"workers": {"mode": "shared", "hostCluster": {"namespace": "tenant-bar"}}}),
            "tenant-foo",
        );
        assert_eq!((r, ns.as_str()), (HostRef::Root, "tenant-foo"));
    }

    #[test]
    fn a_tenants_kubeconfig_with_a_command_or_a_local_file_is_refused() {
        let kc = |user: &str, cluster: &str| {
            kube::config::Kubeconfig::from_yaml(&format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\n{cluster}\nusers:\n- name: u\n  user:\n{user}\n"
            ))
            .expect("kubeconfig")
        };
        assert!(refuse_local_references(&kc("    token: abc", "")).is_ok());
        assert!(
            refuse_local_references(&kc(
                "    client-certificate-data: YQ==\n    client-key-data: YQ==",
                "    certificate-authority-data: YQ=="
            ))
            .is_ok()
        );
        for (user, cluster, word) in [
            (
                "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/sh",
                "",
                "exec",
            ),
            (
                "    client-certificate: /etc/matryoshka/pki/ca.crt",
                "",
                "client-certificate",
            ),
            (
                "    client-key: /etc/matryoshka/pki/ca.key",
                "",
                "client-key",
            ),
            ("    tokenFile: /var/run/secrets/token", "", "tokenFile"),
            (
                "    token: abc",
                "    certificate-authority: /etc/ssl/ca.pem",
                "certificate-authority",
            ),
            (
                "    token: abc",
                "    proxy-url: http://127.0.0.1:3128",
                "proxy-url",
            ),
        ] {
            let e = refuse_local_references(&kc(user, cluster)).expect_err(word);
            assert!(e.contains(word), "{e}");
        }
    }

    #[test]
    fn a_kubeconfig_secret_names_another_host_with_its_key_or_the_default_one() {
        let (r, ns) = HostRef::of_spec(
            &json!({"workers": {"hostCluster": {"kubeconfigSecretRef": {"name": "far"}}}}),
            "tenant-foo",
        );
        assert_eq!(ns, "tenant-foo");
        assert_eq!(
            r,
            HostRef::Kubeconfig {
                secret_namespace: "tenant-foo".into(),
                secret: "far".into(),
                key: "value".into(),
                namespace: "tenant-foo".into(),
            }
        );
        let (r, ns) = HostRef::of_spec(
            &json!({"workers": {"hostCluster": {"kubeconfigSecretRef": {"name": "far", "key": "admin.conf"}, "namespace": "guests"}}}),
            "tenant-foo",
        );
        assert_eq!(ns, "guests");
        assert!(matches!(r, HostRef::Kubeconfig { ref key, .. } if key == "admin.conf"));
        assert!(!r.is_root());
    }
}
