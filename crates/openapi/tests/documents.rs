//! The served OpenAPI v3 documents as kubectl reads them: `explain` follows the paths to a
//! kind's schema, `apply`/`create` look for `fieldValidation` on the kind's PATCH operation, and
//! client-side apply uses strategic merge patch only where the PATCH lists it.

use std::collections::BTreeSet;
use std::sync::Arc;

use openapi::{CustomResource, DocumentSet, builtin_documents, custom_resource_document};
use serde_json::{Value, json};

fn doc(path: &str) -> Value {
    let d = DocumentSet::new()
        .get(path)
        .unwrap_or_else(|| panic!("{path}"));
    serde_json::from_slice(d.bytes()).unwrap()
}

/// Every PATCH operation of a document with the given GVK.
fn patches<'a>(doc: &'a Value, kind: &str) -> Vec<(&'a String, &'a Value)> {
    doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .filter_map(|(p, item)| item.get("patch").map(|op| (p, op)))
        .filter(|(_, op)| op["x-kubernetes-group-version-kind"]["kind"] == kind)
        .collect()
}

fn param_names(op: &Value) -> BTreeSet<&str> {
    op["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect()
}

fn content_types(op: &Value) -> BTreeSet<&str> {
    op["requestBody"]["content"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect()
}

fn widget_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "spec": {"type": "object", "description": "Desired widget.", "properties": {
                "size": {"type": "integer", "description": "How big the widget is."},
                "replicas": {"type": "integer"}
            }},
            "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}}
        }
    })
}

fn widget(schema: &Value) -> CustomResource<'_> {
    CustomResource {
        group: "example.com",
        version: "v1",
        kind: "Widget",
        list_kind: "WidgetList",
        plural: "widgets",
        namespaced: true,
        schema,
        status_subresource: true,
        scale_subresource: true,
    }
}

#[test]
fn apps_v1_patch_operations_offer_field_validation_and_strategic_merge_patch() {
    let apps = doc("apis/apps/v1");
    let ops = patches(&apps, "Deployment");
    assert_eq!(ops.len(), 2, "the object and its status");
    for (path, op) in ops {
        let params = param_names(op);
        for p in ["dryRun", "fieldManager", "fieldValidation", "force"] {
            assert!(params.contains(p), "{path} lacks {p}");
        }
        assert_eq!(
            content_types(op),
            BTreeSet::from([
                "application/apply-patch+yaml",
                "application/json-patch+json",
                "application/merge-patch+json",
                "application/strategic-merge-patch+json",
            ])
        );
        assert_eq!(op["x-kubernetes-action"], "patch");
    }
    let scale =
        &apps["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"]["patch"];
    assert_eq!(scale["operationId"], "patchAppsV1NamespacedDeploymentScale");
    assert_eq!(
        scale["x-kubernetes-group-version-kind"],
        json!({"group": "autoscaling", "kind": "Scale", "version": "v1"})
    );
}

#[test]
fn every_built_in_patch_operation_has_field_validation() {
    // kubectl checks the first PATCH it meets for the kind, in random order. Connect
    // operations (`.../proxy`) patch no object: upstream gives them no fieldValidation.
    for (key, d) in builtin_documents() {
        let d: Value = serde_json::from_slice(d.bytes()).unwrap();
        for (path, item) in d["paths"].as_object().unwrap() {
            if let Some(op) = item
                .get("patch")
                .filter(|op| op["x-kubernetes-action"] != "connect")
            {
                assert!(param_names(op).contains("fieldValidation"), "{key} {path}");
                assert!(
                    op["x-kubernetes-group-version-kind"].is_object(),
                    "{key} {path}"
                );
            }
        }
    }
}

#[test]
fn custom_resource_documents_never_offer_strategic_merge_patch() {
    let schema = widget_schema();
    let d: Value =
        serde_json::from_slice(custom_resource_document(&[widget(&schema)]).bytes()).unwrap();
    let ops = patches(&d, "Widget");
    assert_eq!(ops.len(), 2, "the object and its status");
    for (path, op) in ops {
        assert!(param_names(op).contains("fieldValidation"), "{path}");
        assert!(
            !content_types(op).contains("application/strategic-merge-patch+json"),
            "{path}"
        );
        assert!(
            content_types(op).contains("application/apply-patch+yaml"),
            "{path}"
        );
    }
    let list = &d["paths"]["/apis/example.com/v1/namespaces/{namespace}/widgets"]["get"];
    assert_eq!(list["operationId"], "listExampleComV1NamespacedWidget");
    assert!(
        !list["responses"]["200"]["content"]
            .as_object()
            .unwrap()
            .contains_key("application/vnd.kubernetes.protobuf")
    );
    let scale = &d["paths"]["/apis/example.com/v1/namespaces/{namespace}/widgets/{name}/scale"];
    assert_eq!(
        scale["put"]["x-kubernetes-group-version-kind"]["kind"],
        "Scale"
    );
    assert!(
        d["paths"].get("/apis/example.com/v1/widgets").is_some(),
        "list across namespaces"
    );
}

