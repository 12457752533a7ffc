//! A TenantCluster's workers as Cluster API objects, rendered as the seed's chart renders them
//! (spec: cozystack.md §1.2, §1.7, §2.2, §2.4, §3.4), in the tenant namespace of the root
//! cluster: a `Cluster` `kubernetes-<name>` naming the logical cluster it serves (the machine
//! controllers' workload cluster), a bootstrap data Secret, and per node group a
//! `MatryoshkaMachineTemplate` `kubernetes-<name>-<group>-<hash6>` (the hash of its rendered
//! spec: any change makes a new template and rolls the group), a `MachineDeployment`
//! `kubernetes-<name>-<group>` with the autoscaler's annotations and a `MachineHealthCheck`.
//!
//! Deviation from the chart: the rollout surges one machine at a time with none unavailable
//! (the chart surges `maxReplicas` with one unavailable), so a changed group is replaced one
//! machine after another while its workloads keep running.

use std::collections::BTreeMap;

use base64::Engine;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use machines::names as capi;
use machines::resource::{
    CAPI_API_VERSION, Cluster, INFRA_API_VERSION, INFRA_GROUP, MachineDeployment,
    MachineHealthCheck, MachineSet, MatryoshkaMachineTemplate,
};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use runtime::error::{Result, ignore_not_found};

use crate::install::FIELD_MANAGER;
use crate::spec;

/// What the workers of a TenantCluster amount to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    pub desired: i64,
    pub ready: i64,
}

/// Where the cluster is and what to render.
pub struct Workers<'a> {
    pub namespace: &'a str,
    /// `kubernetes-<name>`.
    pub release: &'a str,
    pub logical_cluster: &'a str,
    /// The Kubernetes release machines run (`v1.35.6`).
    pub version: &'a str,
    pub url: &'a str,
    pub serving_ca: &'a str,
    pub spec: &'a Value,
    pub owner: OwnerReference,
    /// The machine provider when the spec names none (`spec.workers.provider`).
    pub default_provider: &'a str,
}

/// Seconds of a Go duration (`20m`), if it reads.
fn seconds(text: Option<&str>) -> Option<i64> {
    text.and_then(apimachinery::time::parse_go_duration)
        .map(|n| n / 1_000_000_000)
}

/// The infrastructure spec of a group's machines, from `provider`.
pub fn machine_spec(group: &Value, provider: &str) -> Value {
    let mut s = json!({
        "provider": provider,
        "instanceType": group.get("instanceType").and_then(Value::as_str).unwrap_or("u1.medium"),
        "diskSize": group.get("diskSize").cloned().unwrap_or(json!("20Gi")),
    });
    for k in ["resources", "gpus", "kubelet", "roles"] {
        if let Some(v) = group.get(k).filter(|v| !v.is_null()) {
            s[k] = v.clone();
        }
    }
    s
}

/// The first six hex digits of the SHA-256 of a rendered template spec.
pub fn template_hash(spec: &Value) -> String {
    let digest = Sha256::digest(spec.to_string().as_bytes());
    digest.iter().take(3).map(|b| format!("{b:02x}")).collect()
}

/// A group's spec by name, with the chart's default group when none is given.
pub fn groups(spec: &Value) -> BTreeMap<String, Value> {
    match spec.get("nodeGroups").and_then(Value::as_object) {
        Some(g) if !g.is_empty() => g.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        _ => BTreeMap::from([(
            spec::DEFAULT_GROUP.to_string(),
            json!({"minReplicas": 0, "maxReplicas": 10, "instanceType": "u1.medium", "diskSize": "20Gi", "roles": ["ingress-nginx"]}),
        )]),
    }
}

async fn apply<K>(api: &Api<K>, name: &str, obj: &Value) -> Result<K>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    Ok(api
        .patch(
            name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(obj),
        )
        .await?)
}

