//! The controller thread: pins itself, runs a tokio current-thread runtime with the openraft
//! node (and, in a quorum, the RPC listener), recovers, then serves requests one at a time.
//!
//! Requests are handled serially (validate against the committed image, propose, wait for
//! apply) so each proposal sees every earlier one: placement stays balanced and a
//! duplicate CreateTopics fails at validation. Metadata changes are rare; one fsync each
//! is cheap enough.
//!
//! In a quorum only the leader executes requests. Another node forwards each request it
//! gets from its broker side to the leader over the controller RPC connection (as Kafka
//! brokers forward to the active controller), and retries on NOT_CONTROLLER / an
//! unreachable leader until `ROUTE_DEADLINE`, so a client sees a leader change as latency,
//! not as an error. A forwarded request is never forwarded again. A retry after a leader
//! died between commit and answer can see its own effect (TopicAlreadyExists), as in Kafka.
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use openraft::async_runtime::WatchReceiver as _;
use openraft::metrics::WaitError;
use openraft::{Config, ReadPolicy, SnapshotPolicy};

use crate::cluster::image::BrokerMeta;

use super::alter_partition::{self, AlterIsr, AlterPartitionError};
use super::directory_id;
use super::election::{self, ElectionType};
use super::handle::{ControllerHandle, Request};
use super::heartbeat_sender::HeartbeatSender;
use super::liveness::{fencing_check_interval, heartbeat_interval, Liveness};
use super::log_store::LogStore;
use super::network::{Connection, Network, PeerAddresses};
use super::observer;
use super::propose::{self, ProposeCtx};
use super::quorum_info;
use super::quorum_start;
use super::reassignment;
use super::rpc::{ClientReply, ClientRequest, RpcRequest, RpcResponse};
use super::rpc_server;
use super::rpc_server::ConnectionClosed;
use super::shard_updates::{shard_updates, ShardUpdates, UpdateSink};
use super::state_machine::{Publisher, StateMachine};
use super::types::{Applied, Command, ControllerNode, Raft};
use super::voters;
use super::{check_shard_count, raft_node_id, ControllerConfig, ControllerError};

/// Queued requests beyond this make callers wait (backpressure instead of memory growth).
const REQUEST_QUEUE: usize = 1024;
/// How long start-up may take to find a quorum leader and replay the log (in a quorum,
/// the other voters must start within this).
const RECOVERY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a request may wait for a quorum leader (elections, forwarding retries) before
/// it fails with NOT_CONTROLLER.
const ROUTE_DEADLINE: Duration = Duration::from_secs(10);
/// One forwarded request's round trip to the leader at most.
const FORWARD_TTL: Duration = Duration::from_secs(5);
/// Controller connection closes waiting for the request loop.
const CLOSED_QUEUE: usize = 1024;
/// Pause between attempts to reach a leader.
const ROUTE_RETRY: Duration = Duration::from_millis(50);

pub fn start(cfg: ControllerConfig) -> Result<(ControllerHandle, Vec<ShardUpdates>), ControllerError> {
    let shard_count = check_shard_count(cfg.shard_count, cfg.broker)?;
    // This broker's incarnation: new on every start (a restart re-registers as a new
    // process); the handle tells it to the replica fetchers (KIP-903's broker epoch).
    let incarnation = *uuid::Uuid::new_v4().as_bytes();
    raft_node_id(cfg.node_id)?;
    let inherited = crate::storage::meta_properties::directory_id(&cfg.data_dir).and_then(|t| directory_id::from_text(&t));
    let directory_id = directory_id::load_or_create(&cfg.data_dir.join("controller"), inherited).map_err(ControllerError::Storage)?;
    let clean_shutdown_of = if cfg.broker { super::clean_shutdown::take(&cfg.data_dir) } else { None };
    // One waiting update per shard at most; newer ones merge into it (`shard_updates`).
    let (senders, receivers): (Vec<Box<dyn UpdateSink>>, Vec<_>) = (0..shard_count)
        .map(|_| {
            let (tx, rx) = shard_updates();
            (Box::new(tx) as Box<dyn UpdateSink>, rx)
        })
        .unzip();
    let publisher = Arc::new(Publisher::new(senders));
    let (req_tx, req_rx) = async_channel::bounded(REQUEST_QUEUE);
    let (ready_tx, ready_rx) = mpsc::channel();

    let thread_publisher = publisher.clone();
    // The RPC server queues forwarded requests behind local ones; a weak end would do,
    // but `handle.shutdown()` closes the channel for every sender anyway.
    let forwarded_tx = req_tx.clone();
    let thread = std::thread::Builder::new()
        .name("controller".into())
        .spawn(move || run_thread(cfg, (incarnation, clean_shutdown_of, directory_id), thread_publisher, req_rx, forwarded_tx, ready_tx))
        .map_err(|e| ControllerError::Storage(format!("cannot spawn the controller thread: {e}")))?;

    let ready = ready_rx.recv();
    let handle = ControllerHandle::new(req_tx, publisher, thread, incarnation, directory_id);
    match ready {
        Ok(Ok(())) => Ok((handle, receivers)),
        Ok(Err(e)) => {
            handle.join();
            Err(e)
        }
        Err(_) => {
            handle.join();
            Err(ControllerError::Storage("the controller thread exited during start-up (see logs)".into()))
        }
    }
}

