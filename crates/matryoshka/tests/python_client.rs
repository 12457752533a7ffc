//! The Python `kubernetes` client (installed from PyPI by the test command) against a real
//! `matryoshka up`: CRUD, generateName, label selectors, every patch type, pagination, watch
//! order, scale and error codes (`tests/python/client_test.py`).

mod support;

use std::process::Command;

use support::{Backend, Server};

#[test]
fn the_python_client_suite_passes() {
    let server = Server::start(Backend::Embedded);
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python");
    let out = Command::new("python3")
        .args(["-m", "unittest", "-v", "client_test"])
        .current_dir(&dir)
        .env("KUBECONFIG", server.kubeconfig())
        .output()
        .expect("python3 runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the Python client suite failed:\n{stderr}\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // Every test ran: unittest prints the count.
    assert!(stderr.contains("Ran 13 tests"), "{stderr}");
}
