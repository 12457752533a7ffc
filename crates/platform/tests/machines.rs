//! A TenantCluster's workers as Cluster API machines, in process: a node group becomes a
//! MachineDeployment whose Machines become Nodes of the tenant cluster; it scales, rolls to a
//! new instance type one machine at a time, drains a machine's node honouring
//! PodDisruptionBudgets before deleting it, and its MachineHealthCheck replaces an unhealthy
//! machine unless too many are unhealthy.

mod common;

use std::collections::BTreeSet;

use apiserver::local::LocalService;
use common::*;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use machines::resource::{Machine, MachineDeployment, MachineHealthCheck, MachineSet};
use runtime::client::ClusterClients;
use serde_json::{Value, json};

const NS: &str = "tenant-foo";

async fn cluster(h: &Harness, name: &str, spec: Value) -> kube::Client {
    cluster_in(h, json!({}), name, spec).await
}

/// A TenantCluster in tenant `foo` whose spec is `tenant`.
async fn cluster_in(h: &Harness, tenant: Value, name: &str, spec: Value) -> kube::Client {
    create_tenant(&h.root, "tenant-root", "foo", tenant).await;
    await_condition(&tenants(&h.root, "tenant-root"), "foo", "Ready").await;
    let tcs = tenant_clusters(&h.root, NS);
    tcs.create(&PostParams::default(), &object("TenantCluster", name, spec))
        .await
        .expect("create the TenantCluster");
    await_condition(&tcs, name, "Ready").await;
    ClusterClients::in_memory(LocalService::system(h.server.clone()))
        .cluster(&platform::naming::logical_cluster(NS, name))
        .expect("tenant client")
}

fn cond<'a>(status: Option<&'a Value>, ty: &str) -> Option<&'a Value> {
    status?
        .get("conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == ty)
}

async fn machines(h: &Harness) -> Vec<Machine> {
    let api: Api<Machine> = Api::namespaced(h.root.clone(), NS);
    api.list(&ListParams::default())
        .await
        .expect("list machines")
        .items
}

fn name(m: &Machine) -> String {
    m.metadata.name.clone().unwrap_or_default()
}

