//! The shard's request memory pool: Kafka's `queued.max.request.bytes`, per shard.
//!
//! Every request frame reserves its announced length here before its body is read, and
//! gives it back when its handler finishes (the frame and everything decoded from it are
//! dropped then). A frame that does not fit waits: its connection stops reading the
//! socket, so the client feels back-pressure, and nothing is ever reserved past the limit.
//! Reserving is accounting only; the connection commits memory as the bytes arrive
//! (`connection.rs`), so a silent client holds a reservation, not memory.
//!
//! Kafka's SocketServer builds a non-strict `SimpleMemoryPool`: it admits a request while
//! any memory is left, so the pool can be exceeded by up to one request
//! (`socket.request.max.bytes`), and it requires the pool to be at least that large.
//! Here admission is strict (reserved + frame <= limit), and the config requires the
//! largest frame to fit the part of the pool large frames may use, so the limit is a real
//! bound and every admissible frame is admitted eventually. Kafka releases a request's
//! buffer right after parsing unless the request keeps references into it (Produce:
//! `requiresDelayedAllocation`), then when its handling is done; our decoded requests
//! always borrow from the frame (strings and bytes are slices of it), so every request
//! holds its reservation until its handler finishes.
//!
//! Two classes, so that large frames (held by slow or silent clients) never starve small
//! requests such as Metadata, heartbeats or small produces: a frame of at most
//! `SMALL_FRAME_BYTES` may use the whole pool; a larger one only the part below
//! `large_limit_bytes` (7/8; the last 1/8 is kept for small frames).
//! Within a class, waiters are admitted in arrival order (a large frame is never
//! overtaken by a later large one, so none starves). Shard-local: `Cell`/`RefCell`, no
//! atomics.
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// Frames up to this size may use the part of the pool kept for small requests.
pub const SMALL_FRAME_BYTES: usize = 64 * 1024;
pub use crate::config::request_pool_large_limit_bytes as large_limit_bytes;

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("frame of {bytes} bytes can never fit the request memory pool ({limit_bytes} bytes for frames this large); raise queued_max_request_bytes")]
pub struct FrameTooLargeForPool {
    pub bytes: usize,
    pub limit_bytes: usize,
}

pub struct RequestMemoryPool {
    limit_bytes: usize,
    large_limit_bytes: usize,
    state: RefCell<PoolState>,
}

struct PoolState {
    reserved_bytes: usize,
    small_waiters: VecDeque<Rc<Waiter>>,
    large_waiters: VecDeque<Rc<Waiter>>,
}

/// One frame waiting for memory. `granted` is set (and the bytes counted as reserved) by
/// the pool; the waiting `Reserve` then owns the bytes.
struct Waiter {
    bytes: usize,
    granted: Cell<bool>,
    waker: RefCell<Option<Waker>>,
}

impl RequestMemoryPool {
    pub fn new(limit_bytes: usize) -> RequestMemoryPool {
        assert!(limit_bytes >= SMALL_FRAME_BYTES, "request memory pool of {limit_bytes} bytes cannot hold one small frame");
        RequestMemoryPool {
            limit_bytes,
            large_limit_bytes: large_limit_bytes(limit_bytes),
            state: RefCell::new(PoolState { reserved_bytes: 0, small_waiters: VecDeque::new(), large_waiters: VecDeque::new() }),
        }
    }

    pub fn limit_bytes(&self) -> usize {
        self.limit_bytes
    }

    /// Bytes reserved by frames being received or handled.
    pub fn reserved_bytes(&self) -> usize {
        self.state.borrow().reserved_bytes
    }

    /// Frames waiting for memory.
    pub fn waiting(&self) -> usize {
        let s = self.state.borrow();
        s.small_waiters.len() + s.large_waiters.len()
    }

    fn class_limit_bytes(&self, bytes: usize) -> usize {
        if bytes <= SMALL_FRAME_BYTES {
            self.limit_bytes
        } else {
            self.large_limit_bytes
        }
    }

