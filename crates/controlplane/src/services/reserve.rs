//! Reservations as storage keys: one key per allocated cluster IP or node port in a logical
//! cluster, created with create-if-absent, so two services can never hold the same value even
//! when they are created at the same moment, and released by deleting the key.
//!
//! A cluster IP is recorded where upstream (1.31+, `MultiCIDRServiceAllocator`) keeps it: an
//! `networking.k8s.io/v1` IPAddress named by the address, whose `spec.parentRef` names the
//! service. Node ports have no upstream object (upstream keeps a bitmap); each is a small record
//! under `servicenodeports`. Both name the owning service's uid, so a release never removes a
//! reservation another incarnation of the service holds. Both live under the cluster's key
//! prefix, so deleting a logical cluster releases everything it held.

use std::collections::HashSet;

use apimachinery::meta;
use apimachinery::status::ApiError;
use registry::cache::Filter;
use registry::key;
use registry::store::Store;
use serde_json::{Value, json};

/// The annotation naming the uid of the service a reservation belongs to.
pub const OWNER_UID: &str = "matryoshka.dev/service-uid";

const IP_GROUP: &str = "networking.k8s.io";
const IP_PLURAL: &str = "ipaddresses";
const PORT_PLURAL: &str = "servicenodeports";

/// What is reserved: a cluster IP or a node port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Item {
    Ip(std::net::Ipv4Addr),
    NodePort(u16),
}

impl Item {
    fn group_plural(&self) -> (&'static str, &'static str) {
        match self {
            Item::Ip(_) => (IP_GROUP, IP_PLURAL),
            Item::NodePort(_) => ("", PORT_PLURAL),
        }
    }

    fn name(&self) -> String {
        match self {
            Item::Ip(ip) => ip.to_string(),
            Item::NodePort(p) => p.to_string(),
        }
    }

    /// The storage key of this item in `cluster`.
    pub fn key(&self, cluster: &str) -> String {
        let (g, p) = self.group_plural();
        key::object(cluster, g, p, "", &self.name())
    }

    /// The record stored at the key, naming the service that holds the item.
    fn record(&self, svc: &Value) -> Value {
        let parent = json!({
            "group": "",
            "resource": "services",
            "namespace": meta::namespace(svc),
            "name": meta::name(svc),
        });
        let mut metadata = json!({
            "name": self.name(),
            "uid": uuid::Uuid::new_v4().to_string(),
            "creationTimestamp": registry::store::now(),
            "annotations": {OWNER_UID: meta::uid(svc)},
        });
        match self {
            Item::Ip(_) => {
                metadata["labels"] = json!({
                    "ipaddress.kubernetes.io/ip-family": "IPv4",
                    "ipaddress.kubernetes.io/managed-by": "ipallocator.k8s.io",
                });
                json!({
                    "apiVersion": "networking.k8s.io/v1",
                    "kind": "IPAddress",
                    "metadata": metadata,
                    "spec": {"parentRef": parent},
                })
            }
            Item::NodePort(_) => json!({
                "apiVersion": "v1",
                "kind": "ServiceNodePort",
                "metadata": metadata,
                "spec": {"parentRef": parent},
            }),
        }
    }
}

fn unavailable(e: storage::Error) -> ApiError {
    ApiError::internal(format!("reserving a service allocation: {e}"))
}

/// Reserves `item` for `svc` (on a dry run: checks it is free). `Ok(false)`: someone holds it.
pub async fn take(
    store: &Store,
    cluster: &str,
    item: Item,
    svc: &Value,
    dry_run: bool,
) -> Result<bool, ApiError> {
    let k = item.key(cluster);
    let shard = store.shard_for_write(cluster)?;
    if dry_run {
        return Ok(shard
            .storage
            .get(k.as_bytes())
            .await
            .map_err(unavailable)?
            .is_none());
    }
    let body = serde_json::to_vec(&item.record(svc)).map_err(ApiError::internal)?;
    match shard.storage.create(k.as_bytes(), body.into()).await {
        Ok(_) => Ok(true),
        Err(storage::Error::AlreadyExists) => Ok(false),
        Err(e) => Err(unavailable(e)),
    }
}

/// Gives back a key this write created.
pub async fn undo(store: &Store, cluster: &str, key: &str) {
    let shard = match store.shard(cluster) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(key, error = %e, "failed to give back a service allocation");
            return;
        }
    };
    if let Err(e) = shard.storage.delete(key.as_bytes(), None).await
        && !matches!(e, storage::Error::NotFound)
    {
        tracing::warn!(key, error = %e, "failed to give back a service allocation");
    }
}

/// Releases `item` if the service with `uid` still holds it.
pub async fn release(store: &Store, cluster: &str, item: Item, uid: &str) {
    let k = item.key(cluster);
    let Ok(shard) = store.shard(cluster) else {
        tracing::warn!(key = k, "a service allocation's datastore is not connected");
        return;
    };
    let kv = match shard.storage.get(k.as_bytes()).await {
        Ok(Some(kv)) => kv,
        Ok(None) => return,
        Err(e) => {
            tracing::warn!(key = k, error = %e, "failed to read a service allocation");
            return;
        }
    };
    let owner = serde_json::from_slice::<Value>(&kv.value)
        .ok()
        .and_then(|v| {
            v.pointer(&format!(
                "/metadata/annotations/{}",
                OWNER_UID.replace('/', "~1")
            ))
            .and_then(Value::as_str)
            .map(String::from)
        });
    if owner.as_deref() != Some(uid) {
        return;
    }
    match shard
        .storage
        .delete(k.as_bytes(), Some(kv.mod_revision))
        .await
    {
        Ok(_) | Err(storage::Error::NotFound | storage::Error::Conflict { .. }) => {}
        Err(e) => tracing::warn!(key = k, error = %e, "failed to release a service allocation"),
    }
}

/// The names of the items of one kind the watch cache knows to be held in `cluster` (a hint
/// for choosing candidates; the create-if-absent in [`take`] is what decides).
pub fn known(store: &Store, cluster: &str, node_ports: bool) -> HashSet<String> {
    let (g, p) = if node_ports {
        ("", PORT_PLURAL)
    } else {
        (IP_GROUP, IP_PLURAL)
    };
    let filter = Filter {
        cluster: Some(cluster.to_string()),
        ..Default::default()
    };
    let Ok(cache) = store.cache(cluster) else {
        return HashSet::new();
    };
    let (items, _) = cache.list(g, p, &filter);
    items.iter().map(|o| o.name().to_string()).collect()
}