async fn running(h: &Harness, count: usize) -> Vec<Machine> {
    eventually(&format!("{count} Running machines"), || async {
        let all = machines(h).await;
        (all.len() == count
            && all.iter().all(|m| {
                m.status_field("/phase") == Some(&json!("Running"))
                    && m.metadata.deletion_timestamp.is_none()
            }))
        .then_some(all)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_group_is_a_machine_deployment_that_scales_and_rolls_one_machine_at_a_time() {
    let h = Harness::start().await;
    let tenant = cluster(
        &h,
        "ops",
        json!({"version": "v1.34", "nodeGroups": {"md0": {"minReplicas": 1, "maxReplicas": 3, "instanceType": "u1.medium", "roles": ["ingress-nginx"]}}}),
    )
    .await;
    // The chart's MachineDeployment: autoscaler bounds and capacity.
    let mds: Api<MachineDeployment> = Api::namespaced(h.root.clone(), NS);
    let md = mds
        .get("kubernetes-ops-md0")
        .await
        .expect("the MachineDeployment");
    let ann = md.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        ann["cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"],
        "1"
    );
    assert_eq!(
        ann["cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"],
        "3"
    );
    assert_eq!(
        ann["capacity.cluster-autoscaler.kubernetes.io/memory"],
        "3297Mi"
    );
    assert_eq!(ann["capacity.cluster-autoscaler.kubernetes.io/cpu"], "900m");
    assert_eq!(md.spec["replicas"], 1);
    assert_eq!(md.spec["template"]["spec"]["version"], "v1.34.9");
    let first_template = md.spec["template"]["spec"]["infrastructureRef"]["name"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(
        first_template.starts_with("kubernetes-ops-md0-")
            && first_template.len() == "kubernetes-ops-md0-".len() + 6,
        "{first_template}"
    );

    // One machine, and its node in the tenant cluster.
    let ms = running(&h, 1).await;
    let m = &ms[0];
    let node_name = m
        .status_field("/nodeRef/name")
        .and_then(Value::as_str)
        .expect("nodeRef")
        .to_string();
    assert_eq!(node_name, name(m), "the node is named after its machine");
    let nodes: Api<Node> = Api::all(tenant.clone());
    let node = nodes.get(&node_name).await.expect("the node");
    assert_eq!(
        node.spec.as_ref().and_then(|s| s.provider_id.clone()),
        m.spec["providerID"].as_str().map(str::to_string)
    );
    let node_ann = node.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(node_ann["cluster.x-k8s.io/machine"], name(m));
    assert_eq!(node_ann["cluster.x-k8s.io/cluster-namespace"], NS);
    assert!(
        node.metadata
            .labels
            .clone()
            .unwrap_or_default()
            .contains_key("node-role.kubernetes.io/ingress-nginx")
    );
    for c in [
        "Ready",
        "Available",
        "UpToDate",
        "NodeHealthy",
        "InfrastructureReady",
        "BootstrapConfigReady",
    ] {
        assert_eq!(
            cond(m.status.as_ref(), c).map(|c| c["status"].clone()),
            Some(json!("True")),
            "{c}: {:?}",
            m.status
        );
    }

    // Scaling as the autoscaler does: replicas on the MachineDeployment.
    mds.patch(
        "kubernetes-ops-md0",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 3}})),
    )
    .await
    .expect("scale up");
    running(&h, 3).await;
    eventually("three Ready nodes", || async {
        (ready_nodes(&tenant).await.len() == 3).then_some(())
    })
    .await;
    let tcs = tenant_clusters(&h.root, NS);
    eventually("the TenantCluster counts three nodes", || async {
        let tc = tcs.get("ops").await.ok()?;
        (tc.data["status"]["nodes"] == "3/3").then_some(())
    })
    .await;
    mds.patch(
        "kubernetes-ops-md0",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 1}})),
    )
    .await
    .expect("scale down");
    running(&h, 1).await;
    eventually("one node left", || async {
        let l = nodes.list(&ListParams::default()).await.ok()?.items;
        (l.len() == 1).then_some(())
    })
    .await;

    // A new instance type rolls the group: a new template, a new MachineSet, never more than
    // replicas + 1 machines, and in the end nodes of the new size.
    mds.patch(
        "kubernetes-ops-md0",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 2}})),
    )
    .await
    .expect("two replicas");
    let before: BTreeSet<String> = running(&h, 2).await.iter().map(name).collect();
    tcs.patch(
        "ops",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"nodeGroups": {"md0": {"instanceType": "u1.large"}}}})),
    )
    .await
    .expect("change the instance type");
    let most = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let after = eventually("every machine replaced by a u1.large one", || {
        let h = &h;
        let before = before.clone();
        let most = most.clone();
        async move {
            let all = machines(h).await;
            let active = all
                .iter()
                .filter(|m| m.metadata.deletion_timestamp.is_none())
                .count();
            most.fetch_max(active, std::sync::atomic::Ordering::Relaxed);
            let names: BTreeSet<String> = all.iter().map(name).collect();
            let done = all.len() == 2
                && names.is_disjoint(&before)
                && all
                    .iter()
                    .all(|m| m.status_field("/phase") == Some(&json!("Running")));
            done.then_some(all)
        }
    })
    .await;
    let most = most.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        most <= 3,
        "at most replicas + maxSurge machines not being deleted at once, saw {most}"
    );
    for m in &after {
        let node = nodes.get(&name(m)).await.expect("the new node");
        let mem = node
            .status
            .and_then(|s| s.allocatable)
            .and_then(|a| a.get("memory").cloned())
            .map(|q| q.0);
        assert_eq!(mem.as_deref(), Some("6800Mi"));
    }
    for old in &before {
        assert!(
            nodes.get_opt(old).await.expect("get").is_none(),
            "old node {old} deleted"
        );
    }
    let sets: Api<MachineSet> = Api::namespaced(h.root.clone(), NS);
    let sets = sets.list(&ListParams::default()).await.expect("sets").items;
    assert_eq!(sets.len(), 2, "the new set and one old one kept as history");
    let revisions: BTreeSet<String> = sets
        .iter()
        .map(|s| s.metadata.annotations.clone().unwrap_or_default()["machinedeployment.clusters.x-k8s.io/revision"].clone())
        .collect();
    assert_eq!(
        revisions,
        BTreeSet::from(["1".to_string(), "2".to_string()])
    );
    let md = mds.get("kubernetes-ops-md0").await.expect("md");
    assert_ne!(
        md.spec["template"]["spec"]["infrastructureRef"]["name"],
        json!(first_template)
    );
    eventually("the deployment reports two up-to-date machines", || async {
        let md = mds.get("kubernetes-ops-md0").await.ok()?;
        (md.status_field("/upToDateReplicas") == Some(&json!(2))
            && md.status_field("/phase") == Some(&json!("Running")))
        .then_some(())
    })
    .await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_machine_drains_its_node_and_waits_for_pod_disruption_budgets() {
    let h = Harness::start().await;
    let tenant = cluster(
        &h,
        "drain",
        json!({"nodeGroups": {"md0": {"minReplicas": 1, "maxReplicas": 1, "instanceType": "u1.medium"}}}),
    )
    .await;
    let m = running(&h, 1).await.remove(0);
    let node = name(&m);
    let pods: Api<Pod> = Api::namespaced(tenant.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "db", "labels": {"app": "db"}},
        "spec": {"nodeName": node, "containers": [{"name": "db", "image": "db:1"}]},
    }))
    .expect("pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("create the pod");
    eventually("the pod runs", || async {
        let p = pods.get("db").await.ok()?;
        (p.status.and_then(|s| s.phase).as_deref() == Some("Running")).then_some(())
    })
    .await;
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(tenant.clone(), "default");
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "db"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}},
    }))
    .expect("pdb");
    pdbs.create(&PostParams::default(), &pdb)
        .await
        .expect("create the PDB");
    eventually("the PDB allows no disruption", || async {
        let p = pdbs.get("db").await.ok()?;
        (p.status
            .as_ref()
            .map(|s| (s.current_healthy, s.disruptions_allowed))
            == Some((1, 0)))
        .then_some(())
    })
    .await;

    let api: Api<Machine> = Api::namespaced(h.root.clone(), NS);
    api.delete(&node, &DeleteParams::default())
        .await
        .expect("delete the machine");
    // The node is cordoned and the machine waits on the pod the budget protects.
    eventually("the drain waits on the budget", || async {
        let m = api.get(&node).await.ok()?;
        let c = cond(m.status.as_ref(), "Deleting")?;
        (c["reason"] == "DrainingNode" && c["message"].as_str()?.contains("default/db"))
            .then_some(())
    })
    .await;
    let nodes: Api<Node> = Api::all(tenant.clone());
    let n = nodes.get(&node).await.expect("the node is still there");
    assert_eq!(n.spec.and_then(|s| s.unschedulable), Some(true), "cordoned");
    assert!(
        pods.get("db")
            .await
            .expect("the pod")
            .metadata
            .deletion_timestamp
            .is_none(),
        "not evicted"
    );
    // The replacement machine comes meanwhile (the set keeps its replicas).
    eventually("a replacement machine runs", || async {
        let all = machines(&h).await;
        all.iter()
            .any(|m| name(m) != node && m.status_field("/phase") == Some(&json!("Running")))
            .then_some(())
    })
    .await;
    // Without the budget the pod is evicted, the node and the machine go.
    pdbs.delete("db", &DeleteParams::default())
        .await
        .expect("delete the PDB");
    eventually("the old machine is gone", || async {
        api.get_opt(&node).await.ok()?.is_none().then_some(())
    })
    .await;
    eventually("its node is gone", || async {
        nodes.get_opt(&node).await.ok()?.is_none().then_some(())
    })
    .await;
    eventually("the pod was evicted", || async {
        pods.get_opt("db").await.ok()?.is_none().then_some(())
    })
    .await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_health_check_replaces_an_unhealthy_machine_unless_too_many_are_unhealthy() {
    let h = Harness::start().await;
    cluster(
        &h,
        "hc",
        json!({"nodeGroups": {"md0": {"minReplicas": 2, "maxReplicas": 2, "instanceType": "u1.medium"}},
               "nodeHealthCheck": {"maxUnhealthy": "50%"}}),
    )
    .await;
    let first = running(&h, 2).await;
    let mhcs: Api<MachineHealthCheck> = Api::namespaced(h.root.clone(), NS);
    let mhc = mhcs
        .get("kubernetes-hc-md0")
        .await
        .expect("the MachineHealthCheck");
    assert_eq!(mhc.spec["checks"]["nodeStartupTimeoutSeconds"], 1200);
    assert_eq!(
        mhc.spec["checks"]["unhealthyNodeConditions"][0],
        json!({"type": "Ready", "status": "Unknown", "timeoutSeconds": 300})
    );
    assert_eq!(
        mhc.spec["checks"]["unhealthyNodeConditions"][1],
        json!({"type": "Ready", "status": "False", "timeoutSeconds": 600})
    );
    assert_eq!(
        mhc.spec["remediation"]["triggerIf"]["unhealthyLessThanOrEqualTo"],
        "50%"
    );
    eventually("two healthy targets", || async {
        let m = mhcs.get("kubernetes-hc-md0").await.ok()?;
        (m.status_field("/expectedMachines") == Some(&json!(2))
            && m.status_field("/currentHealthy") == Some(&json!(2)))
        .then_some(())
    })
    .await;

    // One unhealthy machine of two (50 %): replaced.
    let api: Api<Machine> = Api::namespaced(h.root.clone(), NS);
    let sick = name(&first[0]);
    api.patch(
        &sick,
        &PatchParams::default(),
        &Patch::Merge(
            json!({"metadata": {"annotations": {"cluster.x-k8s.io/remediate-machine": ""}}}),
        ),
    )
    .await
    .expect("mark the machine");
    eventually("the unhealthy machine is replaced", || async {
        let all = machines(&h).await;
        (all.len() == 2
            && all
                .iter()
                .all(|m| name(m) != sick && m.status_field("/phase") == Some(&json!("Running"))))
        .then_some(())
    })
    .await;

    // With maxUnhealthy 0, one unhealthy machine is already too many: nothing is remediated.
    let tcs = tenant_clusters(&h.root, NS);
    tcs.patch(
        "hc",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"nodeHealthCheck": {"maxUnhealthy": 0}}})),
    )
    .await
    .expect("lower maxUnhealthy");
    eventually("the health check follows the cluster", || async {
        let m = mhcs.get("kubernetes-hc-md0").await.ok()?;
        (m.spec["remediation"]["triggerIf"]["unhealthyLessThanOrEqualTo"] == 0).then_some(())
    })
    .await;
    let now = running(&h, 2).await;
    let sick = name(&now[0]);
    api.patch(
        &sick,
        &PatchParams::default(),
        &Patch::Merge(
            json!({"metadata": {"annotations": {"cluster.x-k8s.io/remediate-machine": ""}}}),
        ),
    )
    .await
    .expect("mark the machine");
    eventually("remediation is short-circuited", || async {
        let m = mhcs.get("kubernetes-hc-md0").await.ok()?;
        let c = cond(m.status.as_ref(), "RemediationAllowed")?;
        (c["status"] == "False"
            && c["reason"] == "TooManyUnhealthy"
            && m.status_field("/remediationsAllowed") == Some(&json!(0)))
        .then_some(())
    })
    .await;
    let m = api.get(&sick).await.expect("the machine stays");
    assert!(
        m.metadata.deletion_timestamp.is_none(),
        "{sick} must not be remediated"
    );
    let c = cond(m.status.as_ref(), "HealthCheckSucceeded").expect("HealthCheckSucceeded");
    assert_eq!(
        (c["status"].as_str(), c["reason"].as_str()),
        (Some("False"), Some("HasRemediateMachineAnnotation"))
    );
    assert!(
        cond(m.status.as_ref(), "OwnerRemediated").is_none(),
        "nothing handed to the owner"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_autoscaler_adds_machines_for_pods_that_do_not_fit_and_removes_them_when_idle() {
    let options = platform::Options {
        machines: machines::Options {
            autoscaler: Some(machines::autoscaler::AutoscalerOptions {
                scan_interval: std::time::Duration::from_millis(200),
                scale_down_unneeded_time: std::time::Duration::from_secs(2),
                scale_down_delay_after_add: std::time::Duration::from_secs(5),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let h = Harness::start_with(options).await;
    let tenant = cluster(
        &h,
        "auto",
        json!({"nodeGroups": {"md0": {"minReplicas": 1, "maxReplicas": 3, "instanceType": "u1.medium"}}}),
    )
    .await;
    running(&h, 1).await;
    // Three pods of 600m: one fits the u1.medium node (900m allocatable), two do not.
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(tenant.clone(), "default");
    let web: k8s_openapi::api::apps::v1::Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "web:1", "resources": {"requests": {"cpu": "600m", "memory": "100Mi"}}}]},
        }},
    }))
    .expect("deployment");
    deployments
        .create(&PostParams::default(), &web)
        .await
        .expect("create the deployment");
    let pods: Api<Pod> = Api::namespaced(tenant.clone(), "default");
    eventually("three web pods Running on three nodes", || async {
        let list = pods
            .list(&ListParams::default().labels("app=web"))
            .await
            .ok()?
            .items;
        let nodes: BTreeSet<String> = list
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .filter_map(|p| p.spec.as_ref()?.node_name.clone())
            .collect();
        (nodes.len() == 3).then_some(())
    })
    .await;
    running(&h, 3).await;
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(tenant.clone(), "default");
    let triggered = events
        .list(&ListParams::default())
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("TriggeredScaleUp"))
        .collect::<Vec<_>>();
    assert!(
        !triggered.is_empty(),
        "pods say they triggered the scale-up"
    );
    assert!(
        triggered[0]
            .message
            .as_deref()
            .unwrap_or("")
            .contains("tenant-foo/kubernetes-auto-md0 1->"),
        "{:?}",
        triggered[0].message
    );
    // A pod no group can hold says why.
    let big: Pod = serde_json::from_value(json!({
        "metadata": {"name": "big"},
        "spec": {"containers": [{"name": "big", "image": "big:1", "resources": {"requests": {"cpu": "64"}}}]},
    }))
    .expect("pod");
    pods.create(&PostParams::default(), &big)
        .await
        .expect("create the big pod");
    eventually("the big pod did not trigger a scale-up", || async {
        let list = events.list(&ListParams::default()).await.ok()?.items;
        list.iter()
            .find(|e| {
                e.reason.as_deref() == Some("NotTriggerScaleUp")
                    && e.involved_object.name.as_deref() == Some("big")
            })
            .map(|e| e.message.clone().unwrap_or_default())
    })
    .await;
    let status: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(tenant.clone(), "kube-system");
    let cm = status
        .get("cluster-autoscaler-status")
        .await
        .expect("the status ConfigMap");
    let text = cm.data.unwrap_or_default()["status"].clone();
    assert!(
        text.contains("autoscalerStatus: Running")
            && text.contains("MachineDeployment/tenant-foo/kubernetes-auto-md0"),
        "{text}"
    );

    // Idle nodes go back to the minimum.
    pods.delete("big", &DeleteParams::default())
        .await
        .expect("delete the big pod");
    deployments
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete the deployment");
    eventually("the group is back at its minimum", || async {
        let mds: Api<MachineDeployment> = Api::namespaced(h.root.clone(), NS);
        let md = mds.get("kubernetes-auto-md0").await.ok()?;
        let all = machines(&h).await;
        (md.spec["replicas"] == 1 && all.len() == 1).then_some(())
    })
    .await;
    eventually("one node left", || async {
        (ready_nodes(&tenant).await.len() == 1).then_some(())
    })
    .await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn machines_are_charged_to_the_tenants_quota_and_a_scale_up_beyond_it_is_refused() {
    let h = Harness::start().await;
    // Two vCPUs for the tenant: two u1.medium machines (one vCPU each).
    let tenant = cluster_in(
        &h,
        json!({"resourceQuotas": {"cpu": "2", "memory": "16Gi"}}),
        "q",
        json!({"nodeGroups": {"md0": {"minReplicas": 1, "maxReplicas": 3, "instanceType": "u1.medium"}}}),
    )
    .await;
    running(&h, 1).await;
    let mds: Api<MachineDeployment> = Api::namespaced(h.root.clone(), NS);
    mds.patch(
        "kubernetes-q-md0",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 3}})),
    )
    .await
    .expect("scale to three");
    running(&h, 2).await;
    let sets: Api<MachineSet> = Api::namespaced(h.root.clone(), NS);
    let refused = eventually("the set says the quota blocks it", || async {
        let s = sets.list(&ListParams::default()).await.ok()?.items.pop()?;
        let c = cond(s.status.as_ref(), "ScalingUp")?.clone();
        (c["reason"] == "QuotaExceeded").then_some(c)
    })
    .await;
    assert_eq!(
        refused["message"],
        "scaling up is blocked: exceeded quota: tenant-quota, requested: limits.cpu=1, used: limits.cpu=2, limited: limits.cpu=2"
    );
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(h.root.clone(), NS);
    eventually("a FailedCreate event with the quota's words", || async {
        let list = events.list(&ListParams::default()).await.ok()?.items;
        list.iter()
            .any(|e| {
                e.reason.as_deref() == Some("FailedCreate")
                    && e.message
                        .as_deref()
                        .is_some_and(|m| m.contains("exceeded quota: tenant-quota"))
            })
            .then_some(())
    })
    .await;
    assert_eq!(machines(&h).await.len(), 2, "no third machine");
    // The autoscaler does not ask for what the quota refuses, and tells the pod why.
    mds.patch(
        "kubernetes-q-md0",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 2}})),
    )
    .await
    .expect("back to two");
    let pods: Api<Pod> = Api::namespaced(tenant.clone(), "default");
    let big: Pod = serde_json::from_value(json!({
        "metadata": {"name": "wants-a-node"},
        "spec": {"containers": [{"name": "c", "image": "c:1", "resources": {"requests": {"cpu": "800m"}}}]},
    }))
    .expect("pod");
    pods.create(&PostParams::default(), &big)
        .await
        .expect("a pod for a third node");
    // Fill both nodes first so the pod needs a third.
    for i in 0..2 {
        let filler: Pod = serde_json::from_value(json!({
            "metadata": {"name": format!("filler{i}")},
            "spec": {"containers": [{"name": "c", "image": "c:1", "resources": {"requests": {"cpu": "800m"}}}]},
        }))
        .expect("pod");
        let _ = pods.create(&PostParams::default(), &filler).await;
    }
    let tevents: Api<k8s_openapi::api::core::v1::Event> =
        Api::namespaced(tenant.clone(), "default");
    let msg = eventually("a pod says the quota blocked the scale-up", || async {
        let list = tevents.list(&ListParams::default()).await.ok()?.items;
        list.iter()
            .filter(|e| e.reason.as_deref() == Some("NotTriggerScaleUp"))
            .filter_map(|e| e.message.clone())
            .find(|m| m.contains("blocked by quota"))
    })
    .await;
    assert!(msg.contains("exceeded quota: tenant-quota"), "{msg}");
    let md = mds.get("kubernetes-q-md0").await.expect("md");
    assert_eq!(
        md.spec["replicas"], 2,
        "the autoscaler did not grow the group past the quota"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_cluster_api_a_tenant_cluster_serves_and_says_it_has_no_workers() {
    let h = Harness::start_without_cluster_api().await;
    create_tenant(&h.root, "tenant-root", "foo", json!({})).await;
    await_condition(&tenants(&h.root, "tenant-root"), "foo", "Ready").await;
    let tcs = tenant_clusters(&h.root, NS);
    tcs.create(
        &PostParams::default(),
        &object(
            "TenantCluster",
            "bare",
            json!({"nodeGroups": {"md0": {"minReplicas": 1, "maxReplicas": 1}}}),
        ),
    )
    .await
    .expect("create");
    await_condition(&tcs, "bare", "ControlPlaneReady").await;
    let tc = eventually("the cluster says why it has no workers", || async {
        let tc = tcs.get("bare").await.ok()?;
        let nodes = cond(tc.data.get("status"), "NodesReady")?.clone();
        (nodes["reason"] == "ClusterAPIMissing").then_some(tc)
    })
    .await;
    let ready = cond(tc.data.get("status"), "Ready").expect("Ready");
    assert_eq!(
        (ready["status"].as_str(), ready["reason"].as_str()),
        (Some("False"), Some("ClusterAPIMissing"))
    );
    // Its kubeconfig works all the same, and deleting it is not held up by machines.
    assert!(tc.data["status"]["kubeconfigSecret"].is_string());
    tcs.delete("bare", &DeleteParams::default())
        .await
        .expect("delete");
    eventually("the cluster is gone", || async {
        tcs.get_opt("bare").await.ok()?.is_none().then_some(())
    })
    .await;
    h.stop().await;
}
