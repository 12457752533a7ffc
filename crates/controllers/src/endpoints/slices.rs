//! The EndpointSlice controller (upstream `pkg/controller/endpointslice`): for every service
//! with a selector, EndpointSlices (`discovery.k8s.io/v1`, IPv4) listing the pods that back
//! it, grouped by the ports they offer, at most [`MAX_ENDPOINTS_PER_SLICE`] per slice, named
//! `<service>-<random>`, labelled with the service name and this controller, and owned by the
//! service (the garbage collector removes them with it). A service whose selector matches
//! nothing gets one empty placeholder slice, as upstream.
//!
//! Reconciling compares the desired slices with the ones the informer holds and writes only
//! differences. Writes the informer has not shown yet are remembered per service (upstream's
//! `EndpointSliceTracker`): until they appear the service waits, so a stale cache never makes
//! it create a slice twice.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, ObjectReference, Pod, Service};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use kube::Api;
use kube::api::{DeleteParams, ObjectMeta, PostParams};
use parking_lot::Mutex;

use super::{
    HEADLESS_LABEL, MANAGED_BY, MANAGED_BY_LABEL, ResolvedPort, SERVICE_NAME_LABEL, ZONE_LABEL,
};
use crate::podutil;
use runtime::client::ClusterClients;
use runtime::error::{Result, ignore_not_found};
use runtime::informer::{Change, ObjectKey, Store};
use runtime::queue::{Action, Queue};
use runtime::shared::Informers;

/// Upstream's default `--max-endpoints-per-slice`.
pub const MAX_ENDPOINTS_PER_SLICE: usize = 100;

/// How long an unseen write holds a service back before it is assumed lost.
const STALE_WAIT: Duration = Duration::from_secs(5);

/// Writes not yet seen: slice name → the resourceVersion written (`None`: deleted).
type Pending = HashMap<String, Option<u64>>;

/// The EndpointSlice controller.
pub struct EndpointSliceController {
    clients: ClusterClients,
    services: Store<Service>,
    pods: Store<Pod>,
    nodes: Store<Node>,
    slices: Store<EndpointSlice>,
    pending: Mutex<HashMap<ObjectKey, (Instant, Pending)>>,
    queue: Arc<Queue<ObjectKey>>,
}

fn service_of(key: &ObjectKey, slice: &EndpointSlice) -> Option<ObjectKey> {
    let labels = slice.metadata.labels.as_ref()?;
    (labels.get(MANAGED_BY_LABEL).map(String::as_str) == Some(MANAGED_BY))
        .then(|| labels.get(SERVICE_NAME_LABEL))
        .flatten()
        .map(|svc| ObjectKey::new(&key.cluster, &key.namespace, svc))
}

