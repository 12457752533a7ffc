//! The generic conformance of every stored resource (upstream's `resttest`): each built-in
//! resource of the catalogue, and a custom resource, goes through the same life — dry-run
//! create, create, conflicting create, get, list, update, a stale update, each patch type,
//! server-side apply, the field-validation modes, refused writes, watch, dry-run delete and
//! delete — and every rule is checked the same way for all of them. A resource added to the
//! catalogue without a fixture here fails the suite.
//!
//! Every resource runs concurrently on one server; the failures of all are collected and
//! reported together, so one broken resource does not hide another.

use std::collections::BTreeMap;

use apimachinery::builtin::{RESOURCES, Resource};
use http::Method;
use serde_json::{Value, json};
use testkit::Server;

const NS: &str = "default";

/// A minimal valid object of each built-in resource, by `group/version/plural` (`v1/pods`).
fn fixtures() -> BTreeMap<&'static str, Value> {
    let pod_spec = json!({"containers": [{"name": "c", "image": "registry.example/app:1"}]});
    let template = json!({"metadata": {"labels": {"app": "rt"}}, "spec": pod_spec});
    let selector = json!({"matchLabels": {"app": "rt"}});
    BTreeMap::from([
        ("v1/configmaps", json!({"data": {"a": "b"}})),
        ("v1/endpoints", json!({"subsets": []})),
        (
            "v1/events",
            json!({"involvedObject": {"kind": "Pod", "name": "p", "namespace": NS},
                   "reason": "Tested", "message": "m", "type": "Normal"}),
        ),
        (
            "v1/limitranges",
            json!({"spec": {"limits": [{"type": "Container", "max": {"cpu": "2"}}]}}),
        ),
        ("v1/namespaces", json!({})),
        ("v1/nodes", json!({})),
        (
            "v1/persistentvolumeclaims",
            json!({"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}),
        ),
        (
            "v1/persistentvolumes",
            json!({"spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                            "hostPath": {"path": "/tmp/resttest"}}}),
        ),
        ("v1/pods", json!({"spec": pod_spec})),
        ("v1/podtemplates", json!({"template": template})),
        (
            "v1/replicationcontrollers",
            json!({"spec": {"selector": {"app": "rt"}, "template": template}}),
        ),
        (
            "v1/resourcequotas",
            json!({"spec": {"hard": {"pods": "10"}}}),
        ),
        ("v1/secrets", json!({"stringData": {"a": "b"}})),
        ("v1/serviceaccounts", json!({})),
        ("v1/services", json!({"spec": {"ports": [{"port": 80}]}})),
        (
            "apiregistration.k8s.io/v1/apiservices",
            json!({"metadata": {"name": "v1.rt.example.com"},
                   "spec": {"group": "rt.example.com", "version": "v1",
                            "groupPriorityMinimum": 100, "versionPriority": 10}}),
        ),
        (
            "admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
            json!({}),
        ),
        (
            "admissionregistration.k8s.io/v1/validatingadmissionpolicies",
            json!({"spec": {"matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                     "operations": ["CREATE"], "resources": ["configmaps"]}]},
                   "validations": [{"expression": "true"}]}}),
        ),
        (
            "admissionregistration.k8s.io/v1/validatingadmissionpolicybindings",
            json!({"spec": {"policyName": "rt", "validationActions": ["Deny"]}}),
        ),
        (
            "admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
            json!({}),
        ),
        ("apps/v1/controllerrevisions", json!({"revision": 1})),
        (
            "apps/v1/daemonsets",
            json!({"spec": {"selector": selector, "template": template}}),
        ),
        (
            "apps/v1/deployments",
            json!({"spec": {"selector": selector, "template": template}}),
        ),
        (
            "apps/v1/replicasets",
            json!({"spec": {"selector": selector, "template": template}}),
        ),
        (
            "apps/v1/statefulsets",
            json!({"spec": {"selector": selector, "template": template, "serviceName": "rt"}}),
        ),
        (
            "autoscaling/v2/horizontalpodautoscalers",
            json!({"spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "rt"},
                            "maxReplicas": 3}}),
        ),
        (
            "autoscaling/v1/horizontalpodautoscalers",
            json!({"spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "rt"},
                            "maxReplicas": 3}}),
        ),
        (
            "batch/v1/cronjobs",
            json!({"spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template":
                {"spec": {"containers": pod_spec["containers"], "restartPolicy": "OnFailure"}}}}}}),
        ),
        (
            "batch/v1/jobs",
            json!({"spec": {"template": {"spec": {"containers": pod_spec["containers"], "restartPolicy": "Never"}}}}),
        ),
        (
            "certificates.k8s.io/v1/certificatesigningrequests",
            json!({"spec": {"request": CSR, "signerName": "example.com/resttest",
                            "usages": ["digital signature"]}}),
        ),
        (
            "coordination.k8s.io/v1/leases",
            json!({"spec": {"holderIdentity": "a"}}),
        ),
        (
            "discovery.k8s.io/v1/endpointslices",
            json!({"addressType": "IPv4", "endpoints": []}),
        ),
        (
            "flowcontrol.apiserver.k8s.io/v1/flowschemas",
            json!({"spec": {"priorityLevelConfiguration": {"name": "global-default"},
                            "rules": [{"subjects": [{"kind": "Group", "group": {"name": "rt"}}],
                                       "resourceRules": [{"verbs": ["get"], "apiGroups": [""],
                                                          "resources": ["pods"], "namespaces": ["*"]}]}]}}),
        ),
        (
            "flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations",
            json!({"spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 5,
                            "limitResponse": {"type": "Reject"}}}}),
        ),
        (
            "events.k8s.io/v1/events",
            json!({"eventTime": "2026-12-04T10:00:00.000000Z", "reportingController": "example.com/rt",
                   "reportingInstance": "rt-1", "action": "Testing", "reason": "Tested", "type": "Normal",
                   "regarding": {"kind": "Pod", "name": "p", "namespace": NS}}),
        ),
        (
            "networking.k8s.io/v1/ingressclasses",
            json!({"spec": {"controller": "example.com/rt"}}),
        ),
        (
            "networking.k8s.io/v1/ingresses",
            json!({"spec": {"defaultBackend": {"service": {"name": "s", "port": {"number": 80}}}}}),
        ),
        (
            "networking.k8s.io/v1/networkpolicies",
            json!({"spec": {"podSelector": {}}}),
        ),
        ("node.k8s.io/v1/runtimeclasses", json!({"handler": "runc"})),
        (
            "policy/v1/poddisruptionbudgets",
            json!({"spec": {"minAvailable": 1, "selector": selector}}),
        ),
        (
            "rbac.authorization.k8s.io/v1/clusterrolebindings",
            json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}}),
        ),
        (
            "rbac.authorization.k8s.io/v1/clusterroles",
            json!({"rules": []}),
        ),
        (
            "rbac.authorization.k8s.io/v1/rolebindings",
            json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}}),
        ),
        ("rbac.authorization.k8s.io/v1/roles", json!({"rules": []})),
        (
            "scheduling.k8s.io/v1/priorityclasses",
            json!({"value": 1000}),
        ),
        ("storage.k8s.io/v1/csidrivers", json!({"spec": {}})),
        (
            "storage.k8s.io/v1/csinodes",
            json!({"spec": {"drivers": []}}),
        ),
        (
            "storage.k8s.io/v1/csistoragecapacities",
            json!({"storageClassName": "standard"}),
        ),
        (
            "storage.k8s.io/v1/storageclasses",
            json!({"provisioner": "example.com/rt"}),
        ),
        (
            "storage.k8s.io/v1/volumeattachments",
            json!({"spec": {"attacher": "example.com/rt", "nodeName": "n1",
                            "source": {"persistentVolumeName": "pv1"}}}),
        ),
    ])
}

