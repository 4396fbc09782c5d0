//! Renders a scrape (every shard's metrics and gauges, and the broker's gauges) in the
//! OpenMetrics text format Prometheus reads, with prometheus-client's encoder.
//!
//! Every metric is declared once in `METRICS` (name, type, help, the Kafka JMX name it
//! stands for); rendering looks its declaration up, and docs/observability.md's metric list is
//! generated from the same table (`metric_table_markdown`), so the list cannot drift.
use std::fmt::Write as _;

use prometheus_client::encoding::{DescriptorEncoder, EncodeCounterValue, NoLabelSet};
use prometheus_client::metrics::MetricType;

use super::gauges::{BrokerGauges, ShardGauges};
use super::histogram::Histogram;
use super::shard_metrics::{ApiMetrics, ShardMetrics};

/// One metric as it is exposed.
pub struct MetricDef {
    /// The name without `shardlog_` (counters get `_total` appended on the wire).
    pub name: &'static str,
    pub kind: Kind,
    pub help: &'static str,
    /// The Apache Kafka metric an operator knows it by ("" when Kafka has none).
    pub kafka: &'static str,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

macro_rules! metrics_table {
    ($($id:ident: $name:literal, $kind:ident, $help:literal, $kafka:literal;)*) => {
        $(pub const $id: MetricDef = MetricDef { name: $name, kind: Kind::$kind, help: $help, kafka: $kafka };)*
        /// Every metric /metrics exposes, in the order it exposes them.
        pub const METRICS: &[MetricDef] = &[$($id),*];
    };
}

metrics_table! {
    REQUESTS: "requests", Counter, "Requests handled, by API (label request)", "kafka.network:type=RequestMetrics,name=RequestsPerSec";
    ERRORS: "errors", Counter, "Error codes in responses, by API and error name (top-level and per partition)", "kafka.network:type=RequestMetrics,name=ErrorsPerSec";
    TOTAL_TIME: "request_total_time_seconds", Histogram, "Request read until its response was written", "kafka.network:type=RequestMetrics,name=TotalTimeMs";
    QUEUE_TIME: "request_queue_time_seconds", Histogram, "Request read until its handler first ran on the shard", "kafka.network:type=RequestMetrics,name=RequestQueueTimeMs";
    LOCAL_TIME: "request_local_time_seconds", Histogram, "Time the handler ran on the shard", "kafka.network:type=RequestMetrics,name=LocalTimeMs";
    REMOTE_TIME: "request_remote_time_seconds", Histogram, "Time the handler waited: replication (acks=all), long polls, disk syncs, other shards", "kafka.network:type=RequestMetrics,name=RemoteTimeMs";
    RESPONSE_QUEUE_TIME: "response_queue_time_seconds", Histogram, "Handled until the connection's writer took the response", "kafka.network:type=RequestMetrics,name=ResponseQueueTimeMs";
    RESPONSE_SEND_TIME: "response_send_time_seconds", Histogram, "Writing the response to the socket", "kafka.network:type=RequestMetrics,name=ResponseSendTimeMs";
    BYTES_IN: "topic_bytes_in", Counter, "Record batch bytes appended by producers, by topic", "kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec";
    MESSAGES_IN: "topic_messages_in", Counter, "Records appended by producers, by topic", "kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec";
    BYTES_OUT: "topic_bytes_out", Counter, "Record batch bytes sent to consumers, by topic", "kafka.server:type=BrokerTopicMetrics,name=BytesOutPerSec";
    REPLICATION_BYTES_IN: "topic_replication_bytes_in", Counter, "Record batch bytes appended by this broker's replica fetchers, by topic", "kafka.server:type=BrokerTopicMetrics,name=ReplicationBytesInPerSec";
    REPLICATION_BYTES_OUT: "topic_replication_bytes_out", Counter, "Record batch bytes sent to follower replicas, by topic", "kafka.server:type=BrokerTopicMetrics,name=ReplicationBytesOutPerSec";
    PRODUCE_REQUESTS: "topic_produce_requests", Counter, "Partition writes in produce requests, by topic", "kafka.server:type=BrokerTopicMetrics,name=TotalProduceRequestsPerSec";
    FETCH_REQUESTS: "topic_fetch_requests", Counter, "Partition reads in consumer fetch requests, by topic", "kafka.server:type=BrokerTopicMetrics,name=TotalFetchRequestsPerSec";
    FAILED_PRODUCE: "topic_failed_produce_requests", Counter, "Partition writes answered with an error, by topic", "kafka.server:type=BrokerTopicMetrics,name=FailedProduceRequestsPerSec";
    FAILED_FETCH: "topic_failed_fetch_requests", Counter, "Partition reads answered with an error, by topic", "kafka.server:type=BrokerTopicMetrics,name=FailedFetchRequestsPerSec";
    SHARD_REQUESTS: "shard_requests", Counter, "Requests handled, by shard", "";
    SHARD_BYTES_IN: "shard_bytes_in", Counter, "Record batch bytes appended by producers, by shard", "";
    SHARD_BYTES_OUT: "shard_bytes_out", Counter, "Record batch bytes sent to consumers, by shard", "";
    CROSS_SHARD_MESSAGES: "shard_cross_shard_messages", Counter, "Operations a shard sent to another shard's inbox (requests naming partitions of several shards)", "";
    CROSS_SHARD_SENDS_WAITED: "shard_cross_shard_sends_waited", Counter, "Cross-shard messages that waited for room in the receiving shard's full inbox (backpressure)", "";
    METADATA_UPDATES_MERGED: "shard_metadata_updates_merged", Counter, "Metadata updates merged into one a shard had not taken yet (the shard fell behind the controller)", "";
    SHARD_PRODUCE_TIME: "shard_produce_total_time_seconds", Histogram, "Produce total time, by shard", "";
    SHARD_FETCH_TIME: "shard_fetch_total_time_seconds", Histogram, "Fetch total time (long polls included), by shard", "";
    STALLS: "shard_stalls", Counter, "Polls of a task that ran longer than shard_stall_threshold_ms, by shard and task", "";
    STALL_TIME: "shard_stall_duration_seconds", Histogram, "How long the stalling polls ran", "";
    TASK_QUEUE_DELAY: "shard_task_queue_delay_seconds", Histogram, "How late a timer task ran on the shard (a busy or stalled shard delays it)", "kafka.network:type=RequestChannel,name=RequestQueueSize (nearest)";
    BUSY: "shard_busy_seconds", Counter, "Time the shard's executor spent running tasks (its rate is the shard's busy fraction)", "kafka.server:type=KafkaRequestHandlerPool,name=RequestHandlerAvgIdlePercent (complement)";
    TASKS: "shard_tasks_executed", Counter, "Tasks the shard's executor ran", "";
    FILE_READS: "shard_file_reads", Counter, "File reads through the shard's io_uring rings", "";
    FILE_READ_BYTES: "shard_file_read_bytes", Counter, "Bytes read from files through the shard's io_uring rings", "";
    FILE_WRITES: "shard_file_writes", Counter, "File writes through the shard's io_uring rings", "";
    FILE_WRITE_BYTES: "shard_file_write_bytes", Counter, "Bytes written to files through the shard's io_uring rings", "";
    IO_URING_QUEUED: "shard_io_uring_queued", Gauge, "io_uring requests waiting to be submitted, by shard and ring, when scraped", "";
    IO_URING_IN_KERNEL: "shard_io_uring_in_kernel", Gauge, "io_uring requests submitted and not completed (submission depth), by shard and ring, when scraped", "";
    CONNECTIONS: "shard_connections", Gauge, "Open client connections, by shard", "kafka.server:type=socket-server-metrics,name=connection-count";
    SHARD_PARTITIONS: "shard_partitions", Gauge, "Partition replicas open, by shard", "";
    SHARD_LEADERS: "shard_leaders", Gauge, "Partitions led, by shard", "";
    REQUEST_MEMORY_USED: "request_memory_used_bytes", Gauge, "queued.max.request.bytes in use, by shard", "kafka.network:type=SocketServer,name=MemoryPoolAvailable (complement)";
    REQUEST_MEMORY_CAPACITY: "request_memory_capacity_bytes", Gauge, "queued.max.request.bytes, by shard", "";
    PRODUCE_PURGATORY: "produce_purgatory_size", Gauge, "Produce requests waiting for replication (acks=all), by shard", "kafka.server:type=DelayedOperationPurgatory,name=PurgatorySize,delayedOperation=Produce";
    FETCH_PURGATORY: "fetch_purgatory_size", Gauge, "Fetch requests waiting for data (long polls), by shard", "kafka.server:type=DelayedOperationPurgatory,name=PurgatorySize,delayedOperation=Fetch";
    PRODUCER_STATE: "producer_state_entries", Gauge, "Idempotent producers remembered by the shard's partitions", "kafka.server:type=ProducerStateManager (per partition)";
    SEGMENTS: "log_segments", Gauge, "Segment files, by shard", "kafka.log:type=Log,name=NumLogSegments (summed)";
    SEGMENT_FILES_OPEN: "segment_files_open", Gauge, "Segment file descriptors open, by shard (idle ones beyond the shard's descriptor budget are closed)", "";
    SEGMENT_FILES_CLOSED: "segment_files_closed", Counter, "Idle segment files closed for the shard's descriptor budget (each reopens at its next use), by shard", "";
    METADATA_APPLIED: "shard_metadata_applied_index", Gauge, "The metadata log index the shard has applied", "kafka.server:type=broker-metadata-metrics,name=last-applied-record-offset";
    FSYNC_TIME: "log_flush_time_seconds", Histogram, "fdatasync of segment files", "kafka.log:type=LogFlushStats,name=LogFlushRateAndTimeMs";
    WRITEBACK_TIME: "page_cache_writeback_time_seconds", Histogram, "sync_file_range writeback of page-cache segments (flush = never), from hand-off to the blocking thread to its return", "";
    CLEANER_PASSES: "log_cleaner_passes", Counter, "Log cleaner passes that cleaned a partition", "";
    CLEANER_SEGMENTS: "log_cleaner_segments", Counter, "Segments the log cleaner rewrote", "";
    CLEANER_BYTES_READ: "log_cleaner_bytes_read", Counter, "Bytes of the segments the cleaner rewrote, before", "kafka.log:type=LogCleaner,name=... (cleaner-recopy-percent's basis)";
    CLEANER_BYTES_WRITTEN: "log_cleaner_bytes_written", Counter, "Bytes of the segments the cleaner rewrote, after", "";
    CLEANER_MAX_DIRTY: "log_cleaner_max_dirty_percent", Gauge, "The highest dirty share of a compacted partition's sealed segments, by shard (percent)", "kafka.log:type=LogCleanerManager,name=max-dirty-percent";
    CLEANER_CLEANABLE: "log_cleaner_cleanable_partitions", Gauge, "Compacted partitions due for cleaning (dirty share at least min.cleanable.dirty.ratio), by shard", "";
    CLEANER_UNCLEANABLE: "log_cleaner_uncleanable_partitions", Gauge, "Compacted partitions the cleaner gave up on (a corrupt batch), by shard", "kafka.log:type=LogCleanerManager,name=uncleanable-partitions-count";
    UNREADABLE_FILES: "storage_unreadable_files", Counter, "Index, time index and cleaner checkpoint files found unreadable or corrupt (each rebuilt), by file kind", "";
    SHARE_STATE_LOADS: "share_state_loads", Counter, "Share-partition states read back from the share coordinator by their leader (first use per leader epoch)", "";
    SHARE_STATE_LOAD_FAILURES: "share_state_load_failures", Counter, "Share-partition state reads the share coordinator did not answer or refused (the ShareFetch partition gets the error)", "";
    SHARE_STATE_WRITES: "share_state_writes", Counter, "Share-partition acknowledgements and releases written to the share coordinator before they were answered", "";
    SHARE_STATE_WRITE_FAILURES: "share_state_write_failures", Counter, "Share-partition state writes the share coordinator did not take (the acknowledgements rolled back and refused)", "";
    SHARE_STATE_WRITE_TIME: "share_state_write_time_seconds", Histogram, "A share-partition state write, sent until the share coordinator answered (retries included)", "";
    SHARE_RECORDS_ACQUIRED: "share_records_acquired", Counter, "Records acquired by ShareFetch requests for share consumers (a redelivery counts again)", "";
    SHARE_FETCH_WAKEUPS: "share_fetch_wakeups", Counter, "Waiting ShareFetch requests that looked again for records, by what woke them (turn: a partition's high watermark moved and it had waited longest there; poll: the 50 ms look for released records and expired locks)", "";
    REMOTE_COPY_BYTES: "remote_copy_bytes", Counter, "Bytes of segments uploaded to remote storage (tiered storage)", "kafka.server:type=BrokerTopicMetrics,name=RemoteCopyBytesPerSec";
    REMOTE_COPY_REQUESTS: "remote_copy_requests", Counter, "Segment uploads to remote storage, by result", "kafka.server:type=BrokerTopicMetrics,name=RemoteCopyRequestsPerSec / RemoteCopyErrorsPerSec";
    REMOTE_FETCH_BYTES: "remote_fetch_bytes", Counter, "Bytes of batches consumer fetches read from remote storage", "kafka.server:type=BrokerTopicMetrics,name=RemoteFetchBytesPerSec";
    REMOTE_FETCH_REQUESTS: "remote_fetch_requests", Counter, "Consumer fetches of a partition read from remote storage, by result (expired: still reading at remote.fetch.max.wait.ms, answered empty; throttled: over remote.log.manager.fetch.max.bytes.per.second, answered empty)", "kafka.server:type=BrokerTopicMetrics,name=RemoteFetchRequestsPerSec / RemoteFetchErrorsPerSec";
    REMOTE_FETCH_CACHE: "remote_fetch_cache_bytes", Counter, "Bytes of remote segment reads served from the chunk cache (hit: read ahead or read before) or waited for from the object store (miss)", "aiven.kafka.server.tieredstorage.cache:type=chunk-cache (cache-hits / cache-misses)";
    REMOTE_FETCH_TIME: "remote_fetch_time_seconds", Histogram, "One read from remote storage (indexes, then a ranged GET), asked until answered", "kafka.log.remote:type=RemoteLogManager,name=RemoteLogReaderFetchRateAndTimeMs";
    REMOTE_DELETE_REQUESTS: "remote_delete_requests", Counter, "Remote segments deleted (retention, DeleteRecords, unfinished copies), by result", "kafka.server:type=BrokerTopicMetrics,name=RemoteDeleteRequestsPerSec / RemoteDeleteErrorsPerSec";
    REMOTE_COPY_LAG: "remote_copy_lag_bytes", Gauge, "Bytes of sealed local segments of tiered leaders not yet in remote storage, by shard", "kafka.server:type=BrokerTopicMetrics,name=RemoteCopyLagBytes";
    REMOTE_COPY_THROTTLE: "remote_copy_throttle_seconds", Counter, "Time uploads to remote storage waited for remote.log.manager.copy.max.bytes.per.second", "kafka.log.remote:type=RemoteLogManager,name=remote-copy-throttle-time";
    REMOTE_LOG_SIZE: "remote_log_size_bytes", Gauge, "Bytes in remote storage of the partitions this broker leads, by shard", "kafka.server:type=BrokerTopicMetrics,name=RemoteLogSizeBytes";
    SHARE_DEAD_LETTER_RECORDS: "share_dead_letter_records", Counter, "Records of share groups sent to their dead-letter queue (KIP-1191) and archived, by group (Kafka's per-group meters; past 1024 groups a shard counts the rest as `(other groups)`) and outcome (written: the queue took them; not_written: archived without a copy, the queue misconfigured or its writes given up, logged)", "";
    GROUP_PROTOCOL_CONVERSIONS: "group_protocol_conversions", Counter, "Groups with members converted online between the classic and KIP-848 consumer protocols (group.consumer.migration.policy), by direction (upgrade: classic to consumer; downgrade: back)", "";
    PRODUCER_IDS_EVICTED: "producer_ids_evicted", Counter, "Producer ids forgotten before producer.id.expiration.ms because a partition's table reached max_producer_ids_per_partition", "";
    BATCH_CACHE_HITS: "batch_cache_hits", Counter, "Fetches served from the batch cache", "";
    BATCH_CACHE_MISSES: "batch_cache_misses", Counter, "Fetches that read the log file", "";
    ISR_SHRINKS: "isr_shrinks", Counter, "ISR shrinks of partitions this broker leads", "kafka.server:type=ReplicaManager,name=IsrShrinksPerSec";
    ISR_EXPANDS: "isr_expands", Counter, "ISR expansions of partitions this broker leads", "kafka.server:type=ReplicaManager,name=IsrExpandsPerSec";
    UNDER_REPLICATED: "under_replicated_partitions", Gauge, "Partitions this broker leads with fewer in-sync replicas than replicas", "kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions";
    UNDER_MIN_ISR: "under_min_isr_partitions", Gauge, "Partitions this broker leads with fewer in-sync replicas than min.insync.replicas", "kafka.server:type=ReplicaManager,name=UnderMinIsrPartitionCount";
    AT_MIN_ISR: "at_min_isr_partitions", Gauge, "Partitions this broker leads with exactly min.insync.replicas in sync", "kafka.server:type=ReplicaManager,name=AtMinIsrPartitionCount";
    LEADER_COUNT: "leader_count", Gauge, "Partitions this broker leads", "kafka.server:type=ReplicaManager,name=LeaderCount";
    PARTITION_COUNT: "partition_count", Gauge, "Partition replicas assigned to this broker", "kafka.server:type=ReplicaManager,name=PartitionCount";
    ACTIVE_CONTROLLER: "active_controller_count", Gauge, "1 on the node whose controller leads the metadata quorum", "kafka.controller:type=KafkaController,name=ActiveControllerCount";
    OFFLINE_PARTITIONS: "offline_partitions_count", Gauge, "Partitions without a leader (active controller only)", "kafka.controller:type=KafkaController,name=OfflinePartitionsCount";
    GLOBAL_PARTITIONS: "global_partition_count", Gauge, "Partitions in the cluster (active controller only)", "kafka.controller:type=KafkaController,name=GlobalPartitionCount";
    GLOBAL_TOPICS: "global_topic_count", Gauge, "Topics in the cluster (active controller only)", "kafka.controller:type=KafkaController,name=GlobalTopicCount";
    FENCED_BROKERS: "fenced_broker_count", Gauge, "Registered brokers that are fenced (active controller only)", "kafka.controller:type=KafkaController,name=FencedBrokerCount";
    ACTIVE_BROKERS: "active_broker_count", Gauge, "Registered brokers that are not fenced (active controller only)", "kafka.controller:type=KafkaController,name=ActiveBrokerCount";
    BROKER_EPOCH: "broker_epoch", Gauge, "Each registered broker's epoch as this node's metadata has it (changes when a restarted broker registers again)", "";
    BROKER_FENCED: "broker_fenced", Gauge, "1 while a registered broker is fenced, as this node's metadata has it", "kafka.controller:type=KafkaController,name=FencedBrokerCount (per broker)";
    RAFT_LEADER: "raft_current_leader", Gauge, "The metadata quorum leader's node id as this node sees it (-1: none)", "kafka.server:type=raft-metrics,name=current-leader";
    RAFT_EPOCH: "raft_current_epoch", Gauge, "The metadata quorum's epoch (raft term)", "kafka.server:type=raft-metrics,name=current-epoch";
    RAFT_HIGH_WATERMARK: "raft_high_watermark", Gauge, "The metadata log's committed offset as this node knows it", "kafka.server:type=raft-metrics,name=high-watermark";
    RAFT_LAST_APPLIED: "raft_last_applied_offset", Gauge, "The metadata log offset this node's controller applied", "kafka.server:type=raft-metrics,name=log-end-offset (nearest)";
    RAFT_LOG_START: "raft_log_start_offset", Gauge, "The first metadata log offset this node still holds (earlier entries purged after a snapshot; 0: none purged)", "";
    RAFT_SNAPSHOT: "raft_snapshot_offset", Gauge, "The metadata log offset after the last entry of this node's latest snapshot (0: none)", "";
    RAFT_SNAPSHOTS_INSTALLED: "raft_snapshots_installed", Counter, "Metadata snapshots this node installed from the quorum leader since it started (it was behind the leader's purged log)", "";
    RAFT_VOTER_LAG: "raft_voter_lag", Gauge, "Metadata log entries a voter is behind the leader (quorum leader only)", "kafka-metadata-quorum.sh describe --replication (Lag)";
    LOG_DIR_SIZE: "log_dir_size_bytes", Gauge, "Bytes of partition logs in a log dir", "kafka.log:type=Log,name=Size (summed per dir)";
    LOG_DIR_FREE: "log_dir_free_bytes", Gauge, "Free bytes of a log dir's file system", "";
    LOG_DIR_TOTAL: "log_dir_total_bytes", Gauge, "Size of a log dir's file system", "";
    LOG_DIR_ONLINE: "log_dir_online", Gauge, "1 while a log dir is usable", "kafka.log:type=LogManager,name=OfflineLogDirectoryCount (complement)";
    GROUP_COMMITTED: "consumer_group_committed_offset", Gauge, "A group's committed offset of a partition (from its coordinator)", "kafka-consumer-groups.sh --describe (CURRENT-OFFSET)";
    GROUP_LAG: "consumer_group_lag", Gauge, "High watermark minus the group's committed offset: what the group has still to read (partitions this broker leads)", "kafka-consumer-groups.sh --describe (LAG); kafka_consumergroup_lag (kafka-exporter)";
    GROUP_LAG_LOG_END: "consumer_group_lag_log_end", Gauge, "Log end offset minus the group's committed offset (includes records not yet replicated to the ISR)", "";
}

/// Everything one scrape gathered.
pub struct Scrape {
    /// Each shard's metrics and gauges (a shard that did not answer in time is missing).
    pub shards: Vec<(ShardMetrics, ShardGauges)>,
    pub broker: BrokerGauges,
}

type Labels = Vec<(&'static str, String)>;

/// Writes one metric's samples.
struct Writer<'e, 'w> {
    encoder: &'e mut DescriptorEncoder<'w>,
}

impl Writer<'_, '_> {
    /// A counter family: integer counts, or seconds (`f64`).
    fn counter<V: EncodeCounterValue>(&mut self, def: &MetricDef, samples: impl IntoIterator<Item = (Labels, V)>) -> std::fmt::Result {
        debug_assert_eq!(def.kind, Kind::Counter, "{}", def.name);
        let mut m = self.encoder.encode_descriptor(def.name, def.help, None, MetricType::Counter)?;
        for (labels, v) in samples {
            if labels.is_empty() {
                m.encode_counter::<NoLabelSet, _, u64>(&v, None)?;
            } else {
                m.encode_family(&labels)?.encode_counter::<NoLabelSet, _, u64>(&v, None)?;
            }
        }
        Ok(())
    }

    fn gauge(&mut self, def: &MetricDef, samples: impl IntoIterator<Item = (Labels, i64)>) -> std::fmt::Result {
        debug_assert_eq!(def.kind, Kind::Gauge, "{}", def.name);
        let mut m = self.encoder.encode_descriptor(def.name, def.help, None, MetricType::Gauge)?;
        for (labels, v) in samples {
            if labels.is_empty() {
                m.encode_gauge(&v)?;
            } else {
                m.encode_family(&labels)?.encode_gauge(&v)?;
            }
        }
        Ok(())
    }

    fn histogram<'h>(&mut self, def: &MetricDef, samples: impl IntoIterator<Item = (Labels, &'h Histogram)>) -> std::fmt::Result {
        debug_assert_eq!(def.kind, Kind::Histogram, "{}", def.name);
        let mut m = self.encoder.encode_descriptor(def.name, def.help, None, MetricType::Histogram)?;
        for (labels, h) in samples {
            let buckets = h.buckets_seconds();
            if labels.is_empty() {
                m.encode_histogram::<NoLabelSet>(h.sum_seconds(), h.count(), &buckets, None)?;
            } else {
                m.encode_family(&labels)?.encode_histogram::<NoLabelSet>(h.sum_seconds(), h.count(), &buckets, None)?;
            }
        }
        Ok(())
    }
}

