//! Test support: a real etcd on loopback with a temporary data directory.
//!
//! Tests of the etcd backend (here and in the layers above) start etcd through [`EtcdServer`].
//! It fails loudly when the `etcd` binary is missing or does not start: the test command
//! installs it first, and a test never skips silently.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running etcd process, killed on drop (and by a watchdog if the test process dies first).
pub struct EtcdServer {
    child: Child,
    pub endpoint: String,
    _dir: tempfile::TempDir,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// TLS material of an etcd that requires client certificates (PEM).
pub struct Tls {
    pub ca_pem: String,
    pub server_cert_pem: String,
    pub server_key_pem: String,
    /// A client certificate of the CA, used to probe the server.
    pub client_cert_pem: String,
    pub client_key_pem: String,
}

impl Tls {
    /// Options that connect a client to the server with the client certificate.
    pub fn client_options(&self) -> etcd_client::ConnectOptions {
        etcd_client::ConnectOptions::new().with_tls(
            etcd_client::TlsOptions::new()
                .ca_certificate(etcd_client::Certificate::from_pem(&self.ca_pem))
                .identity(etcd_client::Identity::from_pem(
                    &self.client_cert_pem,
                    &self.client_key_pem,
                )),
        )
    }
}

impl EtcdServer {
    /// Starts etcd and waits until it answers.
    pub async fn start() -> EtcdServer {
        Self::start_with(None).await
    }

    /// Starts etcd serving `https` with `tls` (client certificates required) and waits until
    /// it answers.
    pub async fn start_tls(tls: &Tls) -> EtcdServer {
        Self::start_with(Some(tls)).await
    }

    async fn start_with(tls: Option<&Tls>) -> EtcdServer {
        let bin = std::env::var("ETCD_BIN").unwrap_or_else(|_| "etcd".into());
        let dir = tempfile::tempdir().expect("a temporary directory for etcd");
        let (client, peer) = (free_port(), free_port());
        let scheme = if tls.is_some() { "https" } else { "http" };
        let endpoint = format!("{scheme}://127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let mut cmd = Command::new(&bin);
        if let Some(tls) = tls {
            let write = |name: &str, pem: &str| {
                let path = dir.path().join(name);
                std::fs::write(&path, pem).expect("write etcd TLS material");
                path
            };
            cmd.arg("--cert-file")
                .arg(write("server.crt", &tls.server_cert_pem))
                .arg("--key-file")
                .arg(write("server.key", &tls.server_key_pem))
                .arg("--trusted-ca-file")
                .arg(write("ca.crt", &tls.ca_pem))
                .arg("--client-cert-auth");
        }
        let child = cmd
            .args(["--name", "test", "--data-dir"])
            .arg(dir.path().join("data"))
            .args([
                "--listen-client-urls",
                &endpoint,
                "--advertise-client-urls",
                &endpoint,
            ])
            .args([
                "--listen-peer-urls",
                &peer_url,
                "--initial-advertise-peer-urls",
                &peer_url,
            ])
            .args(["--initial-cluster", &format!("test={peer_url}")])
            .args([
                "--max-request-bytes",
                "4194304",
                "--quota-backend-bytes",
                "8589934592",
            ])
            .args(["--log-level", "error"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start etcd ({bin}): {e}; scripts/ensure-deps installs it")
            });
        // Kill etcd if this process dies without running destructors (statics, aborts).
        let _ = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "while kill -0 {parent} 2>/dev/null; do sleep 1; done; kill -9 {etcd} 2>/dev/null",
                parent = std::process::id(),
                etcd = child.id()
            ))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let mut server = EtcdServer {
            child,
            endpoint,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!("etcd exited at start: {status}");
            }
            let ok = async {
                let opts = tls.map(Tls::client_options);
                let mut c = etcd_client::Client::connect([server.endpoint.as_str()], opts)
                    .await
                    .ok()?;
                c.get("health-probe", None).await.ok()
            };
            if tokio::time::timeout(Duration::from_secs(2), ok)
                .await
                .ok()
                .flatten()
                .is_some()
            {
                return server;
            }
            assert!(
                Instant::now() < deadline,
                "etcd did not become ready within 20 s"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl EtcdServer {
    /// Freezes etcd (SIGSTOP): it keeps its connections but answers nothing.
    pub fn freeze(&self) {
        self.signal("-STOP");
    }

    /// Resumes a frozen etcd (SIGCONT).
    pub fn thaw(&self) {
        self.signal("-CONT");
    }

    fn thaw_quietly(&self) {
        let _ = Command::new("kill")
            .arg("-CONT")
            .arg(self.child.id().to_string())
            .status();
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .arg(sig)
            .arg(self.child.id().to_string())
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill {sig} etcd");
    }
}

impl Drop for EtcdServer {
    fn drop(&mut self) {
        self.thaw_quietly();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