fn rv(meta: &ObjectMeta) -> u64 {
    meta.resource_version
        .as_deref()
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

/// One desired slice: the ports its endpoints offer and the endpoints.
#[derive(Debug, Clone, PartialEq)]
pub struct Desired {
    pub ports: Vec<EndpointPort>,
    pub endpoints: Vec<Endpoint>,
}

fn endpoint_port(p: &ResolvedPort) -> EndpointPort {
    EndpointPort {
        name: Some(p.name.clone()),
        port: Some(p.port),
        protocol: Some(p.protocol.clone()),
        app_protocol: p.app_protocol.clone(),
    }
}

/// The slices `svc` should have, from the pods of its namespace and the nodes of its cluster.
pub fn desired(
    svc: &Service,
    pods: &[Arc<Pod>],
    zone_of: impl Fn(&str) -> Option<String>,
) -> Vec<Desired> {
    let mut groups: BTreeMap<Vec<ResolvedPort>, Vec<Endpoint>> = BTreeMap::new();
    let mut backing: Vec<&Arc<Pod>> = pods
        .iter()
        .filter(|p| super::selects(svc, p) && super::backs(p, true))
        .collect();
    backing.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    for pod in backing {
        let Some(ip) = super::pod_ip(pod) else {
            continue;
        };
        let c = super::conditions(svc, pod);
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .filter(|n| !n.is_empty());
        let ep = Endpoint {
            addresses: vec![ip.to_string()],
            conditions: Some(EndpointConditions {
                ready: Some(c.ready),
                serving: Some(c.serving),
                terminating: Some(c.terminating),
            }),
            hostname: super::hostname(svc, pod),
            zone: node.as_deref().and_then(&zone_of),
            node_name: node,
            target_ref: Some(ObjectReference {
                kind: Some("Pod".into()),
                namespace: pod.metadata.namespace.clone(),
                name: pod.metadata.name.clone(),
                uid: pod.metadata.uid.clone(),
                ..Default::default()
            }),
            ..Default::default()
        };
        groups
            .entry(super::resolve_ports(svc, pod))
            .or_default()
            .push(ep);
    }
    let mut out = Vec::new();
    for (ports, eps) in groups {
        let ports: Vec<EndpointPort> = ports.iter().map(endpoint_port).collect();
        for chunk in eps.chunks(MAX_ENDPOINTS_PER_SLICE) {
            out.push(Desired {
                ports: ports.clone(),
                endpoints: chunk.to_vec(),
            });
        }
    }
    if out.is_empty() {
        out.push(Desired {
            ports: Vec::new(),
            endpoints: Vec::new(),
        });
    }
    out
}

fn labels(svc: &Service) -> BTreeMap<String, String> {
    let mut l = svc.metadata.labels.clone().unwrap_or_default();
    l.insert(
        SERVICE_NAME_LABEL.into(),
        svc.metadata.name.clone().unwrap_or_default(),
    );
    l.insert(MANAGED_BY_LABEL.into(), MANAGED_BY.into());
    if super::headless(svc) {
        l.insert(HEADLESS_LABEL.into(), String::new());
    } else {
        l.remove(HEADLESS_LABEL);
    }
    l
}

/// Whether a stored slice already is `d` (the server drops empty lists).
fn same(slice: &EndpointSlice, d: &Desired, labels: &BTreeMap<String, String>) -> bool {
    slice.endpoints == d.endpoints
        && slice.ports.clone().unwrap_or_default() == d.ports
        && slice.metadata.labels.as_ref() == Some(labels)
        && slice.address_type == "IPv4"
}

impl EndpointSliceController {
    pub fn new(informers: &Informers) -> Result<Arc<Self>> {
        let queue: Arc<Queue<ObjectKey>> = Queue::new();
        let services_inf = informers.get::<Service>()?;
        let pods_inf = informers.get::<Pod>()?;
        let nodes_inf = informers.get::<Node>()?;
        let slices_inf = informers.get::<EndpointSlice>()?;
        let services = services_inf.store();
        let q = queue.clone();
        services_inf.on_change(move |c| q.add(c.key().clone()));
        super::on_pod_change(&pods_inf, &services, &queue);
        let q = queue.clone();
        slices_inf.on_change(move |c| {
            if let Some(k) = service_of(c.key(), c.object()) {
                q.add(k);
            }
        });
        let (q, s) = (queue.clone(), services.clone());
        nodes_inf.on_change(move |c| {
            let zone = |n: &Node| {
                n.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(ZONE_LABEL).cloned())
            };
            if let Change::Updated { old, new, key } = c
                && zone(old) != zone(new)
            {
                for (k, _) in s.list_cluster(&key.cluster) {
                    q.add(k);
                }
            }
        });
        Ok(Arc::new(EndpointSliceController {
            clients: informers.clients().clone(),
            services,
            pods: pods_inf.store(),
            nodes: nodes_inf.store(),
            slices: slices_inf.store(),
            pending: Mutex::new(HashMap::new()),
            queue,
        }))
    }

    pub fn queue(&self) -> Arc<Queue<ObjectKey>> {
        self.queue.clone()
    }

    /// Whether the informer shows every write made for `key` (or they are too old to wait for).
    fn caught_up(&self, key: &ObjectKey) -> bool {
        let mut pending = self.pending.lock();
        let Some((at, writes)) = pending.get(key) else {
            return true;
        };
        let seen = writes.iter().all(|(name, want)| {
            let got = self
                .slices
                .get(&ObjectKey::new(&key.cluster, &key.namespace, name));
            match want {
                Some(v) => got.is_some_and(|s| rv(&s.metadata) >= *v),
                None => got.is_none(),
            }
        });
        if seen || at.elapsed() > STALE_WAIT {
            pending.remove(key);
            return true;
        }
        false
    }

    /// Brings the slices of service `key` in line with its pods.
    pub async fn reconcile(&self, key: ObjectKey) -> Result<Action> {
        let Some(svc) = self.services.get(&key) else {
            self.pending.lock().remove(&key);
            return Ok(Action::AwaitChange);
        };
        if !super::managed(&svc) {
            return Ok(Action::AwaitChange);
        }
        if !self.caught_up(&key) {
            return Ok(Action::RequeueAfter(Duration::from_millis(50)));
        }
        let pods = self.pods.list_namespace(&key.cluster, &key.namespace);
        let zone_of = |node: &str| {
            self.nodes
                .get(&ObjectKey::new(&key.cluster, "", node))
                .and_then(|n| n.metadata.labels.as_ref()?.get(ZONE_LABEL).cloned())
        };
        let want = desired(&svc, &pods, zone_of);
        let labels = labels(&svc);
        let uid = svc.metadata.uid.clone().unwrap_or_default();
        let mut existing: Vec<Arc<EndpointSlice>> = self
            .slices
            .list_namespace(&key.cluster, &key.namespace)
            .into_iter()
            .filter(|s| service_of(&key, s).as_ref() == Some(&key))
            .collect();
        let api: Api<EndpointSlice> =
            Api::namespaced(self.clients.cluster(&key.cluster)?, &key.namespace);
        let mut writes = Pending::new();
        let owned_by_svc = |s: &EndpointSlice| {
            s.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|r| r.uid == uid)
        };
        for d in &want {
            // An identical slice, else one with the same ports, else any of this service's.
            let pick = existing
                .iter()
                .position(|s| owned_by_svc(s) && same(s, d, &labels))
                .or_else(|| {
                    existing.iter().position(|s| {
                        owned_by_svc(s) && s.ports.clone().unwrap_or_default() == d.ports
                    })
                })
                .or_else(|| existing.iter().position(|s| owned_by_svc(s)));
            let result = match pick.map(|i| existing.swap_remove(i)) {
                Some(cur) if same(&cur, d, &labels) => continue,
                Some(cur) => {
                    let mut next = (*cur).clone();
                    next.metadata.labels = Some(labels.clone());
                    next.endpoints = d.endpoints.clone();
                    next.ports = Some(d.ports.clone());
                    next.address_type = "IPv4".into();
                    let name = cur.metadata.name.clone().unwrap_or_default();
                    ignore_not_found(api.replace(&name, &PostParams::default(), &next).await)?
                }
                None => {
                    let slice = EndpointSlice {
                        metadata: ObjectMeta {
                            generate_name: Some(format!("{}-", key.name)),
                            namespace: Some(key.namespace.clone()),
                            labels: Some(labels.clone()),
                            owner_references: Some(vec![podutil::new_controller_ref(
                                &svc.metadata,
                                "v1",
                                "Service",
                            )]),
                            ..Default::default()
                        },
                        address_type: "IPv4".into(),
                        endpoints: d.endpoints.clone(),
                        ports: Some(d.ports.clone()),
                    };
                    match api.create(&PostParams::default(), &slice).await {
                        Ok(s) => Some(s),
                        // The namespace is going away.
                        Err(kube::Error::Api(s)) if s.code == 403 || s.code == 404 => None,
                        Err(e) => return Err(e.into()),
                    }
                }
            };
            if let Some(s) = result {
                writes.insert(
                    s.metadata.name.clone().unwrap_or_default(),
                    Some(rv(&s.metadata)),
                );
            }
        }
        for s in existing {
            let name = s.metadata.name.clone().unwrap_or_default();
            ignore_not_found(api.delete(&name, &DeleteParams::default()).await)?;
            writes.insert(name, None);
        }
        if !writes.is_empty() {
            self.pending.lock().insert(key, (Instant::now(), writes));
        }
        Ok(Action::AwaitChange)
    }
}