fn run_thread(
    cfg: ControllerConfig,
    (incarnation, clean_shutdown_of, directory_id): ([u8; 16], Option<[u8; 16]>, [u8; 16]),
    publisher: Arc<Publisher>,
    requests: async_channel::Receiver<Request>,
    forwarded: async_channel::Sender<Request>,
    ready: mpsc::Sender<Result<(), ControllerError>>,
) {
    if let Some(core) = cfg.core {
        if !core_affinity::set_for_current(core_affinity::CoreId { id: core }) {
            tracing::warn!(core, "controller: could not pin thread to core; running unpinned");
        }
    }
    // IO for the controller listener and the connections to peers (the tokio net driver
    // is one epoll fd; a single node never uses it).
    let rt = match tokio::runtime::Builder::new_current_thread().enable_time().enable_io().build() {
        Ok(rt) => rt,
        Err(e) => {
            let _ = ready.send(Err(ControllerError::Storage(format!("cannot build the controller runtime: {e}"))));
            return;
        }
    };
    rt.block_on(async move {
        let heartbeats = forwarded.clone();
        // Closes of controller connections (`rpc_server.rs`): a crashed broker's is fenced
        // without waiting out its session timeout (`Liveness::on_connection_closed`).
        // Bounded: a flood of connections closing waits for the request loop (each closing
        // connection's task awaits room; nothing the loop waits for needs those tasks).
        let (closed_tx, closed) = async_channel::bounded::<ConnectionClosed>(CLOSED_QUEUE);
        let raft = match boot(&cfg, directory_id, &publisher, forwarded, closed_tx).await {
            Ok(raft) => raft,
            Err(e) => {
                tracing::error!(error = %e, "controller start-up failed");
                let _ = ready.send(Err(e));
                return;
            }
        };
        let ctx = ProposeCtx {
            default_num_partitions: cfg.default_num_partitions,
            default_replication_factor: cfg.default_replication_factor,
            defaults: &cfg.topic_defaults,
            unstable_feature_versions: cfg.unstable_feature_versions,
            remote_storage_system_enabled: cfg.remote_storage_system_enabled,
        };
        let mut router = Router {
            me: cfg.node_id as u64, // checked >= 0 by raft_node_id in start()
            voters: &cfg.voters,
            contacts: contacts(&cfg),
            tls: cfg.rpc_tls.clone(),
            peers: BTreeMap::new(),
            liveness: Liveness::new(cfg.session_timeout, cfg.topic_defaults.unclean_leader_election_enable)
                .with_min_isr_default(cfg.topic_defaults.min_insync_replicas),
            next_voter: 0,
            shutting_down: Arc::new(AtomicBool::new(false)),
        };
        // Registered before the shards get their first image, so they start leading
        // their partitions at once (a single node is then as before: it leads all). A
        // controller-only node has no broker: it never registers.
        let registration = cfg.broker.then(|| registration(&cfg, incarnation));
        if let Some(registration) = &registration {
            let heartbeat = ClientRequest::BrokerHeartbeat { broker: registration.clone(), clean_shutdown_of };
            if let Err(e) = router.route(&ctx, &raft, &publisher, heartbeat, false, None).await {
                tracing::warn!(error = %e, "controller: broker registration failed; heartbeats retry it");
            }
        }
        if !cfg.broker {
            // A controller-only node has no broker to write its metadata dir's
            // meta.properties (`server/stray_partitions.rs` does on brokers): it writes it
            // here, with the directory id `kafka-metadata-quorum.sh add-controller` reads.
            let cluster_id = publisher.image().cluster_id.clone();
            if let Err(e) =
                crate::storage::meta_properties::check_or_claim(&cfg.data_dir, &cluster_id, cfg.node_id, Some(&directory_id::to_text(&directory_id)))
            {
                tracing::error!(error = %e, "controller start-up failed");
                let _ = ready.send(Err(ControllerError::Config(e)));
                return;
            }
        }
        if let Some(update) = voters::announcement(&raft, router.me, directory_id, &own_listener(&cfg)) {
            tokio::spawn(announce(update, heartbeats.clone()));
        }
        publisher.go_live();
        let _ = ready.send(Ok(()));
        if let Some(broker) = registration {
            let sender = HeartbeatSender {
                me: router.me,
                broker,
                clean_shutdown_of,
                every: heartbeat_interval(cfg.session_timeout),
                session_timeout: cfg.session_timeout,
                voters: cfg.voters.clone(),
                contacts: router.contacts.clone(),
                tls: cfg.rpc_tls.clone(),
                stopped: router.shutting_down.clone(),
            };
            tokio::spawn(sender.run(raft.clone(), heartbeats));
        }
        let mut fencing_timer = tokio::time::interval(fencing_check_interval(cfg.session_timeout));
        fencing_timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // Kafka's first imbalance check comes one interval after start, too.
        let every = cfg.leader_imbalance_check_interval.max(Duration::from_secs(1));
        let mut rebalance_timer = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        rebalance_timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let every = cfg.delegation_token_expiry_check_interval.max(Duration::from_millis(100));
        let mut token_expiry_timer = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        token_expiry_timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut disconnects_checked = Instant::now();
        loop {
            // A broker whose connection closed is fenced when its grace ends, not at the
            // next regular tick (up to a tenth of a session timeout later).
            let disconnect_deadline = router.liveness.next_disconnect_deadline(disconnects_checked);
            let disconnect_check = async {
                match disconnect_deadline {
                    Some(at) => tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                req = requests.recv() => {
                    let Ok(req) = req else { break };
                    router.serve(&ctx, &raft, &publisher, req, cfg.session_timeout).await;
                }
                Ok(c) = closed.recv() => router.liveness.on_connection_closed(c.conn, Instant::now()),
                _ = disconnect_check => {
                    disconnects_checked = disconnect_deadline.unwrap_or_else(Instant::now);
                    router.serve_queued(&ctx, &raft, &publisher, &requests, cfg.session_timeout).await;
                    router.fence_silent_brokers(&raft, &publisher).await
                }
                _ = fencing_timer.tick() => {
                    router.serve_queued(&ctx, &raft, &publisher, &requests, cfg.session_timeout).await;
                    router.fence_silent_brokers(&raft, &publisher).await
                }
                _ = token_expiry_timer.tick() => router.remove_expired_tokens(&raft, &publisher).await,
                _ = rebalance_timer.tick(), if cfg.auto_leader_rebalance_enable => {
                    router.rebalance_leaders(&raft, &publisher, cfg.leader_imbalance_per_broker_percentage).await
                }
            }
        }
        tracing::info!("controller shutting down");
        if cfg.snapshot_at_shutdown {
            snapshot_before_stopping(&raft).await;
        }
        if let Err(e) = raft.shutdown().await {
            tracing::warn!(error = %e, "controller raft shutdown");
        }
    });
}

/// How long a stopping controller waits for its snapshot.
const SHUTDOWN_SNAPSHOT_TIMEOUT: Duration = Duration::from_secs(30);

/// A clean stop leaves a snapshot of everything applied, so the next start loads the
/// image instead of replaying the log since the last snapshot: each entry that fences or
/// elects touches every partition, and a 100k-partition node replayed ~2 s of them per
/// start (more after each restart) with snapshots every 1,024 entries. A failure only
/// costs the next start that replay.
async fn snapshot_before_stopping(raft: &Raft) {
    let (applied, snapshot) = {
        let m = raft.metrics();
        let m = m.borrow_watched();
        (m.last_applied.map(|l| l.index), m.snapshot.map(|l| l.index))
    };
    if applied.is_none() || snapshot >= applied {
        return;
    }
    let started = Instant::now();
    if let Err(e) = raft.trigger().snapshot().await {
        tracing::warn!(error = %e, "controller: no snapshot at shutdown");
        return;
    }
    let done = raft.wait(Some(SHUTDOWN_SNAPSHOT_TIMEOUT)).metrics(|m| m.snapshot.map(|l| l.index) >= applied, "snapshot at shutdown").await;
    match done {
        Ok(_) => tracing::info!(index = applied, took_ms = started.elapsed().as_millis() as u64, "controller: snapshot taken at shutdown"),
        Err(e) => tracing::warn!(error = %e, "controller: no snapshot at shutdown"),
    }
}

/// Raft timing, chosen for controller failover well under 2 s (Kafka 4.1 takes 2.25 s at
/// the median on 3 local nodes): the leader heartbeats every 50 ms; a follower that hears
/// nothing for a random 200-400 ms campaigns. Four heartbeats fit in the shortest timeout,
/// so a late heartbeat on a busy machine does not depose a healthy leader, and the 200 ms
/// spread makes split votes rare. openraft's leader lease (= election_timeout_max) keeps
/// voters from granting a vote for 400 ms after they last heard the leader. After `kill -9`
/// of the leader: lease + election + one vote round trip + the new leader's blank entry:
/// p50 0.83 s, p99 0.91 s over 20 kills to a committed CreateTopics through a survivor
/// (benches/controller_failover.py; 100/300-600 ms gave ~1.05 s). The cost is 20 small
/// AppendEntries per second per follower. Lower values would start elections on a
/// loaded 2-core machine whenever the controller thread waits a few hundred ms for a core.
fn raft_config(cfg: &ControllerConfig) -> Result<Config, ControllerError> {
    Config {
        cluster_name: "shardlog-controller".into(),
        heartbeat_interval: 50,
        election_timeout_min: 200,
        election_timeout_max: 400,
        snapshot_policy: SnapshotPolicy::LogsSinceLast(cfg.snapshot_every_entries.max(1)),
        // The snapshot holds everything; keeping no log behind it keeps the log file small.
        // A follower that falls behind the purge point gets the snapshot (InstallSnapshot).
        max_in_snapshot_log_to_keep: 0,
        // A restarted leader campaigns like everybody else. openraft's default lets it
        // resume leading at once, which its docs call unsafe when the committed index is
        // not persisted (ours is not): it leads with a stale image, and its linearizable
        // read (`caught_up`) does not see the records committed before the crash (the
        // seeded simulation found it: a CreateTopic placed a leader on a fenced broker).
        enable_leader_restore: Some(false),
        ..Default::default()
    }
    .validate()
    .map_err(|e| ControllerError::Config(format!("raft config: {e}")))
}

/// Opens storage, starts raft, waits until this node leads and has applied its whole log,
/// and makes sure the cluster has an id.
async fn boot(
    cfg: &ControllerConfig,
    directory_id: [u8; 16],
    publisher: &Arc<Publisher>,
    forwarded: async_channel::Sender<Request>,
    closed: async_channel::Sender<ConnectionClosed>,
) -> Result<Raft, ControllerError> {
    let node_id = raft_node_id(cfg.node_id)?;
    if is_observer(cfg, node_id) && cfg.listener.is_none() {
        return Err(ControllerError::Config(format!(
            "node {node_id} is not among the quorum voters {:?}: as an observer it needs a controller listener",
            cfg.voters.keys().collect::<Vec<_>>()
        )));
    }
    // Bind first: a taken port fails start-up before anything else is opened.
    let listener = match &cfg.listener {
        Some(addr) => Some(rpc_server::bind(addr).await?),
        None => None,
    };
    let dir: PathBuf = cfg.data_dir.join("controller");
    let log = LogStore::open(&dir).map_err(|e| ControllerError::Storage(format!("controller log in {}: {e}", dir.display())))?;
    let sm = StateMachine::open(dir.clone(), publisher.clone()).map_err(ControllerError::Storage)?;
    let config = Arc::new(raft_config(cfg)?);
    let addresses = PeerAddresses::default();
    let raft = Raft::new(node_id, config, Network { tls: cfg.rpc_tls.clone(), addresses: addresses.clone() }, log, sm)
        .await
        .map_err(|e| ControllerError::Storage(format!("controller raft start: {e}")))?;
    tokio::spawn(track_peer_addresses(raft.clone(), addresses));
    publisher.set_raft_metrics(raft.metrics());
    if let Some(listener) = listener {
        // Peers must reach this node before it can recover (elections need them).
        tokio::spawn(rpc_server::serve(listener, raft.clone(), forwarded, closed, cfg.rpc_tls.clone(), publisher.clone()));
    }
    tokio::spawn(log_leader_changes(raft.clone(), node_id));
    // A node the log already makes a voter (added by AddRaftVoter) does not join again. An
    // observer always asks (idempotent): the leader may have retired it meanwhile
    // (UnregisterBroker) while its own log still lists it. It asks the voters its log
    // knows first, then the configured ones: those may all have been replaced.
    // The metrics show the stored membership once the raft core has loaded it.
    if raft.is_initialized().await.unwrap_or(false) {
        let _ = raft.wait(Some(Duration::from_secs(5))).metrics(|m| m.membership_config.log_id().is_some(), "the stored membership").await;
    }
    let voter_in_log = is_voter(&raft, node_id);
    let joined = if is_observer(cfg, node_id) && !voter_in_log {
        // The leader must know this learner before it replicates anything to it.
        let me = ControllerNode { addr: own_listener(cfg), directory_id, controller: cfg.controller_role };
        observer::join(&me, node_id, &known_contacts(&raft, &contacts(cfg)), cfg.rpc_tls.clone(), Instant::now() + RECOVERY_TIMEOUT).await
    } else {
        Ok(())
    };
    match async {
        joined?;
        recover(cfg, node_id, directory_id, &raft, publisher).await
    }
    .await
    {
        Ok(()) => Ok(raft),
        Err(e) => {
            if let Err(se) = raft.shutdown().await {
                tracing::warn!(error = %se, "controller raft shutdown after failed start");
            }
            Err(e)
        }
    }
}

async fn recover(cfg: &ControllerConfig, node_id: u64, directory_id: [u8; 16], raft: &Raft, publisher: &Publisher) -> Result<(), ControllerError> {
    let initialized = raft.is_initialized().await.map_err(|e| ControllerError::Storage(e.to_string()))?;
    if initialized {
        quorum_start::check_persisted_voters(cfg, node_id, directory_id, raft)?;
        announce_moved_listener(cfg, node_id, directory_id, raft);
    } else if !is_observer(cfg, node_id) {
        quorum_start::initialize(cfg, node_id, directory_id, raft).await?;
    }
    // Wait for a leader (this node, in a single-node quorum) and for this node to have
    // applied the whole committed log before its shards start. A leader has applied its
    // whole log once its own blank entry (the last one) is applied. A follower learns the
    // cluster's commit index from the leader's appends; until then (None) it waits, so it
    // never goes live with a partly replayed image.
    raft.wait(Some(RECOVERY_TIMEOUT))
        .metrics(
            |m| {
                let applied = m.last_applied.as_ref().map(|l| l.index);
                match m.current_leader {
                    Some(leader) if leader == node_id => applied >= m.last_log_index,
                    Some(_) => {
                        let committed = m.cluster_committed.as_ref().map(|l| l.index);
                        committed.is_some() && applied >= committed
                    }
                    None => false,
                }
            },
            "a quorum leader is known and the committed log is applied",
        )
        .await
        .map_err(|e| ControllerError::NotController(format!("controller did not recover: {e}")))?;

    // The first leader writes the cluster id; others wait until they have applied it.
    let deadline = Instant::now() + RECOVERY_TIMEOUT;
    while publisher.image().cluster_id.is_empty() {
        if Instant::now() >= deadline {
            return Err(ControllerError::NotController("no cluster id was committed during start-up".into()));
        }
        if raft.current_leader().await == Some(node_id) {
            let cluster_id = propose::new_cluster_id();
            tracing::info!(%cluster_id, "controller: new cluster id");
            // InitCluster is first-writer-wins on apply, so a retry is harmless.
            if let Err(e) = raft.client_write(Command::InitCluster { cluster_id }).await {
                tracing::warn!(error = %e, "controller: cannot write the cluster id yet");
            }
        } else {
            tokio::time::sleep(ROUTE_RETRY).await;
        }
    }
    let image = publisher.image();
    if cfg.broker {
        // A controller-only node hosts no partitions (legacy replica-less ones included).
        quorum_start::check_placement(&image, cfg.node_id, cfg.shard_count)?;
    }
    tracing::info!(
        cluster_id = %image.cluster_id, topics = image.topics.len(), applied_index = image.applied_index,
        "controller recovered"
    );
    Ok(())
}

/// A voter whose controller listener moved since the log recorded it cannot recover
/// through its own raft: the leader replicates to the old listener. It tells the leader
/// (UpdateRaftVoter) through the other voters directly, while recovery waits; once the
/// change commits the leader's peer client follows it (`network::PeerAddresses`).
fn announce_moved_listener(cfg: &ControllerConfig, node_id: u64, directory_id: [u8; 16], raft: &Raft) {
    let own = own_listener(cfg);
    let Some(old) = raft.metrics().borrow_watched().membership_config.membership().get_node(&node_id).map(|n| n.addr.clone()) else { return };
    let moved = !own.is_empty() && old != own;
    let Some(update) = voters::announcement(raft, node_id, directory_id, &own).filter(|_| moved) else {
        return;
    };
    let contacts: Vec<String> = known_contacts(raft, &contacts(cfg)).into_iter().filter(|a| *a != own && *a != old).collect();
    let tls = cfg.rpc_tls.clone();
    tokio::spawn(async move {
        match observer::ask_leader(update, &contacts, tls, Instant::now() + RECOVERY_TIMEOUT).await {
            Ok(()) => tracing::info!(node = node_id, listener = %own, "controller: this voter's new controller listener recorded (UpdateRaftVoter)"),
            Err(e) => tracing::warn!(error = %e, "controller: UpdateRaftVoter for this voter's new listener not done"),
        }
    });
}

/// A node outside a non-empty voter set, or one that joins through bootstrap servers,
/// follows the quorum as a learner (broker-only, or a controller until AddRaftVoter).
fn is_observer(cfg: &ControllerConfig, node_id: u64) -> bool {
    (!cfg.voters.is_empty() || !cfg.bootstrap_servers.is_empty()) && !cfg.voters.contains_key(&node_id)
}

/// This node's controller listener as the quorum reaches it ("" for a single node).
fn own_listener(cfg: &ControllerConfig) -> String {
    cfg.advertised_listener.clone().or_else(|| cfg.listener.clone()).unwrap_or_default()
}

/// Whom a node that knows no leader asks: the configured voters, then the bootstrap
/// servers (KIP-853's controller.quorum.bootstrap.servers).
fn contacts(cfg: &ControllerConfig) -> Vec<String> {
    let mut out: Vec<String> = cfg.voters.values().cloned().collect();
    out.extend(cfg.bootstrap_servers.iter().filter(|a| !cfg.voters.values().any(|v| v == *a)).cloned());
    out
}

/// This node's broker registration; a new incarnation id per process start.
fn registration(cfg: &ControllerConfig, incarnation: [u8; 16]) -> BrokerMeta {
    BrokerMeta {
        id: cfg.node_id,
        incarnation,
        host: cfg.advertised_host.clone(),
        port: cfg.advertised_port,
        rack: cfg.rack.clone(),
        shard_count: cfg.shard_count,
        fenced: false,
        listeners: cfg.listeners.clone(),
    }
}

/// The variant name of a request (for logs: the request itself may be large).
fn request_kind(req: &ClientRequest) -> String {
    let debug = format!("{req:?}");
    debug.split([' ', '{', '(']).next().unwrap_or_default().to_string()
}

/// A voter's UpdateRaftVoter at start (`voters::announcement`), through the request queue
/// like a heartbeat; retried while the quorum is busy with another change or has no
/// leader, for as long as recovery may take.
async fn announce(update: ClientRequest, requests: async_channel::Sender<Request>) {
    let deadline = Instant::now() + RECOVERY_TIMEOUT;
    loop {
        let (reply, answer) = futures::channel::oneshot::channel();
        if requests.send(Request { body: update.clone(), forwarded: false, via: None, reply }).await.is_err() {
            return;
        }
        let retry = match answer.await {
            Ok(Ok(_)) => {
                tracing::info!(?update, "controller: this voter's membership entry updated (UpdateRaftVoter)");
                return;
            }
            Ok(Err(ControllerError::Membership(crate::controller::MembershipError::UnsupportedVersion, why))) => {
                tracing::info!(%why, "controller: this voter's membership entry stays as it is (kraft.version 0)");
                return;
            }
            Ok(Err(e @ (ControllerError::Membership(crate::controller::MembershipError::RequestTimedOut, _) | ControllerError::NotController(_)))) => e,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "controller: UpdateRaftVoter for this voter refused");
                return;
            }
            Err(_) => return,
        };
        if Instant::now() >= deadline {
            tracing::warn!(error = %retry, "controller: UpdateRaftVoter for this voter not done; the quorum stayed busy");
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Logs one line per change of quorum leader or term. `scripts/cluster.sh status` and the
/// test harness read the active controller from the latest such line of the live nodes
/// (`LEADER_LOG_LINE`); DescribeQuorum (API 55) will report it on the wire.
async fn log_leader_changes(raft: Raft, me: u64) {
    let mut last = (None, 0);
    loop {
        let changed = raft.wait(Some(Duration::from_secs(3600))).metrics(|m| (m.current_leader, m.current_term) != last, "a quorum leader change").await;
        match changed {
            Ok(m) => {
                last = (m.current_leader, m.current_term);
                let leader = m.current_leader.map_or(-1, |l| l as i64);
                tracing::info!("{LEADER_LOG_LINE} leader={leader} term={} node={me} state={:?}", m.current_term, m.state);
            }
            Err(WaitError::Timeout(..)) => {}
            Err(WaitError::ShuttingDown) => return,
        }
    }
}

/// Keeps `addresses` equal to the membership's nodes (the latest membership entry, as
/// openraft replicates by it), so peer clients follow a voter whose listener changed.
async fn track_peer_addresses(raft: Raft, addresses: PeerAddresses) {
    let mut seen = None;
    loop {
        let changed = raft.wait(Some(Duration::from_secs(3600))).metrics(|m| Some(m.membership_config.clone()) != seen, "a membership change").await;
        match changed {
            Ok(m) => {
                addresses.set(m.membership_config.membership().nodes().map(|(id, n)| (*id, n)));
                seen = Some(m.membership_config.clone());
            }
            Err(WaitError::Timeout(..)) => {}
            Err(WaitError::ShuttingDown) => return,
        }
    }
}

/// The fixed start of the leader-change log line (parsed by tests/integration/cluster_harness.py).
pub const LEADER_LOG_LINE: &str = "controller quorum:";

/// Proposes `cmd` and waits for it to be applied.
async fn write(raft: &Raft, cmd: Command) -> Result<Applied, ControllerError> {
    // A leader cut off from its quorum can wait for a commit forever: bound it, so the
    // request loop moves on (the entry may still commit later; a retry then sees it).
    match tokio::time::timeout(ROUTE_DEADLINE, raft.client_write(cmd)).await {
        Ok(Ok(resp)) => resp.data.0.map_err(ControllerError::from),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "controller: proposal failed");
            Err(ControllerError::NotController(e.to_string()))
        }
        Err(_) => Err(ControllerError::NotController(format!("the proposal was not committed within {} s (no quorum?)", ROUTE_DEADLINE.as_secs()))),
    }
}

