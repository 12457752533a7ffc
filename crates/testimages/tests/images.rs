//! The test images: the static test program runs in an empty root, the busybox root has its
//! applets, the archives are reproducible, cached and readable by the registry's importer.

use std::io::{Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Kills a child when dropped (also when an assertion fails).
struct Kill(Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn chroot(root: &Path, args: &[&str]) -> std::process::Output {
    Command::new("chroot")
        .arg(root)
        .args(args)
        .output()
        .expect("chroot runs")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

#[test]
fn the_test_program_is_a_static_executable() {
    let bin = testimages::mtest_binary().expect("mtest builds");
    let out = Command::new("ldd").arg(bin).output().expect("ldd runs");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("not a dynamic executable"), "ldd: {said}");
}

#[test]
fn the_test_program_runs_in_an_empty_root() {
    let root = tempfile::tempdir().expect("tempdir");
    std::fs::copy(
        testimages::mtest_binary().expect("mtest"),
        root.path().join("mtest"),
    )
    .expect("copy");
    let out = chroot(root.path(), &["/mtest", "exit", "7", "--message", "bye"]);
    assert_eq!(out.status.code(), Some(7), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "bye\n");

    // Its DNS client, asking a server on loopback (the chroot shares the network).
    let dns = UdpSocket::bind("127.0.0.1:0").expect("udp");
    let addr = dns.local_addr().expect("addr");
    let responder = std::thread::spawn(move || {
        let mut buf = [0u8; 512];
        let (n, peer) = dns.recv_from(&mut buf).expect("a query");
        let mut r = buf[..n].to_vec();
        r[2] = 0x81;
        r[3] = 0x80;
        r[7] = 1;
        r.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 30, 0, 4, 10, 96, 0, 1]);
        dns.send_to(&r, peer).expect("answer");
    });
    let out = chroot(
        root.path(),
        &[
            "/mtest",
            "dns",
            "kubernetes.default.svc.cluster.local.",
            "A",
            "--server",
            &addr.to_string(),
        ],
    );
    responder.join().expect("responder");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "kubernetes.default.svc.cluster.local. 30 IN A 10.96.0.1\n"
    );
}

#[test]
fn the_mtest_image_serves_http_with_toggled_probes() {
    let archive = testimages::mtest().expect("mtest image");
    let root = tempfile::tempdir().expect("tempdir");
    testimages::unpack_rootfs(&archive.path, root.path()).expect("unpacks");
    let port = free_port();
    let _server = Kill(
        Command::new("chroot")
            .arg(root.path())
            .args(["/mtest", "serve-http", "--port", &port.to_string()])
            .stdout(Stdio::null())
            .spawn()
            .expect("serves"),
    );
    let get = |path: &str| -> Option<String> {
        let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
        write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).ok()?;
        Some(out)
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while get("/healthz").is_none() {
        assert!(Instant::now() < deadline, "the server never answered");
        std::thread::sleep(Duration::from_millis(20));
    }
    let r = get("/readyz").expect("answer");
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    get("/set-unready").expect("toggled");
    let r = get("/readyz").expect("answer");
    assert!(r.starts_with("HTTP/1.1 500"), "{r}");
    let r = get("/echo?msg=hi%21").expect("answer");
    assert!(r.ends_with("\r\n\r\nhi!"), "{r}");
    // The busybox half of the image is there too.
    let out = chroot(
        root.path(),
        &[
            "/bin/sh",
            "-c",
            "echo from-sh; for a in /bin/tar /usr/bin/nc /bin/sleep; do readlink $a; done",
        ],
    );
    assert!(out.status.success(), "{out:?}");
    let s = String::from_utf8_lossy(&out.stdout);
    assert_eq!(s, "from-sh\n/bin/busybox\n/bin/busybox\n/bin/busybox\n");
}

#[test]
fn archives_are_reproducible_cached_and_readable_by_the_importer() {
    let a = testimages::busybox().expect("busybox");
    let again = testimages::busybox_image()
        .expect("image")
        .write_oci_archive(&tempfile::tempdir().expect("tmp").path().join("b.tar"))
        .expect("written");
    assert_eq!(a.manifest_digest, again.manifest_digest);
    let archive = oci::archive::Archive::open(&a.path).expect("opens");
    let images = archive.images(None).expect("images");
    assert_eq!(images.len(), 1);
    let names: Vec<String> = images[0].names.iter().map(|n| n.to_string()).collect();
    assert_eq!(names, testimages::BUSYBOX_NAMES);
    assert_eq!(
        images[0].top().map(|m| m.digest.to_string()),
        Some(a.manifest_digest.clone())
    );
    let pause = testimages::pause().expect("pause");
    assert_eq!(pause.names, testimages::PAUSE_NAMES);
}