fn api_name(key: i16) -> String {
    kafka_protocol::messages::ApiKey::try_from(key).map(|k| format!("{k:?}")).unwrap_or_else(|_| key.to_string())
}

/// Kafka's name of an error code (`NOT_LEADER_OR_FOLLOWER`), as its ErrorsPerSec labels it.
fn error_name(code: i16) -> String {
    match kafka_protocol::ResponseError::try_from_code(code) {
        None => "NONE".to_string(),
        Some(kafka_protocol::ResponseError::Unknown(c)) => format!("UNKNOWN_{c}"),
        Some(e) => {
            let camel = e.to_string();
            let mut out = String::with_capacity(camel.len() + 8);
            for (i, ch) in camel.chars().enumerate() {
                if ch.is_ascii_uppercase() && i > 0 {
                    out.push('_');
                }
                out.push(ch.to_ascii_uppercase());
            }
            out
        }
    }
}

fn one(v: impl TryInto<i64>) -> Vec<(Labels, i64)> {
    vec![(Vec::new(), v.try_into().unwrap_or(i64::MAX))]
}

/// The per-API histograms of `merged`, one family per phase.
fn api_histograms(merged: &ShardMetrics, phase: fn(&ApiMetrics) -> &Histogram) -> impl Iterator<Item = (Labels, &Histogram)> {
    merged.apis.iter().enumerate().filter_map(move |(k, a)| a.as_ref().map(|a| (vec![("request", api_name(k as i16))], phase(a))))
}

