//! The platform's OCI registry in a real `matryoshka up`, driven by real clients: skopeo
//! (Debian's) copies images in and back out, `matryoshka image import` pushes OCI archives
//! and `docker save` tarballs, and access follows the documented rules (anonymous pull,
//! push only with credentials RBAC allows).

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use support::{Backend, Server};

/// A skopeo certificate directory: the platform CA, and the admin's client certificate when
/// `client` (from `admin.conf`).
fn cert_dir(server: &Server, client: bool) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::copy(server.dir.join("pki/ca.crt"), dir.path().join("ca.crt")).expect("ca.crt");
    if client {
        server.write_admin_identity(dir.path());
    }
    dir
}

#[track_caller]
fn ok(out: Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed ({}):\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn skopeo(args: &[&str]) -> Output {
    Command::new("skopeo")
        .arg("--insecure-policy")
        .args(args)
        .output()
        .expect("skopeo runs (scripts/ensure-deps installs it)")
}

fn import(server: &Server, file: &Path, name: Option<&str>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_matryoshka"));
    c.arg("image")
        .arg("import")
        .arg("--data-dir")
        .arg(&server.dir)
        .arg(file);
    if let Some(n) = name {
        c.arg("--name").arg(n);
    }
    c.output().expect("matryoshka image import runs")
}

fn inspect(server: &Server, reference: &str, config: bool) -> serde_json::Value {
    let certs = cert_dir(server, false);
    let target = format!("docker://127.0.0.1:{}/{reference}", server.port);
    let cert_arg = certs.path().to_string_lossy().into_owned();
    let mut args = vec!["inspect", "--cert-dir", &cert_arg];
    if config {
        args.push("--config");
    }
    args.push(&target);
    let out = ok(skopeo(&args), &format!("skopeo inspect {reference}"));
    serde_json::from_str(&out).expect("inspect prints JSON")
}

#[test]
fn skopeo_copies_an_image_in_and_back_out_and_anonymous_pushes_are_refused() {
    let server = Server::start(Backend::Embedded);
    let busybox = testimages::busybox().expect("the busybox image");
    let admin = cert_dir(&server, true);
    let admin_arg = admin.path().to_string_lossy().into_owned();
    let src = format!("oci-archive:{}:1.35", busybox.path.display());
    let dest = format!("docker://127.0.0.1:{}/test/busybox:1", server.port);
    ok(
        skopeo(&["copy", "--dest-cert-dir", &admin_arg, &src, &dest]),
        "skopeo copy into the registry",
    );
    // Pulls are anonymous (the CA only, no client certificate).
    let v = inspect(&server, "test/busybox:1", false);
    assert_eq!(v["Digest"], busybox.manifest_digest.as_str(), "{v}");
    assert_eq!(v["Architecture"], "amd64");
    let out_dir = tempfile::tempdir().expect("tempdir");
    let out = out_dir.path().join("out.tar");
    let anon = cert_dir(&server, false);
    let anon_arg = anon.path().to_string_lossy().into_owned();
    ok(
        skopeo(&[
            "copy",
            "--src-cert-dir",
            &anon_arg,
            &dest,
            &format!("oci-archive:{}:1", out.display()),
        ]),
        "skopeo copy out of the registry",
    );
    let back = oci::archive::Archive::open(&out).expect("the copy opens");
    let images = back
        .images(Some(&oci::ImageRef::parse_normalized("x").expect("ref")))
        .expect("one image");
    let original = oci::archive::Archive::open(&busybox.path).expect("opens");
    let original = original.images(None).expect("images");
    let layers = |i: &oci::archive::Image| -> Vec<String> {
        i.blobs.iter().map(|b| b.digest.to_string()).collect()
    };
    assert_eq!(layers(&images[0]), layers(&original[0]));
    // The tag list and the catalog.
    let tags = Command::new("skopeo")
        .args(["list-tags", "--cert-dir", &anon_arg])
        .arg(format!("docker://127.0.0.1:{}/test/busybox", server.port))
        .output()
        .expect("skopeo");
    assert!(ok(tags, "skopeo list-tags").contains("\"1\""));
    // Without credentials, a push is refused with the challenge.
    let refused = skopeo(&[
        "copy",
        "--dest-cert-dir",
        &anon_arg,
        &src,
        &format!("docker://127.0.0.1:{}/test/anonymous:1", server.port),
    ]);
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("authentication required")
            || err.contains("401")
            || err.contains("unauthorized"),
        "{err}"
    );
}

