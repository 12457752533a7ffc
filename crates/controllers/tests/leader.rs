//! Lease-based leader election: one candidate leads, a released lease passes on, and of two
//! controller managers over one server only the leader runs controllers.

mod common;

use std::time::Duration;

use common::{CA_PEM, PATIENCE, wait_for};
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{Api, PostParams};
use kube::runtime::watcher;
use runtime::client::ClusterClients;
use runtime::leader::{LeaderConfig, LeaderElector};
use runtime::shared::Shutdown;
use serde_json::json;

fn fast(identity: &str) -> LeaderConfig {
    let mut c = LeaderConfig::new(identity);
    c.lease_duration = Duration::from_secs(1);
    c.renew_deadline = Duration::from_millis(700);
    c.retry_period = Duration::from_millis(100);
    c
}

#[tokio::test]
async fn one_candidate_holds_the_lease_until_it_releases_it() {
    let (server, _dir) = common::server().await;
    let root = ClusterClients::in_memory(apiserver::local::LocalService::system(server))
        .cluster("root")
        .unwrap();
    let mut a = LeaderElector::new(root.clone(), LeaderConfig::new("a"));
    let mut b = LeaderElector::new(root.clone(), LeaderConfig::new("b"));
    assert!(a.try_acquire_or_renew().await.unwrap());
    assert!(
        !b.try_acquire_or_renew().await.unwrap(),
        "b may not take a held lease"
    );
    assert!(a.try_acquire_or_renew().await.unwrap(), "a renews");
    a.release().await.unwrap();
    assert!(
        b.try_acquire_or_renew().await.unwrap(),
        "a released lease is free"
    );
    let lease = Api::<Lease>::namespaced(root, "kube-system")
        .get("matryoshka-controller-manager")
        .await
        .unwrap();
    let spec = lease.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("b"));
    assert_eq!(spec.lease_transitions, Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_two_managers_only_the_leader_runs_and_the_other_takes_over() {
    let (server, _dir) = common::server().await;
    let start = |identity: &str| {
        let mut o = controllers::Options::default().with_ca(CA_PEM);
        o.leader_election = Some(fast(identity));
        let (stop, shutdown) = Shutdown::new();
        let s = server.clone();
        let task = tokio::spawn(async move {
            controllers::run(common::clients(&s), o, shutdown.wait())
                .await
                .unwrap()
        });
        (stop, task)
    };
    let root = ClusterClients::in_memory(apiserver::local::LocalService::system(server.clone()))
        .cluster("root")
        .unwrap();
    let (stop_a, task_a) = start("a");
    let sa: Api<ServiceAccount> = Api::namespaced(root.clone(), "default");
    wait_for(&sa, "default", "a to lead and run", |s| s.is_some()).await;
    // Count watches on lease renewals seen through one long-lived watch, so no test watch
    // opens or closes between the two counts.
    let leases: Api<Lease> = Api::namespaced(root.clone(), "kube-system");
    let mut renewals = watcher::watcher(leases.clone(), watcher::Config::default()).boxed();
    let mut renewed_by_a = async |n: usize| {
        let mut seen = 0;
        while seen < n {
            let ev = tokio::time::timeout(PATIENCE, renewals.next())
                .await
                .unwrap()
                .unwrap()
                .unwrap();
            if let watcher::Event::Apply(l) = ev
                && l.spec.and_then(|s| s.holder_identity).as_deref() == Some("a")
            {
                seen += 1;
            }
        }
    };
    renewed_by_a(2).await;
    let watches_one = server.store().shared_cache().watcher_count();
    let (stop_b, task_b) = start("b");
    // b campaigns and fails while a renews: the watches stay those of one manager.
    renewed_by_a(5).await;
    assert_eq!(
        server.store().shared_cache().watcher_count(),
        watches_one,
        "b runs no controllers"
    );
    drop(renewals);

    stop_a.trigger();
    tokio::time::timeout(PATIENCE, task_a)
        .await
        .unwrap()
        .unwrap();
    wait_for(
        &leases,
        "matryoshka-controller-manager",
        "b to take over",
        |l| {
            l.and_then(|l| l.spec.as_ref())
                .and_then(|s| s.holder_identity.as_deref())
                == Some("b")
        },
    )
    .await;
    let ns: Api<Namespace> = Api::all(root.clone());
    ns.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "later"}})).unwrap(),
    )
    .await
    .unwrap();
    let later: Api<ServiceAccount> = Api::namespaced(root, "later");
    wait_for(&later, "default", "b to run the controllers", |s| {
        s.is_some()
    })
    .await;
    stop_b.trigger();
    tokio::time::timeout(PATIENCE, task_b)
        .await
        .unwrap()
        .unwrap();
}
