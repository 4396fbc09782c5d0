//! The controller thread: pins itself, runs a tokio current-thread runtime with the openraft
//! node, recovers, then serves requests one at a time.
//!
//! Requests are handled serially (validate against the committed image, propose, wait for
//! apply) so each proposal sees every earlier one: placement stays balanced and a
//! duplicate CreateTopics fails at validation. Metadata changes are rare; one fsync each
//! is cheap enough.
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{mpsc, Arc};
use std::time::Duration;

use openraft::impls::BasicNode;
use openraft::{Config, SnapshotPolicy};

use crate::cluster::image::{MetadataImage, MetadataUpdate};

use super::handle::{ControllerHandle, Request};
use super::log_store::LogStore;
use super::network::Network;
use super::propose::{self, ProposeCtx};
use super::state_machine::{Publisher, StateMachine};
use super::types::{Applied, Command, Raft};
use super::{check_shard_count, raft_node_id, ControllerConfig, ControllerError};

/// Queued requests beyond this make callers wait (backpressure instead of memory growth).
const REQUEST_QUEUE: usize = 1024;
/// How long start-up may take to elect this node and replay the log.
const RECOVERY_TIMEOUT: Duration = Duration::from_secs(30);

pub fn start(
    cfg: ControllerConfig,
) -> Result<
    (
        ControllerHandle,
        Vec<async_channel::Receiver<MetadataUpdate>>,
    ),
    ControllerError,
> {
    let shard_count = check_shard_count(cfg.shard_count)?;
    raft_node_id(cfg.node_id)?;
    // Unbounded, but bounded by what feeds it: one MetadataUpdate per committed metadata
    // change, and changes are proposed one at a time by this thread (requests queue in the
    // bounded REQUEST_QUEUE). The publisher cannot wait for a slow shard (it runs inside
    // openraft's apply), and dropping an update would lose metadata; a shard behind by
    // many updates is behind by that many admin operations, each applied in order.
    let (senders, receivers): (Vec<_>, Vec<_>) =
        (0..shard_count).map(|_| async_channel::unbounded()).unzip();
    let publisher = Arc::new(Publisher::new(senders));
    let (req_tx, req_rx) = async_channel::bounded(REQUEST_QUEUE);
    let (ready_tx, ready_rx) = mpsc::channel();

    let thread_publisher = publisher.clone();
    let thread = std::thread::Builder::new()
        .name("controller".into())
        .spawn(move || run_thread(cfg, thread_publisher, req_rx, ready_tx))
        .map_err(|e| {
            ControllerError::Storage(format!("cannot spawn the controller thread: {e}"))
        })?;

    let ready = ready_rx.recv();
    let handle = ControllerHandle::new(req_tx, publisher, thread);
    match ready {
        Ok(Ok(())) => Ok((handle, receivers)),
        Ok(Err(e)) => {
            handle.join();
            Err(e)
        }
        Err(_) => {
            handle.join();
            Err(ControllerError::Storage(
                "the controller thread exited during start-up (see logs)".into(),
            ))
        }
    }
}

fn run_thread(
    cfg: ControllerConfig,
    publisher: Arc<Publisher>,
    requests: async_channel::Receiver<Request>,
    ready: mpsc::Sender<Result<(), ControllerError>>,
) {
    if let Some(core) = cfg.core {
        if !core_affinity::set_for_current(core_affinity::CoreId { id: core }) {
            tracing::warn!(
                core,
                "controller: could not pin thread to core; running unpinned"
            );
        }
    }
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let _ = ready.send(Err(ControllerError::Storage(format!(
                "cannot build the controller runtime: {e}"
            ))));
            return;
        }
    };
    rt.block_on(async move {
        let raft = match boot(&cfg, &publisher).await {
            Ok(raft) => raft,
            Err(e) => {
                tracing::error!(error = %e, "controller start-up failed");
                let _ = ready.send(Err(e));
                return;
            }
        };
        publisher.go_live();
        let _ = ready.send(Ok(()));
        let ctx = ProposeCtx {
            shard_count: cfg.shard_count,
            default_num_partitions: cfg.default_num_partitions,
            defaults: &cfg.topic_defaults,
        };
        while let Ok(req) = requests.recv().await {
            handle_request(&ctx, &raft, &publisher, req).await;
        }
        tracing::info!("controller shutting down");
        if let Err(e) = raft.shutdown().await {
            tracing::warn!(error = %e, "controller raft shutdown");
        }
    });
}

