//! Point-in-time figures a scrape reads where they live: each shard's (`ShardGauges`,
//! filled on the shard) and the broker's and cluster's (`BrokerGauges`, filled from the
//! committed metadata image and the quorum on the scraping thread). Plain data: the
//! `server` layer fills them, `exposition` renders them.

/// One shard's gauges.
#[derive(Clone, Debug, Default)]
pub struct ShardGauges {
    pub shard: u16,
    pub connections: u64,
    /// Partition replicas this shard holds open.
    pub partitions: u64,
    /// Of those, the ones it leads.
    pub leaders: u64,
    /// queued.max.request.bytes in use (request memory pool).
    pub request_memory_used_bytes: u64,
    pub request_memory_capacity_bytes: u64,
    /// Produce requests waiting for replication (acks=all) on this shard.
    pub produce_purgatory: u64,
    /// Fetch requests parked until data arrives (long polls) on this shard.
    pub fetch_purgatory: u64,
    /// Idempotent producers this shard's partitions remember.
    pub producer_state_entries: u64,
    /// Segment files of this shard's partitions.
    pub segments: u64,
    /// Tiered storage: bytes of sealed local segments of tiered leaders not in remote
    /// storage yet (Kafka's RemoteCopyLagBytes), and of the remote segments of the
    /// partitions it leads (RemoteLogSizeBytes).
    pub remote_copy_lag_bytes: u64,
    pub remote_log_size_bytes: u64,
    /// Of those, the ones holding a descriptor now, and the closes of idle ones by the
    /// shard's descriptor budget (`storage::open_files`).
    pub segment_files_open: u64,
    pub segment_files_closed: u64,
    /// Log compaction progress: the highest dirty share (0 to 1) of this shard's compacted
    /// partitions, how many are due for cleaning, how many the cleaner gave up on.
    pub cleaner_max_dirty_ratio: f64,
    pub cleaner_cleanable_partitions: u64,
    pub cleaner_uncleanable_partitions: u64,
    /// Bytes of this shard's partition logs, by log dir.
    pub log_bytes_by_dir: Vec<(String, u64)>,
    /// The metadata offset this shard has applied.
    pub metadata_applied_index: u64,
    /// The executor's time running tasks (glommio's executor runtime): its rate is the
    /// shard's busy fraction.
    pub busy_seconds: f64,
    pub tasks_executed: u64,
    /// Each io_uring ring's depth when the scrape ran on the shard.
    pub io_uring: Vec<IoUringDepth>,
    /// Committed offsets of the groups this shard coordinates.
    pub committed_offsets: Vec<GroupOffset>,
    /// The partitions this shard leads (log end offsets and high watermarks), and the
    /// high watermarks of partitions led elsewhere that its groups committed offsets of.
    pub partition_offsets: Vec<PartitionOffsets>,
}

/// One io_uring ring of a shard: requests waiting to be submitted and requests in the
/// kernel (submitted, not completed), sampled when the scrape ran.
#[derive(Clone, Debug, Default)]
pub struct IoUringDepth {
    /// glommio's rings: "main", "latency" or "poll".
    pub ring: &'static str,
    pub queued: u64,
    pub in_kernel: u64,
}

/// A group's committed offset of one partition (from the shard coordinating the group).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupOffset {
    pub group: String,
    pub topic: String,
    pub partition: i32,
    pub committed_offset: i64,
}

/// Where a partition ends: a partition this broker leads (log end offset and high
/// watermark), or one another broker leads (its high watermark, from a ListOffsets).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionOffsets {
    pub topic: String,
    pub partition: i32,
    pub log_end_offset: Option<i64>,
    pub high_watermark: i64,
}

/// Consumer group lag of one partition, as its coordinator sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupLag {
    pub group: String,
    pub topic: String,
    pub partition: i32,
    pub committed_offset: i64,
    /// The partition's log end offset and high watermark, if its leader answered.
    pub log_end_offset: Option<i64>,
    pub high_watermark: Option<i64>,
}

/// One log dir's disk.
#[derive(Clone, Debug, Default)]
pub struct LogDirGauges {
    pub dir: String,
    pub free_bytes: u64,
    pub total_bytes: u64,
    pub online: bool,
}

/// One voter's replication progress, as the quorum leader sees it.
#[derive(Clone, Debug, Default)]
pub struct VoterLag {
    pub voter: u64,
    /// Entries behind the leader's log end.
    pub lag: i64,
}

/// A broker's registration in the metadata image.
#[derive(Clone, Debug, Default)]
pub struct RegisteredBroker {
    pub broker: i32,
    /// Kafka's broker epoch: new on every registration of a new process.
    pub epoch: i64,
    pub fenced: bool,
}

/// The broker's and the cluster's figures, from the committed metadata and the quorum.
#[derive(Clone, Debug, Default)]
pub struct BrokerGauges {
    pub node_id: i32,
    /// Partitions this broker leads whose ISR is smaller than their replica set.
    pub under_replicated_partitions: u64,
    /// Partitions this broker leads whose ISR is below min.insync.replicas.
    pub under_min_isr_partitions: u64,
    /// Partitions this broker leads whose ISR is exactly min.insync.replicas.
    pub at_min_isr_partitions: u64,
    pub leader_count: u64,
    /// Partition replicas assigned to this broker.
    pub partition_count: u64,
    /// 1 on the node whose controller leads the metadata quorum.
    pub active_controller: bool,
    /// Cluster-wide figures: reported by the active controller only (0 elsewhere), as
    /// Kafka's controller metrics are, so a sum over nodes is the cluster's figure.
    pub offline_partitions: u64,
    pub global_partition_count: u64,
    pub global_topic_count: u64,
    pub fenced_brokers: u64,
    pub active_brokers: u64,
    /// Every registered broker as this node's metadata image has it: a restart registers a
    /// new incarnation, so its epoch changes; a reconnect alone does not.
    pub registered_brokers: Vec<RegisteredBroker>,
    /// The quorum as this node sees it.
    pub raft_leader: Option<u64>,
    pub raft_epoch: u64,
    pub raft_high_watermark: i64,
    pub raft_last_applied: i64,
    pub raft_log_start_offset: i64,
    pub raft_snapshot_offset: i64,
    pub raft_snapshots_installed: u64,
    /// On the quorum leader: each voter's lag.
    pub voter_lag: Vec<VoterLag>,
    pub log_dirs: Vec<LogDirGauges>,
    pub group_lag: Vec<GroupLag>,
}
