//! A TenantCluster's `spec.oidc` (the seed's OIDC for tenant clusters, console-oidc.md B7):
//!
//! - `mode: CustomConfig` — the `AuthenticationConfiguration` given inline (`customConfig.config`)
//!   or in a Secret of the TenantCluster's namespace (`customConfig.secretRef {name, key}`, key
//!   default `config.yaml`, YAML or JSON) becomes the LogicalCluster's `spec.authentication`;
//! - `mode: System` — the platform's own identity provider (`matryoshka up --oidc-issuer-url`)
//!   with the audience `<namespace>-<release>`, usernames from `email` and groups from `groups`,
//!   both without prefix, only for members of the tenant's groups (`<namespace>-view`, `-use`,
//!   `-admin`, `-super-admin`), as the seed renders it; and the Secret
//!   `<release>-oidc-kubeconfig` (key `kubeconfig`) whose user runs kubelogin
//!   (`kubectl oidc-login get-token`);
//! - `users[{email, role}]` — one ClusterRoleBinding per user in the tenant cluster,
//!   `matryoshka-oidc-<16 hex of sha256("<release>-<email>")>`, to `cluster-admin` (admin) or
//!   `view`, labelled so the ones no longer listed are removed.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::Api;
use kube::api::{DeleteParams, ListParams};
use serde_json::{Value, json};
use sha2::Digest as _;

use runtime::error::{Error, Result, ignore_not_found};

/// The platform's identity provider, for `mode: System`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemIssuer {
    pub url: String,
    /// The CA of its serving certificate (PEM), if it is not publicly trusted.
    pub certificate_authority: Option<String>,
}

pub const MANAGED_BY: &str = "matryoshka-oidc";

/// The mode of a spec (`None` when unset).
pub fn mode(spec: &Value) -> &str {
    spec.pointer("/oidc/mode")
        .and_then(Value::as_str)
        .unwrap_or("None")
}

/// The audience (client ID) of a System-mode cluster: `<namespace>-<release>`.
pub fn client_id(namespace: &str, release: &str) -> String {
    format!("{namespace}-{release}")
}

/// The `AuthenticationConfiguration` System mode gives a cluster.
pub fn system_config(issuer: &SystemIssuer, namespace: &str, release: &str) -> Value {
    let mut iss = json!({"url": issuer.url, "audiences": [client_id(namespace, release)]});
    if let Some(ca) = &issuer.certificate_authority {
        iss["certificateAuthority"] = json!(ca);
    }
    let groups: Vec<String> = ["view", "use", "admin", "super-admin"]
        .iter()
        .map(|r| format!("{namespace}-{r}"))
        .collect();
    let list = groups
        .iter()
        .map(|g| format!("{g:?}"))
        .collect::<Vec<_>>()
        .join(",");
    json!({
        "apiVersion": "apiserver.config.k8s.io/v1beta1",
        "kind": "AuthenticationConfiguration",
        "jwt": [{
            "issuer": iss,
            // Only members of the tenant's groups reach the cluster at all (not even
            // `system:authenticated` discovery), as the seed's gate.
            "claimValidationRules": [{
                "expression": format!("has(claims.groups) && claims.groups.exists(g, g in [{list}])"),
                "message": format!("user is not a member of any {namespace}-{{view,use,admin,super-admin}} group"),
            }],
            "claimMappings": {
                "username": {"claim": "email", "prefix": ""},
                "groups": {"claim": "groups", "prefix": ""},
            },
        }],
    })
}

/// The LogicalCluster's `spec.authentication` for a TenantCluster spec (None: no OIDC).
pub async fn desired(
    root: &kube::Client,
    namespace: &str,
    release: &str,
    spec: &Value,
    system: Option<&SystemIssuer>,
) -> Result<Option<Value>> {
    match mode(spec) {
        "CustomConfig" => {
            let custom = spec.pointer("/oidc/customConfig").cloned().unwrap_or_default();
            if let Some(c) = custom.get("config").filter(|c| c.is_object()) {
                return Ok(Some(c.clone()));
            }
            let Some(r) = custom.get("secretRef") else {
                return Err(Error::Config(
                    "oidc.customConfig needs config or secretRef".into(),
                ));
            };
            let name = r.get("name").and_then(Value::as_str).unwrap_or("");
            let key = r.get("key").and_then(Value::as_str).unwrap_or("config.yaml");
            let secrets: Api<Secret> = Api::namespaced(root.clone(), namespace);
            let secret = ignore_not_found(secrets.get(name).await)?.ok_or_else(|| {
                Error::Config(format!("oidc.customConfig.secretRef: Secret {namespace}/{name} not found"))
            })?;
            let text = secret
                .data
                .as_ref()
                .and_then(|d| d.get(key))
                .map(|b| String::from_utf8_lossy(&b.0).into_owned())
                .ok_or_else(|| {
                    Error::Config(format!("oidc.customConfig.secretRef: Secret {name} has no key {key}"))
                })?;
            let doc: Value = serde_saphyr::from_str(&text)
                .map_err(|e| Error::Config(format!("oidc.customConfig.secretRef {name}/{key}: {e}")))?;
            apimachinery::authn_config::parse_authentication_config(&doc)
                .map_err(|e| Error::Config(format!("oidc.customConfig.secretRef {name}/{key}: {e}")))?;
            Ok(Some(doc))
        }
        "System" => match system {
            Some(issuer) => Ok(Some(system_config(issuer, namespace, release))),
            None => Err(Error::Config(
                "oidc.mode System needs the platform's identity provider (matryoshka up --oidc-issuer-url)".into(),
            )),
        },
        _ => Ok(None),
    }
}

