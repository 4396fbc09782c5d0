//! What a broker's replica is for a partition in a metadata image, and bringing an open
//! replica in line with it (Kafka's makeLeader / makeFollower as the metadata publisher
//! calls them). The shard's partition lifecycle (`server/shard/partition_lifecycle.rs`)
//! applies it to every open replica on each metadata update; the replication simulation
//! (`replication/real_parts_simulation.rs`) applies it the same way.
//!
//! Invariant 7: a replica that stops leading fails its waiting acks=all appends
//! (`Partition::become_follower`), so a deposed leader never acknowledges a write.
use super::image::{BrokerId, PartitionMeta};
use crate::partition::{Partition, Role};
use crate::runtime::ShardId;

/// What `node`'s shard `shard` is for `meta`: its leader, a follower of its leader
/// (`NO_LEADER` while it has none), or nothing (the replica is on another shard or broker).
pub fn role_on(meta: &PartitionMeta, node: BrokerId, shard: ShardId) -> Option<Role> {
    let here = match meta.replica_on(node) {
        Some(r) => r.shard == shard,
        // Data written before brokers existed: the single node's, on `meta.shard`.
        None => meta.replicas.is_empty() && meta.leader == node && meta.shard == shard,
    };
    match (here, meta.leader == node) {
        (false, _) => None,
        (true, true) => Some(Role::Leader),
        (true, false) => Some(Role::Follower { leader: meta.leader }),
    }
}

/// The brokers of `meta`'s replicas, in order.
pub fn replica_ids(meta: &PartitionMeta) -> Vec<BrokerId> {
    meta.replicas.iter().map(|r| r.broker).collect()
}

/// What `apply_role` did to a replica.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoleChange {
    /// No replica here any more: the caller stops it (closes it, and deletes its files
    /// when the broker holds no replica of the partition).
    Removed,
    /// Same role; maybe a new leader epoch, leader, ISR or replica set.
    Kept,
    NowLeader,
    NowFollower,
}

/// Brings the open replica `p` in line with `meta`, where `role` is `role_on(meta, ..)`:
/// a new role, leader epoch, leader or ISR. Does not close a removed replica.
pub fn apply_role(p: &Partition, meta: &PartitionMeta, role: Option<Role>) -> RoleChange {
    match (p.role(), role) {
        (_, None) => RoleChange::Removed,
        (Role::Leader, Some(Role::Leader)) => {
            if meta.leader_epoch != p.leader_epoch() {
                p.become_leader(meta.leader_epoch, meta.partition_epoch, replica_ids(meta), meta.isr.clone());
            } else if meta.partition_epoch > p.partition_epoch() {
                // The ISR, or the replicas (a reassignment adding some) changed.
                p.update_replicas_and_isr(meta.partition_epoch, replica_ids(meta), meta.isr.clone());
            }
            RoleChange::Kept
        }
        (Role::Leader, Some(Role::Follower { leader })) => {
            p.become_follower(meta.leader_epoch, leader);
            RoleChange::NowFollower
        }
        (Role::Follower { .. }, Some(Role::Leader)) => {
            p.become_leader(meta.leader_epoch, meta.partition_epoch, replica_ids(meta), meta.isr.clone());
            RoleChange::NowLeader
        }
        (Role::Follower { leader: before }, Some(Role::Follower { leader })) => {
            if before != leader || meta.leader_epoch != p.leader_epoch() {
                p.become_follower(meta.leader_epoch, leader);
            }
            RoleChange::Kept
        }
    }
}
