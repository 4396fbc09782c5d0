//! The `Durable` futures appends wait on, and the writer's table of their slots.
//!
//! A waiting `Durable` is a slot in a table its writer owns (`DurableWaiters`): the
//! writer answers the slot, the `Durable` polls it and frees it. Slots are reused, so
//! in steady state a waiter allocates nothing (issue 10; a oneshot channel allocated
//! 128 B per append). Everything runs on the log's shard: `Rc` and `RefCell`, no atomics.
//!
//! - A slot belongs to its `Durable` until the `Durable` takes the answer or is dropped;
//!   only then is it freed, and its generation moves on. The writer names a slot by
//!   index and generation (`WaiterId`), so an answer for a `Durable` dropped before it
//!   was answered is ignored rather than given to a later user of the slot.
//! - When the writer drops its `DurableWaiters` with slots unanswered, they resolve
//!   `Err(StorageError::Closed)`.
use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use super::StorageError;

/// Names one waiting `Durable`'s slot, for the writer to answer it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct WaiterId {
    index: u32,
    generation: u32,
}

enum SlotState {
    Free,
    /// Waiting for the writer; the waker of the task that last polled the `Durable`.
    Waiting(Option<Waker>),
    /// Answered; the `Durable` takes the answer at its next poll.
    Answered(Result<(), StorageError>),
}

struct Slot {
    /// Moves on each time the slot is freed.
    generation: u32,
    state: SlotState,
}

#[derive(Default)]
struct Table {
    slots: Vec<Slot>,
    /// Indexes of the free slots (its capacity follows `slots`: freeing never allocates).
    free: Vec<u32>,
}

impl Table {
    fn release(&mut self, id: WaiterId) {
        let slot = &mut self.slots[id.index as usize];
        debug_assert_eq!(slot.generation, id.generation, "only a slot's Durable frees it");
        slot.state = SlotState::Free;
        slot.generation = slot.generation.wrapping_add(1);
        self.free.push(id.index);
    }
}

/// The writer's side: hands out waiting `Durable`s and answers them. Dropping it answers
/// every waiter still waiting with `StorageError::Closed`.
#[derive(Default)]
pub(super) struct DurableWaiters {
    table: Rc<RefCell<Table>>,
}

impl DurableWaiters {
    /// A `Durable` that waits until `answer` is called with the id returned beside it.
    pub(super) fn wait(&self) -> (WaiterId, Durable) {
        let mut t = self.table.borrow_mut();
        let index = match t.free.pop() {
            Some(i) => i,
            None => {
                let i = u32::try_from(t.slots.len()).expect("fewer than 2^32 waiters");
                t.slots.push(Slot { generation: 0, state: SlotState::Free });
                let room = t.slots.capacity();
                t.free.reserve(room);
                i
            }
        };
        let slot = &mut t.slots[index as usize];
        debug_assert!(matches!(slot.state, SlotState::Free), "a free slot is free");
        slot.state = SlotState::Waiting(None);
        let id = WaiterId { index, generation: slot.generation };
        (id, Durable { state: State::Waiting { table: self.table.clone(), id } })
    }

    /// Resolves the waiter `id` with `res`; nothing when its `Durable` was dropped (the
    /// slot's generation moved on) or it was answered already.
    pub(super) fn answer(&self, id: WaiterId, res: Result<(), StorageError>) {
        let waker = {
            let mut t = self.table.borrow_mut();
            let slot = &mut t.slots[id.index as usize];
            if slot.generation != id.generation || !matches!(slot.state, SlotState::Waiting(_)) {
                return;
            }
            match std::mem::replace(&mut slot.state, SlotState::Answered(res)) {
                SlotState::Waiting(w) => w,
                _ => unreachable!("checked above"),
            }
        };
        // Woken outside the borrow, in case the waker touches the table.
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// Waiters not answered yet (tests).
    #[cfg(test)]
    fn waiting(&self) -> usize {
        self.table.borrow().slots.iter().filter(|s| matches!(s.state, SlotState::Waiting(_))).count()
    }
}

impl Drop for DurableWaiters {
    fn drop(&mut self) {
        // The writer is gone: whoever still waits hears `Closed`.
        let n = self.table.borrow().slots.len();
        for i in 0..n {
            let generation = self.table.borrow().slots[i].generation;
            self.answer(WaiterId { index: i as u32, generation }, Err(StorageError::Closed));
        }
    }
}

enum State {
    /// Answered when asked (durable already, or refused); None once returned.
    Ready(Option<Result<(), StorageError>>),
    /// Owns slot `id` of the table until the answer is taken or the `Durable` dropped.
    Waiting { table: Rc<RefCell<Table>>, id: WaiterId },
}

/// Resolves when an append is as durable as asked (see `LogWriter::durable`).
#[must_use = "a Durable does nothing unless awaited"]
pub struct Durable {
    state: State,
}

impl Durable {
    /// A `Durable` answered already (durable when asked, or refused).
    pub(super) fn ready(res: Result<(), StorageError>) -> Durable {
        Durable { state: State::Ready(Some(res)) }
    }
}

impl Future for Durable {
    type Output = Result<(), StorageError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let answer = match &mut self.state {
            State::Ready(res) => return Poll::Ready(res.take().expect("Durable polled after it resolved")),
            State::Waiting { table, id } => {
                let mut t = table.borrow_mut();
                let slot = &mut t.slots[id.index as usize];
                debug_assert_eq!(slot.generation, id.generation, "a Durable owns its slot");
                match &mut slot.state {
                    SlotState::Waiting(w) => {
                        if !w.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                            *w = Some(cx.waker().clone());
                        }
                        return Poll::Pending;
                    }
                    SlotState::Answered(_) => {
                        let SlotState::Answered(res) = std::mem::replace(&mut slot.state, SlotState::Free) else { unreachable!("matched above") };
                        t.release(*id);
                        res
                    }
                    SlotState::Free => unreachable!("a Durable's slot is not free"),
                }
            }
        };
        // The slot is freed: drop the table (and leave nothing for `Drop` to free).
        self.state = State::Ready(None);
        Poll::Ready(answer)
    }
}