/// Waits until this leader's image holds every committed record: a new leader has all of
/// them in its log but applies its predecessor's last ones only once its own first entry
/// commits. A proposal validated before that could undo one (a CreateTopic placing a
/// leader on a broker a FenceBroker just fenced: found by the seeded simulation,
/// `simulation_brokers.rs`). openraft's linearizable read; with the lease it costs no
/// round trip while the lease holds, and fails (NOT_CONTROLLER, retried) when it lapsed.
pub(super) async fn caught_up(raft: &Raft) -> Result<(), ControllerError> {
    match tokio::time::timeout(FORWARD_TTL, raft.ensure_linearizable(ReadPolicy::LeaseRead)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(ControllerError::NotController(format!("not ready to lead: {e}"))),
        Err(_) => Err(ControllerError::NotController("the committed log was not applied in time".into())),
    }
}

fn unexpected(what: &str, got: Applied) -> ControllerError {
    ControllerError::Storage(format!("internal: {what} applied as {got:?}"))
}

/// Executes a request on the leader: validates it against the committed image, proposes,
/// waits for the apply.
async fn execute(
    ctx: &ProposeCtx<'_>,
    raft: &Raft,
    publisher: &Publisher,
    liveness: &mut Liveness,
    req: ClientRequest,
    via: Option<u64>,
) -> Result<ClientReply, ControllerError> {
    let image = publisher.image();
    match req {
        ClientRequest::ControlledShutdown { broker, incarnation } => {
            let term = raft.metrics().borrow_watched().current_term;
            match liveness.on_controlled_shutdown(term, &image, broker, incarnation, Instant::now()) {
                None => Ok(ClientReply::Done),
                Some(cmd) => write(raft, cmd).await.map(|_| ClientReply::Done),
            }
        }
        ClientRequest::BrokerHeartbeat { broker, clean_shutdown_of } => {
            let term = raft.metrics().borrow_watched().current_term;
            match liveness.on_heartbeat(term, &image, &broker, clean_shutdown_of, via, Instant::now()) {
                None => Ok(ClientReply::Done),
                Some(cmd) => write(raft, cmd).await.map(|_| ClientReply::Done),
            }
        }
        ClientRequest::CreateTopic { name, num_partitions, replication_factor, assignments, configs, validate_only } => {
            let topic_id = *uuid::Uuid::new_v4().as_bytes();
            match propose::create_topic(ctx, &image, name, propose::Layout { num_partitions, replication_factor, assignments: &assignments }, configs, topic_id)
            {
                Err(e) => Err(e),
                Ok((_, preview)) if validate_only => Ok(ClientReply::Topic(preview)),
                Ok((cmd, _)) => match write(raft, cmd).await {
                    Ok(Applied::TopicCreated(meta)) => Ok(ClientReply::Topic(meta)),
                    Ok(other) => Err(unexpected("CreateTopic", other)),
                    Err(e) => Err(e),
                },
            }
        }
        ClientRequest::DeleteTopic { name } => match propose::delete_topic(&image, &name) {
            Err(e) => Err(e),
            Ok(cmd) => match write(raft, cmd).await {
                Ok(Applied::TopicDeleted { topic_id }) => Ok(ClientReply::TopicId(topic_id)),
                Ok(other) => Err(unexpected("DeleteTopic", other)),
                Err(e) => Err(e),
            },
        },
        ClientRequest::CreatePartitions { name, total_count, assignments, validate_only } => {
            match propose::create_partitions(ctx, &image, &name, total_count, &assignments) {
                Err(e) => Err(e),
                Ok(_) if validate_only => Ok(ClientReply::Done),
                Ok(cmd) => write(raft, cmd).await.map(|_| ClientReply::Done),
            }
        }
        ClientRequest::AlterConfigs { name, ops, replace, validate_only } => match propose::alter_configs(ctx, &image, &name, ops, replace) {
            Err(e) => Err(e),
            Ok(_) if validate_only => Ok(ClientReply::Done),
            Ok(cmd) => write(raft, cmd).await.map(|_| ClientReply::Done),
        },
        ClientRequest::AlterResourceConfigs { resource, ops, replace, validate_only } => {
            match propose::alter_resource_configs(&image, resource, ops, replace) {
                Err(e) => Err(e),
                Ok(_) if validate_only => Ok(ClientReply::Done),
                Ok(cmd) => write(raft, cmd).await.map(|_| ClientReply::Done),
            }
        }
        ClientRequest::AddObserver { id, addr, directory_id, controller } => {
            observer::add(raft, id, ControllerNode { addr, directory_id, controller }, ROUTE_DEADLINE).await
        }
        ClientRequest::AddVoter { id, directory_id, addr } => voters::add(raft, &image, id, directory_id, addr, ROUTE_DEADLINE).await,
        ClientRequest::RemoveVoter { id, directory_id } => voters::remove(raft, &image, id, directory_id, ROUTE_DEADLINE).await,
        ClientRequest::UpdateVoter { id, directory_id, addr } => voters::update(raft, &image, id, directory_id, addr, ROUTE_DEADLINE).await,
        ClientRequest::UnregisterBroker { broker } => {
            let Some(registered) = image.brokers.get(&broker) else {
                return Err(ControllerError::BrokerIdNotRegistered(format!("Broker ID {broker} is not currently registered")));
            };
            // A fenced broker's process is gone (or cut off): its observer is retired too. A
            // live one re-registers with its next heartbeat, as in Kafka, and keeps following.
            let retire_observer = registered.fenced;
            let cmd = Command::UnregisterBroker {
                broker,
                unclean_default: ctx.defaults.unclean_leader_election_enable,
                min_isr_default: ctx.defaults.min_insync_replicas,
            };
            write(raft, cmd).await?;
            liveness.forget(broker);
            if retire_observer {
                if let Ok(id) = u64::try_from(broker) {
                    voters::remove_observer(raft, id, ROUTE_DEADLINE).await?;
                }
            }
            Ok(ClientReply::Done)
        }
        ClientRequest::ElectLeaders { election, topics } => {
            let mut plan = election::plan(&image, election, topics.as_deref());
            if !plan.to_elect.is_empty() {
                match write(raft, Command::ElectLeaders { election, partitions: plan.to_elect.clone() }).await? {
                    Applied::Elected(applied) => plan.settle(&applied),
                    other => return Err(unexpected("ElectLeaders", other)),
                }
            }
            Ok(ClientReply::Elections(plan.results))
        }
        ClientRequest::AlterPartitionReassignments { topics, allow_replication_factor_change } => {
            reassign(raft, publisher, topics, allow_replication_factor_change).await.map(ClientReply::Reassignments)
        }
        ClientRequest::AlterPartition { topic_id, partition, leader, leader_epoch, partition_epoch, new_isr, new_isr_epochs } => {
            // Checked here first (a refused request writes nothing), again on apply.
            let req = AlterIsr { topic_id: &topic_id, partition, leader, leader_epoch, partition_epoch, new_isr: &new_isr, new_isr_epochs: &new_isr_epochs };
            let checked = alter_partition::check(&image, req).map_err(ControllerError::AlterPartition)?;
            if checked.isr.is_none() {
                // The ISR asked for is the current one: nothing to commit (Kafka writes no record).
                let p = image.topic(&checked.topic).and_then(|t| t.partition(partition)).cloned();
                return p.map(ClientReply::Partition).ok_or(ControllerError::AlterPartition(AlterPartitionError::UnknownTopicOrPartition));
            }
            let cmd = Command::AlterPartition { topic_id, partition, leader, leader_epoch, partition_epoch, new_isr, new_isr_epochs };
            match write(raft, cmd).await? {
                Applied::PartitionAltered(meta) => Ok(ClientReply::Partition(meta)),
                other => Err(unexpected("AlterPartition", other)),
            }
        }
        ClientRequest::AlterScramCredentials { upsertions, deletions } => {
            // Kafka's ScramControlManager: deleting what does not exist is refused per user.
            let (present, missing): (Vec<_>, Vec<_>) = deletions.into_iter().partition(|(user, m)| image.security.scram_credential(user, *m).is_some());
            if !upsertions.is_empty() || !present.is_empty() {
                write(raft, Command::AlterScramCredentials { upsertions, deletions: present }).await?;
            }
            Ok(ClientReply::MissingScramCredentials(missing))
        }
        ClientRequest::CreateAcls { acls } => {
            if acls.iter().any(|b| !image.security.acls.contains(b)) {
                write(raft, Command::CreateAcls { acls }).await?;
            }
            Ok(ClientReply::Done)
        }
        ClientRequest::DeleteAcls { filters } => {
            // Kafka's AclControlManager: each filter's matches among the current ACLs, all
            // removed together.
            let matched: Vec<Vec<_>> = filters.iter().map(|f| image.security.acls.iter().filter(|b| f.matches(b)).cloned().collect()).collect();
            let mut all: Vec<_> = matched.iter().flatten().cloned().collect();
            all.sort();
            all.dedup();
            if !all.is_empty() {
                write(raft, Command::DeleteAcls { acls: all }).await?;
            }
            Ok(ClientReply::DeletedAcls(matched))
        }
        ClientRequest::UpdateFeatures { updates, validate_only } => {
            let levels =
                crate::cluster::features::check_updates(&image.features, &updates, raft.metrics().borrow_watched().id as i32, ctx.unstable_feature_versions)
                    .map_err(ControllerError::InvalidUpdateVersion)?;
            if !validate_only && !levels.is_empty() {
                write(raft, Command::UpdateFeatures { levels }).await?;
            }
            Ok(ClientReply::Done)
        }
        ClientRequest::AlterClientQuotas { entries } => {
            write(raft, Command::AlterClientQuotas { entries }).await?;
            Ok(ClientReply::Done)
        }
        ClientRequest::PutDelegationToken { token } => {
            write(raft, Command::PutDelegationToken { token }).await?;
            Ok(ClientReply::Done)
        }
        ClientRequest::RemoveDelegationToken { token_id } => {
            write(raft, Command::RemoveDelegationTokens { token_ids: vec![token_id] }).await?;
            Ok(ClientReply::Done)
        }
        ClientRequest::RemoteLogSegment { topic_id, partition, leader, leader_epoch, segment, expected } => {
            write(raft, Command::RemoteLogSegment { topic_id, partition, leader, leader_epoch, segment, expected }).await?;
            Ok(ClientReply::Done)
        }
        ClientRequest::RemoteLogStartOffset { topic_id, partition, leader, leader_epoch, offset } => {
            write(raft, Command::RemoteLogStartOffset { topic_id, partition, leader, leader_epoch, offset }).await?;
            Ok(ClientReply::Done)
        }
        ClientRequest::DescribeQuorum => quorum_info::describe(&raft.metrics().borrow_watched())
            .map(ClientReply::Quorum)
            .ok_or_else(|| ControllerError::NotController("this node no longer leads".into())),
        ClientRequest::AllocateProducerIds { count } => match propose::allocate_producer_ids(&image, count) {
            Err(e) => Err(e),
            Ok(cmd) => match write(raft, cmd).await {
                Ok(Applied::ProducerIds { first }) => Ok(ClientReply::FirstProducerId(first)),
                Ok(other) => Err(unexpected("AllocateProducerIds", other)),
                Err(e) => Err(e),
            },
        },
    }
}

