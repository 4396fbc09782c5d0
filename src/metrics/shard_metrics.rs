//! One shard's metrics: plain counters and histograms in a thread-local (a shard is one
//! thread), so recording on the produce and fetch paths is a borrow and an add — no atomic,
//! no lock, no cross-core cache line. A scrape asks each shard for a copy
//! (`snapshot()`), run on that shard between its other tasks, and adds the copies up.
//!
//! Bounded: per-API entries are indexed by API key (< `MAX_API_KEY`), error entries by
//! (API, code) pairs that exist, and per-topic entries are removed when the topic leaves
//! the shard (`forget_topic`).
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use super::histogram::Histogram;
use super::stall::TaskName;

/// API keys are below this (Kafka 4.4's highest is 92).
pub const MAX_API_KEY: usize = 128;

/// The phases of one request, as Kafka's RequestMetrics splits them.
#[derive(Clone, Copy, Debug, Default)]
pub struct RequestTiming {
    /// Read off the socket until its handler first ran (RequestQueueTimeMs).
    pub queue: Duration,
    /// The handler's own running time on the shard (LocalTimeMs).
    pub local: Duration,
    /// The handler's waiting: replication for acks=all, a fetch's long poll, disk
    /// syncs, other shards (RemoteTimeMs).
    pub remote: Duration,
    /// Handled until the writer took the response: earlier responses of the connection
    /// go first (ResponseQueueTimeMs).
    pub response_queue: Duration,
    /// Writing the response to the socket (ResponseSendTimeMs).
    pub send: Duration,
    /// Read off the socket until written back (TotalTimeMs).
    pub total: Duration,
}

/// One API's requests on one shard.
#[derive(Clone, Debug, Default)]
pub struct ApiMetrics {
    pub requests: u64,
    pub total: Histogram,
    pub queue: Histogram,
    pub local: Histogram,
    pub remote: Histogram,
    pub response_queue: Histogram,
    pub send: Histogram,
}

/// One topic's traffic on one shard (Kafka's BrokerTopicMetrics).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TopicMetrics {
    /// Bytes of record batches appended by producers (BytesInPerSec); replication excluded.
    pub bytes_in: u64,
    /// Records appended by producers (MessagesInPerSec).
    pub messages_in: u64,
    /// Bytes of record batches sent to consumers (BytesOutPerSec); replication excluded.
    pub bytes_out: u64,
    /// Bytes appended by replica fetchers on this broker (ReplicationBytesInPerSec).
    pub replication_bytes_in: u64,
    /// Bytes sent to follower replicas (ReplicationBytesOutPerSec).
    pub replication_bytes_out: u64,
    pub produce_requests: u64,
    pub fetch_requests: u64,
    /// Partition-level produce errors (FailedProduceRequestsPerSec).
    pub failed_produce_requests: u64,
    pub failed_fetch_requests: u64,
}

/// The log cleaner's progress on a shard (Kafka's LogCleaner metrics).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CleanerProgress {
    /// Passes over a partition that cleaned at least nothing (a pass per dirty partition).
    pub passes: u64,
    pub segments: u64,
    /// Bytes of the segments cleaned, before and after.
    pub bytes_read: u64,
    pub bytes_written: u64,
}

/// A shard's tasks that ran too long without yielding (a reactor stall).
#[derive(Clone, Debug, Default)]
pub struct Stalls {
    /// Polls longer than `shard_stall_threshold_ms`, by task name.
    pub by_task: BTreeMap<TaskName, u64>,
    /// How long those polls ran.
    pub duration: Histogram,
}

