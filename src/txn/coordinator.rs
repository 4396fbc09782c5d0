//! The per-shard transaction coordinator: the transactional ids of the
//! `__transaction_state` partitions this shard leads, loaded by replaying each partition
//! once per leader epoch (the coordinator epoch), the APIs' state changes (each written to
//! the partition with acks=all before it takes effect), the markers of decided
//! transactions, and the timer that aborts timed-out transactions and forgets expired ids.
//!
//! A state change in flight marks its id `pending` (Kafka's pendingState): another request
//! for that id meanwhile gets CONCURRENT_TRANSACTIONS, which clients retry. The map is
//! never borrowed across an await.
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use std::time::Duration;

use glommio::sync::Semaphore;

use super::context::{MarkerRequest, TxnContext};
use super::ops::{TxnOp, TxnReply, TxnResult, TxnView};
use super::records::{build_batch, decode};
use super::state::{TxnError, TxnMetadata, TxnState};
use super::TRANSACTION_STATE_TOPIC;
use crate::partition::Partition;
use crate::partition::Replayed;
use crate::protocol::ErrorCode;
use crate::runtime::now_ms;

/// Bytes read per step while replaying a `__transaction_state` partition.
const LOAD_READ_BYTES: usize = 1 << 20;
/// First and longest pause between rounds of marker writes that failed (a partition
/// without a leader, replicas behind).
const MARKER_RETRY_MIN: Duration = Duration::from_millis(50);
const MARKER_RETRY_MAX: Duration = Duration::from_millis(1000);

pub struct TxnCoordinator {
    txns: RefCell<HashMap<String, Entry>>,
    /// Partitions replayed into `txns`, with the coordinator epoch (the partition's
    /// leader epoch) they were replayed in.
    loaded: RefCell<HashMap<i32, i32>>,
    load_lock: Semaphore,
}

impl Default for TxnCoordinator {
    fn default() -> Self {
        TxnCoordinator { txns: RefCell::default(), loaded: RefCell::default(), load_lock: Semaphore::new(1) }
    }
}

struct Entry {
    meta: TxnMetadata,
    /// A state change of this id is being written.
    pending: bool,
}

fn txn_error(e: TxnError) -> ErrorCode {
    match e {
        TxnError::InvalidProducerIdMapping => ErrorCode::INVALID_PRODUCER_ID_MAPPING,
        TxnError::ProducerFenced => ErrorCode::PRODUCER_FENCED,
        TxnError::ConcurrentTransactions => ErrorCode::CONCURRENT_TRANSACTIONS,
        TxnError::InvalidTxnState => ErrorCode::INVALID_TXN_STATE,
    }
}

impl TxnCoordinator {
    pub async fn execute(&self, ctx: &Rc<TxnContext>, p: &Rc<Partition>, op: TxnOp) -> TxnResult {
        // Invariant 1: transaction state is touched only on the shard owning its partition.
        debug_assert_eq!(crate::runtime::current_shard(), Some(ctx.shard), "txn op off its shard");
        let epoch = self.ensure_loaded(ctx, p).await?;
        match op {
            TxnOp::InitProducerId { txn_id, timeout_ms, producer_id, producer_epoch, fresh_producer_id } => {
                self.init_producer_id(ctx, p, epoch, txn_id, timeout_ms, producer_id, producer_epoch, fresh_producer_id).await
            }
            TxnOp::AddPartitions { txn_id, producer_id, producer_epoch, partitions, verify_only } => {
                self.add_partitions(p, epoch, &txn_id, producer_id, producer_epoch, partitions, verify_only).await
            }
            TxnOp::EndTxn { txn_id, producer_id, producer_epoch, commit, bump_epoch } => {
                self.end_txn(ctx, p, epoch, &txn_id, producer_id, producer_epoch, commit, bump_epoch).await
            }
            TxnOp::Describe { txn_id } => Ok(TxnReply::Described(self.txns.borrow().get(&txn_id).map(|e| view(&e.meta)))),
            TxnOp::List { states, producer_ids, min_duration_ms } => {
                self.ensure_all_loaded(ctx).await?;
                let now = now_ms();
                let txns = self.txns.borrow();
                let listed = txns
                    .values()
                    .map(|e| &e.meta)
                    .filter(|m| states.is_empty() || states.iter().any(|s| s.eq_ignore_ascii_case(m.state.name())))
                    .filter(|m| producer_ids.is_empty() || producer_ids.contains(&m.producer_id))
                    .filter(|m| min_duration_ms < 0 || (m.state == TxnState::Ongoing && now - m.start_ms >= min_duration_ms))
                    .map(view)
                    .collect();
                Ok(TxnReply::Listed(listed))
            }
        }
    }

