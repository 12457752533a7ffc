//! The write-ahead log of the embedded store.
//!
//! The log is a sequence of segment files `<first revision>.wal`, each a run of records:
//! `len: u32 LE | crc32: u32 LE | payload`, payload = `op: u8 | revision: i64 LE |
//! key_len: u32 LE | key | value`. A batch of writes is appended with one `write` and made
//! durable with one `fdatasync` (group commit). On open, records are replayed in order; a torn
//! or corrupt record can only be the tail of the newest segment (nothing after it was ever
//! acknowledged), and the segment is truncated there.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use bytes::Bytes;

use crate::Revision;

const HEADER: usize = 8;
const OP_PUT: u8 = 1;
const OP_DELETE: u8 = 2;

/// A logged write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Record {
    Put {
        rev: Revision,
        key: Bytes,
        value: Bytes,
    },
    Delete {
        rev: Revision,
        key: Bytes,
    },
}

impl Record {
    pub fn rev(&self) -> Revision {
        match self {
            Record::Put { rev, .. } | Record::Delete { rev, .. } => *rev,
        }
    }

    /// Appends the framed record to `buf`.
    pub fn encode(&self, buf: &mut Vec<u8>) {
        let (op, rev, key, value): (u8, Revision, &[u8], &[u8]) = match self {
            Record::Put { rev, key, value } => (OP_PUT, *rev, key, value),
            Record::Delete { rev, key } => (OP_DELETE, *rev, key, &[]),
        };
        let payload_len = 1 + 8 + 4 + key.len() + value.len();
        let start = buf.len();
        buf.extend_from_slice(&(payload_len as u32).to_le_bytes());
        buf.extend_from_slice(&[0; 4]);
        buf.push(op);
        buf.extend_from_slice(&rev.to_le_bytes());
        buf.extend_from_slice(&(key.len() as u32).to_le_bytes());
        buf.extend_from_slice(key);
        buf.extend_from_slice(value);
        let crc = crc32fast::hash(&buf[start + HEADER..]);
        buf[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
    }

    /// Decodes the record at the start of `data`: `Some((record, bytes used))`, or `None` if the
    /// data is torn or corrupt.
    pub fn decode(data: &Bytes) -> Option<(Record, usize)> {
        if data.len() < HEADER {
            return None;
        }
        let len = u32::from_le_bytes(data[0..4].try_into().ok()?) as usize;
        let crc = u32::from_le_bytes(data[4..8].try_into().ok()?);
        if len < 13 || data.len() < HEADER + len {
            return None;
        }
        let payload = &data[HEADER..HEADER + len];
        if crc32fast::hash(payload) != crc {
            return None;
        }
        let op = payload[0];
        let rev = i64::from_le_bytes(payload[1..9].try_into().ok()?);
        let key_len = u32::from_le_bytes(payload[9..13].try_into().ok()?) as usize;
        if 13 + key_len > len {
            return None;
        }
        let key = data.slice(HEADER + 13..HEADER + 13 + key_len);
        let record = match op {
            OP_PUT => Record::Put {
                rev,
                key,
                value: data.slice(HEADER + 13 + key_len..HEADER + len),
            },
            OP_DELETE => Record::Delete { rev, key },
            _ => return None,
        };
        Some((record, HEADER + len))
    }
}

/// The open log: appends go to the newest segment.
pub(super) struct Wal {
    dir: PathBuf,
    file: File,
    segment_bytes: u64,
    /// Bytes appended since the last snapshot (what a snapshot would let us reclaim).
    pub bytes_since_snapshot: u64,
}

pub(super) fn segment_path(dir: &Path, first_rev: Revision) -> PathBuf {
    dir.join(format!("{first_rev:020}.wal"))
}

/// The segments in `dir`, oldest first, with the first revision each may hold.
pub(super) fn segments(dir: &Path) -> io::Result<Vec<(Revision, PathBuf)>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "wal")
            && let Some(rev) = path
                .file_stem()
                .and_then(|s| s.to_str())
                .and_then(|s| s.parse().ok())
        {
            out.push((rev, path));
        }
    }
    out.sort();
    Ok(out)
}

/// Replays every record with a revision above `after` in order, checking that revisions are
/// contiguous. Truncates a torn tail of the newest segment. Returns the last revision seen
/// (`after` if none).
pub(super) fn replay(
    dir: &Path,
    after: Revision,
    mut apply: impl FnMut(Record),
) -> io::Result<Revision> {
    let segs = segments(dir)?;
    let mut last = after;
    for (i, (first_rev, path)) in segs.iter().enumerate() {
        let newest = i + 1 == segs.len();
        if let Some((next_first, _)) = segs.get(i + 1)
            && *next_first <= after + 1
        {
            continue; // every record of this segment is below the snapshot
        }
        let mut raw = Vec::new();
        File::open(path)?.read_to_end(&mut raw)?;
        let data = Bytes::from(raw);
        let mut offset = 0;
        while offset < data.len() {
            let Some((record, used)) = Record::decode(&data.slice(offset..)) else {
                if !newest {
                    return Err(corrupt(
                        path,
                        offset,
                        "a damaged record before the newest segment",
                    ));
                }
                tracing::warn!(segment = %path.display(), offset, "truncating a torn write-ahead log tail");
                let f = OpenOptions::new().write(true).open(path)?;
                f.set_len(offset as u64)?;
                f.sync_all()?;
                break;
            };
            let rev = record.rev();
            if rev < *first_rev {
                return Err(corrupt(path, offset, "a record older than its segment"));
            }
            if rev > after {
                if rev != last + 1 {
                    return Err(corrupt(
                        path,
                        offset,
                        &format!("revision {rev} follows {last}"),
                    ));
                }
                last = rev;
                apply(record);
            }
            offset += used;
        }
    }
    Ok(last)
}

