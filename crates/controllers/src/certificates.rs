//! CertificateSigningRequests: the approver and the signer (upstream
//! `pkg/controller/certificates/{approver,signer}`), one instance for every cluster.
//!
//! - **Approver**: a `kubernetes.io/kube-apiserver-client-kubelet` request for CN
//!   `system:node:<name>`, O `system:nodes`, no alternative names and only client usages is
//!   approved (`AutoApproved`) when a SubjectAccessReview says its requester may `create`
//!   `certificatesigningrequests/nodeclient` (a bootstrap token's group, bound as kubeadm binds
//!   it) or, for a node renewing its own, `certificatesigningrequests/selfnodeclient`. A
//!   `kubernetes.io/kubelet-serving` request a node makes for itself (CN
//!   `system:node:<name>`, O `system:nodes`, server usages) is approved when every DNS and
//!   IP name it asks for is one of that Node's addresses (upstream leaves these to an
//!   external approver such as kubelet-csr-approver, which checks the same). Other requests
//!   wait for someone to approve or deny them.
//! - **Signer**: an approved request of `kube-apiserver-client-kubelet`,
//!   `kube-apiserver-client` or `kubelet-serving` is signed by its cluster's CA (a logical
//!   cluster's is in `matryoshka-system/<cluster>-pki` of the root cluster; the root cluster's
//!   is handed in) for `spec.expirationSeconds` (at least 10 minutes) or a year, with the
//!   usages the signer allows; what does not meet the signer's rules gets `Failed`.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};

use runtime::client::{ClusterClients, ROOT};
use runtime::error::Result;
use runtime::informer::{Change, ObjectKey, Store};
use runtime::queue::{Action, Queue};
use runtime::shared::Informers;

pub const KUBELET_CLIENT: &str = "kubernetes.io/kube-apiserver-client-kubelet";
pub const CLIENT: &str = "kubernetes.io/kube-apiserver-client";
pub const KUBELET_SERVING: &str = "kubernetes.io/kubelet-serving";

/// The signing duration when a request names none, and the longest one may ask for (upstream
/// `--cluster-signing-duration`).
pub const DEFAULT_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// How long a node's serving request whose names its Node does not (yet) list is looked at
/// again.
const SERVING_RECHECK_FOR: Duration = Duration::from_secs(600);

/// The root cluster's CA (certificate, key), when the signer may use it.
pub type RootSigner = Option<(String, String)>;

pub struct CsrController {
    clients: ClusterClients,
    csrs: Store<CertificateSigningRequest>,
    root_signer: RootSigner,
    /// `--cluster-signing-duration`.
    max_duration: Duration,
    queue: Arc<Queue<ObjectKey>>,
}

fn condition(csr: &CertificateSigningRequest, type_: &str) -> bool {
    csr.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == type_ && c.status == "True"))
}

/// The request of a node's certificate from `signer` (named `what` in reasons): the signer,
/// a readable request, O `system:nodes`, CN `system:node:<name>`, and usages among `allowed`
/// including `required`.
fn node_request(
    csr: &CertificateSigningRequest,
    signer: &str,
    what: &str,
    allowed: &[&str],
    required: &str,
) -> Result<pki::csr::CsrInfo, String> {
    let spec = &csr.spec;
    if spec.signer_name != signer {
        return Err(format!("not a kubelet {what} signer"));
    }
    let pem = String::from_utf8_lossy(&spec.request.0).to_string();
    let info = pki::csr::parse_csr(&pem)?;
    if info.organizations != ["system:nodes"] {
        return Err("subject organization is not system:nodes".into());
    }
    if !info.common_name.starts_with("system:node:") {
        return Err("subject common name does not begin with system:node:".into());
    }
    let usages = spec.usages.clone().unwrap_or_default();
    if !usages.iter().any(|u| u == required)
        || usages.iter().any(|u| !allowed.contains(&u.as_str()))
    {
        return Err(format!("usages did not match {allowed:?}"));
    }
    Ok(info)
}

