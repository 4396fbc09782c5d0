//! The one seam between the log and the file system: `SegmentFile`, a glommio file of
//! either kind — `DmaFile` (O_DIRECT, `WriteMode::Direct`: aligned writes of whole
//! blocks) or `BufferedFile` (through the page cache, `WriteMode::PageCache`: writes of
//! any bytes at any position) — plus an optional fault injector. Every write, read,
//! fdatasync, truncate and rename of a segment (and of the checked files: indexes,
//! snapshots, checkpoints, always O_DIRECT) goes through it.
//!
//! Without an injector (production) each call is the glommio call behind one branch.
//! With one (tests, and the `storage_fault = "drop-unsynced"` test hook of the binary)
//! the file behaves like a disk behind a volatile cache, whatever its kind:
//! - writes land in an in-memory overlay of whole blocks (a buffered write that covers
//!   part of a block is merged with what the file shows there), which reads see; `fdatasync`
//!   writes the overlay to the file and syncs it. A process that dies (kill -9) or a
//!   simulated crash (`FaultInjector::crash`) loses exactly what was never synced, as a
//!   power loss would;
//! - armed faults fail the next segment write (EIO, ENOSPC, or a torn write that applies
//!   only a prefix of the bytes, cutting a block) or the next fdatasync (EIO, after which
//!   the unsynced blocks are gone: the "fsyncgate" behaviour of Linux);
//! - `crash` may tear the unsynced data instead of dropping it (a prefix of it, in file
//!   order, reaches the disk, cutting a block);
//! - a delay (`set_delay`) makes every segment write and fdatasync wait that long first:
//!   a slow disk.
//!
//! Invariant: with an injector, the bytes on the real file only change at `fdatasync`,
//! `truncate` or a crash — never at a plain write.
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::rc::{Rc, Weak};

use bytes::Bytes;
use glommio::io::{BufferedFile, DmaBuffer, DmaFile, OpenOptions, PinnedBytes, ReadResult};

use super::page_cache::{self, CachedFile};
use super::{Result, StorageError, WriteMode};

/// Block size of the injector's overlay for page-cache files (O_DIRECT files use their
/// device's alignment).
const PAGE_CACHE_BLOCK: u64 = super::PADDING_BLOCK;

/// What a file is to the log; armed faults hit segments only (metadata files are synced
/// and renamed as a unit, and a failure there is not sticky).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileRole {
    Segment,
    Metadata,
}

/// A fault armed for the next segment operation it matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The next write fails with EIO; nothing of it is applied.
    WriteEio,
    /// The next write fails with ENOSPC; nothing of it is applied.
    WriteNoSpace,
    /// The next write applies a prefix of its bytes (ending inside a block), then fails
    /// with EIO.
    TornWrite,
    /// The next fdatasync fails with EIO, and the unsynced blocks are dropped.
    SyncEio,
    /// The next removal of a log file (`dma::remove_file`) fails with EIO; the file stays.
    RemoveEio,
}

/// The operation a fault hits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FaultOp {
    Write,
    Sync,
    Remove,
}

impl Fault {
    fn op(self) -> FaultOp {
        match self {
            Fault::WriteEio | Fault::WriteNoSpace | Fault::TornWrite => FaultOp::Write,
            Fault::SyncEio => FaultOp::Sync,
            Fault::RemoveEio => FaultOp::Remove,
        }
    }
}

/// Counts of what the injector did (tests assert faults really happened).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultStats {
    pub write_errors: u64,
    pub torn_writes: u64,
    pub sync_errors: u64,
    pub remove_errors: u64,
    pub crashes: u64,
}

/// Fault injection shared by the files of one shard (see the module comment).
pub struct FaultInjector {
    /// xorshift64 state: torn lengths are drawn from it, so a seed replays a run.
    rng: Cell<u64>,
    armed: RefCell<Vec<Fault>>,
    /// Between `crash` and `restart`, every operation fails with EIO.
    crashed: Cell<bool>,
    /// Files opened since the last restart (to drop or tear their overlays at a crash).
    files: RefCell<Vec<Weak<SegmentFile>>>,
    stats: Cell<FaultStats>,
    /// With `record_writes`: every segment write since the last restart, as issued.
    writes: RefCell<Option<Vec<SegmentWrite>>>,
    /// How long every segment write and fdatasync waits first (a slow disk); zero: none.
    delay: Cell<std::time::Duration>,
}

/// One segment write as issued (tests check that no write covers acknowledged bytes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentWrite {
    pub path: std::path::PathBuf,
    pub pos: u64,
    pub len: u64,
}

thread_local! {
    /// The injector of this shard's files (None in production).
    static SHARD_INJECTOR: RefCell<Option<Rc<FaultInjector>>> = const { RefCell::new(None) };
    /// Injectors of the files under one directory, before the shard's (tests that run
    /// several simulated brokers on one thread give each its own disk).
    static DIR_INJECTORS: RefCell<Vec<(std::path::PathBuf, Rc<FaultInjector>)>> = const { RefCell::new(Vec::new()) };
}

/// Installs (or with None removes) the injector of every file opened under `dir` from now
/// on, on this thread; it takes precedence over the shard's.
pub fn set_dir_fault_injector(dir: &Path, injector: Option<Rc<FaultInjector>>) {
    DIR_INJECTORS.with(|d| {
        let mut d = d.borrow_mut();
        d.retain(|(p, _)| p != dir);
        if let Some(i) = injector {
            d.push((dir.to_path_buf(), i));
        }
    });
}

