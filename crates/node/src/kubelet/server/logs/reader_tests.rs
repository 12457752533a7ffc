//! Log reading against files written in the CRI format: tail, since, timestamps, limits,
//! partial lines, following appends, exits, rotation and truncation.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use jiff::Timestamp;
use tokio::sync::mpsc;

use super::options::LogOptions;
use super::reader::{self, Liveness};

struct Running(AtomicBool);

#[async_trait::async_trait]
impl Liveness for Running {
    async fn running(&self, _: &str) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

const T: Duration = Duration::from_secs(10);

fn line(second: u32, stream: &str, tag: &str, text: &str) -> String {
    format!("2024-05-01T12:00:{second:02}.000000001Z {stream} {tag} {text}\n")
}

fn write(path: &Path, lines: &[String]) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    for l in lines {
        f.write_all(l.as_bytes()).unwrap();
    }
    f.sync_all().unwrap();
}

fn now() -> Timestamp {
    "2024-05-01T12:01:00Z".parse().unwrap()
}

/// Reads a whole (non-following) log with `query`.
async fn read(path: &Path, query: &str) -> String {
    let opts = LogOptions::from_query(query).unwrap();
    let log = reader::open(path, &opts).await.unwrap();
    let (tx, mut rx) = mpsc::channel(64);
    let alive = Running(AtomicBool::new(false));
    reader::stream(log, "id", &opts, now(), &alive, tx)
        .await
        .unwrap();
    let mut out = Vec::new();
    while let Some(c) = rx.recv().await {
        out.extend_from_slice(&c);
    }
    String::from_utf8(out).unwrap()
}

fn sample(dir: &Path) -> std::path::PathBuf {
    let p = dir.join("0.log");
    write(
        &p,
        &[
            line(1, "stdout", "F", "one"),
            line(2, "stderr", "F", "two"),
            line(3, "stdout", "P", "thr"),
            line(3, "stdout", "F", "ee"),
            line(4, "stdout", "F", "four"),
        ],
    );
    p
}

#[tokio::test]
async fn all_lines_come_back_with_partials_joined_and_streams_interleaved() {
    let dir = tempfile::tempdir().unwrap();
    let p = sample(dir.path());
    assert_eq!(read(&p, "").await, "one\ntwo\nthree\nfour\n");
}

#[tokio::test]
async fn timestamps_prefix_each_logical_line_once() {
    let dir = tempfile::tempdir().unwrap();
    let p = sample(dir.path());
    assert_eq!(
        read(&p, "timestamps=true").await,
        "2024-05-01T12:00:01.000000001Z one\n\
         2024-05-01T12:00:02.000000001Z two\n\
         2024-05-01T12:00:03.000000001Z three\n\
         2024-05-01T12:00:04.000000001Z four\n"
    );
}

#[tokio::test]
async fn tail_counts_file_lines_from_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let p = sample(dir.path());
    assert_eq!(read(&p, "tailLines=1").await, "four\n");
    assert_eq!(read(&p, "tailLines=2").await, "ee\nfour\n");
    assert_eq!(read(&p, "tailLines=0").await, "");
    assert_eq!(read(&p, "tailLines=100").await, "one\ntwo\nthree\nfour\n");
    assert_eq!(read(&p, "tail=all").await, "one\ntwo\nthree\nfour\n");
}

#[tokio::test]
async fn since_drops_older_lines() {
    let dir = tempfile::tempdir().unwrap();
    let p = sample(dir.path());
    assert_eq!(
        read(&p, "sinceTime=2024-05-01T12:00:03Z").await,
        "three\nfour\n"
    );
    // now() is 12:01:00: the last 57 seconds start at 12:00:03.
    assert_eq!(read(&p, "sinceSeconds=57").await, "three\nfour\n");
    assert_eq!(read(&p, "sinceSeconds=1").await, "");
}

#[tokio::test]
async fn limit_bytes_cuts_the_last_line() {
    let dir = tempfile::tempdir().unwrap();
    let p = sample(dir.path());
    assert_eq!(read(&p, "limitBytes=6").await, "one\ntw");
    assert_eq!(read(&p, "limitBytes=4").await, "one\n");
    // The limit counts the timestamp prefixes too.
    assert_eq!(
        read(&p, "limitBytes=33&timestamps=true").await,
        "2024-05-01T12:00:01.000000001Z on"
    );
}

#[tokio::test]
async fn unparsable_lines_are_skipped_and_an_unterminated_last_line_is_shown() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("0.log");
    write(
        &p,
        &[
            "garbage\n".to_string(),
            line(1, "stdout", "F", "ok"),
            "2024-05-01T12:00:02Z stdout F no newline".to_string(),
        ],
    );
    assert_eq!(read(&p, "").await, "ok\nno newline");
}

