//! Small file helpers: durable atomic replace (write temp, fsync, rename, fsync dir).
use std::fs;
use std::io;
use std::path::Path;

/// Replaces `path` with `bytes` so that after a crash the file holds either the old or the
/// new contents, never a mix (storage's one implementation).
pub use crate::storage::dma::write_atomic_blocking as write_atomic;

/// fsyncs the directory holding `path`, so a create/rename in it is durable (storage's
/// one directory-sync implementation; this thread may block).
pub fn sync_dir(path: &Path) -> io::Result<()> {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => crate::storage::dma::sync_dir_blocking(dir),
        _ => Ok(()),
    }
}

/// Reads the whole file, or None if it does not exist.
pub fn read_if_exists(path: &Path) -> io::Result<Option<Vec<u8>>> {
    match fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}