#[test]
fn a_push_needs_create_on_the_repository_and_a_token_in_basic_credentials_works() {
    let server = Server::start(Backend::Embedded);
    let kubectl = server.kubectl("1.33");
    kubectl
        .run(&["create", "serviceaccount", "pusher", "-n", "default"])
        .ok();
    let token = kubectl.run(&["create", "token", "pusher", "-n", "default"]);
    let token = token.ok().stdout.trim().to_string();
    let creds = format!("pusher:{token}");
    let certs = cert_dir(&server, false);
    let certs_arg = certs.path().to_string_lossy().into_owned();
    let busybox = testimages::busybox().expect("the busybox image");
    let src = format!("oci-archive:{}:1.35", busybox.path.display());
    let dest = format!("docker://127.0.0.1:{}/team/busybox:1", server.port);
    let push = || {
        skopeo(&[
            "copy",
            "--dest-cert-dir",
            &certs_arg,
            "--dest-creds",
            &creds,
            &src,
            &dest,
        ])
    };
    let denied = push();
    assert!(!denied.status.success());
    let err = String::from_utf8_lossy(&denied.stderr);
    assert!(err.contains("denied"), "{err}");
    kubectl
        .run_stdin(
            &["apply", "-f", "-"],
            Some(
                "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: team-pusher\nrules:\n- apiGroups: [registry.matryoshka.dev]\n  resources: [repositories]\n  resourceNames: [team/busybox]\n  verbs: [create]\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: team-pusher\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: team-pusher\nsubjects:\n- kind: ServiceAccount\n  name: pusher\n  namespace: default\n",
            ),
        )
        .ok();
    // RBAC is read from the watch cache: the binding takes effect within moments.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let out = push();
        if out.status.success() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the push stayed refused: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let v = inspect(&server, "team/busybox:1", false);
    assert_eq!(v["Digest"], busybox.manifest_digest.as_str());
}

/// A `docker save` tarball with a layer large enough to go up in chunks.
fn big_docker_archive(dir: &Path) -> PathBuf {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let noise: Vec<u8> = (0..20 << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let layer = testimages::Layer::new()
        .file("noise.bin", 0o644, &noise)
        .and_then(testimages::Layer::finish)
        .expect("layer");
    let image = testimages::Image {
        layers: vec![testimages::busybox_layer().expect("busybox layer"), layer],
        config: testimages::Config {
            cmd: vec!["sh".into()],
            labels: vec![("made-by".into(), "docker-save".into())],
            ..Default::default()
        },
        names: vec!["docker.io/library/saved:1".into()],
    };
    let path = dir.join("saved.tar");
    image.write_docker_archive(&path).expect("written");
    path
}

#[test]
fn image_import_pushes_oci_archives_and_docker_save_tarballs_under_their_names() {
    let server = Server::start(Backend::Embedded);
    let mtest = testimages::mtest().expect("the mtest image");
    let out = ok(
        import(&server, &mtest.path, None),
        "image import of an OCI archive",
    );
    for name in testimages::MTEST_NAMES {
        assert!(
            out.contains(&format!("imported {name} ({})", mtest.manifest_digest)),
            "{out}"
        );
    }
    let v = inspect(&server, "docker.io/matryoshka/mtest:1", true);
    assert_eq!(
        v["config"]["Entrypoint"],
        serde_json::json!(["/mtest"]),
        "{v}"
    );
    assert_eq!(
        v["config"]["Labels"]["org.opencontainers.image.title"],
        "mtest"
    );

    let tmp = tempfile::tempdir().expect("tempdir");
    let saved = big_docker_archive(tmp.path());
    let out = ok(
        import(&server, &saved, None),
        "image import of a docker save tarball",
    );
    assert!(
        out.contains("imported docker.io/library/saved:1 ("),
        "{out}"
    );
    // `--name` renames, normalised as containerd does.
    let out = ok(
        import(&server, &saved, Some("renamed:2")),
        "image import --name",
    );
    assert!(
        out.contains("imported docker.io/library/renamed:2 ("),
        "{out}"
    );
    let v = inspect(&server, "docker.io/library/renamed:2", false);
    assert_eq!(v["Labels"]["made-by"], "docker-save", "{v}");
    // Pulling it back verifies every blob's digest, the chunked one included.
    let certs = cert_dir(&server, false);
    let copy = tmp.path().join("copy");
    ok(
        skopeo(&[
            "copy",
            "--src-cert-dir",
            &certs.path().to_string_lossy(),
            &format!(
                "docker://127.0.0.1:{}/docker.io/library/saved:1",
                server.port
            ),
            &format!("dir:{}", copy.display()),
        ]),
        "skopeo copy of the imported image",
    );
    let big = std::fs::read_dir(&copy)
        .expect("copied")
        .filter_map(|e| e.ok()?.metadata().ok())
        .any(|m| m.len() > 20 << 20);
    assert!(big, "the large layer came back");
    // A name that is no reference, and a directory where no platform runs.
    let bad = import(&server, &saved, Some("Bad:Name"));
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("must be lowercase"),
        "{bad:?}"
    );
    let mut c = Command::new(env!("CARGO_BIN_EXE_matryoshka"));
    let nowhere = c
        .args(["image", "import", "--data-dir"])
        .arg(tmp.path())
        .arg(&saved)
        .output()
        .expect("runs");
    assert!(!nowhere.status.success());
    assert!(
        String::from_utf8_lossy(&nowhere.stderr).contains("running?"),
        "{nowhere:?}"
    );
}

