//! Reading a container's CRI log as upstream's `ReadLogs` does: start `tailLines` lines from
//! the end, drop lines older than `since`, prefix timestamps (once per logical line: the
//! pieces of a `P`-split line carry one), stop at `limitBytes` (cutting the last line), and,
//! with `follow`, wait for more until the container has exited and everything it wrote is
//! read.
//!
//! Following survives rotation: when the file at the log path is replaced (containerd renames
//! the current file and starts a new one) or truncated, what is left in the old file is read
//! first, then the new file from its start. Waiting uses inotify on the log directory, with a
//! one-second forced check as upstream's `logForceCheckPeriod`.
//!
//! `tailLines` counts lines of the file, so each piece of a split line counts as one (as
//! upstream's `FindTailLineStartIndex`).

use std::io::SeekFrom;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use jiff::Timestamp;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncSeekExt, BufReader};
use tokio::sync::mpsc;

use super::cri::{self, Message};
use super::options::LogOptions;
use super::watch::DirWatch;

/// How long a follow waits without a file event before it looks again (upstream: 1 s).
pub const FORCE_CHECK_PERIOD: Duration = Duration::from_secs(1);
/// Output is sent in chunks of at most this much; a chunk is also sent whenever the reader
/// has caught up with the file, so nothing written waits.
const CHUNK: usize = 32 << 10;
/// Tail search block size.
const BLOCK: u64 = 4096;

/// Why a log could not be read (upstream's texts: the kubelet answers them with 400).
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("failed to try resolving symlinks in path {path:?}: {source}")]
    Resolve {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to open log file {path:?}: {source}")]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to tail {tail} lines of log file {path:?}: {source}")]
    Tail {
        tail: i64,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to read log file {path:?}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Whether a container instance still runs (`KubeletApi::container_running`).
#[async_trait::async_trait]
pub trait Liveness: Send + Sync {
    async fn running(&self, container_id: &str) -> bool;
}

/// Where the output goes: chunks on a channel (an HTTP body that sends each as it comes).
struct Output {
    tx: mpsc::Sender<Bytes>,
    buf: Vec<u8>,
}

/// The reader of the output is gone (the client disconnected).
struct Closed;

impl Output {
    async fn write(&mut self, data: &[u8]) -> Result<(), Closed> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= CHUNK {
            self.flush().await?;
        }
        Ok(())
    }

    async fn flush(&mut self) -> Result<(), Closed> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::take(&mut self.buf));
        self.tx.send(chunk).await.map_err(|_| Closed)
    }
}

/// What the writer says after a message.
enum Written {
    More,
    /// `limitBytes` reached.
    Limit,
}

/// Upstream's `logWriter`: since, timestamps, byte limit.
struct LogWriter {
    since: Option<Timestamp>,
    timestamps: bool,
    remain: i64,
}

impl LogWriter {
    async fn write(
        &mut self,
        msg: &Message<'_>,
        add_prefix: bool,
        out: &mut Output,
    ) -> Result<Written, Closed> {
        if self.since.is_some_and(|s| msg.timestamp < s) {
            return Ok(Written::More);
        }
        let mut line = Vec::with_capacity(msg.content.len() + 32);
        if self.timestamps && add_prefix {
            line.extend_from_slice(cri::format_timestamp(msg.timestamp).as_bytes());
            line.push(b' ');
        }
        line.extend_from_slice(msg.content);
        let keep = usize::try_from(self.remain).unwrap_or(usize::MAX);
        line.truncate(keep);
        out.write(&line).await?;
        self.remain -= i64::try_from(line.len()).unwrap_or(i64::MAX);
        Ok(if self.remain <= 0 {
            Written::Limit
        } else {
            Written::More
        })
    }
}

/// An opened log, positioned where reading starts: opening and the tail search happen before
/// any output, so their failures can still be answered with an error status.
pub struct OpenLog {
    path: PathBuf,
    reader: BufReader<tokio::fs::File>,
    identity: (u64, u64),
    /// The offset of the next byte to be read.
    pos: u64,
}

/// Resolves symlinks, opens the log and seeks to `tailLines` lines from its end.
pub async fn open(path: &Path, options: &LogOptions) -> Result<OpenLog, LogError> {
    let resolved = tokio::fs::canonicalize(path)
        .await
        .map_err(|source| LogError::Resolve {
            path: path.to_path_buf(),
            source,
        })?;
    let open_err = |source| LogError::Open {
        path: resolved.clone(),
        source,
    };
    let mut file = tokio::fs::File::open(&resolved).await.map_err(open_err)?;
    let meta = file.metadata().await.map_err(open_err)?;
    let tail = options.tail_lines.unwrap_or(-1);
    let tail_err = |source| LogError::Tail {
        tail,
        path: resolved.clone(),
        source,
    };
    let start = tail_start(&mut file, tail).await.map_err(tail_err)?;
    file.seek(SeekFrom::Start(start)).await.map_err(tail_err)?;
    Ok(OpenLog {
        path: resolved.clone(),
        reader: BufReader::new(file),
        identity: (meta.dev(), meta.ino()),
        pos: start,
    })
}