/// The injector of a file at `path`: its directory's, else the shard's.
pub fn fault_injector_for(path: &Path) -> Option<Rc<FaultInjector>> {
    let by_dir = DIR_INJECTORS.with(|d| d.borrow().iter().find(|(dir, _)| path.starts_with(dir)).map(|(_, i)| i.clone()));
    by_dir.or_else(shard_fault_injector)
}

/// Installs (or removes) the injector every file opened on this thread from now on uses.
pub fn set_shard_fault_injector(injector: Option<Rc<FaultInjector>>) {
    SHARD_INJECTOR.with(|i| *i.borrow_mut() = injector);
}

/// The injector of this shard's files, if any.
pub fn shard_fault_injector() -> Option<Rc<FaultInjector>> {
    SHARD_INJECTOR.with(|i| i.borrow().clone())
}

fn errno(context: &str, code: i32) -> StorageError {
    StorageError::io(context, io::Error::from_raw_os_error(code))
}

impl FaultInjector {
    pub fn new(seed: u64) -> Rc<FaultInjector> {
        Rc::new(FaultInjector {
            // xorshift needs a non-zero state.
            rng: Cell::new(seed | 1),
            armed: RefCell::new(Vec::new()),
            crashed: Cell::new(false),
            files: RefCell::new(Vec::new()),
            stats: Cell::new(FaultStats::default()),
            writes: RefCell::new(None),
            delay: Cell::new(std::time::Duration::ZERO),
        })
    }

    /// Every segment write and fdatasync from now on waits `delay` first (zero: none).
    pub fn set_delay(&self, delay: std::time::Duration) {
        self.delay.set(delay);
    }

    /// A slow disk: waits the delay, if any, before a segment operation.
    async fn slow_down(&self, role: FileRole) {
        let delay = self.delay.get();
        if role == FileRole::Segment && !delay.is_zero() {
            glommio::timer::sleep(delay).await;
        }
    }

    fn next_u64(&self) -> u64 {
        let mut x = self.rng.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng.set(x);
        x
    }

    /// A number in [lo, hi) (hi > lo).
    fn below(&self, lo: u64, hi: u64) -> u64 {
        debug_assert!(hi > lo);
        lo + self.next_u64() % (hi - lo)
    }

    /// Starts recording segment writes (tests only: the list grows with every write).
    pub fn record_writes(&self) {
        self.writes.borrow_mut().get_or_insert_with(Vec::new);
    }

    /// The segment writes recorded since the last restart, in issue order.
    pub fn segment_writes(&self) -> Vec<SegmentWrite> {
        self.writes.borrow().clone().unwrap_or_default()
    }

    /// Arms `fault` for the next segment operation of its kind.
    pub fn arm(&self, fault: Fault) {
        self.armed.borrow_mut().push(fault);
    }

    /// Faults armed and not yet hit.
    pub fn armed(&self) -> Vec<Fault> {
        self.armed.borrow().clone()
    }

    pub fn disarm_all(&self) {
        self.armed.borrow_mut().clear();
    }

    pub fn stats(&self) -> FaultStats {
        self.stats.get()
    }

    fn bump(&self, f: impl FnOnce(&mut FaultStats)) {
        let mut s = self.stats.get();
        f(&mut s);
        self.stats.set(s);
    }

    fn take_armed(&self, op: FaultOp) -> Option<Fault> {
        let mut armed = self.armed.borrow_mut();
        let i = armed.iter().position(|f| f.op() == op)?;
        Some(armed.remove(i))
    }

    /// Whether this removal of a log file fails (an armed `RemoveEio`, or a crash).
    pub(super) fn fail_remove(&self, context: &str) -> Result<()> {
        self.check_alive(context)?;
        if self.take_armed(FaultOp::Remove).is_some() {
            self.bump(|s| s.remove_errors += 1);
            return Err(errno(context, libc::EIO));
        }
        Ok(())
    }

    fn check_alive(&self, context: &str) -> Result<()> {
        if self.crashed.get() {
            return Err(errno(context, libc::EIO));
        }
        Ok(())
    }

    /// Simulates a power loss: every file opened since the last restart loses its
    /// unsynced blocks (with `tear`, a random prefix of them in file order reaches the disk
    /// first, the last one cut inside a block). From now until `restart`, every file
    /// operation fails with EIO, so the crashed incarnation can change nothing more.
    pub async fn crash(&self, tear: bool) {
        self.crashed.set(true);
        self.armed.borrow_mut().clear();
        self.bump(|s| s.crashes += 1);
        let files: Vec<Rc<SegmentFile>> = self.files.borrow_mut().drain(..).filter_map(|w| w.upgrade()).collect();
        for f in files {
            let Some(state) = &f.fault else { continue };
            let blocks = std::mem::take(&mut state.overlay.borrow_mut().blocks);
            if tear && !blocks.is_empty() {
                let total: u64 = blocks.values().map(|b| b.len() as u64).sum();
                let keep = self.below(0, total);
                // Best effort: the crashed file's own errors do not matter.
                let _ = f.apply_prefix(&blocks, keep).await;
            }
        }
    }

    /// Ends a simulated crash: files opened from now on work again.
    pub fn restart(&self) {
        self.crashed.set(false);
        self.files.borrow_mut().clear();
        if let Some(w) = self.writes.borrow_mut().as_mut() {
            w.clear();
        }
    }

