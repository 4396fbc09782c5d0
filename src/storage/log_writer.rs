//! The log's writer: hands the batches appended to a `Log` to the disk and says when
//! they are durable.
//!
//! `Log::append` only stages a batch in memory. `LogWriter::kick` starts the
//! write-and-sync loop (one task per log, only while there is work), which writes every
//! segment's staged bytes (oldest segment first, one aligned write per segment at a
//! time), fdatasyncs when someone waits for that, saves the indexes of sealed segments,
//! and resolves the `Durable` futures handed out by `durable()`:
//! - `Durability::Written` (flush=never, or acks other than -1) resolves once the
//!   write completed (the kernel has the bytes: survives a process crash);
//! - `Durability::Synced` (flush=always with acks=-1) resolves once the write completed
//!   and an fdatasync that started after it returned.
//!
//! Group commit: appends made while a write or fdatasync is in flight are written by the
//! next pass, and one fdatasync covers every waiter whose data was written before it
//! started. Waiters that need no fdatasync are resolved as soon as their write completes,
//! before the pass syncs or saves indexes, so a segment roll (index saves) or a slow
//! fdatasync never holds up an acks=1 producer or a long-poll fetch.
//!
//! Failure: a failed write rolls the log back to what is on disk (dropping every staged
//! batch, none of which was acknowledged) and fails the waiters above that point with the
//! error. A failed fdatasync is sticky (invariant 8, the "fsyncgate" rule: the kernel
//! may have dropped the dirty pages and a retried fdatasync would succeed on nothing):
//! the log goes offline (`Log::set_offline`), every waiter fails with
//! `StorageError::Offline`, later `durable()` calls fail at once, the loop stops writing,
//! and `synced_offset()` never moves again. Only a restart (recovery re-validating the
//! tail on disk) brings the partition back. The layer above keeps state derived from the appended
//! batches (producer sequences); it learns of a rollback through `WriterHooks::on_rollback`,
//! called synchronously — see there for the ordering it guarantees.
//!
//! Borrow discipline: the loop never holds a `RefCell` borrow of the log across an
//! await, so appends, reads and the cleaner interleave with it freely.
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::channel::oneshot;

use super::dma::remove_file;
use super::log::Log;
use super::segment::{index_path, log_file_name, snapshot_path, time_index_path};
use super::StorageError;

/// A segment write slower than this is logged (the disk, not the broker, set the latency).
const SLOW_WRITE: Duration = Duration::from_millis(200);

/// How durable an append must be before its `Durable` future resolves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// The write completed (in the page cache or on the device, not necessarily synced).
    Written,
    /// The write completed and was fdatasync'ed.
    Synced,
}

/// What the layer above the log wants to hear from its writer.
pub struct WriterHooks {
    /// Called each time the loop has completed writes (or found nothing more to write)
    /// and resolved the waiters it could: data below `Log::written_offset()` may have
    /// grown. Fetch long polls wait on this.
    pub on_written: Box<dyn Fn()>,
    /// Called with the new log end offset right after a failed write rolled the log back,
    /// before any waiter is failed and before the loop awaits anything. Appends run on the
    /// same thread, so no append can run between the rollback and this call: state derived
    /// from appended batches (producer sequences) is cut back before any later append
    /// checks against it.
    pub on_rollback: Box<dyn Fn(i64)>,
}

struct Waiter {
    /// Resolve once offsets below this are durable enough.
    end_offset: i64,
    sync: bool,
    tx: oneshot::Sender<Result<(), StorageError>>,
}

/// The writer of one log (see the module comment). Owned by the log's partition, on its
/// shard.
pub struct LogWriter {
    log: Rc<RefCell<Log>>,
    /// For log lines only.
    topic: String,
    partition: i32,
    hooks: WriterHooks,
    /// The write-and-sync loop is running.
    running: Cell<bool>,
    waiters: RefCell<Vec<Waiter>>,
    /// Last written offset the loop reported (debug check: it never moves back).
    last_written: Cell<i64>,
}

impl LogWriter {
    pub fn new(log: Rc<RefCell<Log>>, topic: String, partition: i32, hooks: WriterHooks) -> Rc<LogWriter> {
        let written = log.borrow().written_offset();
        Rc::new(LogWriter {
            log,
            topic,
            partition,
            hooks,
            running: Cell::new(false),
            waiters: RefCell::new(Vec::new()),
            last_written: Cell::new(written),
        })
    }

    /// Starts the write-and-sync loop unless it runs already. Call after appending.
    pub fn kick(self: &Rc<Self>) {
        if self.running.get() {
            return;
        }
        self.running.set(true);
        let me = self.clone();
        glommio::spawn_local(async move { me.write_and_sync_loop().await }).detach();
    }

