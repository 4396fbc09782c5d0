//! One transactional id's state, as Kafka's TransactionMetadata: its producer id and
//! epoch, timeout, state, the partitions of its open transaction, and the state machine
//! between them (`TxnState::can_become`). Pure: no I/O, no clock (times are passed in).
use std::collections::BTreeSet;

/// Kafka's TransactionState, with its wire/log ids (TransactionState.id) and names
/// (DescribeTransactions / ListTransactions).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TxnState {
    Empty,
    Ongoing,
    PrepareCommit,
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
    Dead,
    PrepareEpochFence,
}

impl TxnState {
    pub fn id(self) -> i8 {
        match self {
            TxnState::Empty => 0,
            TxnState::Ongoing => 1,
            TxnState::PrepareCommit => 2,
            TxnState::PrepareAbort => 3,
            TxnState::CompleteCommit => 4,
            TxnState::CompleteAbort => 5,
            TxnState::Dead => 6,
            TxnState::PrepareEpochFence => 7,
        }
    }

    pub fn from_id(id: i8) -> Option<TxnState> {
        Some(match id {
            0 => TxnState::Empty,
            1 => TxnState::Ongoing,
            2 => TxnState::PrepareCommit,
            3 => TxnState::PrepareAbort,
            4 => TxnState::CompleteCommit,
            5 => TxnState::CompleteAbort,
            6 => TxnState::Dead,
            7 => TxnState::PrepareEpochFence,
            _ => return None,
        })
    }

    /// Kafka's name of the state (`TransactionState.stateName`).
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::Dead => "Dead",
            TxnState::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    pub fn from_name(name: &str) -> Option<TxnState> {
        (0..=7).filter_map(TxnState::from_id).find(|s| s.name().eq_ignore_ascii_case(name))
    }

    /// Markers are being written (the outcome is decided, not yet on every partition).
    pub fn is_prepare(self) -> bool {
        matches!(self, TxnState::PrepareCommit | TxnState::PrepareAbort | TxnState::PrepareEpochFence)
    }

    /// Kafka's valid previous states: a transition to `next` is allowed from `self`.
    pub fn can_become(self, next: TxnState) -> bool {
        use TxnState::*;
        match next {
            Empty => matches!(self, Empty | CompleteCommit | CompleteAbort),
            Ongoing => matches!(self, Ongoing | Empty | CompleteCommit | CompleteAbort),
            PrepareCommit => self == Ongoing,
            PrepareAbort => matches!(self, Ongoing | PrepareEpochFence | Empty | CompleteCommit | CompleteAbort),
            CompleteCommit => self == PrepareCommit,
            CompleteAbort => self == PrepareAbort,
            Dead => matches!(self, Empty | CompleteAbort | CompleteCommit),
            PrepareEpochFence => self == Ongoing,
        }
    }
}

/// The state of one transactional id (Kafka's TransactionMetadata).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnMetadata {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// The epoch before the last bump (KIP-360: a producer retrying InitProducerId with
    /// it after a lost response is answered, not fenced); -1 when unknown.
    pub last_producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    /// The partitions of the open transaction (or of the one whose markers are written).
    pub partitions: BTreeSet<(String, i32)>,
    /// When the open transaction started (-1: none).
    pub start_ms: i64,
    pub update_ms: i64,
    /// The `__transaction_state` partition it lives on.
    pub partition: i32,
}

/// Why a request cannot change a transaction (each is one Kafka error).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TxnError {
    #[error("the producer id does not match the transactional id's")]
    InvalidProducerIdMapping,
    #[error("a newer producer epoch owns this transactional id")]
    ProducerFenced,
    #[error("another state change of this transaction is in progress")]
    ConcurrentTransactions,
    #[error("the transaction is not in a state that allows this")]
    InvalidTxnState,
}

impl TxnMetadata {
    pub fn new(transactional_id: String, producer_id: i64, timeout_ms: i32, partition: i32, now_ms: i64) -> TxnMetadata {
        TxnMetadata {
            transactional_id,
            producer_id,
            producer_epoch: -1,
            last_producer_epoch: -1,
            timeout_ms,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            start_ms: -1,
            update_ms: now_ms,
            partition,
        }
    }

    /// A request from `producer_id` at `producer_epoch` may act on this transaction.
    pub fn check_producer(&self, producer_id: i64, producer_epoch: i16) -> Result<(), TxnError> {
        if producer_id != self.producer_id {
            return Err(TxnError::InvalidProducerIdMapping);
        }
        if producer_epoch != self.producer_epoch {
            return Err(TxnError::ProducerFenced);
        }
        Ok(())
    }

    /// The state after InitProducerId on a transaction with no open transaction: the
    /// epoch bumped (a new producer id when the epoch is exhausted, from `fresh_id`).
    pub fn initialized(&self, timeout_ms: i32, now_ms: i64, fresh_id: impl FnOnce() -> i64) -> TxnMetadata {
        let mut next = self.clone();
        if self.producer_epoch >= i16::MAX - 1 {
            next.producer_id = fresh_id();
            next.producer_epoch = 0;
            next.last_producer_epoch = -1;
        } else {
            next.last_producer_epoch = self.producer_epoch;
            next.producer_epoch = self.producer_epoch + 1;
        }
        next.timeout_ms = timeout_ms;
        next.state = TxnState::Empty;
        next.partitions.clear();
        next.start_ms = -1;
        next.update_ms = now_ms;
        next
    }