impl Workers<'_> {
    fn labels(&self) -> Value {
        json!({capi::CLUSTER_NAME_LABEL: self.release})
    }

    fn kubeconfig(&self) -> String {
        let ca = base64::engine::general_purpose::STANDARD.encode(self.serving_ca.as_bytes());
        let mut cluster = json!({"server": self.url});
        if !self.serving_ca.is_empty() {
            cluster["certificate-authority-data"] = json!(ca);
        }
        json!({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": self.release, "cluster": cluster}],
            "contexts": [{"name": self.release, "context": {"cluster": self.release}}],
            "current-context": self.release,
        })
        .to_string()
    }

    /// Brings the Cluster API objects to what the spec asks for; answers the workers' counts.
    pub async fn ensure(&self, root: &kube::Client) -> Result<Counts> {
        let ns = self.namespace;
        let clusters: Api<Cluster> = Api::namespaced(root.clone(), ns);
        let endpoint = self.url.parse::<http::Uri>().ok();
        let host = endpoint
            .as_ref()
            .and_then(|u| u.host())
            .unwrap_or("")
            .to_string();
        let port = endpoint.as_ref().and_then(|u| u.port_u16()).unwrap_or(443);
        let cluster = apply(
            &clusters,
            self.release,
            &json!({
                "apiVersion": CAPI_API_VERSION, "kind": "Cluster",
                "metadata": {
                    "name": self.release, "namespace": ns, "labels": self.labels(),
                    "annotations": {capi::LOGICAL_CLUSTER_ANNOTATION: self.logical_cluster},
                    "ownerReferences": [self.owner],
                },
                "spec": {"controlPlaneEndpoint": {"host": host, "port": port}},
            }),
        )
        .await?;
        let cluster_owner = json!({
            "apiVersion": CAPI_API_VERSION, "kind": "Cluster", "name": self.release,
            "uid": cluster.metadata.uid, "controller": true, "blockOwnerDeletion": true,
        });
        let bootstrap = format!("{}-bootstrap", self.release);
        let b64 = base64::engine::general_purpose::STANDARD;
        let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(root.clone(), ns);
        apply(&secrets, &bootstrap, &json!({
            "apiVersion": "v1", "kind": "Secret", "type": "cluster.x-k8s.io/secret",
            "metadata": {"name": bootstrap, "namespace": ns, "labels": self.labels(), "ownerReferences": [cluster_owner]},
            "data": {"value": b64.encode(self.kubeconfig()), "format": b64.encode("kubeconfig")},
        }))
        .await?;
        let templates: Api<MatryoshkaMachineTemplate> = Api::namespaced(root.clone(), ns);
        let mds: Api<MachineDeployment> = Api::namespaced(root.clone(), ns);
        let mhcs: Api<MachineHealthCheck> = Api::namespaced(root.clone(), ns);
        let hc = self
            .spec
            .get("nodeHealthCheck")
            .cloned()
            .unwrap_or(json!({}));
        let provision_time = self
            .spec
            .get("maxNodeProvisionTime")
            .and_then(Value::as_str)
            .unwrap_or("30m");
        let mut wanted = Vec::new();
        let mut current_templates = Vec::new();
        let provider = self
            .spec
            .pointer("/workers/provider")
            .and_then(Value::as_str)
            .unwrap_or(self.default_provider);
        for (group, g) in groups(self.spec) {
            let name = format!("{}-{group}", self.release);
            wanted.push(name.clone());
            let mspec = machine_spec(&g, provider);
            let tname = format!("{name}-{}", template_hash(&mspec));
            current_templates.push(tname.clone());
            let capacity = node::sizing::resolve(
                &spec::sizing_input(&g),
                &apimachinery::field::Path::new("sizing"),
            )
            .map(|s| s.capacity_annotations())
            .unwrap_or_default();
            let status_capacity: BTreeMap<String, String> = capacity
                .iter()
                .map(|(k, v)| (k.rsplit('/').next().unwrap_or(k).to_string(), v.clone()))
                .collect();
            let t = apply(&templates, &tname, &json!({
                "apiVersion": INFRA_API_VERSION, "kind": "MatryoshkaMachineTemplate",
                "metadata": {"name": tname, "namespace": ns, "labels": self.labels(), "ownerReferences": [cluster_owner]},
                "spec": {"template": {"spec": mspec}},
            }))
            .await?;
            if t.status.as_ref().and_then(|s| s.get("capacity")) != Some(&json!(status_capacity)) {
                templates
                    .patch_status(
                        &tname,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"status": {
                            "capacity": status_capacity,
                            "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux"},
                        }})),
                    )
                    .await?;
            }
            let min = g
                .get("minReplicas")
                .and_then(Value::as_i64)
                .unwrap_or(0)
                .max(0);
            let max = g
                .get("maxReplicas")
                .and_then(Value::as_i64)
                .unwrap_or(10)
                .max(min);
            let mut annotations = json!({
                capi::AUTOSCALER_MIN_ANNOTATION: min.to_string(),
                capi::AUTOSCALER_MAX_ANNOTATION: max.to_string(),
                capi::MAX_NODE_PROVISION_TIME_ANNOTATION: provision_time,
            });
            for (k, v) in &capacity {
                annotations[k] = json!(v);
            }
            let mut tlabels =
                json!({capi::CLUSTER_NAME_LABEL: self.release, capi::DEPLOYMENT_NAME_LABEL: name});
            for r in g
                .get("roles")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                tlabels[format!("node-role.kubernetes.io/{r}")] = json!("");
            }
            // `spec.replicas` is not the platform's: the machine controllers default it to the
            // minimum (upstream's webhook) and the autoscaler or a user moves it; the platform
            // only brings it back within [min, max], without overwriting a concurrent change.
            let md = apply(&mds, &name, &json!({
                "apiVersion": CAPI_API_VERSION, "kind": "MachineDeployment",
                "metadata": {"name": name, "namespace": ns, "labels": self.labels(), "annotations": annotations, "ownerReferences": [cluster_owner]},
                "spec": {
                    "clusterName": self.release,
                    "selector": {"matchLabels": {capi::CLUSTER_NAME_LABEL: self.release, capi::DEPLOYMENT_NAME_LABEL: name}},
                    "rollout": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}},
                    "template": {
                        "metadata": {"labels": tlabels},
                        "spec": {
                            "clusterName": self.release,
                            "version": self.version,
                            "bootstrap": {"dataSecretName": bootstrap},
                            "infrastructureRef": {"apiGroup": INFRA_GROUP, "kind": "MatryoshkaMachineTemplate", "name": tname},
                        },
                    },
                },
            }))
            .await?;
            if let Some(r) = md.spec.get("replicas").and_then(Value::as_i64)
                && (r < min || r > max)
            {
                let patch = json!({
                    "metadata": {"resourceVersion": md.metadata.resource_version},
                    "spec": {"replicas": r.clamp(min, max)},
                });
                mds.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await?;
            }
            let startup = seconds(g.get("nodeStartupTimeout").and_then(Value::as_str))
                .or_else(|| seconds(hc.get("nodeStartupTimeout").and_then(Value::as_str)))
                .unwrap_or(1200);
            let max_unhealthy = g
                .get("maxUnhealthy")
                .or_else(|| hc.get("maxUnhealthy"))
                .cloned()
                .unwrap_or(json!("50%"));
            apply(&mhcs, &name, &json!({
                "apiVersion": CAPI_API_VERSION, "kind": "MachineHealthCheck",
                "metadata": {"name": name, "namespace": ns, "labels": self.labels(), "ownerReferences": [cluster_owner]},
                "spec": {
                    "clusterName": self.release,
                    "selector": {"matchLabels": {capi::CLUSTER_NAME_LABEL: self.release, capi::DEPLOYMENT_NAME_LABEL: name}},
                    "checks": {
                        "nodeStartupTimeoutSeconds": startup,
                        "unhealthyNodeConditions": [
                            {"type": "Ready", "status": "Unknown", "timeoutSeconds": seconds(hc.get("readyUnknownTimeout").and_then(Value::as_str)).unwrap_or(300)},
                            {"type": "Ready", "status": "False", "timeoutSeconds": seconds(hc.get("readyFalseTimeout").and_then(Value::as_str)).unwrap_or(600)},
                        ],
                    },
                    "remediation": {"triggerIf": {"unhealthyLessThanOrEqualTo": max_unhealthy}},
                },
            }))
            .await?;
        }
        // Groups that are gone, and templates no MachineSet uses any more.
        let selector =
            ListParams::default().labels(&format!("{}={}", capi::CLUSTER_NAME_LABEL, self.release));
        let mut counts = Counts::default();
        for d in mds.list(&selector).await?.items {
            let name = d.metadata.name.clone().unwrap_or_default();
            if !wanted.contains(&name) {
                ignore_not_found(mds.delete(&name, &DeleteParams::default()).await)?;
                ignore_not_found(mhcs.delete(&name, &DeleteParams::default()).await)?;
                continue;
            }
            // Before the machine controllers default it, replicas is the group's minimum.
            let min = d
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(capi::AUTOSCALER_MIN_ANNOTATION))
                .and_then(|m| m.parse::<i64>().ok())
                .unwrap_or(1);
            counts.desired += d
                .spec
                .get("replicas")
                .and_then(Value::as_i64)
                .unwrap_or(min);
            counts.ready += d
                .status_field("/readyReplicas")
                .and_then(Value::as_i64)
                .unwrap_or(0);
        }
        let sets: Api<MachineSet> = Api::namespaced(root.clone(), ns);
        let used: Vec<String> = sets
            .list(&selector)
            .await?
            .items
            .iter()
            .filter_map(|s| {
                s.spec
                    .pointer("/template/spec/infrastructureRef/name")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .collect();
        for t in templates.list(&selector).await?.items {
            let name = t.metadata.name.clone().unwrap_or_default();
            if !current_templates.contains(&name) && !used.contains(&name) {
                ignore_not_found(templates.delete(&name, &DeleteParams::default()).await)?;
            }
        }
        Ok(counts)
    }
}

