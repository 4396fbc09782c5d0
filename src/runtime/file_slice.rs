//! Zero-copy fetch: a byte range of a page-cache segment file that the connection sends
//! with `sendfile`, from the page cache to the socket, never through user space.
//!
//! Why: a fetch of data older than the batch cache otherwise copies it twice on this
//! side of the socket (page cache → a pooled read buffer in `storage/cached_read.rs`, buffer →
//! socket buffer in `sendmsg`); `sendfile` hands the cached pages to the socket. Measured
//! on this machine (`benches/zero_copy.rs`, quiet, `benches/results/zero_copy/
//! 20261201-quiet.txt`): 0.54–0.57× the sender CPU per GiB of `preadv2` + `send`.
//!
//! Only what the page cache holds right now is sliced (`cachestat`, Linux 6.5+): the
//! shard's executor thread runs the `sendfile`, and it must not wait for the disk. Cold
//! ranges take the copying path, whose io_uring read waits without blocking the shard.
//! A page the kernel evicts between the check and the send is read synchronously: rare
//! (the page-cache budget drops written-back ranges oldest first, and a consumer reading
//! a range keeps it recently used), and bounded by one fetch's bytes.
//!
//! The slice holds its own descriptor of the file (`SegmentFile::shared_fd`, a `dup`,
//! `Send` so a response written by another shard's connection can carry it), so a segment
//! deleted or replaced by retention or compaction meanwhile still sends its old bytes. A
//! truncation below the slice's end (only above the high watermark, which consumer reads
//! never reach) would make the send come up short; the connection then closes rather
//! than send a response shorter than its length says.
use std::fmt;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// `cachestat(2)`'s syscall number: 451 in the generic table every 64-bit Linux port
/// shares (x86-64, arm64); the libc crate names it on some targets only.
const SYS_CACHESTAT: libc::c_long = 451;

/// `struct cachestat_range` of `cachestat(2)`.
#[repr(C)]
struct CachestatRange {
    off: u64,
    len: u64,
}

/// `struct cachestat` of `cachestat(2)` (pages).
#[repr(C)]
#[derive(Default)]
struct Cachestat {
    nr_cache: u64,
    nr_dirty: u64,
    nr_writeback: u64,
    nr_evicted: u64,
    nr_recently_evicted: u64,
}

/// Set once `cachestat` failed with ENOSYS or EPERM (an older kernel, a seccomp filter):
/// no slice is made after that, every read copies as before.
static CACHESTAT_UNAVAILABLE: AtomicBool = AtomicBool::new(false);

/// Page size `cachestat` counts in (see `page_cache.rs`: 4 KiB on the kernels we run).
const PAGE_BYTES: u64 = 4096;

/// True when every page of `[pos, pos + len)` of `fd` is in the page cache now.
pub fn is_cached(fd: RawFd, pos: u64, len: u64) -> bool {
    if len == 0 || CACHESTAT_UNAVAILABLE.load(Ordering::Relaxed) {
        return false;
    }
    let range = CachestatRange { off: pos, len };
    let mut stat = Cachestat::default();
    // SAFETY: both pointers are to live, properly laid out structs the kernel reads
    // (range) and writes (stat); flags must be 0.
    let rc = unsafe { libc::syscall(SYS_CACHESTAT, fd, &range as *const CachestatRange, &mut stat as *mut Cachestat, 0u32) };
    if rc != 0 {
        let err = std::io::Error::last_os_error().raw_os_error();
        if matches!(err, Some(libc::ENOSYS) | Some(libc::EPERM)) && !CACHESTAT_UNAVAILABLE.swap(true, Ordering::Relaxed) {
            tracing::info!(errno = ?err, "cachestat unavailable: fetches copy the bytes they read from disk (no sendfile)");
        }
        return false;
    }
    let pages = (pos + len).div_ceil(PAGE_BYTES) - pos / PAGE_BYTES;
    stat.nr_cache >= pages
}

/// `len` bytes at `pos` of a segment file, sent by `sendfile` (see the module comment).
#[derive(Clone)]
pub struct FileSlice {
    fd: Arc<OwnedFd>,
    pos: u64,
    len: usize,
}