/// A spec change of the resources whose objects carry a generation, by id: it must move
/// `metadata.generation` by one (metadata and status changes never do).
fn spec_changes() -> BTreeMap<&'static str, Value> {
    BTreeMap::from([
        (
            "v1/replicationcontrollers",
            json!({"spec": {"replicas": 2}}),
        ),
        (
            "apps/v1/daemonsets",
            json!({"spec": {"minReadySeconds": 5}}),
        ),
        ("apps/v1/deployments", json!({"spec": {"replicas": 2}})),
        ("apps/v1/replicasets", json!({"spec": {"replicas": 2}})),
        ("apps/v1/statefulsets", json!({"spec": {"replicas": 2}})),
        (
            "autoscaling/v2/horizontalpodautoscalers",
            json!({"spec": {"maxReplicas": 4}}),
        ),
        (
            "autoscaling/v1/horizontalpodautoscalers",
            json!({"spec": {"maxReplicas": 4}}),
        ),
        (
            "batch/v1/cronjobs",
            json!({"spec": {"schedule": "*/7 * * * *"}}),
        ),
        ("batch/v1/jobs", json!({"spec": {"parallelism": 2}})),
        (
            "networking.k8s.io/v1/ingresses",
            json!({"spec": {"defaultBackend": {"service": {"name": "t", "port": {"number": 80}}}}}),
        ),
        (
            "networking.k8s.io/v1/networkpolicies",
            json!({"spec": {"podSelector": {"matchLabels": {"a": "b"}}}}),
        ),
        (
            "policy/v1/poddisruptionbudgets",
            json!({"spec": {"minAvailable": 2}}),
        ),
        (
            "resttest.example.com/v1/widgets",
            json!({"spec": {"size": 4}}),
        ),
    ])
}