    fn register(&self, file: &Rc<SegmentFile>) {
        let mut files = self.files.borrow_mut();
        // Bounded: forget closed files whenever the list doubles.
        if files.len() >= 64 && files.len().is_power_of_two() {
            files.retain(|w| w.strong_count() > 0);
        }
        files.push(Rc::downgrade(file));
    }
}

/// Unsynced blocks of one file (see the module comment).
struct Overlay {
    /// Block index → the block's bytes (`alignment` long).
    blocks: BTreeMap<u64, Vec<u8>>,
    /// The file's size as reads and `file_size` see it.
    size: u64,
}

struct FaultState {
    injector: Rc<FaultInjector>,
    role: FileRole,
    path: std::path::PathBuf,
    overlay: RefCell<Overlay>,
}

/// The glommio file behind a `SegmentFile`.
enum Inner {
    Direct(DmaFile),
    Buffered(BufferedFile),
}

/// Bytes for one `SegmentFile::write_at`: an aligned DMA buffer for O_DIRECT files, a
/// plain vector for page-cache files (`SegmentFile::alloc_write_buffer` picks), or bytes
/// written where they are (`Pinned`: a run of a segment's stage buffer, see
/// `segment.rs`; aligned by its maker for O_DIRECT).
pub enum WriteBuffer {
    Dma(DmaBuffer),
    Heap(Vec<u8>),
    Pinned(PinnedBytes),
}

impl WriteBuffer {
    pub fn len(&self) -> usize {
        self.as_bytes().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn as_bytes(&self) -> &[u8] {
        match self {
            WriteBuffer::Dma(b) => b.as_bytes(),
            WriteBuffer::Heap(v) => v,
            WriteBuffer::Pinned(p) => p.as_bytes(),
        }
    }

    /// The bytes to fill, of a buffer from `alloc_write_buffer`.
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        match self {
            WriteBuffer::Dma(b) => b.as_bytes_mut(),
            WriteBuffer::Heap(v) => v,
            // Pinned bytes are shared (batch views point at them): never written to.
            WriteBuffer::Pinned(_) => unreachable!("pinned write buffers are read-only; only alloc_write_buffer's are filled"),
        }
    }
}

/// A log file (see the module comment).
pub struct SegmentFile {
    /// This file, for the descriptor budget's registry when it reopens.
    me: Weak<SegmentFile>,
    /// The open descriptor; `None` while the shard's descriptor budget has it closed
    /// (`open_files.rs`): the next operation reopens it. Each operation holds the `Rc`
    /// for its duration, so the budget closes only idle files.
    open: RefCell<Option<Rc<OpenFile>>>,
    /// Where the file is (renames follow it) and how to reopen it.
    path: RefCell<std::path::PathBuf>,
    mode: WriteMode,
    writable: bool,
    /// Whether the shard's descriptor budget may close it (`open_files.rs`): segments
    /// without a fault injector (an injected file keeps its descriptor: tests hold few).
    closable: bool,
    /// The device block size (O_DIRECT) or the overlay block (page cache).
    alignment: u64,
    fault: Option<FaultState>,
    /// The page-cache tracker's progress while closed (`written_back_to`, `written_to`),
    /// carried to the next descriptor's tracker.
    page_cache_progress: Cell<(u64, u64)>,
    /// The shard clock at the last operation (`open_files::tick`).
    last_used: Cell<u64>,
}

/// One open descriptor of a `SegmentFile` and what hangs on it.
struct OpenFile {
    inner: Inner,
    /// Page-cache files of a shard that recycles its page cache (`page_cache.rs`).
    page_cache: Option<Rc<CachedFile>>,
    /// The descriptor zero-copy fetches send from (`shared_fd`), made at the first one.
    shared_fd: std::cell::OnceCell<Option<std::sync::Arc<std::os::fd::OwnedFd>>>,
}

fn glommio_err(context: &'static str) -> impl FnOnce(glommio::GlommioError<()>) -> StorageError {
    move |e| StorageError::glommio(context, e)
}

fn is_not_found<T>(e: &glommio::GlommioError<T>) -> bool {
    match e {
        glommio::GlommioError::IoError(e) => e.kind() == io::ErrorKind::NotFound,
        glommio::GlommioError::EnhancedIoError { source, .. } => source.kind() == io::ErrorKind::NotFound,
        _ => false,
    }
}

/// Opens `path` as a file of kind `mode` (read-write, created if `create`; read-only
/// O_DIRECT when not `writable`).
async fn open_inner(path: &Path, mode: WriteMode, writable: bool, create: bool) -> std::result::Result<Inner, glommio::GlommioError<()>> {
    if !writable {
        return DmaFile::open(path).await.map(Inner::Direct);
    }
    let mut options = OpenOptions::new();
    options.read(true).write(true).create(create);
    Ok(match mode {
        WriteMode::Direct => Inner::Direct(options.dma_open(path).await?),
        WriteMode::PageCache => {
            let f = options.buffered_open(path).await?;
            // SAFETY: a plain advisory syscall on a descriptor `f` owns; it does not block
            // (it only sets the descriptor's read-ahead mode) and its failure is harmless.
            let rc = unsafe { libc::posix_fadvise(std::os::fd::AsRawFd::as_raw_fd(&f), 0, 0, libc::POSIX_FADV_SEQUENTIAL) };
            if rc != 0 {
                tracing::debug!(path = %path.display(), rc, "posix_fadvise(SEQUENTIAL) failed; default read-ahead");
            }
            Inner::Buffered(f)
        }
    })
}

