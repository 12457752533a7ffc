//! The atomic writer's semantics: layout, no-op writes, updates, path rules, and that readers
//! never see a partial update.

use super::*;
use std::os::unix::fs::MetadataExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

fn payload(files: &[(&str, &str, u32)]) -> Payload {
    files
        .iter()
        .map(|(p, d, m)| (p.to_string(), FileProjection::new(d.as_bytes(), *m)))
        .collect()
}

fn data_target(dir: &Path) -> PathBuf {
    fs::read_link(dir.join("..data")).unwrap()
}

#[test]
fn a_first_write_links_every_name_through_data_into_a_timestamped_directory() {
    let dir = tempfile::tempdir().unwrap();
    let p = payload(&[
        ("config.yaml", "a: 1\n", 0o644),
        ("sub/dir/key", "v", 0o400),
    ]);
    assert!(write(dir.path(), &p, None).unwrap());

    let ts = data_target(dir.path());
    let name = ts.to_str().unwrap();
    assert!(name.starts_with(".."), "{name}");
    // `..2024_01_31_12_00_00.<digits>`
    let stamp = &name[2..];
    assert_eq!(stamp.as_bytes()[4], b'_', "{name}");
    assert!(stamp[20..].bytes().all(|b| b.is_ascii_digit()), "{name}");
    assert_eq!(
        fs::metadata(dir.path().join(&ts)).unwrap().mode() & 0o7777,
        0o755
    );

    assert_eq!(
        fs::read_link(dir.path().join("config.yaml")).unwrap(),
        PathBuf::from("..data/config.yaml")
    );
    assert_eq!(
        fs::read_link(dir.path().join("sub")).unwrap(),
        PathBuf::from("..data/sub")
    );
    assert_eq!(
        fs::read_to_string(dir.path().join("config.yaml")).unwrap(),
        "a: 1\n"
    );
    assert_eq!(
        fs::read_to_string(dir.path().join("sub/dir/key")).unwrap(),
        "v"
    );
    let mode = |p: &str| fs::metadata(dir.path().join(p)).unwrap().mode() & 0o7777;
    assert_eq!(mode("config.yaml"), 0o644);
    assert_eq!(mode("sub/dir/key"), 0o400);
    assert_eq!(mode("sub/dir"), 0o755);
}

#[test]
fn an_identical_payload_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let p = payload(&[("k", "v", 0o644)]);
    assert!(write(dir.path(), &p, None).unwrap());
    let before = data_target(dir.path());
    assert!(!write(dir.path(), &p, None).unwrap());
    assert_eq!(data_target(dir.path()), before);
}

#[test]
fn an_update_swaps_data_removes_old_names_and_the_old_directory() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        &payload(&[
            ("keep", "1", 0o644),
            ("gone", "x", 0o644),
            ("d/nested", "n", 0o644),
        ]),
        None,
    )
    .unwrap();
    let old = data_target(dir.path());
    assert!(
        write(
            dir.path(),
            &payload(&[("keep", "2", 0o644), ("new", "y", 0o644)]),
            None
        )
        .unwrap()
    );
    let new = data_target(dir.path());
    assert_ne!(old, new);
    assert!(
        !dir.path().join(&old).exists(),
        "the old directory is removed"
    );
    assert_eq!(fs::read_to_string(dir.path().join("keep")).unwrap(), "2");
    assert_eq!(fs::read_to_string(dir.path().join("new")).unwrap(), "y");
    assert!(fs::symlink_metadata(dir.path().join("gone")).is_err());
    assert!(fs::symlink_metadata(dir.path().join("d")).is_err());
    let mut names: Vec<String> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    let mut want = vec![
        "..data".to_string(),
        new.to_string_lossy().into_owned(),
        "keep".into(),
        "new".into(),
    ];
    want.sort();
    assert_eq!(names, want);
}

#[test]
fn an_emptied_payload_leaves_only_the_data_link() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), &payload(&[("a", "1", 0o644)]), None).unwrap();
    assert!(write(dir.path(), &Payload::new(), None).unwrap());
    assert!(fs::symlink_metadata(dir.path().join("a")).is_err());
    assert!(dir.path().join("..data").is_dir());
}

#[test]
fn paths_are_checked_as_upstream() {
    for ok in ["foo", "foo/bar", "foo..bar", "foo/..bar", ".", "a/./b"] {
        assert!(validate_path(ok).is_ok(), "{ok}");
    }
    let long_name = "a".repeat(256);
    let long_path = "a/".repeat(2049);
    for bad in [
        "",
        "/foo",
        "../foo",
        "foo/../bar",
        "..",
        "...",
        "..data",
        "..foo/bar",
        long_name.as_str(),
        long_path.as_str(),
    ] {
        assert!(validate_path(bad).is_err(), "{bad}");
    }
    let dir = tempfile::tempdir().unwrap();
    let err = write(dir.path(), &payload(&[("../escape", "x", 0o644)]), None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid path: must not contain '..': ../escape"
    );
    assert!(!dir.path().join("..data").exists());
}

#[test]
fn cleaned_paths_share_one_file() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), &payload(&[("./a//b/", "x", 0o644)]), None).unwrap();
    assert_eq!(fs::read_to_string(dir.path().join("a/b")).unwrap(), "x");
}

#[test]
fn the_permission_hook_sees_the_new_content_before_it_is_visible() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().to_path_buf();
    let hook = |ts: &Path| -> io::Result<()> {
        assert!(ts.join("k").is_file());
        assert!(
            fs::read_link(target.join("..data")).is_err(),
            "not swapped yet"
        );
        Ok(())
    };
    write(dir.path(), &payload(&[("k", "v", 0o644)]), Some(&hook)).unwrap();
}

#[test]
fn readers_never_see_a_partial_update() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    // Large files so that a torn write would be visible.
    let version = |n: u32| -> Payload {
        let body = format!("version {n:06}\n").repeat(8192);
        payload(&[("a", &body, 0o644), ("b", &body, 0o644)])
    };
    write(&root, &version(0), None).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let root = root.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut reads = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    // Through the user-visible names: every read is one whole version. (The
                    // old directory can vanish between resolving the link and opening the
                    // file: a reader then opens again, as with upstream's layout.)
                    let a = match fs::read_to_string(root.join("a")) {
                        Ok(a) => a,
                        Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                        Err(e) => panic!("reading a: {e}"),
                    };
                    let first = a.lines().next().unwrap().to_string();
                    assert_eq!(a, format!("{first}\n").repeat(8192), "a torn read");
                    // Through one resolution of `..data`: both files of one version.
                    if let Ok(ts) = fs::read_link(root.join("..data")) {
                        let dir = root.join(ts);
                        if let (Ok(a), Ok(b)) = (
                            fs::read_to_string(dir.join("a")),
                            fs::read_to_string(dir.join("b")),
                        ) {
                            assert_eq!(a, b, "one version's files differ");
                        }
                    }
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    for n in 1..=150 {
        write(&root, &version(n), None).unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().expect("reader panicked") > 0);
    }
    assert!(
        fs::read_to_string(root.join("b"))
            .unwrap()
            .starts_with("version 000150\n")
    );
}