/// Everything one shard counts. `Clone` is the scrape's snapshot.
#[derive(Clone, Debug)]
pub struct ShardMetrics {
    /// By API key (`None`: no request of it yet).
    pub apis: Vec<Option<Box<ApiMetrics>>>,
    /// Error codes in responses, by (API key, error code) (ErrorsPerSec).
    pub errors: BTreeMap<(i16, i16), u64>,
    pub topics: HashMap<String, TopicMetrics>,
    pub stalls: Stalls,
    /// How late the shard's periodic probe task ran: time a ready task waits for the
    /// shard (its task-queue delay).
    pub task_queue_delay: Histogram,
    /// fdatasync of segment files.
    pub fsync: Histogram,
    pub batch_cache_hits: u64,
    pub batch_cache_misses: u64,
    pub isr_shrinks: u64,
    pub isr_expands: u64,
    /// Messages this shard sent to other shards' inboxes (the router's operations).
    pub cross_shard_messages: u64,
    /// Of those, messages that waited for room in the receiving shard's full inbox
    /// (cross_shard_inbox_capacity): backpressure.
    pub cross_shard_sends_waited: u64,
    /// Metadata updates merged into a waiting one because this shard had not taken it yet
    /// (the controller never waits for a shard, see controller/shard_updates.rs).
    pub metadata_updates_merged: u64,
    /// File reads and writes through the shard's io_uring rings, (operations, bytes),
    /// direct and buffered: glommio hands its I/O counters over and resets them, so each
    /// scrape adds what it took here (`add_io`).
    pub file_reads: (u64, u64),
    pub file_writes: (u64, u64),
    pub cleaner: CleanerProgress,
    /// sync_file_range writeback calls of the page-cache segments, from hand-off to return.
    pub writeback: Histogram,
    /// Derived files (indexes, the cleaner checkpoint) found unreadable or corrupt and
    /// rebuilt, by kind: a failing disk shows here rather than as a silent rebuild.
    pub unreadable_files: BTreeMap<&'static str, u64>,
    /// Producers forgotten early because a partition's table was full
    /// (max_producer_ids_per_partition).
    pub producer_ids_evicted: u64,
    /// Share-partition leaders' calls to the share coordinator (`group/share/share_partitions.rs`).
    pub share_state: ShareStateCalls,
    /// ShareFetch requests served by this shard (`server/handlers/share_fetch.rs`).
    pub share_fetch: ShareFetchCounts,
    /// Share groups' dead-letter queues written by this shard's share-partition leaders.
    pub share_dead_letter: DeadLetterCounts,
    /// Groups converted online between the classic and KIP-848 protocols
    /// (group.consumer.migration.policy): (upgrades, downgrades).
    pub group_conversions: (u64, u64),
    /// Tiered storage (remote/): uploads, remote reads, remote deletions.
    pub remote: RemoteStorageCounts,
}

/// What a shard's tiered-storage tasks and remote reads did (Kafka's
/// BrokerTopicMetrics Remote*PerSec meters, as counters).
#[derive(Clone, Debug, Default)]
pub struct RemoteStorageCounts {
    pub copy_bytes: u64,
    pub copy_requests: u64,
    pub copy_errors: u64,
    pub fetch_bytes: u64,
    pub fetch_requests: u64,
    pub fetch_errors: u64,
    /// Remote reads still running at remote.fetch.max.wait.ms (answered empty).
    pub fetch_expired: u64,
    /// Remote reads not made: the shard was over remote.log.manager.fetch.max.bytes.per.second (answered empty).
    pub fetch_throttled: u64,
    /// Milliseconds uploads waited for remote.log.manager.copy.max.bytes.per.second.
    pub copy_throttle_ms: u64,
    /// Bytes of remote `.log` reads found in the chunk cache, and waited for from the store.
    pub fetch_cache_hit_bytes: u64,
    pub fetch_cache_miss_bytes: u64,
    pub delete_requests: u64,
    pub delete_errors: u64,
    /// One remote read, asked until answered.
    pub fetch_time: Histogram,
}

/// Records sent to share groups' dead-letter queues (KIP-1191), by group and outcome, as
/// Kafka 4.4 meters them per share group.
///
/// Invariant: at most [`DeadLetterCounts::MAX_GROUPS`] groups are named per shard; a
/// later group adds to [`DeadLetterCounts::OTHER_GROUPS`], so group ids that come and go
/// cannot grow a shard's table (or a scrape) without bound.
#[derive(Clone, Debug, Default)]
pub struct DeadLetterCounts {
    pub by_group: BTreeMap<String, DeadLetterOutcomes>,
}

/// One group's dead letters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeadLetterOutcomes {
    /// Written to the queue (acks=all), then archived.
    pub written: u64,
    /// Archived without reaching the queue (misconfigured, or the writes gave up).
    pub not_written: u64,
}