impl FileSlice {
    pub fn new(fd: Arc<OwnedFd>, pos: u64, len: usize) -> FileSlice {
        FileSlice { fd, pos, len }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Sends the slice's bytes from `done` on (bytes already sent) to `socket` with one
    /// `sendfile`: the bytes sent, `WouldBlock` when the socket is full (it must be
    /// non-blocking), `UnexpectedEof` when the file ends before the slice does.
    pub fn send_to(&self, socket: RawFd, done: usize) -> std::io::Result<usize> {
        debug_assert!(done < self.len, "nothing left to send");
        let mut offset = libc::off_t::try_from(self.pos + done as u64).map_err(|_| std::io::ErrorKind::InvalidInput)?;
        // SAFETY: both descriptors are open (the slice owns its file's); `offset` is a
        // local the kernel updates.
        let n = unsafe { libc::sendfile(socket, self.fd.as_raw_fd(), &mut offset, self.len - done) };
        match n {
            n if n > 0 => Ok(n as usize),
            0 => Err(std::io::ErrorKind::UnexpectedEof.into()),
            _ => Err(std::io::Error::last_os_error()),
        }
    }

    /// Reads the slice's bytes from `done` on into `buf` with one `pread` (a TLS
    /// connection encrypts them in user space): the bytes read, `UnexpectedEof` when the
    /// file ends before the slice does. The slice's pages are in the page cache (that is
    /// when a read becomes a slice), so this copies memory and does not wait for a disk.
    pub fn read_at(&self, done: usize, buf: &mut [u8]) -> std::io::Result<usize> {
        debug_assert!(done < self.len, "nothing left to read");
        let want = buf.len().min(self.len - done);
        let offset = libc::off_t::try_from(self.pos + done as u64).map_err(|_| std::io::ErrorKind::InvalidInput)?;
        // SAFETY: the descriptor is open (the slice owns it); `buf` has `want` writable bytes.
        let n = unsafe { libc::pread(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), want, offset) };
        match n {
            n if n > 0 => Ok(n as usize),
            0 => Err(std::io::ErrorKind::UnexpectedEof.into()),
            _ => Err(std::io::Error::last_os_error()),
        }
    }

    /// The slice's bytes, read with `pread` (tests, and what a caller that needs them in
    /// memory falls back to).
    pub fn read_to_vec(&self) -> std::io::Result<Vec<u8>> {
        use std::os::unix::fs::FileExt;
        let file = std::fs::File::from(self.fd.try_clone()?);
        let mut out = vec![0u8; self.len];
        file.read_exact_at(&mut out, self.pos)?;
        Ok(out)
    }
}

impl fmt::Debug for FileSlice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FileSlice(fd {}, {}..{})", self.fd.as_raw_fd(), self.pos, self.pos + self.len as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn cachestat_sees_written_pages_and_not_dropped_ones() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seg.log");
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(&vec![5u8; 64 * 1024]).unwrap();
        f.sync_all().unwrap();
        let f = std::fs::File::open(&path).unwrap();
        assert!(is_cached(f.as_raw_fd(), 100, 30_000), "just written: cached");
        assert!(!is_cached(f.as_raw_fd(), 0, 0), "an empty range is never sliced");
        // SAFETY: advisory syscall on an open descriptor.
        let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        assert_eq!(rc, 0);
        assert!(!is_cached(f.as_raw_fd(), 100, 30_000), "dropped (clean pages): not cached");
    }

    #[test]
    fn sends_the_range_through_a_socket_and_reports_the_end_of_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seg.log");
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::File::create(&path).unwrap().write_all(&data).unwrap();
        let fd: OwnedFd = std::fs::File::open(&path).unwrap().into();
        let slice = FileSlice::new(Arc::new(fd), 1000, 150_000);
        assert_eq!(slice.read_to_vec().unwrap(), &data[1000..151_000]);
        let (mut rx, tx) = std::os::unix::net::UnixStream::pair().unwrap();
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            rx.read_to_end(&mut got).unwrap();
            got
        });
        let mut done = 0;
        while done < slice.len() {
            done += slice.send_to(tx.as_raw_fd(), done).unwrap();
        }
        drop(tx);
        assert_eq!(reader.join().unwrap(), &data[1000..151_000]);
        let past_end = FileSlice::new(slice.fd.clone(), 199_000, 5_000);
        let (_rx, tx) = std::os::unix::net::UnixStream::pair().unwrap();
        assert_eq!(past_end.send_to(tx.as_raw_fd(), 1000).unwrap_err().kind(), std::io::ErrorKind::UnexpectedEof);
        // read_at: the same bytes in chunks, bounded by the buffer and the slice.
        let mut got = Vec::new();
        let mut chunk = [0u8; 7000];
        while got.len() < slice.len() {
            let n = slice.read_at(got.len(), &mut chunk).unwrap();
            got.extend_from_slice(&chunk[..n]);
        }
        assert_eq!(got, &data[1000..151_000]);
        let mut big = vec![0u8; 10_000];
        assert_eq!(FileSlice::new(slice.fd.clone(), 0, 10).read_at(4, &mut big).unwrap(), 6, "never past the slice");
        assert_eq!(past_end.read_at(1000, &mut big).unwrap_err().kind(), std::io::ErrorKind::UnexpectedEof);
    }
}