    /// The state after adding `partitions` to the transaction (AddPartitionsToTxn,
    /// AddOffsetsToTxn): Ongoing, started now if it was not open.
    pub fn with_partitions(&self, partitions: impl IntoIterator<Item = (String, i32)>, now_ms: i64) -> Result<TxnMetadata, TxnError> {
        if self.state.is_prepare() {
            return Err(TxnError::ConcurrentTransactions);
        }
        if !self.state.can_become(TxnState::Ongoing) {
            return Err(TxnError::InvalidTxnState);
        }
        let mut next = self.clone();
        if self.state != TxnState::Ongoing {
            next.partitions.clear();
            next.start_ms = now_ms;
        }
        next.partitions.extend(partitions);
        next.state = TxnState::Ongoing;
        next.update_ms = now_ms;
        Ok(next)
    }

    /// The state after the outcome of the open transaction is decided: PrepareCommit or
    /// PrepareAbort. `bump_epoch` fences the producer (a timeout or a fencing
    /// InitProducerId aborts with the next epoch, so the old producer's writes and
    /// markers are refused).
    pub fn prepared(&self, commit: bool, bump_epoch: bool, now_ms: i64) -> Result<TxnMetadata, TxnError> {
        let target = if commit { TxnState::PrepareCommit } else { TxnState::PrepareAbort };
        if !self.state.can_become(target) {
            return Err(TxnError::InvalidTxnState);
        }
        let mut next = self.clone();
        if bump_epoch && self.producer_epoch < i16::MAX - 1 {
            next.last_producer_epoch = self.producer_epoch;
            next.producer_epoch = self.producer_epoch + 1;
        }
        next.state = target;
        next.update_ms = now_ms;
        Ok(next)
    }

    /// The state once every partition has its marker: CompleteCommit / CompleteAbort,
    /// no partitions.
    pub fn completed(&self, now_ms: i64) -> Option<TxnMetadata> {
        let target = match self.state {
            TxnState::PrepareCommit => TxnState::CompleteCommit,
            TxnState::PrepareAbort => TxnState::CompleteAbort,
            _ => return None,
        };
        let mut next = self.clone();
        next.state = target;
        next.partitions.clear();
        next.start_ms = -1;
        next.update_ms = now_ms;
        Some(next)
    }

    /// Timed out: open longer than its timeout at `now_ms`.
    pub fn timed_out(&self, now_ms: i64) -> bool {
        self.state == TxnState::Ongoing && self.start_ms >= 0 && self.start_ms.saturating_add(i64::from(self.timeout_ms)) < now_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ongoing() -> TxnMetadata {
        let m = TxnMetadata::new("t".into(), 7, 60_000, 3, 0).initialized(60_000, 1, || unreachable!());
        m.with_partitions([("a".to_string(), 0)], 10).unwrap()
    }

    #[test]
    fn a_transaction_goes_round_its_states() {
        let m = TxnMetadata::new("t".into(), 7, 60_000, 3, 0);
        let m = m.initialized(60_000, 1, || unreachable!());
        assert_eq!((m.producer_epoch, m.state), (0, TxnState::Empty));
        let m = m.with_partitions([("a".to_string(), 0), ("b".to_string(), 1)], 10).unwrap();
        assert_eq!((m.state, m.start_ms, m.partitions.len()), (TxnState::Ongoing, 10, 2));
        let m = m.with_partitions([("a".to_string(), 0)], 20).unwrap();
        assert_eq!((m.start_ms, m.partitions.len()), (10, 2), "adding again keeps the start");
        assert_eq!(m.prepared(true, false, 30).unwrap().state, TxnState::PrepareCommit);
        let p = m.prepared(true, false, 30).unwrap();
        assert_eq!(p.with_partitions([("c".to_string(), 0)], 31), Err(TxnError::ConcurrentTransactions));
        let c = p.completed(40).unwrap();
        assert_eq!((c.state, c.partitions.len(), c.producer_epoch), (TxnState::CompleteCommit, 0, 0));
        // The next transaction starts from a completed one.
        let n = c.with_partitions([("z".to_string(), 0)], 50).unwrap();
        assert_eq!((n.state, n.start_ms, n.partitions.len()), (TxnState::Ongoing, 50, 1));
        assert_eq!(c.prepared(true, false, 60), Err(TxnError::InvalidTxnState));
    }

    #[test]
    fn fencing_bumps_the_epoch_and_checks_producers() {
        let m = ongoing();
        let fenced = m.prepared(false, true, 100).unwrap();
        assert_eq!((fenced.producer_epoch, fenced.last_producer_epoch, fenced.state), (1, 0, TxnState::PrepareAbort));
        assert_eq!(fenced.check_producer(7, 0), Err(TxnError::ProducerFenced));
        assert_eq!(fenced.check_producer(8, 1), Err(TxnError::InvalidProducerIdMapping));
        assert_eq!(fenced.check_producer(7, 1), Ok(()));
        // An exhausted epoch takes a new producer id.
        let old = TxnMetadata { producer_epoch: i16::MAX - 1, ..m.completed(0).unwrap_or(m.clone()) };
        let n = TxnMetadata { state: TxnState::CompleteAbort, ..old }.initialized(1000, 200, || 99);
        assert_eq!((n.producer_id, n.producer_epoch), (99, 0));
    }

    #[test]
    fn timeouts_and_state_names() {
        let m = ongoing();
        assert!(!m.timed_out(10 + 60_000));
        assert!(m.timed_out(10 + 60_001));
        for id in 0..=7 {
            let s = TxnState::from_id(id).unwrap();
            assert_eq!(s.id(), id);
            assert_eq!(TxnState::from_name(s.name()), Some(s));
        }
        assert_eq!(TxnState::from_id(8), None);
        assert!(TxnState::Ongoing.can_become(TxnState::PrepareEpochFence));
        assert!(!TxnState::Empty.can_become(TxnState::PrepareCommit));
    }
}
