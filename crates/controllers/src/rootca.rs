//! The root CA publisher (upstream `pkg/controller/certificates/rootcacertpublisher`): every
//! namespace has the ConfigMap `kube-root-ca.crt` whose `ca.crt` is its cluster's CA bundle, so
//! pods can verify the API server.
//!
//! The CA comes from a function of the cluster name, so clusters may have their own CAs.
//! Only ConfigMaps named `kube-root-ca.crt` are watched (a field selector).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use kube::runtime::watcher;

use runtime::client::ClusterClients;
use runtime::error::Result;
use runtime::informer::{Change, ObjectKey, Store};
use runtime::queue::{Action, Queue};
use runtime::shared::Informers;

/// The ConfigMap's name.
pub const CONFIGMAP: &str = "kube-root-ca.crt";
/// The key holding the bundle.
pub const KEY: &str = "ca.crt";
/// The annotation upstream puts on the ConfigMap.
pub const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";

/// The CA bundle (PEM) of a cluster.
pub type CaSource = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// The root CA publisher.
pub struct RootCaPublisher {
    clients: ClusterClients,
    namespaces: Store<Namespace>,
    configmaps: Store<ConfigMap>,
    ca: CaSource,
    queue: Arc<Queue<ObjectKey>>,
}

impl RootCaPublisher {
    pub fn new(informers: &Informers, ca: CaSource) -> Result<Arc<Self>> {
        let queue = Queue::new();
        let namespaces = informers.get::<Namespace>()?;
        let configmaps = informers.get_with::<ConfigMap>(
            CONFIGMAP,
            watcher::Config::default().fields(&format!("metadata.name={CONFIGMAP}")),
        )?;
        let q = queue.clone();
        namespaces.on_change(move |c| {
            if !matches!(c, Change::Deleted(..)) {
                q.add(c.key().clone());
            }
        });
        let q = queue.clone();
        configmaps.on_change(move |c| {
            let k = c.key();
            q.add(ObjectKey::new(&k.cluster, "", &k.namespace));
        });
        Ok(Arc::new(RootCaPublisher {
            clients: informers.clients().clone(),
            namespaces: namespaces.store(),
            configmaps: configmaps.store(),
            ca,
            queue,
        }))
    }

    pub fn queue(&self) -> Arc<Queue<ObjectKey>> {
        self.queue.clone()
    }

    /// Makes sure namespace `key` has an up-to-date `kube-root-ca.crt`.
    pub async fn reconcile(&self, key: ObjectKey) -> Result<Action> {
        let Some(ns) = self.namespaces.get(&key) else {
            return Ok(Action::AwaitChange);
        };
        if ns.metadata.deletion_timestamp.is_some() {
            return Ok(Action::AwaitChange);
        }
        let Some(pem) = (self.ca)(&key.cluster) else {
            return Ok(Action::AwaitChange);
        };
        let data = BTreeMap::from([(KEY.to_string(), pem)]);
        let annotations = BTreeMap::from([(
            "kubernetes.io/description".to_string(),
            DESCRIPTION.to_string(),
        )]);
        let api: Api<ConfigMap> = Api::namespaced(self.clients.cluster(&key.cluster)?, &key.name);
        let cm_key = ObjectKey::new(&key.cluster, &key.name, CONFIGMAP);
        let result = match self.configmaps.get(&cm_key) {
            None => {
                let cm = ConfigMap {
                    metadata: ObjectMeta {
                        name: Some(CONFIGMAP.into()),
                        annotations: Some(annotations),
                        ..Default::default()
                    },
                    data: Some(data),
                    ..Default::default()
                };
                api.create(&PostParams::default(), &cm).await.map(|_| ())
            }
            Some(cm) => {
                let has_annotation = cm
                    .metadata
                    .annotations
                    .as_ref()
                    .is_some_and(|a| a.get("kubernetes.io/description").is_some());
                if cm.data.as_ref() == Some(&data) && has_annotation {
                    return Ok(Action::AwaitChange);
                }
                let mut next = (*cm).clone();
                next.data = Some(data);
                next.binary_data = None;
                next.metadata
                    .annotations
                    .get_or_insert_with(BTreeMap::new)
                    .extend(annotations);
                api.replace(CONFIGMAP, &PostParams::default(), &next)
                    .await
                    .map(|_| ())
            }
        };
        match result {
            Ok(()) => Ok(Action::AwaitChange),
            Err(kube::Error::Api(s)) if s.code == 403 || s.code == 404 => Ok(Action::AwaitChange),
            Err(e) => Err(e.into()),
        }
    }
}