    /// A future that resolves once offsets below `end_offset` are as durable as `level`
    /// asks, or fails with the storage error that prevented it (`StorageError::Closed`
    /// when the log's owner closed it first). Call it right after appending, before
    /// anything can await: the waiter must exist before the loop can fail the write
    /// (a waiter asked for later gets `RolledBack` when its data is gone).
    pub fn durable(self: &Rc<Self>, end_offset: i64, level: Durability) -> Durable {
        let sync = level == Durability::Synced;
        {
            let log = self.log.borrow();
            // Offline, or asked about offsets a failed write already rolled back (the
            // waiter would otherwise wait for data that will never be written): fail now.
            let refused = match log.check_online() {
                Err(e) => Some(e),
                Ok(()) if end_offset > log.next_offset() => Some(StorageError::RolledBack),
                Ok(()) => None,
            };
            if let Some(e) = refused {
                let (tx, rx) = oneshot::channel();
                let _ = tx.send(Err(e));
                return Durable { rx: Some(rx) };
            }
            if log.written_offset() >= end_offset && (!sync || log.synced_offset() >= end_offset) {
                return Durable { rx: None };
            }
        }
        let (tx, rx) = oneshot::channel();
        self.waiters.borrow_mut().push(Waiter { end_offset, sync, tx });
        self.kick();
        Durable { rx: Some(rx) }
    }

    /// The write-and-sync loop is running (tests wait for it to go idle).
    pub fn is_running(&self) -> bool {
        self.running.get()
    }

    /// Fails every pending `Durable` with `error` (the owner is closing the log).
    pub fn fail_all(&self, error: &StorageError) {
        self.fail_waiters(i64::MIN, error);
    }

    /// Writes staged batches, syncs when someone waits for it, saves indexes of sealed
    /// segments, and resolves waiters. Exits when there is nothing left to do; the check
    /// and the exit happen without an await in between, so no append is missed.
    async fn write_and_sync_loop(self: Rc<Self>) {
        loop {
            if self.log.borrow().is_offline() {
                // Nothing more is written to a log whose fdatasync failed.
                self.running.set(false);
                return;
            }
            let jobs = self.log.borrow_mut().take_writes();
            let mut failed: Option<StorageError> = None;
            for (base, mut job) in jobs {
                if failed.is_some() {
                    continue;
                }
                let Some(buf) = job.buf.take() else { continue };
                let want = buf.len();
                let started = Instant::now();
                let res = job.file.write_at(buf, job.pos).await;
                let took = started.elapsed();
                if took >= SLOW_WRITE {
                    // Every ack of this partition waited for it: say so, it explains tail latency.
                    tracing::warn!(topic = %self.topic, partition = self.partition, bytes = want, ms = took.as_millis() as u64, "slow segment write");
                }
                match res {
                    Ok(n) if n >= want => self.log.borrow_mut().complete_write(base, job),
                    Ok(n) => failed = Some(StorageError::NoSpace { context: format!("short write ({n} of {want} bytes)") }),
                    Err(e) => failed = Some(e),
                }
            }
            if let Some(e) = failed {
                self.on_write_failure(e).await;
                continue;
            }
            let written = self.log.borrow().written_offset();
            // Acks that need no fdatasync (and fetch long polls) are answered now, not after
            // the sync and index saves below: a segment roll would otherwise stall every
            // producer of the partition behind an fdatasync.
            self.wake(written);
            let want_sync = self.waiters.borrow().iter().any(|w| w.sync && w.end_offset <= written)
                || self.log.borrow().segment_bases().len() > 1 && self.has_unsaved_sealed(written);
            if want_sync && self.log.borrow().synced_offset() < written {
                let files = self.log.borrow_mut().take_unsynced_files();
                let mut sync_error = None;
                for f in files {
                    if let Err(e) = f.fdatasync().await {
                        sync_error = Some(e);
                    }
                }
                match sync_error {
                    None => self.log.borrow_mut().mark_synced(written),
                    Some(e) => {
                        let synced = self.log.borrow().synced_offset();
                        // Logged once: the log is offline from here on and never syncs again.
                        tracing::error!(topic = %self.topic, partition = self.partition, error = %e, synced_offset = synced,
                            "fdatasync failed; partition offline (KAFKA_STORAGE_ERROR) until the broker restarts: \
                             fix the disk, then restart (recovery re-validates the log tail)");
                        self.log.borrow_mut().set_offline(e.to_string());
                        let offline = self.log.borrow().check_online().err().unwrap_or(e);
                        self.fail_waiters(i64::MIN, &offline);
                        // Long polls wake and meet the error.
                        (self.hooks.on_written)();
                        self.running.set(false);
                        return;
                    }
                }
            }
            self.save_sealed_indexes().await;
            self.wake(written);
            let more = self.log.borrow().has_pending_writes()
                || self.waiters.borrow().iter().any(|w| {
                    w.end_offset <= self.log.borrow().written_offset() && w.sync && w.end_offset > self.log.borrow().synced_offset()
                });
            if !more {
                self.running.set(false);
                return;
            }
        }
    }