/// Why a request is not a kubelet client certificate request, if it is not.
pub fn not_node_client(csr: &CertificateSigningRequest) -> Option<String> {
    let allowed = ["key encipherment", "digital signature", "client auth"];
    let info = match node_request(csr, KUBELET_CLIENT, "client", &allowed, "client auth") {
        Ok(i) => i,
        Err(e) => return Some(e),
    };
    if !(info.dns_names.is_empty()
        && info.emails.is_empty()
        && info.ip_addresses.is_empty()
        && info.uris.is_empty())
    {
        return Some("DNS, email, IP and URI subjectAltNames are not allowed".into());
    }
    None
}

/// Why a request is not a kubelet serving certificate request a node may have approved
/// automatically, if it is not: signer `kubelet-serving`, CN `system:node:<name>` asked for
/// by that node itself, O `system:nodes`, server usages, DNS and IP names only and at least
/// one. Its names are checked against the Node's addresses separately ([`names_are_nodes`]).
pub fn not_node_serving(csr: &CertificateSigningRequest) -> Option<String> {
    let allowed = ["key encipherment", "digital signature", "server auth"];
    let info = match node_request(csr, KUBELET_SERVING, "serving", &allowed, "server auth") {
        Ok(i) => i,
        Err(e) => return Some(e),
    };
    if csr.spec.username.as_deref() != Some(info.common_name.as_str()) {
        return Some("the requester is not the node the certificate names".into());
    }
    if !(info.emails.is_empty() && info.uris.is_empty()) {
        return Some("email and URI subjectAltNames are not allowed".into());
    }
    if info.dns_names.is_empty() && info.ip_addresses.is_empty() {
        return Some("at least one DNS or IP subjectAltName is required".into());
    }
    None
}

/// Whether every name a serving request asks for is one of `node`'s addresses: IPs among its
/// InternalIP/ExternalIP addresses, DNS names among its Hostname/InternalDNS/ExternalDNS ones.
pub fn names_are_nodes(info: &pki::csr::CsrInfo, node: &k8s_openapi::api::core::v1::Node) -> bool {
    let addresses = node
        .status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .cloned()
        .unwrap_or_default();
    let has = |types: &[&str], value: &str| {
        addresses
            .iter()
            .any(|a| types.contains(&a.type_.as_str()) && a.address == value)
    };
    info.ip_addresses
        .iter()
        .all(|ip| has(&["InternalIP", "ExternalIP"], ip))
        && info
            .dns_names
            .iter()
            .all(|d| has(&["Hostname", "InternalDNS", "ExternalDNS"], d))
}

