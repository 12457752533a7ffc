//! The TenantCluster's Secret `kubernetes-<name>-admin-kubeconfig` (spec: cozystack.md §2.8)
//! with the seed's four keys: `admin.conf` (user `kubernetes-admin`, cluster-admin through the
//! binding of group `kubeadm:cluster-admins`, as kubeadm does), `super-admin.conf`
//! (`system:masters`), and `admin.svc` / `super-admin.svc` (the same credentials, server the
//! in-cluster service name `kubernetes-<name>.<namespace>.svc`).
//!
//! Certificates are re-issued once two thirds of their lifetime have passed (the controller
//! comes back then), so a reader of the Secret always has a third of it to pick them up, and
//! when the cluster's CA is no longer the one that issued them (a CA rotation, which
//! touches the LogicalCluster, so the controller looks).
//!
//! Client certificates are issued with the logical cluster's own CA, read through the API from
//! the root cluster's `matryoshka-system/<cluster>-pki` Secret, the same CA the API server
//! trusts for that cluster's clients; clients verify the server with the serving CA the
//! LogicalCluster publishes in `status.caBundle`.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use pki::{Ca, CertPair, kubeconfig};
use serde_json::json;

use runtime::error::{Error, Result};

use crate::install::apply;
use crate::naming;

/// The group bound to `cluster-admin` inside every tenant cluster.
pub const ADMINS_GROUP: &str = "kubeadm:cluster-admins";
/// The in-cluster port of a tenant cluster's API server.
pub const SERVICE_PORT: u16 = 6443;
/// Where the API server keeps clusters' CAs.
const SYSTEM_NAMESPACE: &str = "matryoshka-system";

/// What the Secret is made for.
pub struct Target<'a> {
    /// The TenantCluster's namespace and name.
    pub namespace: &'a str,
    pub name: &'a str,
    /// The logical cluster serving it, its URL and the serving CA (PEM).
    pub logical_cluster: &'a str,
    pub url: &'a str,
    pub serving_ca: &'a str,
    /// The TenantCluster, as the Secret's owner.
    pub owner: OwnerReference,
}

fn decoded(s: &Secret, key: &str) -> Option<String> {
    s.data
        .as_ref()
        .and_then(|d| d.get(key))
        .and_then(|b| String::from_utf8(b.0.clone()).ok())
}

/// The in-cluster server URL of a tenant cluster (`https://kubernetes-<name>.<ns>.svc:6443`,
/// with the logical cluster's path, which is how the one API server tells clusters apart).
pub fn service_url(t: &Target<'_>) -> String {
    let path = t.url.find("/clusters/").map(|i| &t.url[i..]).unwrap_or("");
    format!(
        "https://{}.{}.svc:{SERVICE_PORT}{path}",
        naming::release(t.name),
        t.namespace
    )
}

fn issue(ca: &Ca, user: &str, group: &str, validity: Duration) -> Result<CertPair> {
    ca.issue_client_for(user, &[group], validity)
        .map_err(|e| Error::Retry(format!("issuing a client certificate for {user}: {e}")))
}

/// The four kubeconfigs of a target, by key, with client certificates valid for `validity`.
pub fn render(t: &Target<'_>, ca: &Ca, validity: Duration) -> Result<BTreeMap<String, String>> {
    let cluster = naming::release(t.name);
    let admin = issue(ca, "kubernetes-admin", ADMINS_GROUP, validity)?;
    let super_admin = issue(ca, "kubernetes-super-admin", "system:masters", validity)?;
    let svc = service_url(t);
    let mut out = BTreeMap::new();
    for (key, server, user, pair) in [
        ("admin.conf", t.url, "kubernetes-admin", &admin),
        (
            "super-admin.conf",
            t.url,
            "kubernetes-super-admin",
            &super_admin,
        ),
        ("admin.svc", svc.as_str(), "kubernetes-admin", &admin),
        (
            "super-admin.svc",
            svc.as_str(),
            "kubernetes-super-admin",
            &super_admin,
        ),
    ] {
        out.insert(
            key.to_string(),
            kubeconfig(&cluster, server, t.serving_ca, user, pair),
        );
    }
    Ok(out)
}

/// When a kubeconfig Secret's certificates are due for renewal (`None`: unreadable, so due).
fn renewal(s: &Secret) -> Option<SystemTime> {
    decoded(s, "admin.conf")
        .as_deref()
        .and_then(pki::kubeconfig_client_cert)
        .and_then(|c| pki::renewal_time(&c))
}

