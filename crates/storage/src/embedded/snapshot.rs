//! Snapshots: the live state at one revision, so the log before it can be deleted.
//!
//! File `<revision>.snap`: `MTSNAP01 | revision: i64 LE | count: u64 LE | count × (key_len: u32 |
//! key | create_rev: i64 | mod_rev: i64 | version: i64 | value_len: u32 | value) | crc32: u32`
//! (little endian, the CRC covers everything before it). Written to a temporary file, synced and
//! renamed, so a crash leaves either the old snapshot or the new one, never half of one.

use std::fs::{self, File};
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use bytes::Bytes;

use super::wal::sync_dir;
use crate::{KeyValue, Revision};

const MAGIC: &[u8; 8] = b"MTSNAP01";

fn path(dir: &Path, rev: Revision) -> PathBuf {
    dir.join(format!("{rev:020}.snap"))
}

/// Snapshots in `dir`, newest first.
pub(super) fn list(dir: &Path) -> io::Result<Vec<(Revision, PathBuf)>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir)? {
        let p = entry?.path();
        if p.extension().is_some_and(|e| e == "snap")
            && let Some(rev) = p
                .file_stem()
                .and_then(|s| s.to_str())
                .and_then(|s| s.parse::<Revision>().ok())
        {
            out.push((rev, p));
        }
    }
    out.sort_by_key(|e| std::cmp::Reverse(e.0));
    Ok(out)
}

/// Writes the snapshot of `items` at `rev` durably.
pub(super) fn write(dir: &Path, rev: Revision, items: &[KeyValue]) -> io::Result<PathBuf> {
    let final_path = path(dir, rev);
    let tmp = final_path.with_extension("snap.tmp");
    let file = File::create(&tmp)?;
    let mut w = BufWriter::with_capacity(1 << 20, &file);
    let mut crc = crc32fast::Hasher::new();
    let mut put = |w: &mut BufWriter<&File>, bytes: &[u8]| -> io::Result<()> {
        crc.update(bytes);
        w.write_all(bytes)
    };
    put(&mut w, MAGIC)?;
    put(&mut w, &rev.to_le_bytes())?;
    put(&mut w, &(items.len() as u64).to_le_bytes())?;
    for kv in items {
        put(&mut w, &(kv.key.len() as u32).to_le_bytes())?;
        put(&mut w, &kv.key)?;
        put(&mut w, &kv.create_revision.to_le_bytes())?;
        put(&mut w, &kv.mod_revision.to_le_bytes())?;
        put(&mut w, &kv.version.to_le_bytes())?;
        put(&mut w, &(kv.value.len() as u32).to_le_bytes())?;
        put(&mut w, &kv.value)?;
    }
    w.write_all(&crc.finalize().to_le_bytes())?;
    w.flush()?;
    drop(w);
    file.sync_all()?;
    fs::rename(&tmp, &final_path)?;
    sync_dir(dir)?;
    Ok(final_path)
}

/// Reads and verifies a snapshot.
pub(super) fn read(p: &Path) -> io::Result<(Revision, Vec<KeyValue>)> {
    let mut raw = Vec::new();
    File::open(p)?.read_to_end(&mut raw)?;
    let bad = |what: &str| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("snapshot {} is corrupt: {what}", p.display()),
        )
    };
    if raw.len() < MAGIC.len() + 20 || &raw[..8] != MAGIC {
        return Err(bad("bad header"));
    }
    let body_len = raw.len() - 4;
    let want = u32::from_le_bytes(raw[body_len..].try_into().unwrap_or_default());
    if crc32fast::hash(&raw[..body_len]) != want {
        return Err(bad("checksum mismatch"));
    }
    let data = Bytes::from(raw).slice(..body_len);
    let mut r = Reader { data, pos: 8 };
    let rev = r.i64().ok_or_else(|| bad("short"))?;
    let count = r.i64().ok_or_else(|| bad("short"))? as u64;
    let mut items = Vec::with_capacity(count.min(1 << 20) as usize);
    for _ in 0..count {
        let kv = (|| {
            let klen = r.u32()? as usize;
            let key = r.bytes(klen)?;
            let create_revision = r.i64()?;
            let mod_revision = r.i64()?;
            let version = r.i64()?;
            let vlen = r.u32()? as usize;
            let value = r.bytes(vlen)?;
            Some(KeyValue {
                key,
                value,
                create_revision,
                mod_revision,
                version,
            })
        })()
        .ok_or_else(|| bad("short record"))?;
        items.push(kv);
    }
    Ok((rev, items))
}

struct Reader {
    data: Bytes,
    pos: usize,
}

impl Reader {
    fn bytes(&mut self, n: usize) -> Option<Bytes> {
        let end = self.pos.checked_add(n)?;
        if end > self.data.len() {
            return None;
        }
        let out = self.data.slice(self.pos..end);
        self.pos = end;
        Some(out)
    }
    fn i64(&mut self) -> Option<i64> {
        Some(i64::from_le_bytes(self.bytes(8)?.as_ref().try_into().ok()?))
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.bytes(4)?.as_ref().try_into().ok()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_round_trips_and_a_damaged_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let items = vec![KeyValue {
            key: Bytes::from_static(b"/a"),
            value: Bytes::from_static(b"1"),
            create_revision: 3,
            mod_revision: 5,
            version: 2,
        }];
        let p = write(dir.path(), 5, &items).unwrap();
        assert_eq!(read(&p).unwrap(), (5, items));
        let mut raw = fs::read(&p).unwrap();
        raw[20] ^= 1;
        fs::write(&p, raw).unwrap();
        assert!(read(&p).is_err());
    }
}
