//! Each shared cluster's own servers and policy: its host NetworkPolicy, its kubelet proxy
//! and its DNS server.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Node, Secret, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use runtime::client::ROOT;
use runtime::error::Result;
use runtime::informer::ObjectKey;
use runtime::queue::Action;
use serde_json::json;

use crate::{COMPONENT, Item, Syncer, kubelet, names};

impl Syncer {
    /// A shared cluster's DNS server and kubelet proxy (started, or stopped when it is gone).
    pub(crate) async fn serve(self: &Arc<Self>, lc: &str) -> Result<Action> {
        let remote = self.shared(lc).is_some_and(|s| !s.host.is_root());
        if let Some(shared) = self.shared(lc)
            && !shared.host.is_root()
        {
            self.hold(&shared).await?;
            let connected = match self.connect_host(&shared).await {
                Ok(host) => ensure_namespace(&host.client, &shared.namespace).await,
                Err(e) => Err(e),
            };
            // The TenantCluster says why its host is not there (a missing Secret, a refused
            // kubeconfig, a host that does not answer).
            if let Err(e) = connected {
                self.recorder.record(
                    ROOT,
                    crate::host::tc_reference(
                        &shared.tc_namespace,
                        &shared.name,
                        Some(shared.uid.clone()),
                    ),
                    runtime::events::WARNING,
                    "HostNotConnected",
                    e.to_string(),
                );
                return Err(e);
            }
        }
        self.network_policy(lc).await?;
        let action = self.dns(lc).await?;
        self.kubelet_proxy(lc).await?;
        // Another host's kubeconfig Secret is looked at again now and then: a changed one
        // (a renewed credential) connects the host again.
        Ok(match action {
            Action::AwaitChange if remote => Action::RequeueAfter(crate::HOST_RECHECK),
            other => other,
        })
    }

