//! The log's writer: hands the batches appended to a `Log` to the disk and says when
//! they are durable.
//!
//! `Log::append` only stages a batch in memory. `LogWriter::kick` wakes the
//! write-and-sync loop (one long-lived task per log, spawned at the first kick, asleep
//! while there is no work; a task per kick cost an allocation of ~2 KiB per produce
//! request), which starts the
//! writes each segment allows (`Segment::take_write`: one page-cache write at a time, or
//! up to four O_DIRECT writes of whole blocks, oldest segment first), fdatasyncs when
//! someone waits for that or the flush policy says so, saves what sealed segments leave
//! behind (indexes, the seal snapshot of the layer above) once they are synced, and
//! resolves the `Durable` futures handed out by `durable()`:
//! - `Durability::Written` (flush=never, or acks other than -1) resolves once the
//!   write completed (the kernel has the bytes: survives a process crash);
//! - `Durability::Synced` (flush=always with acks=-1) resolves once the write completed
//!   and an fdatasync that started after it returned.
//!
//! Group commit: one fdatasync (at most one in flight) covers every write completed
//! before it started; it runs beside the writes, which keep starting and completing
//! meanwhile.
//! Waiters that need no fdatasync are resolved as soon as their write completes,
//! before the pass syncs or saves indexes, so a segment roll or a slow fdatasync never
//! holds up an acks=1 producer or a long-poll fetch.
//!
//! Flushing (`LogConfig::flush_interval_messages` / `flush_interval_ms`, Kafka's
//! flush.messages / flush.ms): with flush=never nothing waits for an fdatasync; the loop
//! syncs in the background once that many messages are unsynced or the oldest unsynced
//! data is that old (a timer kicks an idle loop), and when a segment is sealed. The
//! directory is synced before the data of a segment created by a roll counts as synced.
//!
//! Failure: a failed write waits for the other writes in flight, then rolls the log back
//! to the whole batches written before the first unfinished write (dropping every staged
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
//!
//! Pause (`truncate.rs`, `clean_shutdown.rs`): `pause` waits until the loop is idle with
//! everything appended written, then keeps it from starting (kicks are deferred) while
//! the caller cuts or closes the files under it.
//!
//! Allocation: a steady-state pass allocates only what glommio does per write (the I/O
//! source); the write list, the write futures' slots (`write_slots.rs`, polled by hand:
//! no task node per write), the waiter list, the woken waiters and the `Durable`s' slots
//! (`durable_waiters.rs`) are reused (issue 10: no allocation per request on the produce
//! path, `tests/produce_fetch_allocations.rs`).
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::{Rc, Weak};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use super::dma::{remove_file, sync_dir, write_checked_file};
pub use super::durable_waiters::Durable;
use super::durable_waiters::{DurableWaiters, WaiterId};
use super::file::{SegmentFile, WriteBuffer};
use super::log::Log;
use super::segment::{index_path, log_file_name, snapshot_path, time_index_path};
use super::segment::{WriteJob, MAX_DIRECT_WRITES_IN_FLIGHT};
use super::write_slots::WriteSlots;
use super::{StorageError, FLUSH_NEVER};

fn log_is_offline(log: &RefCell<Log>) -> bool {
    log.borrow().is_offline()
}

/// The loop's fdatasync in flight (with the sealed-segment saves after it).
type SyncInFlight = Pin<Box<dyn Future<Output = Result<(), StorageError>>>>;

/// What the loop waits for.
enum Event {
    Written(WriteDone),
    Synced(Result<(), StorageError>),
}

/// A finished segment write, as the loop books it.
struct WriteDone {
    base: i64,
    end: u64,
    want: usize,
    took: Duration,
    res: Result<usize, StorageError>,
}

/// One segment write, as the loop runs it (a function, not a closure, so the writer's
/// task can name the future's type and keep one set of write slots across passes).
async fn write_job(base: i64, file: Rc<SegmentFile>, buf: WriteBuffer, pos: u64, end: u64) -> WriteDone {
    let want = buf.len();
    let started = Instant::now();
    let res = file.write_at(buf, pos).await;
    WriteDone { base, end, want, took: started.elapsed(), res }
}

/// The writes the loop can have in flight at once (the size of its `WriteSlots`):
/// `Log::take_writes` starts a segment's writes only once every older segment is fully
/// written, so every write in flight is one segment's, and `Segment::take_write` allows
/// a segment at most `MAX_DIRECT_WRITES_IN_FLIGHT` (O_DIRECT), or one (page cache).
/// `WriteSlots::push` panics past it.
const MAX_WRITES_IN_FLIGHT: usize = MAX_DIRECT_WRITES_IN_FLIGHT;

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

