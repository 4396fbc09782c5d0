//! Expiry of committed offsets (offsets.retention.minutes), as Kafka 4.1's classic groups
//! decide it (`offsetExpirationCondition` + `isOffsetExpired`):
//!
//! - a group with a protocol type and no members: an offset expires `retention` after the
//!   group became Empty (its state timestamp);
//! - a Stable "consumer" group: offsets of topics it no longer subscribes to expire
//!   `retention` after their commit;
//! - a group without a protocol type (offsets committed by standalone consumers or admin
//!   tools): `retention` after the commit;
//! - an offset committed with an explicit retention time (OffsetCommit v2-v4) expires at
//!   its own expire timestamp, whatever the group does, within the cases above;
//! - every other group keeps its offsets.
//!
//! An expired offset is removed by a tombstone; an Empty group left without offsets is
//! deleted (group tombstone), as Kafka does.
use std::collections::HashSet;
use std::rc::Rc;
use std::time::Duration;

use super::context::CoordinatorContext;
use super::coordinator::{append, Coordinator};
use super::coordinator_records::OffsetsRecord;
use super::state::{Group, GroupState};
use super::OFFSETS_TOPIC;
use crate::runtime::now_ms;

/// The offsets of `g` that have expired at `now_ms`: (topic, partition, record offset of
/// the commit, so a newer commit racing the tombstone is kept).
pub fn expired_offsets(g: &Group, now_ms: i64, retention_ms: i64) -> Vec<(String, i32, i64)> {
    // Which timestamp an offset's age counts from; None = the group keeps its offsets.
    let subscribed: Option<HashSet<String>>;
    let from_state_change = if let Some(c) = g.consumer.as_deref() {
        // KIP-848 groups (Kafka's ConsumerGroup): offsets of subscribed topics are kept,
        // the others expire `retention` after their commit.
        subscribed = Some(c.subscribed_names.iter().cloned().collect());
        false
    } else {
        match (&g.protocol_type, g.state) {
            (Some(_), GroupState::Empty) => {
                subscribed = None;
                true
            }
            (Some(t), GroupState::Stable) if t == "consumer" => match g.subscribed_topics() {
                Some(s) => {
                    subscribed = Some(s);
                    false
                }
                None => return Vec::new(),
            },
            (None, _) if g.members.is_empty() => {
                subscribed = None;
                false
            }
            _ => return Vec::new(),
        }
    };
    let mut out = Vec::new();
    for (topic, parts) in &g.offsets {
        if subscribed.as_ref().is_some_and(|s| s.contains(topic)) {
            continue;
        }
        for (&partition, c) in parts {
            let expired = match c.expire_timestamp_ms {
                Some(at) => now_ms >= at,
                None => {
                    let base = if from_state_change { g.state_timestamp_ms } else { c.commit_timestamp_ms };
                    now_ms.saturating_sub(base) >= retention_ms
                }
            };
            if expired {
                out.push((topic.clone(), partition, c.record_offset));
            }
        }
    }
    out.sort();
    out
}

/// (group, its `__consumer_offsets` partition, expired offsets, delete the group too)
type ExpiryWork = (String, i32, Vec<(String, i32, i64)>, bool);