#[tokio::test]
async fn a_symlink_is_resolved_and_a_missing_file_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let p = sample(dir.path());
    let link = dir.path().join("link.log");
    std::os::unix::fs::symlink(&p, &link).unwrap();
    assert_eq!(read(&link, "tailLines=1").await, "four\n");
    let e = match reader::open(&dir.path().join("none.log"), &LogOptions::default()).await {
        Err(e) => e.to_string(),
        Ok(_) => panic!("opened a missing file"),
    };
    assert!(
        e.starts_with("failed to try resolving symlinks in path"),
        "{e}"
    );
}

/// A following read: the receiver, the liveness switch, the task.
struct Follow {
    rx: mpsc::Receiver<Bytes>,
    alive: Arc<Running>,
    task: tokio::task::JoinHandle<()>,
    seen: String,
}

impl Follow {
    async fn start(path: &Path, query: &str) -> Follow {
        let opts = LogOptions::from_query(query).unwrap();
        let log = reader::open(path, &opts).await.unwrap();
        let (tx, rx) = mpsc::channel(64);
        let alive = Arc::new(Running(AtomicBool::new(true)));
        let a = alive.clone();
        let task = tokio::spawn(async move {
            reader::stream(log, "id", &opts, now(), a.as_ref(), tx)
                .await
                .unwrap();
        });
        Follow {
            rx,
            alive,
            task,
            seen: String::new(),
        }
    }

    /// Waits until the output so far ends with `want`.
    async fn until(&mut self, want: &str) {
        let deadline = tokio::time::Instant::now() + T;
        while !self.seen.ends_with(want) {
            let chunk = tokio::time::timeout_at(deadline, self.rx.recv())
                .await
                .unwrap_or_else(|_| panic!("waited for {want:?}, got {:?}", self.seen))
                .unwrap_or_else(|| panic!("ended before {want:?}, got {:?}", self.seen));
            self.seen.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    }

    /// Waits for the end of the stream, returning everything seen.
    async fn end(mut self) -> String {
        while let Some(c) = tokio::time::timeout(T, self.rx.recv()).await.unwrap() {
            self.seen.push_str(std::str::from_utf8(&c).unwrap());
        }
        tokio::time::timeout(T, self.task).await.unwrap().unwrap();
        self.seen
    }
}

#[tokio::test]
async fn follow_streams_appends_and_ends_once_the_container_exits_and_all_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let p = sample(dir.path());
    let mut f = Follow::start(&p, "follow=true&tailLines=1").await;
    f.until("four\n").await;
    write(&p, &[line(5, "stdout", "F", "five")]);
    f.until("five\n").await;
    // A line written in two pieces is shown as it completes.
    write(&p, &[line(6, "stdout", "P", "si")]);
    f.until("si").await;
    write(&p, &[line(6, "stdout", "F", "x")]);
    f.until("six\n").await;
    // The last words before the exit are still read.
    write(&p, &[line(7, "stderr", "F", "bye")]);
    f.alive.0.store(false, Ordering::SeqCst);
    assert_eq!(f.end().await, "four\nfive\nsix\nbye\n");
}

#[tokio::test]
async fn follow_reads_the_rest_of_a_rotated_file_then_the_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let p = sample(dir.path());
    let mut f = Follow::start(&p, "follow=true&tailLines=0").await;
    // Lines written just before the rotation, then containerd renames and starts anew.
    write(&p, &[line(5, "stdout", "F", "before rotation")]);
    std::fs::rename(&p, dir.path().join("0.log.20240501-120005")).unwrap();
    write(&p, &[line(6, "stdout", "F", "after rotation")]);
    f.until("after rotation\n").await;
    assert_eq!(f.seen, "before rotation\nafter rotation\n");
    f.alive.0.store(false, Ordering::SeqCst);
    write(&p, &[line(7, "stdout", "F", "last")]);
    assert_eq!(f.end().await, "before rotation\nafter rotation\nlast\n");
}

#[tokio::test]
async fn follow_starts_over_when_the_file_is_truncated() {
    let dir = tempfile::tempdir().unwrap();
    let p = sample(dir.path());
    let mut f = Follow::start(&p, "follow=true").await;
    f.until("four\n").await;
    std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&p)
        .unwrap();
    write(&p, &[line(9, "stdout", "F", "fresh")]);
    f.until("fresh\n").await;
    f.alive.0.store(false, Ordering::SeqCst);
    assert_eq!(f.end().await, "one\ntwo\nthree\nfour\nfresh\n");
}

#[tokio::test]
async fn follow_stops_when_the_client_goes_away() {
    let dir = tempfile::tempdir().unwrap();
    let p = sample(dir.path());
    let mut f = Follow::start(&p, "follow=true").await;
    f.until("four\n").await;
    let Follow { rx, task, .. } = f;
    drop(rx);
    // No more writes: only noticing the closed channel ends the task.
    tokio::time::timeout(T, task).await.unwrap().unwrap();
}

#[tokio::test]
async fn follow_with_limit_bytes_stops_at_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let p = sample(dir.path());
    let f = Follow::start(&p, "follow=true&limitBytes=10").await;
    assert_eq!(f.end().await, "one\ntwo\nth");
}