fn raft_config(cfg: &ControllerConfig) -> Result<Config, ControllerError> {
    Config {
        cluster_name: "shardlog-controller".into(),
        heartbeat_interval: 100,
        election_timeout_min: 300,
        election_timeout_max: 600,
        snapshot_policy: SnapshotPolicy::LogsSinceLast(cfg.snapshot_every_entries.max(1)),
        // The snapshot holds everything; keeping no log behind it keeps the log file small.
        // Revisit with peers (a lagging follower would then need a snapshot instead).
        max_in_snapshot_log_to_keep: 0,
        ..Default::default()
    }
    .validate()
    .map_err(|e| ControllerError::Config(format!("raft config: {e}")))
}

/// Opens storage, starts raft, waits until this node leads and has applied its whole log,
/// and makes sure the cluster has an id.
async fn boot(cfg: &ControllerConfig, publisher: &Arc<Publisher>) -> Result<Raft, ControllerError> {
    let node_id = raft_node_id(cfg.node_id)?;
    let dir: PathBuf = cfg.data_dir.join("controller");
    let log = LogStore::open(&dir).map_err(|e| {
        ControllerError::Storage(format!("controller log in {}: {e}", dir.display()))
    })?;
    let sm =
        StateMachine::open(dir.clone(), publisher.clone()).map_err(ControllerError::Storage)?;
    let config = Arc::new(raft_config(cfg)?);
    let raft = Raft::new(node_id, config, Network, log, sm)
        .await
        .map_err(|e| ControllerError::Storage(format!("controller raft start: {e}")))?;
    match recover(cfg, node_id, &raft, publisher).await {
        Ok(()) => Ok(raft),
        Err(e) => {
            if let Err(se) = raft.shutdown().await {
                tracing::warn!(error = %se, "controller raft shutdown after failed start");
            }
            Err(e)
        }
    }
}

async fn recover(
    cfg: &ControllerConfig,
    node_id: u64,
    raft: &Raft,
    publisher: &Publisher,
) -> Result<(), ControllerError> {
    let initialized = raft
        .is_initialized()
        .await
        .map_err(|e| ControllerError::Storage(e.to_string()))?;
    if !initialized {
        tracing::info!(
            node_id,
            "controller: initializing a new single-voter metadata quorum"
        );
        let members = BTreeMap::from([(
            node_id,
            BasicNode {
                addr: String::new(),
            },
        )]);
        raft.initialize(members)
            .await
            .map_err(|e| ControllerError::Storage(format!("raft initialize: {e}")))?;
    }
    raft.wait(Some(RECOVERY_TIMEOUT))
        .metrics(
            |m| {
                m.current_leader == Some(node_id)
                    && m.last_applied.as_ref().map(|l| l.index) >= m.last_log_index
            },
            "controller leads and has applied its log",
        )
        .await
        .map_err(|e| ControllerError::NotController(format!("controller did not recover: {e}")))?;

    if publisher.image().cluster_id.is_empty() {
        let cluster_id = propose::new_cluster_id();
        tracing::info!(%cluster_id, "controller: new cluster id");
        raft.client_write(Command::InitCluster { cluster_id })
            .await
            .map_err(|e| {
                ControllerError::NotController(format!("cannot write the cluster id: {e}"))
            })?;
    }
    let image = publisher.image();
    check_placement(&image, cfg.shard_count)?;
    tracing::info!(
        cluster_id = %image.cluster_id, topics = image.topics.len(), applied_index = image.applied_index,
        "controller recovered"
    );
    Ok(())
}

