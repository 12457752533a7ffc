//! The layering rules of ARCHITECTURE.md ("Invariants"), checked against what the manifests
//! declare (`cargo metadata`), so they cannot silently stop being true.
//!
//! Only normal dependencies count: tests may use anything (`[dev-dependencies]`). Rules about
//! workspace crates follow dependencies through other workspace crates (platform → node →
//! apiserver would break the client rule as surely as platform → apiserver); rules about
//! external crates look at what a crate declares itself, since the code of a crate can only
//! name what it declares (storage's etcd client speaks gRPC over HTTP/2 underneath, but storage
//! does not).
//!
//! Every workspace crate must be placed in a layer below; a new crate fails this test until it
//! is, so that no crate escapes the rules by being unknown.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use serde_json::Value;

/// Keys, bytes and revisions: the bottom.
const STORAGE: &[&str] = &["storage"];
/// Kubernetes vocabulary and PKI without I/O.
const VOCABULARY: &[&str] = &[
    "apimachinery",
    "openapi",
    "pbcodec",
    "printers",
    "rbac",
    "pki",
];
/// The server: resources over storage, custom resources, HTTP.
const SERVER: &[&str] = &["registry", "crd", "apiserver"];
/// API clients only.
const CLIENTS: &[&str] = &["runtime", "controllers", "scheduler", "node", "platform"];
/// Binaries that wire the layers together.
const BINARIES: &[&str] = &["matryoshka", "bench"];

/// Crates that speak HTTP (types, bodies, clients or servers, tower middleware).
const HTTP: &[&str] = &[
    "http",
    "http-body",
    "http-body-util",
    "hyper",
    "hyper-util",
    "tower",
    "tower-http",
    "axum",
    "reqwest",
    "tonic",
];
/// A server-side HTTP stack: connections, TLS on sockets.
const HTTP_SERVER: &[&str] = &["hyper", "hyper-util", "tokio-rustls", "axum", "tower-http"];
/// Crates that know Kubernetes kinds.
const KINDS: &[&str] = &["k8s-openapi", "k8s-pb", "kube", "kube-client", "kube-core"];
/// Async runtimes and I/O.
const ASYNC: &[&str] = &["tokio", "futures", "async-trait", "etcd-client"];

struct Workspace {
    /// Normal dependencies of each workspace crate, by name.
    deps: BTreeMap<String, BTreeSet<String>>,
    /// Whether a crate has a library target.
    libs: BTreeSet<String>,
}

impl Workspace {
    fn load() -> Workspace {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.toml");
        let out = Command::new(cargo)
            .args([
                "metadata",
                "--format-version",
                "1",
                "--no-deps",
                "--offline",
            ])
            .args(["--manifest-path", manifest])
            .output()
            .expect("cargo metadata runs");
        assert!(
            out.status.success(),
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let meta: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata is JSON");
        let mut deps = BTreeMap::new();
        let mut libs = BTreeSet::new();
        for pkg in meta["packages"].as_array().expect("packages") {
            let name = pkg["name"].as_str().expect("a package name").to_string();
            let normal: BTreeSet<String> = pkg["dependencies"]
                .as_array()
                .expect("dependencies")
                .iter()
                .filter(|d| d["kind"].is_null())
                .map(|d| d["name"].as_str().expect("a dependency name").to_string())
                .collect();
            let has_lib = pkg["targets"].as_array().expect("targets").iter().any(|t| {
                t["kind"]
                    .as_array()
                    .is_some_and(|k| k.iter().any(|k| k == "lib"))
            });
            if has_lib {
                libs.insert(name.clone());
            }
            deps.insert(name, normal);
        }
        Workspace { deps, libs }
    }

    fn direct(&self, krate: &str) -> &BTreeSet<String> {
        self.deps
            .get(krate)
            .unwrap_or_else(|| panic!("{krate} is not a workspace crate"))
    }

    /// The workspace crates `krate` depends on, directly or through other workspace crates.
    fn closure(&self, krate: &str) -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![krate.to_string()];
        while let Some(k) = todo.pop() {
            for d in self.direct(&k) {
                if self.deps.contains_key(d) && seen.insert(d.clone()) {
                    todo.push(d.clone());
                }
            }
        }
        seen
    }
}

