//! End-to-end test support: a real `matryoshka up` process (embedded store or a real etcd),
//! real kubectl binaries of every supported version, and assertions on what they print.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Every kubectl minor version the suite runs.
pub const KUBECTL_VERSIONS: &[&str] = &["1.27", "1.28", "1.29", "1.30", "1.31", "1.32", "1.33"];

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Starts a process that kills `pid` when this test process goes away, even without
/// destructors running.
pub fn watchdog(pid: u32) {
    let _ = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "while kill -0 {} 2>/dev/null; do sleep 1; done; kill -9 {pid} 2>/dev/null",
            std::process::id()
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
}

/// Which store a server uses.
#[derive(Clone)]
pub enum Backend {
    Embedded,
    Etcd(String),
    /// etcd at an endpoint, under a key prefix other servers may share (replicas).
    EtcdShared {
        endpoint: String,
        prefix: String,
    },
}

/// A running `matryoshka up`.
pub struct Server {
    child: Option<Child>,
    pub dir: PathBuf,
    pub port: u16,
    backend: Backend,
    /// More `matryoshka up` flags.
    args: Vec<String>,
    _tmp: Option<tempfile::TempDir>,
}

impl Server {
    pub fn start(backend: Backend) -> Server {
        Server::start_with(backend, &[])
    }

    /// Starts `matryoshka up` with the platform's Cluster API (upstream's CRDs from the shared
    /// test data), so tenant clusters get worker machines.
    pub fn with_cluster_api(backend: Backend) -> Server {
        let crds =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/testdata/crds/cluster-api");
        Server::start_with(
            backend,
            &["--cluster-api-crds", crds.to_str().expect("utf-8 path")],
        )
    }

    /// Writes the admin kubeconfig's client certificate and key as PEM files `client.cert`
    /// and `client.key` into `dir`.
    pub fn write_admin_identity(&self, dir: &Path) -> (PathBuf, PathBuf) {
        use base64::Engine;
        let conf = std::fs::read_to_string(self.kubeconfig()).expect("admin.conf");
        let field = |k: &str| -> Vec<u8> {
            let line = conf
                .lines()
                .find_map(|l| l.trim().strip_prefix(&format!("{k}: ")))
                .unwrap_or_else(|| panic!("admin.conf has no {k}"));
            base64::engine::general_purpose::STANDARD
                .decode(line.trim().trim_matches('"'))
                .expect("base64")
        };
        let (cert, key) = (dir.join("client.cert"), dir.join("client.key"));
        std::fs::write(&cert, field("client-certificate-data")).expect("cert");
        std::fs::write(&key, field("client-key-data")).expect("key");
        (cert, key)
    }

    /// A token of service account `default/ops`, bound to cluster-admin (a user of the
    /// console, which takes tokens).
    pub fn admin_token(&self) -> String {
        let kubectl = self.kubectl("1.33");
        kubectl
            .run(&["create", "serviceaccount", "ops", "-n", "default"])
            .ok();
        kubectl
            .run(&[
                "create",
                "clusterrolebinding",
                "ops",
                "--clusterrole=cluster-admin",
                "--serviceaccount=default:ops",
            ])
            .ok();
        kubectl
            .run(&["create", "token", "ops", "-n", "default"])
            .ok()
            .stdout
            .trim()
            .to_string()
    }

    /// Starts `matryoshka up` with more flags (e.g. `--virtual-nodes 3`).
    pub fn start_with(backend: Backend, args: &[&str]) -> Server {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().to_path_buf();
        let mut s = Server {
            child: None,
            dir,
            port: free_port(),
            backend,
            args: args.iter().map(|a| a.to_string()).collect(),
            _tmp: Some(tmp),
        };
        s.launch();
        s
    }