impl DeadLetterCounts {
    pub const MAX_GROUPS: usize = 1024;
    /// The label for the groups past MAX_GROUPS. Any string is a legal group id, so this
    /// one is only spelled to stand out.
    pub const OTHER_GROUPS: &'static str = "(other groups)";

    pub fn add(&mut self, group: &str, written: u64, not_written: u64) {
        let key = if self.by_group.contains_key(group) || self.by_group.len() < Self::MAX_GROUPS { group } else { Self::OTHER_GROUPS };
        *self.by_group.entry(key.to_string()).or_default() += DeadLetterOutcomes { written, not_written };
    }

    /// Adds another shard's counts (a scrape's merged view may name MAX_GROUPS per shard).
    pub fn merge(&mut self, other: &DeadLetterCounts) {
        for (group, o) in &other.by_group {
            *self.by_group.entry(group.clone()).or_default() += *o;
        }
    }
}

impl std::ops::AddAssign for DeadLetterOutcomes {
    fn add_assign(&mut self, o: DeadLetterOutcomes) {
        self.written += o.written;
        self.not_written += o.not_written;
    }
}

#[cfg(test)]
mod dead_letter_tests {
    use super::DeadLetterCounts;

    #[test]
    fn groups_past_the_bound_share_one_label() {
        let mut c = DeadLetterCounts::default();
        for g in 0..DeadLetterCounts::MAX_GROUPS + 10 {
            c.add(&format!("g{g}"), 1, 2);
        }
        // A group already named keeps its own counts.
        c.add("g0", 5, 0);
        assert_eq!(c.by_group.len(), DeadLetterCounts::MAX_GROUPS + 1);
        let other = c.by_group[DeadLetterCounts::OTHER_GROUPS];
        assert_eq!((other.written, other.not_written), (10, 20));
        assert_eq!(c.by_group["g0"].written, 6);
        let mut merged = DeadLetterCounts::default();
        merged.merge(&c);
        merged.merge(&c);
        assert_eq!(merged.by_group["g0"].written, 12);
    }
}

/// What a shard's ShareFetch requests did: records acquired for their members, and how
/// waiting ones came to look again.
#[derive(Clone, Debug, Default)]
pub struct ShareFetchCounts {
    /// Records acquired (a redelivery counts again).
    pub records_acquired: u64,
    /// Waiting fetches woken in turn by a partition's high watermark.
    pub woken_in_turn: u64,
    /// Waiting fetches that looked again at the poll (released records, expired locks).
    pub polled: u64,
}

/// What a shard's share-partition leaders asked of the share coordinator.
#[derive(Clone, Debug, Default)]
pub struct ShareStateCalls {
    /// States read back (first use of a share-partition per leader epoch), and those refused.
    pub loads: u64,
    pub load_failures: u64,
    /// Writes of acknowledgements and releases, and those refused (rolled back).
    pub writes: u64,
    pub write_failures: u64,
    /// A write, sent until answered (retries included).
    pub write_time: Histogram,
}

impl Default for ShardMetrics {
    fn default() -> Self {
        ShardMetrics {
            apis: vec![None; MAX_API_KEY],
            errors: BTreeMap::new(),
            topics: HashMap::new(),
            stalls: Stalls::default(),
            task_queue_delay: Histogram::default(),
            fsync: Histogram::default(),
            batch_cache_hits: 0,
            batch_cache_misses: 0,
            isr_shrinks: 0,
            isr_expands: 0,
            cross_shard_messages: 0,
            cross_shard_sends_waited: 0,
            metadata_updates_merged: 0,
            file_reads: (0, 0),
            file_writes: (0, 0),
            cleaner: CleanerProgress::default(),
            writeback: Histogram::default(),
            unreadable_files: BTreeMap::new(),
            producer_ids_evicted: 0,
            share_state: ShareStateCalls::default(),
            share_fetch: ShareFetchCounts::default(),
            share_dead_letter: DeadLetterCounts::default(),
            remote: RemoteStorageCounts::default(),
            group_conversions: (0, 0),
        }
    }
}

thread_local! {
    static SHARD: RefCell<ShardMetrics> = RefCell::new(ShardMetrics::default());
}

