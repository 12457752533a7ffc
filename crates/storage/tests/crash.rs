//! Crash safety of the embedded store: a child process writes in a loop (8 concurrent writers,
//! group commit, small snapshot thresholds so snapshots and segment deletion happen too) and is
//! killed with SIGKILL at a random moment, repeatedly. After each kill the store is reopened and
//! every write the child had acknowledged must be there.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rand::Rng;
use storage::Storage;
use storage::embedded::{EmbeddedStore, Options};

const CHILD_ENV: &str = "MATRYOSHKA_CRASH_CHILD_DIR";
const ROUNDS: usize = 12;

fn options() -> Options {
    Options {
        snapshot_bytes: 256 << 10,
        segment_bytes: 64 << 10,
        retain_revisions: 2_000,
        ..Options::default()
    }
}

/// The child: writes until killed, printing one line per acknowledged write.
fn child(dir: &str, round: usize) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let store = Arc::new(EmbeddedStore::open_with(dir, options()).unwrap());
        let mut tasks = Vec::new();
        for w in 0..8 {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                let pad = "x".repeat(1000);
                for i in 0.. {
                    let key = format!("/r{round}/w{w}/{i:08}");
                    let kv = store
                        .create(key.as_bytes(), Bytes::from(format!("{i}:{pad}")))
                        .await
                        .unwrap();
                    println!("ack {key} {i} {}", kv.mod_revision);
                    // Churn a shared key too, so updates and deletes are in the log.
                    let shared = format!("/shared/{}", i % 50);
                    match store.get(shared.as_bytes()).await.unwrap() {
                        Some(cur) if i % 3 == 0 => {
                            let _ = store
                                .delete(shared.as_bytes(), Some(cur.mod_revision))
                                .await;
                        }
                        Some(cur) => {
                            let _ = store
                                .update(
                                    shared.as_bytes(),
                                    Bytes::from(pad.clone()),
                                    cur.mod_revision,
                                )
                                .await;
                        }
                        None => {
                            let _ = store
                                .create(shared.as_bytes(), Bytes::from(pad.clone()))
                                .await;
                        }
                    }
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    });
}

#[test]
fn acknowledged_writes_survive_sigkill_at_random_moments() {
    if let Ok(dir) = std::env::var(CHILD_ENV) {
        let round = std::env::var("MATRYOSHKA_CRASH_ROUND")
            .unwrap()
            .parse()
            .unwrap();
        child(&dir, round);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut rng = rand::rng();
    let mut acked: BTreeMap<String, (String, i64)> = BTreeMap::new();
    let mut last_rev = 0;
    for round in 0..ROUNDS {
        let mut proc = Command::new(&exe)
            .args([
                "acknowledged_writes_survive_sigkill_at_random_moments",
                "--exact",
                "--nocapture",
            ])
            .env(CHILD_ENV, dir.path())
            .env("MATRYOSHKA_CRASH_ROUND", round.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = proc.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        // Let it write for a random while (sometimes before it opened, mostly after).
        let kill_after = Duration::from_millis(rng.random_range(5..400));
        let started = Instant::now();
        let mut lines = Vec::new();
        while started.elapsed() < kill_after {
            if let Ok(l) = rx.recv_timeout(Duration::from_millis(1)) {
                lines.push(l);
            }
        }
        proc.kill().unwrap(); // SIGKILL
        proc.wait().unwrap();
        reader.join().unwrap();
        lines.extend(rx.try_iter());
        let mut round_acks = 0;
        for l in lines {
            let mut parts = l.split_whitespace();
            if parts.next() != Some("ack") {
                continue;
            }
            let key = parts.next().unwrap().to_string();
            let val = parts.next().unwrap().to_string();
            let rev: i64 = parts.next().unwrap().parse().unwrap();
            acked.insert(key, (val, rev));
            round_acks += 1;
        }

        let store = EmbeddedStore::open_with(dir.path(), options())
            .expect("the store reopens after SIGKILL");
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let current = store.current_revision().await.unwrap();
            assert!(
                current >= last_rev,
                "round {round}: revision went back from {last_rev} to {current}"
            );
            for (key, (val, rev)) in &acked {
                let kv = store.get(key.as_bytes()).await.unwrap().unwrap_or_else(|| {
                    panic!("round {round}: acknowledged {key} (revision {rev}) is lost")
                });
                assert!(
                    kv.value.starts_with(format!("{val}:").as_bytes()),
                    "round {round}: {key} has a wrong value"
                );
                assert_eq!(kv.mod_revision, *rev);
            }
            last_rev = current;
        });
        drop(store);
        eprintln!(
            "round {round}: killed after {kill_after:?}, {round_acks} new acks, {} total",
            acked.len()
        );
    }
    assert!(
        acked.len() > 100,
        "the child acknowledged too few writes to prove anything"
    );
}