impl std::fmt::Debug for Scrape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Scrape({} shards)", self.shards.len())
    }
}

impl prometheus_client::collector::Collector for Scrape {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> std::fmt::Result {
        let mut merged = ShardMetrics::default();
        for (m, _) in &self.shards {
            merged.add(m);
        }
        let mut w = Writer { encoder: &mut encoder };
        let shard_label = |g: &ShardGauges| vec![("shard", g.shard.to_string())];
        w.counter(&REQUESTS, merged.apis.iter().enumerate().filter_map(|(k, a)| a.as_ref().map(|a| (vec![("request", api_name(k as i16))], a.requests))))?;
        w.counter(&ERRORS, merged.errors.iter().map(|((api, code), n)| (vec![("request", api_name(*api)), ("error", error_name(*code))], *n)))?;
        w.histogram(&TOTAL_TIME, api_histograms(&merged, |a| &a.total))?;
        w.histogram(&QUEUE_TIME, api_histograms(&merged, |a| &a.queue))?;
        w.histogram(&LOCAL_TIME, api_histograms(&merged, |a| &a.local))?;
        w.histogram(&REMOTE_TIME, api_histograms(&merged, |a| &a.remote))?;
        w.histogram(&RESPONSE_QUEUE_TIME, api_histograms(&merged, |a| &a.response_queue))?;
        w.histogram(&RESPONSE_SEND_TIME, api_histograms(&merged, |a| &a.send))?;
        let mut topics: Vec<_> = merged.topics.iter().collect();
        topics.sort_by(|a, b| a.0.cmp(b.0));
        let by_topic =
            |f: fn(&super::shard_metrics::TopicMetrics) -> u64| topics.iter().map(move |(t, m)| (vec![("topic", t.to_string())], f(m))).collect::<Vec<_>>();
        w.counter(&BYTES_IN, by_topic(|m| m.bytes_in))?;
        w.counter(&MESSAGES_IN, by_topic(|m| m.messages_in))?;
        w.counter(&BYTES_OUT, by_topic(|m| m.bytes_out))?;
        w.counter(&REPLICATION_BYTES_IN, by_topic(|m| m.replication_bytes_in))?;
        w.counter(&REPLICATION_BYTES_OUT, by_topic(|m| m.replication_bytes_out))?;
        w.counter(&PRODUCE_REQUESTS, by_topic(|m| m.produce_requests))?;
        w.counter(&FETCH_REQUESTS, by_topic(|m| m.fetch_requests))?;
        w.counter(&FAILED_PRODUCE, by_topic(|m| m.failed_produce_requests))?;
        w.counter(&FAILED_FETCH, by_topic(|m| m.failed_fetch_requests))?;
        let shards = &self.shards;
        w.counter(&SHARD_REQUESTS, shards.iter().map(|(m, g)| (shard_label(g), m.requests())))?;
        w.counter(&SHARD_BYTES_IN, shards.iter().map(|(m, g)| (shard_label(g), m.topics.values().map(|t| t.bytes_in).sum::<u64>())))?;
        w.counter(&SHARD_BYTES_OUT, shards.iter().map(|(m, g)| (shard_label(g), m.topics.values().map(|t| t.bytes_out).sum::<u64>())))?;
        w.counter(&CROSS_SHARD_MESSAGES, shards.iter().map(|(m, g)| (shard_label(g), m.cross_shard_messages)))?;
        w.counter(&CROSS_SHARD_SENDS_WAITED, shards.iter().map(|(m, g)| (shard_label(g), m.cross_shard_sends_waited)))?;
        w.counter(&METADATA_UPDATES_MERGED, shards.iter().map(|(m, g)| (shard_label(g), m.metadata_updates_merged)))?;
        let api_of = |m: &'_ ShardMetrics, key: i16| m.apis[key as usize].as_ref().map(|a| a.total.clone()).unwrap_or_default();
        let produce: Vec<_> = shards.iter().map(|(m, g)| (shard_label(g), api_of(m, 0))).collect();
        w.histogram(&SHARD_PRODUCE_TIME, produce.iter().map(|(l, h)| (l.clone(), h)))?;
        let fetch: Vec<_> = shards.iter().map(|(m, g)| (shard_label(g), api_of(m, 1))).collect();
        w.histogram(&SHARD_FETCH_TIME, fetch.iter().map(|(l, h)| (l.clone(), h)))?;
        w.counter(
            &STALLS,
            shards
                .iter()
                .flat_map(|(m, g)| m.stalls.by_task.iter().map(move |(task, n)| (vec![("shard", g.shard.to_string()), ("task", task.to_string())], *n))),
        )?;
        w.histogram(&STALL_TIME, shards.iter().map(|(m, g)| (shard_label(g), &m.stalls.duration)))?;
        w.histogram(&TASK_QUEUE_DELAY, shards.iter().map(|(m, g)| (shard_label(g), &m.task_queue_delay)))?;
        w.counter(&BUSY, shards.iter().map(|(_, g)| (shard_label(g), g.busy_seconds)))?;
        w.counter(&TASKS, shards.iter().map(|(_, g)| (shard_label(g), g.tasks_executed)))?;
        w.counter(&FILE_READS, shards.iter().map(|(m, g)| (shard_label(g), m.file_reads.0)))?;
        w.counter(&FILE_READ_BYTES, shards.iter().map(|(m, g)| (shard_label(g), m.file_reads.1)))?;
        w.counter(&FILE_WRITES, shards.iter().map(|(m, g)| (shard_label(g), m.file_writes.0)))?;
        w.counter(&FILE_WRITE_BYTES, shards.iter().map(|(m, g)| (shard_label(g), m.file_writes.1)))?;
        let per_shard =
            |f: fn(&ShardGauges) -> u64| shards.iter().map(move |(_, g)| (shard_label(g), i64::try_from(f(g)).unwrap_or(i64::MAX))).collect::<Vec<_>>();
        w.gauge(&CONNECTIONS, per_shard(|g| g.connections))?;
        w.gauge(&CLEANER_MAX_DIRTY, per_shard(|g| (g.cleaner_max_dirty_ratio * 100.0).round() as u64))?;
        w.gauge(&CLEANER_CLEANABLE, per_shard(|g| g.cleaner_cleanable_partitions))?;
        w.gauge(&CLEANER_UNCLEANABLE, per_shard(|g| g.cleaner_uncleanable_partitions))?;
        let ring = |g: &ShardGauges, r: &super::gauges::IoUringDepth| vec![("shard", g.shard.to_string()), ("ring", r.ring.to_string())];
        w.gauge(&IO_URING_QUEUED, shards.iter().flat_map(|(_, g)| g.io_uring.iter().map(move |r| (ring(g, r), r.queued as i64))))?;
        w.gauge(&IO_URING_IN_KERNEL, shards.iter().flat_map(|(_, g)| g.io_uring.iter().map(move |r| (ring(g, r), r.in_kernel as i64))))?;
        w.gauge(&SHARD_PARTITIONS, per_shard(|g| g.partitions))?;
        w.gauge(&SHARD_LEADERS, per_shard(|g| g.leaders))?;
        w.gauge(&REQUEST_MEMORY_USED, per_shard(|g| g.request_memory_used_bytes))?;
        w.gauge(&REQUEST_MEMORY_CAPACITY, per_shard(|g| g.request_memory_capacity_bytes))?;
        w.gauge(&PRODUCE_PURGATORY, per_shard(|g| g.produce_purgatory))?;
        w.gauge(&FETCH_PURGATORY, per_shard(|g| g.fetch_purgatory))?;
        w.gauge(&PRODUCER_STATE, per_shard(|g| g.producer_state_entries))?;
        w.gauge(&SEGMENTS, per_shard(|g| g.segments))?;
        w.gauge(&SEGMENT_FILES_OPEN, per_shard(|g| g.segment_files_open))?;
        w.counter(&SEGMENT_FILES_CLOSED, shards.iter().map(|(_, g)| (shard_label(g), g.segment_files_closed)))?;
        w.gauge(&METADATA_APPLIED, per_shard(|g| g.metadata_applied_index))?;
        w.histogram(&FSYNC_TIME, [(Vec::new(), &merged.fsync)])?;
        w.histogram(&WRITEBACK_TIME, [(Vec::new(), &merged.writeback)])?;
        w.counter(&CLEANER_PASSES, [(Vec::new(), merged.cleaner.passes)])?;
        w.counter(&CLEANER_SEGMENTS, [(Vec::new(), merged.cleaner.segments)])?;
        w.counter(&CLEANER_BYTES_READ, [(Vec::new(), merged.cleaner.bytes_read)])?;
        w.counter(&CLEANER_BYTES_WRITTEN, [(Vec::new(), merged.cleaner.bytes_written)])?;
        w.counter(&UNREADABLE_FILES, merged.unreadable_files.iter().map(|(kind, n)| (vec![("file", kind.to_string())], *n)))?;
        w.counter(&PRODUCER_IDS_EVICTED, [(Vec::new(), merged.producer_ids_evicted)])?;
        let share = &merged.share_state;
        w.counter(&SHARE_STATE_LOADS, [(Vec::new(), share.loads)])?;
        w.counter(&SHARE_STATE_LOAD_FAILURES, [(Vec::new(), share.load_failures)])?;
        w.counter(&SHARE_STATE_WRITES, [(Vec::new(), share.writes)])?;
        w.counter(&SHARE_STATE_WRITE_FAILURES, [(Vec::new(), share.write_failures)])?;
        w.histogram(&SHARE_STATE_WRITE_TIME, [(Vec::new(), &share.write_time)])?;
        let fetch = &merged.share_fetch;
        w.counter(&SHARE_RECORDS_ACQUIRED, [(Vec::new(), fetch.records_acquired)])?;
        w.counter(&SHARE_FETCH_WAKEUPS, [(vec![("by", "turn".to_string())], fetch.woken_in_turn), (vec![("by", "poll".to_string())], fetch.polled)])?;
        let r = &merged.remote;
        let result = |ok: u64, err: u64| [(vec![("result", "ok".to_string())], ok), (vec![("result", "error".to_string())], err)];
        w.counter(&REMOTE_COPY_BYTES, [(Vec::new(), r.copy_bytes)])?;
        w.counter(&REMOTE_COPY_REQUESTS, result(r.copy_requests, r.copy_errors))?;
        w.counter(&REMOTE_FETCH_BYTES, [(Vec::new(), r.fetch_bytes)])?;
        w.counter(
            &REMOTE_FETCH_REQUESTS,
            result(r.fetch_requests, r.fetch_errors)
                .into_iter()
                .chain([(vec![("result", "expired".to_string())], r.fetch_expired), (vec![("result", "throttled".to_string())], r.fetch_throttled)]),
        )?;
        w.counter(
            &REMOTE_FETCH_CACHE,
            [(vec![("result", "hit".to_string())], r.fetch_cache_hit_bytes), (vec![("result", "miss".to_string())], r.fetch_cache_miss_bytes)],
        )?;
        w.histogram(&REMOTE_FETCH_TIME, [(Vec::new(), &r.fetch_time)])?;
        w.counter(&REMOTE_DELETE_REQUESTS, result(r.delete_requests, r.delete_errors))?;
        w.counter(&REMOTE_COPY_THROTTLE, [(Vec::new(), r.copy_throttle_ms as f64 / 1000.0)])?;
        w.gauge(&REMOTE_COPY_LAG, per_shard(|g| g.remote_copy_lag_bytes))?;
        w.gauge(&REMOTE_LOG_SIZE, per_shard(|g| g.remote_log_size_bytes))?;
        w.counter(
            &SHARE_DEAD_LETTER_RECORDS,
            merged.share_dead_letter.by_group.iter().flat_map(|(group, o)| {
                [("written", o.written), ("not_written", o.not_written)].map(|(result, n)| (vec![("group", group.clone()), ("result", result.to_string())], n))
            }),
        )?;
        let (upgrades, downgrades) = merged.group_conversions;
        w.counter(
            &GROUP_PROTOCOL_CONVERSIONS,
            [(vec![("direction", "upgrade".to_string())], upgrades), (vec![("direction", "downgrade".to_string())], downgrades)],
        )?;
        w.counter(&BATCH_CACHE_HITS, [(Vec::new(), merged.batch_cache_hits)])?;
        w.counter(&BATCH_CACHE_MISSES, [(Vec::new(), merged.batch_cache_misses)])?;
        w.counter(&ISR_SHRINKS, [(Vec::new(), merged.isr_shrinks)])?;
        w.counter(&ISR_EXPANDS, [(Vec::new(), merged.isr_expands)])?;
        let b = &self.broker;
        w.gauge(&UNDER_REPLICATED, one(b.under_replicated_partitions))?;
        w.gauge(&UNDER_MIN_ISR, one(b.under_min_isr_partitions))?;
        w.gauge(&AT_MIN_ISR, one(b.at_min_isr_partitions))?;
        w.gauge(&LEADER_COUNT, one(b.leader_count))?;
        w.gauge(&PARTITION_COUNT, one(b.partition_count))?;
        w.gauge(&ACTIVE_CONTROLLER, one(i64::from(b.active_controller)))?;
        w.gauge(&OFFLINE_PARTITIONS, one(b.offline_partitions))?;
        w.gauge(&GLOBAL_PARTITIONS, one(b.global_partition_count))?;
        w.gauge(&GLOBAL_TOPICS, one(b.global_topic_count))?;
        w.gauge(&FENCED_BROKERS, one(b.fenced_brokers))?;
        w.gauge(&ACTIVE_BROKERS, one(b.active_brokers))?;
        let broker = |r: &super::gauges::RegisteredBroker| vec![("broker", r.broker.to_string())];
        w.gauge(&BROKER_EPOCH, b.registered_brokers.iter().map(|r| (broker(r), r.epoch)))?;
        w.gauge(&BROKER_FENCED, b.registered_brokers.iter().map(|r| (broker(r), i64::from(r.fenced))))?;
        w.gauge(&RAFT_LEADER, one(b.raft_leader.map_or(-1, |l| i64::try_from(l).unwrap_or(-1))))?;
        w.gauge(&RAFT_EPOCH, one(b.raft_epoch))?;
        w.gauge(&RAFT_HIGH_WATERMARK, one(b.raft_high_watermark))?;
        w.gauge(&RAFT_LAST_APPLIED, one(b.raft_last_applied))?;
        w.gauge(&RAFT_LOG_START, one(b.raft_log_start_offset))?;
        w.gauge(&RAFT_SNAPSHOT, one(b.raft_snapshot_offset))?;
        w.counter(&RAFT_SNAPSHOTS_INSTALLED, [(Vec::new(), b.raft_snapshots_installed)])?;
        w.gauge(&RAFT_VOTER_LAG, b.voter_lag.iter().map(|v| (vec![("voter", v.voter.to_string())], v.lag)))?;
        let mut dir_bytes: std::collections::BTreeMap<&str, u64> = std::collections::BTreeMap::new();
        for (_, g) in shards {
            for (dir, bytes) in &g.log_bytes_by_dir {
                *dir_bytes.entry(dir).or_default() += bytes;
            }
        }
        let dir = |d: &str| vec![("dir", d.to_string())];
        w.gauge(&LOG_DIR_SIZE, b.log_dirs.iter().map(|d| (dir(&d.dir), dir_bytes.get(d.dir.as_str()).copied().unwrap_or(0) as i64)))?;
        w.gauge(&LOG_DIR_FREE, b.log_dirs.iter().map(|d| (dir(&d.dir), d.free_bytes as i64)))?;
        w.gauge(&LOG_DIR_TOTAL, b.log_dirs.iter().map(|d| (dir(&d.dir), d.total_bytes as i64)))?;
        w.gauge(&LOG_DIR_ONLINE, b.log_dirs.iter().map(|d| (dir(&d.dir), i64::from(d.online))))?;
        let lag_labels = |l: &super::gauges::GroupLag| vec![("group", l.group.clone()), ("topic", l.topic.clone()), ("partition", l.partition.to_string())];
        w.gauge(&GROUP_COMMITTED, b.group_lag.iter().map(|l| (lag_labels(l), l.committed_offset)))?;
        w.gauge(&GROUP_LAG, b.group_lag.iter().filter_map(|l| l.high_watermark.map(|h| (lag_labels(l), (h - l.committed_offset).max(0)))))?;
        w.gauge(&GROUP_LAG_LOG_END, b.group_lag.iter().filter_map(|l| l.log_end_offset.map(|e| (lag_labels(l), (e - l.committed_offset).max(0)))))?;
        Ok(())
    }
}

