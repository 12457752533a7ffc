//! TenantClusters end to end in process: a cluster of two u1.medium workers becomes Ready, its
//! Secret's `admin.conf` works over HTTPS (two Ready nodes with the reserved allocatable, the
//! chosen version), spec changes reconcile, and deletion leaves nothing behind.

mod common;

use std::collections::BTreeMap;

use common::*;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};

async fn kubeconfig_client_config(yaml: &str) -> kube::Config {
    let kc = kube::config::Kubeconfig::from_yaml(yaml).expect("a kubeconfig");
    kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .expect("a client config")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_cluster_with_two_medium_workers_is_ready_and_its_kubeconfig_works() {
    let h = Harness::start().await;
    create_tenant(&h.root, "tenant-root", "foo", json!({})).await;
    await_condition(&tenants(&h.root, "tenant-root"), "foo", "Ready").await;
    let tcs = tenant_clusters(&h.root, "tenant-foo");
    tcs.create(
        &Default::default(),
        &object(
            "TenantCluster",
            "team-x",
            json!({"version": "v1.33", "nodeGroups": {"md0": {"minReplicas": 2, "maxReplicas": 4, "instanceType": "u1.medium", "roles": ["ingress-nginx"]}}}),
        ),
    )
    .await
    .expect("create the TenantCluster");
    let tc = await_condition(&tcs, "team-x", "Ready").await;
    assert_eq!(tc.data["status"]["version"], "v1.33.13");
    assert_eq!(tc.data["status"]["nodes"], "2/2");
    for c in ["ControlPlaneReady", "NodesReady"] {
        assert!(
            tc.data["status"]["conditions"]
                .as_array()
                .unwrap()
                .iter()
                .any(|x| x["type"] == c && x["status"] == "True"),
            "{c}"
        );
    }
    // Defaults from the schema are stored.
    assert_eq!(tc.data["spec"]["storageClass"], "replicated");

    // The seed's Secret, with the four keys.
    let secrets: Api<Secret> = Api::namespaced(h.root.clone(), "tenant-foo");
    let s = secrets
        .get("kubernetes-team-x-admin-kubeconfig")
        .await
        .expect("the kubeconfig secret");
    let data: BTreeMap<String, String> = s
        .data
        .unwrap()
        .into_iter()
        .map(|(k, v)| (k, String::from_utf8(v.0).unwrap()))
        .collect();
    assert_eq!(
        data.keys().map(String::as_str).collect::<Vec<_>>(),
        [
            "admin.conf",
            "admin.svc",
            "super-admin.conf",
            "super-admin.svc"
        ]
    );
    assert!(data["admin.svc"].contains("https://kubernetes-team-x.tenant-foo.svc:6443"));

    // admin.conf over HTTPS: two Ready nodes sized by the reservation formulas.
    let admin = kube::Client::try_from(kubeconfig_client_config(&data["admin.conf"]).await)
        .expect("a client from admin.conf");
    let nodes = ready_nodes(&admin).await;
    assert_eq!(nodes.len(), 2, "two Ready nodes");
    for n in &nodes {
        let alloc = n.status.as_ref().unwrap().allocatable.as_ref().unwrap();
        assert_eq!(alloc["memory"].0, "3297Mi");
        assert_eq!(alloc["cpu"].0, "900m");
        let labels = n.metadata.labels.as_ref().unwrap();
        assert_eq!(
            labels
                .get("node.kubernetes.io/instance-type")
                .map(String::as_str),
            Some("u1.medium")
        );
        assert!(labels.contains_key("node-role.kubernetes.io/ingress-nginx"));
    }
    let v = admin.apiserver_version().await.expect("/version");
    assert_eq!(v.git_version, "v1.33.13");
    assert_eq!(v.minor, "33");
    let super_admin =
        kube::Client::try_from(kubeconfig_client_config(&data["super-admin.conf"]).await).unwrap();
    assert_eq!(ready_nodes(&super_admin).await.len(), 2);

    // Spec changes reconcile: a third node and an upgrade (which rolls the machines).
    tcs.patch(
        "team-x",
        &PatchParams::default(),
        &Patch::Merge(
            json!({"spec": {"version": "v1.35", "nodeGroups": {"md0": {"minReplicas": 3}}}}),
        ),
    )
    .await
    .expect("patch");
    eventually("three nodes and v1.35.6", || async {
        let o = tcs.get("team-x").await.ok()?;
        (o.data["status"]["nodes"] == "3/3" && o.data["status"]["version"] == "v1.35.6")
            .then_some(())
    })
    .await;
    // The new version rolls the group: in the end three nodes, all of new machines.
    eventually("three Ready nodes after the roll", || async {
        (ready_nodes(&admin).await.len() == 3).then_some(())
    })
    .await;
    assert_eq!(
        admin.apiserver_version().await.unwrap().git_version,
        "v1.35.6"
    );

    // Delete: the cluster, its keys and the Secret are gone.
    let lc = tc.data["status"]["logicalCluster"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(h.keys_of(&lc).await > 0);
    tcs.delete("team-x", &DeleteParams::default())
        .await
        .expect("delete");
    eventually("the TenantCluster to go", || async {
        tcs.get_opt("team-x").await.ok()?.is_none().then_some(())
    })
    .await;
    assert_eq!(
        h.keys_of(&lc).await,
        0,
        "no keys under the cluster's prefix"
    );
    assert!(
        secrets
            .get_opt("kubernetes-team-x-admin-kubeconfig")
            .await
            .unwrap()
            .is_none()
    );
    let lcs: Api<platform::resource::LogicalCluster> = Api::all(h.root.clone());
    assert!(lcs.get_opt(&lc).await.unwrap().is_none());
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_validation_rule_is_refused_with_its_field_and_message() {
    let h = Harness::start().await;
    let tcs = tenant_clusters(&h.root, "tenant-root");
    let cases: Vec<(Value, &str, &str)> = vec![
        (
            json!({"version": "v1.30"}),
            "spec.version",
            "Kubernetes version v1.30 is not supported, allowed versions are v1.35, v1.34, v1.33, v1.32, v1.31",
        ),
        (
            json!({"maxNodeProvisionTime": "0s"}),
            "spec.maxNodeProvisionTime",
            "positive duration",
        ),
        (
            json!({"nodeHealthCheck": {"readyFalseTimeout": "ten"}}),
            "spec.nodeHealthCheck.readyFalseTimeout",
            "positive duration",
        ),
        (
            json!({"nodeHealthCheck": {"maxUnhealthy": "50 percent"}}),
            "spec.nodeHealthCheck.maxUnhealthy",
            "percentage",
        ),
        (
            json!({"nodeGroups": {"md0": {"ephemeralStorage": "20Gi"}}}),
            "spec.nodeGroups[md0].ephemeralStorage",
            "diskSize",
        ),
        (
            json!({"nodeGroups": {"md0": {"instanceType": "u9.giant"}}}),
            "spec.nodeGroups[md0].instanceType",
            "instance type not found",
        ),
        (
            json!({"nodeGroups": {"md0": {"resources": {"cpu": "2"}}}}),
            "spec.nodeGroups[md0].resources.memory",
            "set both resources.cpu and resources.memory, or neither",
        ),
        (
            json!({"nodeGroups": {"md0": {"kubelet": {"evictionHardMemory": "10%", "evictionSoftMemory": "5%"}}}}),
            "spec.nodeGroups[md0].kubelet",
            "",
        ),
        (
            json!({"nodeGroups": {"md0": {"kubelet": {"evictionHardMemory": "7%", "evictionSoftMemory": "500Mi"}}}}),
            "spec.nodeGroups[md0].kubelet",
            "",
        ),
        (
            json!({"nodeGroups": {"md0": {"kubelet": {"systemReservedMemory": "2Gi", "kubeReservedMemory": "2Gi"}}}}),
            "spec.nodeGroups[md0].kubelet",
            "",
        ),
        (
            json!({"controlPlane": {"apiServer": {"resourcesPreset": "huge"}}}),
            "spec.controlPlane.apiServer.resourcesPreset",
            "Preset key 'huge' invalid",
        ),
        (
            json!({"nodeGroups": {"md0": {"minReplicas": 5, "maxReplicas": 2}}}),
            "spec.nodeGroups[md0].minReplicas",
            "maxReplicas",
        ),
    ];
    for (spec, field, message) in cases {
        let r = tcs
            .create(
                &Default::default(),
                &object("TenantCluster", "bad", spec.clone()),
            )
            .await;
        let s = api_error(r);
        assert_eq!(s.code, 422, "{spec}: {s:?}");
        assert_eq!(s.reason, "Invalid");
        let causes = s
            .details
            .as_ref()
            .map(|d| d.causes.clone())
            .unwrap_or_default();
        assert!(
            causes
                .iter()
                .any(|c| c.field.starts_with(field) && c.message.contains(message)),
            "{spec}: no cause at {field} with {message:?} in {causes:?}"
        );
    }
    // Outside a tenant namespace.
    let r = tenant_clusters(&h.root, "default")
        .create(
            &Default::default(),
            &object("TenantCluster", "x", json!({})),
        )
        .await;
    assert_eq!(api_error(r).code, 422);
    // storageClass is immutable (the CRD's CEL transition rule).
    tcs.create(
        &kube::api::PostParams::default(),
        &object("TenantCluster", "ok", json!({"storageClass": "fast"})),
    )
    .await
    .expect("a valid cluster");
    let r = tcs
        .patch(
            "ok",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"storageClass": "slow"}})),
        )
        .await;
    let s = api_error(r);
    assert_eq!(s.code, 422);
    assert!(
        s.message.contains("storageClass is immutable"),
        "{}",
        s.message
    );
    // Updates are validated too.
    let r = tcs
        .patch(
            "ok",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"version": "v1.29"}})),
        )
        .await;
    assert!(api_error(r).message.contains("allowed versions are"));
    // Tenants: names without dashes.
    let r = tenants(&h.root, "tenant-root")
        .create(&Default::default(), &object("Tenant", "foo-bar", json!({})))
        .await;
    let s = api_error(r);
    assert_eq!(s.code, 422);
    assert!(s.message.contains("^[a-z][a-z0-9]*$"), "{}", s.message);
    h.stop().await;
}

