//! Usage accounting in process: a tenant's worker machines and its pods in the root cluster
//! are recorded with their size and lifetime; a `UsageReport` created in the tenant's
//! namespace is answered at once with each consumer's vCPU-, memory- and storage-hours and the
//! tenant's totals; a report is immutable, a tenant may not ask about another, and the root
//! cluster's `/metrics` counts each tenant's hours.

mod common;

use common::*;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

const NS: &str = "tenant-foo";

fn records(h: &Harness) -> Api<DynamicObject> {
    Api::all_with(h.root.clone(), &resource("UsageRecord", "usagerecords"))
}

fn reports(client: &kube::Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &resource("UsageReport", "usagereports"))
}

fn report_object(name: &str, query: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "platform.matryoshka.dev/v1alpha1",
        "kind": "UsageReport",
        "metadata": {"name": name},
        "query": query,
    }))
    .expect("a UsageReport")
}

/// The last hour to the next one.
fn window() -> Value {
    let now = k8s_openapi::jiff::Timestamp::now();
    let hour = k8s_openapi::jiff::SignedDuration::from_hours(1);
    json!({
        "startTimestamp": apimachinery::time::format_time(now - hour),
        "endTimestamp": apimachinery::time::format_time(now + hour),
    })
}

fn number(v: &Value) -> f64 {
    v.as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("a decimal: {v}"))
}

async fn machine_records(h: &Harness, want: usize, closed: bool) -> Vec<Value> {
    eventually(
        &format!("{want} machine records (closed: {closed})"),
        || async {
            let all = records(h).list(&ListParams::default()).await.ok()?.items;
            let mine: Vec<Value> = all
                .iter()
                .map(|r| serde_json::to_value(r).unwrap_or_default())
                .filter(|r| {
                    r["spec"]["tenant"] == NS
                        && r["spec"]["consumer"]["kind"] == "MatryoshkaMachine"
                })
                .collect();
            (mine.len() == want
                && mine
                    .iter()
                    .all(|r| r["status"]["end"].is_string() == closed))
            .then_some(mine)
        },
    )
    .await
}