impl SegmentFile {
    /// Opens (creating) `path` for reads and writes, O_DIRECT.
    pub async fn open_rw(path: &Path, role: FileRole) -> Result<Rc<SegmentFile>> {
        Self::open_rw_as(path, role, WriteMode::Direct).await
    }

    /// Opens (creating) `path` for reads and writes as a file of kind `mode`. A page-cache
    /// file is advised sequential (the kernel reads ahead further for consumers that
    /// catch up from older segments).
    pub async fn open_rw_as(path: &Path, role: FileRole, mode: WriteMode) -> Result<Rc<SegmentFile>> {
        let injector = fault_injector_for(path);
        if let Some(inj) = &injector {
            inj.check_alive("opening a file")?;
        }
        let file = open_inner(path, mode, true, true).await.map_err(|e| StorageError::glommio(format!("opening {}", path.display()), e))?;
        Self::wrap(file, true, role, injector, path).await
    }

    /// Opens an existing file read-only (O_DIRECT); `Ok(None)` when it does not exist.
    pub async fn open_existing(path: &Path, role: FileRole) -> Result<Option<Rc<SegmentFile>>> {
        let injector = fault_injector_for(path);
        if let Some(inj) = &injector {
            inj.check_alive("opening a file")?;
        }
        let file = match open_inner(path, WriteMode::Direct, false, false).await {
            Ok(f) => f,
            Err(e) if is_not_found(&e) => return Ok(None),
            Err(e) => return Err(StorageError::glommio(format!("opening {}", path.display()), e)),
        };
        Self::wrap(file, false, role, injector, path).await.map(Some)
    }

    async fn wrap(inner: Inner, writable: bool, role: FileRole, injector: Option<Rc<FaultInjector>>, path: &Path) -> Result<Rc<SegmentFile>> {
        let (mode, alignment) = match &inner {
            Inner::Direct(f) => (WriteMode::Direct, f.alignment()),
            Inner::Buffered(_) => (WriteMode::PageCache, PAGE_CACHE_BLOCK),
        };
        let fault = match &injector {
            None => None,
            Some(injector) => {
                let size = match &inner {
                    Inner::Direct(f) => f.file_size().await,
                    Inner::Buffered(f) => f.file_size().await,
                }
                .map_err(glommio_err("sizing a file"))?;
                let overlay = RefCell::new(Overlay { blocks: BTreeMap::new(), size });
                Some(FaultState { injector: injector.clone(), role, path: path.to_path_buf(), overlay })
            }
        };
        // With an injector the real file changes only at fdatasync: nothing to recycle.
        let page_cache = match &inner {
            Inner::Buffered(b) if role == FileRole::Segment && fault.is_none() => page_cache::track(std::os::fd::AsRawFd::as_raw_fd(b), (0, 0)),
            _ => None,
        };
        let closable = role == FileRole::Segment && fault.is_none();
        let f = Rc::new_cyclic(|me| SegmentFile {
            me: me.clone(),
            open: RefCell::new(Some(Rc::new(OpenFile { inner, page_cache, shared_fd: Default::default() }))),
            path: RefCell::new(path.to_path_buf()),
            mode,
            writable,
            alignment,
            closable,
            fault,
            page_cache_progress: Cell::new((0, 0)),
            last_used: Cell::new(super::open_files::tick()),
        });
        match injector {
            Some(injector) => injector.register(&f),
            None if closable => super::open_files::opened(&f),
            None => {}
        }
        Ok(f)
    }

    /// The open descriptor, reopened if the budget closed it. Hold it only for one
    /// operation: while held, the file counts as busy and is never closed.
    async fn handle(&self) -> Result<Rc<OpenFile>> {
        self.last_used.set(super::open_files::tick());
        if let Some(open) = self.open.borrow().as_ref() {
            return Ok(open.clone());
        }
        let path = self.path.borrow().clone();
        let inner = open_inner(&path, self.mode, self.writable, false).await.map_err(|e| {
            if is_not_found(&e) {
                StorageError::io(format!("reopening {} (removed while closed: deleted segment)", path.display()), io::Error::from(io::ErrorKind::NotFound))
            } else {
                StorageError::glommio(format!("reopening {}", path.display()), e)
            }
        })?;
        // Another operation may have reopened it while this one waited: keep theirs.
        if let Some(open) = self.open.borrow().as_ref() {
            return Ok(open.clone());
        }
        let page_cache = match &inner {
            Inner::Buffered(b) => page_cache::track(std::os::fd::AsRawFd::as_raw_fd(b), self.page_cache_progress.get()),
            Inner::Direct(_) => None,
        };
        let open = Rc::new(OpenFile { inner, page_cache, shared_fd: Default::default() });
        *self.open.borrow_mut() = Some(open.clone());
        if let Some(me) = self.me.upgrade() {
            super::open_files::opened(&me);
        }
        Ok(open)
    }

    /// Descriptors this file holds now: 0 closed, 1 open, 2 with a zero-copy duplicate.
    pub(super) fn descriptors(&self) -> usize {
        match self.open.borrow().as_ref() {
            None => 0,
            Some(o) => 1 + usize::from(o.shared_fd.get().is_some_and(Option::is_some)),
        }
    }

    /// Whether an operation holds the descriptor now.
    pub(super) fn is_busy(&self) -> bool {
        self.open.borrow().as_ref().is_some_and(|o| Rc::strong_count(o) > 1)
    }

    /// Whether anything but this handle uses the file: another `Rc<SegmentFile>` (a fetch,
    /// the cleaner), an operation in progress, or its descriptor lent to a zero-copy send
    /// (`shared_fd`) that may still be sending.
    pub(super) fn used_by_others(self: &Rc<Self>) -> bool {
        Rc::strong_count(self) > 1 || self.is_busy() || self.fd_lent()
    }