    async fn ensure_all_loaded(&self, ctx: &Rc<TxnContext>) -> Result<(), ErrorCode> {
        for p in led_partitions(ctx) {
            self.ensure_loaded(ctx, &p).await?;
        }
        Ok(())
    }

    /// Replays partition `p` once per leader epoch; returns the coordinator epoch. Then
    /// completes the transactions a previous coordinator left decided (Prepare*), and
    /// aborts those it was fencing.
    async fn ensure_loaded(&self, ctx: &Rc<TxnContext>, p: &Rc<Partition>) -> Result<i32, ErrorCode> {
        let epoch = p.leader_epoch();
        if self.loaded.borrow().get(&p.index) == Some(&epoch) {
            return Ok(epoch);
        }
        let _permit = self.load_lock.acquire_permit(1).await.map_err(|_| ErrorCode::COORDINATOR_NOT_AVAILABLE)?;
        if self.loaded.borrow().get(&p.index) == Some(&epoch) {
            return Ok(epoch);
        }
        self.loaded.borrow_mut().remove(&p.index);
        self.txns.borrow_mut().retain(|_, e| e.meta.partition != p.index);
        let mut replayed: HashMap<String, Option<TxnMetadata>> = HashMap::new();
        // To the log end, as Kafka loads it: a decision its predecessor wrote with acks=all
        // is in this leader's log even while its high watermark trails it.
        p.replay(LOAD_READ_BYTES, true, |item| {
            if let Replayed::Record { offset, key, value, .. } = item {
                match decode(key, value, p.index) {
                    Ok((id, meta)) => {
                        replayed.insert(id, meta);
                    }
                    Err(e) => tracing::warn!(partition = p.index, offset, error = %e, "skipping unreadable __transaction_state record"),
                }
            }
        })
        .await
        .map_err(|e| {
            tracing::error!(partition = p.index, error = %e, "cannot read __transaction_state while loading");
            ErrorCode::COORDINATOR_LOAD_IN_PROGRESS
        })?;
        let mut to_finish = Vec::new();
        {
            let mut txns = self.txns.borrow_mut();
            for (id, meta) in replayed {
                let Some(meta) = meta else { continue };
                if meta.state.is_prepare() || meta.state == TxnState::Ongoing {
                    to_finish.push(id.clone());
                }
                txns.insert(id, Entry { meta, pending: false });
            }
        }
        self.loaded.borrow_mut().insert(p.index, epoch);
        let ids = self.txns.borrow().values().filter(|e| e.meta.partition == p.index).count();
        if ids > 0 {
            tracing::info!(partition = p.index, coordinator_epoch = epoch, transactional_ids = ids, "loaded transactions from __transaction_state");
        }
        for id in to_finish {
            let state = self.txns.borrow().get(&id).map(|e| e.meta.state);
            match state {
                Some(TxnState::PrepareCommit | TxnState::PrepareAbort) => self.spawn_markers(ctx, p, epoch, id),
                // A fence that did not complete: abort with the next epoch, as it meant to.
                Some(TxnState::PrepareEpochFence) => spawn_abort(ctx, p, epoch, id),
                // Ongoing: its timeout (the tick) aborts it if the producer does not end it.
                _ => {}
            }
        }
        Ok(epoch)
    }

    /// Still the coordinator of `p` in `epoch` (its leadership did not move meanwhile).
    fn current(&self, p: &Partition, epoch: i32) -> bool {
        self.loaded.borrow().get(&p.index) == Some(&epoch) && p.is_leader() && p.leader_epoch() == epoch
    }

