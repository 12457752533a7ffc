//! Writing layers: tar entry headers that make a layer reproducible (root-owned, time zero),
//! whatever the files' own metadata — the platform's own images and the tests' share them.

/// A header for an entry of `kind` with `mode` and `size`, owned by root at time zero.
pub fn header(kind: tar::EntryType, mode: u32, size: u64) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(kind);
    h.set_mode(mode);
    h.set_size(size);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mtime(0);
    h
}