/// The offset where the last `n` lines (newline-terminated, plus an unterminated rest)
/// start; `n < 0` is the whole file.
pub async fn tail_start<F>(file: &mut F, n: i64) -> std::io::Result<u64>
where
    F: tokio::io::AsyncRead + tokio::io::AsyncSeek + Unpin,
{
    if n < 0 {
        return Ok(0);
    }
    let n = n as u64;
    let size = file.seek(SeekFrom::End(0)).await?;
    // Newlines seen from the end; the line start is just after the (n+1)-th from the end,
    // where a trailing newline ends the last line rather than starting a new one.
    let mut seen = 0u64;
    let mut right = size;
    let mut buf = vec![0u8; BLOCK as usize];
    while right > 0 {
        let left = right.saturating_sub(BLOCK);
        let len = (right - left) as usize;
        file.seek(SeekFrom::Start(left)).await?;
        file.read_exact(&mut buf[..len]).await?;
        for i in (0..len).rev() {
            if buf[i] != b'\n' {
                continue;
            }
            seen += 1;
            if seen > n {
                return Ok(left + i as u64 + 1);
            }
        }
        right = left;
    }
    Ok(0)
}

/// Streams an opened log into `tx` as `options` say, following with `liveness` deciding
/// when the container is done. Returns when everything asked for is sent, the limit is hit,
/// the container has exited (when following), or the receiver is gone.
pub async fn stream(
    mut log: OpenLog,
    container_id: &str,
    options: &LogOptions,
    now: Timestamp,
    liveness: &dyn Liveness,
    tx: mpsc::Sender<Bytes>,
) -> Result<(), LogError> {
    let mut out = Output {
        tx,
        buf: Vec::new(),
    };
    let mut writer = LogWriter {
        since: options.since(now),
        timestamps: options.timestamps,
        remain: options.limit_bytes.unwrap_or(i64::MAX),
    };
    let limited = options.tail_lines.is_some() && !options.follow;
    let mut state = LineState {
        new_line: true,
        lines_left: options.tail_lines.filter(|_| limited),
    };
    let mut watch: Option<DirWatch> = None;
    let mut found = true;
    // The file at the path was replaced; the old one is read to its end first.
    let mut draining = false;
    let mut line = Vec::new();
    loop {
        if state.lines_left == Some(0) {
            break;
        }
        let n = log
            .reader
            .read_until(b'\n', &mut line)
            .await
            .map_err(|source| LogError::Read {
                path: log.path.clone(),
                source,
            })?;
        log.pos += n as u64;
        if line.last() == Some(&b'\n') {
            match state.emit(&line, &mut writer, &mut out).await {
                Ok(true) => {}
                Ok(false) | Err(Closed) => break,
            }
            line.clear();
            continue;
        }
        // The end of the file, perhaps inside a line still being written.
        if !options.follow {
            if !line.is_empty() {
                tracing::debug!(path = %log.path.display(), "incomplete line in log file");
                let _ = state.emit(&line, &mut writer, &mut out).await;
            }
            break;
        }
        if draining {
            draining = false;
            if let Some(next) = reopen(&log.path).await {
                line.clear();
                log = next;
            }
            continue;
        }
        if !found {
            break;
        }
        if out.flush().await.is_err() {
            return Ok(());
        }
        if watch.is_none() {
            // Watch, then look again: what was written meanwhile raised no event.
            watch = DirWatch::new(log.path.parent().unwrap_or(Path::new("/"))).ok();
            if watch.is_some() {
                continue;
            }
        }
        found = liveness.running(container_id).await;
        if found {
            tokio::select! {
                () = wait(watch.as_mut()) => {}
                () = out.tx.closed() => return Ok(()),
            }
        }
        draining = replaced(&log).await;
    }
    let _ = out.flush().await;
    Ok(())
}

/// Per-line bookkeeping: whether the next piece starts a logical line, and the tail budget.
struct LineState {
    new_line: bool,
    lines_left: Option<i64>,
}

impl LineState {
    /// Writes one file line; `Ok(false)` when the byte limit is reached.
    async fn emit(
        &mut self,
        line: &[u8],
        writer: &mut LogWriter,
        out: &mut Output,
    ) -> Result<bool, Closed> {
        let msg = match cri::parse(line) {
            Ok(m) => m,
            Err(e) => {
                tracing::debug!(error = %e, "unparsable line in log file");
                return Ok(true);
            }
        };
        let written = writer.write(&msg, self.new_line, out).await?;
        if let Some(left) = self.lines_left.as_mut() {
            *left -= 1;
        }
        self.new_line = !msg.partial;
        Ok(matches!(written, Written::More))
    }
}

/// Waits for a change in the log directory, or the forced check period.
async fn wait(watch: Option<&mut DirWatch>) {
    match watch {
        Some(w) => {
            let _ = tokio::time::timeout(FORCE_CHECK_PERIOD, w.changed()).await;
        }
        None => tokio::time::sleep(FORCE_CHECK_PERIOD).await,
    }
}

/// Whether the file at the log path is no longer the one being read (rotated, removed and
/// recreated) or was truncated below the read position.
async fn replaced(log: &OpenLog) -> bool {
    match tokio::fs::metadata(&log.path).await {
        Ok(meta) => (meta.dev(), meta.ino()) != log.identity || meta.len() < log.pos,
        Err(_) => false,
    }
}

async fn reopen(path: &Path) -> Option<OpenLog> {
    let file = tokio::fs::File::open(path).await.ok()?;
    let meta = file.metadata().await.ok()?;
    Some(OpenLog {
        path: path.to_path_buf(),
        reader: BufReader::new(file),
        identity: (meta.dev(), meta.ino()),
        pos: 0,
    })
}