fn corrupt(path: &Path, offset: usize, what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "write-ahead log {} is corrupt at byte {offset}: {what}",
            path.display()
        ),
    )
}

impl Wal {
    /// Opens the newest segment for appending, or starts one at `next_rev`.
    pub fn open(dir: &Path, next_rev: Revision) -> io::Result<Wal> {
        let segs = segments(dir)?;
        let mut since = 0;
        for (_, p) in &segs {
            since += fs::metadata(p)?.len();
        }
        let path = match segs.last() {
            Some((_, p)) => p.clone(),
            None => segment_path(dir, next_rev),
        };
        let file = OpenOptions::new().create(true).append(true).open(&path)?;
        let segment_bytes = file.metadata()?.len();
        sync_dir(dir)?;
        Ok(Wal {
            dir: dir.to_path_buf(),
            file,
            segment_bytes,
            bytes_since_snapshot: since,
        })
    }

    /// Appends a batch of encoded records and makes it durable.
    pub fn append(&mut self, buf: &[u8]) -> io::Result<()> {
        self.file.write_all(buf)?;
        self.file.sync_data()?;
        self.segment_bytes += buf.len() as u64;
        self.bytes_since_snapshot += buf.len() as u64;
        Ok(())
    }

    pub fn segment_bytes(&self) -> u64 {
        self.segment_bytes
    }

    /// Starts a new segment whose first record will be `next_rev`.
    pub fn rotate(&mut self, next_rev: Revision) -> io::Result<()> {
        let path = segment_path(&self.dir, next_rev);
        self.file = OpenOptions::new().create(true).append(true).open(&path)?;
        self.segment_bytes = 0;
        sync_dir(&self.dir)
    }
}

/// Makes file creations, renames and removals in `dir` durable.
pub(super) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_through_their_encoding() {
        let recs = [
            Record::Put {
                rev: 7,
                key: Bytes::from_static(b"/k"),
                value: Bytes::from_static(b"v"),
            },
            Record::Delete {
                rev: 8,
                key: Bytes::from_static(b"\x00\xff"),
            },
            Record::Put {
                rev: 9,
                key: Bytes::from_static(b"e"),
                value: Bytes::new(),
            },
        ];
        let mut buf = Vec::new();
        for r in &recs {
            r.encode(&mut buf);
        }
        let data = Bytes::from(buf);
        let mut off = 0;
        for r in &recs {
            let (got, used) = Record::decode(&data.slice(off..)).unwrap();
            assert_eq!(&got, r);
            off += used;
        }
        assert_eq!(off, data.len());
    }

    #[test]
    fn a_flipped_bit_or_a_short_tail_is_detected() {
        let mut buf = Vec::new();
        Record::Put {
            rev: 1,
            key: Bytes::from_static(b"k"),
            value: Bytes::from_static(b"value"),
        }
        .encode(&mut buf);
        for cut in 0..buf.len() {
            assert!(
                Record::decode(&Bytes::copy_from_slice(&buf[..cut])).is_none(),
                "cut at {cut}"
            );
        }
        for i in 0..buf.len() {
            let mut bad = buf.clone();
            bad[i] ^= 0x10;
            assert!(Record::decode(&Bytes::from(bad)).is_none(), "flip at {i}");
        }
    }

    #[test]
    fn replay_truncates_a_torn_tail_and_keeps_what_precedes_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut wal = Wal::open(dir.path(), 1).unwrap();
        let mut buf = Vec::new();
        for rev in 1..=3 {
            Record::Put {
                rev,
                key: Bytes::from_static(b"k"),
                value: Bytes::from_static(b"v"),
            }
            .encode(&mut buf);
        }
        let torn = buf.len() - 3;
        wal.append(&buf[..torn]).unwrap();
        drop(wal);
        let mut seen = Vec::new();
        let last = replay(dir.path(), 0, |r| seen.push(r.rev())).unwrap();
        assert_eq!((last, seen), (2, vec![1, 2]));
        // The tail is gone: appending continues from a clean record boundary.
        let mut wal = Wal::open(dir.path(), 3).unwrap();
        let mut buf = Vec::new();
        Record::Put {
            rev: 3,
            key: Bytes::from_static(b"k"),
            value: Bytes::from_static(b"w"),
        }
        .encode(&mut buf);
        wal.append(&buf).unwrap();
        assert_eq!(replay(dir.path(), 0, |_| {}).unwrap(), 3);
    }
}
