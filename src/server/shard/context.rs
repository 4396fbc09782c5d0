//! One shard's state (`ShardContext`): what every handler on this shard reads — its id,
//! the config, the controller handle, its partitions and applied metadata image, the
//! router, the group coordinator, producer-id block, connection count and the request
//! memory pool its connections share.
use std::cell::Cell;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;

use super::shard_ops::{serve_coordinator_ops, ShardOp, ShardResult, ShardRouter};
use crate::cluster::image::MetadataImage;
use crate::cluster::router::ShardRequest;
use crate::cluster::shard_partitions::{ShardImage, ShardPartitions};
use crate::cluster::topic_config::TopicConfigDefaults;
use crate::config::Config;
use crate::controller::ControllerHandle;
use crate::group::{CoordinatorContext, GroupConfig};
use crate::replication::{FetcherManager, FetcherSettings};
use crate::runtime::mesh::Mesh;
use crate::runtime::ShardId;
use crate::server::request_memory::RequestMemoryPool;
use crate::storage::log_dirs::LogDirs;
use crate::txn::{TxnConfig, TxnContext};

/// Producer ids fetched from the controller at a time.
const PRODUCER_ID_BLOCK: i64 = 1000;

/// The message shards send each other: a partition, group or transaction operation.
pub type ShardMessage = ShardRequest<ShardOp, ShardResult>;

pub struct ShardContext {
    pub shard: ShardId,
    pub config: Arc<Config>,
    pub controller: ControllerHandle,
    /// Topic defaults from the static config; `topic_defaults()` adds the dynamic ones.
    pub static_topic_defaults: TopicConfigDefaults,
    /// The partitions this shard owns and the metadata image it has applied.
    pub partitions: Rc<ShardPartitions>,
    /// Runs partition and group operations on their owning shard.
    pub router: Rc<ShardRouter>,
    /// The groups of this shard's `__consumer_offsets` partitions.
    pub coordinator: Rc<CoordinatorContext>,
    /// The transactional ids of this shard's `__transaction_state` partitions.
    pub txn_coordinator: Rc<TxnContext>,
    producer_ids: Cell<(i64, i64)>,
    /// Internal topics whose creation this shard started and that are not created yet.
    pub internal_topics_creating: std::cell::RefCell<std::collections::HashSet<&'static str>>,
    pub connections: Cell<usize>,
    /// queued.max.request.bytes: what this shard's connections may hold of requests
    /// being received or handled.
    pub request_memory: Rc<RequestMemoryPool>,
    /// The broker's log dirs, shared by every shard: where each partition's log lives.
    pub log_dirs: Arc<LogDirs>,
    /// The replica fetchers of the partitions this shard follows.
    pub fetchers: Rc<FetcherManager>,
    /// The client listeners (`RequestMeta::listener` indexes `listeners.all`).
    pub listeners: crate::security::listeners::Listeners,
    /// The ACL authorizer (if configured) over the ACLs of the applied image.
    pub authorization: crate::server::authorization::Authorization,
    /// max.connections / max.connections.per.ip, counted with every shard.
    pub connection_limits: Arc<crate::security::connection_limits::ConnectionLimits>,
    /// Client quotas: this shard's meters and throttling.
    pub client_quotas: crate::server::client_quotas::ClientQuotaManager,
    /// How this broker reaches and authenticates to the others (the inter-broker listener).
    pub inter_broker: Arc<crate::security::peer_security::PeerSecurity>,
    /// This shard's listeners, once bound: their key stores follow the dynamic configs.
    pub listener_infos: std::cell::RefCell<Vec<Rc<crate::server::connection::ListenerInfo>>>,
    /// The share coordinator of the `__share_group_state` partitions this shard leads.
    pub share_state: Rc<crate::group::share::state_coordinator::ShareStateCoordinator>,
    /// The share-partitions of the partitions this shard leads (KIP-932).
    pub share_partitions: Rc<crate::group::share::share_partitions::SharePartitions>,
    /// Share sessions of the members whose connections this shard serves, by (group,
    /// member): a connection stays on its shard, so its member's session does too.
    pub share_sessions: crate::server::share_sessions::ShareSessions,
    /// The remote store, when tiered storage is on (`remote.log.storage.system.enable`).
    pub remote_store: Option<crate::remote::store::RemoteStore>,
    /// This shard's share of remote.log.manager.copy.max.bytes.per.second and
    /// ...fetch.max.bytes.per.second.
    pub remote_copy_rate: std::cell::RefCell<crate::remote::byte_rate::ByteRate>,
    pub remote_fetch_rate: std::cell::RefCell<crate::remote::byte_rate::ByteRate>,
    /// This shard's share of remote.log.manager.copier.thread.pool.size (at least 1):
    /// partitions uploading at once.
    pub remote_copiers: usize,
}

