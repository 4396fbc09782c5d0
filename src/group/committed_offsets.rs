//! The committed offsets a metrics scrape reads (consumer group lag is computed from them
//! against the partitions' high watermarks and log end offsets: `server/admin.rs`).
use super::CoordinatorContext;
use crate::metrics::gauges::GroupOffset;

/// Series one shard reports at most: a cluster with more (group, partition) pairs than
/// this per shard gets the first ones, and a warning (lag metrics are per pair, as
/// kafka-exporter's; this bounds what one scrape costs).
pub const MAX_COMMITTED_OFFSETS_REPORTED: usize = 20_000;

impl CoordinatorContext {
    /// Every committed offset of the groups this shard coordinates now (loaded, with their
    /// offsets partition led here).
    pub fn committed_offsets(&self) -> Vec<GroupOffset> {
        let groups = self.groups.groups.borrow();
        let mut out = Vec::new();
        for g in groups.values().filter(|g| self.partition(super::OFFSETS_TOPIC, g.partition).is_some()) {
            for (topic, partitions) in &g.offsets {
                for (partition, c) in partitions {
                    if out.len() == MAX_COMMITTED_OFFSETS_REPORTED {
                        tracing::warn!(
                            shard = self.shard,
                            limit = MAX_COMMITTED_OFFSETS_REPORTED,
                            "consumer group lag: more committed offsets than one scrape reports; the rest are left out"
                        );
                        return out;
                    }
                    out.push(GroupOffset { group: g.id.clone(), topic: topic.clone(), partition: *partition, committed_offset: c.offset });
                }
            }
        }
        out
    }
}