    /// The host NetworkPolicy that admits traffic to a shared cluster's pods only from its own
    /// pods (vcluster's `policies.networkPolicy`): two shared clusters on one host cannot reach
    /// each other's pods, whatever namespaces they share.
    pub(crate) async fn network_policy(&self, lc: &str) -> Result<()> {
        let Some(shared) = self.shared(lc) else {
            return Ok(());
        };
        let target = shared.target();
        let name = format!("vc-work-{}", shared.name);
        let mine = json!({"matchLabels": {names::MANAGED_BY: shared.name}});
        let mut meta = json!({
            "name": name,
            "namespace": shared.namespace,
            "labels": {names::MANAGED_BY: shared.name},
        });
        if let Some(o) = target.owner.as_ref() {
            meta["ownerReferences"] = json!([o]);
        }
        let policy = json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": meta,
            "spec": {"podSelector": mine, "policyTypes": ["Ingress"],
                "ingress": [{"from": [{"podSelector": mine}]}]},
        });
        let api: Api<DynamicObject> = Api::namespaced_with(
            self.host(&shared)?.client.clone(),
            &shared.namespace,
            &ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk("networking.k8s.io", "v1", "NetworkPolicy"),
                "networkpolicies",
            ),
        );
        api.patch(
            &name,
            &PatchParams::apply(COMPONENT).force(),
            &Patch::Apply(&policy),
        )
        .await?;
        Ok(())
    }

    /// Starts (or stops) a shared cluster's kubelet proxy; its nodes then name it.
    pub(crate) async fn kubelet_proxy(self: &Arc<Self>, lc: &str) -> Result<()> {
        let Some(address) = self.proxy_address() else {
            return Ok(());
        };
        let mut proxies = self.proxies.lock().await;
        if !self.is_shared(lc) {
            proxies.remove(lc);
            self.proxy_ports.write().remove(lc);
            return Ok(());
        }
        if proxies.contains_key(lc) {
            return Ok(());
        }
        // The tenant cluster's own CA (what the process machines' kubelets trust): the API
        // server's kubelet client certificate for this cluster is issued by it. Only its
        // certificate is read.
        let secrets: Api<Secret> =
            Api::namespaced(self.clients.cluster(ROOT)?, "matryoshka-system");
        let Some(ca) = secrets
            .get_opt(&format!("{lc}-pki"))
            .await?
            .and_then(|s| s.data)
            .and_then(|d| {
                d.get("ca.crt")
                    .map(|b| String::from_utf8_lossy(&b.0).into_owned())
            })
        else {
            return Err(runtime::error::Error::Retry(format!(
                "the credentials of {lc} are not there yet"
            )));
        };
        let handler: Arc<dyn kubelet::Handler> = self.clone();
        let server = kubelet::start(address, lc, &ca, handler)
            .await
            .map_err(runtime::error::Error::Retry)?;
        tracing::info!(cluster = lc, addr = %server.addr, "the kubelet proxy of a shared cluster listens");
        self.proxy_ports
            .write()
            .insert(lc.to_string(), server.addr.port());
        proxies.insert(lc.to_string(), server);
        self.queue.add(Item::Nodes(lc.to_string()));
        Ok(())
    }

    /// Forwards a kubelet API request of a shared cluster to the host pod's kubelet.
    pub(crate) async fn kubelet_request(
        self: Arc<Self>,
        lc: String,
        caller: kubelet::Caller,
        req: http::Request<hyper::body::Incoming>,
    ) -> http::Response<streaming::proxy::Body> {
        use http::StatusCode;
        let Some(r) = kubelet::parse_path(req.uri().path()) else {
            return kubelet::text(StatusCode::NOT_FOUND, "404 page not found");
        };
        let Some(shared) = self.shared(&lc) else {
            return kubelet::text(StatusCode::SERVICE_UNAVAILABLE, "the cluster is not served");
        };
        let Some(pod) = self
            .tenant_pods
            .get(&ObjectKey::new(&lc, &r.namespace, &r.pod))
        else {
            return kubelet::text(
                StatusCode::NOT_FOUND,
                &format!("pod {}/{} not found", r.namespace, r.pod),
            );
        };
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default();
        // Authorised as a kubelet authorises: nodes/proxy of the pod's node.
        let verb = kubelet::verb(req.method());
        match self.authorized(&lc, &caller, verb, &node).await {
            Ok(true) => {}
            Ok(false) => {
                return kubelet::text(
                    StatusCode::FORBIDDEN,
                    &format!(
                        "Forbidden (user={}, verb={verb}, resource=nodes, subresource=proxy)",
                        caller.user
                    ),
                );
            }
            Err(e) => {
                return kubelet::text(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    &format!(
                        "Authorization error (user={}, verb={verb}, resource=nodes, subresource=proxy): {e}",
                        caller.user
                    ),
                );
            }
        }
        let target = shared.target();
        let host_name = target.name(&r.namespace, &r.pod);
        let Ok(host) = self.host(&shared) else {
            return kubelet::text(StatusCode::SERVICE_UNAVAILABLE, "the host is not connected");
        };
        // Another host: through its API server, with the kubeconfig's credentials (and none
        // of the caller's: the caller was authorised in the tenant, not on the host).
        if let Some(api) = &host.api {
            let path = r.api_path(&shared.namespace, &host_name, req.uri().query());
            let Ok(uri) = format!("{}{path}", api.base).parse::<http::Uri>() else {
                return kubelet::text(StatusCode::BAD_REQUEST, "bad path");
            };
            let mut req = req;
            let headers = req.headers_mut();
            let callers: Vec<http::HeaderName> = headers
                .keys()
                .filter(|k| {
                    *k == http::header::AUTHORIZATION
                        || k.as_str().to_ascii_lowercase().starts_with("impersonate-")
                })
                .cloned()
                .collect();
            for k in callers {
                headers.remove(k);
            }
            if let Some(a) = &api.authorization {
                headers.insert(http::header::AUTHORIZATION, a.clone());
            }
            let connector = streaming::upgrade::TcpConnect {
                tls: Some(api.tls.clone()),
            };
            return match streaming::proxy::forward(req, &uri, &connector, None).await {
                Ok(r) => r,
                Err(e) => kubelet::text(
                    StatusCode::BAD_GATEWAY,
                    &format!("error dialing the host's API server: {e}"),
                ),
            };
        }
        let Some(tls) = self.kubelet_tls.clone() else {
            return kubelet::text(StatusCode::SERVICE_UNAVAILABLE, "no kubelet identity");
        };
        let host_uid = host
            .pods
            .store()
            .get(&ObjectKey::new(ROOT, &shared.namespace, &host_name))
            .and_then(|p| p.metadata.uid.clone());
        let Some(host_node) = host.nodes.get(&ObjectKey::new(ROOT, "", &node)) else {
            return kubelet::text(
                StatusCode::NOT_FOUND,
                &format!("node {node} is not a host node"),
            );
        };
        let Some((address, port)) = kubelet_location(&host_node) else {
            return kubelet::text(
                StatusCode::BAD_GATEWAY,
                &format!("node {node} has no address"),
            );
        };
        let path = r.host_path(&shared.namespace, &host_name, host_uid.as_deref());
        let Some(uri) = kubelet::kubelet_uri(&address, port, &path, req.uri().query()) else {
            return kubelet::text(StatusCode::BAD_REQUEST, "bad path");
        };
        let connector = streaming::upgrade::TcpConnect { tls: Some(tls) };
        match streaming::proxy::forward(req, &uri, &connector, None).await {
            Ok(r) => r,
            Err(e) => kubelet::text(
                StatusCode::BAD_GATEWAY,
                &format!("error dialing backend: {e}"),
            ),
        }
    }

    /// Whether `caller` may `verb` `nodes/proxy` of `node` in cluster `lc`.
    pub(crate) async fn authorized(
        &self,
        lc: &str,
        caller: &kubelet::Caller,
        verb: &str,
        node: &str,
    ) -> Result<bool> {
        use k8s_openapi::api::authorization::v1::{
            ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
        };
        let api: Api<SubjectAccessReview> = Api::all(self.clients.cluster(lc)?);
        let review = SubjectAccessReview {
            metadata: ObjectMeta::default(),
            spec: SubjectAccessReviewSpec {
                user: Some(caller.user.clone()),
                groups: Some(caller.groups.clone()),
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(verb.into()),
                    resource: Some("nodes".into()),
                    subresource: Some("proxy".into()),
                    name: Some(node.into()),
                    ..ResourceAttributes::default()
                }),
                ..SubjectAccessReviewSpec::default()
            },
            status: None,
        };
        let answer = api.create(&PostParams::default(), &review).await?;
        Ok(answer.status.is_some_and(|s| s.allowed))
    }

    /// Starts (or stops) a shared cluster's DNS server and keeps its Services.
    pub(crate) async fn dns(&self, lc: &str) -> Result<Action> {
        let Some(address) = self.options.address else {
            return Ok(Action::AwaitChange);
        };
        let Some(shared) = self.shared(lc) else {
            if let Some(d) = self.dns.lock().await.remove(lc) {
                d.shutdown().await;
            }
            self.dns_ips.write().remove(lc);
            return Ok(Action::AwaitChange);
        };
        let tenant = self.clients.cluster(lc)?;
        // The lock is held only to start the server, not across the API calls below.
        let mut servers = self.dns.lock().await;
        if !servers.contains_key(lc) {
            let config = dns::Config {
                listen: vec![SocketAddr::new(address, 0)],
                upstream: self.options.dns_upstream.clone(),
                ..dns::Config::default()
            };
            let server = dns::ClusterDns::start(tenant.clone(), config)
                .await
                .map_err(|e| runtime::error::Error::Retry(format!("the DNS of {lc}: {e}")))?;
            servers.insert(lc.to_string(), server);
        }
        let port = servers
            .get(lc)
            .and_then(|d| d.addrs().first())
            .map_or(53, SocketAddr::port);
        drop(servers);
        let target = shared.target();
        let host_name = target.name("kube-system", "kube-dns");
        let root = self.host(&shared)?.client.clone();
        let pp = PatchParams::apply(COMPONENT).force();
        let mut meta = json!({
            "name": host_name,
            "namespace": shared.namespace,
            "labels": names::host_labels(None, "kube-system", &shared.name),
            "annotations": {names::OBJECT_NAME: "kube-dns", names::OBJECT_NAMESPACE: "kube-system", names::OBJECT_KIND: "Service"},
        });
        if let Some(o) = target.owner.as_ref() {
            meta["ownerReferences"] = json!([o]);
        }
        let svc = json!({
            "apiVersion": "v1", "kind": "Service", "metadata": meta,
            "spec": {"ports": [
                {"name": "dns", "protocol": "UDP", "port": 53, "targetPort": port},
                {"name": "dns-tcp", "protocol": "TCP", "port": 53, "targetPort": port},
            ]},
        });
        let services: Api<Service> = Api::namespaced(root.clone(), &shared.namespace);
        let applied = services.patch(&host_name, &pp, &Patch::Apply(&svc)).await?;
        let mut slice_meta = meta.clone();
        slice_meta["labels"]["kubernetes.io/service-name"] = json!(host_name);
        slice_meta["labels"]["endpointslice.kubernetes.io/managed-by"] =
            json!("syncer.matryoshka.dev");
        let family = if address.is_ipv4() { "IPv4" } else { "IPv6" };
        let slice = json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": slice_meta,
            "addressType": family,
            "endpoints": [{"addresses": [address.to_string()], "conditions": {"ready": true}}],
            "ports": [
                {"name": "dns", "protocol": "UDP", "port": port},
                {"name": "dns-tcp", "protocol": "TCP", "port": port},
            ],
        });
        let slices: Api<DynamicObject> = Api::namespaced_with(
            root,
            &shared.namespace,
            &ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk("discovery.k8s.io", "v1", "EndpointSlice"),
                "endpointslices",
            ),
        );
        slices.patch(&host_name, &pp, &Patch::Apply(&slice)).await?;
        let Some(ip) = applied
            .spec
            .and_then(|s| s.cluster_ip)
            .and_then(|ip| ip.parse::<IpAddr>().ok())
        else {
            return Ok(Action::RequeueAfter(Duration::from_millis(200)));
        };
        // The tenant's kube-system/kube-dns names the same address.
        let t_api: Api<Service> = Api::namespaced(tenant, "kube-system");
        let want = dns::kube_dns::service(ip);
        match t_api.get_opt("kube-dns").await? {
            None => match t_api.create(&PostParams::default(), &want).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(e) => return Err(e.into()),
            },
            Some(t) => {
                let key = ObjectKey::new(lc, "kube-system", "kube-dns");
                if t.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()) != Some(&ip.to_string()) {
                    self.recreate_with_ip(&key, &t, &ip.to_string()).await?;
                }
            }
        }
        let first = self.dns_ips.write().insert(lc.to_string(), ip).is_none();
        if first {
            for (k, _) in self.tenant_pods.list_cluster(lc) {
                self.queue.add(Item::Pod(k));
            }
        }
        Ok(Action::AwaitChange)
    }
}