/// The OpenMetrics text of `scrape` (what GET /metrics answers).
pub fn render(scrape: Scrape) -> String {
    // The prefix makes every name `shardlog_<name>`.
    let mut registry = prometheus_client::registry::Registry::with_prefix("shardlog");
    registry.register_collector(Box::new(scrape));
    let mut out = String::new();
    // Writing to a String cannot fail; an encoder error would be a bug in a metric name.
    if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &registry) {
        let _ = writeln!(out, "# encoding failed: {e}");
    }
    out
}

/// The content type of `render`'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The metric list of docs/observability.md: one row per metric, generated from `METRICS`.
pub fn metric_table_markdown() -> String {
    let mut out = String::from("| Metric | Type | What it counts | Kafka's name |\n|---|---|---|---|\n");
    for m in METRICS {
        let wire = match m.kind {
            Kind::Counter => format!("shardlog_{}_total", m.name),
            _ => format!("shardlog_{}", m.name),
        };
        let kind = format!("{:?}", m.kind).to_lowercase();
        let kafka = if m.kafka.is_empty() { "—".to_string() } else { format!("`{}`", m.kafka) };
        let _ = writeln!(out, "| `{wire}` | {kind} | {} | {kafka} |", m.help);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::shard_metrics::RequestTiming;

    #[test]
    fn a_scrape_renders_merged_shards_with_kafka_names() {
        let mut a = ShardMetrics::default();
        a.record_request(0, &RequestTiming { total: std::time::Duration::from_millis(3), ..Default::default() });
        a.record_error(0, 6, 1);
        a.topic("orders").bytes_in += 1000;
        let mut b = ShardMetrics::default();
        b.topic("orders").bytes_in += 500;
        b.record_stall(crate::metrics::stall::TaskName::Named("retention"), std::time::Duration::from_millis(200));
        let scrape = Scrape {
            shards: vec![(a, ShardGauges { shard: 0, connections: 2, ..Default::default() }), (b, ShardGauges { shard: 1, ..Default::default() })],
            broker: BrokerGauges { under_replicated_partitions: 3, active_controller: true, ..Default::default() },
        };
        let text = render(scrape);
        for line in [
            "shardlog_requests_total{request=\"Produce\"} 1",
            "shardlog_errors_total{request=\"Produce\",error=\"NOT_LEADER_OR_FOLLOWER\"} 1",
            "shardlog_topic_bytes_in_total{topic=\"orders\"} 1500",
            "shardlog_shard_stalls_total{shard=\"1\",task=\"retention\"} 1",
            "shardlog_shard_connections{shard=\"0\"} 2",
            "shardlog_under_replicated_partitions 3",
            "shardlog_active_controller_count 1",
            "shardlog_request_total_time_seconds_count{request=\"Produce\"} 1",
            "# EOF",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
        }
        // Every declared metric is exposed (a dashboard may query any of them).
        for m in METRICS {
            assert!(text.contains(&format!("# TYPE shardlog_{} ", m.name)), "{} not exposed", m.name);
        }
    }
}

#[cfg(test)]
mod readme {
    #[test]
    fn readme_lists_every_metric() {
        let readme = include_str!("../../docs/observability.md");
        let (begin, end) = ("<!-- metrics:begin (generated: cargo test --lib readme_lists_every_metric) -->\n", "<!-- metrics:end -->");
        let section = readme.split_once(begin).and_then(|(_, rest)| rest.split_once(end)).map(|(s, _)| s);
        let want = super::metric_table_markdown();
        assert!(
            section == Some(want.as_str()),
            "docs/observability.md's metric list differs from exposition::METRICS; put this between the markers:\n{begin}{want}{end}"
        );
    }
}