#[test]
fn custom_kinds_are_published_with_metadata_and_their_gvk() {
    let schema = widget_schema();
    let d: Value =
        serde_json::from_slice(custom_resource_document(&[widget(&schema)]).bytes()).unwrap();
    let schemas = &d["components"]["schemas"];
    let w = &schemas["com.example.v1.Widget"];
    assert_eq!(
        w["x-kubernetes-group-version-kind"],
        json!([{"group": "example.com", "kind": "Widget", "version": "v1"}])
    );
    assert_eq!(
        w["properties"]["metadata"]["allOf"][0]["$ref"],
        "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    );
    assert_eq!(
        w["properties"]["spec"]["properties"]["size"]["description"],
        "How big the widget is."
    );
    assert_eq!(
        schemas["com.example.v1.WidgetList"]["properties"]["items"]["items"]["$ref"],
        "#/components/schemas/com.example.v1.Widget"
    );
    for needed in [
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta",
        "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
        "io.k8s.apimachinery.pkg.apis.meta.v1.Patch",
        "io.k8s.api.autoscaling.v1.Scale",
    ] {
        assert!(schemas.get(needed).is_some(), "{needed}");
    }
}

#[test]
fn cluster_scoped_custom_resources_have_no_namespace_paths() {
    let schema = widget_schema();
    let mut cr = widget(&schema);
    cr.namespaced = false;
    cr.scale_subresource = false;
    let d: Value = serde_json::from_slice(custom_resource_document(&[cr]).bytes()).unwrap();
    let paths: Vec<&String> = d["paths"].as_object().unwrap().keys().collect();
    assert!(
        paths.iter().all(|p| !p.contains("{namespace}")),
        "{paths:?}"
    );
    assert!(
        d["paths"]["/apis/example.com/v1/widgets/{name}"]["get"]["operationId"]
            == "readExampleComV1Widget"
    );
    assert!(
        d["paths"]
            .get("/apis/example.com/v1/widgets/{name}/scale")
            .is_none()
    );
    assert!(
        d["paths"]
            .get("/apis/example.com/v1/watch/widgets/{name}")
            .is_some()
    );
}

#[test]
fn hashes_are_stable_and_follow_content() {
    let schema = widget_schema();
    let a = custom_resource_document(&[widget(&schema)]);
    let b = custom_resource_document(&[widget(&schema)]);
    assert_eq!(a.hash(), b.hash());
    assert_eq!(a.hash().len(), 128);
    assert!(
        a.hash()
            .chars()
            .all(|c| c.is_ascii_digit() || c.is_ascii_uppercase())
    );
    let mut changed = schema.clone();
    changed["properties"]["spec"]["properties"]["colour"] = json!({"type": "string"});
    let c = custom_resource_document(&[widget(&changed)]);
    assert_ne!(a.hash(), c.hash());
    // The built-in documents are built once: every set serves the same bytes and hash.
    let apps1 = DocumentSet::new().get("apis/apps/v1").unwrap();
    let apps2 = DocumentSet::new().get("/apis/apps/v1").unwrap();
    assert!(Arc::ptr_eq(&apps1, &apps2));
}

#[test]
fn the_index_lists_every_document_with_its_hash() {
    let schema = widget_schema();
    let mut set = DocumentSet::new();
    let widgets = Arc::new(custom_resource_document(&[widget(&schema)]));
    set.insert_custom("example.com", "v1", widgets.clone());
    let index = set.index();
    let paths = index["paths"].as_object().unwrap();
    for key in [
        "api",
        "api/v1",
        "apis",
        "apis/apps",
        "apis/apps/v1",
        "apis/apiextensions.k8s.io/v1",
        "apis/example.com",
        "apis/example.com/v1",
        "version",
    ] {
        assert!(paths.contains_key(key), "{key}");
    }
    assert_eq!(
        paths["apis/example.com/v1"]["serverRelativeURL"],
        format!("/openapi/v3/apis/example.com/v1?hash={}", widgets.hash())
    );
    let apps = set.get("apis/apps/v1").unwrap();
    assert_eq!(
        paths["apis/apps/v1"]["serverRelativeURL"],
        format!("/openapi/v3/apis/apps/v1?hash={}", apps.hash())
    );
    // Another cluster does not see the custom group.
    assert!(
        !DocumentSet::new().index()["paths"]
            .as_object()
            .unwrap()
            .contains_key("apis/example.com/v1")
    );
    set.remove_custom("example.com", "v1");
    let after = set.index();
    assert!(after["paths"].get("apis/example.com").is_none());
    assert!(set.get("apis/example.com/v1").is_none());
}

#[test]
fn every_reference_resolves_within_its_document() {
    for (key, d) in builtin_documents() {
        let d: Value = serde_json::from_slice(d.bytes()).unwrap();
        let schemas = d["components"]["schemas"].as_object().unwrap();
        let mut refs = Vec::new();
        collect(&d, &mut refs);
        for r in refs {
            let name = r
                .strip_prefix("#/components/schemas/")
                .unwrap_or_else(|| panic!("{r}"));
            assert!(schemas.contains_key(name), "{key}: {name}");
        }
    }
}

fn collect(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                if k == "$ref" && v.is_string() {
                    out.push(v.as_str().unwrap().to_string());
                } else {
                    collect(v, out);
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|v| collect(v, out)),
        _ => {}
    }
}