impl ShardContext {
    pub fn new(
        shard: ShardId,
        config: Arc<Config>,
        controller: ControllerHandle,
        mesh: Mesh<ShardMessage>,
        topic_defaults: TopicConfigDefaults,
        log_dirs: Arc<LogDirs>,
        connection_limits: Arc<crate::security::connection_limits::ConnectionLimits>,
        inter_broker: Arc<crate::security::peer_security::PeerSecurity>,
        remote_store: Option<crate::remote::store::RemoteStore>,
    ) -> ShardContext {
        let committed = controller.clone();
        let partitions = Rc::new(ShardPartitions::new(shard, config.node_id, Box::new(move || committed.shard_index())));
        let share_sessions = crate::server::share_sessions::ShareSessions::new(config.group_share_max_share_sessions, mesh.shard_count());
        let rate = |setting| std::cell::RefCell::new(crate::remote::byte_rate::ByteRate::per_shard(setting, mesh.shard_count()));
        let remote_copiers = (config.remote_log_manager_copier_thread_pool_size as usize).div_ceil(mesh.shard_count().max(1)).max(1);
        let (remote_copy_rate, remote_fetch_rate) =
            (rate(config.remote_log_manager_copy_max_bytes_per_second), rate(config.remote_log_manager_fetch_max_bytes_per_second));
        let router = Rc::new(ShardRouter::new(partitions.clone(), mesh));
        let group_share_persister = crate::server::share_persister::share_persister(router.clone(), config.node_id, inter_broker.clone());
        let coordinator = Rc::new(CoordinatorContext::new(group_config(&config), partitions.clone(), group_share_persister));
        let markers = crate::server::txn_markers::marker_writer(router.clone(), partitions.clone(), config.node_id, inter_broker.clone());
        let txn_coordinator = Rc::new(TxnContext::new(txn_config(&config), partitions.clone(), markers));
        let share_persister = crate::server::share_persister::share_persister(router.clone(), config.node_id, inter_broker.clone());
        let share_limits = crate::group::share::share_partition::ShareLimits {
            max_in_flight_records: i64::from(config.group_share_partition_max_record_locks),
            delivery_count_limit: u16::try_from(config.group_share_delivery_count_limit).unwrap_or(5),
            lock_duration_ms: i64::from(config.group_share_record_lock_duration_ms),
            // A group's own config turns it on (`share_common::group_settings`).
            dead_letter_queue: false,
        };
        let dead_letters = Rc::new(crate::server::dead_letter_writer::BrokerDeadLetterWriter {
            router: router.clone(),
            controller: controller.clone(),
            node_id: config.node_id,
            inter_broker: inter_broker.clone(),
            prefix: config.errors_deadletterqueue_topic_name_prefix.clone(),
            auto_create: config.errors_deadletterqueue_auto_create_topics_enable,
        });
        let share_partitions = crate::group::share::share_partitions::SharePartitions::new(share_persister, dead_letters, share_limits);
        let share_state =
            Rc::new(crate::group::share::state_coordinator::ShareStateCoordinator::new(config.share_coordinator_snapshot_update_records_per_snapshot));
        serve_coordinator_ops(&router, &coordinator, &txn_coordinator, &share_partitions, &share_state);
        let request_memory = Rc::new(RequestMemoryPool::new(config.queued_max_request_bytes));
        let fetchers = Rc::new(FetcherManager::new(
            FetcherSettings::from_config(&config, controller.broker_epoch(), inter_broker.clone(), remote_store.clone()),
            partitions.clone(),
        ));
        // `Config::validate` resolved the same settings before the broker started.
        let listeners = config.listeners().expect("listeners were validated with the config");
        let authorization =
            crate::server::authorization::Authorization::new(config.authorizer().expect("the authorizer settings were validated with the config"));
        let client_quotas = crate::server::client_quotas::ClientQuotaManager::new(config.quota_window(), config.controller_quota_window());
        ShardContext {
            shard,
            config,
            controller,
            static_topic_defaults: topic_defaults,
            partitions,
            router,
            coordinator,
            txn_coordinator,
            producer_ids: Cell::new((0, 0)),
            internal_topics_creating: Default::default(),
            connections: Cell::new(0),
            request_memory,
            log_dirs,
            fetchers,
            listeners,
            authorization,
            client_quotas,
            connection_limits,
            inter_broker,
            listener_infos: std::cell::RefCell::new(Vec::new()),
            share_state,
            share_partitions,
            share_sessions,
            remote_store,
            remote_copy_rate,
            remote_fetch_rate,
            remote_copiers,
        }
    }

    /// The metadata image this shard has fully applied (partitions opened).
    /// Keeps a bound listener, and gives it this broker's dynamic key store now (values
    /// persisted before a restart apply at once).
    pub fn register_listener(&self, info: Rc<crate::server::connection::ListenerInfo>) {
        info.update_tls(&self.config, &self.controller.image(), self.shard);
        self.listener_infos.borrow_mut().push(info);
    }

    pub fn image(&self) -> ShardImage {
        self.partitions.image()
    }

    /// The topic defaults in force in `image`: static ones with the dynamic broker configs
    /// (cluster-wide default, then this broker's) on top.
    pub fn topic_defaults_in(&self, image: &MetadataImage) -> TopicConfigDefaults {
        crate::cluster::config_defs::effective_topic_defaults(&self.static_topic_defaults, image, &self.config.node_id.to_string())
    }