    fn has_unsaved_sealed(&self, written: i64) -> bool {
        let log = self.log.borrow();
        log.segment_bases().iter().any(|&b| {
            log.segment(b).is_some_and(|s| s.sealed && !s.indexes_saved && s.next_offset() <= written)
        })
    }

    async fn save_sealed_indexes(&self) {
        let bases = self.log.borrow().sealed_needing_indexes();
        for base in bases {
            // Clone what is saved: the log is borrowed mutably by appends meanwhile.
            let (index, time_index, summary, dir) = {
                let log = self.log.borrow();
                let Some(seg) = log.segment(base) else { continue };
                (seg.index.clone(), seg.time_index.clone(), seg.summary(), log.dir().to_path_buf())
            };
            let res = async {
                index.save(&index_path(&dir, base), &summary.encode()).await?;
                time_index.save(&time_index_path(&dir, base)).await
            }
            .await;
            match res {
                Ok(()) => self.log.borrow_mut().mark_indexes_saved(base),
                Err(e) => {
                    // Recovery rebuilds a missing index by scanning; not fatal.
                    tracing::warn!(topic = %self.topic, partition = self.partition, base, error = %e, "could not save segment indexes");
                    self.log.borrow_mut().mark_indexes_saved(base);
                }
            }
        }
    }

    async fn on_write_failure(&self, e: StorageError) {
        let (removed, trims) = self.log.borrow_mut().rollback_unwritten();
        let end = self.log.borrow().next_offset();
        // No await since the rollback: see `WriterHooks::on_rollback`.
        (self.hooks.on_rollback)(end);
        tracing::error!(topic = %self.topic, partition = self.partition, error = %e, log_end_offset = end,
            "write failed; dropped unacknowledged batches");
        self.fail_waiters(end, &e);
        // A failed (torn) write may have put part of the dropped bytes in the file past its
        // logical end. The next write rewrites only up to its own end, so cut them now:
        // otherwise a sealed segment could hold a whole leftover batch past its end (an
        // offset of the next segment, with other bytes) for a scan at recovery to find.
        for (file, end_bytes) in trims {
            if let Err(e) = file.truncate(end_bytes).await {
                tracing::warn!(topic = %self.topic, partition = self.partition, error = %e,
                    "could not cut a failed write's leftovers; recovery bounds the segment by the next one");
            }
        }
        for seg in removed {
            let dir = seg.dir.clone();
            let _ = remove_file(&dir.join(log_file_name(seg.base_offset))).await;
            let _ = remove_file(&snapshot_path(&dir, seg.base_offset)).await;
        }
    }

    /// Fails waiters for offsets above `end` (all of them when `end` is i64::MIN).
    fn fail_waiters(&self, end: i64, error: &StorageError) {
        let mut waiters = self.waiters.borrow_mut();
        let (fail, keep): (Vec<Waiter>, Vec<Waiter>) = waiters.drain(..).partition(|w| w.end_offset > end || end == i64::MIN);
        *waiters = keep;
        drop(waiters);
        for w in fail {
            let _ = w.tx.send(Err(error.duplicate()));
        }
    }

    /// Resolves the waiters whose data is durable enough (nothing is acknowledged before
    /// its write completed, nor before fdatasync when it asked for that), then tells the
    /// owner that written data may have advanced.
    fn wake(&self, written: i64) {
        debug_assert!(written >= self.last_written.get(), "written data never moves back");
        self.last_written.set(written);
        let synced = self.log.borrow().synced_offset();
        let mut waiters = self.waiters.borrow_mut();
        let (done, keep): (Vec<Waiter>, Vec<Waiter>) = waiters
            .drain(..)
            .partition(|w| w.end_offset <= written && (!w.sync || w.end_offset <= synced));
        *waiters = keep;
        drop(waiters);
        for w in done {
            let _ = w.tx.send(Ok(()));
        }
        (self.hooks.on_written)();
    }
}

/// Resolves when an append is as durable as asked (see `LogWriter::durable`).
#[must_use = "a Durable does nothing unless awaited"]
pub struct Durable {
    /// None: durable already when asked.
    rx: Option<oneshot::Receiver<Result<(), StorageError>>>,
}

impl Future for Durable {
    type Output = Result<(), StorageError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(rx) = self.rx.as_mut() else { return Poll::Ready(Ok(())) };
        match Pin::new(rx).poll(cx) {
            Poll::Ready(Ok(res)) => Poll::Ready(res),
            // The writer dropped the waiter without answering: only when the writer itself
            // is gone, which its owner (holding it while it awaits) rules out.
            Poll::Ready(Err(oneshot::Canceled)) => Poll::Ready(Err(StorageError::Closed)),
            Poll::Pending => Poll::Pending,
        }
    }
}