fn status_error(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("not an API error: {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_machines_and_pods_are_recorded_and_a_usage_report_integrates_them() {
    let h = Harness::start().await;
    create_tenant(&h.root, "tenant-root", "foo", json!({})).await;
    await_condition(&tenants(&h.root, "tenant-root"), "foo", "Ready").await;
    create_tenant(&h.root, "tenant-root", "bar", json!({})).await;
    await_condition(&tenants(&h.root, "tenant-root"), "bar", "Ready").await;
    let tcs = tenant_clusters(&h.root, NS);
    tcs.create(
        &PostParams::default(),
        &object(
            "TenantCluster",
            "demo",
            json!({"nodeGroups": {"md0": {"minReplicas": 2, "maxReplicas": 2, "instanceType": "u1.medium"}}}),
        ),
    )
    .await
    .expect("create the TenantCluster");

    // Each machine has its record: tenant, workload, instance type and size.
    let recs = machine_records(&h, 2, false).await;
    for r in &recs {
        assert_eq!(
            r["spec"]["workload"],
            json!({"kind": "TenantCluster", "name": "demo"})
        );
        assert_eq!(r["spec"]["type"], "u1.medium");
        assert_eq!(r["spec"]["resources"]["cpu"], "1000m");
        assert_eq!(r["spec"]["resources"]["memory"], (4u64 << 30).to_string());
        assert_eq!(
            r["metadata"]["labels"]["platform.matryoshka.dev/tenant"],
            NS
        );
    }

    // A pod of the root cluster in the tenant's namespace, once it runs on a node.
    let pods: Api<Pod> = Api::namespaced(h.root.clone(), NS);
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(json!({
            "metadata": {"name": "job"},
            "spec": {"nodeName": "somewhere", "containers": [{"name": "main", "image": "x",
                "resources": {"requests": {"cpu": "500m", "memory": "1Gi", "ephemeral-storage": "2Gi"}}}]},
        }))
        .expect("pod"),
    )
    .await
    .expect("create the pod");
    // (It started ten minutes ago: Kubernetes times have whole seconds.)
    let started = apimachinery::time::format_time(
        k8s_openapi::jiff::Timestamp::now() - k8s_openapi::jiff::SignedDuration::from_mins(10),
    );
    pods.patch_status(
        "job",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Running", "startTime": started}})),
    )
    .await
    .expect("the pod runs");
    let pod_record = eventually("the pod's record", || async {
        let all = records(&h).list(&ListParams::default()).await.ok()?.items;
        all.into_iter()
            .map(|r| serde_json::to_value(r).unwrap_or_default())
            .find(|r| r["spec"]["consumer"]["kind"] == "Pod")
    })
    .await;
    assert_eq!(pod_record["spec"]["tenant"], NS);
    assert_eq!(pod_record["spec"]["type"], "pod");
    assert_eq!(pod_record["spec"]["resources"]["cpu"], "500m");
    assert_eq!(pod_record["spec"]["start"], started);
    // It finishes: its record ends when its container did.
    let finished = apimachinery::time::format_time(k8s_openapi::jiff::Timestamp::now());
    pods.patch_status(
        "job",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Succeeded", "containerStatuses": [{
            "name": "main", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": 0, "finishedAt": finished, "startedAt": started}},
        }]}})),
    )
    .await
    .expect("the pod finishes");
    let name = pod_record["metadata"]["name"]
        .as_str()
        .unwrap_or("")
        .to_string();
    eventually("the pod's record ends", || async {
        let r = records(&h).get(&name).await.ok()?;
        (r.data["status"]["end"] == json!(finished)).then_some(())
    })
    .await;

    // A report in the tenant's namespace is answered when it is created.
    let member = h.as_user("alice", &["tenant-foo-view"]);
    let answered = reports(&member, NS)
        .create(&PostParams::default(), &report_object("now", window()))
        .await
        .expect("a member of the tenant asks for its usage");
    let report = &answered.data["report"];
    assert_eq!(answered.data["query"]["tenant"], NS);
    let consumers = report["consumers"].as_array().expect("consumers");
    assert_eq!(consumers.len(), 3, "{report}");
    let machines: Vec<&Value> = consumers
        .iter()
        .filter(|c| c["kind"] == "MatryoshkaMachine")
        .collect();
    assert_eq!(machines.len(), 2);
    for m in &machines {
        assert_eq!(m["workload"]["name"], "demo");
        assert_eq!(m["type"], "u1.medium");
        let cpu = number(&m["consumptions"]["vCPUHours"]);
        let mem = number(&m["consumptions"]["MemoryGiBHours"]);
        let life = number(&m["consumptions"]["LifetimeHours"]);
        assert!(cpu > 0.0, "{m}");
        // One vCPU and 4 GiB: memory-hours are four times the vCPU-hours, which are the
        // lifetime's hours.
        assert!((mem - 4.0 * cpu).abs() <= 0.00001, "{m}");
        assert!((cpu - life).abs() <= 0.000001, "{m}");
    }
    assert_eq!(report["tenants"][0]["tenant"], NS);
    assert!(number(&report["totalConsumptions"]["vCPUHours"]) > 0.0);
    // Stored as answered, and immutable.
    let stored = reports(&h.root, NS).get("now").await.expect("stored");
    assert_eq!(stored.data["report"], answered.data["report"]);
    let refused = reports(&h.root, NS)
        .patch(
            "now",
            &PatchParams::default(),
            &Patch::Merge(json!({"report": {"totalConsumptions": {"vCPUHours": "0"}}})),
        )
        .await
        .map(|_| ())
        .map_err(status_error)
        .expect_err("a report does not change");
    assert_eq!(refused.code, 422);
    assert!(
        refused.message.contains("report: Invalid value"),
        "{}",
        refused.message
    );

    // A tenant asks only about its own subtree; every field error has its path.
    let refused = reports(&member, NS)
        .create(
            &PostParams::default(),
            &report_object(
                "other",
                json!({"tenant": "tenant-bar", "startTimestamp": "2026-01-02T00:00:00Z", "endTimestamp": "2026-01-01T00:00:00Z"}),
            ),
        )
        .await
        .map(|_| ())
        .map_err(status_error)
        .expect_err("another tenant's usage is refused");
    assert_eq!(refused.code, 422);
    let fields: Vec<String> = refused
        .details
        .iter()
        .flat_map(|d| d.causes.iter())
        .map(|c| c.field.clone())
        .collect();
    assert_eq!(
        fields,
        ["query.tenant", "query.endTimestamp"],
        "{refused:?}"
    );
    assert!(
        reports(&h.root, NS).get("other").await.is_err(),
        "a refused report is not stored"
    );
    let forbidden = reports(&member, "tenant-bar")
        .create(&PostParams::default(), &report_object("x", window()))
        .await
        .map(|_| ())
        .map_err(status_error)
        .expect_err("RBAC keeps foo's members out of bar's namespace");
    assert_eq!(forbidden.code, 403);
    // The root tenant sees everything below it, rolled up.
    let all = reports(&h.root, "tenant-root")
        .create(
            &PostParams::default(),
            &report_object("all", json!({"includeSubTenants": true, "startTimestamp": window()["startTimestamp"], "endTimestamp": window()["endTimestamp"]})),
        )
        .await
        .expect("the root tenant's report");
    let tenants: Vec<&str> = all.data["report"]["tenants"]
        .as_array()
        .expect("tenants")
        .iter()
        .map(|t| t["tenant"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(tenants, [NS, "tenant-root"]);
    assert_eq!(
        all.data["report"]["tenants"][1]["totalConsumptions"]["vCPUHours"],
        all.data["report"]["tenants"][0]["totalConsumptions"]["vCPUHours"],
    );

    // The root cluster's metrics count the tenant's hours.
    let metrics = h
        .root
        .request_text(
            http::Request::get("/metrics")
                .body(Vec::new())
                .expect("request"),
        )
        .await
        .expect("/metrics");
    assert!(
        metrics.contains("matryoshka_usage_vcpu_hours_total{tenant=\"tenant-foo\"}")
            && metrics.contains("matryoshka_usage_reserved_cpu_cores{tenant=\"tenant-foo\"} 2\n"),
        "{metrics}"
    );

    // Deleting the cluster ends its machines' records; then the usage stops growing.
    tcs.delete("demo", &DeleteParams::default())
        .await
        .expect("delete the TenantCluster");
    let closed = machine_records(&h, 2, true).await;
    for r in &closed {
        assert!(
            r["status"]["end"].as_str() >= r["spec"]["start"].as_str(),
            "{r}"
        );
    }
    let first = reports(&h.root, NS)
        .create(&PostParams::default(), &report_object("after-1", window()))
        .await
        .expect("a report after the deletion");
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let second = reports(&h.root, NS)
        .create(&PostParams::default(), &report_object("after-2", window()))
        .await
        .expect("a report a second later");
    assert_eq!(
        first.data["report"]["totalConsumptions"], second.data["report"]["totalConsumptions"],
        "ended consumers no longer accrue"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_is_deleted_once_its_consumer_ended_longer_ago_than_the_retention() {
    let h = Harness::start_with(platform::Options {
        usage_retention: std::time::Duration::from_secs(2),
        ..Default::default()
    })
    .await;
    create_tenant(&h.root, "tenant-root", "foo", json!({})).await;
    await_condition(&tenants(&h.root, "tenant-root"), "foo", "Ready").await;
    let tcs = tenant_clusters(&h.root, NS);
    tcs.create(
        &PostParams::default(),
        &object(
            "TenantCluster",
            "brief",
            json!({"nodeGroups": {"md0": {"minReplicas": 1, "maxReplicas": 1, "instanceType": "u1.medium"}}}),
        ),
    )
    .await
    .expect("create the TenantCluster");
    machine_records(&h, 1, false).await;
    tcs.delete("brief", &DeleteParams::default())
        .await
        .expect("delete the TenantCluster");
    // Closed, then gone after the retention (and not written again).
    eventually("the record is gone", || async {
        let all = records(&h).list(&ListParams::default()).await.ok()?.items;
        all.is_empty().then_some(())
    })
    .await;
    h.stop().await;
}
