//! Per-shard pools of large byte buffers (thread-local: a shard is one thread, so no lock).
//!
//! Why: glibc serves allocations of 128 KiB and more with mmap, and on this VM every
//! fresh page then faults through the host (free page reporting), so a buffer allocated
//! and freed per request costs page faults on top of malloc. A pooled buffer is
//! allocated once and reused.
//!
//! A buffer is a `BytesMut` whose views (`split_to(..).freeze()`) are handed out and may
//! live on (in the batch cache, in a response on another shard). When its owner is done
//! carving views out of it, it gives the remaining handle back; `take` reuses a given-back
//! buffer once every view of it is gone (`BytesMut::try_reclaim`: no allocation, no copy),
//! and allocates only when none is reusable. Views dropped on another thread just lower
//! the shared count; reuse happens here, on the owning shard.
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;

use bytes::BytesMut;

/// What a pool did (tests and benches check reuse).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    pub allocated: u64,
    pub reused: u64,
}

/// Buffers of one size class, given back and waiting for their views to go.
pub struct BufferPool {
    /// Usable bytes of every buffer `take` returns (after alignment).
    size: usize,
    /// Start addresses are multiples of this (O_DIRECT needs the device block).
    align: usize,
    /// Given-back handles kept at most (older ones are dropped: their memory goes back to
    /// the allocator once their last view is dropped).
    max_idle: usize,
    /// New buffers are zeroed once, so every byte of their capacity is initialised for
    /// their whole life (see `BufferPool::take`).
    zero_new: bool,
    idle: RefCell<VecDeque<BytesMut>>,
    stats: Cell<PoolStats>,
}

impl BufferPool {
    pub const fn new(size: usize, align: usize, max_idle: usize, zero_new: bool) -> BufferPool {
        BufferPool { size, align, max_idle, zero_new, idle: RefCell::new(VecDeque::new()), stats: Cell::new(PoolStats { allocated: 0, reused: 0 }) }
    }

    pub fn size(&self) -> usize {
        self.size
    }

    /// An empty buffer with room for `size` bytes, its start aligned to `align`. With
    /// `zero_new`, all of its capacity holds initialised bytes (zeros or earlier data).
    pub fn take(&self) -> BytesMut {
        let reusable = {
            let mut idle = self.idle.borrow_mut();
            let at = idle.iter_mut().position(|b| {
                b.clear();
                // Succeeds (moving the handle to the start of its allocation) only when no
                // view of the buffer is alive any more.
                b.try_reclaim(self.size + self.align)
            });
            at.and_then(|i| idle.remove(i))
        };
        let buf = match reusable {
            Some(b) => {
                self.bump(|s| s.reused += 1);
                b
            }
            None => {
                self.bump(|s| s.allocated += 1);
                if self.zero_new {
                    let mut b = BytesMut::zeroed(self.size + self.align);
                    b.clear();
                    b
                } else {
                    BytesMut::with_capacity(self.size + self.align)
                }
            }
        };
        let buf = skip_to_alignment(buf, self.align, 0);
        debug_assert!(buf.capacity() >= self.size && buf.is_empty());
        buf
    }

    /// Gives back the remaining handle of a buffer `take` returned (its views may live on).
    pub fn give_back(&self, mut buf: BytesMut) {
        buf.clear();
        let mut idle = self.idle.borrow_mut();
        if idle.len() >= self.max_idle {
            idle.pop_front();
        }
        idle.push_back(buf);
    }

    pub fn stats(&self) -> PoolStats {
        self.stats.get()
    }

    fn bump(&self, f: impl FnOnce(&mut PoolStats)) {
        let mut s = self.stats.get();
        f(&mut s);
        self.stats.set(s);
    }
}

/// Advances an empty `buf` so that its start address is `phase` past a multiple of
/// `align` (`phase < align`); it must have room for that.
pub fn skip_to_alignment(mut buf: BytesMut, align: usize, phase: usize) -> BytesMut {
    debug_assert!(buf.is_empty() && phase < align && align.is_power_of_two());
    let addr = buf.as_ptr() as usize;
    let skip = (phase + align - addr % align) % align;
    if skip > 0 {
        assert!(buf.capacity() >= skip, "room for the alignment skip was reserved");
        // Within capacity: no reallocation. The skipped bytes are never used.
        buf.resize(skip, 0);
        bytes::Buf::advance(&mut buf, skip);
    }
    debug_assert_eq!(buf.as_ptr() as usize % align, phase);
    buf
}

/// Staging buffers of the log (`storage/segment.rs`): produced batches are copied into
/// them once and written to disk and served to consumers from there.
pub const STAGE_BUFFER_BYTES: usize = 1024 * 1024;
/// The O_DIRECT block the stage buffers align to (storage's padding block).
pub const STAGE_BUFFER_ALIGN: usize = 4096;

thread_local! {
    /// This shard's stage buffers. A buffer comes back once the batch cache evicted its
    /// batches, so the handles given back must outnumber the buffers the cache keeps
    /// alive (the shard's cache budget in MiB: 512 by default) or every buffer would be
    /// forgotten before it is reusable: 1024 handles. Only reusable ones hold memory of
    /// their own (at most 1 GiB after a burst; the others are the cache's bytes).
    static STAGE_POOL: BufferPool = const { BufferPool::new(STAGE_BUFFER_BYTES, STAGE_BUFFER_ALIGN, 1024, false) };
}

/// Runs `f` with this shard's stage buffer pool.
pub fn with_stage_pool<R>(f: impl FnOnce(&BufferPool) -> R) -> R {
    STAGE_POOL.with(f)
}

/// Receive buffers of connections that get large frames (`server/connection.rs`).
pub const FRAME_BUFFER_BYTES: usize = 1024 * 1024;

thread_local! {
    /// This shard's receive buffers for large frames. A frame is released when its
    /// request is handled (its records are copied into a stage buffer by then), so a
    /// buffer comes back quickly; 64 idle handles cover the connections of a busy shard.
    static FRAME_POOL: BufferPool = const { BufferPool::new(FRAME_BUFFER_BYTES, 64, 64, true) };
}

/// Runs `f` with this shard's receive buffer pool.
pub fn with_frame_pool<R>(f: impl FnOnce(&BufferPool) -> R) -> R {
    FRAME_POOL.with(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuses_a_buffer_once_its_views_are_gone() {
        let pool = BufferPool::new(64 * 1024, 4096, 4, false);
        let mut b = pool.take();
        assert_eq!(b.as_ptr() as usize % 4096, 0, "aligned start");
        let start = b.as_ptr();
        b.extend_from_slice(&[7u8; 1000]);
        let view = b.split_to(1000).freeze();
        pool.give_back(b);
        let other = pool.take();
        assert_ne!(other.as_ptr(), start, "a buffer with a live view is not reused");
        assert_eq!(pool.stats(), PoolStats { allocated: 2, reused: 0 });
        assert_eq!(&view[..3], &[7, 7, 7], "the view keeps its bytes");
        drop(view);
        let again = pool.take();
        assert_eq!(again.as_ptr(), start, "reused once the view is dropped");
        assert_eq!(pool.stats(), PoolStats { allocated: 2, reused: 1 });
        drop(other);
    }

    #[test]
    fn phase_alignment() {
        let b = skip_to_alignment(BytesMut::with_capacity(8192 + 4096), 4096, 100);
        assert_eq!(b.as_ptr() as usize % 4096, 100);
        assert!(b.capacity() >= 8192);
    }
}
