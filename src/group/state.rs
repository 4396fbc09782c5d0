//! One classic group: its members, generation, chosen protocol and committed offsets.
//! Owned by the `Coordinator` of the shard that owns the group's offsets partition.
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Instant;

use bytes::Bytes;
use futures::channel::oneshot;
use kafka_protocol::messages::{JoinGroupResponse, SyncGroupResponse};

use super::coordinator_records::OffsetValue;

/// Kafka's classic group states.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl GroupState {
    /// The name DescribeGroups / ListGroups report (Kafka's spelling).
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }
}

pub struct Member {
    pub id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    /// (protocol name, metadata) in the member's order of preference.
    pub protocols: Vec<(String, Bytes)>,
    pub assignment: Bytes,
    pub last_heartbeat: Instant,
    /// Set while the member's JoinGroup waits for the rebalance to complete.
    pub join_waiter: Option<oneshot::Sender<JoinGroupResponse>>,
    /// Set while the member's SyncGroup waits for the leader's assignment.
    pub sync_waiter: Option<oneshot::Sender<SyncGroupResponse>>,
    /// Joined during the current rebalance (not yet part of a generation).
    pub is_new: bool,
}

impl Member {
    pub fn metadata_for(&self, protocol: &str) -> Bytes {
        self.protocols.iter().find(|(n, _)| n == protocol).map(|(_, m)| m.clone()).unwrap_or_default()
    }

    pub fn matches(&self, protocols: &[(String, Bytes)]) -> bool {
        self.protocols == protocols
    }

