//! Backup and restore of a logical cluster of N objects (100,000 by default, 1 KiB ConfigMaps)
//! through the `snapshot` and `restore` subresources, against `etcdctl snapshot save` and
//! `etcdctl snapshot restore` of the same keys and values in a real etcd, in the same run.
//!
//! Ours: the backup is read at one revision from the embedded store and streamed as JSON
//! lines; the restore writes every key into a new cluster in 2 MiB chunks and ends when the
//! cluster is Ready. The peer copies etcd's whole database file (save) and rebuilds a data
//! directory from it (restore).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use futures::StreamExt;
use storage::Storage;
use storage::testkit::EtcdServer;

use crate::clusters_bench::{call, call_bytes, post_cluster};
use crate::report::{Better, header, line};
use crate::setup;

const API: &str = "/apis/core.matryoshka.dev/v1alpha1/logicalclusters";

/// A stored ConfigMap of about 1 KiB.
fn value(i: usize) -> Bytes {
    let payload = "x".repeat(900);
    Bytes::from(
        serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("cm-{i}"), "namespace": "default", "uid": format!("00000000-0000-0000-0000-{i:012}"), "creationTimestamp": "2026-12-05T00:00:00Z"},
            "data": {"payload": payload},
        })
        .to_string(),
    )
}

/// Writes `n` values under `key(i)`, 64 at a time.
async fn fill(store: &dyn Storage, n: usize, key: impl Fn(usize) -> String) -> anyhow::Result<()> {
    let key = &key;
    let mut writes = futures::stream::iter(0..n)
        .map(|i| async move { store.create(key(i).as_bytes(), value(i)).await })
        .buffer_unordered(64);
    while let Some(r) = writes.next().await {
        r?;
    }
    Ok(())
}

async fn wait_ready(server: &Arc<apiserver::ApiServer>, name: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !server.cluster_exists(name).await {
        anyhow::ensure!(Instant::now() < deadline, "{name} never became Ready");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(())
}

pub async fn run(quick: bool, objects: Option<usize>) -> anyhow::Result<()> {
    let n = objects.unwrap_or(if quick { 10_000 } else { 100_000 });
    println!("backup benchmark: a cluster of {n} ConfigMaps of ~1 KiB");

    // Ours.
    let (server, _data) = setup::server().await?;
    post_cluster(&server, "big").await?;
    wait_ready(&server, "big").await?;
    let storage = server.store().shared().storage.clone();
    fill(storage.as_ref(), n, |i| {
        registry::key::object("big", "", "configmaps", "default", &format!("cm-{i}"))
    })
    .await?;
    server.store().wait_for_cache().await;

    let started = Instant::now();
    let (code, backup) = call(&server, "GET", &format!("{API}/big/snapshot"), None).await;
    let backup_time = started.elapsed();
    anyhow::ensure!(code == 200, "snapshot: {code}");
    let text = std::str::from_utf8(&backup).context("the backup is text")?;
    anyhow::ensure!(text.trim_end().ends_with("}}"), "the backup has no trailer");

    let started = Instant::now();
    let (_, chunks) = controlplane::backup::restore_chunks(text.lines().map(|l| Ok(l.to_string())))
        .map_err(|e| anyhow::anyhow!(e))?;
    for chunk in chunks {
        let body = chunk.map_err(|e| anyhow::anyhow!(e))?;
        let (code, answer) = call_bytes(
            &server,
            "POST",
            &format!("{API}/copy/restore"),
            Bytes::from(body),
        )
        .await;
        anyhow::ensure!(
            code == 201,
            "restore: {code} {}",
            String::from_utf8_lossy(&answer)
        );
    }
    wait_ready(&server, "copy").await?;
    let restore_time = started.elapsed();

    // The peer: the same keys and values in etcd.
    let etcd = EtcdServer::start().await;
    let etcd_store =
        storage::etcd::EtcdStore::connect(std::slice::from_ref(&etcd.endpoint), b"/bench").await?;
    fill(&etcd_store, n, |i| {
        format!("/registry/configmaps/default/cm-{i}")
    })
    .await?;
    let dir = tempfile::tempdir_in(std::env::current_dir()?.join("target/bench-data"))?;
    let snap = dir.path().join("etcd.db");
    let started = Instant::now();
    let out = std::process::Command::new("etcdctl")
        .args(["--endpoints", &etcd.endpoint, "snapshot", "save"])
        .arg(&snap)
        .env("ETCDCTL_API", "3")
        .output()
        .context("etcdctl (Debian's etcd-client) runs")?;
    let save_time = started.elapsed();
    anyhow::ensure!(
        out.status.success(),
        "etcdctl snapshot save: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let started = Instant::now();
    let out = std::process::Command::new("etcdctl")
        .args(["snapshot", "restore"])
        .arg(&snap)
        .arg("--data-dir")
        .arg(dir.path().join("restored"))
        .env("ETCDCTL_API", "3")
        .output()?;
    let peer_restore = started.elapsed();
    anyhow::ensure!(
        out.status.success(),
        "etcdctl snapshot restore: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let snap_bytes = std::fs::metadata(&snap)?.len();

    println!(
        "backup: {} MiB of JSON lines; etcd snapshot: {} MiB",
        backup.len() >> 20,
        snap_bytes >> 20
    );
    header("matryoshka", "etcdctl");
    let per_s = |d: Duration| n as f64 / d.as_secs_f64();
    line(
        "backup, objects/s",
        per_s(backup_time),
        per_s(save_time),
        "obj/s",
        Better::Higher,
    );
    line(
        "restore (to a Ready cluster), objects/s",
        per_s(restore_time),
        per_s(peer_restore),
        "obj/s",
        Better::Higher,
    );
    println!(
        "backup {:.2}s vs snapshot save {:.2}s; restore {:.2}s vs snapshot restore {:.2}s",
        backup_time.as_secs_f64(),
        save_time.as_secs_f64(),
        restore_time.as_secs_f64(),
        peer_restore.as_secs_f64()
    );
    Ok(())
}
