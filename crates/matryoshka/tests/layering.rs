//! The layering of the workspace, read from `cargo metadata`: the architecture invariants
//! ARCHITECTURE.md states about which crate may depend on which, checked so they cannot become
//! false without a failing test.
//!
//! Only normal dependencies count: tests of a client crate may start an in-process API server
//! (a dev-dependency), the code itself may not reach it, directly or through another
//! workspace crate.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// Normal (non-dev, non-build) dependencies of every workspace crate, by crate name.
fn dependencies() -> BTreeMap<String, BTreeSet<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata is JSON");
    let mut crates = BTreeMap::new();
    for p in meta["packages"].as_array().expect("packages") {
        let deps = p["dependencies"]
            .as_array()
            .expect("dependencies")
            .iter()
            .filter(|d| d["kind"].is_null())
            .map(|d| d["name"].as_str().expect("a name").to_string())
            .collect();
        crates.insert(p["name"].as_str().expect("a name").to_string(), deps);
    }
    crates
}

/// Every crate of `crates` that depends on one of `forbidden`, with what it depends on.
fn violations(
    all: &BTreeMap<String, BTreeSet<String>>,
    crates: &[&str],
    forbidden: &[&str],
) -> Vec<String> {
    let mut found = Vec::new();
    for c in crates {
        let deps = all
            .get(*c)
            .unwrap_or_else(|| panic!("crate {c} is not in the workspace"));
        for f in forbidden {
            if deps.contains(*f) {
                found.push(format!("{c} depends on {f}"));
            }
        }
    }
    found
}

#[test]
fn api_clients_depend_on_nothing_of_the_server() {
    let all = dependencies();
    // The metadata is read at all: a client's own runtime dependency is seen.
    assert!(all["controllers"].contains("runtime"), "{all:?}");
    let clients = [
        "runtime",
        "controllers",
        "scheduler",
        "node",
        "platform",
        "machines",
        "lb",
        "syncer",
        "ingress",
        "nodenet",
        "dns",
        "streaming",
        "console",
    ];
    let server = [
        "apiserver",
        "controlplane",
        "registry",
        "storage",
        "crd",
        "openapi",
        "pbcodec",
        "printers",
    ];
    assert_eq!(violations(&all, &clients, &server), Vec::<String>::new());
    // Nor through another workspace crate (platform → node → apiserver would be as bad).
    let mut indirect = Vec::new();
    for c in clients {
        for (via, dep) in reachable(&all, c) {
            if server.contains(&dep.as_str()) {
                indirect.push(format!("{c} depends on {dep} through {via}"));
            }
        }
    }
    assert_eq!(indirect, Vec::<String>::new());
}

/// The workspace crates `krate` reaches through other workspace crates, each with the direct
/// dependency it is reached through.
fn reachable(all: &BTreeMap<String, BTreeSet<String>>, krate: &str) -> Vec<(String, String)> {
    let mut seen = BTreeSet::new();
    let mut found = Vec::new();
    let direct = all.get(krate).into_iter().flatten();
    let mut todo: Vec<(String, String)> = direct
        .filter(|d| all.contains_key(*d))
        .map(|d| (d.clone(), d.clone()))
        .collect();
    while let Some((via, k)) = todo.pop() {
        for d in all.get(&k).into_iter().flatten() {
            if all.contains_key(d) && seen.insert(d.clone()) {
                found.push((via.clone(), d.clone()));
                todo.push((via.clone(), d.clone()));
            }
        }
    }
    found
}

#[test]
fn storage_knows_nothing_of_http_or_kinds() {
    let all = dependencies();
    let forbidden = [
        "apimachinery",
        "registry",
        "http",
        "hyper",
        "hyper-util",
        "kube",
        "k8s-openapi",
    ];
    assert_eq!(
        violations(&all, &["storage"], &forbidden),
        Vec::<String>::new()
    );
}

#[test]
fn the_pure_layers_do_no_io_and_speak_no_http() {
    let all = dependencies();
    let pure = [
        "apimachinery",
        "openapi",
        "pbcodec",
        "printers",
        "rbac",
        "crd",
        "pki",
    ];
    let io = ["tokio", "http", "hyper", "hyper-util", "kube", "storage"];
    assert_eq!(violations(&all, &pure, &io), Vec::<String>::new());
}

#[test]
fn only_the_api_server_serves_http_among_the_control_plane_crates() {
    let all = dependencies();
    let control_plane = ["storage", "registry", "crd", "rbac", "pki"];
    let servers = ["hyper", "hyper-util"];
    assert_eq!(
        violations(&all, &control_plane, &servers),
        Vec::<String>::new()
    );
    // The client side builds connections with hyper's client (as kube-rs does, for a
    // kubeconfig whose certificate is renewed): it never listens or serves.
    assert_eq!(serving("../runtime/src"), Vec::<String>::new());
}

/// The sources under `dir` (relative to this crate) that listen or serve connections.
fn serving(dir: &str) -> Vec<String> {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut serving = Vec::new();
    let mut dirs = vec![src];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("the sources") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("a source file");
            for needle in [
                "TcpListener",
                "hyper::server",
                "serve_connection",
                "UnixListener",
            ] {
                if text.contains(needle) {
                    serving.push(format!("{} uses {needle}", path.display()));
                }
            }
        }
    }
    serving
}

#[test]
fn the_control_plane_knows_nothing_of_the_api_servers_http_side() {
    let all = dependencies();
    // Requests, routes, media types, compression, query strings, YAML bodies and connection
    // upgrades are the API server's; the control plane gets objects.
    let http_side = [
        "apiserver",
        "streaming",
        "tower",
        "flate2",
        "form_urlencoded",
        "serde-saphyr",
        "pbcodec",
        "printers",
    ];
    assert_eq!(
        violations(&all, &["controlplane"], &http_side),
        Vec::<String>::new()
    );
    // It calls webhooks as an HTTP client; it never listens or serves a connection.
    assert_eq!(serving("../controlplane/src"), Vec::<String>::new());
}

#[test]
fn apimachinery_is_the_bottom_of_the_workspace() {
    let all = dependencies();
    let workspace: Vec<&str> = all.keys().map(String::as_str).collect();
    assert_eq!(
        violations(&all, &["apimachinery"], &workspace),
        Vec::<String>::new()
    );
}

#[test]
fn the_registry_speaks_no_http_and_the_test_program_stays_small() {
    let all = dependencies();
    let http = [
        "http",
        "hyper",
        "hyper-util",
        "kube",
        "apiserver",
        "registry",
    ];
    assert_eq!(violations(&all, &["oci"], &http), Vec::<String>::new());
    // The test program runs in images without libc: std, rustls, safe syscalls, signals, and
    // serde_json (pure Rust) for the admission reviews its webhook server reads.
    let mtest: Vec<&String> = all["mtest"].iter().collect();
    assert_eq!(
        mtest,
        ["rustix", "rustls", "serde_json", "signal-hook"],
        "{mtest:?}"
    );
}