/// A status change of the resources with a status subresource, by id, and where it shows:
/// through the main resource it is ignored, through `/status` it is applied (and a spec
/// change through `/status` is ignored).
fn status_changes() -> BTreeMap<&'static str, (Value, &'static str)> {
    let replicas = (json!({"status": {"replicas": 7}}), "/status/replicas");
    BTreeMap::from([
        ("v1/replicationcontrollers", replicas.clone()),
        ("apps/v1/deployments", replicas.clone()),
        ("apps/v1/replicasets", replicas.clone()),
        ("apps/v1/statefulsets", replicas),
        (
            "autoscaling/v2/horizontalpodautoscalers",
            (
                json!({"status": {"currentReplicas": 7, "desiredReplicas": 7}}),
                "/status/currentReplicas",
            ),
        ),
        (
            "batch/v1/cronjobs",
            (
                json!({"status": {"lastScheduleTime": "2026-12-04T10:00:00Z"}}),
                "/status/lastScheduleTime",
            ),
        ),
        (
            "policy/v1/poddisruptionbudgets",
            (
                json!({"status": {"disruptionsAllowed": 1, "currentHealthy": 2, "desiredHealthy": 1, "expectedPods": 2}}),
                "/status/currentHealthy",
            ),
        ),
        (
            "resttest.example.com/v1/widgets",
            (json!({"status": {"seen": 7}}), "/status/seen"),
        ),
        (
            "v1/pods",
            (
                json!({"status": {"message": "resttest"}}),
                "/status/message",
            ),
        ),
        (
            "v1/nodes",
            (
                json!({"status": {"nodeInfo": {"kernelVersion": "resttest"}}}),
                "/status/nodeInfo/kernelVersion",
            ),
        ),
        (
            "apps/v1/daemonsets",
            (
                json!({"status": {"currentNumberScheduled": 1, "desiredNumberScheduled": 1, "numberMisscheduled": 0, "numberReady": 0}}),
                "/status/desiredNumberScheduled",
            ),
        ),
    ])
}

/// A PEM certificate request (CN=resttest, O=system:nodes), base64 as `spec.request` holds it.
const CSR: &str = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0KTUlIbE1JR01BZ0VBTUNveEVUQVBCZ05WQkFNTUNISmxjM1IwWlhOME1SVXdFd1lEVlFRS0RBeHplWE4wWlcwNgpibTlrWlhNd1dUQVRCZ2NxaGtqT1BRSUJCZ2dxaGtqT1BRTUJCd05DQUFSS21NSnRUeTJNeG45WlpIMkxLSXZ0Ci9XV0ZaTzNmU0g1V2JLTmJNcjVqakV5cldoUjI2UjhHRDNiYmFWcGozYzQ5VUR5VjVMaCtibW9pb0dPcURqbnkKb0FBd0NnWUlLb1pJemowRUF3SURTQUF3UlFJZ0FKVjNDZmNSVldEZm12VW01bHZJeHNzZmFmT052RTlkSWh2egpXaVM0VWF3Q0lRRFhvQnF4NGptSTYzYnhaZ2VFMlNoOXcyNW5uc2laSmg4aytST0FuRDVpbUE9PQotLS0tLUVORCBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0K";

/// One resource under test.
struct Case {
    /// `group/version/plural`.
    id: String,
    api_version: String,
    kind: String,
    /// The collection's path (`/api/v1/namespaces/default/pods`).
    collection: String,
    name: String,
    body: Value,
    /// Strategic merge patch applies (built-ins; not custom resources).
    strategic: bool,
    /// A merge patch changing the spec (see [`spec_changes`]).
    spec_change: Option<Value>,
    /// The resource allows `deletecollection`.
    deletecollection: bool,
    /// A status change and where it shows (see [`status_changes`]).
    status_change: Option<(Value, &'static str)>,
}

impl Case {
    fn builtin(r: &Resource, fixture: &Value) -> Case {
        let gv = r.api_version();
        let prefix = if r.group.is_empty() {
            format!("/api/{gv}")
        } else {
            format!("/apis/{gv}")
        };
        let collection = if r.namespaced {
            format!("{prefix}/namespaces/{NS}/{}", r.plural)
        } else {
            format!("{prefix}/{}", r.plural)
        };
        let mut case = Case::new(
            format!("{gv}/{}", r.plural),
            gv,
            r.kind,
            collection,
            fixture,
            true,
        );
        case.deletecollection = r.verbs.contains(&"deletecollection");
        case
    }