    pub fn session_expired(&self, now: Instant) -> bool {
        now.duration_since(self.last_heartbeat).as_millis() > self.session_timeout_ms.max(0) as u128
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommittedOffset {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp_ms: i64,
    /// Explicit expiry (OffsetCommit v2-v4 retention time); None = offsets.retention.minutes.
    pub expire_timestamp_ms: Option<i64>,
    /// Offset of the record in `__consumer_offsets` that wrote it: a commit only replaces
    /// an older record (appends can complete out of order).
    pub record_offset: i64,
}

impl CommittedOffset {
    pub fn new(v: OffsetValue, record_offset: i64) -> CommittedOffset {
        CommittedOffset {
            offset: v.offset,
            leader_epoch: v.leader_epoch,
            metadata: v.metadata,
            commit_timestamp_ms: v.commit_timestamp_ms,
            expire_timestamp_ms: v.expire_timestamp_ms,
            record_offset,
        }
    }
}

pub struct Group {
    pub id: String,
    /// The `__consumer_offsets` partition this group is stored in.
    pub partition: i32,
    pub state: GroupState,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub members: BTreeMap<String, Member>,
    /// group.instance.id → member id of the static member holding it.
    pub static_members: HashMap<String, String>,
    /// Members told MEMBER_ID_REQUIRED, with the deadline for their second JoinGroup.
    pub pending_members: HashMap<String, Instant>,
    /// When PreparingRebalance gives up on members that have not rejoined, or
    /// CompletingRebalance on members that have not sent SyncGroup.
    pub rebalance_deadline: Option<Instant>,
    /// Members of the new generation that have not sent SyncGroup yet.
    pub pending_sync: HashSet<String>,
    /// The first rebalance of an empty group waits until then for more members.
    pub initial_delay_until: Option<Instant>,
    pub offsets: HashMap<String, HashMap<i32, CommittedOffset>>,
    /// KIP-447: offsets committed inside open transactions, by producer id; they replace
    /// `offsets` when the transaction's commit marker reaches this group's partition and
    /// are dropped on abort (`txn_offsets.rs`).
    pub pending_txn_offsets: HashMap<i64, HashMap<(String, i32), CommittedOffset>>,
    pub state_timestamp_ms: i64,
    /// Set by a transition whose new membership must be stored before the reply (a
    /// static member replaced in a Stable group).
    pub store_pending: bool,
    /// Set while the group uses the KIP-848 consumer protocol (one protocol per group).
    pub consumer: Option<Box<super::consumer::ConsumerGroup>>,
    /// Set for a share group (KIP-932): a share group id is never a consumer or classic one.
    pub share: Option<Box<super::share::share_group::ShareGroup>>,
    /// Set for a streams group (KIP-1071): never a consumer, share or classic one.
    pub streams: Option<Box<super::streams::group::StreamsGroup>>,
}

impl Group {
    pub fn new(id: String, partition: i32) -> Group {
        Group {
            id,
            partition,
            state: GroupState::Empty,
            generation: 0,
            protocol_type: None,
            protocol: None,
            leader: None,
            members: BTreeMap::new(),
            static_members: HashMap::new(),
            pending_members: HashMap::new(),
            rebalance_deadline: None,
            pending_sync: HashSet::new(),
            initial_delay_until: None,
            offsets: HashMap::new(),
            pending_txn_offsets: HashMap::new(),
            state_timestamp_ms: crate::runtime::now_ms(),
            store_pending: false,
            consumer: None,
            share: None,
            streams: None,
        }
    }

    pub fn set_state(&mut self, state: GroupState) {
        self.state = state;
        self.state_timestamp_ms = crate::runtime::now_ms();
    }

    pub fn size(&self) -> usize {
        self.members.len() + self.pending_members.len()
    }

    /// Nothing worth keeping: no members, no offsets, never had a generation. A share
    /// group stays until deleted (as in Kafka: its share-partitions' state belongs to it).
    pub fn is_disposable(&self) -> bool {
        self.state == GroupState::Empty
            && self.size() == 0
            && self.offsets.is_empty()
            && self.pending_txn_offsets.is_empty()
            && self.generation == 0
            && self.consumer.as_ref().is_none_or(|c| c.is_empty() && c.group_epoch == 0)
            && self.share.is_none()
            && self.streams.is_none()
    }

    /// Protocols every current member supports.
    fn common_protocols(&self) -> HashSet<&str> {
        let mut it = self.members.values();
        let Some(first) = it.next() else { return HashSet::new() };
        let mut set: HashSet<&str> = first.protocols.iter().map(|(n, _)| n.as_str()).collect();
        for m in it {
            let theirs: HashSet<&str> = m.protocols.iter().map(|(n, _)| n.as_str()).collect();
            set.retain(|p| theirs.contains(p));
        }
        set
    }

    /// Kafka's supportsProtocols: an empty group takes any non-empty type and protocol
    /// list; otherwise the type must match and one protocol must be common to all.
    pub fn supports_protocols(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if protocol_type.is_empty() || protocols.is_empty() {
            return false;
        }
        if self.members.is_empty() {
            return true;
        }
        if self.protocol_type.as_deref() != Some(protocol_type) {
            return false;
        }
        let common = self.common_protocols();
        protocols.iter().any(|(n, _)| common.contains(n.as_str()))
    }

    /// Kafka's selectProtocol: each member votes for its most preferred protocol among
    /// those all members support; the most votes wins (ties: first in preference order
    /// of the first voter, deterministic by member id order).
    pub fn select_protocol(&self) -> Option<String> {
        let common = self.common_protocols();
        let mut votes: Vec<(String, usize)> = Vec::new();
        for m in self.members.values() {
            if let Some((name, _)) = m.protocols.iter().find(|(n, _)| common.contains(n.as_str())) {
                match votes.iter_mut().find(|(n, _)| n == name) {
                    Some(v) => v.1 += 1,
                    None => votes.push((name.clone(), 1)),
                }
            }
        }
        let best = votes.iter().map(|(_, c)| *c).max()?;
        votes.into_iter().find(|(_, c)| *c == best).map(|(n, _)| n)
    }

    pub fn all_members_joined(&self) -> bool {
        self.pending_members.is_empty() && self.members.values().all(|m| m.join_waiter.is_some())
    }

    pub fn max_rebalance_timeout_ms(&self) -> i32 {
        self.members.values().map(|m| m.rebalance_timeout_ms).max().unwrap_or(0)
    }

    /// Topics the members subscribe to, from the consumer protocol metadata; None when
    /// they cannot be known (not a "consumer" group, or unparsable metadata).
    pub fn subscribed_topics(&self) -> Option<HashSet<String>> {
        if self.protocol_type.as_deref() != Some("consumer") {
            return None;
        }
        let protocol = self.protocol.as_deref()?;
        let mut topics = HashSet::new();
        for m in self.members.values() {
            let sub = super::consumer::embedded_protocol::parse_subscription(&m.metadata_for(protocol)).ok()?;
            topics.extend(sub.topics);
        }
        Some(topics)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: &str, protocols: &[&str]) -> Member {
        Member {
            id: id.into(),
            instance_id: None,
            client_id: "c".into(),
            client_host: "h".into(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 30_000,
            protocols: protocols.iter().map(|p| (p.to_string(), Bytes::new())).collect(),
            assignment: Bytes::new(),
            last_heartbeat: Instant::now(),
            join_waiter: None,
            sync_waiter: None,
            is_new: false,
        }
    }

    #[test]
    fn protocol_selection_and_support() {
        let mut g = Group::new("g".into(), 0);
        let p = |v: &[&str]| v.iter().map(|s| (s.to_string(), Bytes::new())).collect::<Vec<_>>();
        assert!(!g.supports_protocols("consumer", &[]));
        assert!(!g.supports_protocols("", &p(&["range"])));
        assert!(g.supports_protocols("consumer", &p(&["range"])));
        g.protocol_type = Some("consumer".into());
        g.members.insert("a".into(), member("a", &["cooperative-sticky", "range"]));
        g.members.insert("b".into(), member("b", &["range", "roundrobin"]));
        g.members.insert("c".into(), member("c", &["roundrobin", "range"]));
        assert!(g.supports_protocols("consumer", &p(&["range"])));
        assert!(!g.supports_protocols("consumer", &p(&["roundrobin"])));
        assert!(!g.supports_protocols("connect", &p(&["range"])));
        assert_eq!(g.select_protocol().as_deref(), Some("range"));
    }
}
