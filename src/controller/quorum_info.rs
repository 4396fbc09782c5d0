//! The metadata quorum as DescribeQuorum (API 55) reports it, read from openraft's metrics
//! on the leader: only the leader knows how far each follower got, so other nodes forward
//! the question to it (as Kafka's brokers forward DescribeQuorum to the active controller).
//!
//! KRaft terms, mapped: the leader epoch is the raft term; offsets count log entries, so
//! the log end offset of a replica is (last index it holds) + 1 and the high watermark is
//! (last committed index) + 1. Observers are openraft learners (broker-only nodes, and
//! controllers that joined and are not voters yet).
use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use openraft::{Instant as _, RaftMetrics};
use serde::{Deserialize, Serialize};

use super::types::ControllerTypes;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuorumInfo {
    pub leader_id: u64,
    pub leader_epoch: u64,
    pub high_watermark: i64,
    pub voters: Vec<ReplicaProgress>,
    pub observers: Vec<ReplicaProgress>,
    /// Controller listener (host:port) of each member as the membership records it;
    /// empty for a single node without a controller listener.
    pub listeners: BTreeMap<u64, String>,
    /// KIP-853 directory id of each member that recorded one (`directory_id.rs`).
    #[serde(default)]
    pub directory_ids: BTreeMap<u64, [u8; 16]>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaProgress {
    pub id: u64,
    /// Offset after the last entry the leader knows this replica holds; -1 = unknown.
    pub log_end_offset: i64,
    /// Wall-clock ms of the replica's last answer to the leader (the leader itself: now);
    /// -1 = none yet.
    pub last_fetch_timestamp_ms: i64,
    /// Wall-clock ms when the replica was last known to hold everything committed: its
    /// last answer if it then held the whole committed log, else -1.
    pub last_caught_up_timestamp_ms: i64,
}

fn offset_after(index: Option<u64>) -> i64 {
    index.map_or(0, |i| i64::try_from(i).unwrap_or(i64::MAX - 1) + 1)
}

/// The quorum as this node sees it, or None if it does not lead (then it knows no
/// follower's progress).
pub fn describe(m: &RaftMetrics<ControllerTypes>) -> Option<QuorumInfo> {
    if m.current_leader != Some(m.id) {
        return None;
    }
    let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let high_watermark = offset_after(m.local_committed.as_ref().map(|l| l.index));
    let membership = m.membership_config.membership();
    let progress = |id: u64| -> ReplicaProgress {
        if id == m.id {
            return ReplicaProgress {
                id,
                log_end_offset: offset_after(m.last_log_index),
                last_fetch_timestamp_ms: now_ms,
                last_caught_up_timestamp_ms: now_ms,
            };
        }
        let matched = m.replication.as_ref().and_then(|r| r.get(&id).cloned().flatten());
        let acked_ms = m
            .heartbeat
            .as_ref()
            .and_then(|h| h.get(&id).cloned().flatten())
            .map_or(-1, |at| now_ms - i64::try_from(at.elapsed().as_millis()).unwrap_or(now_ms));
        let log_end_offset = match &matched {
            Some(l) => offset_after(Some(l.index)),
            None => -1,
        };
        ReplicaProgress {
            id,
            log_end_offset,
            last_fetch_timestamp_ms: acked_ms,
            last_caught_up_timestamp_ms: if log_end_offset >= high_watermark { acked_ms } else { -1 },
        }
    };
    let voters = membership.voter_ids().map(progress).collect();
    let observers = membership.learner_ids().map(progress).collect();
    let listeners = membership.nodes().filter(|(_, n)| !n.addr.is_empty()).map(|(id, n)| (*id, n.addr.clone())).collect();
    let directory_ids = membership.nodes().filter(|(_, n)| n.directory_id != [0; 16]).map(|(id, n)| (*id, n.directory_id)).collect();
    Some(QuorumInfo { directory_ids, leader_id: m.id, leader_epoch: m.current_term, high_watermark, voters, observers, listeners })
}

/// The quorum as this node sees it (any node, leader or not): for metrics.
#[derive(Clone, Debug, Default)]
pub struct LocalQuorumStatus {
    pub leader: Option<u64>,
    pub is_leader: bool,
    pub term: u64,
    /// Offset after the last committed entry this node knows of.
    pub high_watermark: i64,
    /// Offset after the last entry this node applied.
    pub last_applied_offset: i64,
    /// On the leader: each voter's entries behind the leader's log end.
    pub voter_lag: Vec<(u64, i64)>,
    /// Offset of the first entry this node's log still holds (entries before it were
    /// purged after a snapshot); 0 when nothing was purged.
    pub log_start_offset: i64,
    /// Offset after the last entry this node's latest snapshot covers; 0 when none.
    pub snapshot_offset: i64,
    /// Snapshots this process installed from the leader (it was too far behind for log
    /// entries); filled by `Publisher::quorum_status`.
    pub snapshots_installed: u64,
}

pub fn local_status(m: &RaftMetrics<ControllerTypes>) -> LocalQuorumStatus {
    let voter_lag = describe(m)
        .map(|q| {
            let end = q.voters.iter().find(|v| v.id == m.id).map_or(0, |v| v.log_end_offset);
            q.voters.iter().map(|v| (v.id, if v.log_end_offset < 0 { end } else { (end - v.log_end_offset).max(0) })).collect()
        })
        .unwrap_or_default();
    LocalQuorumStatus {
        leader: m.current_leader,
        is_leader: m.current_leader == Some(m.id),
        term: m.current_term,
        high_watermark: offset_after(m.local_committed.as_ref().map(|l| l.index)),
        last_applied_offset: offset_after(m.last_applied.as_ref().map(|l| l.index)),
        voter_lag,
        log_start_offset: offset_after(m.purged.as_ref().map(|l| l.index)),
        snapshot_offset: offset_after(m.snapshot.as_ref().map(|l| l.index)),
        snapshots_installed: 0,
    }
}
