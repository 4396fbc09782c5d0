//! The writer's segment writes in flight: a fixed set of slots holding the write futures
//! in place, polled by hand. A `FuturesUnordered` allocates a task node (736 B) for each
//! future pushed; these slots are allocated once per writer and reused (issue 10).
//!
//! Like `FuturesUnordered`, a slot's future is polled again only once it was woken: each
//! slot has its own waker, which marks the slot and wakes the polling task. Polling every
//! busy slot at each wake would not do: glommio's I/O futures add a waker to their
//! source at every poll (`Source::collect_rw`), so each extra poll costs an allocation
//! and the source's waker list grows while the write is in flight.
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::task::{waker_ref, ArcWake, AtomicWaker};

/// One slot's waker (`Arc` and atomics because a `Waker` must be `Send`; one shard uses it).
#[derive(Default)]
struct SlotWake {
    /// The slot's future asked to be polled (or is new).
    woken: AtomicBool,
    /// The task that polls the slots.
    task: AtomicWaker,
}

impl ArcWake for SlotWake {
    fn wake_by_ref(me: &Arc<Self>) {
        me.woken.store(true, Ordering::Release);
        me.task.wake();
    }
}

pub(super) struct WriteSlots<F> {
    /// A boxed slice, never resized: a future in it stays at its address until it is
    /// dropped there (see `poll_next`).
    slots: Box<[Option<F>]>,
    /// Each slot's waker, made once.
    wakes: Box<[Arc<SlotWake>]>,
}

impl<F: Future> WriteSlots<F> {
    /// Room for `n` futures at once.
    pub(super) fn new(n: usize) -> Self {
        WriteSlots { slots: (0..n).map(|_| None).collect(), wakes: (0..n).map(|_| Arc::default()).collect() }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.slots.iter().all(Option::is_none)
    }

    /// Puts `f` in a free slot (it is polled at the next `poll_next`). Panics when every
    /// slot is busy: the caller bounds the futures in flight to the slots it asked for.
    pub(super) fn push(&mut self, f: F) {
        let n = self.slots.len();
        let Some(i) = self.slots.iter().position(Option::is_none) else {
            panic!("more than {n} writes in flight");
        };
        self.slots[i] = Some(f);
        self.wakes[i].woken.store(true, Ordering::Release);
    }

    /// Polls the busy slots that were woken; the first one done gives its output and
    /// frees its slot. `Ready(None)` when no slot is busy.
    pub(super) fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<F::Output>> {
        let mut busy = false;
        for (slot, wake) in self.slots.iter_mut().zip(self.wakes.iter()) {
            let Some(f) = slot.as_mut() else { continue };
            busy = true;
            // Registered before the flag is read, so no wake is lost.
            wake.task.register(cx.waker());
            if !wake.woken.swap(false, Ordering::AcqRel) {
                continue;
            }
            // SAFETY: `f` lives in the boxed slice, which is never resized or reallocated,
            // so it does not move while the slots exist, even if `self` moves (only the box
            // pointer does). Nothing moves a future out of its slot: it is dropped in place,
            // by the assignment below or with the slice, before the slot is reused.
            let f = unsafe { Pin::new_unchecked(f) };
            let waker = waker_ref(wake);
            if let Poll::Ready(out) = f.poll(&mut Context::from_waker(&waker)) {
                *slot = None;
                return Poll::Ready(Some(out));
            }
        }
        if busy {
            Poll::Pending
        } else {
            Poll::Ready(None)
        }
    }

