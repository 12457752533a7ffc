//! The Endpoints controller (upstream `pkg/controller/endpoint`): for every service with a
//! selector, a `v1 Endpoints` object of the same name listing the backing pods — ready ones
//! under `addresses`, the others under `notReadyAddresses` — in subsets grouped by the ports
//! the pods offer. Terminating pods are left out unless the service publishes not-ready
//! addresses. The object carries the service's labels and
//! `endpointslice.kubernetes.io/skip-mirror`, so it is never mirrored back into slices; it is
//! deleted with its service.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    EndpointAddress, EndpointPort, EndpointSubset, Endpoints, ObjectReference, Pod, Service,
};
use kube::Api;
use kube::api::{DeleteParams, ObjectMeta, PostParams};

use super::{HEADLESS_LABEL, ResolvedPort};
use runtime::client::ClusterClients;
use runtime::error::{Result, ignore_not_found};
use runtime::informer::{ObjectKey, Store};
use runtime::queue::{Action, Queue};
use runtime::shared::Informers;

/// The label that keeps the mirroring controller away from controller-made Endpoints.
pub const SKIP_MIRROR_LABEL: &str = "endpointslice.kubernetes.io/skip-mirror";

/// The Endpoints controller.
pub struct EndpointsController {
    clients: ClusterClients,
    services: Store<Service>,
    pods: Store<Pod>,
    endpoints: Store<Endpoints>,
    queue: Arc<Queue<ObjectKey>>,
}

fn address(svc: &Service, pod: &Pod, ip: &str) -> EndpointAddress {
    EndpointAddress {
        ip: ip.to_string(),
        hostname: super::hostname(svc, pod),
        node_name: pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .filter(|n| !n.is_empty()),
        target_ref: Some(ObjectReference {
            kind: Some("Pod".into()),
            namespace: pod.metadata.namespace.clone(),
            name: pod.metadata.name.clone(),
            uid: pod.metadata.uid.clone(),
            ..Default::default()
        }),
    }
}

fn port(p: &ResolvedPort) -> EndpointPort {
    EndpointPort {
        name: (!p.name.is_empty()).then(|| p.name.clone()),
        port: p.port,
        protocol: Some(p.protocol.clone()),
        app_protocol: p.app_protocol.clone(),
    }
}

/// The subsets `svc` should list, from the pods of its namespace.
pub fn subsets(svc: &Service, pods: &[Arc<Pod>]) -> Vec<EndpointSubset> {
    let publish = svc
        .spec
        .as_ref()
        .and_then(|s| s.publish_not_ready_addresses)
        .unwrap_or(false);
    let has_ports = svc
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .is_some_and(|p| !p.is_empty());
    type Group = (Vec<EndpointAddress>, Vec<EndpointAddress>);
    let mut groups: BTreeMap<Vec<ResolvedPort>, Group> = BTreeMap::new();
    for pod in pods {
        if !super::selects(svc, pod) || !super::backs(pod, publish) {
            continue;
        }
        let Some(ip) = super::pod_ip(pod) else {
            continue;
        };
        let ports = super::resolve_ports(svc, pod);
        // A pod that offers none of the ports backs only a headless service without ports.
        if ports.is_empty() && (has_ports || !super::headless(svc)) {
            continue;
        }
        let g = groups.entry(ports).or_default();
        let a = address(svc, pod, ip);
        if publish || crate::podutil::is_ready(pod) {
            g.0.push(a);
        } else {
            g.1.push(a);
        }
    }
    groups
        .into_iter()
        .map(|(ports, (mut ready, mut not_ready))| {
            ready.sort_by(|a, b| a.ip.cmp(&b.ip));
            not_ready.sort_by(|a, b| a.ip.cmp(&b.ip));
            EndpointSubset {
                addresses: (!ready.is_empty()).then_some(ready),
                not_ready_addresses: (!not_ready.is_empty()).then_some(not_ready),
                ports: (!ports.is_empty()).then(|| ports.iter().map(port).collect()),
            }
        })
        .collect()
}

fn labels(svc: &Service) -> BTreeMap<String, String> {
    let mut l = svc.metadata.labels.clone().unwrap_or_default();
    l.insert(SKIP_MIRROR_LABEL.into(), "true".into());
    if super::headless(svc) {
        l.insert(HEADLESS_LABEL.into(), String::new());
    } else {
        l.remove(HEADLESS_LABEL);
    }
    l
}

impl EndpointsController {
    pub fn new(informers: &Informers) -> Result<Arc<Self>> {
        let queue: Arc<Queue<ObjectKey>> = Queue::new();
        let services_inf = informers.get::<Service>()?;
        let pods_inf = informers.get::<Pod>()?;
        let endpoints_inf = informers.get::<Endpoints>()?;
        let services = services_inf.store();
        let q = queue.clone();
        services_inf.on_change(move |c| q.add(c.key().clone()));
        super::on_pod_change(&pods_inf, &services, &queue);
        let (q, s) = (queue.clone(), services.clone());
        endpoints_inf.on_change(move |c| {
            if s.get(c.key()).is_some() {
                q.add(c.key().clone());
            }
        });
        Ok(Arc::new(EndpointsController {
            clients: informers.clients().clone(),
            services,
            pods: pods_inf.store(),
            endpoints: endpoints_inf.store(),
            queue,
        }))
    }

    pub fn queue(&self) -> Arc<Queue<ObjectKey>> {
        self.queue.clone()
    }

    /// Brings the Endpoints of service `key` in line with its pods.
    pub async fn reconcile(&self, key: ObjectKey) -> Result<Action> {
        let api: Api<Endpoints> =
            Api::namespaced(self.clients.cluster(&key.cluster)?, &key.namespace);
        let current = self.endpoints.get(&key);
        let Some(svc) = self.services.get(&key) else {
            // Upstream deletes the Endpoints of a deleted service.
            if current.is_some() {
                ignore_not_found(api.delete(&key.name, &DeleteParams::default()).await)?;
            }
            return Ok(Action::AwaitChange);
        };
        if !super::managed(&svc) {
            return Ok(Action::AwaitChange);
        }
        let pods = self.pods.list_namespace(&key.cluster, &key.namespace);
        let subsets = subsets(&svc, &pods);
        let labels = labels(&svc);
        let wanted = (!subsets.is_empty()).then_some(subsets);
        let result = match current {
            Some(cur)
                if cur.subsets.clone().filter(|s| !s.is_empty()) == wanted
                    && cur.metadata.labels.as_ref() == Some(&labels) =>
            {
                return Ok(Action::AwaitChange);
            }
            Some(cur) => {
                let mut next = (*cur).clone();
                next.subsets = wanted;
                next.metadata.labels = Some(labels);
                api.replace(&key.name, &PostParams::default(), &next).await
            }
            None => {
                let ep = Endpoints {
                    metadata: ObjectMeta {
                        name: Some(key.name.clone()),
                        namespace: Some(key.namespace.clone()),
                        labels: Some(labels),
                        ..Default::default()
                    },
                    subsets: wanted,
                };
                api.create(&PostParams::default(), &ep).await
            }
        };
        match result {
            Ok(_) => Ok(Action::AwaitChange),
            // Gone meanwhile, or the namespace is terminating: the next event decides.
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 403 => Ok(Action::AwaitChange),
            Err(e) => Err(e.into()),
        }
    }
}
