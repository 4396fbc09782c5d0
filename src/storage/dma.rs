//! Thin helpers over glommio DMA files (O_DIRECT over io_uring).
use std::path::{Path, PathBuf};

use bytes::Bytes;
use std::rc::Rc;

use glommio::io::DmaFile;

use super::file::{FileRole, SegmentFile};
use super::{Result, StorageError, WriteMode};

/// Name of the non-empty file every executor opens first (see `open_iopoll_probe`).
pub const IOPOLL_PROBE_FILE: &str = ".iopoll-probe";

/// Writes the probe file with std::fs. Call before any executor starts.
pub fn write_iopoll_probe(data_dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(data_dir)?;
    std::fs::write(data_dir.join(IOPOLL_PROBE_FILE), vec![0xA5u8; 4096])
}

/// glommio decides whether a device supports polled I/O by reading from the first DMA
/// file opened on it; an empty file makes the probe "succeed" and every later DMA read
/// fail with EOPNOTSUPP. Opening a non-empty file first on each executor avoids that.
pub async fn open_iopoll_probe(data_dir: &Path) -> Result<()> {
    let path = data_dir.join(IOPOLL_PROBE_FILE);
    let f = DmaFile::open(&path).await.map_err(|e| StorageError::glommio("opening the io probe file", e))?;
    let _ = f.read_at(0, 512).await;
    let _ = f.close().await;
    Ok(())
}

/// Opens (creating) an O_DIRECT segment file through the storage seam (`file.rs`).
pub async fn open_rw(path: &Path) -> Result<Rc<SegmentFile>> {
    SegmentFile::open_rw(path, FileRole::Segment).await
}

/// Opens (creating) a segment file of kind `mode` through the storage seam.
pub async fn open_segment(path: &Path, mode: WriteMode) -> Result<Rc<SegmentFile>> {
    SegmentFile::open_rw_as(path, FileRole::Segment, mode).await
}

/// Reads `len` bytes at `pos` (any alignment) into owned `Bytes`. Short at end of file.
pub async fn read_bytes(file: &SegmentFile, pos: u64, len: usize) -> Result<Bytes> {
    file.read_bytes(pos, len).await
}

/// Writes `data` at aligned `pos`, padding the last block with zeros.
pub async fn write_padded(file: &SegmentFile, pos: u64, data: &[u8]) -> Result<()> {
    debug_assert_eq!(file.align_down(pos), pos, "DMA writes start on a block boundary");
    let len = file.align_up(data.len() as u64) as usize;
    let mut buf = file.alloc_write_buffer(len.max(file.alignment() as usize));
    buf.as_bytes_mut()[..data.len()].copy_from_slice(data);
    let want = buf.len();
    let n = file.write_at(buf, pos).await?;
    if n < want {
        // A short O_DIRECT write means the device ran out of space mid-way.
        return Err(StorageError::NoSpace { context: format!("writing {want} bytes (wrote {n})") });
    }
    Ok(())
}

/// The bytes of a checked file: magic, version, length, CRC-32C, payload.
pub fn checked_file_bytes(magic: u32, version: u16, payload: &[u8]) -> Vec<u8> {
    let mut data = Vec::with_capacity(payload.len() + 14);
    data.extend_from_slice(&magic.to_be_bytes());
    data.extend_from_slice(&version.to_be_bytes());
    data.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    data.extend_from_slice(&crc32c::crc32c(payload).to_be_bytes());
    data.extend_from_slice(payload);
    data
}

/// A checked file replaced through the page cache, with no fdatasync and no directory
/// sync: for a file whose loss or staleness after a crash is safe (the high-watermark
/// checkpoint: a lost one only starts the high watermark lower), saved often. A crash may
/// leave the old file, the new one, or a damaged one, which its CRC rejects. Why not
/// `write_checked_file`: its O_DIRECT write and fdatasync wait for the device (on ext4 an
/// fdatasync commits the journal, which writes out other files' dirty data first), and
/// they take the shard's io_uring workers while they wait, so the segment writes queued
/// behind them stall (produce p99.9 of 100-250 ms every 5 s under W3, issue 10).
/// An existing file is overwritten in place: replacing it (temporary file and rename)
/// freed the old file's block at every save, a synchronous discard each where the
/// filesystem is mounted with `discard` (100k partitions' checkpoints at a shutdown).
pub async fn write_checked_file_unsynced(path: &Path, magic: u32, version: u16, payload: &[u8]) -> Result<()> {
    let data = checked_file_bytes(magic, version, payload);
    let (tmp, path) = (tmp_path(path), path.to_path_buf());
    let what = path.display().to_string();
    glommio::executor()
        .spawn_blocking(move || match overwrite_in_place_blocking(&path, &data)? {
            Some(_) => Ok(()),
            None => std::fs::write(&tmp, &data).and_then(|()| std::fs::rename(&tmp, &path)),
        })
        .await
        .map_err(|e| StorageError::io(format!("replacing {what}"), e))
}

/// Writes `data` over the start of the existing file at `path`, cutting a longer file to
/// it (never to 0: that would free its block, a synchronous discard where the filesystem
/// is mounted with `discard`); no sync. `Ok(None)` when there is no file. Blocking.
pub fn overwrite_in_place_blocking(path: &Path, data: &[u8]) -> std::io::Result<Option<std::fs::File>> {
    use std::os::unix::fs::FileExt;
    let f = match std::fs::OpenOptions::new().write(true).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    f.write_all_at(data, 0)?;
    if f.metadata()?.len() > data.len() as u64 {
        f.set_len(data.len() as u64)?;
    }
    Ok(Some(f))
}

