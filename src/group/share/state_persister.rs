//! How a share-partition leader reaches the share coordinator (KIP-932's persister): one
//! state API call for one share-partition key, answered as the coordinator answers it.
//! The server provides it (`server/share_persister.rs`: the coordinator's shard on this
//! broker through the router, another broker through an inter-broker call, retrying
//! while the coordinator moves), so this layer names no network.
use std::future::Future;
use std::pin::Pin;

use super::share_partition::{RecordState, StateBatch};
use super::state_coordinator::{ShareStateOpKind, ShareStateResult};
use super::state_records::{PersistedBatch, SharePartitionKey};
use crate::protocol::ErrorCode;

pub type StatePersister = Box<dyn Fn(SharePartitionKey, ShareStateOpKind) -> Pin<Box<dyn Future<Output = ShareStateResult>>>>;

/// A persisted batch as the leader keeps it; None for a delivery state it does not know
/// (ACQUIRED is never written), which fails the load.
pub fn from_persisted(b: &PersistedBatch) -> Option<StateBatch> {
    let state = match b.delivery_state {
        0 => RecordState::Available,
        2 => RecordState::Acknowledged,
        3 => RecordState::Archiving,
        4 => RecordState::Archived,
        _ => return None,
    };
    Some(StateBatch { first_offset: b.first_offset, last_offset: b.last_offset, state, delivery_count: u16::try_from(b.delivery_count).ok()? })
}

pub fn to_persisted(b: &StateBatch) -> PersistedBatch {
    PersistedBatch {
        first_offset: b.first_offset,
        last_offset: b.last_offset,
        delivery_state: b.state as i8,
        delivery_count: i16::try_from(b.delivery_count).unwrap_or(i16::MAX),
    }
}

/// The error a ShareFetch / ShareAcknowledge partition gets when the coordinator did not
/// take a read or write (Kafka's `fetchPersisterError`): the coordinator's own errors are
/// COORDINATOR_NOT_AVAILABLE, fencing is NOT_LEADER_OR_FOLLOWER (and the share-partition
/// is rebuilt from a fresh read), anything else UNKNOWN_SERVER_ERROR.
pub fn partition_error(code: ErrorCode) -> ErrorCode {
    match code {
        ErrorCode::NOT_COORDINATOR | ErrorCode::COORDINATOR_NOT_AVAILABLE | ErrorCode::COORDINATOR_LOAD_IN_PROGRESS => ErrorCode::COORDINATOR_NOT_AVAILABLE,
        ErrorCode::FENCED_LEADER_EPOCH | ErrorCode::FENCED_STATE_EPOCH => ErrorCode::NOT_LEADER_OR_FOLLOWER,
        ErrorCode::UNKNOWN_TOPIC_OR_PARTITION | ErrorCode::GROUP_ID_NOT_FOUND => code,
        _ => ErrorCode::UNKNOWN_SERVER_ERROR,
    }
}

/// Whether `code` (already through `partition_error`) means the share-partition must be
/// rebuilt from a fresh read before it serves again.
pub fn fences(code: ErrorCode) -> bool {
    matches!(code, ErrorCode::NOT_LEADER_OR_FOLLOWER | ErrorCode::UNKNOWN_TOPIC_OR_PARTITION | ErrorCode::GROUP_ID_NOT_FOUND)
}