    /// Marks `id` pending and returns its state, or the error when it is already pending.
    fn begin(&self, id: &str) -> Result<Option<TxnMetadata>, ErrorCode> {
        let mut txns = self.txns.borrow_mut();
        match txns.get_mut(id) {
            None => Ok(None),
            Some(e) if e.pending => Err(ErrorCode::CONCURRENT_TRANSACTIONS),
            Some(e) => {
                e.pending = true;
                Ok(Some(e.meta.clone()))
            }
        }
    }

    fn release(&self, id: &str) {
        if let Some(e) = self.txns.borrow_mut().get_mut(id) {
            e.pending = false;
        }
    }

    /// Writes `next` (the new state of its id) to `p` with acks=all and, if this shard is
    /// still its coordinator in `epoch`, makes it the id's state. Clears `pending`.
    async fn commit_state(&self, p: &Rc<Partition>, epoch: i32, next: TxnMetadata) -> Result<(), ErrorCode> {
        let id = next.transactional_id.clone();
        let written = write_state(p, &id, Some(&next)).await;
        let mut txns = self.txns.borrow_mut();
        if written.is_ok() && self.current(p, epoch) {
            txns.insert(id, Entry { meta: next, pending: false });
            Ok(())
        } else {
            if let Some(e) = txns.get_mut(&id) {
                e.pending = false;
            }
            Err(written.err().unwrap_or(ErrorCode::NOT_COORDINATOR))
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn init_producer_id(
        &self,
        ctx: &Rc<TxnContext>,
        p: &Rc<Partition>,
        epoch: i32,
        id: String,
        timeout_ms: i32,
        producer_id: i64,
        producer_epoch: i16,
        fresh_producer_id: i64,
    ) -> TxnResult {
        if timeout_ms <= 0 || timeout_ms > ctx.config.transaction_max_timeout_ms {
            return Err(ErrorCode::INVALID_TRANSACTION_TIMEOUT);
        }
        let now = now_ms();
        let current = match self.begin(&id)? {
            Some(m) => m,
            None => {
                let here = self.txns.borrow().values().filter(|e| e.meta.partition == p.index).count();
                if self.txns.borrow().len() >= ctx.config.max_transactional_ids_per_shard {
                    tracing::warn!(
                        partition = p.index,
                        ids = here,
                        limit = ctx.config.max_transactional_ids_per_shard,
                        "too many transactional ids on this shard"
                    );
                    return Err(ErrorCode::COORDINATOR_NOT_AVAILABLE);
                }
                let fresh = TxnMetadata::new(id.clone(), fresh_producer_id, timeout_ms, p.index, now);
                let next = fresh.initialized(timeout_ms, now, || fresh_producer_id);
                // Reserve the id while its first state is written.
                self.txns.borrow_mut().insert(id.clone(), Entry { meta: fresh, pending: true });
                return match self.commit_state(p, epoch, next.clone()).await {
                    Ok(()) => Ok(TxnReply::Producer { producer_id: next.producer_id, producer_epoch: next.producer_epoch }),
                    Err(e) => {
                        // Never written: forget the reservation.
                        let mut txns = self.txns.borrow_mut();
                        if txns.get(&id).is_some_and(|e| e.meta.producer_epoch < 0) {
                            txns.remove(&id);
                        }
                        Err(e)
                    }
                };
            }
        };
        // KIP-360: a producer that names its id and epoch must be the current one (or
        // retrying the bump that made the current one).
        if producer_id >= 0 {
            let same_id = producer_id == current.producer_id;
            let epoch_ok = producer_epoch == current.producer_epoch || producer_epoch == current.last_producer_epoch;
            if !same_id || !epoch_ok {
                self.release(&id);
                return Err(ErrorCode::PRODUCER_FENCED);
            }
            if producer_epoch == current.last_producer_epoch && current.state == TxnState::Empty {
                // The retry of the bump that made the current epoch: answer it again.
                self.release(&id);
                return Ok(TxnReply::Producer { producer_id: current.producer_id, producer_epoch: current.producer_epoch });
            }
        }
        match current.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort | TxnState::PrepareEpochFence => {
                self.release(&id);
                Err(ErrorCode::CONCURRENT_TRANSACTIONS)
            }
            TxnState::Ongoing => {
                // A new producer instance with the same id: fence the old one by aborting
                // its transaction with the next epoch; this caller retries meanwhile.
                self.release(&id);
                spawn_abort(ctx, p, epoch, id.to_string());
                Err(ErrorCode::CONCURRENT_TRANSACTIONS)
            }
            TxnState::Dead => {
                self.release(&id);
                Err(ErrorCode::CONCURRENT_TRANSACTIONS)
            }
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                let next = current.initialized(timeout_ms, now, || fresh_producer_id);
                self.commit_state(p, epoch, next.clone()).await?;
                Ok(TxnReply::Producer { producer_id: next.producer_id, producer_epoch: next.producer_epoch })
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn add_partitions(
        &self,
        p: &Rc<Partition>,
        epoch: i32,
        id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: Vec<(String, i32)>,
        verify_only: bool,
    ) -> TxnResult {
        if verify_only {
            // KIP-890 part 1: a partition leader asks whether these are in the open
            // transaction of this producer epoch before it appends transactional data.
            let txns = self.txns.borrow();
            let Some(e) = txns.get(id) else { return Err(ErrorCode::INVALID_PRODUCER_ID_MAPPING) };
            e.meta.check_producer(producer_id, producer_epoch).map_err(txn_error)?;
            let codes = partitions
                .iter()
                .map(|tp| if e.meta.state == TxnState::Ongoing && e.meta.partitions.contains(tp) { ErrorCode::NONE } else { ErrorCode::INVALID_TXN_STATE })
                .collect();
            return Ok(TxnReply::Partitions(codes));
        }
        let Some(current) = self.begin(id)? else { return Err(ErrorCode::INVALID_PRODUCER_ID_MAPPING) };
        let checked = current.check_producer(producer_id, producer_epoch).and_then(|()| {
            // Nothing new: answer without a write (Kafka does the same).
            if current.state == TxnState::Ongoing && partitions.iter().all(|tp| current.partitions.contains(tp)) {
                return Ok(None);
            }
            current.with_partitions(partitions.iter().cloned(), now_ms()).map(Some)
        });
        match checked {
            Err(e) => {
                self.release(id);
                Err(txn_error(e))
            }
            Ok(None) => {
                self.release(id);
                Ok(TxnReply::Partitions(vec![ErrorCode::NONE; partitions.len()]))
            }
            Ok(Some(next)) => {
                self.commit_state(p, epoch, next).await?;
                Ok(TxnReply::Partitions(vec![ErrorCode::NONE; partitions.len()]))
            }
        }
    }

    /// EndTxn. Transactions v1: answered `Done`. v2 (`bump_epoch`): the decided state
    /// carries the next epoch, which the answer gives the producer (`Producer`); a retry
    /// with the epoch before that bump gets the same answer.
    #[allow(clippy::too_many_arguments)]
    async fn end_txn(
        &self,
        ctx: &Rc<TxnContext>,
        p: &Rc<Partition>,
        epoch: i32,
        id: &str,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        bump_epoch: bool,
    ) -> TxnResult {
        let Some(current) = self.begin(id)? else { return Err(ErrorCode::INVALID_PRODUCER_ID_MAPPING) };
        let answer =
            |m: &TxnMetadata| if bump_epoch { TxnReply::Producer { producer_id: m.producer_id, producer_epoch: m.producer_epoch } } else { TxnReply::Done };
        let decided = |s: TxnState| matches!(s, TxnState::PrepareCommit | TxnState::CompleteCommit) == commit;
        // v2: a retry of an end whose answer was lost names the epoch before its bump.
        let retry_of_bumped = bump_epoch
            && producer_id == current.producer_id
            && current.last_producer_epoch >= 0
            && producer_epoch == current.last_producer_epoch
            && current.producer_epoch == producer_epoch.wrapping_add(1)
            && matches!(current.state, TxnState::PrepareCommit | TxnState::PrepareAbort | TxnState::CompleteCommit | TxnState::CompleteAbort);
        if retry_of_bumped {
            self.release(id);
            return if decided(current.state) { Ok(answer(&current)) } else { Err(ErrorCode::INVALID_TXN_STATE) };
        }
        if let Err(e) = current.check_producer(producer_id, producer_epoch) {
            self.release(id);
            return Err(txn_error(e));
        }
        match current.state {
            // v2 may abort a transaction nothing was added to (the client does not know
            // whether its writes reached a partition): the epoch is bumped all the same.
            TxnState::Ongoing | TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
                if current.state == TxnState::Ongoing || (bump_epoch && !commit) =>
            {
                let next = current.prepared(commit, bump_epoch, now_ms()).map_err(|e| {
                    self.release(id);
                    txn_error(e)
                })?;
                self.commit_state(p, epoch, next.clone()).await?;
                // Decided and durable: the client is answered; markers go out meanwhile
                // (its next transaction waits for them with CONCURRENT_TRANSACTIONS).
                self.spawn_markers(ctx, p, epoch, id.to_string());
                Ok(answer(&next))
            }
            // A v1 retry of an end already done (its response was lost): the same answer.
            TxnState::CompleteCommit | TxnState::CompleteAbort if !bump_epoch && decided(current.state) => {
                self.release(id);
                Ok(answer(&current))
            }
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                self.release(id);
                Err(if decided(current.state) { ErrorCode::CONCURRENT_TRANSACTIONS } else { ErrorCode::INVALID_TXN_STATE })
            }
            _ => {
                self.release(id);
                Err(ErrorCode::INVALID_TXN_STATE)
            }
        }
    }

    /// Aborts the open transaction of `id` (a timeout, or a new producer fencing the old
    /// one): PrepareAbort with the epoch bumped when `bump_epoch`, then its markers.
    async fn abort_open(&self, ctx: &Rc<TxnContext>, p: &Rc<Partition>, epoch: i32, id: &str, bump_epoch: bool) -> Result<(), ErrorCode> {
        let Some(current) = self.begin(id)? else { return Ok(()) };
        if !matches!(current.state, TxnState::Ongoing | TxnState::PrepareEpochFence) {
            self.release(id);
            return Ok(());
        }
        let from = if current.state == TxnState::PrepareEpochFence { TxnMetadata { state: TxnState::Ongoing, ..current } } else { current };
        let next = from.prepared(false, bump_epoch, now_ms()).map_err(|e| {
            self.release(id);
            txn_error(e)
        })?;
        tracing::info!(
            transactional_id = id,
            producer_id = next.producer_id,
            producer_epoch = next.producer_epoch,
            "aborting an open transaction (timed out or fenced)"
        );
        self.commit_state(p, epoch, next).await?;
        self.spawn_markers(ctx, p, epoch, id.to_string());
        Ok(())
    }

    /// Writes the markers of `id`'s decided transaction on every partition, then its
    /// completion, in the background; stops if this shard stops coordinating `p`.
    fn spawn_markers(&self, ctx: &Rc<TxnContext>, p: &Rc<Partition>, epoch: i32, id: String) {
        let ctx = ctx.clone();
        let p = p.clone();
        glommio::spawn_local(async move {
            if let Err(e) = ctx.coordinator.write_markers(&ctx, &p, epoch, &id).await {
                tracing::warn!(transactional_id = %id, partition = p.index, error = %e, "transaction markers not completed here (a new coordinator finishes them)");
            }
        })
        .detach();
    }

    async fn write_markers(&self, ctx: &Rc<TxnContext>, p: &Rc<Partition>, epoch: i32, id: &str) -> Result<(), ErrorCode> {
        let Some(decided) = self.txns.borrow().get(id).map(|e| e.meta.clone()) else { return Ok(()) };
        let commit = match decided.state {
            TxnState::PrepareCommit => true,
            TxnState::PrepareAbort => false,
            _ => return Ok(()),
        };
        let mut remaining: Vec<(String, i32)> = decided.partitions.iter().cloned().collect();
        let mut pause = MARKER_RETRY_MIN;
        while !remaining.is_empty() {
            if !self.current(p, epoch) {
                return Err(ErrorCode::NOT_COORDINATOR);
            }
            let req = MarkerRequest {
                producer_id: decided.producer_id,
                producer_epoch: decided.producer_epoch,
                commit,
                coordinator_epoch: epoch,
                partitions: remaining.clone(),
                transaction_version: 0,
            };
            let codes = (ctx.markers)(req).await;
            let image = ctx.partitions.image();
            let mut failed = Vec::new();
            for (tp, code) in remaining.into_iter().zip(codes.into_iter().chain(std::iter::repeat(ErrorCode::UNKNOWN_SERVER_ERROR))) {
                match code {
                    ErrorCode::NONE => {}
                    // The topic is gone: nothing to mark (Kafka drops such markers).
                    ErrorCode::UNKNOWN_TOPIC_OR_PARTITION if image.topic(&tp.0).and_then(|t| t.partition(tp.1)).is_none() => {}
                    // A newer epoch or coordinator wrote there: this marker is moot.
                    ErrorCode::INVALID_PRODUCER_EPOCH | ErrorCode::PRODUCER_FENCED | ErrorCode::TRANSACTION_COORDINATOR_FENCED => {
                        tracing::warn!(transactional_id = id, topic = %tp.0, partition = tp.1, code = %code, "marker refused by the partition; not retried");
                    }
                    _ => failed.push(tp),
                }
            }
            remaining = failed;
            if !remaining.is_empty() {
                glommio::timer::sleep(pause).await;
                pause = (pause * 2).min(MARKER_RETRY_MAX);
            }
        }
        // Every partition has its marker: complete.
        let Some(current) = self.begin(id)? else { return Ok(()) };
        match current.completed(now_ms()) {
            Some(next) if current.producer_epoch == decided.producer_epoch => self.commit_state(p, epoch, next).await,
            _ => {
                self.release(id);
                Ok(())
            }
        }
    }

    /// Aborts timed-out transactions (with the epoch bumped, so the producer is fenced)
    /// and forgets ids idle past transactional.id.expiration.ms.
    fn tick(&self, ctx: &Rc<TxnContext>) {
        let led: HashSet<i32> = led_partitions(ctx).iter().map(|p| p.index).collect();
        self.loaded.borrow_mut().retain(|partition, _| led.contains(partition));
        self.txns.borrow_mut().retain(|_, e| led.contains(&e.meta.partition));
        let now = now_ms();
        let mut timed_out = Vec::new();
        let mut expired = Vec::new();
        for e in self.txns.borrow().values().filter(|e| !e.pending) {
            if e.meta.timed_out(now) {
                timed_out.push((e.meta.partition, e.meta.transactional_id.clone()));
            } else if matches!(e.meta.state, TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort)
                && e.meta.update_ms.saturating_add(ctx.config.transactional_id_expiration_ms) < now
            {
                expired.push((e.meta.partition, e.meta.transactional_id.clone()));
            }
        }
        for (partition, id) in timed_out {
            let Some(p) = ctx.partitions.get(TRANSACTION_STATE_TOPIC, partition) else { continue };
            let Some(&epoch) = self.loaded.borrow().get(&partition) else { continue };
            spawn_abort(ctx, &p, epoch, id);
        }
        for (partition, id) in expired {
            let Some(p) = ctx.partitions.get(TRANSACTION_STATE_TOPIC, partition) else { continue };
            let Some(&epoch) = self.loaded.borrow().get(&partition) else { continue };
            let ctx = ctx.clone();
            glommio::spawn_local(async move { ctx.coordinator.expire(&p, epoch, &id).await }).detach();
        }
    }

    /// Writes the tombstone of an expired id, then forgets it.
    async fn expire(&self, p: &Rc<Partition>, epoch: i32, id: &str) {
        let Ok(Some(_)) = self.begin(id) else { return };
        let written = write_state(p, id, None).await;
        let mut txns = self.txns.borrow_mut();
        if written.is_ok() && self.current(p, epoch) {
            tracing::info!(transactional_id = id, "transactional id expired");
            txns.remove(id);
        } else if let Some(e) = txns.get_mut(id) {
            e.pending = false;
        }
    }

    /// Loads the `__transaction_state` partitions this shard leads that are not loaded
    /// (in their current epoch): a new coordinator finishes decided transactions at once,
    /// not at the first request.
    async fn load_led(&self, ctx: &Rc<TxnContext>) {
        for p in led_partitions(ctx) {
            if self.loaded.borrow().get(&p.index) != Some(&p.leader_epoch()) {
                if let Err(e) = self.ensure_loaded(ctx, &p).await {
                    tracing::debug!(partition = p.index, code = %e, "__transaction_state partition not loaded yet");
                }
            }
        }
    }
}

/// The `__transaction_state` partitions this shard leads (found through the metadata
/// image, not by walking every partition of the shard: this runs every 200 ms).
fn led_partitions(ctx: &TxnContext) -> Vec<Rc<Partition>> {
    let image = ctx.partitions.image();
    let Some(t) = image.topic(TRANSACTION_STATE_TOPIC) else { return Vec::new() };
    t.partitions
        .iter()
        .filter(|m| m.shard == ctx.shard)
        .filter_map(|m| ctx.partitions.get(TRANSACTION_STATE_TOPIC, m.partition))
        .filter(|p| p.is_leader())
        .collect()
}

fn view(m: &TxnMetadata) -> TxnView {
    TxnView {
        transactional_id: m.transactional_id.clone(),
        producer_id: m.producer_id,
        producer_epoch: m.producer_epoch,
        state: m.state.name(),
        timeout_ms: m.timeout_ms,
        start_ms: m.start_ms,
        partitions: m.partitions.iter().cloned().collect(),
    }
}

/// Appends the state of `id` (None: its tombstone) to `p` with acks=all. Errors as
/// Kafka's coordinator maps log append errors for the client.
async fn write_state(p: &Rc<Partition>, id: &str, meta: Option<&TxnMetadata>) -> Result<(), ErrorCode> {
    let Some(batch) = build_batch(id, meta, now_ms()) else { return Err(ErrorCode::UNKNOWN_SERVER_ERROR) };
    match p.append(batch, -1).await {
        Ok(_) => Ok(()),
        Err(e) => {
            tracing::warn!(partition = p.index, error = %e, "append to __transaction_state failed");
            Err(ErrorCode::from(&e).from_coordinator_append())
        }
    }
}

/// Drives the coordinator's background work on this shard: loading newly led partitions
/// (and finishing their decided transactions) promptly, timeouts, expiry.
pub async fn tick_loop(ctx: Rc<TxnContext>) {
    let load_every = Duration::from_millis(200);
    let mut since_cleanup = Duration::ZERO;
    let cleanup = Duration::from_millis(ctx.config.cleanup_interval_ms.max(100));
    loop {
        glommio::timer::sleep(load_every).await;
        ctx.coordinator.load_led(&ctx).await;
        since_cleanup += load_every;
        if since_cleanup >= cleanup {
            since_cleanup = Duration::ZERO;
            ctx.coordinator.tick(&ctx);
        }
    }
}

/// Aborts `id`'s open transaction with the next epoch in the background (a timeout or a
/// fence). A failure is logged, not dropped: the transaction stays open and the next
/// timeout tick, or the new coordinator after a move, tries again.
fn spawn_abort(ctx: &Rc<TxnContext>, p: &Rc<Partition>, epoch: i32, id: String) {
    let ctx = ctx.clone();
    let p = p.clone();
    glommio::spawn_local(async move {
        if let Err(e) = ctx.coordinator.abort_open(&ctx, &p, epoch, &id, true).await {
            tracing::warn!(transactional_id = %id, partition = p.index, error = ?e, "could not abort an open transaction (retried at the next timeout check)");
        }
    })
    .detach();
}
