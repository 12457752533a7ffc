//! A `matryoshka up` process for benchmarks that need what only the binary does (process
//! machines are `matryoshka node` processes): the binary beside the benchmark's, a data
//! directory of its own, the Cluster API CRDs from the shared test data, the test images in
//! its registry. Stopped with SIGTERM (its machines stop with it).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use kube::Api;

pub struct ProcessPlatform {
    child: Option<Child>,
    binary: PathBuf,
    dir: tempfile::TempDir,
    pub root: kube::Client,
    /// The API server's (and the console's) HTTPS port on 127.0.0.1.
    pub port: u16,
}

fn binary() -> anyhow::Result<PathBuf> {
    if let Some(p) = std::env::var_os("MATRYOSHKA_BIN") {
        return Ok(PathBuf::from(p));
    }
    let me = std::env::current_exe()?;
    let beside = me.with_file_name("matryoshka");
    anyhow::ensure!(
        beside.exists(),
        "{} is missing: build it with `cargo build --release -p bench -p matryoshka` (or set MATRYOSHKA_BIN)",
        beside.display()
    );
    Ok(beside)
}

async fn client_from(conf: &str) -> anyhow::Result<kube::Client> {
    let kc = kube::config::Kubeconfig::from_yaml(conf)?;
    let config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await?;
    Ok(kube::Client::try_from(config)?)
}

impl ProcessPlatform {
    /// Starts `matryoshka up` with the Cluster API CRDs and `extra` flags, and waits for it.
    pub async fn start(extra: &[&str]) -> anyhow::Result<ProcessPlatform> {
        let binary = binary()?;
        let base = std::env::current_dir()?.join("target/bench-data");
        std::fs::create_dir_all(&base)?;
        let dir = tempfile::tempdir_in(&base)?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let crds = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/testdata/crds/cluster-api")
            .canonicalize()?;
        let log = std::fs::File::create(dir.path().join("server.log"))?;
        let child = Command::new(&binary)
            .arg("up")
            .arg("--data-dir")
            .arg(dir.path())
            .args(["--secure-port", &port.to_string()])
            .args(if extra.contains(&"--node") {
                &[][..]
            } else {
                &["--node", "none"][..]
            })
            .arg("--cluster-api-crds")
            .arg(&crds)
            .args(extra)
            .env("MATRYOSHKA_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()?;
        let mut child = child;
        let conf = dir.path().join("admin.conf");
        let deadline = Instant::now() + Duration::from_secs(60);
        let log = |dir: &Path| std::fs::read_to_string(dir.join("server.log")).unwrap_or_default();
        while !conf.exists() {
            if let Ok(Some(status)) = child.try_wait() {
                anyhow::bail!("matryoshka up exited ({status}):\n{}", log(dir.path()));
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                anyhow::bail!("matryoshka up did not start:\n{}", log(dir.path()));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let root = client_from(&std::fs::read_to_string(&conf)?).await?;
        Ok(ProcessPlatform {
            child: Some(child),
            binary,
            dir,
            root,
            port,
        })
    }

    /// The platform's process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The ends of the server's log and of every machine's agent log, for a failure.
    pub fn diagnostics(&self) -> String {
        let tail = |path: &Path, n: usize| {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(n)..].join("\n")
        };
        let mut out = format!(
            "--- server:\n{}\n",
            tail(&self.dir.path().join("server.log"), 40)
        );
        if let Ok(entries) = std::fs::read_dir(self.dir.path().join("machines")) {
            for e in entries.flatten() {
                // What went wrong, without containerd's chatter and backtraces.
                let log = std::fs::read_to_string(e.path().join("agent.log")).unwrap_or_default();
                let telling: Vec<&str> = log
                    .lines()
                    .filter(|l| {
                        !l.contains("level=info")
                            && !l.trim_start().starts_with("at ")
                            && !l
                                .trim_start()
                                .chars()
                                .next()
                                .is_some_and(|c| c.is_ascii_digit())
                    })
                    .collect();
                out.push_str(&format!(
                    "--- {}:\n{}\n",
                    e.file_name().to_string_lossy(),
                    telling[telling.len().saturating_sub(20)..].join("\n")
                ));
            }
        }
        out
    }

    /// Pushes pause, busybox and mtest into the platform's registry.
    pub fn import_test_images(&self) -> anyhow::Result<()> {
        for archive in [
            testimages::pause(),
            testimages::busybox(),
            testimages::mtest(),
        ] {
            let archive = archive.map_err(|e| anyhow::anyhow!("building a test image: {e}"))?;
            let out = Command::new(&self.binary)
                .args(["image", "import", "--data-dir"])
                .arg(self.dir.path())
                .arg(&archive.path)
                .output()?;
            anyhow::ensure!(
                out.status.success(),
                "importing {}: {}",
                archive.path.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    }

    /// A client of TenantCluster `name` in `namespace`, from its admin kubeconfig Secret.
    pub async fn tenant_cluster_client(
        &self,
        namespace: &str,
        name: &str,
    ) -> anyhow::Result<kube::Client> {
        let secrets: Api<Secret> = Api::namespaced(self.root.clone(), namespace);
        let s = secrets
            .get(&format!("kubernetes-{name}-admin-kubeconfig"))
            .await?;
        let conf = s
            .data
            .and_then(|d| d.get("admin.conf").map(|b| b.0.clone()))
            .ok_or_else(|| anyhow::anyhow!("no admin.conf in {name}'s kubeconfig Secret"))?;
        client_from(&String::from_utf8(conf)?).await
    }

    /// SIGTERM, and waits for the platform (and its machines) to stop.
    pub async fn stop(mut self) {
        if let Some(mut c) = self.child.take() {
            if let Some(pid) = i32::try_from(c.id())
                .ok()
                .and_then(rustix::process::Pid::from_raw)
            {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
            }
            let deadline = Instant::now() + Duration::from_secs(90);
            while !matches!(c.try_wait(), Ok(Some(_))) && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for ProcessPlatform {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