    fn new(
        id: String,
        api_version: String,
        kind: &str,
        collection: String,
        fixture: &Value,
        strategic: bool,
    ) -> Case {
        let mut body = fixture.clone();
        let obj = body.as_object_mut().expect("a fixture object");
        obj.insert("apiVersion".into(), json!(api_version));
        obj.insert("kind".into(), json!(kind));
        let meta = obj
            .entry("metadata")
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .expect("metadata");
        meta.entry("name").or_insert_with(|| json!("rt-object"));
        let name = meta["name"].as_str().unwrap_or_default().to_string();
        Case {
            status_change: status_changes().get(id.as_str()).cloned(),
            deletecollection: true,
            spec_change: spec_changes().get(id.as_str()).cloned(),
            id,
            api_version,
            kind: kind.to_string(),
            collection,
            name,
            body,
            strategic,
        }
    }

    fn item(&self) -> String {
        format!("{}/{}", self.collection, self.name)
    }
}

/// The failures of one case.
struct Check<'a> {
    case: &'a Case,
    failures: Vec<String>,
}

impl Check<'_> {
    fn expect(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.failures.push(format!("{}: {}", self.case.id, what()));
        }
    }
}

fn rv(v: &Value) -> u64 {
    v.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

fn generation(v: &Value) -> Option<i64> {
    v.pointer("/metadata/generation").and_then(Value::as_i64)
}

fn label<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.pointer("/metadata/labels")
        .and_then(|l| l.get(key))
        .and_then(Value::as_str)
}

/// The JSON pointer of the first leaf of a patch (`/spec/replicas`).
fn first_leaf(v: &Value) -> String {
    let mut path = String::new();
    let mut cur = v;
    while let Some((k, next)) = cur.as_object().and_then(|m| m.iter().next()) {
        path.push('/');
        path.push_str(k);
        cur = next;
    }
    path
}

/// Whether an object is gone or on its way (a finalizer keeps it with a deletion time).
fn deleted(code: u16, body: &Value) -> bool {
    code == 404 || body.pointer("/metadata/deletionTimestamp").is_some()
}