    fn fd_lent(&self) -> bool {
        let open = self.open.borrow();
        let lent = open.as_ref().and_then(|o| o.shared_fd.get()).and_then(Option::as_ref);
        lent.is_some_and(|fd| std::sync::Arc::strong_count(fd) > 1)
    }

    /// Whether tests injected faults into this file (`storage_faults`).
    pub(super) fn has_fault_injector(&self) -> bool {
        self.fault.is_some()
    }

    pub(super) fn last_used(&self) -> u64 {
        self.last_used.get()
    }

    /// Closes the descriptor unless an operation holds it; whether it closed. The page-
    /// cache tracker's progress is kept for the next descriptor.
    pub(super) fn close_if_idle(&self) -> bool {
        if self.is_busy() || !self.closable {
            return false;
        }
        let Some(open) = self.open.borrow_mut().take() else { return false };
        if let Some(c) = &open.page_cache {
            self.page_cache_progress.set(c.progress());
        }
        // Dropping the glommio file closes the descriptor through the ring (a duplicate
        // lent to a zero-copy send lives on until that send is done).
        drop(open);
        true
    }

    /// A descriptor of this file that zero-copy fetches can carry to any shard
    /// (`runtime/file_slice.rs`): a `dup` made once per open descriptor, for a page-cache
    /// file without fault injection (an injected file's bytes are its overlay, not what
    /// the kernel has). `None` for the others, when the budget has the file closed, or
    /// when `dup` fails (descriptors exhausted: the read copies instead).
    pub fn shared_fd(&self) -> Option<std::sync::Arc<std::os::fd::OwnedFd>> {
        if self.fault.is_some() {
            return None;
        }
        let open = self.open.borrow().clone()?;
        let Inner::Buffered(f) = &open.inner else { return None };
        open.shared_fd
            .get_or_init(|| {
                // SAFETY: `f` owns an open descriptor for as long as this borrow.
                let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(std::os::fd::AsRawFd::as_raw_fd(f)) };
                fd.try_clone_to_owned().map(std::sync::Arc::new).ok()
            })
            .clone()
    }

    /// The kind of file: how the log writes it.
    pub fn mode(&self) -> WriteMode {
        self.mode
    }

    /// The device block size of an O_DIRECT file; the overlay block for a page-cache one.
    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// The unit the log's writes cover: the padding block for O_DIRECT (a multiple of
    /// the device's alignment), a byte through the page cache.
    pub fn write_unit(&self) -> u64 {
        match self.mode {
            WriteMode::Direct => {
                debug_assert_eq!(super::PADDING_BLOCK % self.alignment(), 0, "the padding block is whole device blocks");
                super::PADDING_BLOCK.max(self.alignment())
            }
            WriteMode::PageCache => 1,
        }
    }

    pub fn align_down(&self, pos: u64) -> u64 {
        pos - pos % self.alignment()
    }

    pub fn align_up(&self, pos: u64) -> u64 {
        pos.next_multiple_of(self.alignment())
    }

    /// A zeroed buffer of `len` bytes for `write_at` (`len` whole blocks for O_DIRECT).
    pub fn alloc_write_buffer(&self, len: usize) -> WriteBuffer {
        match self.mode {
            WriteMode::Direct => {
                // The executor's DMA allocator, the one `DmaFile::alloc_dma_buffer` uses
                // (so no descriptor is needed to make a buffer).
                let mut b = glommio::allocate_dma_buffer(len);
                b.as_bytes_mut().fill(0);
                WriteBuffer::Dma(b)
            }
            WriteMode::PageCache => WriteBuffer::Heap(vec![0; len]),
        }
    }

    async fn raw_read(&self, pos: u64, len: usize) -> Result<ReadResult> {
        let open = self.handle().await?;
        match &open.inner {
            Inner::Direct(f) => f.read_at(pos, len).await,
            Inner::Buffered(f) => f.read_at(pos, len).await,
        }
        .map_err(glommio_err("reading a segment"))
    }

    async fn raw_write(&self, open: &OpenFile, buf: WriteBuffer, pos: u64) -> Result<usize> {
        match (&open.inner, buf) {
            (Inner::Direct(f), WriteBuffer::Dma(b)) => f.write_at(b, pos).await,
            (Inner::Buffered(f), WriteBuffer::Heap(v)) => f.write_at(v, pos).await,
            (Inner::Direct(f), WriteBuffer::Pinned(p)) => f.write_pinned_at(p, pos).await,
            (Inner::Buffered(f), WriteBuffer::Pinned(p)) => f.write_pinned_at(p, pos).await,
            (Inner::Buffered(f), WriteBuffer::Dma(b)) => f.write_at(b.as_bytes().to_vec(), pos).await,
            (Inner::Direct(f), WriteBuffer::Heap(v)) => {
                let mut b = f.alloc_dma_buffer(v.len());
                b.as_bytes_mut().copy_from_slice(&v);
                f.write_at(b, pos).await
            }
        }
        .map_err(glommio_err("writing a segment"))
    }

    async fn raw_write_slice(&self, data: &[u8], pos: u64) -> Result<usize> {
        let mut buf = self.alloc_write_buffer(data.len());
        buf.as_bytes_mut().copy_from_slice(data);
        let open = self.handle().await?;
        self.raw_write(&open, buf, pos).await
    }

    async fn raw_fdatasync(&self, open: &OpenFile) -> Result<()> {
        let started = std::time::Instant::now();
        let synced = match &open.inner {
            Inner::Direct(f) => f.fdatasync().await,
            Inner::Buffered(f) => f.fdatasync().await,
        };
        crate::metrics::with(|m| m.fsync.record(started.elapsed()));
        synced.map_err(glommio_err("fdatasync"))
    }

    async fn raw_file_size(&self) -> Result<u64> {
        let open = self.handle().await?;
        match &open.inner {
            Inner::Direct(f) => f.file_size().await,
            Inner::Buffered(f) => f.file_size().await,
        }
        .map_err(glommio_err("sizing a file"))
    }

    async fn raw_truncate(&self, size: u64) -> Result<()> {
        let open = self.handle().await?;
        match &open.inner {
            Inner::Direct(f) => f.truncate(size).await,
            Inner::Buffered(f) => f.truncate(size).await,
        }
        .map_err(glommio_err("truncating a file"))
    }

    /// Writes `buf` at `pos` (for an O_DIRECT file: whole blocks at an aligned position);
    /// returns the bytes written.
    pub async fn write_at(&self, buf: WriteBuffer, pos: u64) -> Result<usize> {
        let Some(state) = &self.fault else {
            let open = self.handle().await?;
            let n = self.raw_write(&open, buf, pos).await?;
            if let Some(c) = &open.page_cache {
                c.wrote(pos + n as u64);
            }
            return Ok(n);
        };
        let inj = &state.injector;
        inj.slow_down(state.role).await;
        inj.check_alive("writing a segment")?;
        let unit = match self.mode {
            WriteMode::Direct => self.alignment(),
            WriteMode::PageCache => 1,
        };
        debug_assert!(pos.is_multiple_of(unit) && (buf.len() as u64).is_multiple_of(unit), "DMA writes cover whole blocks");
        if state.role == FileRole::Segment {
            if let Some(w) = inj.writes.borrow_mut().as_mut() {
                w.push(SegmentWrite { path: state.path.clone(), pos, len: buf.len() as u64 });
            }
        }
        let fault = if state.role == FileRole::Segment { inj.take_armed(FaultOp::Write) } else { None };
        match fault {
            Some(Fault::WriteEio) => {
                inj.bump(|s| s.write_errors += 1);
                Err(errno("writing a segment", libc::EIO))
            }
            Some(Fault::WriteNoSpace) => {
                inj.bump(|s| s.write_errors += 1);
                Err(errno("writing a segment", libc::ENOSPC))
            }
            Some(Fault::TornWrite) if buf.len() > 1 => {
                // A prefix ending inside a block (never the whole write).
                let keep = inj.below(1, buf.len() as u64) as usize;
                let mut data = buf.as_bytes()[..keep].to_vec();
                if unit > 1 {
                    // An O_DIRECT block is cut: the rest of it keeps what the file had.
                    let old = self.read_bytes(pos + keep as u64, keep.next_multiple_of(unit as usize) - keep).await?;
                    data.extend_from_slice(&old);
                    data.resize(keep.next_multiple_of(unit as usize), 0);
                }
                self.put(pos, &data, pos + keep as u64).await?;
                inj.bump(|s| s.torn_writes += 1);
                Err(errno("writing a segment (torn)", libc::EIO))
            }
            _ => {
                self.put(pos, buf.as_bytes(), pos + buf.len() as u64).await?;
                Ok(buf.len())
            }
        }
    }

    /// Puts `data` at `pos` into the overlay as whole blocks: a partial block at either
    /// end is merged with what reads show there now. The file then reads at least up to
    /// `end`.
    async fn put(&self, pos: u64, data: &[u8], end: u64) -> Result<()> {
        let Some(state) = &self.fault else { return Ok(()) };
        let block = self.alignment();
        let (start, stop) = (self.align_down(pos), self.align_up(pos + data.len() as u64));
        let merged = if start == pos && stop == pos + data.len() as u64 {
            data.to_vec()
        } else {
            let mut m = self.read_bytes(start, (stop - start) as usize).await?.to_vec();
            m.resize((stop - start) as usize, 0);
            m[(pos - start) as usize..(pos - start) as usize + data.len()].copy_from_slice(data);
            m
        };
        let mut overlay = state.overlay.borrow_mut();
        for (i, b) in merged.chunks(block as usize).enumerate() {
            overlay.blocks.insert(start / block + i as u64, b.to_vec());
        }
        overlay.size = overlay.size.max(end);
        Ok(())
    }

    /// Reads `len` bytes at `pos` (any alignment) into owned `Bytes`; short at the end.
    pub async fn read_bytes(&self, pos: u64, len: usize) -> Result<Bytes> {
        let Some(state) = &self.fault else {
            let open = self.handle().await?;
            if let Inner::Buffered(f) = &open.inner {
                // Cached data without a wait or a second copy (`cached_read.rs`).
                if let Some(b) = super::cached_read::read_if_cached(std::os::fd::AsRawFd::as_raw_fd(f), pos, len) {
                    return Ok(b);
                }
            }
            drop(open);
            let r = self.raw_read(pos, len).await?;
            // One copy: glommio's read buffers are tied to the executor (not Send), and
            // fetch responses may be written by another shard's connection.
            return Ok(Bytes::copy_from_slice(&r));
        };
        state.injector.check_alive("reading a segment")?;
        // The overlay as of now: blocks synced during the read below are on disk by then.
        let block = self.alignment();
        let (end, patches) = {
            let overlay = state.overlay.borrow();
            let end = (pos + len as u64).min(overlay.size);
            if pos >= end {
                return Ok(Bytes::new());
            }
            let patches: Vec<(u64, Vec<u8>)> = overlay.blocks.range(pos / block..end.div_ceil(block)).map(|(&i, b)| (i, b.clone())).collect();
            (end, patches)
        };
        let want = (end - pos) as usize;
        let disk = self.raw_read(pos, want).await?;
        let mut out = disk.to_vec();
        out.resize(want, 0);
        for (i, b) in patches {
            let (bstart, bend) = (i * block, (i + 1) * block);
            let (from, to) = (bstart.max(pos), bend.min(end));
            out[(from - pos) as usize..(to - pos) as usize].copy_from_slice(&b[(from - bstart) as usize..(to - bstart) as usize]);
        }
        Ok(Bytes::from(out))
    }

    /// fdatasync: with an injector, first writes the overlay to the file.
    pub async fn fdatasync(&self) -> Result<()> {
        let Some(state) = &self.fault else {
            let open = self.handle().await?;
            self.raw_fdatasync(&open).await?;
            if let Some(c) = &open.page_cache {
                c.synced();
            }
            return Ok(());
        };
        let inj = &state.injector;
        inj.slow_down(state.role).await;
        inj.check_alive("fdatasync")?;
        if state.role == FileRole::Segment && inj.take_armed(FaultOp::Sync) == Some(Fault::SyncEio) {
            // Linux may drop the dirty pages of a failed fsync: the unsynced data is gone.
            let disk_size = self.raw_file_size().await?;
            let mut overlay = state.overlay.borrow_mut();
            overlay.blocks.clear();
            overlay.size = disk_size;
            inj.bump(|s| s.sync_errors += 1);
            return Err(errno("fdatasync", libc::EIO));
        }
        let (blocks, size) = {
            let overlay = state.overlay.borrow();
            (overlay.blocks.clone(), overlay.size)
        };
        let total = blocks.values().map(|b| b.len() as u64).sum();
        self.apply_prefix(&blocks, total).await?;
        let disk_size = self.raw_file_size().await?;
        if disk_size > size {
            self.raw_truncate(size).await?;
        }
        self.raw_fdatasync(&*self.handle().await?).await?;
        // Forget only blocks no write replaced while this sync ran.
        let mut overlay = state.overlay.borrow_mut();
        for (i, b) in blocks {
            if overlay.blocks.get(&i) == Some(&b) {
                overlay.blocks.remove(&i);
            }
        }
        Ok(())
    }

    /// Writes the first `keep` bytes of `blocks` (in file order) to the real file: whole
    /// blocks, then the cut one merged with what the disk holds.
    async fn apply_prefix(&self, blocks: &BTreeMap<u64, Vec<u8>>, keep: u64) -> Result<()> {
        let block = self.alignment();
        let mut left = keep;
        for (&i, b) in blocks {
            if left == 0 {
                break;
            }
            let mut data = b.clone();
            if left < block {
                let disk = self.raw_read(i * block, block as usize).await?;
                let mut merged = disk.to_vec();
                merged.resize(block as usize, 0);
                merged[..left as usize].copy_from_slice(&b[..left as usize]);
                data = merged;
            }
            left = left.saturating_sub(block);
            let n = self.raw_write_slice(&data, i * block).await?;
            if (n as u64) < block {
                return Err(StorageError::NoSpace { context: format!("writing a synced block (wrote {n} of {block})") });
            }
        }
        Ok(())
    }

    pub async fn file_size(&self) -> Result<u64> {
        match &self.fault {
            None => self.raw_file_size().await,
            Some(state) => {
                state.injector.check_alive("sizing a file")?;
                Ok(state.overlay.borrow().size)
            }
        }
    }

    /// Cuts the file to `size` bytes.
    pub async fn truncate(&self, size: u64) -> Result<()> {
        let Some(state) = &self.fault else {
            if let Some(c) = &self.handle().await?.page_cache {
                c.truncated(size);
            }
            return self.raw_truncate(size).await;
        };
        state.injector.check_alive("truncating a file")?;
        {
            let block = self.alignment();
            let mut overlay = state.overlay.borrow_mut();
            let cut = size.div_ceil(block);
            overlay.blocks.retain(|&i, _| i < cut);
            if !size.is_multiple_of(block) {
                if let Some(b) = overlay.blocks.get_mut(&(size / block)) {
                    b[(size % block) as usize..].fill(0);
                }
            }
            overlay.size = size;
        }
        let disk_size = self.raw_file_size().await?;
        if disk_size > size {
            self.raw_truncate(size).await?;
        }
        Ok(())
    }

    /// Renames the file (it keeps its descriptor and overlay). O_DIRECT files only (the
    /// checked files and cleaned segments, never a page-cache segment).
    pub async fn rename(&self, to: &Path) -> Result<()> {
        if let Some(state) = &self.fault {
            state.injector.check_alive("renaming a file")?;
        }
        let open = self.handle().await?;
        match &open.inner {
            Inner::Direct(f) => {
                f.rename(to).await.map_err(|e| StorageError::glommio(format!("renaming to {}", to.display()), e))?;
                // A reopen after the budget closed it finds it under its new name.
                *self.path.borrow_mut() = to.to_path_buf();
                Ok(())
            }
            Inner::Buffered(_) => Err(StorageError::io("renaming a page-cache segment", io::Error::from(io::ErrorKind::Unsupported))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::testing::run;

    fn block_of(byte: u8, len: usize) -> Vec<u8> {
        vec![byte; len]
    }

    async fn write(f: &SegmentFile, pos: u64, data: &[u8]) -> Result<usize> {
        let mut buf = f.alloc_write_buffer(data.len());
        buf.as_bytes_mut().copy_from_slice(data);
        f.write_at(buf, pos).await
    }

    #[test]
    fn unsynced_writes_are_read_back_and_lost_at_a_crash() {
        run(|dir| async move {
            let inj = FaultInjector::new(7);
            set_shard_fault_injector(Some(inj.clone()));
            let path = dir.join("a.log");
            let f = SegmentFile::open_rw(&path, FileRole::Segment).await.unwrap();
            let bs = f.alignment() as usize;
            write(&f, 0, &block_of(1, bs)).await.unwrap();
            f.fdatasync().await.unwrap();
            write(&f, bs as u64, &block_of(2, bs)).await.unwrap();
            assert_eq!(f.file_size().await.unwrap(), 2 * bs as u64);
            let seen = f.read_bytes(bs as u64 - 4, 8).await.unwrap();
            assert_eq!(&seen[..], &[1, 1, 1, 1, 2, 2, 2, 2], "reads see unsynced writes");
            assert_eq!(std::fs::metadata(&path).unwrap().len(), bs as u64, "the disk has only the synced block");
            inj.crash(false).await;
            assert!(f.read_bytes(0, 1).await.is_err(), "a crashed file refuses everything");
            drop(f);
            inj.restart();
            let f = SegmentFile::open_rw(&path, FileRole::Segment).await.unwrap();
            assert_eq!(f.file_size().await.unwrap(), bs as u64, "the unsynced block is gone");
            set_shard_fault_injector(None);
        });
    }

    #[test]
    fn armed_faults_fail_and_tear() {
        run(|dir| async move {
            let inj = FaultInjector::new(11);
            set_shard_fault_injector(Some(inj.clone()));
            let f = SegmentFile::open_rw(&dir.join("b.log"), FileRole::Segment).await.unwrap();
            let bs = f.alignment() as usize;
            inj.arm(Fault::WriteNoSpace);
            assert!(matches!(write(&f, 0, &block_of(3, bs)).await, Err(StorageError::NoSpace { .. })));
            inj.arm(Fault::WriteEio);
            assert!(matches!(write(&f, 0, &block_of(3, bs)).await, Err(StorageError::Io { .. })));
            assert_eq!(f.file_size().await.unwrap(), 0, "a failed write applies nothing");
            inj.arm(Fault::TornWrite);
            assert!(write(&f, 0, &block_of(4, 2 * bs)).await.is_err());
            let got = f.read_bytes(0, 2 * bs).await.unwrap();
            let applied = got.iter().take_while(|&&b| b == 4).count();
            assert!(applied > 0 && applied < 2 * bs, "a torn write applies a strict prefix ({applied})");
            assert!(got[applied..].iter().all(|&b| b == 0));
            write(&f, 0, &block_of(5, bs)).await.unwrap();
            inj.arm(Fault::SyncEio);
            assert!(f.fdatasync().await.is_err());
            assert_eq!(f.file_size().await.unwrap(), 0, "a failed fdatasync drops the unsynced data");
            // A metadata file is never hit by armed segment faults.
            inj.arm(Fault::WriteEio);
            let m = SegmentFile::open_rw(&dir.join("m"), FileRole::Metadata).await.unwrap();
            write(&m, 0, &block_of(6, bs)).await.unwrap();
            m.fdatasync().await.unwrap();
            assert_eq!(inj.armed(), vec![Fault::WriteEio]);
            assert_eq!(inj.stats(), FaultStats { write_errors: 2, torn_writes: 1, sync_errors: 1, remove_errors: 0, crashes: 0 });
            set_shard_fault_injector(None);
        });
    }

    #[test]
    fn the_descriptor_budget_never_closes_a_file_in_use_and_a_closed_file_follows_its_rename() {
        use crate::storage::open_files::set_shard_open_segment_files;
        run(|dir| async move {
            set_shard_open_segment_files(Some(64));
            let busy = SegmentFile::open_rw_as(&dir.join("busy.log"), FileRole::Segment, WriteMode::PageCache).await.unwrap();
            let renamed = SegmentFile::open_rw(&dir.join("old.log"), FileRole::Segment).await.unwrap();
            let mut buf = renamed.alloc_write_buffer(renamed.alignment() as usize);
            buf.as_bytes_mut().fill(7);
            renamed.write_at(buf, 0).await.unwrap();
            renamed.rename(&dir.join("new.log")).await.unwrap();
            // An operation holds the descriptor of `busy` while many files open.
            let held = busy.handle().await.unwrap();
            let mut others = Vec::new();
            for i in 0..256 {
                others.push(SegmentFile::open_rw_as(&dir.join(format!("{i}.log")), FileRole::Segment, WriteMode::PageCache).await.unwrap());
            }
            assert!(busy.is_busy());
            assert_eq!(busy.descriptors(), 1, "a file in use keeps its descriptor");
            assert_eq!(renamed.descriptors(), 0, "an idle file was closed");
            drop(held);
            // Reopened under its new name.
            assert_eq!(renamed.read_bytes(0, 4).await.unwrap().as_ref(), &[7, 7, 7, 7]);
            for f in &others {
                f.file_size().await.unwrap();
            }
            assert_eq!(busy.descriptors(), 0, "once idle, it is closed like the others");
        });
    }
}
