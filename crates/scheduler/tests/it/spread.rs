//! Spreading: topology spread constraints across zones and anti-affinity across hosts.

use std::collections::BTreeMap;

use serde_json::json;

use crate::common::Harness;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topology_spread_balances_pods_across_zones() {
    let h = Harness::start(&[]).await;
    for (n, zone) in [("a1", "a"), ("a2", "a"), ("b1", "b"), ("c1", "c")] {
        h.node(
            "root",
            n,
            "8",
            "16Gi",
            json!({"metadata": {"labels": {"zone": zone}}}),
        )
        .await;
    }
    // A big node without the zone label: never eligible for a constrained pod.
    h.node("root", "unlabelled", "64", "128Gi", json!({})).await;
    let spread = json!({
        "metadata": {"labels": {"app": "web"}},
        "spec": {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone",
            "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}}}]}
    });
    for i in 0..6 {
        h.pod("root", &format!("web-{i}"), "100m", spread.clone())
            .await;
    }
    let mut zones = BTreeMap::<String, usize>::new();
    for i in 0..6 {
        let node = h.bound("root", &format!("web-{i}")).await;
        assert_ne!(node, "unlabelled");
        *zones.entry(node[..1].to_string()).or_default() += 1;
    }
    assert_eq!(
        zones,
        BTreeMap::from([("a".into(), 2), ("b".into(), 2), ("c".into(), 2)])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topology_spread_rejects_a_pod_that_would_exceed_the_skew() {
    let h = Harness::start(&[]).await;
    h.node(
        "root",
        "a1",
        "8",
        "16Gi",
        json!({"metadata": {"labels": {"zone": "a"}}}),
    )
    .await;
    h.node(
        "root",
        "b1",
        "1",
        "16Gi",
        json!({"metadata": {"labels": {"zone": "b"}}}),
    )
    .await;
    // Zone b holds one pod at most (cpu), zone a has room: maxSkew 1 allows a 2-1 split only.
    let spread = |name: &str| {
        json!({"metadata": {"labels": {"app": "db"}, "name": name},
            "spec": {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone",
                "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "db"}}}]}})
    };
    for i in 0..3 {
        let name = format!("db-{i}");
        h.pod("root", &name, "600m", spread(&name)).await;
        h.bound("root", &name).await;
    }
    h.pod("root", "db-3", "600m", spread("db-3")).await;
    assert_eq!(
        h.unschedulable("root", "db-3").await,
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match pod topology spread \
         constraints. preemption: 0/2 nodes are available: 2 No preemption victims found for \
         incoming pod."
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn required_anti_affinity_puts_each_replica_on_its_own_node() {
    let h = Harness::start(&[]).await;
    for n in ["h1", "h2", "h3"] {
        h.node(
            "root",
            n,
            "8",
            "16Gi",
            json!({"metadata": {"labels": {"kubernetes.io/hostname": n}}}),
        )
        .await;
    }
    let replica = json!({
        "metadata": {"labels": {"app": "cache"}},
        "spec": {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": "kubernetes.io/hostname"}]}}}
    });
    for i in 0..4 {
        h.pod("root", &format!("cache-{i}"), "100m", replica.clone())
            .await;
    }
    let mut nodes = Vec::new();
    let mut pending = Vec::new();
    for i in 0..4 {
        let name = format!("cache-{i}");
        let pod = h
            .wait_pod("root", &name, |p| {
                p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some()
                    || crate::common::scheduled_condition(p).is_some()
            })
            .await;
        match pod.spec.unwrap().node_name {
            Some(n) => nodes.push(n),
            None => pending.push(name),
        }
    }
    nodes.sort();
    assert_eq!(nodes, vec!["h1", "h2", "h3"]);
    assert_eq!(pending.len(), 1);
    assert_eq!(
        h.unschedulable("root", &pending[0]).await,
        "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules. preemption: \
         0/3 nodes are available: 3 No preemption victims found for incoming pod."
    );
}
