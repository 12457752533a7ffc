//! The infrastructure provider's CRDs (`infrastructure.matryoshka.dev/v1alpha1`:
//! `MatryoshkaMachine`, `MatryoshkaMachineTemplate`, labelled with the Cluster API contract
//! they implement), and installing them with Cluster API's own CRDs, which the operator
//! provides as upstream publishes them (`--cluster-api-crds DIR`): they are not ours to copy.

use std::path::Path;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::wait::{await_condition, conditions};
use serde_json::{Value, json};

use runtime::error::{Error, Result};

use crate::resource::INFRA_GROUP;

/// The field manager of everything the machine controllers write.
pub const FIELD_MANAGER: &str = "matryoshka-machines";

/// The providers a machine may come from.
pub const PROVIDERS: &[&str] = &["virtual", "process"];

/// The schema of a machine's infrastructure spec (the template's `spec.template.spec`).
fn machine_spec() -> Value {
    let quantity = json!({"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]});
    json!({
        "type": "object",
        "description": "What the machine is: its provider and size.",
        "properties": {
            "provider": {"type": "string", "enum": PROVIDERS, "default": "virtual",
                "description": "Who realises the machine: `virtual` (a node of the in-process node agent, no containers)."},
            "instanceType": {"type": "string", "description": "Instance type (u1.medium, ...); ignored when resources are set."},
            "resources": {"type": "object", "properties": {"cpu": quantity, "memory": quantity}},
            "diskSize": quantity,
            "gpus": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
            "kubelet": {"type": "object", "additionalProperties": {"type": "string"}},
            "roles": {"type": "array", "items": {"type": "string"}},
            "providerID": {"type": "string", "description": "Set by the provider once the machine exists."},
        },
    })
}

fn crd(kind: &str, plural: &str, short: &str, schema: Value, columns: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": format!("{plural}.{INFRA_GROUP}"),
            "labels": {
                "cluster.x-k8s.io/v1beta2": "v1alpha1",
                "cluster.x-k8s.io/provider": "infrastructure-matryoshka",
            },
        },
        "spec": {
            "group": INFRA_GROUP,
            "names": {"kind": kind, "listKind": format!("{kind}List"), "plural": plural,
                "singular": kind.to_lowercase(), "shortNames": [short], "categories": ["cluster-api"]},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1alpha1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "additionalPrinterColumns": columns,
                "schema": {"openAPIV3Schema": schema},
            }],
        },
    })
}

/// The `MatryoshkaMachine` CRD.
pub fn machine_crd() -> Value {
    let schema = json!({
        "type": "object",
        "properties": {
            "spec": machine_spec(),
            "status": {"type": "object", "properties": {
                "initialization": {"type": "object", "properties": {"provisioned": {"type": "boolean"}}},
                "addresses": {"type": "array", "items": {"type": "object", "required": ["type", "address"],
                    "properties": {"type": {"type": "string"}, "address": {"type": "string"}}}},
                "conditions": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
            }},
        },
    });
    crd(
        "MatryoshkaMachine",
        "matryoshkamachines",
        "mm",
        schema,
        json!([
            {"name": "Provider", "type": "string", "jsonPath": ".spec.provider"},
            {"name": "Instance-Type", "type": "string", "jsonPath": ".spec.instanceType"},
            {"name": "Provisioned", "type": "boolean", "jsonPath": ".status.initialization.provisioned"},
            {"name": "Provider-ID", "type": "string", "jsonPath": ".spec.providerID", "priority": 1},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        ]),
    )
}

/// The `MatryoshkaMachineTemplate` CRD (status: the capacity for scale-from-zero).
pub fn template_crd() -> Value {
    let schema = json!({
        "type": "object",
        "properties": {
            "spec": {"type": "object", "required": ["template"], "properties": {
                "template": {"type": "object", "required": ["spec"], "properties": {
                    "metadata": {"type": "object", "properties": {
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
                    }},
                    "spec": machine_spec(),
                }},
            }},
            "status": {"type": "object", "properties": {
                "capacity": {"type": "object", "additionalProperties": {"x-kubernetes-int-or-string": true,
                    "anyOf": [{"type": "integer"}, {"type": "string"}]}},
                "nodeInfo": {"type": "object", "properties": {
                    "architecture": {"type": "string"}, "operatingSystem": {"type": "string"}}},
            }},
        },
    });
    crd(
        "MatryoshkaMachineTemplate",
        "matryoshkamachinetemplates",
        "mmt",
        schema,
        json!([
            {"name": "Provider", "type": "string", "jsonPath": ".spec.template.spec.provider"},
            {"name": "Instance-Type", "type": "string", "jsonPath": ".spec.template.spec.instanceType"},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        ]),
    )
}

/// Reads every CRD of the YAML files in `dir` (multi-document files allowed).
pub fn read_dir(dir: &Path) -> Result<Vec<Value>> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| Error::Config(format!("reading {}: {e}", dir.display())))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension()
                .is_some_and(|x| x == "yaml" || x == "yml" || x == "json")
        })
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f)
            .map_err(|e| Error::Config(format!("reading {}: {e}", f.display())))?;
        let docs: Vec<Value> = serde_saphyr::from_multiple(&text)
            .map_err(|e| Error::Config(format!("parsing {}: {e}", f.display())))?;
        out.extend(
            docs.into_iter().filter(|d| {
                d.get("kind").and_then(Value::as_str) == Some("CustomResourceDefinition")
            }),
        );
    }
    if out.is_empty() {
        return Err(Error::Config(format!(
            "{} holds no CustomResourceDefinition",
            dir.display()
        )));
    }
    Ok(out)
}

/// Whether the Cluster API CRDs the controllers need are served.
pub async fn cluster_api_installed(root: &kube::Client) -> bool {
    let api: Api<CustomResourceDefinition> = Api::all(root.clone());
    for name in [
        "clusters",
        "machinedeployments",
        "machinesets",
        "machines",
        "machinehealthchecks",
    ] {
        if !matches!(
            api.get_opt(&format!("{name}.cluster.x-k8s.io")).await,
            Ok(Some(_))
        ) {
            return false;
        }
    }
    true
}

/// Installs this provider's CRDs and, from `cluster_api` when given, Cluster API's, and waits
/// until every one is Established.
pub async fn install(root: &kube::Client, cluster_api: Option<&Path>) -> Result<()> {
    let mut all = vec![machine_crd(), template_crd()];
    if let Some(dir) = cluster_api {
        all.extend(read_dir(dir)?);
    }
    let api: Api<CustomResourceDefinition> = Api::all(root.clone());
    for crd in &all {
        let name = crd
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        api.patch(
            name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(crd),
        )
        .await?;
    }
    for crd in &all {
        let name = crd
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let wait = await_condition(api.clone(), &name, conditions::is_crd_established());
        match tokio::time::timeout(std::time::Duration::from_secs(30), wait).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(Error::Retry(format!("waiting for {name}: {e}"))),
            Err(_) => {
                return Err(Error::Retry(format!(
                    "the CRD {name} was not Established within 30s"
                )));
            }
        }
    }
    Ok(())
}
