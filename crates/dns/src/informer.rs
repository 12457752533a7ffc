//! The watches that fill a [`View`]: Namespaces, Services, EndpointSlices and — for verified
//! pod records only — Pods of one cluster, through kube-rs watchers on that cluster's client.
//!
//! Each object is reduced to its DNS record as it arrives ([`crate::convert`]); the objects
//! themselves are not kept. A watch (re)start's initial list is gathered and then replaces
//! that kind's records in one update, so objects deleted while a watch was down disappear and
//! a query never sees a half-listed cluster. The view is marked synced once every watch has
//! listed once. Watch errors are retried with kube-rs's default backoff.
//!
//! **Architecture Invariant:** the informer is given one cluster's client. An object carrying
//! the cross-cluster annotation (`matryoshka.dev/cluster`, set only on `/clusters/*`
//! responses) means it was given a cross-cluster client instead; it stops with
//! [`Error::CrossCluster`] rather than mix clusters' names.

use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{Namespace, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;

use crate::convert::{pod_ips, service_record, slice_record};
use crate::error::{Error, Result};
use crate::view::{ServiceRecord, SliceRecord, Update, View};
use crate::zone::PodMode;

/// The annotation Matryoshka puts on objects of cross-cluster lists and watches.
pub const CROSS_CLUSTER_ANNOTATION: &str = "matryoshka.dev/cluster";

/// One kind's records, as an initial list gathers them.
enum Listed {
    Namespace(String),
    Service(String, String, Option<ServiceRecord>),
    Slice(String, String, Option<(String, SliceRecord)>),
    Pod(String, String, Box<[IpAddr]>),
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Namespaces,
    Services,
    Slices,
    Pods,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Namespaces => "namespaces",
            Kind::Services => "services",
            Kind::Slices => "endpointslices",
            Kind::Pods => "pods",
        }
    }
}

fn listed_namespace(n: Namespace) -> Listed {
    Listed::Namespace(n.name_any())
}

fn listed_service(s: Service) -> Listed {
    let r = service_record(&s);
    Listed::Service(s.namespace().unwrap_or_default(), s.name_any(), r)
}

fn listed_slice(s: EndpointSlice) -> Listed {
    let r = slice_record(&s).map(|(svc, r)| (svc.to_string(), r));
    Listed::Slice(s.namespace().unwrap_or_default(), s.name_any(), r)
}

fn listed_pod(p: Pod) -> Listed {
    let ips = pod_ips(&p);
    Listed::Pod(p.namespace().unwrap_or_default(), p.name_any(), ips)
}

fn apply(u: &mut Update<'_>, l: Listed) {
    match l {
        Listed::Namespace(n) => u.upsert_namespace(&n),
        Listed::Service(ns, n, Some(r)) => u.upsert_service(&ns, &n, r),
        Listed::Service(ns, n, None) => u.remove_service(&ns, &n),
        Listed::Slice(ns, n, Some((svc, r))) => u.upsert_slice(&ns, &n, &svc, r),
        Listed::Slice(ns, n, None) => u.remove_slice(&ns, &n),
        Listed::Pod(ns, n, ips) if ips.is_empty() => u.remove_pod(&ns, &n),
        Listed::Pod(ns, n, ips) => u.upsert_pod(&ns, &n, ips),
    }
}

fn delete(u: &mut Update<'_>, l: Listed) {
    match l {
        Listed::Namespace(n) => u.remove_namespace(&n),
        Listed::Service(ns, n, _) => u.remove_service(&ns, &n),
        Listed::Slice(ns, n, _) => u.remove_slice(&ns, &n),
        Listed::Pod(ns, n, _) => u.remove_pod(&ns, &n),
    }
}

fn clear(u: &mut Update<'_>, k: Kind) {
    match k {
        Kind::Namespaces => u.clear_namespaces(),
        Kind::Services => u.clear_services(),
        Kind::Slices => u.clear_slices(),
        Kind::Pods => u.clear_pods(),
    }
}

/// A watch event reduced to records.
enum Change {
    Apply(Listed),
    Delete(Listed),
    Init,
    InitApply(Listed),
    InitDone,
}

type Changes = Pin<Box<dyn Stream<Item = (Kind, Result<Change>)> + Send>>;

