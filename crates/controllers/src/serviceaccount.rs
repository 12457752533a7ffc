//! The service account controller (upstream `pkg/controller/serviceaccount`): every active
//! namespace of every cluster has a `default` ServiceAccount.
//!
//! Namespaces and `default` service accounts are watched across clusters (the latter with a
//! field selector, so other service accounts cost nothing); a namespace is reconciled when it
//! appears or its `default` account is deleted.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use kube::runtime::watcher;

use runtime::client::ClusterClients;
use runtime::error::Result;
use runtime::informer::{Change, ObjectKey, Store};
use runtime::queue::{Action, Queue};
use runtime::shared::Informers;

/// The service account every namespace gets.
pub const DEFAULT_NAME: &str = "default";

/// The service account controller.
pub struct ServiceAccountController {
    clients: ClusterClients,
    namespaces: Store<Namespace>,
    accounts: Store<ServiceAccount>,
    queue: Arc<Queue<ObjectKey>>,
}

impl ServiceAccountController {
    pub fn new(informers: &Informers) -> Result<Arc<Self>> {
        let queue = Queue::new();
        let namespaces = informers.get::<Namespace>()?;
        let accounts = informers.get_with::<ServiceAccount>(
            "default",
            watcher::Config::default().fields(&format!("metadata.name={DEFAULT_NAME}")),
        )?;
        let q = queue.clone();
        namespaces.on_change(move |c| {
            if !matches!(c, Change::Deleted(..)) {
                q.add(c.key().clone());
            }
        });
        let q = queue.clone();
        accounts.on_change(move |c| {
            if let Change::Deleted(k, _) = c {
                q.add(ObjectKey::new(&k.cluster, "", &k.namespace));
            }
        });
        Ok(Arc::new(ServiceAccountController {
            clients: informers.clients().clone(),
            namespaces: namespaces.store(),
            accounts: accounts.store(),
            queue,
        }))
    }

    pub fn queue(&self) -> Arc<Queue<ObjectKey>> {
        self.queue.clone()
    }

    /// Makes sure namespace `key` has its `default` service account.
    pub async fn reconcile(&self, key: ObjectKey) -> Result<Action> {
        let Some(ns) = self.namespaces.get(&key) else {
            return Ok(Action::AwaitChange);
        };
        if ns.metadata.deletion_timestamp.is_some() {
            return Ok(Action::AwaitChange);
        }
        let sa_key = ObjectKey::new(&key.cluster, &key.name, DEFAULT_NAME);
        if self.accounts.get(&sa_key).is_some() {
            return Ok(Action::AwaitChange);
        }
        let api: Api<ServiceAccount> =
            Api::namespaced(self.clients.cluster(&key.cluster)?, &key.name);
        let sa = ServiceAccount {
            metadata: ObjectMeta {
                name: Some(DEFAULT_NAME.into()),
                ..Default::default()
            },
            ..Default::default()
        };
        match api.create(&PostParams::default(), &sa).await {
            Ok(_) => Ok(Action::AwaitChange),
            // Already there, or the namespace is going away: nothing to do.
            Err(kube::Error::Api(s)) if s.code == 409 || s.code == 403 || s.code == 404 => {
                Ok(Action::AwaitChange)
            }
            Err(e) => Err(e.into()),
        }
    }
}