async fn run(server: &Server, case: &Case) -> Vec<String> {
    let mut c = Check {
        case,
        failures: Vec::new(),
    };
    let json_ct = [("content-type", "application/json")];
    let body = case.body.to_string();

    // Dry-run create: answered like a create, nothing stored.
    let dry = server
        .request(
            Method::POST,
            &format!("{}?dryRun=All", case.collection),
            &json_ct,
            &body,
        )
        .await;
    c.expect(dry.code == 201, || {
        format!("dry-run create answered {}: {}", dry.code, dry.body)
    });
    let after_dry = server.request(Method::GET, &case.item(), &[], "").await;
    c.expect(after_dry.code == 404, || {
        format!("a dry-run create stored the object ({})", after_dry.code)
    });

    // Create.
    let created = server
        .request(Method::POST, &case.collection, &json_ct, &body)
        .await;
    if created.code != 201 {
        c.expect(false, || {
            format!("create answered {}: {}", created.code, created.body)
        });
        return c.failures;
    }
    let obj = &created.body;
    c.expect(obj["kind"] == case.kind.as_str(), || {
        format!("create answered kind {}", obj["kind"])
    });
    c.expect(obj["apiVersion"] == case.api_version.as_str(), || {
        format!("create answered apiVersion {}", obj["apiVersion"])
    });
    for field in ["uid", "resourceVersion", "creationTimestamp"] {
        c.expect(obj["metadata"][field].is_string(), || {
            format!("a created object has no metadata.{field}")
        });
    }
    let created_rv = rv(obj);
    let created_generation = generation(obj);
    c.expect(created_generation.is_none_or(|g| g == 1), || {
        format!("a new object has generation {created_generation:?}, not 1")
    });

    // A second create of the same name: AlreadyExists, nothing changed.
    let again = server
        .request(Method::POST, &case.collection, &json_ct, &body)
        .await;
    c.expect(
        again.code == 409 && again.body["reason"] == "AlreadyExists",
        || format!("a second create answered {}: {}", again.code, again.body),
    );

    // Get and list.
    let got = server.request(Method::GET, &case.item(), &[], "").await;
    c.expect(got.code == 200 && rv(&got.body) == created_rv, || {
        format!("get answered {} at rv {}", got.code, rv(&got.body))
    });
    let list = server.request(Method::GET, &case.collection, &[], "").await;
    let listed = list.body["items"].as_array().is_some_and(|items| {
        items
            .iter()
            .any(|i| i["metadata"]["name"] == case.name.as_str())
    });
    c.expect(list.code == 200 && listed, || {
        format!("list answered {} without the object", list.code)
    });
    c.expect(rv(&list.body) >= created_rv, || {
        format!(
            "the list's resourceVersion {} is older than the object's {created_rv}",
            rv(&list.body)
        )
    });

    // Update (a label): a new resourceVersion, the same generation.
    let mut update = got.body.clone();
    update["metadata"]["labels"]["resttest/put"] = json!("1");
    let put = server
        .request(Method::PUT, &case.item(), &json_ct, &update.to_string())
        .await;
    c.expect(
        put.code == 200 && label(&put.body, "resttest/put") == Some("1"),
        || format!("update answered {}: {}", put.code, put.body),
    );
    c.expect(rv(&put.body) > created_rv, || {
        "an update kept the resourceVersion".into()
    });
    c.expect(generation(&put.body) == created_generation, || {
        format!(
            "a label change moved generation {created_generation:?} to {:?}",
            generation(&put.body)
        )
    });
    let current_rv = rv(&put.body);

    // An update that changes nothing writes nothing: the same resourceVersion.
    let noop = server
        .request(Method::PUT, &case.item(), &json_ct, &put.body.to_string())
        .await;
    c.expect(noop.code == 200 && rv(&noop.body) == current_rv, || {
        format!(
            "a no-op update answered {} and moved the resourceVersion {current_rv} to {}",
            noop.code,
            rv(&noop.body)
        )
    });
    let noop_patch = server
        .request(
            Method::PATCH,
            &case.item(),
            &[("content-type", "application/merge-patch+json")],
            "{}",
        )
        .await;
    c.expect(
        noop_patch.code == 200 && rv(&noop_patch.body) == current_rv,
        || {
            format!(
                "an empty merge patch answered {} and moved the resourceVersion",
                noop_patch.code
            )
        },
    );

    // A stale update: Conflict, nothing changed.
    let mut stale = update.clone();
    stale["metadata"]["labels"]["resttest/stale"] = json!("1");
    let conflict = server
        .request(Method::PUT, &case.item(), &json_ct, &stale.to_string())
        .await;
    c.expect(
        conflict.code == 409 && conflict.body["reason"] == "Conflict",
        || format!("a stale update answered {}", conflict.code),
    );

    // A dry-run update answers the new object and stores nothing.
    let mut dry_update = put.body.clone();
    dry_update["metadata"]["labels"]["resttest/dry"] = json!("1");
    let dry_put = server
        .request(
            Method::PUT,
            &format!("{}?dryRun=All", case.item()),
            &json_ct,
            &dry_update.to_string(),
        )
        .await;
    c.expect(
        dry_put.code == 200 && label(&dry_put.body, "resttest/dry") == Some("1"),
        || {
            format!(
                "a dry-run update answered {}: {}",
                dry_put.code, dry_put.body
            )
        },
    );

    // A refused update (an invalid label key): 422, nothing changed.
    let mut invalid = put.body.clone();
    invalid["metadata"]["labels"]["bad key!"] = json!("x");
    let refused = server
        .request(Method::PUT, &case.item(), &json_ct, &invalid.to_string())
        .await;
    c.expect(
        refused.code == 422 && refused.body["reason"] == "Invalid",
        || {
            format!(
                "an invalid label answered {}: {}",
                refused.code, refused.body
            )
        },
    );
    let unchanged = server.request(Method::GET, &case.item(), &[], "").await;
    c.expect(rv(&unchanged.body) == current_rv, || {
        "a refused update changed the object".into()
    });

    // Every patch type.
    let mut patches = vec![
        (
            "application/merge-patch+json",
            json!({"metadata": {"labels": {"resttest/merge": "1"}}}).to_string(),
            "resttest/merge",
            "",
        ),
        (
            "application/json-patch+json",
            json!([{"op": "add", "path": "/metadata/labels/resttest~1json", "value": "1"}])
                .to_string(),
            "resttest/json",
            "",
        ),
        (
            "application/apply-patch+yaml",
            json!({"apiVersion": case.api_version, "kind": case.kind,
                   "metadata": {"name": case.name, "labels": {"resttest/apply": "1"}}})
            .to_string(),
            "resttest/apply",
            "fieldManager=resttest&force=true",
        ),
    ];
    if case.strategic {
        patches.push((
            "application/strategic-merge-patch+json",
            json!({"metadata": {"labels": {"resttest/strategic": "1"}}}).to_string(),
            "resttest/strategic",
            "",
        ));
    }
    let mut last_rv = current_rv;
    for (ct, patch, key, query) in &patches {
        let uri = if query.is_empty() {
            case.item()
        } else {
            format!("{}?{query}", case.item())
        };
        let r = server
            .request(Method::PATCH, &uri, &[("content-type", ct)], patch)
            .await;
        c.expect(r.code == 200 && label(&r.body, key) == Some("1"), || {
            format!("{ct} answered {}: {}", r.code, r.body)
        });
        c.expect(rv(&r.body) > last_rv, || {
            format!("{ct} kept the resourceVersion")
        });
        c.expect(generation(&r.body) == created_generation, || {
            format!("{ct} of a label moved the generation")
        });
        last_rv = rv(&r.body).max(last_rv);
    }
    if !case.strategic {
        let r = server
            .request(
                Method::PATCH,
                &case.item(),
                &[("content-type", "application/strategic-merge-patch+json")],
                "{}",
            )
            .await;
        c.expect(r.code == 415, || {
            format!(
                "a strategic merge patch of a custom resource answered {}",
                r.code
            )
        });
    }

    // Field validation of a patch with an unknown field.
    let unknown = json!({"resttestUnknownField": 1, "metadata": {"labels": {"resttest/fv": "1"}}})
        .to_string();
    let merge = [("content-type", "application/merge-patch+json")];
    let strict = server
        .request(
            Method::PATCH,
            &format!("{}?fieldValidation=Strict", case.item()),
            &merge,
            &unknown,
        )
        .await;
    c.expect(
        strict.code == 400 && strict.body["reason"] == "BadRequest",
        || {
            format!(
                "a Strict patch with an unknown field answered {}",
                strict.code
            )
        },
    );
    let after_strict = server.request(Method::GET, &case.item(), &[], "").await;
    c.expect(rv(&after_strict.body) == last_rv, || {
        "a refused Strict patch changed the object".into()
    });
    let warn = server
        .request(
            Method::PATCH,
            &format!("{}?fieldValidation=Warn", case.item()),
            &merge,
            &unknown,
        )
        .await;
    let warning = warn
        .headers
        .get("warning")
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default()
        .to_string();
    c.expect(
        warn.code == 200
            && warning.starts_with("299 - ")
            && warning.contains("resttestUnknownField"),
        || {
            format!(
                "a Warn patch answered {} with warning {warning:?}",
                warn.code
            )
        },
    );
    c.expect(warn.body.get("resttestUnknownField").is_none(), || {
        "an unknown field was stored".into()
    });
    let ignore = server
        .request(
            Method::PATCH,
            &format!("{}?fieldValidation=Ignore", case.item()),
            &merge,
            &json!({"resttestUnknownField": 2}).to_string(),
        )
        .await;
    c.expect(
        ignore.code == 200 && ignore.headers.get("warning").is_none(),
        || format!("an Ignore patch answered {}", ignore.code),
    );

    // A spec change moves the generation by one.
    if let Some(change) = &case.spec_change {
        let r = server
            .request(Method::PATCH, &case.item(), &merge, &change.to_string())
            .await;
        c.expect(r.code == 200, || {
            format!("a spec change answered {}: {}", r.code, r.body)
        });
        c.expect(
            created_generation.is_some()
                && generation(&r.body) == created_generation.map(|g| g + 1),
            || {
                format!(
                    "a spec change moved generation {created_generation:?} to {:?}",
                    generation(&r.body)
                )
            },
        );
    }

    // Status and spec are written apart: the main resource ignores status, `/status` ignores
    // spec, and neither status write moves the generation.
    if let Some((change, at)) = &case.status_change {
        let before = server
            .request(Method::GET, &case.item(), &[], "")
            .await
            .body;
        let main = server
            .request(Method::PATCH, &case.item(), &merge, &change.to_string())
            .await;
        c.expect(
            main.code == 200 && main.body.pointer(at) == before.pointer(at),
            || {
                format!(
                    "a status change through the main resource answered {} and showed {:?}",
                    main.code,
                    main.body.pointer(at)
                )
            },
        );
        let status_uri = format!("{}/status", case.item());
        let st = server
            .request(Method::PATCH, &status_uri, &merge, &change.to_string())
            .await;
        c.expect(
            st.code == 200
                && st.body.pointer(at) == change.pointer(at)
                && generation(&st.body) == generation(&before),
            || format!("a /status change answered {}: {}", st.code, st.body),
        );
        if let Some(spec) = &case.spec_change {
            let path = first_leaf(spec);
            // A value the spec does not have now.
            let mut spec = spec.clone();
            if let Some(leaf) = spec.pointer_mut(&path) {
                let next = match &*leaf {
                    Value::Number(n) => json!(n.as_i64().unwrap_or(0) + 1),
                    Value::String(t) => json!(format!("{t}x")),
                    other => other.clone(),
                };
                *leaf = next;
            }
            assert_ne!(spec.pointer(&path), before.pointer(&path), "{}", case.id);
            let sp = server
                .request(Method::PATCH, &status_uri, &merge, &spec.to_string())
                .await;
            c.expect(
                sp.code == 200
                    && sp.body.pointer(&path) == before.pointer(&path)
                    && generation(&sp.body) == generation(&before),
                || {
                    format!(
                        "a spec change through /status answered {} and showed {:?} at {path}",
                        sp.code,
                        sp.body.pointer(&path)
                    )
                },
            );
        }
    }

    // Watch from the creation: every change after it, in order, as MODIFIED events.
    let watched = server
        .request(
            Method::GET,
            &format!(
                "{}?watch=1&resourceVersion={created_rv}&timeoutSeconds=1&fieldSelector=metadata.name%3D{}",
                case.collection, case.name
            ),
            &[],
            "",
        )
        .await;
    let events: Vec<Value> = String::from_utf8_lossy(&watched.raw)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let rvs: Vec<u64> = events.iter().map(|e| rv(&e["object"])).collect();
    c.expect(
        watched.code == 200
            && events.len() > patches.len()
            && events.iter().all(|e| e["type"] == "MODIFIED")
            && rvs.windows(2).all(|w| w[0] < w[1]),
        || {
            format!(
                "a watch from the creation gave {} events: {:?}",
                events.len(),
                events.iter().map(|e| &e["type"]).collect::<Vec<_>>()
            )
        },
    );

    // A collection delete: matching nothing, or as a dry run, it removes nothing.
    if case.deletecollection {
        for query in [
            "labelSelector=resttest%2Fnone%3D1",
            "labelSelector=resttest%2Fput%3D1&dryRun=All",
        ] {
            let r = server
                .request(
                    Method::DELETE,
                    &format!("{}?{query}", case.collection),
                    &[],
                    "",
                )
                .await;
            c.expect(r.code == 200, || {
                format!("deletecollection ?{query} answered {}: {}", r.code, r.body)
            });
            let still = server.request(Method::GET, &case.item(), &[], "").await;
            c.expect(
                still.code == 200 && still.body.pointer("/metadata/deletionTimestamp").is_none(),
                || format!("deletecollection ?{query} deleted the object"),
            );
        }
    }

    // Dry-run delete keeps the object; delete removes it (or starts its finalization).
    let dry_delete = server
        .request(
            Method::DELETE,
            &format!("{}?dryRun=All", case.item()),
            &[],
            "",
        )
        .await;
    c.expect(matches!(dry_delete.code, 200 | 202), || {
        format!("a dry-run delete answered {}", dry_delete.code)
    });
    let still = server.request(Method::GET, &case.item(), &[], "").await;
    c.expect(
        still.code == 200 && still.body.pointer("/metadata/deletionTimestamp").is_none(),
        || "a dry-run delete deleted the object".into(),
    );
    let delete = server.request(Method::DELETE, &case.item(), &[], "").await;
    c.expect(matches!(delete.code, 200 | 202), || {
        format!("delete answered {}: {}", delete.code, delete.body)
    });
    let gone = server.request(Method::GET, &case.item(), &[], "").await;
    c.expect(deleted(gone.code, &gone.body), || {
        format!("the object is still there after delete ({})", gone.code)
    });
    c.failures
}