/// Makes sure the Secret exists and its certificates are fresh: binds the admins group in the
/// tenant cluster (through `tenant`) and writes the kubeconfigs in the root cluster (through
/// `root`). An existing Secret is kept until two thirds of its certificates' lifetime
/// (`validity`) have passed, then re-issued; the answer is when to look again.
pub async fn ensure(
    root: &kube::Client,
    tenant: &kube::Client,
    t: &Target<'_>,
    validity: Duration,
) -> Result<SystemTime> {
    let secrets: Api<Secret> = Api::namespaced(root.clone(), t.namespace);
    let name = naming::kubeconfig_secret(t.name);
    let existing = runtime::error::ignore_not_found(secrets.get(&name).await)?;
    let system: Api<Secret> = Api::namespaced(root.clone(), SYSTEM_NAMESPACE);
    let pki = system.get(&format!("{}-pki", t.logical_cluster)).await?;
    let ca = Ca {
        pair: CertPair {
            cert_pem: decoded(&pki, "ca.crt")
                .ok_or_else(|| Error::Retry("the cluster's CA has no ca.crt".into()))?,
            key_pem: decoded(&pki, "ca.key")
                .ok_or_else(|| Error::Retry("the cluster's CA has no ca.key".into()))?,
        },
    };
    // Kept while fresh and issued by the cluster's current CA (a CA rotation re-issues).
    if let Some(s) = &existing
        && let Some(at) = renewal(s)
        && at > SystemTime::now()
        && decoded(s, "admin.conf")
            .as_deref()
            .and_then(pki::kubeconfig_client_cert)
            .is_some_and(|c| pki::issued_by(&c, &ca.pair.cert_pem))
    {
        return Ok(at);
    }
    apply(
        tenant,
        &json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": ADMINS_GROUP},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": ADMINS_GROUP}],
        }),
    )
    .await?;
    let data: BTreeMap<String, ByteString> = render(t, &ca, validity)?
        .into_iter()
        .map(|(k, v)| (k, ByteString(v.into_bytes())))
        .collect();
    let mut secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(t.namespace.to_string()),
            labels: Some(
                [
                    (
                        "platform.matryoshka.dev/tenant-cluster".to_string(),
                        t.name.to_string(),
                    ),
                    (
                        "app.kubernetes.io/part-of".to_string(),
                        "matryoshka-platform".to_string(),
                    ),
                ]
                .into(),
            ),
            owner_references: Some(vec![t.owner.clone()]),
            ..Default::default()
        },
        type_: Some("Opaque".into()),
        data: Some(data),
        ..Default::default()
    };
    let next = renewal(&secret).unwrap_or_else(SystemTime::now);
    match existing {
        // Re-issued in place: the resourceVersion makes a concurrent change a conflict
        // (retried by the controller).
        Some(old) => {
            secret.metadata = old.metadata;
            secrets
                .replace(&name, &PostParams::default(), &secret)
                .await?;
            tracing::info!(
                namespace = t.namespace,
                name = t.name,
                "kubeconfig certificates re-issued"
            );
        }
        None => match secrets.create(&PostParams::default(), &secret).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(e.into()),
        },
    }
    Ok(next)
}

/// The serving CA from a LogicalCluster's `status.caBundle` (base64 PEM).
pub fn serving_ca(ca_bundle: &str) -> Option<String> {
    STANDARD
        .decode(ca_bundle)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_svc_kubeconfigs_name_the_in_cluster_service() {
        let t = Target {
            namespace: "tenant-foo",
            name: "team-x",
            logical_cluster: "tenant-foo-team-x",
            url: "https://127.0.0.1:6443/clusters/tenant-foo-team-x",
            serving_ca: "ca",
            owner: OwnerReference::default(),
        };
        assert_eq!(
            service_url(&t),
            "https://kubernetes-team-x.tenant-foo.svc:6443/clusters/tenant-foo-team-x"
        );
        let ca = Ca::generate("t").unwrap();
        let k = render(&t, &ca, pki::LEAF_VALIDITY).unwrap();
        assert_eq!(
            k.keys().collect::<Vec<_>>(),
            [
                "admin.conf",
                "admin.svc",
                "super-admin.conf",
                "super-admin.svc"
            ]
        );
        assert!(k["admin.svc"].contains("kubernetes-team-x.tenant-foo.svc"));
        assert!(k["admin.conf"].contains("server: https://127.0.0.1:6443/clusters/"));
    }
}