/// A small file with a header (magic, version, length, CRC-32C) written atomically:
/// tmp file, fdatasync, rename. Used for index files, checkpoints and snapshots.
pub async fn write_checked_file(path: &Path, magic: u32, version: u16, payload: &[u8]) -> Result<()> {
    let data = checked_file_bytes(magic, version, payload);
    let tmp = tmp_path(path);
    let file = SegmentFile::open_rw(&tmp, FileRole::Metadata).await?;
    write_padded(&file, 0, &data).await?;
    file.fdatasync().await?;
    file.rename(path).await?;
    drop(file);
    // The rename is durable only once the directory is.
    sync_parent_dir(path).await
}

/// Reads a file written by `write_checked_file`; `Ok(None)` when it does not exist.
pub async fn read_checked_file(path: &Path, magic: u32, version: u16) -> Result<Option<Vec<u8>>> {
    let Some(file) = SegmentFile::open_existing(path, FileRole::Metadata).await? else { return Ok(None) };
    let size = file.file_size().await?;
    let data = read_bytes(&file, 0, size as usize).await?;
    drop(file);
    parse_checked_file(path, &data, magic, version).map(Some)
}

/// The payload of a `write_checked_file` file's bytes (`path` names it in errors).
pub fn parse_checked_file(path: &Path, data: &[u8], magic: u32, version: u16) -> Result<Vec<u8>> {
    let corrupt = |detail: &str| StorageError::Corrupt { what: path.display().to_string(), detail: detail.into() };
    if data.len() < 14 {
        return Err(corrupt("shorter than its header"));
    }
    if u32::from_be_bytes([data[0], data[1], data[2], data[3]]) != magic {
        return Err(corrupt("bad magic"));
    }
    if u16::from_be_bytes([data[4], data[5]]) != version {
        return Err(corrupt("unsupported version"));
    }
    let len = u32::from_be_bytes([data[6], data[7], data[8], data[9]]) as usize;
    let crc = u32::from_be_bytes([data[10], data[11], data[12], data[13]]);
    let payload = data.get(14..14 + len).ok_or_else(|| corrupt("truncated payload"))?;
    if crc32c::crc32c(payload) != crc {
        return Err(corrupt("CRC-32C mismatch"));
    }
    Ok(payload.to_vec())
}

/// A derived file the caller can rebuild (an index, the cleaner checkpoint): `None` when
/// it is missing or unusable. Unusable is not silent: an unreadable or corrupt file is
/// logged and counted (`shardlog_storage_unreadable_files_total{file=kind}`), so a failing
/// disk shows instead of hiding behind rebuilds.
pub async fn read_rebuildable_file(path: &Path, magic: u32, version: u16, kind: &'static str) -> Option<Vec<u8>> {
    match read_checked_file(path, magic, version).await {
        Ok(payload) => payload,
        Err(e) => {
            report_unusable(path, kind, &e.to_string());
            None
        }
    }
}

/// Logs and counts a derived file that is unusable (see `read_rebuildable_file`).
pub fn report_unusable(path: &Path, kind: &'static str, detail: &str) {
    tracing::warn!(file = %path.display(), kind, detail, "unusable file: rebuilding it");
    crate::metrics::shard_metrics::with(|m| *m.unreadable_files.entry(kind).or_default() += 1);
}

fn tmp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".tmp");
    path.with_file_name(name)
}

/// fsyncs directory `dir`, so the creates, renames and unlinks in it are durable. The
/// one implementation: the async form runs it off the shard (`spawn_blocking`, invariant
/// 6); threads that may block (the controller's) call `sync_dir_blocking`.
pub async fn sync_dir(dir: &Path) -> Result<()> {
    let d = dir.to_path_buf();
    glommio::executor().spawn_blocking(move || sync_dir_blocking(&d)).await.map_err(|e| StorageError::io(format!("syncing directory {}", dir.display()), e))
}

/// Makes everything written to the filesystem holding `dir` durable (syncfs(2)): one call
/// for what would be a directory fsync each in many directories (a batch of opens;
/// `dir_survey`). It flushes the whole filesystem's dirty pages too, so it is for batches
/// where the fsyncs it replaces cost more.
pub async fn sync_filesystem(dir: &Path) -> Result<()> {
    let d = dir.to_path_buf();
    glommio::executor()
        .spawn_blocking(move || {
            use std::os::fd::AsRawFd;
            let f = std::fs::File::open(&d)?;
            // SAFETY: syncfs takes an open descriptor, which `f` holds for the call.
            match unsafe { libc::syncfs(f.as_raw_fd()) } {
                0 => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            }
        })
        .await
        .map_err(|e| StorageError::io(format!("syncing the filesystem of {}", dir.display()), e))
}

/// `sync_dir` of the directory holding `path` (after creating or renaming `path`).
pub async fn sync_parent_dir(path: &Path) -> Result<()> {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => sync_dir(dir).await,
        _ => Ok(()),
    }
}

/// Replaces `path` with `bytes` so that after a crash the file holds either the old or the
/// new contents, never a mix: temp file, fsync, rename, fsync the directory. Blocking:
/// shards run it through `spawn_blocking`, the controller's thread calls it directly.
pub fn write_atomic_blocking(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("tmp");
    {
        let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => sync_dir_blocking(dir),
        _ => Ok(()),
    }
}

/// The blocking directory fsync behind `sync_dir`; never call it on a shard thread.
pub fn sync_dir_blocking(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// Removes a file; missing is fine.
pub async fn remove_file(path: &Path) -> Result<()> {
    if let Some(inj) = super::file::fault_injector_for(path) {
        inj.fail_remove(&format!("removing {}", path.display()))?;
    }
    let p = path.to_path_buf();
    let res = glommio::executor().spawn_blocking(move || std::fs::remove_file(p)).await;
    match res {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StorageError::io(format!("removing {}", path.display()), e)),
    }
}