    /// The topic defaults in force in the image this shard has applied.
    pub fn topic_defaults(&self) -> TopicConfigDefaults {
        self.topic_defaults_in(&self.image())
    }

    /// Waits until this shard has applied everything the controller committed so far.
    pub async fn catch_up_with_controller(&self) {
        self.partitions.catch_up_with_controller().await;
    }

    /// The image this shard has applied, first caught up with the controller when the
    /// committed image knows more of what a request names than this shard does: a client
    /// may learn of a topic (or new partitions) from a CreateTopics answered on another
    /// shard and send its next request here before this shard has applied it. `missing`
    /// counts what the request names that an image lacks; it runs on the committed image
    /// only when this shard's image lacks something, so the steady state is one call.
    pub async fn image_for_request(&self, missing: impl Fn(&MetadataImage) -> usize) -> ShardImage {
        let image = self.image();
        let lacking = missing(&image);
        if lacking == 0 || missing(&self.controller.image()) >= lacking {
            return image;
        }
        self.catch_up_with_controller().await;
        self.image()
    }

    /// Catches up with the controller when it has committed a topic of `names` (all topics
    /// if `None`), or new partitions of one, that this shard has not applied yet: a client
    /// may have learnt of them from another shard (a CreatePartitions answered there, then
    /// a producer's Metadata here must not call the new partitions unknown). Only then: a
    /// catch-up waits for this shard's metadata loop, which may be busy opening others.
    pub async fn catch_up_for_topics(&self, names: Option<&[&str]>) {
        let committed = self.controller.image();
        let here = self.image();
        let lags = |t: &crate::cluster::image::TopicMeta| here.topic(&t.name).is_none_or(|h| h.partitions.len() < t.partitions.len());
        let behind = match names {
            Some(names) => names.iter().any(|n| committed.topic(n).is_some_and(lags)),
            None => committed.topics.values().any(lags),
        };
        if behind {
            self.catch_up_with_controller().await;
        }
    }

    /// A fresh producer id (blocks of ids come from the controller).
    pub async fn next_producer_id(&self) -> Result<i64, crate::controller::ControllerError> {
        let (next, end) = self.producer_ids.get();
        if next < end {
            self.producer_ids.set((next + 1, end));
            return Ok(next);
        }
        let first = self.controller.allocate_producer_ids(PRODUCER_ID_BLOCK).await?;
        self.producer_ids.set((first + 1, first + PRODUCER_ID_BLOCK));
        Ok(first)
    }

    /// The directory of a partition's log: where it is, or (new) where it goes.
    pub fn partition_dir(&self, topic: &str, partition: i32) -> PathBuf {
        self.log_dirs.place(topic, partition)
    }
}

fn txn_config(c: &Config) -> TxnConfig {
    TxnConfig {
        transaction_max_timeout_ms: c.transaction_max_timeout_ms,
        transactional_id_expiration_ms: c.transactional_id_expiration_ms,
        cleanup_interval_ms: c.transaction_abort_timed_out_transaction_cleanup_interval_ms,
        max_transactional_ids_per_shard: c.max_transactional_ids_per_shard,
        marker_timeout_ms: MARKER_TIMEOUT_MS,
    }
}

/// How long a marker write waits for the in-sync replicas (Kafka: request.timeout.ms).
pub const MARKER_TIMEOUT_MS: i32 = 30_000;

fn group_config(c: &Config) -> GroupConfig {
    GroupConfig {
        group_min_session_timeout_ms: c.group_min_session_timeout_ms,
        group_max_session_timeout_ms: c.group_max_session_timeout_ms,
        group_initial_rebalance_delay_ms: c.group_initial_rebalance_delay_ms,
        group_max_size: c.group_max_size,
        group_consumer_migration_policy: crate::group::consumer::migration::MigrationPolicy::parse(&c.group_consumer_migration_policy).unwrap_or_default(),
        max_groups_per_shard: c.max_groups_per_shard,
        group_consumer_session_timeout_ms: c.group_consumer_session_timeout_ms,
        group_consumer_heartbeat_interval_ms: c.group_consumer_heartbeat_interval_ms,
        group_streams_session_timeout_ms: c.group_streams_session_timeout_ms,
        group_streams_heartbeat_interval_ms: c.group_streams_heartbeat_interval_ms,
        group_streams_num_standby_replicas: c.group_streams_num_standby_replicas,
        group_streams_rack_aware_assignment_tags: crate::config::rack_aware_assignment_tags("", &c.group_streams_rack_aware_assignment_tags)
            .unwrap_or_default(),
        group_streams_initial_rebalance_delay_ms: c.group_streams_initial_rebalance_delay_ms,
        offset_metadata_max_bytes: c.offset_metadata_max_bytes,
        offsets_retention_minutes: c.offsets_retention_minutes,
        offsets_retention_check_interval_ms: c.offsets_retention_check_interval_ms,
    }
}
