//! Tenant objects as the host runs them (vcluster's pod, Service, ConfigMap and Secret
//! translators, spec: peers.md §2.4): names and references translated, ownership recorded,
//! and what belongs to the tenant's API (its service-account tokens, its DNS, its view of the
//! pod's own name and namespace) carried over so the containers see the tenant cluster, not
//! the host.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::names;

/// Where a tenant cluster's objects go on the host.
#[derive(Debug, Clone)]
pub struct Target<'a> {
    /// The tenant cluster's name (vcluster's name: the `-x-<cluster>` suffix, the marker).
    pub cluster: &'a str,
    pub host_namespace: &'a str,
    /// The owner every host object gets (the TenantCluster), so deleting the cluster
    /// collects them.
    pub owner: Option<OwnerReference>,
}

impl Target<'_> {
    /// The host name of tenant object `namespace/name`.
    pub fn name(&self, namespace: &str, name: &str) -> String {
        names::host_name(name, namespace, self.cluster)
    }

    /// The metadata of the host copy of a tenant object.
    pub fn metadata(&self, kind: &str, tenant: &ObjectMeta) -> ObjectMeta {
        let namespace = tenant.namespace.as_deref().unwrap_or_default();
        let name = tenant.name.as_deref().unwrap_or_default();
        let host_name = self.name(namespace, name);
        ObjectMeta {
            name: Some(host_name.clone()),
            namespace: Some(self.host_namespace.to_string()),
            labels: Some(names::host_labels(
                tenant.labels.as_ref(),
                namespace,
                self.cluster,
            )),
            annotations: Some(names::host_annotations(
                tenant.annotations.as_ref(),
                kind,
                namespace,
                name,
                tenant.uid.as_deref().unwrap_or_default(),
                self.host_namespace,
                &host_name,
            )),
            owner_references: self.owner.clone().map(|o| vec![o]),
            ..ObjectMeta::default()
        }
    }
}

/// A projected service-account token of a tenant pod: minted against the tenant cluster and
/// handed to the host pod in an annotation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenSource {
    /// The host pod's annotation holding the token.
    pub annotation: String,
    pub audience: Option<String>,
    pub expiration_seconds: Option<i64>,
}

/// The annotation of the token of source `index` of projected volume `volume`.
fn token_annotation(volume: &str, index: usize) -> String {
    let digest = Sha256::digest(format!("{volume}/{index}").as_bytes());
    let hex: String = digest.iter().take(5).map(|b| format!("{b:02x}")).collect();
    format!("vcluster.loft.sh/token-{hex}")
}

/// The service-account tokens a tenant pod's projected volumes ask for.
pub fn token_sources(pod: &Pod) -> Vec<TokenSource> {
    let mut out = Vec::new();
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_ref());
    for v in volumes.into_iter().flatten() {
        let Some(p) = &v.projected else { continue };
        for (i, s) in p.sources.iter().flatten().enumerate() {
            if let Some(t) = &s.service_account_token {
                out.push(TokenSource {
                    annotation: token_annotation(&v.name, i),
                    audience: t.audience.clone().filter(|a| !a.is_empty()),
                    expiration_seconds: t.expiration_seconds,
                });
            }
        }
    }
    out
}

/// The ConfigMaps and Secrets a tenant pod uses (volumes, environment, image pull secrets).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct References {
    pub config_maps: BTreeSet<String>,
    pub secrets: BTreeSet<String>,
}

pub fn references(pod: &Pod) -> References {
    let mut r = References::default();
    let Some(spec) = &pod.spec else { return r };
    for v in spec.volumes.iter().flatten() {
        if let Some(n) = v.config_map.as_ref().map(|c| c.name.clone()) {
            r.config_maps.insert(n);
        }
        if let Some(n) = v.secret.as_ref().and_then(|s| s.secret_name.clone()) {
            r.secrets.insert(n);
        }
        for s in v.projected.iter().flat_map(|p| p.sources.iter().flatten()) {
            if let Some(c) = &s.config_map {
                r.config_maps.insert(c.name.clone());
            }
            if let Some(c) = &s.secret {
                r.secrets.insert(c.name.clone());
            }
        }
    }
    let containers = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten());
    for c in containers {
        for e in c.env.iter().flatten() {
            if let Some(f) = &e.value_from {
                if let Some(k) = &f.config_map_key_ref {
                    r.config_maps.insert(k.name.clone());
                }
                if let Some(k) = &f.secret_key_ref {
                    r.secrets.insert(k.name.clone());
                }
            }
        }
        for e in c.env_from.iter().flatten() {
            if let Some(k) = &e.config_map_ref {
                r.config_maps.insert(k.name.clone());
            }
            if let Some(k) = &e.secret_ref {
                r.secrets.insert(k.name.clone());
            }
        }
    }
    for s in spec.image_pull_secrets.iter().flatten() {
        r.secrets.insert(s.name.clone());
    }
    r.config_maps.retain(|n| !n.is_empty());
    r.secrets.retain(|n| !n.is_empty());
    r
}