    /// The next output of a future in flight, None when none is.
    pub(super) fn next(&mut self) -> impl Future<Output = Option<F::Output>> + Unpin + '_ {
        std::future::poll_fn(|cx| self.poll_next(cx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::{Cell, RefCell};
    use std::marker::PhantomPinned;
    use std::rc::Rc;
    use std::task::Waker;

    /// What the test controls of one `Probe`.
    #[derive(Default)]
    struct Control {
        done: Cell<bool>,
        polls: Cell<u32>,
        drops: Cell<u32>,
        waker: RefCell<Option<Waker>>,
    }

    impl Control {
        /// Completes the probe and wakes whoever polled it.
        fn finish(&self) {
            self.done.set(true);
            if let Some(w) = self.waker.take() {
                w.wake();
            }
        }
    }

    /// Resolves with `id` once finished; checks it is never moved once polled.
    struct Probe {
        id: u32,
        control: Rc<Control>,
        at: Cell<usize>,
        _pinned: PhantomPinned,
    }

    impl Future for Probe {
        type Output = u32;

        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u32> {
            let here = &*self as *const Probe as usize;
            assert!(self.at.get() == 0 || self.at.get() == here, "a pinned future moved");
            self.at.set(here);
            self.control.polls.set(self.control.polls.get() + 1);
            if self.control.done.get() {
                return Poll::Ready(self.id);
            }
            *self.control.waker.borrow_mut() = Some(cx.waker().clone());
            Poll::Pending
        }
    }

    impl Drop for Probe {
        fn drop(&mut self) {
            self.control.drops.set(self.control.drops.get() + 1);
        }
    }

    fn probe(id: u32) -> (Probe, Rc<Control>) {
        let control = Rc::new(Control::default());
        (Probe { id, control: control.clone(), at: Cell::new(0), _pinned: PhantomPinned }, control)
    }

    /// The polling task's waker, counting its wakes.
    #[derive(Default)]
    struct Task(std::sync::atomic::AtomicUsize);

    impl ArcWake for Task {
        fn wake_by_ref(me: &Arc<Self>) {
            me.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn poll(slots: &mut WriteSlots<Probe>, task: &Arc<Task>) -> Poll<Option<u32>> {
        let waker = futures::task::waker(task.clone());
        slots.poll_next(&mut Context::from_waker(&waker))
    }

    #[test]
    fn completes_in_any_order_and_reuses_slots() {
        let task = Arc::new(Task::default());
        let mut slots = WriteSlots::new(3);
        assert!(slots.is_empty());
        assert_eq!(poll(&mut slots, &task), Poll::Ready(None));
        let (a, ca) = probe(1);
        let (b, cb) = probe(2);
        let (c, cc) = probe(3);
        slots.push(a);
        slots.push(b);
        slots.push(c);
        assert_eq!(poll(&mut slots, &task), Poll::Pending);
        cb.finish();
        assert_eq!(task.0.load(Ordering::SeqCst), 1, "a slot's wake wakes the task");
        assert_eq!(poll(&mut slots, &task), Poll::Ready(Some(2)));
        assert_eq!(cb.drops.get(), 1, "a finished future is dropped in its slot");
        // The freed slot takes the next future; the others stay where they were polled.
        let (d, cd) = probe(4);
        slots.push(d);
        let mut slots = slots; // moving the set moves no future
        assert_eq!(poll(&mut slots, &task), Poll::Pending);
        for c in [&cc, &cd, &ca] {
            c.finish();
        }
        let mut got = Vec::new();
        while let Poll::Ready(Some(id)) = poll(&mut slots, &task) {
            got.push(id);
        }
        got.sort_unstable();
        assert_eq!(got, [1, 3, 4]);
        assert!(slots.is_empty());
        assert!([&ca, &cb, &cc, &cd].iter().all(|c| c.drops.get() == 1));
    }

    #[test]
    fn only_woken_futures_are_polled_again() {
        let task = Arc::new(Task::default());
        let mut slots = WriteSlots::new(2);
        let (a, ca) = probe(1);
        let (b, cb) = probe(2);
        slots.push(a);
        slots.push(b);
        for _ in 0..3 {
            assert_eq!(poll(&mut slots, &task), Poll::Pending);
        }
        assert_eq!((ca.polls.get(), cb.polls.get()), (1, 1));
        ca.finish();
        assert_eq!(poll(&mut slots, &task), Poll::Ready(Some(1)));
        assert_eq!(poll(&mut slots, &task), Poll::Pending);
        assert_eq!((ca.polls.get(), cb.polls.get()), (2, 1));
    }

    #[test]
    fn dropping_the_set_drops_futures_in_flight() {
        let task = Arc::new(Task::default());
        let mut slots = WriteSlots::new(2);
        let (a, ca) = probe(1);
        slots.push(a);
        assert_eq!(poll(&mut slots, &task), Poll::Pending);
        drop(slots);
        assert_eq!(ca.drops.get(), 1);
    }

    #[test]
    #[should_panic(expected = "more than 2 writes in flight")]
    fn more_than_the_slots_panics() {
        let mut slots = WriteSlots::new(2);
        for id in 0..3 {
            slots.push(probe(id).0);
        }
    }
}
