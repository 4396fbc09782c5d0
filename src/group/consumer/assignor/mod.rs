//! Server-side assignors (KIP-848): the coordinator computes each member's target
//! assignment. `uniform` is the default (Kafka's group.consumer.assignors order); a
//! member may ask for another with `serverAssignor`.
//!
//! `uniform` is sticky (a member keeps the partitions of its current target while that
//! stays balanced, so a rebalance moves as few partitions as it can); `range` gives
//! contiguous ranges in member order, as Kafka's.
//!
//! Pure functions of members and partitions: never imports anything with I/O or shard
//! state (`partition::`, `storage::`, `cluster::router`, `server::`).
use std::collections::{BTreeMap, HashMap};

use uuid::Uuid;

use super::group::Assignment;

pub mod range;
pub mod uniform;

/// The assignors served, default first.
pub const ASSIGNORS: &[&str] = &["uniform", "range"];
pub const DEFAULT_ASSIGNOR: &str = "uniform";

pub fn is_supported(name: &str) -> bool {
    ASSIGNORS.contains(&name)
}

/// The static name for `name` (the default for one not served).
pub fn canonical(name: &str) -> &'static str {
    ASSIGNORS.iter().copied().find(|a| *a == name).unwrap_or(DEFAULT_ASSIGNOR)
}

/// One member as an assignor sees it.
pub struct MemberSpec<'a> {
    pub id: &'a str,
    /// group.instance.id of a static member (orders members for `range`).
    pub instance_id: Option<&'a str>,
    /// Subscribed topics that exist (ids).
    pub topics: Vec<Uuid>,
    /// The member's previous target (for stickiness).
    pub current: Option<&'a Assignment>,
}

/// Computes the target assignment of every member; `topics` gives each subscribed
/// topic's partition count. Every member gets an entry (possibly empty).
pub fn assign(name: &str, members: &[MemberSpec], topics: &BTreeMap<Uuid, i32>) -> HashMap<String, Assignment> {
    match canonical(name) {
        "range" => range::assign(members, topics),
        _ => uniform::assign(members, topics),
    }
}