/// AlterPartitionReassignments on the leader: each partition checked against the image
/// as the previous ones left it (`reassignment::plan`: a refused one writes nothing) and
/// written as its own record, which apply checks again.
async fn reassign(
    raft: &Raft,
    publisher: &Publisher,
    topics: Vec<(String, Vec<reassignment::PartitionReassignment>)>,
    allow_replication_factor_change: bool,
) -> Result<Vec<reassignment::TopicReassignmentResult>, ControllerError> {
    let mut results = Vec::with_capacity(topics.len());
    for (topic, partitions) in topics {
        let mut out = Vec::with_capacity(partitions.len());
        for (partition, target) in partitions {
            let image = publisher.image();
            let res = match reassignment::plan(&image, &topic, partition, target.as_deref(), allow_replication_factor_change) {
                Err(e) => Err(e),
                Ok(None) => Ok(()),
                Ok(Some(p)) => match write(raft, Command::AlterPartitionReassignments { topic_id: p.topic_id, partition, target: p.target }).await {
                    Ok(_) => Ok(()),
                    Err(ControllerError::Reassignment(e)) => Err(e),
                    Err(e) => return Err(e),
                },
            };
            out.push((partition, res));
        }
        results.push((topic, out));
    }
    Ok(results)
}

/// Sends each request to the quorum leader: executes it here if this node leads, else
/// forwards it over a connection per peer (kept across requests).
struct Router<'a> {
    me: u64,
    /// controller_quorum_voters: where a leader is reached when the membership has no
    /// address for it (never, once the log has been replayed; kept as the fallback).
    voters: &'a BTreeMap<u64, String>,
    /// Whom an observer that knows no leader asks (`contacts`).
    contacts: Vec<String>,
    /// The controller listener's mutual TLS, for the connections to the leader.
    tls: Option<Arc<super::rpc_tls::RpcTls>>,
    /// One connection per controller address (kept across requests).
    peers: BTreeMap<String, Connection>,
    /// Brokers' heartbeats, as this node sees them while it leads.
    liveness: Liveness,
    /// An observer that knows no leader yet asks the voters in turn: this one next.
    next_voter: usize,
    /// This node's broker asked for a controlled shutdown: its heartbeats stop.
    shutting_down: Arc<AtomicBool>,
}

