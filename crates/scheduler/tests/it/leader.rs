//! The entry point `matryoshka up` spawns: in process, with leader election on the
//! `kube-system/kube-scheduler` Lease of the root cluster.

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use serde_json::json;

use crate::common::Harness;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_schedules_while_it_holds_the_kube_scheduler_lease() {
    let h = Harness::without_scheduler(&["a"]).await;
    let (stop, stopped) = runtime::shared::Shutdown::new();
    let running = tokio::spawn(scheduler::run(
        runtime::client::ClusterClients::in_memory(apiserver::local::LocalService::system(
            h.server.clone(),
        )),
        scheduler::Options::default().with_leader_election("replica-1"),
        stopped.wait(),
    ));
    h.node("a", "n1", "2", "4Gi", json!({})).await;
    h.pod("a", "p", "100m", json!({})).await;
    assert_eq!(h.bound("a", "p").await, "n1");
    let lease = Api::<Lease>::namespaced(h.client("root"), "kube-system")
        .get("kube-scheduler")
        .await
        .expect("the lease exists");
    assert_eq!(
        lease.spec.and_then(|s| s.holder_identity).as_deref(),
        Some("replica-1")
    );
    stop.trigger();
    tokio::time::timeout(crate::common::PATIENCE, running)
        .await
        .expect("stops")
        .expect("join")
        .expect("no error");
}