    /// Reserves `bytes` for one frame, waiting until they fit. Fails only for a frame that
    /// could never fit (the config rules that out for frames within
    /// `socket_request_max_bytes`).
    pub fn reserve(self: &Rc<Self>, bytes: usize) -> Result<Reserve, FrameTooLargeForPool> {
        let limit_bytes = self.class_limit_bytes(bytes);
        if bytes > limit_bytes {
            return Err(FrameTooLargeForPool { bytes, limit_bytes });
        }
        Ok(Reserve { pool: self.clone(), bytes, waiter: None, taken: false })
    }

    fn release(&self, bytes: usize) {
        {
            let mut s = self.state.borrow_mut();
            assert!(s.reserved_bytes >= bytes, "releasing {bytes} bytes of {} reserved", s.reserved_bytes);
            s.reserved_bytes -= bytes;
        }
        self.admit_waiters();
    }

    /// Grants memory to waiters at the head of each queue while they fit: small frames
    /// first (they finish fast and free memory soon), then large ones in arrival order.
    fn admit_waiters(&self) {
        let mut wake = Vec::new();
        {
            let mut guard = self.state.borrow_mut();
            let s = &mut *guard;
            for (queue, limit) in [(&mut s.small_waiters, self.limit_bytes), (&mut s.large_waiters, self.large_limit_bytes)] {
                while let Some(head) = queue.front() {
                    if s.reserved_bytes + head.bytes > limit {
                        break;
                    }
                    s.reserved_bytes += head.bytes;
                    head.granted.set(true);
                    wake.extend(head.waker.borrow_mut().take());
                    queue.pop_front();
                }
            }
            assert!(s.reserved_bytes <= self.limit_bytes, "pool over its limit: {} > {}", s.reserved_bytes, self.limit_bytes);
        }
        // Wake outside the borrow: a waker may run code that touches the pool.
        for w in wake {
            w.wake();
        }
    }

    /// Removes a waiter whose frame was given up (its connection closed) before it was
    /// granted; the waiters behind it may fit now.
    fn cancel(&self, waiter: &Rc<Waiter>) {
        {
            let mut s = self.state.borrow_mut();
            s.small_waiters.retain(|w| !Rc::ptr_eq(w, waiter));
            s.large_waiters.retain(|w| !Rc::ptr_eq(w, waiter));
        }
        self.admit_waiters();
    }
}

/// A frame's reservation; released when dropped (when the request's handler finishes).
pub struct RequestMemory {
    pool: Rc<RequestMemoryPool>,
    bytes: usize,
}

