//! Writing key material to disk: readable by its owner only (mode 0600), and atomically (a
//! temporary file, synced, then renamed), so a crash never leaves a half-written key behind.

use std::path::Path;

/// Writes a file readable by its owner only.
pub fn write_private(path: &Path, contents: &str) -> std::io::Result<()> {
    write_private_bytes(path, contents.as_bytes())
}

/// Writes bytes readable by their owner only, atomically.
pub fn write_private_bytes(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(contents)?;
    f.sync_all()?;
    std::fs::rename(tmp, path)
}
