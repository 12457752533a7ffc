//! kubectl 1.27 … 1.33 against a real `matryoshka up`: every version runs every script of
//! `tests/kubectl` (commands and what kubectl must print, see `support/script.rs`), each on a
//! fresh logical cluster, on the embedded store and on a real etcd; then restarts and drains.

mod support;

#[path = "support/script.rs"]
mod script;

use std::sync::Mutex;
use std::time::Duration;

use script::Script;
use support::{Backend, KUBECTL_VERSIONS, Kubectl, Server, logical_cluster};

/// Runs every script of `tests/kubectl` with every kubectl version, each on a fresh logical
/// cluster of `server`, a few at a time; every failure is reported.
fn run_scripts(server: &Server) {
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kubectl");
    let scripts = Script::load_dir(&fixtures);
    assert!(scripts.len() >= 8, "the kubectl scripts are missing");
    let root = server.kubectl("1.33");
    let jobs: Vec<(&str, usize)> = KUBECTL_VERSIONS
        .iter()
        .flat_map(|v| (0..scripts.len()).map(move |i| (*v, i)))
        .collect();
    let queue = Mutex::new(jobs);
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..6 {
            s.spawn(|| {
                loop {
                    let Some((version, i)) = queue.lock().expect("queue").pop() else {
                        return;
                    };
                    let script = &scripts[i];
                    let dir = tempfile::tempdir().expect("tempdir");
                    let cluster = format!("k{}-{i:02}", version.replace('.', ""));
                    let conf = logical_cluster(&root, dir.path(), &cluster);
                    let k = Kubectl::new(version, &conf);
                    if let Err(e) = script.run(&k, dir.path(), &fixtures, &cluster) {
                        failures
                            .lock()
                            .expect("failures")
                            .push(format!("{} with kubectl {version}: {e}", script.name));
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().expect("failures");
    assert!(
        failures.is_empty(),
        "{} kubectl scripts failed:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

#[test]
fn every_kubectl_version_runs_every_script_against_the_embedded_store() {
    let server = Server::start(Backend::Embedded);
    run_scripts(&server);
}

#[test]
fn every_kubectl_version_runs_every_script_against_etcd() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let etcd = rt.block_on(storage::testkit::EtcdServer::start());
    let server = Server::start(Backend::Etcd(etcd.endpoint.clone()));
    run_scripts(&server);
    drop(server);
    drop(etcd);
}

#[test]
fn a_restarted_server_keeps_every_acknowledged_write() {
    let mut server = Server::start(Backend::Embedded);
    let k: Kubectl = server.kubectl("1.33");
    for i in 0..20 {
        k.run(&[
            "create",
            "configmap",
            &format!("keep-{i}"),
            "--from-literal",
            &format!("i={i}"),
        ])
        .ok();
    }
    server.kill9();
    server.launch();
    let k: Kubectl = server.kubectl("1.33");
    for i in 0..20 {
        k.run(&[
            "get",
            "cm",
            &format!("keep-{i}"),
            "-o",
            "jsonpath={.data.i}",
        ])
        .ok()
        .out(&i.to_string());
    }
}

#[test]
fn sigterm_drains_and_exits_cleanly_and_the_data_survives() {
    let mut server = Server::start(Backend::Embedded);
    let k = server.kubectl("1.33");
    k.run(&["create", "configmap", "before-term"]).ok();
    let mut watch = k.spawn(&["get", "cm", "-w"]);
    k.eventually(
        &["get", "cm", "before-term", "-o", "name"],
        Duration::from_secs(5),
        |r| r.code == 0,
    );
    let status = server.terminate();
    assert!(
        status.success(),
        "matryoshka exits 0 on SIGTERM: {status}\n{}",
        server.log()
    );
    // The watch ended with the server.
    let code = watch.wait().expect("kubectl exits");
    assert!(code.code().is_some());
    server.launch();
    server
        .kubectl("1.33")
        .run(&["get", "cm", "before-term"])
        .ok();
}