/// A private containerd (its own root, state and socket; no CRI), killed when dropped.
struct Containerd {
    child: std::process::Child,
    dir: tempfile::TempDir,
}

impl Containerd {
    fn start() -> Containerd {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path();
        let config = format!(
            "version = 2\nroot = \"{root}\"\nstate = \"{state}\"\ndisabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n[grpc]\n  address = \"{sock}\"\n[ttrpc]\n  address = \"{sock}.ttrpc\"\n",
            root = p.join("root").display(),
            state = p.join("state").display(),
            sock = p.join("containerd.sock").display(),
        );
        std::fs::write(p.join("config.toml"), config).expect("config");
        let child = Command::new("containerd")
            .arg("--config")
            .arg(p.join("config.toml"))
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(p.join("containerd.log")).expect("log"))
            .spawn()
            .expect("containerd starts (scripts/ensure-deps installs it)");
        support::watchdog(child.id());
        let c = Containerd { child, dir };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !c.ctr(&["version"]).status.success() {
            assert!(
                std::time::Instant::now() < deadline,
                "containerd did not start"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        c
    }

    fn ctr(&self, args: &[&str]) -> Output {
        Command::new("ctr")
            .arg("--address")
            .arg(self.dir.path().join("containerd.sock"))
            .args(["--namespace", "matryoshka-test"])
            .args(args)
            .output()
            .expect("ctr runs")
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn containerd_pulls_every_registrys_images_from_the_platform_through_its_hosts_directory() {
    let server = Server::start(Backend::Embedded);
    ok(
        import(&server, &testimages::busybox().expect("busybox").path, None),
        "import busybox",
    );
    ok(
        import(&server, &testimages::pause().expect("pause").path, None),
        "import pause",
    );
    let hosts = tempfile::tempdir().expect("tempdir");
    let mirror = oci::hosts::Mirror {
        endpoint: format!("https://127.0.0.1:{}", server.port),
        ca_pem: Some(std::fs::read_to_string(server.dir.join("pki/ca.crt")).expect("ca")),
    };
    let dir = oci::hosts::write_hosts_dir(hosts.path(), &mirror).expect("hosts directory");
    let hosts_arg = dir.to_string_lossy().into_owned();
    let containerd = Containerd::start();
    // docker.io through its own directory, registry.k8s.io too, a short name normalised.
    for image in ["docker.io/library/busybox:1", "registry.k8s.io/pause:3.9"] {
        ok(
            containerd.ctr(&["images", "pull", "--hosts-dir", &hosts_arg, image]),
            &format!("ctr pull {image}"),
        );
    }
    // A registry with no directory of its own goes through `_default`.
    ok(
        skopeo(&[
            "copy",
            "--dest-cert-dir",
            &cert_dir(&server, true).path().to_string_lossy(),
            &format!(
                "oci-archive:{}:1.35",
                testimages::busybox().expect("busybox").path.display()
            ),
            &format!("docker://127.0.0.1:{}/example.org/team/tool:7", server.port),
        ]),
        "push example.org/team/tool:7",
    );
    ok(
        containerd.ctr(&[
            "images",
            "pull",
            "--hosts-dir",
            &hosts_arg,
            "example.org/team/tool:7",
        ]),
        "ctr pull through _default",
    );
    let list = ok(containerd.ctr(&["images", "ls", "-q"]), "ctr images ls");
    for image in [
        "docker.io/library/busybox:1",
        "registry.k8s.io/pause:3.9",
        "example.org/team/tool:7",
    ] {
        assert!(list.lines().any(|l| l == image), "{image} not in:\n{list}");
    }
    // A missing image is `not found`, not an attempt at the internet.
    let missing = containerd.ctr(&[
        "images",
        "pull",
        "--hosts-dir",
        &hosts_arg,
        "docker.io/library/nope:1",
    ]);
    assert!(!missing.status.success());
    let err = String::from_utf8_lossy(&missing.stderr);
    assert!(err.contains("not found"), "{err}");
}