/// The name of a user's ClusterRoleBinding.
pub fn binding_name(release: &str, email: &str) -> String {
    let d = sha2::Sha256::digest(format!("{release}-{email}").as_bytes());
    let hex: String = d.iter().map(|b| format!("{b:02x}")).collect();
    format!("matryoshka-oidc-{}", &hex[..16])
}

/// The ClusterRoleBindings of `spec.oidc.users` in the tenant cluster; the labelled ones no
/// longer listed are removed (all of them when OIDC is off).
pub async fn ensure_users(tenant: &kube::Client, release: &str, spec: &Value) -> Result<()> {
    let users: Vec<(String, String)> = if mode(spec) == "None" {
        Vec::new()
    } else {
        spec.pointer("/oidc/users")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|u| {
                Some((
                    u.get("email")?.as_str()?.to_string(),
                    u.get("role")
                        .and_then(Value::as_str)
                        .unwrap_or("view")
                        .to_string(),
                ))
            })
            .collect()
    };
    let mut wanted = BTreeSet::new();
    for (email, role) in &users {
        let name = binding_name(release, email);
        let role = if role == "admin" {
            "cluster-admin"
        } else {
            "view"
        };
        crate::install::apply(
            tenant,
            &json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": name, "labels": {
                    "app.kubernetes.io/managed-by": MANAGED_BY,
                    "app.kubernetes.io/instance": release,
                }},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": email}],
            }),
        )
        .await?;
        wanted.insert(name);
    }
    let api: Api<ClusterRoleBinding> = Api::all(tenant.clone());
    let have = api
        .list(&ListParams::default().labels(&format!("app.kubernetes.io/managed-by={MANAGED_BY}")))
        .await?;
    for b in have.items {
        let name = b.metadata.name.unwrap_or_default();
        if !wanted.contains(&name) {
            ignore_not_found(api.delete(&name, &DeleteParams::default()).await)?;
        }
    }
    Ok(())
}

/// The kubeconfig of a System-mode cluster's OIDC users: the cluster's URL and serving CA,
/// and kubelogin as the credential plugin.
pub fn kubeconfig(
    release: &str,
    url: &str,
    serving_ca: &str,
    issuer: &str,
    client_id: &str,
) -> String {
    use base64::Engine as _;
    let ca = base64::engine::general_purpose::STANDARD.encode(serving_ca);
    let user = format!("{release}-oidc");
    json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": release, "cluster": {"server": url, "certificate-authority-data": ca}}],
        "users": [{"name": user, "user": {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": "kubectl",
            "args": [
                "oidc-login", "get-token",
                format!("--oidc-issuer-url={issuer}"),
                format!("--oidc-client-id={client_id}"),
                "--oidc-extra-scope=email",
                "--oidc-extra-scope=groups",
            ],
            "interactiveMode": "IfAvailable",
            "provideClusterInfo": true,
        }}}],
        "contexts": [{"name": release, "context": {"cluster": release, "user": user}}],
        "current-context": release,
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_mode_names_the_audience_after_the_tenant_and_release() {
        let c = system_config(
            &SystemIssuer {
                url: "https://idp.example/realms/cozy".into(),
                certificate_authority: None,
            },
            "tenant-foo",
            "kubernetes-x",
        );
        let parsed = apimachinery::authn_config::parse_authentication_config(&c).unwrap();
        assert_eq!(parsed[0].audiences, ["tenant-foo-kubernetes-x"]);
        assert_eq!(parsed[0].username.claim, "email");
        assert_eq!(parsed[0].username.prefix, "");
    }

    #[test]
    fn a_users_binding_name_is_stable_and_sixteen_hex_digits() {
        let a = binding_name("kubernetes-x", "jane@example.com");
        assert_eq!(a, binding_name("kubernetes-x", "jane@example.com"));
        assert_ne!(a, binding_name("kubernetes-y", "jane@example.com"));
        assert_eq!(a.len(), "matryoshka-oidc-".len() + 16);
    }

    #[test]
    fn the_oidc_kubeconfig_runs_kubelogin_with_the_clusters_client_id() {
        let k: Value = serde_json::from_str(&kubeconfig(
            "kubernetes-x",
            "https://kubernetes-x.foo.example:443",
            "CA",
            "https://idp",
            "tenant-foo-kubernetes-x",
        ))
        .unwrap();
        let exec = &k["users"][0]["user"]["exec"];
        assert_eq!(exec["interactiveMode"], "IfAvailable");
        assert!(
            exec["args"]
                .as_array()
                .unwrap()
                .contains(&json!("--oidc-client-id=tenant-foo-kubernetes-x"))
        );
    }
}
