//! kube-rs against a real `matryoshka up` over HTTPS: a watcher and reflector see every event
//! while objects churn, and server-side apply through `Patch::Apply`.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Client, Config};
use support::{Backend, Server};

async fn client(server: &Server) -> Client {
    let kc = kube::config::Kubeconfig::read_from(server.kubeconfig()).expect("admin.conf parses");
    let cfg = Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("config");
    Client::try_from(cfg).expect("client")
}

fn cm(name: &str, v: &str) -> ConfigMap {
    ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([("v".to_string(), v.to_string())])),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reflector_sees_every_change_while_objects_churn() {
    let server = Server::start(Backend::Embedded);
    let client = client(&server).await;
    let ns = "kube-rs-churn";
    let nss: Api<Namespace> = Api::all(client.clone());
    nss.create(
        &PostParams::default(),
        &Namespace {
            metadata: kube::api::ObjectMeta {
                name: Some(ns.into()),
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .await
    .expect("namespace");
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let (reader, writer) = reflector::store::<ConfigMap>();
    let stream = reflector(writer, watcher(api.clone(), watcher::Config::default()))
        .applied_objects()
        .boxed();
    // Drive the reflector for the whole test; report each applied object.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let driver = tokio::spawn(async move {
        let mut stream = stream;
        while let Some(Ok(o)) = stream.next().await {
            let name = o.metadata.name.clone().unwrap_or_default();
            let v = o
                .data
                .as_ref()
                .and_then(|d| d.get("v"))
                .cloned()
                .unwrap_or_default();
            // Keep driving the reflector after the checker has seen enough.
            let _ = tx.send((name, v));
        }
    });
    let seen = tokio::spawn(async move {
        let mut versions: BTreeMap<String, Vec<String>> = BTreeMap::new();
        while let Some((name, v)) = rx.recv().await {
            versions.entry(name).or_default().push(v);
            if versions
                .values()
                .filter(|vs| vs.last().map(String::as_str) == Some("3"))
                .count()
                == 40
            {
                break;
            }
        }
        versions
    });
    reader
        .wait_until_ready()
        .await
        .expect("the reflector syncs");
    // 40 objects, each created and then updated twice, by 8 concurrent writers; 20 extra
    // objects are created and deleted.
    let mut tasks = Vec::new();
    for w in 0..8 {
        let api = api.clone();
        tasks.push(tokio::spawn(async move {
            for i in (w..40).step_by(8) {
                let name = format!("churn-{i:02}");
                api.create(&PostParams::default(), &cm(&name, "1"))
                    .await
                    .expect("create");
                for v in ["2", "3"] {
                    let patch = serde_json::json!({"data": {"v": v}});
                    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                        .expect("patch");
                }
            }
            for i in (w..20).step_by(8) {
                let name = format!("gone-{i:02}");
                api.create(&PostParams::default(), &cm(&name, "x"))
                    .await
                    .expect("create");
                api.delete(&name, &DeleteParams::default())
                    .await
                    .expect("delete");
            }
        }));
    }
    for t in tasks {
        t.await.expect("writer");
    }
    let versions = tokio::time::timeout(Duration::from_secs(30), seen)
        .await
        .expect("all events arrive")
        .expect("task");
    for i in 0..40 {
        let vs = &versions[&format!("churn-{i:02}")];
        assert_eq!(
            vs,
            &["1", "2", "3"],
            "churn-{i:02} went through every version in order"
        );
    }
    // The store converges to exactly the live objects.
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            // kube-root-ca.crt is the root CA publisher's: only the test's objects count.
            let names: Vec<String> = reader
                .state()
                .iter()
                .filter_map(|o| o.metadata.name.clone())
                .filter(|n| n != "kube-root-ca.crt")
                .collect();
            if names.len() == 40 && names.iter().all(|n| n.starts_with("churn-")) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap_or_else(|_| {
        let names: Vec<String> = reader
            .state()
            .iter()
            .filter_map(|o| o.metadata.name.clone())
            .collect();
        panic!(
            "the reflector store holds {} objects, not exactly the 40 live ones: {names:?}",
            names.len()
        )
    });
    driver.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_apply_creates_updates_and_records_the_field_manager() {
    let server = Server::start(Backend::Embedded);
    let client = client(&server).await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let pp = PatchParams::apply("kube-rs-test");
    let applied = api
        .patch("applied", &pp, &Patch::Apply(&cm("applied", "one")))
        .await
        .expect("apply creates");
    assert_eq!(applied.data.unwrap()["v"], "one");
    let mf = applied.metadata.managed_fields.unwrap();
    assert_eq!(mf[0].manager.as_deref(), Some("kube-rs-test"));
    assert_eq!(mf[0].operation.as_deref(), Some("Apply"));
    let updated = api
        .patch("applied", &pp, &Patch::Apply(&cm("applied", "two")))
        .await
        .expect("apply updates");
    assert_eq!(updated.data.unwrap()["v"], "two");
    // Another manager changing the same field conflicts unless forced.
    let other = PatchParams::apply("someone-else");
    let err = api
        .patch("applied", &other, &Patch::Apply(&cm("applied", "three")))
        .await
        .expect_err("a conflict");
    match err {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 409);
            assert!(s.message.contains("kube-rs-test"), "{}", s.message);
        }
        other => panic!("unexpected error: {other}"),
    }
    let forced = api
        .patch(
            "applied",
            &other.force(),
            &Patch::Apply(&cm("applied", "three")),
        )
        .await
        .expect("forced apply");
    assert_eq!(forced.data.unwrap()["v"], "three");
}