#[test]
fn a_docker_save_tarball_is_read_as_an_oci_image() {
    let tmp = tempfile::tempdir().expect("tmp");
    let path = tmp.path().join("saved.tar");
    let image = testimages::Image {
        layers: vec![
            testimages::Layer::new()
                .file("hello", 0o644, b"hi")
                .and_then(testimages::Layer::finish)
                .expect("layer"),
        ],
        config: testimages::Config {
            cmd: vec!["/hello".into()],
            ..Default::default()
        },
        names: vec![
            "docker.io/library/hello:1".into(),
            "quay.io/x/hello:2".into(),
        ],
    };
    image.write_docker_archive(&path).expect("written");
    let archive = oci::archive::Archive::open(&path).expect("opens");
    let images = archive.images(None).expect("images");
    let names: Vec<String> = images[0].names.iter().map(|n| n.to_string()).collect();
    assert_eq!(names, ["docker.io/library/hello:1", "quay.io/x/hello:2"]);
    assert_eq!(images[0].blobs.len(), 2, "config and one layer");
    let renamed = oci::ImageRef::parse_normalized("other:3").expect("ref");
    let images = archive.images(Some(&renamed)).expect("renamed");
    assert_eq!(images[0].names[0].to_string(), "docker.io/library/other:3");
}

#[tokio::test]
async fn an_archive_is_imported_straight_into_a_registry_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let reg = oci::Registry::open(dir.path()).await.expect("opens");
    let pause = testimages::pause().expect("pause");
    let imported = reg.import(&pause.path, None).await.expect("imports");
    let names: Vec<String> = imported.iter().map(|(n, _)| n.to_string()).collect();
    assert_eq!(names, testimages::PAUSE_NAMES);
    let req = oci::Request::route(
        "HEAD",
        "/v2/pause/manifests/3.9",
        Some("ns=registry.k8s.io"),
    )
    .expect("routes");
    let r = reg
        .serve(
            &req,
            futures::stream::empty::<std::io::Result<bytes::Bytes>>(),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header_value("Docker-Content-Digest"),
        Some(pause.manifest_digest.as_str())
    );
    // Importing again finds everything there.
    assert_eq!(reg.import(&pause.path, None).await.expect("again").len(), 2);
}

/// Runs `mtest <args>` as PID 1 of a new PID namespace (as in a container), sends it SIGTERM
/// from outside and returns the exit code `unshare` passes on.
fn exit_code_on_sigterm_as_pid_1(args: &[&str]) -> Option<i32> {
    let bin = testimages::mtest_binary().expect("mtest builds");
    let unshare = Command::new("unshare")
        .args(["--pid", "--fork"])
        .arg(bin)
        .args(args)
        .spawn()
        .expect("unshare runs");
    let mut unshare = Kill(unshare);
    let children = format!("/proc/{0}/task/{0}/children", unshare.0.id());
    let deadline = Instant::now() + Duration::from_secs(10);
    let pid1 = loop {
        let listed = std::fs::read_to_string(&children).unwrap_or_default();
        if let Some(pid) = listed.split_whitespace().next() {
            break pid.to_string();
        }
        assert!(Instant::now() < deadline, "unshare never forked its child");
        std::thread::sleep(Duration::from_millis(10));
    };
    // The handler is installed right after start; give the program a moment to reach it.
    std::thread::sleep(Duration::from_millis(200));
    let kill = Command::new("kill")
        .args(["-TERM", &pid1])
        .status()
        .expect("kill runs");
    assert!(kill.success());
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(status) = unshare.0.try_wait().expect("wait") {
            return status.code();
        }
        assert!(
            Instant::now() < deadline,
            "the program ignored SIGTERM as PID 1"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn pause_as_pid_1_exits_zero_on_sigterm() {
    assert_eq!(exit_code_on_sigterm_as_pid_1(&["pause"]), Some(0));
}

#[test]
fn sleep_as_pid_1_ends_like_a_process_killed_by_sigterm() {
    assert_eq!(exit_code_on_sigterm_as_pid_1(&["sleep"]), Some(143));
}