/// Every partition must live on a shard this broker runs.
fn check_placement(image: &MetadataImage, shard_count: u16) -> Result<(), ControllerError> {
    for t in image.topics.values() {
        if let Some(p) = t.partitions.iter().find(|p| p.shard >= shard_count) {
            return Err(ControllerError::Config(format!(
                "topic '{}' partition {} is placed on shard {} but only {shard_count} shards are configured; \
                 start with at least {} shards",
                t.name,
                p.partition,
                p.shard,
                p.shard + 1
            )));
        }
    }
    Ok(())
}

/// Proposes `cmd` and waits for it to be applied.
async fn write(raft: &Raft, cmd: Command) -> Result<Applied, ControllerError> {
    match raft.client_write(cmd).await {
        Ok(resp) => resp.data.0.map_err(ControllerError::from),
        Err(e) => {
            tracing::warn!(error = %e, "controller: proposal failed");
            Err(ControllerError::NotController(e.to_string()))
        }
    }
}

fn unexpected(what: &str, got: Applied) -> ControllerError {
    ControllerError::Storage(format!("internal: {what} applied as {got:?}"))
}

async fn handle_request(ctx: &ProposeCtx<'_>, raft: &Raft, publisher: &Publisher, req: Request) {
    let image = publisher.image();
    match req {
        Request::CreateTopic {
            name,
            num_partitions,
            replication_factor,
            configs,
            validate_only,
            reply,
        } => {
            let topic_id = *uuid::Uuid::new_v4().as_bytes();
            let res = match propose::create_topic(
                ctx,
                &image,
                name,
                num_partitions,
                replication_factor,
                configs,
                topic_id,
            ) {
                Err(e) => Err(e),
                Ok((_, preview)) if validate_only => Ok(preview),
                Ok((cmd, _)) => match write(raft, cmd).await {
                    Ok(Applied::TopicCreated(meta)) => Ok(meta),
                    Ok(other) => Err(unexpected("CreateTopic", other)),
                    Err(e) => Err(e),
                },
            };
            let _ = reply.send(res);
        }
        Request::DeleteTopic { name, reply } => {
            let res = match propose::delete_topic(&image, &name) {
                Err(e) => Err(e),
                Ok(cmd) => match write(raft, cmd).await {
                    Ok(Applied::TopicDeleted { topic_id }) => Ok(topic_id),
                    Ok(other) => Err(unexpected("DeleteTopic", other)),
                    Err(e) => Err(e),
                },
            };
            let _ = reply.send(res);
        }
        Request::CreatePartitions {
            name,
            total_count,
            validate_only,
            reply,
        } => {
            let res = match propose::create_partitions(ctx, &image, &name, total_count) {
                Err(e) => Err(e),
                Ok(_) if validate_only => Ok(()),
                Ok(cmd) => write(raft, cmd).await.map(|_| ()),
            };
            let _ = reply.send(res);
        }
        Request::AlterConfigs {
            name,
            ops,
            replace,
            validate_only,
            reply,
        } => {
            let res = match propose::alter_configs(ctx, &image, &name, ops, replace) {
                Err(e) => Err(e),
                Ok(_) if validate_only => Ok(()),
                Ok(cmd) => write(raft, cmd).await.map(|_| ()),
            };
            let _ = reply.send(res);
        }
        Request::AlterResourceConfigs { resource, ops, replace, validate_only, reply } => {
            let res = match propose::alter_resource_configs(&image, resource, ops, replace) {
                Err(e) => Err(e),
                Ok(_) if validate_only => Ok(()),
                Ok(cmd) => write(raft, cmd).await.map(|_| ()),
            };
            let _ = reply.send(res);
        }
        Request::AllocateProducerIds { count, reply } => {
            let res = match propose::allocate_producer_ids(&image, count) {
                Err(e) => Err(e),
                Ok(cmd) => match write(raft, cmd).await {
                    Ok(Applied::ProducerIds { first }) => Ok(first),
                    Ok(other) => Err(unexpected("AllocateProducerIds", other)),
                    Err(e) => Err(e),
                },
            };
            let _ = reply.send(res);
        }
    }
}