/// Approves request `name` (`AutoApproved`, with `message`).
async fn auto_approve(
    api: &Api<CertificateSigningRequest>,
    name: &str,
    message: &str,
) -> Result<()> {
    let now = apimachinery::time::format_time(jiff::Timestamp::now());
    let patch = serde_json::json!({"status": {"conditions": [{
        "type": "Approved", "status": "True", "reason": "AutoApproved", "message": message,
        "lastUpdateTime": now, "lastTransitionTime": now,
    }]}});
    api.patch_subresource(
        "approval",
        name,
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await?;
    Ok(())
}

/// A status patch adding `Failed` to the request's conditions (the list is replaced as a
/// whole, so the approval is carried over).
fn failed(csr: &CertificateSigningRequest, message: String) -> serde_json::Value {
    let now = apimachinery::time::format_time(jiff::Timestamp::now());
    let mut conditions = csr
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .map(|c| serde_json::to_value(c).unwrap_or_default())
        .and_then(|v| v.as_array().cloned())
        .unwrap_or_default();
    conditions.push(serde_json::json!({
        "type": "Failed", "status": "True", "reason": "SignerValidationFailure", "message": message,
        "lastUpdateTime": now, "lastTransitionTime": now,
    }));
    serde_json::json!({"status": {"conditions": conditions}})
}

/// The usages a signer grants (those requested that it allows).
fn granted(signer: &str, requested: &[String]) -> Option<Vec<String>> {
    let allowed: &[&str] = match signer {
        KUBELET_CLIENT | CLIENT => &["digital signature", "key encipherment", "client auth"],
        KUBELET_SERVING => &["digital signature", "key encipherment", "server auth"],
        _ => return None,
    };
    if requested.iter().any(|u| !allowed.contains(&u.as_str())) {
        return None;
    }
    Some(requested.to_vec())
}

impl CsrController {
    pub fn new(
        informers: &Informers,
        root_signer: RootSigner,
        max_duration: Duration,
    ) -> Result<Arc<Self>> {
        let queue = Queue::new();
        let csrs = informers.get::<CertificateSigningRequest>()?;
        let q = queue.clone();
        csrs.on_change(move |c| {
            if !matches!(c, Change::Deleted(..)) {
                q.add(c.key().clone());
            }
        });
        Ok(Arc::new(CsrController {
            clients: informers.clients().clone(),
            csrs: csrs.store(),
            root_signer,
            max_duration,
            queue,
        }))
    }

    pub fn queue(&self) -> Arc<Queue<ObjectKey>> {
        self.queue.clone()
    }

    pub async fn reconcile(&self, key: ObjectKey) -> Result<Action> {
        let Some(csr) = self.csrs.get(&key) else {
            return Ok(Action::AwaitChange);
        };
        let client = self.clients.cluster(&key.cluster)?;
        let api: Api<CertificateSigningRequest> = Api::all(client.clone());
        let has_cert = csr
            .status
            .as_ref()
            .and_then(|s| s.certificate.as_ref())
            .is_some_and(|c| !c.0.is_empty());
        if condition(&csr, "Failed") || condition(&csr, "Denied") || has_cert {
            return Ok(Action::AwaitChange);
        }
        if !condition(&csr, "Approved") {
            if not_node_serving(&csr).is_none() {
                return self.approve_serving(&client, &api, &key.name, &csr).await;
            }
            self.approve(&client, &api, &key.name, &csr).await?;
            return Ok(Action::AwaitChange);
        }
        self.sign(&key, &api, &csr).await
    }

    async fn allowed(
        &self,
        client: &kube::Client,
        csr: &CertificateSigningRequest,
        subresource: &str,
    ) -> Result<bool> {
        let spec = &csr.spec;
        let sar = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: spec.username.clone(),
                uid: spec.uid.clone(),
                groups: spec.groups.clone(),
                extra: spec.extra.clone(),
                resource_attributes: Some(ResourceAttributes {
                    group: Some("certificates.k8s.io".into()),
                    resource: Some("certificatesigningrequests".into()),
                    subresource: Some(subresource.into()),
                    verb: Some("create".into()),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let reviews: Api<SubjectAccessReview> = Api::all(client.clone());
        let answer = reviews.create(&PostParams::default(), &sar).await?;
        Ok(answer.status.is_some_and(|s| s.allowed))
    }

    async fn approve(
        &self,
        client: &kube::Client,
        api: &Api<CertificateSigningRequest>,
        name: &str,
        csr: &CertificateSigningRequest,
    ) -> Result<()> {
        if not_node_client(csr).is_some() {
            return Ok(());
        }
        let pem = String::from_utf8_lossy(&csr.spec.request.0).to_string();
        let cn = pki::csr::parse_csr(&pem)
            .map(|i| i.common_name)
            .unwrap_or_default();
        let own = csr.spec.username.as_deref() == Some(cn.as_str());
        let ok = (own && self.allowed(client, csr, "selfnodeclient").await?)
            || self.allowed(client, csr, "nodeclient").await?;
        if !ok {
            return Ok(());
        }
        auto_approve(
            api,
            name,
            "Auto approving kubelet client certificate after SubjectAccessReview.",
        )
        .await
    }

    /// Approves a node's serving request whose names are all its Node's addresses (what
    /// kube-controller-manager leaves to an external approver; Matryoshka's nodes ask for
    /// serving certificates, so it checks them as such an approver does).
    async fn approve_serving(
        &self,
        client: &kube::Client,
        api: &Api<CertificateSigningRequest>,
        name: &str,
        csr: &CertificateSigningRequest,
    ) -> Result<Action> {
        let pem = String::from_utf8_lossy(&csr.spec.request.0).to_string();
        let Ok(info) = pki::csr::parse_csr(&pem) else {
            return Ok(Action::AwaitChange);
        };
        let node_name = info
            .common_name
            .strip_prefix("system:node:")
            .unwrap_or_default();
        let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
        let node = nodes.get_opt(node_name).await?;
        if !node.is_some_and(|n| names_are_nodes(&info, &n)) {
            // A kubelet asks as it starts, before its Node reports its addresses: looked at
            // again for a while, then left to a human.
            let age = csr
                .metadata
                .creation_timestamp
                .as_ref()
                .map(|t| jiff::Timestamp::now().duration_since(t.0).as_secs())
                .unwrap_or(0);
            return Ok(if age < SERVING_RECHECK_FOR.as_secs() as i64 {
                Action::RequeueAfter(Duration::from_secs(2))
            } else {
                Action::AwaitChange
            });
        }
        auto_approve(
            api,
            name,
            "Auto approving kubelet serving certificate: every name it asks for is one of the Node's addresses.",
        )
        .await?;
        Ok(Action::AwaitChange)
    }

    /// The CA of a cluster.
    async fn ca(&self, cluster: &str) -> Result<Option<pki::Ca>> {
        if cluster == ROOT {
            return Ok(self.root_signer.as_ref().map(|(c, k)| pki::Ca {
                pair: pki::CertPair {
                    cert_pem: c.clone(),
                    key_pem: k.clone(),
                },
            }));
        }
        let secrets: Api<Secret> =
            Api::namespaced(self.clients.cluster(ROOT)?, "matryoshka-system");
        let Some(s) = secrets.get_opt(&format!("{cluster}-pki")).await? else {
            return Ok(None);
        };
        let data = s.data.unwrap_or_default();
        let field = |k: &str| {
            data.get(k)
                .map(|b| String::from_utf8_lossy(&b.0).to_string())
        };
        Ok(match (field("ca.crt"), field("ca.key")) {
            (Some(c), Some(k)) => Some(pki::Ca {
                pair: pki::CertPair {
                    cert_pem: c,
                    key_pem: k,
                },
            }),
            _ => None,
        })
    }

    async fn sign(
        &self,
        key: &ObjectKey,
        api: &Api<CertificateSigningRequest>,
        csr: &CertificateSigningRequest,
    ) -> Result<Action> {
        let spec = &csr.spec;
        if ![KUBELET_CLIENT, CLIENT, KUBELET_SERVING].contains(&spec.signer_name.as_str()) {
            // Another signer's request.
            return Ok(Action::AwaitChange);
        }
        let Some(ca) = self.ca(&key.cluster).await? else {
            return Ok(Action::AwaitChange);
        };
        let usages = spec.usages.clone().unwrap_or_default();
        let Some(usages) = granted(&spec.signer_name, &usages) else {
            let patch = failed(
                csr,
                format!(
                    "invalid usage for signer {:?}: {usages:?}",
                    spec.signer_name
                ),
            );
            api.patch_status(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            return Ok(Action::AwaitChange);
        };
        let pem = String::from_utf8_lossy(&spec.request.0).to_string();
        if spec.signer_name == KUBELET_CLIENT
            && let Some(why) = not_node_client(csr)
        {
            let patch = failed(csr, why);
            api.patch_status(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            return Ok(Action::AwaitChange);
        }
        let duration = spec
            .expiration_seconds
            .map(|s| Duration::from_secs(u64::try_from(s.max(600)).unwrap_or(600)))
            .unwrap_or(self.max_duration)
            .min(self.max_duration);
        let cert = match ca.sign_csr(&pem, duration, &usages) {
            Ok(c) => c,
            Err(e) => {
                let patch = failed(csr, format!("signing failed: {e}"));
                api.patch_status(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await?;
                return Ok(Action::AwaitChange);
            }
        };
        let b64 = base64::engine::general_purpose::STANDARD.encode(cert.as_bytes());
        let patch = serde_json::json!({"status": {"certificate": b64}});
        api.patch_status(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        Ok(Action::AwaitChange)
    }
}