impl Drop for Durable {
    fn drop(&mut self) {
        if let State::Waiting { table, id } = &self.state {
            // Dropped before it resolved: free the slot; a late answer finds another
            // generation and is ignored. (No borrow of the table is held outside its
            // short methods, which drop no `Durable`: this never panics.)
            table.borrow_mut().release(*id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// A waker counting its wakes.
    struct Count(AtomicUsize);

    impl futures::task::ArcWake for Count {
        fn wake_by_ref(me: &Arc<Self>) {
            me.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn poll(d: &mut Durable, count: &Arc<Count>) -> Poll<Result<(), StorageError>> {
        let waker = futures::task::waker(count.clone());
        Pin::new(d).poll(&mut Context::from_waker(&waker))
    }

    fn wakes(count: &Arc<Count>) -> usize {
        count.0.load(Ordering::SeqCst)
    }

    #[test]
    fn ready_resolves_at_once() {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        assert!(matches!(poll(&mut Durable::ready(Ok(())), &count), Poll::Ready(Ok(()))));
        assert!(matches!(poll(&mut Durable::ready(Err(StorageError::RolledBack)), &count), Poll::Ready(Err(StorageError::RolledBack))));
    }

    #[test]
    fn answer_wakes_and_resolves() {
        let waiters = DurableWaiters::default();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let (id, mut d) = waiters.wait();
        assert!(poll(&mut d, &count).is_pending());
        assert_eq!(wakes(&count), 0);
        waiters.answer(id, Ok(()));
        assert_eq!(wakes(&count), 1);
        assert!(matches!(poll(&mut d, &count), Poll::Ready(Ok(()))));
        assert_eq!(waiters.waiting(), 0);
        // A second answer to a freed slot is ignored.
        waiters.answer(id, Err(StorageError::Closed));
        assert_eq!(wakes(&count), 1);
    }

    #[test]
    fn answered_before_polled() {
        let waiters = DurableWaiters::default();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let (id, mut d) = waiters.wait();
        waiters.answer(id, Ok(()));
        assert!(matches!(poll(&mut d, &count), Poll::Ready(Ok(()))));
    }

    #[test]
    fn failure_resolves_with_the_error() {
        let waiters = DurableWaiters::default();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let (id, mut d) = waiters.wait();
        assert!(poll(&mut d, &count).is_pending());
        waiters.answer(id, Err(StorageError::Truncated { log_end_offset: 7 }));
        assert_eq!(wakes(&count), 1);
        assert!(matches!(poll(&mut d, &count), Poll::Ready(Err(StorageError::Truncated { log_end_offset: 7 }))));
    }

    #[test]
    fn dropped_waiter_frees_its_slot_and_a_late_answer_goes_nowhere() {
        let waiters = DurableWaiters::default();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let (old, mut d) = waiters.wait();
        assert!(poll(&mut d, &count).is_pending());
        drop(d);
        // The slot is reused by the next waiter, under another generation.
        let (new, mut d2) = waiters.wait();
        assert_eq!(new.index, old.index);
        assert_ne!(new.generation, old.generation);
        assert!(poll(&mut d2, &count).is_pending());
        // The writer answers the dropped waiter late: the new one must not hear it.
        waiters.answer(old, Err(StorageError::RolledBack));
        assert_eq!(wakes(&count), 0);
        assert!(poll(&mut d2, &count).is_pending());
        waiters.answer(new, Ok(()));
        assert!(matches!(poll(&mut d2, &count), Poll::Ready(Ok(()))));
        assert_eq!(waiters.table.borrow().slots.len(), 1, "one slot served all three");
    }

    #[test]
    fn dropped_after_answer_frees_its_slot() {
        let waiters = DurableWaiters::default();
        let (id, d) = waiters.wait();
        waiters.answer(id, Err(StorageError::RolledBack));
        drop(d);
        let (again, _d) = waiters.wait();
        assert_eq!((again.index, again.generation), (id.index, id.generation + 1));
    }

    #[test]
    fn slots_are_reused_in_steady_state() {
        let waiters = DurableWaiters::default();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        for _ in 0..100 {
            let a = waiters.wait();
            let b = waiters.wait();
            waiters.answer(b.0, Ok(()));
            waiters.answer(a.0, Ok(()));
            for (_, mut d) in [a, b] {
                assert!(matches!(poll(&mut d, &count), Poll::Ready(Ok(()))));
            }
        }
        let t = waiters.table.borrow();
        assert_eq!((t.slots.len(), t.free.len()), (2, 2));
    }

    #[test]
    fn writer_dropped_resolves_closed() {
        let waiters = DurableWaiters::default();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let (_, mut polled) = waiters.wait();
        let (_, mut unpolled) = waiters.wait();
        let (answered, mut ok) = waiters.wait();
        assert!(poll(&mut polled, &count).is_pending());
        waiters.answer(answered, Ok(()));
        drop(waiters);
        assert_eq!(wakes(&count), 1);
        assert!(matches!(poll(&mut polled, &count), Poll::Ready(Err(StorageError::Closed))));
        assert!(matches!(poll(&mut unpolled, &count), Poll::Ready(Err(StorageError::Closed))));
        // Answered before the writer went: keeps its answer.
        assert!(matches!(poll(&mut ok, &count), Poll::Ready(Ok(()))));
    }
}