/// Whom a node without a leader asks: the voters its log records (they follow
/// AddRaftVoter / RemoveRaftVoter), then `configured` (voters and bootstrap servers).
pub(super) fn known_contacts(raft: &Raft, configured: &[String]) -> Vec<String> {
    let m = raft.metrics().borrow_watched().membership_config.clone();
    let mut out: Vec<String> =
        m.membership().voter_ids().filter_map(|id| m.membership().get_node(&id).map(|n| n.addr.clone())).filter(|a| !a.is_empty()).collect();
    out.extend(configured.iter().filter(|c| !out.contains(c)).cloned().collect::<Vec<_>>());
    out
}

/// Whether the membership makes `id` a voter.
pub(super) fn is_voter(raft: &Raft, id: u64) -> bool {
    raft.metrics().borrow_watched().membership_config.membership().voter_ids().any(|v| v == id)
}

/// The controller listener of quorum member `id`: as the membership records it (it
/// follows AddRaftVoter / UpdateRaftVoter), else as controller_quorum_voters says.
pub(super) fn address_of(raft: &Raft, voters: &BTreeMap<u64, String>, id: u64) -> Option<String> {
    let m = raft.metrics().borrow_watched().membership_config.clone();
    m.membership().get_node(&id).map(|n| n.addr.clone()).filter(|a| !a.is_empty()).or_else(|| voters.get(&id).cloned())
}