/// Wakes the writer's long-lived task (see `LogWriter::kick`). Shared by the writer and
/// its task, which holds the writer only while a pass runs, so dropping the writer ends
/// the task.
#[derive(Default)]
struct KickSignal {
    kicked: Cell<bool>,
    /// The writer is gone: the task ends.
    closed: Cell<bool>,
    waker: Cell<Option<Waker>>,
}

impl KickSignal {
    fn raise(&self) {
        self.kicked.set(true);
        if let Some(w) = self.waker.take() {
            w.wake();
        }
    }

    fn close(&self) {
        self.closed.set(true);
        if let Some(w) = self.waker.take() {
            w.wake();
        }
    }

    /// Waits for the next kick (true) or the writer's end (false).
    async fn next(&self) -> bool {
        futures::future::poll_fn(|cx| {
            if self.closed.get() {
                return Poll::Ready(false);
            }
            if self.kicked.replace(false) {
                return Poll::Ready(true);
            }
            self.waker.set(Some(cx.waker().clone()));
            Poll::Pending
        })
        .await
    }
}

struct Waiter {
    /// Resolve once offsets below this are durable enough.
    end_offset: i64,
    sync: bool,
    id: WaiterId,
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
    /// The loop's task was spawned (at the first kick).
    task_spawned: Cell<bool>,
    kick_signal: Rc<KickSignal>,
    /// The slots the `Durable`s handed out wait in (dropped with the writer: they
    /// resolve `Closed`).
    durables: DurableWaiters,
    waiters: RefCell<Vec<Waiter>>,
    /// The waiters `wake` and `fail_waiters` answer, moved out of `waiters` so none is
    /// answered under its borrow; kept to reuse its capacity.
    answered: RefCell<Vec<Waiter>>,
    /// The write jobs of one pass (reused).
    jobs: RefCell<Vec<(i64, WriteJob)>>,
    /// Last written offset the loop reported (debug check: it never moves back).
    last_written: Cell<i64>,
    /// When the last fdatasync finished (flush.ms counts from it).
    last_sync: Cell<Instant>,
    /// A flush.ms timer is pending.
    flush_timer_armed: Cell<bool>,
    /// A truncation or a clean close holds the writer (`pause`): the loop does not start;
    /// a kick meanwhile is remembered and applied when the pause ends.
    paused: Cell<bool>,
    kick_deferred: Cell<bool>,
    /// Closed cleanly (`close_cleanly`): nothing is written any more.
    closed: Cell<bool>,
    /// Tasks waiting for the loop to go idle or a pause to end (`pause`).
    idle_waiters: RefCell<Vec<Waker>>,
}

/// Holds a paused writer (see `LogWriter::pause`); dropping it resumes the writer.
pub(super) struct PauseGuard {
    writer: Rc<LogWriter>,
}