/// Every case, concurrently; all failures reported together.
async fn run_all(server: &Server, cases: &[Case]) {
    let results = futures::future::join_all(cases.iter().map(|c| run(server, c))).await;
    let failures: Vec<String> = results.into_iter().flatten().collect();
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_built_in_resource_follows_the_rest_rules() {
    let server = Server::start().await;
    let fixtures = fixtures();
    let mut missing = Vec::new();
    let mut cases = Vec::new();
    for r in RESOURCES.iter().filter(|r| r.verbs.contains(&"get")) {
        let id = format!("{}/{}", r.api_version(), r.plural);
        match fixtures.get(id.as_str()) {
            Some(f) => cases.push(Case::builtin(r, f)),
            None => missing.push(id),
        }
    }
    assert!(
        missing.is_empty(),
        "built-in resources without a resttest fixture: {missing:?}"
    );
    // Two versions of one resource share their objects: one at a time.
    let (v1_hpa, rest): (Vec<Case>, Vec<Case>) = cases
        .into_iter()
        .partition(|c| c.id == "autoscaling/v1/horizontalpodautoscalers");
    run_all(&server, &rest).await;
    run_all(&server, &v1_hpa).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_resource_follows_the_rest_rules() {
    let server = Server::start().await;
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.resttest.example.com"},
        "spec": {"group": "resttest.example.com", "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                     "subresources": {"status": {}},
                     "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                         "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                         "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}
    });
    let created = server
        .request(
            Method::POST,
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            &[("content-type", "application/json")],
            &crd.to_string(),
        )
        .await;
    assert_eq!(created.code, 201, "{}", created.body);
    testkit::eventually("the CRD to be served", || async {
        let r = server
            .request(
                Method::GET,
                "/apis/resttest.example.com/v1/namespaces/default/widgets",
                &[],
                "",
            )
            .await;
        (r.code == 200).then_some(())
    })
    .await;
    let case = Case::new(
        "resttest.example.com/v1/widgets".into(),
        "resttest.example.com/v1".into(),
        "Widget",
        "/apis/resttest.example.com/v1/namespaces/default/widgets".into(),
        &json!({"spec": {"size": 3}}),
        false,
    );
    run_all(&server, &[case]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_only_resources_answer_their_review_and_store_nothing() {
    let server = Server::start().await;
    let json_ct = [("content-type", "application/json")];
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bound"},
                     "spec": {"containers": [{"name": "c", "image": "registry.example/app:1"}]}});
    let r = server
        .request(
            Method::POST,
            "/api/v1/namespaces/default/pods",
            &json_ct,
            &pod.to_string(),
        )
        .await;
    assert_eq!(r.code, 201, "{}", r.body);
    let attrs = json!({"verb": "get", "resource": "pods", "namespace": NS});
    let cases = [
        (
            "/api/v1/namespaces/default/bindings",
            json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "bound"},
                   "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}}),
            "",
        ),
        (
            "/apis/authentication.k8s.io/v1/tokenreviews",
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                   "spec": {"token": "not-a-token"}}),
            "/status/authenticated",
        ),
        (
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}),
            "/status/userInfo/username",
        ),
        (
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                   "spec": {"resourceAttributes": attrs}}),
            "/status/allowed",
        ),
        (
            "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
                   "spec": {"namespace": NS}}),
            "/status/resourceRules",
        ),
        (
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                   "spec": {"user": "alice", "resourceAttributes": attrs}}),
            "/status/allowed",
        ),
        (
            "/apis/authorization.k8s.io/v1/namespaces/default/localsubjectaccessreviews",
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": "LocalSubjectAccessReview",
                   "metadata": {"namespace": NS},
                   "spec": {"user": "alice", "resourceAttributes": attrs}}),
            "/status/allowed",
        ),
    ];
    let mut failures = Vec::new();
    for (collection, body, answer) in cases {
        let r = server
            .request(Method::POST, collection, &json_ct, &body.to_string())
            .await;
        if r.code != 201 || (!answer.is_empty() && r.body.pointer(answer).is_none()) {
            failures.push(format!(
                "{collection}: create answered {}: {}",
                r.code, r.body
            ));
        }
        let list = server.request(Method::GET, collection, &[], "").await;
        if list.code != 405 || list.body["reason"] != "MethodNotAllowed" {
            failures.push(format!("{collection}: list answered {}", list.code));
        }
    }
    let bound = server
        .request(
            Method::GET,
            "/api/v1/namespaces/default/pods/bound",
            &[],
            "",
        )
        .await;
    if bound.body["spec"]["nodeName"] != "n1" {
        failures.push(format!("the binding did not bind: {}", bound.body["spec"]));
    }
    // A create-only resource added to the catalogue without a case here fails.
    for r in RESOURCES.iter().filter(|r| !r.verbs.contains(&"get")) {
        let path = format!("{}/{}", r.api_version(), r.plural);
        if !cases_cover(&path) {
            failures.push(format!("{path}: a create-only resource without a case"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Whether the create-only test posts to `group/version/plural`.
fn cases_cover(id: &str) -> bool {
    [
        "v1/bindings",
        "authentication.k8s.io/v1/tokenreviews",
        "authentication.k8s.io/v1/selfsubjectreviews",
        "authorization.k8s.io/v1/selfsubjectaccessreviews",
        "authorization.k8s.io/v1/selfsubjectrulesreviews",
        "authorization.k8s.io/v1/subjectaccessreviews",
        "authorization.k8s.io/v1/localsubjectaccessreviews",
    ]
    .contains(&id)
}