/// Runs `f` on this shard's metrics. Never hold the borrow across an await (it cannot:
/// `f` is synchronous).
pub fn with<R>(f: impl FnOnce(&mut ShardMetrics) -> R) -> R {
    SHARD.with(|m| f(&mut m.borrow_mut()))
}

/// A copy of this shard's metrics, for a scrape.
pub fn snapshot() -> ShardMetrics {
    SHARD.with(|m| m.borrow().clone())
}

impl ShardMetrics {
    /// A request of `api_key` finished with `timing`.
    pub fn record_request(&mut self, api_key: i16, timing: &RequestTiming) {
        let Some(slot) = usize::try_from(api_key).ok().and_then(|k| self.apis.get_mut(k)) else { return };
        let api = slot.get_or_insert_with(Default::default);
        api.requests += 1;
        api.total.record(timing.total);
        api.queue.record(timing.queue);
        api.local.record(timing.local);
        api.remote.record(timing.remote);
        api.response_queue.record(timing.response_queue);
        api.send.record(timing.send);
    }

    /// `count` occurrences of `error_code` (non-zero) in a response to `api_key`.
    pub fn record_error(&mut self, api_key: i16, error_code: i16, count: u64) {
        if error_code != 0 {
            *self.errors.entry((api_key, error_code)).or_default() += count;
        }
    }

    /// The topic's counters (created on first use; the name is copied once per topic).
    pub fn topic(&mut self, name: &str) -> &mut TopicMetrics {
        if !self.topics.contains_key(name) {
            self.topics.insert(name.to_string(), TopicMetrics::default());
        }
        self.topics.get_mut(name).expect("inserted above")
    }

    /// The topic was deleted or left this shard: its series go away (as Kafka removes a
    /// deleted topic's metrics), so the map stays bounded by the topics the shard holds.
    pub fn forget_topic(&mut self, name: &str) {
        self.topics.remove(name);
    }

    pub fn record_stall(&mut self, task: TaskName, ran: Duration) {
        *self.stalls.by_task.entry(task).or_default() += 1;
        self.stalls.duration.record(ran);
    }