impl kubelet::Handler for Syncer {
    fn handle(
        self: Arc<Self>,
        cluster: String,
        caller: kubelet::Caller,
        req: http::Request<hyper::body::Incoming>,
    ) -> futures::future::BoxFuture<'static, http::Response<streaming::proxy::Body>> {
        Box::pin(self.kubelet_request(cluster, caller, req))
    }
}

/// Makes a host namespace that is not there (a host given by a kubeconfig may not have it;
/// credentials that may not make namespaces are for a namespace that exists).
async fn ensure_namespace(client: &kube::Client, name: &str) -> Result<()> {
    let api: Api<Namespace> = Api::all(client.clone());
    match api.get_metadata_opt(name).await {
        Ok(Some(_)) => return Ok(()),
        Ok(None) => {}
        Err(kube::Error::Api(e)) if e.code == 403 => return Ok(()),
        Err(e) => return Err(e.into()),
    }
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}}))?;
    match api.create(&PostParams::default(), &ns).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 || e.code == 403 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Where a host node's kubelet listens: its first InternalIP (else any address) and its
/// reported port (else 10250).
fn kubelet_location(node: &Node) -> Option<(String, u16)> {
    let status = node.status.as_ref()?;
    let addresses = status.addresses.as_ref()?;
    let address = addresses
        .iter()
        .find(|a| a.type_ == "InternalIP")
        .or_else(|| addresses.first())?
        .address
        .clone();
    let port = status
        .daemon_endpoints
        .as_ref()
        .and_then(|d| d.kubelet_endpoint.as_ref())
        .map(|e| e.port)
        .and_then(|p| u16::try_from(p).ok())
        .filter(|p| *p != 0)
        .unwrap_or(10250);
    Some((address, port))
}