impl RequestMemory {
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Drop for RequestMemory {
    fn drop(&mut self) {
        self.pool.release(self.bytes);
    }
}

/// Resolves to the frame's `RequestMemory` once it fits. Dropping it before that gives up
/// the place in the queue (or the memory, if it was granted meanwhile).
pub struct Reserve {
    pool: Rc<RequestMemoryPool>,
    bytes: usize,
    waiter: Option<Rc<Waiter>>,
    taken: bool,
}

impl Future for Reserve {
    type Output = RequestMemory;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<RequestMemory> {
        let this = &mut *self;
        assert!(!this.taken, "Reserve polled after it completed");
        let granted = match &this.waiter {
            Some(w) if w.granted.get() => true,
            Some(w) => {
                *w.waker.borrow_mut() = Some(cx.waker().clone());
                false
            }
            None => {
                let pool = &this.pool;
                let mut guard = pool.state.borrow_mut();
                let s = &mut *guard;
                let small = this.bytes <= SMALL_FRAME_BYTES;
                let queue = if small { &mut s.small_waiters } else { &mut s.large_waiters };
                // The fast path: nobody of this class waits and the frame fits.
                if queue.is_empty() && s.reserved_bytes + this.bytes <= pool.class_limit_bytes(this.bytes) {
                    s.reserved_bytes += this.bytes;
                    true
                } else {
                    let w = Rc::new(Waiter { bytes: this.bytes, granted: Cell::new(false), waker: RefCell::new(Some(cx.waker().clone())) });
                    queue.push_back(w.clone());
                    this.waiter = Some(w);
                    false
                }
            }
        };
        if !granted {
            return Poll::Pending;
        }
        this.taken = true;
        this.waiter = None;
        Poll::Ready(RequestMemory { pool: this.pool.clone(), bytes: this.bytes })
    }
}

impl Drop for Reserve {
    fn drop(&mut self) {
        if let Some(w) = self.waiter.take() {
            if w.granted.get() {
                self.pool.release(w.bytes);
            } else {
                self.pool.cancel(&w);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;

    const MIB: usize = 1024 * 1024;

    /// Polls once: the memory if granted by now.
    fn ready(r: &mut Reserve) -> Option<RequestMemory> {
        r.now_or_never()
    }

    #[test]
    fn reserve_and_release_within_the_limit() {
        let pool = Rc::new(RequestMemoryPool::new(8 * MIB));
        let a = ready(&mut pool.reserve(3 * MIB).unwrap()).expect("fits");
        let b = ready(&mut pool.reserve(3 * MIB).unwrap()).expect("fits");
        assert_eq!(pool.reserved_bytes(), 6 * MIB);
        drop(a);
        assert_eq!(pool.reserved_bytes(), 3 * MIB);
        drop(b);
        assert_eq!(pool.reserved_bytes(), 0);
    }

    #[test]
    fn a_frame_that_does_not_fit_waits_until_memory_is_released() {
        let pool = Rc::new(RequestMemoryPool::new(8 * MIB)); // large frames: 7 MiB
        let a = ready(&mut pool.reserve(4 * MIB).unwrap()).expect("fits");
        let mut waiting = pool.reserve(4 * MIB).unwrap();
        assert!(ready(&mut waiting).is_none(), "8 MiB > 7 MiB for large frames: must wait");
        assert_eq!(pool.reserved_bytes(), 4 * MIB);
        assert_eq!(pool.waiting(), 1);
        drop(a);
        // Released memory went to the waiter, never above the limit.
        assert_eq!(pool.reserved_bytes(), 4 * MIB);
        let b = ready(&mut waiting).expect("granted on release");
        assert_eq!(b.bytes(), 4 * MIB);
        assert_eq!(pool.waiting(), 0);
        drop(b);
        assert_eq!(pool.reserved_bytes(), 0);
    }

    #[test]
    fn small_frames_are_served_while_large_frames_fill_their_part() {
        let pool = Rc::new(RequestMemoryPool::new(8 * MIB));
        let big = ready(&mut pool.reserve(7 * MIB).unwrap()).expect("fits the large part");
        let mut big2 = pool.reserve(SMALL_FRAME_BYTES + 1).unwrap();
        assert!(ready(&mut big2).is_none(), "large part full");
        // The last MiB is kept for small frames: 16 of 64 KiB fit, the 17th waits.
        let smalls: Vec<_> = (0..16).map(|_| ready(&mut pool.reserve(SMALL_FRAME_BYTES).unwrap()).expect("small fits")).collect();
        assert_eq!(pool.reserved_bytes(), 8 * MIB);
        let mut small17 = pool.reserve(1).unwrap();
        assert!(ready(&mut small17).is_none(), "pool full");
        drop(smalls);
        assert!(ready(&mut small17).is_some(), "a small frame is admitted before the large one");
        // The large waiter still does not fit (7 MiB + 1 byte + 64 KiB + 1 > 7 MiB).
        assert!(ready(&mut big2).is_none());
        drop(big);
        assert!(ready(&mut big2).is_some());
        assert_eq!(pool.reserved_bytes(), 0, "everything released");
    }

    #[test]
    fn large_waiters_are_admitted_in_arrival_order() {
        let pool = Rc::new(RequestMemoryPool::new(8 * MIB));
        let a = ready(&mut pool.reserve(6 * MIB).unwrap()).unwrap();
        let mut first = pool.reserve(5 * MIB).unwrap();
        let mut second = pool.reserve(MIB).unwrap(); // would fit, but must not overtake
        assert!(ready(&mut first).is_none());
        assert!(ready(&mut second).is_none(), "a later large frame does not overtake a waiting one");
        drop(a);
        let f = ready(&mut first).expect("first admitted");
        let s = ready(&mut second).expect("second admitted too: 6 MiB <= 7 MiB");
        assert_eq!(pool.reserved_bytes(), 6 * MIB);
        drop((f, s));
    }

    #[test]
    fn dropping_a_waiting_reserve_gives_up_its_place_and_its_grant() {
        let pool = Rc::new(RequestMemoryPool::new(8 * MIB));
        let a = ready(&mut pool.reserve(6 * MIB).unwrap()).unwrap();
        let mut head = pool.reserve(5 * MIB).unwrap();
        let mut behind = pool.reserve(MIB).unwrap();
        assert!(ready(&mut head).is_none());
        assert!(ready(&mut behind).is_none());
        drop(head); // the connection closed while waiting: the one behind may go now
        assert!(ready(&mut behind).is_some());
        drop(behind);
        // Granted but never polled again: dropping it returns the memory.
        let mut granted_unpolled = pool.reserve(2 * MIB).unwrap();
        assert!(ready(&mut granted_unpolled).is_none());
        drop(a);
        assert_eq!(pool.reserved_bytes(), 2 * MIB);
        drop(granted_unpolled);
        assert_eq!(pool.reserved_bytes(), 0);
        assert_eq!(pool.waiting(), 0);
    }

    #[test]
    fn a_frame_larger_than_its_part_is_refused() {
        let pool = Rc::new(RequestMemoryPool::new(8 * MIB));
        assert_eq!(pool.reserve(7 * MIB + 1).err(), Some(FrameTooLargeForPool { bytes: 7 * MIB + 1, limit_bytes: 7 * MIB }));
    }

    proptest::proptest! {
        /// Random reserve / drop sequences: the pool never exceeds its limit, every
        /// reservation is eventually granted once everything else is released, and it
        /// ends empty.
        #[test]
        fn never_over_the_limit(ops in proptest::collection::vec((0usize..3, 1usize..(3 * MIB)), 1..200)) {
            let pool = Rc::new(RequestMemoryPool::new(4 * MIB));
            let mut held: Vec<RequestMemory> = Vec::new();
            let mut waiting: Vec<Reserve> = Vec::new();
            for (op, bytes) in ops {
                match op {
                    0 => {
                        let bytes = bytes.min(large_limit_bytes(4 * MIB));
                        let mut r = pool.reserve(bytes).unwrap();
                        match ready(&mut r) { Some(m) => held.push(m), None => waiting.push(r) }
                    }
                    1 if !held.is_empty() => { held.remove(bytes % held.len()); }
                    _ if !waiting.is_empty() => { waiting.remove(bytes % waiting.len()); }
                    _ => {}
                }
                let mut still = Vec::new();
                for mut r in waiting.drain(..) {
                    match ready(&mut r) { Some(m) => held.push(m), None => still.push(r) }
                }
                waiting = still;
                proptest::prop_assert!(pool.reserved_bytes() <= pool.limit_bytes());
                proptest::prop_assert_eq!(pool.reserved_bytes(), held.iter().map(|m| m.bytes()).sum::<usize>()
                    + waiting.iter().filter(|r| r.waiter.as_ref().is_some_and(|w| w.granted.get())).map(|r| r.bytes).sum::<usize>());
            }
            // Once held memory is released, every waiter is admitted in turn.
            held.clear();
            for _round in 0..1000 {
                if waiting.is_empty() { break; }
                waiting.retain_mut(|r| ready(r).is_none()); // granted memory is dropped at once
            }
            proptest::prop_assert!(waiting.is_empty(), "{} waiters never admitted", waiting.len());
            proptest::prop_assert_eq!(pool.reserved_bytes(), 0);
        }
    }
}