/// Deletes the cluster's Cluster (the machine controllers delete its machines first); answers
/// whether it is gone.
pub async fn delete(root: &kube::Client, namespace: &str, release: &str) -> Result<bool> {
    let clusters: Api<Cluster> = Api::namespaced(root.clone(), namespace);
    match clusters.get_opt(release).await {
        Ok(None) => Ok(true),
        Ok(Some(c)) => {
            if c.metadata.deletion_timestamp.is_none() {
                ignore_not_found(clusters.delete(release, &DeleteParams::default()).await)?;
            }
            Ok(false)
        }
        // Cluster API is not installed: there is nothing to delete.
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(true),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_group_renders_a_template_of_another_name() {
        let a = machine_spec(&json!({"instanceType": "u1.medium"}), "virtual");
        let b = machine_spec(&json!({"instanceType": "u1.large"}), "virtual");
        assert_eq!(template_hash(&a).len(), 6);
        assert_ne!(template_hash(&a), template_hash(&b));
        assert_eq!(
            template_hash(&a),
            template_hash(&machine_spec(
                &json!({"instanceType": "u1.medium"}),
                "virtual"
            ))
        );
    }

    #[test]
    fn an_empty_group_map_renders_the_charts_md0() {
        let g = groups(&json!({}));
        assert_eq!(g.keys().collect::<Vec<_>>(), ["md0"]);
        assert_eq!(g["md0"]["minReplicas"], 0);
        assert_eq!(g["md0"]["roles"], json!(["ingress-nginx"]));
    }
}