impl Drop for PauseGuard {
    fn drop(&mut self) {
        let w = &self.writer;
        w.paused.set(false);
        w.wake_idle_waiters();
        if w.kick_deferred.take() {
            w.kick();
        }
    }
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
            task_spawned: Cell::new(false),
            kick_signal: Rc::default(),
            durables: DurableWaiters::default(),
            waiters: RefCell::new(Vec::new()),
            answered: RefCell::new(Vec::new()),
            jobs: RefCell::new(Vec::new()),
            last_written: Cell::new(written),
            last_sync: Cell::new(Instant::now()),
            flush_timer_armed: Cell::new(false),
            paused: Cell::new(false),
            kick_deferred: Cell::new(false),
            closed: Cell::new(false),
            idle_waiters: RefCell::new(Vec::new()),
        })
    }

    /// Waits until no write, fdatasync or index save is in flight and everything appended
    /// is written (the loop is idle), then holds the loop until the guard drops: a kick
    /// meanwhile (a `durable` call, the flush timer) is applied then. Truncation and a
    /// clean close work on the files under it. Callers hold the partition's append lock,
    /// so nothing is appended meanwhile; a second pause waits for the first to end.
    pub(super) async fn pause(self: &Rc<Self>) -> Result<PauseGuard, StorageError> {
        loop {
            if self.closed.get() {
                return Err(StorageError::Closed);
            }
            if self.running.get() || self.paused.get() {
                self.until_idle().await;
                continue;
            }
            let pending = self.log.borrow().has_pending_writes();
            if pending && !self.log.borrow().is_offline() {
                // Appended but not kicked yet: write it first.
                self.kick();
                continue;
            }
            break;
        }
        // No await since the checks: the loop is idle and stays so.
        self.paused.set(true);
        Ok(PauseGuard { writer: self.clone() })
    }

    /// Resolves once the loop is idle and no pause holds it (or at a spurious wake).
    async fn until_idle(&self) {
        futures::future::poll_fn(|cx| {
            if !self.running.get() && !self.paused.get() {
                return Poll::Ready(());
            }
            self.idle_waiters.borrow_mut().push(cx.waker().clone());
            Poll::Pending
        })
        .await
    }

    fn wake_idle_waiters(&self) {
        for w in self.idle_waiters.take() {
            w.wake();
        }
    }

    /// The loop stops (idle, or for good after a failed fdatasync).
    fn stop_running(&self) {
        self.running.set(false);
        self.wake_idle_waiters();
    }

    /// The log this writer writes.
    pub(super) fn log(&self) -> &Rc<RefCell<Log>> {
        &self.log
    }

    /// After a truncation: the written end moved back to `end` (the debug check of
    /// `wake` follows it), waiters above `fail_above` (all: `i64::MIN`) fail with
    /// `error`, and the owner hears that written data changed.
    pub(super) fn after_truncation(&self, end: i64, fail_above: i64, error: &StorageError) {
        self.last_written.set(end);
        self.fail_waiters(fail_above, error);
        (self.hooks.on_written)();
    }

    /// A truncation (or clean close) failed half-way on disk: memory and files may
    /// disagree, so the log goes offline as after a failed fdatasync, until a restart
    /// re-validates what is on disk.
    pub(super) fn offline_after_failed(&self, what: &str, e: &StorageError) {
        tracing::error!(topic = %self.topic, partition = self.partition, error = %e,
            "{what} failed; partition offline (KAFKA_STORAGE_ERROR) until the broker restarts (recovery re-validates the log)");
        let reason = format!("{what} failed: {e}");
        self.log.borrow_mut().set_offline(reason.clone());
        let offline = self.log.borrow().check_online().err().unwrap_or_else(|| e.duplicate());
        self.fail_waiters(i64::MIN, &offline);
        (self.hooks.on_written)();
        self.report_offline(&reason);
    }

    /// Removes a segment file a roll opened and did not use (a failed write rolled the log
    /// back while it opened, so it is named for an end that no longer is). Left behind, it
    /// would come back at recovery as a segment and cut the one before it at its base
    /// offset, where acknowledged records may be by then: a failed removal takes the log
    /// offline (the broker halts) instead.
    pub async fn discard_unused_segment_file(&self, path: &std::path::Path) -> Result<(), StorageError> {
        self.remove_or_go_offline(path, "removing an unused segment file").await
    }

    /// Removes a file the log must not find again at recovery; a failure takes the log
    /// offline (see `discard_unused_segment_file`, `on_write_failure`).
    async fn remove_or_go_offline(&self, path: &std::path::Path, what: &str) -> Result<(), StorageError> {
        let removed = remove_file(path).await;
        if let Err(e) = &removed {
            self.offline_after_failed(what, e);
        }
        removed
    }

    /// (topic, partition), for log lines.
    pub(super) fn name(&self) -> (&str, i32) {
        (&self.topic, self.partition)
    }

    /// A clean close: nothing more is written; later `durable` calls fail with `Closed`.
    pub(super) fn mark_closed(&self) {
        self.closed.set(true);
    }

    /// Starts the write-and-sync loop unless it runs already. Call after appending.
    pub fn kick(self: &Rc<Self>) {
        if self.closed.get() {
            return;
        }
        if self.paused.get() {
            self.kick_deferred.set(true);
            return;
        }
        if self.running.get() {
            return;
        }
        self.running.set(true);
        if !self.task_spawned.replace(true) {
            glommio::spawn_local(Self::writer_task(Rc::downgrade(self), self.kick_signal.clone())).detach();
        }
        self.kick_signal.raise();
    }

    /// The writer's long-lived task: one write-and-sync pass per kick, holding the
    /// writer only during a pass. The write slots live here, across passes.
    async fn writer_task(writer: Weak<Self>, kicks: Rc<KickSignal>) {
        let mut writes = WriteSlots::new(MAX_WRITES_IN_FLIGHT);
        while kicks.next().await {
            let Some(me) = writer.upgrade() else { return };
            me.write_and_sync_loop(&mut writes, write_job).await;
        }
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
                Ok(()) if self.closed.get() => Some(StorageError::Closed),
                Ok(()) if end_offset > log.next_offset() => Some(StorageError::RolledBack),
                Ok(()) => None,
            };
            if let Some(e) = refused {
                return Durable::ready(Err(e));
            }
            if log.written_offset() >= end_offset && (!sync || log.synced_offset() >= end_offset) {
                return Durable::ready(Ok(()));
            }
        }
        let (id, durable) = self.durables.wait();
        self.waiters.borrow_mut().push(Waiter { end_offset, sync, id });
        self.kick();
        durable
    }

    /// The write-and-sync loop is running (tests wait for it to go idle).
    pub fn is_running(&self) -> bool {
        self.running.get()
    }

    /// Fails every pending `Durable` with `error` (the owner is closing the log).
    pub fn fail_all(&self, error: &StorageError) {
        self.fail_waiters(i64::MIN, error);
    }

    /// Starts the writes that may start, syncs when someone waits for it or the flush
    /// policy asks, saves what sealed segments leave behind (indexes, seal snapshot),
    /// and resolves waiters. Exits when there is nothing left to do; the check and the
    /// exit happen without an await in between, so no append is missed.
    async fn write_and_sync_loop<W>(self: &Rc<Self>, writes: &mut WriteSlots<W>, start_write: fn(i64, Rc<SegmentFile>, WriteBuffer, u64, u64) -> W)
    where
        W: Future<Output = WriteDone>,
    {
        debug_assert!(writes.is_empty(), "a pass starts with no write in flight");
        // The fdatasync in flight (with the sealed-segment saves after it): it runs beside
        // the writes, so no ack that needs no sync ever waits for one.
        let mut sync: Option<SyncInFlight> = None;
        let mut failed: Option<StorageError> = None;
        loop {
            if self.log.borrow().is_offline() && writes.is_empty() && sync.is_none() {
                // Nothing more is written to (or synced in) a log whose fdatasync failed.
                self.stop_running();
                return;
            }
            if failed.is_none() && !self.log.borrow().is_offline() {
                let mut jobs = self.jobs.take();
                self.log.borrow_mut().take_writes(&mut jobs);
                for (base, mut job) in jobs.drain(..) {
                    let Some(buf) = job.buf.take() else { continue };
                    writes.push(start_write(base, job.file.clone(), buf, job.pos, job.end));
                }
                *self.jobs.borrow_mut() = jobs;
            }
            // The first poll submits the new writes; collect those already done.
            while let Poll::Ready(Some(done)) = futures::poll!(writes.next()) {
                self.finish_write(done, &mut failed);
            }
            if let Some(e) = failed.take() {
                // A rollback must not race writes or a sync still in flight: let them land.
                while let Some(done) = writes.next().await {
                    self.finish_write(done, &mut None);
                }
                if let Some(s) = sync.take() {
                    if let Err(sync_error) = s.await {
                        self.go_offline(sync_error);
                    }
                }
                self.on_write_failure(e).await;
                continue;
            }
            // Acks that need no fdatasync (and fetch long polls) are answered now.
            self.wake(self.log.borrow().written_offset());
            let written = self.log.borrow().written_offset();
            if sync.is_none() && !self.log.borrow().is_offline() && self.log.borrow().synced_offset() < written && self.wants_sync(written) {
                let me = self.clone();
                sync = Some(Box::pin(async move {
                    me.sync(written).await?;
                    me.save_sealed().await;
                    Ok(())
                }));
            }
            if writes.is_empty() && sync.is_none() {
                let more = self.log.borrow().has_pending_writes() || {
                    let log = self.log.borrow();
                    let (w, synced) = (log.written_offset(), log.synced_offset());
                    drop(log);
                    synced < w && self.wants_sync(w) && !self.log.borrow().is_offline()
                };
                if !more {
                    self.arm_flush_timer();
                    self.stop_running();
                    return;
                }
                continue;
            }
            // Wait for the next write to finish or the sync to return, whichever is first.
            let event = futures::future::poll_fn(|cx| {
                if let Some(s) = sync.as_mut() {
                    if let Poll::Ready(res) = s.as_mut().poll(cx) {
                        return Poll::Ready(Event::Synced(res));
                    }
                }
                if !writes.is_empty() {
                    if let Poll::Ready(Some(done)) = writes.poll_next(cx) {
                        return Poll::Ready(Event::Written(done));
                    }
                }
                Poll::Pending
            })
            .await;
            match event {
                Event::Written(done) => self.finish_write(done, &mut failed),
                Event::Synced(res) => {
                    sync = None;
                    match res {
                        // Waiters for fdatasync are answered at the top of the loop.
                        Ok(()) => {}
                        Err(e) => {
                            self.go_offline(e);
                            // Writes in flight land (nothing more is reported about them).
                            while writes.next().await.is_some() {}
                            self.stop_running();
                            return;
                        }
                    }
                }
            }
        }
    }

    /// An fdatasync failed: the log goes offline for good (invariant 8), every waiter
    /// fails, and long polls wake to meet the error.
    pub(super) fn go_offline(&self, e: StorageError) {
        let synced = self.log.borrow().synced_offset();
        // Logged once: the log is offline from here on and never syncs again.
        tracing::error!(topic = %self.topic, partition = self.partition, error = %e, synced_offset = synced,
            "fdatasync failed; partition offline (KAFKA_STORAGE_ERROR) until the broker restarts: \
             fix the disk, then restart (recovery re-validates the log tail)");
        let reason = e.to_string();
        self.log.borrow_mut().set_offline(reason.clone());
        let offline = self.log.borrow().check_online().err().unwrap_or(e);
        self.fail_waiters(i64::MIN, &offline);
        (self.hooks.on_written)();
        self.report_offline(&reason);
    }

    /// The broker's log dir failure handler hears of it (`log_dir_failure.rs`: it halts a
    /// broker, so the controller moves leadership to the rest of the ISR).
    fn report_offline(&self, reason: &str) {
        super::log_dir_failure::report(&super::log_dir_failure::OfflineLog { topic: &self.topic, partition: self.partition, reason });
    }

    /// Books a finished write: the segment's written prefix grows, or `failed` is set
    /// (the first failure wins).
    fn finish_write(&self, done: WriteDone, failed: &mut Option<StorageError>) {
        if done.took >= SLOW_WRITE {
            // Acks of this partition may have waited for it: say so, it explains tail latency.
            tracing::warn!(topic = %self.topic, partition = self.partition, bytes = done.want,
                ms = done.took.as_millis() as u64, "slow segment write");
        }
        let error = match done.res {
            Ok(n) if n >= done.want => {
                self.log.borrow_mut().complete_write(done.base, done.end);
                return;
            }
            Ok(n) => StorageError::NoSpace { context: format!("short write ({n} of {} bytes)", done.want) },
            Err(e) => e,
        };
        if failed.is_none() {
            *failed = Some(error);
        }
    }

    /// Whether to fdatasync now: a waiter needs it, a sealed segment must be synced
    /// before its indexes and snapshot are saved, or the flush policy (flush.messages,
    /// flush.ms) says unsynced data is due. Acks that need no sync never wait for it.
    fn wants_sync(&self, written: i64) -> bool {
        if self.waiters.borrow().iter().any(|w| w.sync && w.end_offset <= written) {
            return true;
        }
        if self.log.borrow().has_unsaved_sealed(written) {
            return true;
        }
        let log = self.log.borrow();
        let config = log.config();
        let unsynced = written - log.synced_offset();
        unsynced > 0
            && (unsynced >= config.flush_interval_messages
                || self.last_sync.get().elapsed().as_millis() >= u128::try_from(config.flush_interval_ms).unwrap_or(0))
    }

    /// One group commit: the directory (when a roll created a file since), then every
    /// file written since the last sync; then offsets below `written` are synced.
    pub(super) async fn sync(&self, written: i64) -> Result<(), StorageError> {
        let new_entries = self.log.borrow().segments_needing_dir_sync();
        if !new_entries.is_empty() {
            let dir = self.log.borrow().dir().to_path_buf();
            sync_dir(&dir).await?;
            self.log.borrow_mut().mark_dir_synced(&new_entries);
        }
        let files = self.log.borrow_mut().take_unsynced_files();
        let mut sync_error = None;
        for f in files {
            if let Err(e) = f.fdatasync().await {
                sync_error = Some(e);
            }
        }
        if let Some(e) = sync_error {
            return Err(e);
        }
        self.log.borrow_mut().mark_synced(written);
        self.last_sync.set(Instant::now());
        Ok(())
    }

    /// flush.ms: when the loop goes idle with unsynced data, a timer kicks it once the
    /// data is due (one timer at a time).
    fn arm_flush_timer(self: &Rc<Self>) {
        let (due, unsynced) = {
            let log = self.log.borrow();
            (log.config().flush_interval_ms, log.written_offset() > log.synced_offset())
        };
        if !unsynced || due == FLUSH_NEVER || self.flush_timer_armed.get() || log_is_offline(&self.log) {
            return;
        }
        let wait = Duration::from_millis(u64::try_from(due).unwrap_or(0)).saturating_sub(self.last_sync.get().elapsed());
        self.flush_timer_armed.set(true);
        let me = self.clone();
        glommio::spawn_local(async move {
            glommio::timer::sleep(wait).await;
            me.flush_timer_armed.set(false);
            me.kick();
        })
        .detach();
    }

    /// Saves what each synced sealed segment leaves behind: its seal snapshot (the
    /// layer above's state as of its end), then its indexes. Off the append path: a
    /// roll only hands them over.
    pub(super) async fn save_sealed(&self) {
        let bases = self.log.borrow().sealed_needing_indexes();
        for base in bases {
            // Clone what is saved: the log is borrowed mutably by appends meanwhile.
            let (index, time_index, summary, dir, snapshot) = {
                let log = self.log.borrow();
                let Some(seg) = log.segment(base) else { continue };
                (seg.index.clone(), seg.time_index.clone(), seg.summary(), log.dir().to_path_buf(), seg.snapshot.clone())
            };
            if let Some(snap) = snapshot {
                debug_assert!(self.log.borrow().synced_offset() >= summary.next_offset, "a seal snapshot is saved after its segment is synced");
                if let Err(e) = write_checked_file(&snapshot_path(&dir, summary.next_offset), snap.magic, snap.version, &snap.payload).await {
                    // Recovery then starts from an older snapshot (or none): slower, not wrong.
                    tracing::warn!(topic = %self.topic, partition = self.partition, base, error = %e, "could not save the seal snapshot");
                }
            }
            let res = async {
                index.save(&index_path(&dir, base), &summary.encode()).await?;
                time_index.save(&time_index_path(&dir, base)).await
            }
            .await;
            if let Err(e) = res {
                // Recovery rebuilds a missing index by scanning; not fatal.
                tracing::warn!(topic = %self.topic, partition = self.partition, base, error = %e, "could not save segment indexes");
            }
            self.log.borrow_mut().mark_indexes_saved(base);
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
            // A rolled-back segment's file left behind would come back at recovery and cut
            // the segment before it at its base offset, where acknowledged records written
            // after the rollback may be: the log goes offline (the broker halts) instead.
            for path in [dir.join(log_file_name(seg.base_offset)), snapshot_path(&dir, seg.base_offset)] {
                if self.remove_or_go_offline(&path, "removing a rolled-back segment's file").await.is_err() {
                    return;
                }
            }
        }
    }

    /// Fails waiters for offsets above `end` (all of them when `end` is i64::MIN).
    fn fail_waiters(&self, end: i64, error: &StorageError) {
        let mut fail = self.take_waiters(|w| w.end_offset > end || end == i64::MIN);
        for w in fail.drain(..) {
            self.durables.answer(w.id, Err(error.duplicate()));
        }
        *self.answered.borrow_mut() = fail;
    }

    /// Moves the waiters `answer` picks out of the waiter list, in order, into the
    /// (reused) answered list, which the caller answers and gives back.
    fn take_waiters(&self, answer: impl Fn(&Waiter) -> bool) -> Vec<Waiter> {
        let mut picked = self.answered.take();
        debug_assert!(picked.is_empty(), "the answered list is given back empty");
        picked.extend(self.waiters.borrow_mut().extract_if(.., |w| answer(w)));
        picked
    }

    /// Resolves the waiters whose data is durable enough (nothing is acknowledged before
    /// its write completed, nor before fdatasync when it asked for that), then tells the
    /// owner that written data may have advanced.
    pub(super) fn wake(&self, written: i64) {
        debug_assert!(written >= self.last_written.get(), "written data never moves back");
        self.last_written.set(written);
        let synced = self.log.borrow().synced_offset();
        let mut done = self.take_waiters(|w| w.end_offset <= written && (!w.sync || w.end_offset <= synced));
        for w in done.drain(..) {
            self.durables.answer(w.id, Ok(()));
        }
        *self.answered.borrow_mut() = done;
        (self.hooks.on_written)();
    }
}

impl Drop for LogWriter {
    fn drop(&mut self) {
        // Its task holds it only during a pass: it is asleep, and ends.
        self.kick_signal.close();
    }
}