impl Coordinator {
    /// One expiry pass over this shard's groups.
    pub(super) async fn expire_offsets(&self, ctx: &Rc<CoordinatorContext>) {
        let retention_ms = i64::try_from(ctx.config.offsets_retention_minutes.saturating_mul(60_000)).unwrap_or(i64::MAX);
        let now = now_ms();
        let work: Vec<ExpiryWork> = self
            .groups
            .borrow()
            .values()
            .filter(|g| g.state != GroupState::Dead)
            .filter_map(|g| {
                let expired = expired_offsets(g, now, retention_ms);
                let remaining: usize = g.offsets.values().map(|m| m.len()).sum::<usize>() - expired.len();
                let delete_group = g.state == GroupState::Empty && g.members.is_empty() && remaining == 0;
                (!expired.is_empty()).then(|| (g.id.clone(), g.partition, expired, delete_group))
            })
            .collect();
        for (group, partition, expired, delete_group) in work {
            let Some(p) = ctx.partition(OFFSETS_TOPIC, partition) else { continue };
            let mut records: Vec<OffsetsRecord> = expired
                .iter()
                .map(|(topic, tp, _)| OffsetsRecord::Offset { group: group.clone(), topic: topic.clone(), partition: *tp, value: None })
                .collect();
            if delete_group {
                records.push(OffsetsRecord::Group { group: group.clone(), value: None });
            }
            if let Err(e) = append(&p, &records).await {
                tracing::warn!(group = %group, error = ?e, "could not store expired offsets; retrying next pass");
                continue;
            }
            let mut groups = self.groups.borrow_mut();
            let Some(g) = groups.get_mut(&group) else { continue };
            for (topic, tp, record_offset) in &expired {
                if let Some(m) = g.offsets.get_mut(topic) {
                    // A commit stored after the decision wins over the tombstone.
                    if m.get(tp).is_some_and(|c| c.record_offset == *record_offset) {
                        m.remove(tp);
                    }
                    if m.is_empty() {
                        g.offsets.remove(topic);
                    }
                }
            }
            tracing::info!(group = %group, offsets = expired.len(), group_deleted = delete_group, "expired committed offsets");
            if delete_group && g.state == GroupState::Empty && g.members.is_empty() && g.offsets.is_empty() {
                groups.remove(&group);
            }
        }
    }
}

/// Runs an expiry pass every offsets.retention.check.interval.ms on this shard.
pub async fn expiry_loop(ctx: Rc<CoordinatorContext>) {
    let every = Duration::from_millis(ctx.config.offsets_retention_check_interval_ms);
    loop {
        glommio::timer::sleep(every).await;
        // Kafka loads every offsets partition it leads; we load lazily, so load here.
        if let Err(e) = ctx.groups.ensure_all_loaded(&ctx).await {
            tracing::warn!(error = ?e, "cannot load groups for offset expiry; retrying next pass");
            continue;
        }
        ctx.groups.expire_offsets(&ctx).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::coordinator_records::OffsetValue;
    use crate::group::state::CommittedOffset;

    fn commit(g: &mut Group, topic: &str, partition: i32, ts: i64, expire: Option<i64>, record_offset: i64) {
        let v = OffsetValue { offset: 10, leader_epoch: -1, metadata: String::new(), commit_timestamp_ms: ts, expire_timestamp_ms: expire };
        g.offsets.entry(topic.to_string()).or_default().insert(partition, CommittedOffset::new(v, record_offset));
    }

    #[test]
    fn empty_consumer_group_expires_from_when_it_emptied() {
        let mut g = Group::new("g".into(), 0);
        g.protocol_type = Some("consumer".into());
        g.state_timestamp_ms = 1_000;
        commit(&mut g, "t", 0, 500, None, 1);
        commit(&mut g, "t", 1, 900, None, 2);
        assert!(expired_offsets(&g, 1_000 + 99, 100).is_empty(), "not yet: 99 ms after emptying");
        assert_eq!(expired_offsets(&g, 1_000 + 100, 100), vec![("t".to_string(), 0, 1), ("t".to_string(), 1, 2)]);
    }

    #[test]
    fn standalone_offsets_expire_from_their_commit_and_explicit_expiry_wins() {
        let mut g = Group::new("g".into(), 0);
        commit(&mut g, "a", 0, 1_000, None, 1);
        commit(&mut g, "b", 0, 5_000, None, 2);
        commit(&mut g, "c", 0, 5_000, Some(5_010), 3);
        assert_eq!(expired_offsets(&g, 1_100, 100), vec![("a".to_string(), 0, 1)]);
        assert_eq!(expired_offsets(&g, 5_010, 100_000), vec![("c".to_string(), 0, 3)]);
    }

    #[test]
    fn groups_with_members_keep_their_offsets() {
        let mut g = Group::new("g".into(), 0);
        g.protocol_type = Some("connect".into());
        g.state = GroupState::Stable;
        commit(&mut g, "t", 0, 0, None, 1);
        assert!(expired_offsets(&g, i64::MAX / 2, 1).is_empty());
        g.state = GroupState::PreparingRebalance;
        assert!(expired_offsets(&g, i64::MAX / 2, 1).is_empty());
    }
}