/// Completes when this node learns of another quorum leader than `leader` (never for
/// None, nor once the raft stops): a call to a stopped or partitioned old leader is then
/// given up rather than waited out (it may have been executed: as after a timeout).
pub(super) async fn leader_moved(raft: &Raft, leader: Option<u64>) {
    if let Some(leader) = leader {
        // No timeout of its own (the calls it races have one): only a real change ends it.
        if raft.wait(None).metrics(|m| m.current_leader != Some(leader), "another quorum leader").await.is_ok() {
            return;
        }
    }
    std::future::pending::<()>().await
}

impl Router<'_> {
    /// The controller listener of quorum member `id`: as the membership records it (it
    /// follows AddRaftVoter / UpdateRaftVoter), else as controller_quorum_voters says.
    /// Whom an observer that knows no leader asks: the voters its log records, then the
    /// configured contacts.
    fn contacts_now(&self, raft: &Raft) -> Vec<String> {
        known_contacts(raft, &self.contacts)
    }

    fn address_of(&self, raft: &Raft, id: u64) -> Option<String> {
        address_of(raft, self.voters, id)
    }

    /// Serves one request to the controller and answers it.
    async fn serve(&mut self, ctx: &ProposeCtx<'_>, raft: &Raft, publisher: &Publisher, req: Request, session_timeout: Duration) {
        // Requests are served one at a time: one that takes a third of a session timeout
        // delays the heartbeats this loop executes while it leads (its own broker's and
        // those forwarded to it) enough to risk a fencing, so it is named. This node's
        // heartbeats to another leader do not wait here (`heartbeat_sender.rs`).
        let (started, kind) = (Instant::now(), request_kind(&req.body));
        let res = self.route(ctx, raft, publisher, req.body, req.forwarded, req.via).await;
        let took = started.elapsed();
        if took >= session_timeout / 3 {
            tracing::warn!(request = %kind, forwarded = req.forwarded, ms = took.as_millis() as u64, ok = res.is_ok(),
                "controller: a request held the controller loop (heartbeats to this leader waited behind it)");
        }
        let _ = req.reply.send(res);
    }

    /// Serves the requests already queued, before a fencing decision: after this loop
    /// stalled (a slow request, a paused process), the heartbeats that arrived meanwhile
    /// wait in the queue, and a fence decided ahead of them would fence brokers that did
    /// call in time. Bounded by the queue's length when called, so a stream of requests
    /// cannot hold the fencing off.
    async fn serve_queued(
        &mut self,
        ctx: &ProposeCtx<'_>,
        raft: &Raft,
        publisher: &Publisher,
        requests: &async_channel::Receiver<Request>,
        session_timeout: Duration,
    ) {
        for _ in 0..requests.len() {
            let Ok(req) = requests.try_recv() else { break };
            self.serve(ctx, raft, publisher, req, session_timeout).await;
        }
    }

    /// On the fencing timer: if this node leads, fences every broker silent for a
    /// session timeout (one committed record each; their partitions move in its apply).
    async fn fence_silent_brokers(&mut self, raft: &Raft, publisher: &Publisher) {
        let m = raft.metrics().borrow_watched().clone();
        let leading = (m.current_leader == Some(self.me)).then_some(m.current_term);
        if leading.is_some() && caught_up(raft).await.is_err() {
            return; // the next tick decides
        }
        // self.me came from a non-negative i32 node id.
        let me = i32::try_from(self.me).unwrap_or(i32::MAX);
        for cmd in self.liveness.on_fencing_tick(leading, &publisher.image(), me, Instant::now()) {
            if let Err(e) = write(raft, cmd.clone()).await {
                tracing::warn!(command = %cmd, error = %e, "controller: could not fence a broker");
            }
        }
    }

    /// On the rebalance timer: if this node leads, moves leadership back to the preferred
    /// replicas of brokers whose imbalance is above `percentage` (`election::imbalanced`).
    /// Kafka's delegation-token expiry check: the leader removes tokens past their expiry.
    async fn remove_expired_tokens(&self, raft: &Raft, publisher: &Publisher) {
        if raft.metrics().borrow_watched().current_leader != Some(self.me) || caught_up(raft).await.is_err() {
            return;
        }
        let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        let expired: Vec<String> = publisher.image().security.delegation_tokens.values().filter(|t| t.is_expired(now_ms)).map(|t| t.token_id.clone()).collect();
        if expired.is_empty() {
            return;
        }
        tracing::info!(tokens = expired.len(), "controller: removing expired delegation tokens");
        if let Err(e) = write(raft, Command::RemoveDelegationTokens { token_ids: expired }).await {
            tracing::warn!(error = %e, "controller: expired delegation tokens not removed");
        }
    }

    async fn rebalance_leaders(&self, raft: &Raft, publisher: &Publisher, percentage: u32) {
        // Planned on a caught-up image (as every proposal); apply re-checks each partition.
        if raft.metrics().borrow_watched().current_leader != Some(self.me) || caught_up(raft).await.is_err() {
            return;
        }
        let partitions = election::imbalanced(&publisher.image(), percentage);
        if partitions.is_empty() {
            return;
        }
        tracing::info!(partitions = partitions.len(), percentage, "controller: leaders imbalanced; electing preferred leaders");
        if let Err(e) = write(raft, Command::ElectLeaders { election: ElectionType::Preferred, partitions }).await {
            tracing::warn!(error = %e, "controller: preferred-leader rebalance not committed");
        }
    }

    async fn route(
        &mut self,
        ctx: &ProposeCtx<'_>,
        raft: &Raft,
        publisher: &Publisher,
        req: ClientRequest,
        forwarded: bool,
        via: Option<u64>,
    ) -> Result<ClientReply, ControllerError> {
        if !forwarded {
            match &req {
                // This node's broker is stopping: no heartbeat of it leaves from here on
                // (the periodic ones, and those opening a new connection to the leader).
                ClientRequest::ControlledShutdown { .. } => self.shutting_down.store(true, Ordering::Release),
                ClientRequest::BrokerHeartbeat { .. } if self.shutting_down.load(Ordering::Acquire) => return Ok(ClientReply::Done),
                _ => {}
            }
        }
        let deadline = Instant::now() + ROUTE_DEADLINE;
        loop {
            let res = match raft.current_leader().await {
                Some(leader) if leader == self.me => match caught_up(raft).await {
                    Ok(()) => execute(ctx, raft, publisher, &mut self.liveness, req.clone(), via).await,
                    Err(e) => Err(e),
                },
                _ if forwarded => return Err(ControllerError::NotController(format!("node {} does not lead the metadata quorum", self.me))),
                Some(leader) => match self.address_of(raft, leader) {
                    Some(addr) => self.forward(raft, addr, Some(leader), &req).await,
                    None => Err(ControllerError::NotController(format!("the quorum leader {leader} has no known controller listener"))),
                },
                // An observer learns the leader only from its appends: meanwhile any voter
                // may lead (a voter that does not answers NOT_CONTROLLER; the next is asked).
                None if !is_voter(raft, self.me) && !self.contacts_now(raft).is_empty() => {
                    let contacts = self.contacts_now(raft);
                    let contact = contacts[self.next_voter % contacts.len()].clone();
                    self.next_voter = self.next_voter.wrapping_add(1);
                    self.forward(raft, contact, None, &req).await
                }
                None => Err(ControllerError::NotController("no metadata quorum leader yet".into())),
            };
            match res {
                // Only a NotController is worth another try: every other answer is final.
                // A controlled shutdown is not retried: with no quorum leader (the last
                // voters stopping) the broker closes anyway, and waiting would only delay
                // its exit.
                Err(ControllerError::NotController(why)) if !forwarded && !matches!(req, ClientRequest::ControlledShutdown { .. }) => {
                    if Instant::now() + ROUTE_RETRY >= deadline {
                        return Err(ControllerError::NotController(format!("no metadata quorum leader answered within {} s: {why}", ROUTE_DEADLINE.as_secs())));
                    }
                    tracing::debug!(%why, "controller: request waits for a quorum leader");
                    tokio::time::sleep(ROUTE_RETRY).await;
                }
                res => return res,
            }
        }
    }

    /// `req` to the controller at `addr`, which is quorum leader `leader` as far as this
    /// node knows (None: an observer's guess); given up when another leader is learned.
    async fn forward(&mut self, raft: &Raft, addr: String, leader: Option<u64>, req: &ClientRequest) -> Result<ClientReply, ControllerError> {
        let tls = self.tls.clone();
        // No heartbeat goes on this connection (`heartbeat_sender.rs` has its own): its
        // close after a timed-out call is no news to the leader's liveness.
        let conn = self.peers.entry(addr.clone()).or_insert_with(|| Connection::new(addr.clone(), tls));
        let call = RpcRequest::Client(req.clone());
        let answer = tokio::select! {
            answer = conn.call(&call, FORWARD_TTL) => answer,
            () = leader_moved(raft, leader) => {
                // Its answer may still come on this connection, where it would be taken
                // for the next call's: a new connection then.
                self.peers.remove(&addr);
                return Err(ControllerError::NotController(format!("the quorum leader moved while controller {addr} held a forwarded request")));
            }
        };
        match answer {
            Ok(RpcResponse::Client { result, applied_index }) => {
                if result.is_ok() && applied_index.is_some() {
                    // Best effort: a slow local apply delays the answer at most this long;
                    // the change is committed either way.
                    let waited = raft.wait(Some(FORWARD_TTL)).applied_index_at_least(applied_index, "the leader's applied index").await;
                    if let Err(e) = waited {
                        tracing::warn!(error = %e, "controller: answering before applying the leader's change");
                    }
                }
                result
            }
            Ok(other) => Err(ControllerError::NotController(format!("controller {addr} answered a forwarded request with {other:?}"))),
            Err(e) => Err(ControllerError::NotController(format!("forward to controller {addr}: {e}"))),
        }
    }
}
