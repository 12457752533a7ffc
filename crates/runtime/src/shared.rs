//! Shared informers (client-go's `SharedInformerFactory`) and the shutdown signal.
//!
//! Controllers ask [`Informers`] for the informer of a resource; asking twice gives the same
//! one, so namespaces or pods are watched once for every controller that needs them. Informers
//! start together with [`Informers::start`].

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::Arc;

use futures::future::BoxFuture;
use kube::Resource;
use kube::runtime::watcher;
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::client::ClusterClients;
use crate::error::Result;
use crate::informer::Informer;

/// A shutdown signal: cheap to clone, resolves once triggered.
#[derive(Clone)]
pub struct Shutdown(watch::Receiver<bool>);

/// Triggers a [`Shutdown`].
pub struct ShutdownTrigger(watch::Sender<bool>);

impl Shutdown {
    pub fn new() -> (ShutdownTrigger, Shutdown) {
        let (tx, rx) = watch::channel(false);
        (ShutdownTrigger(tx), Shutdown(rx))
    }

    /// Resolves when triggered (or when the trigger is dropped).
    pub async fn wait(mut self) {
        let _ = self.0.wait_for(|s| *s).await;
    }

    pub fn is_triggered(&self) -> bool {
        *self.0.borrow()
    }
}

impl ShutdownTrigger {
    pub fn trigger(&self) {
        self.0.send_replace(true);
    }

    /// Another receiver of this trigger.
    pub fn subscribe(&self) -> Shutdown {
        Shutdown(self.0.subscribe())
    }
}

/// Waits until one informer has listed once.
type SyncWait = Arc<dyn Fn() -> BoxFuture<'static, ()> + Send + Sync>;

type Runner = Box<dyn FnOnce(Shutdown) -> BoxFuture<'static, ()> + Send>;

/// Lazily created, shared cross-cluster informers.
pub struct Informers {
    clients: ClusterClients,
    map: Mutex<HashMap<(TypeId, String), Arc<dyn Any + Send + Sync>>>,
    runners: Mutex<Vec<Runner>>,
    synced: Mutex<Vec<SyncWait>>,
}

impl Informers {
    pub fn new(clients: ClusterClients) -> Arc<Self> {
        Arc::new(Informers {
            clients,
            map: Mutex::new(HashMap::new()),
            runners: Mutex::new(Vec::new()),
            synced: Mutex::new(Vec::new()),
        })
    }

    pub fn clients(&self) -> &ClusterClients {
        &self.clients
    }

    /// The informer of every `K` in every cluster.
    pub fn get<K>(&self) -> Result<Arc<Informer<K>>>
    where
        K: Resource<DynamicType = ()>
            + Clone
            + Default
            + DeserializeOwned
            + Debug
            + Send
            + Sync
            + 'static,
    {
        self.get_with("", watcher::Config::default())
    }

    /// An informer of `K` with a selector; `id` tells informers of one type apart.
    pub fn get_with<K>(&self, id: &str, config: watcher::Config) -> Result<Arc<Informer<K>>>
    where
        K: Resource<DynamicType = ()>
            + Clone
            + Default
            + DeserializeOwned
            + Debug
            + Send
            + Sync
            + 'static,
    {
        let key = (TypeId::of::<K>(), id.to_string());
        let mut map = self.map.lock();
        if let Some(i) = map
            .get(&key)
            .and_then(|a| a.clone().downcast::<Informer<K>>().ok())
        {
            return Ok(i);
        }
        let inf = Informer::<K>::new(&self.clients, config)?;
        map.insert(key, inf.clone());
        let run = inf.clone();
        self.runners
            .lock()
            .push(Box::new(move |s: Shutdown| Box::pin(run.run(s.wait()))));
        let synced = inf.clone();
        self.synced.lock().push(Arc::new(move || {
            let i = synced.clone();
            Box::pin(async move { i.wait_synced().await })
        }));
        Ok(inf)
    }

    /// Starts every informer created so far (each once).
    pub fn start(&self, shutdown: Shutdown) -> Vec<JoinHandle<()>> {
        let runners: Vec<Runner> = std::mem::take(&mut *self.runners.lock());
        runners
            .into_iter()
            .map(|r| tokio::spawn(r(shutdown.clone())))
            .collect()
    }

    /// Waits until every informer created so far has listed once.
    pub async fn wait_synced(&self) {
        let waits: Vec<_> = self.synced.lock().iter().map(|f| f()).collect();
        futures::future::join_all(waits).await;
    }
}