/// A `fieldRef` path the host would answer with its own view, as the tenant's.
fn tenant_field(path: &str) -> Option<String> {
    let key = match path {
        "metadata.name" => names::OBJECT_NAME,
        "metadata.namespace" => names::OBJECT_NAMESPACE,
        "metadata.uid" => names::OBJECT_UID,
        _ => return None,
    };
    Some(format!("metadata.annotations['{key}']"))
}

/// Rewrites every `fieldRef.fieldPath` under `v` that names the pod itself.
fn rewrite_field_refs(v: &mut Value) {
    match v {
        Value::Object(map) => {
            if let Some(Value::Object(f)) = map.get_mut("fieldRef")
                && let Some(path) = f.get("fieldPath").and_then(Value::as_str)
                && let Some(new) = tenant_field(path)
            {
                f.insert("fieldPath".into(), json!(new));
            }
            for (_, child) in map.iter_mut() {
                rewrite_field_refs(child);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(rewrite_field_refs),
        _ => {}
    }
}

/// Translates the `name` at `pointer` of `v` (when present).
fn rename(v: &mut Value, pointer: &str, target: &Target<'_>, namespace: &str) {
    if let Some(Value::String(n)) = v.pointer_mut(pointer) {
        *n = target.name(namespace, n);
    }
}

/// The host pod of a tenant pod scheduled onto a (mirrored) node: `tokens` are the minted
/// service-account tokens by annotation, `dns` the address of the tenant cluster's DNS.
pub fn host_pod(
    tenant: &Pod,
    target: &Target<'_>,
    tokens: &BTreeMap<String, String>,
    dns: Option<IpAddr>,
    service_env: &BTreeMap<String, String>,
) -> Result<Pod, serde_json::Error> {
    let namespace = tenant.metadata.namespace.clone().unwrap_or_default();
    let name = tenant.metadata.name.clone().unwrap_or_default();
    let mut meta = target.metadata("Pod", &tenant.metadata);
    let ann = meta.annotations.get_or_insert_with(BTreeMap::new);
    for (k, t) in tokens {
        ann.insert(k.clone(), t.clone());
    }
    let mut spec = serde_json::to_value(tenant.spec.clone().unwrap_or_default())?;
    let s = spec.as_object_mut().expect("a pod spec is an object");
    // The host's own: its service accounts, scheduler, priority classes and Service links
    // are not the tenant's.
    for k in [
        "serviceAccountName",
        "serviceAccount",
        "schedulerName",
        "priorityClassName",
        "priority",
        "overhead",
        "runtimeClassName",
    ] {
        s.remove(k);
    }
    s.insert("automountServiceAccountToken".into(), json!(false));
    s.insert("enableServiceLinks".into(), json!(false));
    if !s.contains_key("hostname") {
        let short: String = name.chars().take(63).collect();
        s.insert("hostname".into(), json!(short.trim_end_matches(['-', '.'])));
    }
    // The tenant's DNS.
    let policy = s
        .get("dnsPolicy")
        .and_then(Value::as_str)
        .unwrap_or("ClusterFirst")
        .to_string();
    let host_network = s.get("hostNetwork").and_then(Value::as_bool) == Some(true);
    let cluster_dns =
        policy == "ClusterFirstWithHostNet" || (policy == "ClusterFirst" && !host_network);
    if let (true, Some(ip)) = (cluster_dns, dns) {
        let mut config = s.remove("dnsConfig").unwrap_or_else(|| json!({}));
        let mut nameservers = vec![json!(ip.to_string())];
        nameservers.extend(
            config["nameservers"]
                .as_array()
                .cloned()
                .unwrap_or_default(),
        );
        let mut searches = vec![
            json!(format!("{namespace}.svc.cluster.local")),
            json!("svc.cluster.local"),
            json!("cluster.local"),
        ];
        searches.extend(config["searches"].as_array().cloned().unwrap_or_default());
        let mut options = config["options"].as_array().cloned().unwrap_or_default();
        if !options.iter().any(|o| o["name"] == "ndots") {
            options.push(json!({"name": "ndots", "value": "5"}));
        }
        config["nameservers"] = json!(nameservers);
        config["searches"] = json!(searches);
        config["options"] = json!(options);
        s.insert("dnsPolicy".into(), json!("None"));
        s.insert("dnsConfig".into(), config);
    }
    // References to the tenant's ConfigMaps and Secrets, by their host names.
    if let Some(Value::Array(volumes)) = s.get_mut("volumes") {
        for v in volumes.iter_mut() {
            rename(v, "/configMap/name", target, &namespace);
            rename(v, "/secret/secretName", target, &namespace);
            rename(v, "/persistentVolumeClaim/claimName", target, &namespace);
            let vol_name = v["name"].as_str().unwrap_or_default().to_string();
            if let Some(Value::Array(sources)) = v.pointer_mut("/projected/sources") {
                for (i, src) in sources.iter_mut().enumerate() {
                    rename(src, "/configMap/name", target, &namespace);
                    rename(src, "/secret/name", target, &namespace);
                    if let Some(t) = src.get("serviceAccountToken").cloned() {
                        let path = t["path"].as_str().unwrap_or("token").to_string();
                        let key = token_annotation(&vol_name, i);
                        *src = json!({"downwardAPI": {"items": [{
                            "path": path,
                            "fieldRef": {"apiVersion": "v1", "fieldPath": format!("metadata.annotations['{key}']")},
                        }]}});
                    }
                }
            }
        }
    }
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        if let Some(Value::Array(cs)) = s.get_mut(list) {
            for c in cs.iter_mut() {
                with_service_env(c, service_env);
                if let Some(Value::Array(env)) = c.get_mut("env") {
                    for e in env.iter_mut() {
                        rename(e, "/valueFrom/configMapKeyRef/name", target, &namespace);
                        rename(e, "/valueFrom/secretKeyRef/name", target, &namespace);
                    }
                }
                if let Some(Value::Array(env)) = c.get_mut("envFrom") {
                    for e in env.iter_mut() {
                        rename(e, "/configMapRef/name", target, &namespace);
                        rename(e, "/secretRef/name", target, &namespace);
                    }
                }
            }
        }
    }
    if let Some(Value::Array(secrets)) = s.get_mut("imagePullSecrets") {
        for p in secrets.iter_mut() {
            rename(p, "/name", target, &namespace);
        }
    }
    rewrite_field_refs(&mut spec);
    Ok(Pod {
        metadata: meta,
        spec: Some(serde_json::from_value(spec)?),
        status: None,
    })
}

/// Puts the tenant's Service variables first in a container's `env` (so `$(VAR)` references
/// after them see them, as they see a kubelet's), leaving out those the container defines.
fn with_service_env(container: &mut Value, service_env: &BTreeMap<String, String>) {
    if service_env.is_empty() {
        return;
    }
    let Some(c) = container.as_object_mut() else {
        return;
    };
    let own: Vec<Value> = match c.remove("env") {
        Some(Value::Array(env)) => env,
        _ => Vec::new(),
    };
    let defined: std::collections::BTreeSet<&str> = own
        .iter()
        .filter_map(|e| e.get("name").and_then(Value::as_str))
        .collect();
    let mut env: Vec<Value> = service_env
        .iter()
        .filter(|(k, _)| !defined.contains(k.as_str()))
        .map(|(k, v)| json!({"name": k, "value": v}))
        .collect();
    env.extend(own);
    c.insert("env".into(), Value::Array(env));
}

/// The status the tenant pod should show: the host pod's.
pub fn tenant_pod_status(host: &Pod) -> Value {
    serde_json::to_value(host.status.clone().unwrap_or_default()).unwrap_or_else(|_| json!({}))
}

/// A merge patch turning a status with top-level keys `current` into `desired`: the keys
/// `desired` lacks are removed.
pub fn status_patch(current: &[&str], desired: &Value) -> Value {
    let mut patch = desired.clone();
    if let Some(p) = patch.as_object_mut() {
        for k in current {
            if !p.contains_key(*k) {
                p.insert((*k).to_string(), Value::Null);
            }
        }
    }
    json!({"status": patch})
}

/// The host Service of a tenant Service (its cluster IP is the host's to choose).
pub fn host_service(tenant: &Service, target: &Target<'_>) -> Service {
    let namespace = tenant.metadata.namespace.clone().unwrap_or_default();
    let mut spec = tenant.spec.clone().unwrap_or_default();
    let headless = spec.cluster_ip.as_deref() == Some("None");
    spec.cluster_ip = headless.then(|| "None".to_string());
    spec.cluster_ips = headless.then(|| vec!["None".to_string()]);
    spec.selector = spec
        .selector
        .filter(|s| !s.is_empty())
        // Narrowed to the tenant cluster and namespace (the markers every host pod carries),
        // so it never selects another cluster's pods.
        .map(|s| names::host_labels(Some(&s), &namespace, target.cluster));
    for p in spec.ports.iter_mut().flatten() {
        p.node_port = None;
    }
    spec.health_check_node_port = None;
    Service {
        metadata: target.metadata("Service", &tenant.metadata),
        spec: Some(spec),
        status: None,
    }
}

/// The fields of a host Service's spec the syncer keeps equal to the tenant's.
pub fn service_spec_fields(svc: &Service) -> Value {
    let s = svc.spec.clone().unwrap_or_default();
    json!({
        "type": s.type_.unwrap_or_else(|| "ClusterIP".into()),
        "ports": s.ports.unwrap_or_default().into_iter().map(|mut p| { p.node_port = None; p }).collect::<Vec<_>>(),
        "selector": s.selector.unwrap_or_default(),
        "sessionAffinity": s.session_affinity,
        "publishNotReadyAddresses": s.publish_not_ready_addresses,
        "externalName": s.external_name,
        "externalTrafficPolicy": s.external_traffic_policy,
        "internalTrafficPolicy": s.internal_traffic_policy,
    })
}

/// The host copy of a tenant ConfigMap.
pub fn host_config_map(tenant: &ConfigMap, target: &Target<'_>) -> ConfigMap {
    ConfigMap {
        metadata: target.metadata("ConfigMap", &tenant.metadata),
        data: tenant.data.clone(),
        binary_data: tenant.binary_data.clone(),
        immutable: None,
    }
}

/// The host copy of a tenant Secret (a service-account token Secret becomes `Opaque`: the host
/// must not treat it as one of its own).
pub fn host_secret(tenant: &Secret, target: &Target<'_>) -> Secret {
    let type_ = tenant
        .type_
        .clone()
        .filter(|t| t != "kubernetes.io/service-account-token");
    Secret {
        metadata: target.metadata("Secret", &tenant.metadata),
        data: tenant.data.clone(),
        string_data: None,
        type_: type_.or_else(|| Some("Opaque".into())),
        immutable: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> Target<'static> {
        Target {
            cluster: "demo",
            host_namespace: "demo",
            owner: None,
        }
    }

    fn pod(spec: Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "web-1", "namespace": "default", "uid": "u-1", "labels": {"app": "web"}},
            "spec": spec,
        }))
        .expect("a pod")
    }

    #[test]
    fn a_host_pod_uses_translated_references_the_tenants_dns_and_no_host_identity() {
        let p = pod(json!({
            "nodeName": "node-a",
            "serviceAccountName": "builder",
            "containers": [{"name": "c", "image": "i",
                "env": [
                    {"name": "A", "valueFrom": {"configMapKeyRef": {"name": "conf", "key": "a"}}},
                    {"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                ],
                "envFrom": [{"secretRef": {"name": "creds"}}]}],
            "volumes": [
                {"name": "kube-api-access", "projected": {"sources": [
                    {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                ]}},
                {"name": "data", "secret": {"secretName": "tls"}},
            ],
        }));
        let refs = references(&p);
        assert_eq!(
            refs.config_maps,
            ["conf", "kube-root-ca.crt"].map(String::from).into()
        );
        assert_eq!(refs.secrets, ["creds", "tls"].map(String::from).into());
        let tokens = token_sources(&p);
        assert_eq!(tokens.len(), 1);
        let minted: BTreeMap<String, String> =
            [(tokens[0].annotation.clone(), "jwt".to_string())].into();
        let host = host_pod(
            &p,
            &target(),
            &minted,
            Some("10.96.0.99".parse().unwrap()),
            &BTreeMap::new(),
        )
        .expect("translated");
        let h = serde_json::to_value(&host).unwrap();
        assert_eq!(h["metadata"]["name"], "web-1-x-default-x-demo");
        assert_eq!(h["metadata"]["namespace"], "demo");
        assert_eq!(h["metadata"]["labels"]["app"], "web");
        assert_eq!(h["metadata"]["labels"][names::MANAGED_BY], "demo");
        assert_eq!(h["metadata"]["annotations"][names::OBJECT_UID], "u-1");
        assert_eq!(
            h["metadata"]["annotations"][tokens[0].annotation.as_str()],
            "jwt"
        );
        let s = &h["spec"];
        assert_eq!(s["nodeName"], "node-a");
        assert!(s.get("serviceAccountName").is_none());
        assert_eq!(s["automountServiceAccountToken"], false);
        assert_eq!(s["enableServiceLinks"], false);
        assert_eq!(s["hostname"], "web-1");
        assert_eq!(s["dnsPolicy"], "None");
        assert_eq!(s["dnsConfig"]["nameservers"], json!(["10.96.0.99"]));
        assert_eq!(s["dnsConfig"]["searches"][0], "default.svc.cluster.local");
        let c = &s["containers"][0];
        assert_eq!(
            c["env"][0]["valueFrom"]["configMapKeyRef"]["name"],
            "conf-x-default-x-demo"
        );
        assert_eq!(
            c["env"][1]["valueFrom"]["fieldRef"]["fieldPath"],
            format!("metadata.annotations['{}']", names::OBJECT_NAMESPACE)
        );
        assert_eq!(
            c["envFrom"][0]["secretRef"]["name"],
            "creds-x-default-x-demo"
        );
        let sources = &s["volumes"][0]["projected"]["sources"];
        assert_eq!(
            sources[0]["downwardAPI"]["items"][0]["fieldRef"]["fieldPath"],
            format!("metadata.annotations['{}']", tokens[0].annotation)
        );
        assert_eq!(
            sources[1]["configMap"]["name"],
            "kube-root-ca.crt-x-default-x-demo"
        );
        assert_eq!(
            s["volumes"][1]["secret"]["secretName"],
            "tls-x-default-x-demo"
        );
    }

    #[test]
    fn the_tenants_service_variables_come_first_in_every_container_unless_it_defines_them() {
        let p = pod(json!({
            "initContainers": [{"name": "init", "image": "i"}],
            "containers": [{"name": "c", "image": "i", "env": [
                {"name": "URL", "value": "https://$(KUBERNETES_SERVICE_HOST)"},
                {"name": "WEB_SERVICE_HOST", "value": "mine"},
            ]}],
        }));
        let env: BTreeMap<String, String> = [
            ("KUBERNETES_SERVICE_HOST", "192.0.2.10"),
            ("KUBERNETES_SERVICE_PORT", "6443"),
            ("WEB_SERVICE_HOST", "10.96.3.3"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let host = host_pod(&p, &target(), &BTreeMap::new(), None, &env).expect("translated");
        let h = serde_json::to_value(&host).unwrap();
        let names = |c: &Value| -> Vec<String> {
            c["env"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| {
                    format!(
                        "{}={}",
                        e["name"].as_str().unwrap(),
                        e["value"].as_str().unwrap()
                    )
                })
                .collect()
        };
        assert_eq!(
            names(&h["spec"]["containers"][0]),
            [
                "KUBERNETES_SERVICE_HOST=192.0.2.10",
                "KUBERNETES_SERVICE_PORT=6443",
                "URL=https://$(KUBERNETES_SERVICE_HOST)",
                "WEB_SERVICE_HOST=mine",
            ]
        );
        assert_eq!(names(&h["spec"]["initContainers"][0]).len(), 3);
    }

    #[test]
    fn a_host_service_selects_only_its_tenants_pods_and_lets_the_host_pick_its_ip() {
        let svc: Service = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "default", "uid": "s-1"},
            "spec": {"clusterIP": "10.96.7.7", "selector": {"app": "web"},
                "ports": [{"port": 80, "targetPort": 8080, "nodePort": 30080}], "type": "NodePort"},
        }))
        .unwrap();
        let host = host_service(&svc, &target());
        let s = host.spec.expect("spec");
        assert_eq!(s.cluster_ip, None);
        let sel = s.selector.expect("selector");
        assert_eq!(sel["app"], "web");
        assert_eq!(sel[names::MANAGED_BY], "demo");
        assert_eq!(sel[names::NAMESPACE], "default");
        assert_eq!(s.ports.expect("ports")[0].node_port, None);
    }

    #[test]
    fn a_status_patch_removes_what_the_host_no_longer_reports() {
        let want = json!({"phase": "Running"});
        assert_eq!(
            status_patch(&["phase", "message"], &want),
            json!({"status": {"phase": "Running", "message": null}})
        );
    }
}