    /// (Re)starts the process on the same data directory and port.
    pub fn launch(&mut self) {
        let _ = std::fs::remove_file(self.kubeconfig());
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_matryoshka"));
        cmd.arg("up")
            .arg("--data-dir")
            .arg(&self.dir)
            .arg("--secure-port")
            .arg(self.port.to_string());
        match &self.backend {
            Backend::Embedded => {}
            Backend::Etcd(endpoint) => {
                cmd.arg("--etcd-servers")
                    .arg(endpoint)
                    .arg("--etcd-prefix")
                    .arg(format!("/m{}", self.port));
            }
            Backend::EtcdShared { endpoint, prefix } => {
                cmd.arg("--etcd-servers")
                    .arg(endpoint)
                    .arg("--etcd-prefix")
                    .arg(prefix);
            }
        }
        cmd.args(&self.args);
        // No real node unless a test asks for nodes: a killed server would leave its
        // containerd behind.
        if !self
            .args
            .iter()
            .any(|a| a == "--node" || a == "--virtual-nodes")
        {
            cmd.args(["--node", "none"]);
        }
        // Worker machines are virtual unless a test asks for process machines (which make
        // a bridge and namespaces on this host).
        if !self.args.iter().any(|a| a == "--machine-provider") {
            cmd.args(["--machine-provider", "virtual"]);
        }
        let log = std::fs::File::create(self.dir.join("server.log")).expect("log file");
        cmd.stdout(Stdio::null())
            .stderr(log)
            .env("MATRYOSHKA_LOG", "info");
        let child = cmd.spawn().expect("matryoshka starts");
        watchdog(child.id());
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        while !self.kubeconfig().exists() {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(|c| c.try_wait()) {
                panic!("matryoshka exited at start ({status}):\n{}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "matryoshka did not write admin.conf within 30 s:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.join("admin.conf")
    }

    /// The process id of the running server.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("the server runs").id()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM and wait for the process to exit; returns its exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let mut c = self.child.take().expect("running");
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(c.id().to_string())
            .status();
        c.wait().expect("exit status")
    }

    pub fn kubectl(&self, version: &str) -> Kubectl {
        Kubectl::new(version, &self.kubeconfig())
    }

    /// Pushes the test images real nodes run (pause, busybox, mtest) into the platform's
    /// registry.
    pub fn import_test_images(&self) {
        for archive in [
            testimages::pause(),
            testimages::busybox(),
            testimages::mtest(),
        ] {
            self.import_image(&archive.expect("the test images build").path);
        }
    }

    /// Pushes an image archive into the platform's registry (`matryoshka image import`).
    pub fn import_image(&self, archive: &Path) {
        let out = Command::new(env!("CARGO_BIN_EXE_matryoshka"))
            .args(["image", "import", "--data-dir"])
            .arg(&self.dir)
            .arg(archive)
            .output()
            .expect("matryoshka image import runs");
        assert!(
            out.status.success(),
            "importing {}: {}",
            archive.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// The directory holding `kubectl.1.XX` binaries.
pub fn kubectl_dir() -> PathBuf {
    let out = Command::new("sh")
        .arg("-c")
        .arg("readlink -f \"$(command -v kubectl)\"")
        .output()
        .expect("sh");
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(!path.is_empty(), "kubectl is not installed");
    Path::new(&path)
        .parent()
        .expect("a directory")
        .to_path_buf()
}

/// One kubectl version against one server.
pub struct Kubectl {
    pub bin: PathBuf,
    pub kubeconfig: PathBuf,
    cache: tempfile::TempDir,
    pub version: String,
}

/// What a kubectl run did.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub cmdline: String,
}

impl Run {
    fn from(output: Output, cmdline: String) -> Run {
        Run {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            cmdline,
        }
    }

    #[track_caller]
    pub fn ok(&self) -> &Run {
        assert_eq!(
            self.code, 0,
            "`{}` failed:\nstdout: {}\nstderr: {}",
            self.cmdline, self.stdout, self.stderr
        );
        self
    }

    #[track_caller]
    pub fn fails(&self, code: i32) -> &Run {
        assert_eq!(
            self.code, code,
            "`{}` exit code:\nstdout: {}\nstderr: {}",
            self.cmdline, self.stdout, self.stderr
        );
        self
    }

    #[track_caller]
    pub fn out(&self, needle: &str) -> &Run {
        assert!(
            self.stdout.contains(needle),
            "`{}`: stdout lacks {needle:?}:\n{}\nstderr: {}",
            self.cmdline,
            self.stdout,
            self.stderr
        );
        self
    }

    #[track_caller]
    pub fn not_out(&self, needle: &str) -> &Run {
        assert!(
            !self.stdout.contains(needle),
            "`{}`: stdout has {needle:?}:\n{}",
            self.cmdline,
            self.stdout
        );
        self
    }

    #[track_caller]
    pub fn err(&self, needle: &str) -> &Run {
        assert!(
            self.stderr.contains(needle),
            "`{}`: stderr lacks {needle:?}:\n{}\nstdout: {}",
            self.cmdline,
            self.stderr,
            self.stdout
        );
        self
    }

    /// stdout lines after the header, split into whitespace-separated columns.
    pub fn rows(&self) -> Vec<Vec<String>> {
        self.stdout
            .lines()
            .skip(1)
            .map(|l| l.split_whitespace().map(String::from).collect())
            .collect()
    }
}

impl Kubectl {
    pub fn new(version: &str, kubeconfig: &Path) -> Kubectl {
        let bin = kubectl_dir().join(format!("kubectl.{version}"));
        assert!(bin.exists(), "{} is missing", bin.display());
        Kubectl {
            bin,
            kubeconfig: kubeconfig.to_path_buf(),
            cache: tempfile::tempdir().expect("tempdir"),
            version: version.into(),
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.bin);
        c.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(self.cache.path())
            .args(args);
        c
    }

    pub fn run(&self, args: &[&str]) -> Run {
        self.run_stdin(args, None)
    }

    pub fn run_stdin(&self, args: &[&str], stdin: Option<&str>) -> Run {
        use std::io::Write;
        let mut c = self.command(args);
        c.stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let mut child = c.spawn().expect("kubectl starts");
        if let Some(input) = stdin {
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(input.as_bytes())
                .expect("write stdin");
        }
        let cmdline = format!("kubectl.{} {}", self.version, args.join(" "));
        let out = wait_with_timeout(child, Duration::from_secs(60), &cmdline);
        Run::from(out, cmdline)
    }

    /// Starts kubectl in the background (for `get -w`).
    pub fn spawn(&self, args: &[&str]) -> Child {
        let mut c = self.command(args);
        c.stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .stdin(Stdio::null());
        let child = c.spawn().expect("kubectl starts");
        watchdog(child.id());
        child
    }

    /// Retries `args` until `check` accepts the result (conditions that controllers reach
    /// asynchronously); panics with the last result after `timeout`.
    #[track_caller]
    pub fn eventually(
        &self,
        args: &[&str],
        timeout: Duration,
        check: impl Fn(&Run) -> bool,
    ) -> Run {
        let deadline = Instant::now() + timeout;
        loop {
            let r = self.run(args);
            if check(&r) {
                return r;
            }
            assert!(
                Instant::now() < deadline,
                "condition not reached for `{}`:\n{}\n{}",
                r.cmdline,
                r.stdout,
                r.stderr
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn wait_with_timeout(child: Child, timeout: Duration, what: &str) -> Output {
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(timeout) {
        Ok(Ok(out)) => out,
        Ok(Err(e)) => panic!("waiting for kubectl: {e}"),
        Err(_) => {
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
            panic!("`{what}` did not finish within {timeout:?}");
        }
    }
}

/// Removes the (empty) cgroup tree `name` a real node leaves by design (as a kubelet does),
/// in every cgroup v1 hierarchy, deepest first.
pub fn remove_cgroup_root(name: &str) {
    fn remove(dir: &Path) {
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    remove(&e.path());
                }
            }
        }
        let _ = std::fs::remove_dir(dir);
    }
    if let Ok(hierarchies) = std::fs::read_dir("/sys/fs/cgroup") {
        for h in hierarchies.flatten() {
            let root = h.path().join(name);
            if root.is_dir() {
                remove(&root);
            }
        }
    }
}

/// Writes a manifest into a temporary file and returns its path.
pub fn manifest(dir: &Path, name: &str, yaml: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, yaml).expect("write manifest");
    p
}

/// A running `matryoshka node`, killed when dropped.
pub struct Agent(Child);

impl Agent {
    pub fn start(kubeconfig: &Path, extra: &[&str], log: &Path) -> Agent {
        let child = Command::new(env!("CARGO_BIN_EXE_matryoshka"))
            .arg("node")
            .arg("--virtual")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).expect("log file"))
            .spawn()
            .expect("matryoshka node starts");
        watchdog(child.id());
        Agent(child)
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Creates the logical cluster `name` through `root`, waits until it is Ready and writes its
/// admin kubeconfig (from `matryoshka-system/<name>-admin-kubeconfig`) into `dir`.
pub fn logical_cluster(root: &Kubectl, dir: &Path, name: &str) -> PathBuf {
    logical_cluster_with(root, dir, name, "")
}

/// [`logical_cluster`] with `spec` (YAML lines under `spec:`, indented two spaces).
pub fn logical_cluster_with(root: &Kubectl, dir: &Path, name: &str, spec: &str) -> PathBuf {
    let spec = if spec.is_empty() {
        String::new()
    } else {
        format!("spec:\n{spec}")
    };
    root.run_stdin(
        &["apply", "-f", "-"],
        Some(&format!(
            "apiVersion: core.matryoshka.dev/v1alpha1\nkind: LogicalCluster\nmetadata:\n  name: {name}\n{spec}"
        )),
    )
    .ok();
    root.run(&[
        "wait",
        "--for=jsonpath={.status.phase}=Ready",
        &format!("logicalcluster/{name}"),
        "--timeout=30s",
    ])
    .ok();
    let conf = root.run(&[
        "get",
        "secret",
        "-n",
        "matryoshka-system",
        &format!("{name}-admin-kubeconfig"),
        "-o",
        "go-template={{ printf \"%s\\n\" (index .data \"admin.conf\" | base64decode) }}",
    ]);
    conf.ok().out(&format!("/clusters/{name}"));
    let path = dir.join(format!("{name}.conf"));
    std::fs::write(&path, &conf.stdout).expect("write kubeconfig");
    path
}

/// Writes the admin kubeconfig of TenantCluster `namespace/name` (its Secret
/// `kubernetes-<name>-admin-kubeconfig`, key `admin.conf`) into `dir` and answers a kubectl
/// 1.33 using it.
pub fn tenant_cluster_kubectl(root: &Kubectl, dir: &Path, namespace: &str, name: &str) -> Kubectl {
    let conf = root
        .run(&[
            "get",
            "secret",
            "-n",
            namespace,
            &format!("kubernetes-{name}-admin-kubeconfig"),
            "-o",
            "go-template={{ index .data \"admin.conf\" | base64decode }}",
        ])
        .ok()
        .stdout
        .clone();
    let path = dir.join(format!("{name}.conf"));
    std::fs::write(&path, conf).expect("write kubeconfig");
    Kubectl::new("1.33", &path)
}

/// Runs `matryoshka ARGS --kubeconfig <the root cluster's admin.conf>` (a tool subcommand).
pub fn matryoshka(server: &Server, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_matryoshka"))
        .args(args)
        .arg("--kubeconfig")
        .arg(server.kubeconfig())
        .output()
        .expect("matryoshka runs")
}

/// A kubeconfig for the logical cluster `cluster` that authenticates with `token` only.
pub fn token_kubeconfig(server: &Server, cluster: &str, token: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    server: https://127.0.0.1:{}/clusters/{cluster}\n    certificate-authority: {}\n  name: {cluster}\ncontexts:\n- context:\n    cluster: {cluster}\n    user: sa\n  name: sa\ncurrent-context: sa\nusers:\n- name: sa\n  user:\n    token: {token}\n",
        server.port,
        server.dir.join("pki/ca.crt").display()
    )
}