#[test]
fn explain_finds_descriptions_through_the_paths() {
    // kubectl explain: GVK from the collection's GET, then the schema carrying that GVK.
    let core = doc("api/v1");
    let list = &core["paths"]["/api/v1/namespaces/{namespace}/pods"]["get"];
    assert_eq!(list["operationId"], "listCoreV1NamespacedPod");
    assert_eq!(
        list["x-kubernetes-group-version-kind"],
        json!({"group": "", "kind": "Pod", "version": "v1"})
    );
    let schemas = core["components"]["schemas"].as_object().unwrap();
    let (_, pod) = schemas
        .iter()
        .find(|(_, s)| {
            s["x-kubernetes-group-version-kind"]
                .as_array()
                .is_some_and(|g| g.contains(&json!({"group": "", "kind": "Pod", "version": "v1"})))
        })
        .unwrap();
    assert!(
        pod["description"]
            .as_str()
            .unwrap()
            .contains("Pod is a collection of containers")
    );
    let spec_ref = pod["properties"]["spec"]["allOf"][0]["$ref"]
        .as_str()
        .unwrap();
    let spec = &schemas[spec_ref.rsplit('/').next().unwrap()];
    assert!(
        spec["properties"]["containers"]["description"]
            .as_str()
            .unwrap()
            .contains("containers")
    );
    assert_eq!(
        spec["properties"]["volumes"]["x-kubernetes-patch-strategy"],
        "merge,retainKeys"
    );
    for (path, id) in [
        (
            "/api/v1/namespaces/{namespace}/pods/{name}/eviction",
            "createCoreV1NamespacedPodEviction",
        ),
        (
            "/api/v1/namespaces/{namespace}/pods/{name}/binding",
            "createCoreV1NamespacedPodBinding",
        ),
        (
            "/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
            "createCoreV1NamespacedServiceAccountToken",
        ),
    ] {
        assert_eq!(core["paths"][path]["post"]["operationId"], id, "{path}");
    }
    assert_eq!(
        core["paths"]["/api/v1/namespaces/{namespace}/pods/{name}/log"]["get"]["operationId"],
        "readCoreV1NamespacedPodLog"
    );
    assert_eq!(
        core["paths"]["/api/v1/namespaces/{name}/finalize"]["put"]["operationId"],
        "replaceCoreV1NamespaceFinalize"
    );
    assert_eq!(
        core["paths"]["/api/v1/nodes/{name}"]["delete"]["operationId"],
        "deleteCoreV1Node"
    );
    assert_eq!(
        core["paths"]["/api/v1/watch/namespaces/{namespace}/pods"]["get"]["x-kubernetes-action"],
        "watchlist"
    );
    assert_eq!(
        core["paths"]["/api/v1/pods"]["get"]["operationId"],
        "listCoreV1PodForAllNamespaces"
    );
    for scheme in [
        "application/json",
        "application/yaml",
        "application/vnd.kubernetes.protobuf",
    ] {
        assert!(
            list["responses"]["200"]["content"].get(scheme).is_some(),
            "{scheme}"
        );
    }
}