fn cross_cluster<K: Resource<DynamicType = ()>>(o: &K) -> Option<Error> {
    let cluster = o
        .meta()
        .annotations
        .as_ref()?
        .get(CROSS_CLUSTER_ANNOTATION)?;
    let m = o.meta();
    Some(Error::CrossCluster {
        kind: K::kind(&()).to_string(),
        name: format!(
            "{}/{}",
            m.namespace.as_deref().unwrap_or(""),
            m.name.as_deref().unwrap_or("")
        ),
        cluster: cluster.clone(),
    })
}

fn changes<K>(api: Api<K>, kind: Kind, reduce: fn(K) -> Listed) -> Changes
where
    K: Resource<DynamicType = ()>
        + Clone
        + Default
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    runtime::lenient::watcher(api, watcher::Config::default(), None)
        .default_backoff()
        .map(move |ev| {
            let change = match ev {
                Ok(Event::Apply(o)) => {
                    cross_cluster(&o).map_or_else(|| Ok(Change::Apply(reduce(o))), Err)
                }
                Ok(Event::Delete(o)) => {
                    cross_cluster(&o).map_or_else(|| Ok(Change::Delete(reduce(o))), Err)
                }
                Ok(Event::Init) => Ok(Change::Init),
                Ok(Event::InitApply(o)) => {
                    cross_cluster(&o).map_or_else(|| Ok(Change::InitApply(reduce(o))), Err)
                }
                Ok(Event::InitDone) => Ok(Change::InitDone),
                Err(source) => Err(Error::Watch {
                    kind: kind.name(),
                    source,
                }),
            };
            (kind, change)
        })
        .boxed()
}

/// Fills `view` from the cluster `client` addresses until the watches end (never, unless
/// the client is a cross-cluster one). Pods are watched only for [`PodMode::Verified`].
pub async fn run(client: kube::Client, view: Arc<View>, pods: PodMode) -> Result<()> {
    let mut streams: Vec<Changes> = vec![
        changes(
            Api::<Namespace>::all(client.clone()),
            Kind::Namespaces,
            listed_namespace,
        ),
        changes(
            Api::<Service>::all(client.clone()),
            Kind::Services,
            listed_service,
        ),
        changes(
            Api::<EndpointSlice>::all(client.clone()),
            Kind::Slices,
            listed_slice,
        ),
    ];
    if pods == PodMode::Verified {
        streams.push(changes(Api::<Pod>::all(client), Kind::Pods, listed_pod));
    }
    let kinds: Vec<Kind> = [Kind::Namespaces, Kind::Services, Kind::Slices, Kind::Pods]
        .into_iter()
        .take(streams.len())
        .collect();
    let mut synced: Vec<Kind> = Vec::new();
    let mut lists: Vec<(Kind, Vec<Listed>)> = Vec::new();
    let mut all = futures::stream::select_all(streams);
    while let Some((kind, change)) = all.next().await {
        let change = match change {
            Ok(c) => c,
            Err(e @ Error::CrossCluster { .. }) => return Err(e),
            Err(e) => {
                tracing::warn!(error = %e, "DNS watch failed; retrying");
                continue;
            }
        };
        match change {
            Change::Apply(l) => view.update(|u| apply(u, l)),
            Change::Delete(l) => view.update(|u| delete(u, l)),
            Change::Init => {
                lists.retain(|(k, _)| *k != kind);
                lists.push((kind, Vec::new()));
            }
            Change::InitApply(l) => match lists.iter_mut().find(|(k, _)| *k == kind) {
                Some((_, items)) => items.push(l),
                None => view.update(|u| apply(u, l)),
            },
            Change::InitDone => {
                let items = lists
                    .iter()
                    .position(|(k, _)| *k == kind)
                    .map(|i| lists.swap_remove(i).1)
                    .unwrap_or_default();
                view.update(|u| {
                    clear(u, kind);
                    for l in items {
                        apply(u, l);
                    }
                });
                if !synced.contains(&kind) {
                    synced.push(kind);
                    if kinds.iter().all(|k| synced.contains(k)) {
                        view.set_synced();
                    }
                }
            }
        }
    }
    Ok(())
}
