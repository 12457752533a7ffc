//! The Python `kubernetes` client's `stream()` exec (v5 WebSocket, translated to SPDY by the
//! API server; return codes from the error channel) and `portforward()` (the legacy
//! WebSocket protocol, passed through to the kubelet) against the in-process API server and
//! a fake node (`tests/python/stream_test.py`).

mod fake;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use fake::{Cluster, FakeNode};

async fn http_server() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let mut seen = Vec::new();
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tcp.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                let body = "hello from the pod";
                let reply = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = tcp.write_all(reply.as_bytes()).await;
            });
        }
    });
    port
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_client_streams_exec_and_port_forward() {
    let cluster = Cluster::start().await;
    let node = FakeNode::start(&cluster, "node-1").await;
    node.run_pod("shell", &[("sh", &[])], None).await;
    let port = http_server().await;
    node.run_pod("web", &[("c", &[])], Some(port)).await;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python");
    let out = tokio::time::timeout(
        fake::T * 4,
        tokio::process::Command::new("python3")
            .args(["-m", "unittest", "-v", "stream_test"])
            .current_dir(&dir)
            .env("KUBECONFIG", cluster.kubeconfig())
            .env("POD_PORT", port.to_string())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the Python suite finished")
    .expect("python3 runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the Python streaming suite failed:\n{stderr}\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(stderr.contains("Ran 4 tests"), "{stderr}");
}