/// Every violation of "`krate` declares none of `banned`", as messages.
fn declares_none(ws: &Workspace, krate: &str, banned: &[&str], what: &str) -> Vec<String> {
    ws.direct(krate)
        .iter()
        .filter(|d| banned.contains(&d.as_str()))
        .map(|d| format!("{krate} depends on {d} ({what})"))
        .collect()
}

fn assert_none(violations: Vec<String>) {
    assert!(
        violations.is_empty(),
        "layering rules broken (see ARCHITECTURE.md, Invariants):\n  {}",
        violations.join("\n  ")
    );
}

#[test]
fn every_workspace_crate_has_a_layer() {
    let ws = Workspace::load();
    let placed: BTreeSet<&str> = [STORAGE, VOCABULARY, SERVER, CLIENTS, BINARIES]
        .concat()
        .into_iter()
        .collect();
    let unplaced: Vec<&String> = ws
        .deps
        .keys()
        .filter(|k| !placed.contains(k.as_str()))
        .collect();
    assert!(
        unplaced.is_empty(),
        "put these crates in a layer of crates/matryoshka/tests/layering.rs: {unplaced:?}"
    );
    let stale: Vec<&&str> = placed
        .iter()
        .filter(|k| !ws.deps.contains_key(**k))
        .collect();
    assert!(stale.is_empty(), "no such workspace crates: {stale:?}");
}

#[test]
fn storage_knows_nothing_of_http_kinds_or_the_layers_above() {
    let ws = Workspace::load();
    let mut v = Vec::new();
    for s in STORAGE {
        v.extend(declares_none(&ws, s, HTTP, "an HTTP crate"));
        v.extend(declares_none(&ws, s, KINDS, "a Kubernetes-kinds crate"));
        for w in ws.closure(s) {
            v.push(format!("{s} depends on the workspace crate {w}"));
        }
    }
    assert_none(v);
}

#[test]
fn the_vocabulary_does_no_io_and_knows_no_server() {
    let ws = Workspace::load();
    let mut v = Vec::new();
    for c in VOCABULARY {
        v.extend(declares_none(&ws, c, HTTP, "an HTTP crate"));
        v.extend(declares_none(
            &ws,
            c,
            ASYNC,
            "an async runtime or I/O crate",
        ));
        for w in ws.closure(c) {
            if !VOCABULARY.contains(&w.as_str()) {
                v.push(format!("{c} depends on {w}, outside the vocabulary"));
            }
        }
    }
    assert_none(v);
}

#[test]
fn the_registry_speaks_objects_not_http() {
    let ws = Workspace::load();
    assert_none(declares_none(&ws, "registry", HTTP, "an HTTP crate"));
}

#[test]
fn clients_depend_on_no_server_crate() {
    let ws = Workspace::load();
    let mut v = Vec::new();
    for c in CLIENTS {
        for w in ws.closure(c) {
            if SERVER.contains(&w.as_str()) || STORAGE.contains(&w.as_str()) {
                v.push(format!(
                    "{c} depends on {w} (clients reach the server only over the API)"
                ));
            }
        }
        v.extend(declares_none(
            &ws,
            c,
            HTTP_SERVER,
            "a server-side HTTP stack",
        ));
    }
    assert_none(v);
}

#[test]
fn the_client_runtime_builds_on_the_vocabulary_alone() {
    let ws = Workspace::load();
    let v = ws
        .closure("runtime")
        .into_iter()
        .filter(|w| w != "apimachinery")
        .map(|w| format!("runtime depends on {w} (it may use apimachinery only)"))
        .collect();
    assert_none(v);
}

#[test]
fn only_the_api_server_among_libraries_runs_an_http_server() {
    let ws = Workspace::load();
    let mut v = Vec::new();
    for lib in &ws.libs {
        if lib != "apiserver" {
            v.extend(declares_none(
                &ws,
                lib,
                HTTP_SERVER,
                "a server-side HTTP stack",
            ));
        }
    }
    assert_none(v);
}