    /// Adds `other` (another shard's copy) to this one.
    pub fn add(&mut self, other: &ShardMetrics) {
        for (mine, theirs) in self.apis.iter_mut().zip(other.apis.iter()) {
            if let Some(t) = theirs {
                let m = mine.get_or_insert_with(Default::default);
                m.requests += t.requests;
                m.total.add(&t.total);
                m.queue.add(&t.queue);
                m.local.add(&t.local);
                m.remote.add(&t.remote);
                m.response_queue.add(&t.response_queue);
                m.send.add(&t.send);
            }
        }
        for (k, v) in &other.errors {
            *self.errors.entry(*k).or_default() += v;
        }
        for (name, t) in &other.topics {
            let m = self.topic(name);
            m.bytes_in += t.bytes_in;
            m.messages_in += t.messages_in;
            m.bytes_out += t.bytes_out;
            m.replication_bytes_in += t.replication_bytes_in;
            m.replication_bytes_out += t.replication_bytes_out;
            m.produce_requests += t.produce_requests;
            m.fetch_requests += t.fetch_requests;
            m.failed_produce_requests += t.failed_produce_requests;
            m.failed_fetch_requests += t.failed_fetch_requests;
        }
        for (task, n) in &other.stalls.by_task {
            *self.stalls.by_task.entry(*task).or_default() += n;
        }
        self.stalls.duration.add(&other.stalls.duration);
        self.task_queue_delay.add(&other.task_queue_delay);
        self.fsync.add(&other.fsync);
        self.batch_cache_hits += other.batch_cache_hits;
        self.batch_cache_misses += other.batch_cache_misses;
        self.isr_shrinks += other.isr_shrinks;
        self.isr_expands += other.isr_expands;
        self.cross_shard_messages += other.cross_shard_messages;
        self.cross_shard_sends_waited += other.cross_shard_sends_waited;
        self.metadata_updates_merged += other.metadata_updates_merged;
        self.add_io(other.file_reads, other.file_writes);
        self.cleaner.passes += other.cleaner.passes;
        self.cleaner.segments += other.cleaner.segments;
        self.cleaner.bytes_read += other.cleaner.bytes_read;
        self.cleaner.bytes_written += other.cleaner.bytes_written;
        self.writeback.add(&other.writeback);
        self.producer_ids_evicted += other.producer_ids_evicted;
        self.share_state.loads += other.share_state.loads;
        self.share_state.load_failures += other.share_state.load_failures;
        self.share_state.writes += other.share_state.writes;
        self.share_state.write_failures += other.share_state.write_failures;
        self.share_state.write_time.add(&other.share_state.write_time);
        self.share_fetch.records_acquired += other.share_fetch.records_acquired;
        self.share_fetch.woken_in_turn += other.share_fetch.woken_in_turn;
        self.share_fetch.polled += other.share_fetch.polled;
        let (r, o) = (&mut self.remote, &other.remote);
        (r.copy_bytes, r.copy_requests, r.copy_errors) = (r.copy_bytes + o.copy_bytes, r.copy_requests + o.copy_requests, r.copy_errors + o.copy_errors);
        (r.fetch_bytes, r.fetch_requests, r.fetch_errors) =
            (r.fetch_bytes + o.fetch_bytes, r.fetch_requests + o.fetch_requests, r.fetch_errors + o.fetch_errors);
        (r.fetch_expired, r.delete_requests, r.delete_errors) =
            (r.fetch_expired + o.fetch_expired, r.delete_requests + o.delete_requests, r.delete_errors + o.delete_errors);
        (r.fetch_throttled, r.copy_throttle_ms) = (r.fetch_throttled + o.fetch_throttled, r.copy_throttle_ms + o.copy_throttle_ms);
        (r.fetch_cache_hit_bytes, r.fetch_cache_miss_bytes) =
            (r.fetch_cache_hit_bytes + o.fetch_cache_hit_bytes, r.fetch_cache_miss_bytes + o.fetch_cache_miss_bytes);
        r.fetch_time.add(&o.fetch_time);
        self.share_dead_letter.merge(&other.share_dead_letter);
        self.group_conversions.0 += other.group_conversions.0;
        self.group_conversions.1 += other.group_conversions.1;
        for (kind, n) in &other.unreadable_files {
            *self.unreadable_files.entry(kind).or_default() += n;
        }
    }

    /// Adds I/O counted since the last call ((operations, bytes) read and written).
    pub fn add_io(&mut self, reads: (u64, u64), writes: (u64, u64)) {
        self.file_reads = (self.file_reads.0 + reads.0, self.file_reads.1 + reads.1);
        self.file_writes = (self.file_writes.0 + writes.0, self.file_writes.1 + writes.1);
    }

    /// Requests of every API.
    pub fn requests(&self) -> u64 {
        self.apis.iter().flatten().map(|a| a.requests).sum()
    }

    pub fn stall_count(&self) -> u64 {
        self.stalls.by_task.values().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_add_up_and_a_forgotten_topic_is_gone() {
        let mut a = ShardMetrics::default();
        let timing = RequestTiming { total: Duration::from_millis(2), ..Default::default() };
        a.record_request(0, &timing);
        a.record_error(0, 6, 2);
        a.record_error(0, 0, 5);
        a.topic("t").bytes_in += 100;
        let mut b = ShardMetrics::default();
        b.record_request(0, &timing);
        b.topic("t").bytes_in += 50;
        b.topic("u").messages_in += 3;
        b.record_stall(TaskName::Named("retention"), Duration::from_millis(300));
        a.add(&b);
        assert_eq!(a.apis[0].as_ref().unwrap().requests, 2);
        assert_eq!(a.apis[0].as_ref().unwrap().total.count(), 2);
        assert_eq!(a.errors, BTreeMap::from([((0, 6), 2)]), "error code 0 is not an error");
        assert_eq!(a.topics["t"].bytes_in, 150);
        assert_eq!(a.topics["u"].messages_in, 3);
        assert_eq!(a.stall_count(), 1);
        a.forget_topic("t");
        assert!(!a.topics.contains_key("t"));
        a.record_request(-1, &timing);
        a.record_request(MAX_API_KEY as i16, &timing);
        assert_eq!(a.requests(), 2, "out-of-range API keys are not recorded");
    }
}