async fn get_text(client: &kube::Client, path: &str, accept: &str) -> String {
    let req = http::Request::get(path)
        .header("accept", accept)
        .body(Vec::new())
        .expect("a request");
    client.request_text(req).await.expect(path)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_crds_publish_descriptions_and_print_ready_version_nodes_and_age() {
    let h = Harness::start().await;
    // kubectl explain reads the OpenAPI v3 document of the group.
    // The document follows the CRD's establishment (as upstream, asynchronously).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let tc = loop {
        let doc = get_text(
            &h.root,
            "/openapi/v3/apis/platform.matryoshka.dev/v1alpha1",
            "application/json",
        )
        .await;
        let doc: Value = serde_json::from_str(&doc).expect("json");
        let found = doc["components"]["schemas"]
            .as_object()
            .and_then(|s| s.iter().find(|(k, _)| k.ends_with("TenantCluster")))
            .map(|(_, v)| v.clone());
        match found {
            Some(tc) => break tc,
            None => assert!(
                std::time::Instant::now() < deadline,
                "the TenantCluster schema is published"
            ),
        }
        tokio::task::yield_now().await;
    };
    let version = &tc["properties"]["spec"]["properties"]["version"];
    assert!(
        version["description"]
            .as_str()
            .unwrap_or("")
            .contains("v1.31"),
        "{version}"
    );
    // kubectl get prints the CRD's columns.
    tenant_clusters(&h.root, "tenant-root")
        .create(
            &Default::default(),
            &object("TenantCluster", "t", json!({})),
        )
        .await
        .expect("create");
    let table = get_text(
        &h.root,
        "/apis/platform.matryoshka.dev/v1alpha1/namespaces/tenant-root/tenantclusters",
        "application/json;as=Table;v=v1;g=meta.k8s.io",
    )
    .await;
    let table: Value = serde_json::from_str(&table).expect("json");
    let names: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .expect("columns")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(names, ["Name", "Ready", "Version", "Nodes", "Age"]);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_clusters_kubeconfig_secret_is_reissued_before_its_certificates_expire() {
    let h = Harness::start_with(platform::Options {
        client_cert_validity: std::time::Duration::from_secs(6),
        ..Default::default()
    })
    .await;
    create_tenant(&h.root, "tenant-root", "bar", json!({})).await;
    await_condition(&tenants(&h.root, "tenant-root"), "bar", "Ready").await;
    let tcs = tenant_clusters(&h.root, "tenant-bar");
    tcs.create(
        &Default::default(),
        &object(
            "TenantCluster",
            "short",
            json!({"nodeGroups": {"md0": {"minReplicas": 0, "maxReplicas": 1}}}),
        ),
    )
    .await
    .expect("create the TenantCluster");
    await_condition(&tcs, "short", "Ready").await;
    let secrets: Api<Secret> = Api::namespaced(h.root.clone(), "tenant-bar");
    let admin_conf = async || {
        let s = secrets
            .get("kubernetes-short-admin-kubeconfig")
            .await
            .expect("the kubeconfig secret");
        String::from_utf8(s.data.unwrap()["admin.conf"].0.clone()).unwrap()
    };
    let mut seen = vec![admin_conf().await];
    for _ in 0..2 {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(15);
        let next = loop {
            let now = admin_conf().await;
            if Some(&now) != seen.last() {
                break now;
            }
            assert!(tokio::time::Instant::now() < deadline, "never re-issued");
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        };
        // Re-issued before the previous certificate expired, and the new one works.
        let previous = pki::kubeconfig_client_cert(seen.last().unwrap()).unwrap();
        let (_, expires) = pki::validity_of(&previous).unwrap();
        assert!(std::time::SystemTime::now() < expires);
        let client = kube::Client::try_from(kubeconfig_client_config(&next).await).unwrap();
        let ns: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client);
        ns.get("default")
            .await
            .expect("the re-issued kubeconfig works");
        seen.push(next);
    }
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_backups_run_on_their_schedule_and_keep_only_the_retained_ones() {
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::start_with(platform::Options {
        backup_dir: Some(dir.path().to_path_buf()),
        backup_min_interval: std::time::Duration::from_secs(2),
        ..Default::default()
    })
    .await;
    create_tenant(&h.root, "tenant-root", "bk", json!({})).await;
    await_condition(&tenants(&h.root, "tenant-root"), "bk", "Ready").await;
    let tcs = tenant_clusters(&h.root, "tenant-bk");
    tcs.create(
        &Default::default(),
        &object(
            "TenantCluster",
            "db",
            json!({"nodeGroups": {"md0": {"minReplicas": 0, "maxReplicas": 1}}}),
        ),
    )
    .await
    .expect("create the TenantCluster");
    await_condition(&tcs, "db", "Ready").await;
    let backups: Api<kube::api::DynamicObject> = Api::namespaced_with(
        h.root.clone(),
        "tenant-bk",
        &resource("ClusterBackup", "clusterbackups"),
    );
    let create = |name: &str, spec: Value| {
        let b = object("ClusterBackup", name, spec);
        let backups = backups.clone();
        async move {
            backups
                .create(&Default::default(), &b)
                .await
                .expect("create the ClusterBackup")
        }
    };
    // A schedule that is not one is refused with its field.
    let bad = backups
        .create(
            &Default::default(),
            &object(
                "ClusterBackup",
                "bad",
                json!({"cluster": "db", "schedule": "every day"}),
            ),
        )
        .await
        .expect_err("an unparseable schedule is refused");
    match bad {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 422);
            assert!(s.message.contains("spec.schedule"), "{}", s.message);
        }
        other => panic!("{other}"),
    }
    // Every second (but at most every 2 s, the platform's minimum), two kept.
    create(
        "nightly",
        json!({"cluster": "db", "schedule": "@every 1s", "retention": 2}),
    )
    .await;
    // Once.
    create("once", json!({"cluster": "db"})).await;
    // A cluster that does not exist waits, saying so.
    create("nowhere", json!({"cluster": "absent"})).await;

    let files = || -> Vec<std::path::PathBuf> {
        std::fs::read_dir(dir.path().join("tenant-bk").join("db"))
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default()
    };
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut seen = std::collections::BTreeSet::new();
    let nightly = loop {
        let b = backups.get("nightly").await.unwrap();
        let kept = b.data["status"]["backups"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        seen.extend(
            kept.iter()
                .filter_map(|k| k["file"].as_str().map(String::from)),
        );
        // Three taken at least: the first is gone, two are kept.
        if kept.len() == 2 && seen.len() >= 3 {
            break b;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{:?}",
            b.data["status"]
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    let first = seen.iter().next().unwrap();
    assert!(
        !std::path::Path::new(first).exists(),
        "{first} was kept beyond the retention"
    );
    // `@every 1s`, but never more often than the platform's minimum interval (2 s here).
    let times: Vec<i64> = nightly.data["status"]["backups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| apimachinery::time::parse_unix_seconds(b["time"].as_str().unwrap()).unwrap())
        .collect();
    assert!(times[1] - times[0] >= 2, "{times:?}");
    // Kept files exist and are whole backups; one file is the single "once" backup.
    let kept: Vec<String> = nightly.data["status"]["backups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["file"].as_str().unwrap().to_string())
        .collect();
    for f in &kept {
        let text = std::fs::read_to_string(f).unwrap();
        assert!(text.starts_with("{\"format\":\"matryoshka.dev/cluster-backup/v1\""));
        assert!(text.trim_end().ends_with("}}") && text.contains("{\"end\":{\"keys\":"));
    }
    let once = backups.get("once").await.unwrap();
    assert_eq!(once.data["status"]["backups"].as_array().unwrap().len(), 1);
    // On disk: what the two ClusterBackups keep (and at most one being written).
    let kept_now: Vec<String> = backups.get("nightly").await.unwrap().data["status"]["backups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["file"].as_str().unwrap().to_string())
        .collect();
    assert!(files().len() <= kept_now.len() + 2, "{:?}", files());
    let nowhere = backups.get("nowhere").await.unwrap();
    assert_eq!(
        nowhere.data["status"]["conditions"][0]["reason"],
        "ClusterNotReady"
    );
    // The outcome is told as Events.
    let events: Api<k8s_openapi::api::core::v1::Event> =
        Api::namespaced(h.root.clone(), "tenant-bk");
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let list = events.list(&Default::default()).await.unwrap();
        if list
            .items
            .iter()
            .any(|e| e.reason.as_deref() == Some("BackupCreated"))
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no BackupCreated event"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    h.stop().await;
}
