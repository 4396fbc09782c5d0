//! Broker liveness inside the seeded quorum simulation (`simulation.rs`): brokers register
//! and heartbeat through the quorum leader on the virtual clock, crash, pause and come back,
//! and each controller node runs the production decisions (`Liveness::on_heartbeat`,
//! `Liveness::on_fencing_tick`, the same commands, the same intervals) one request at a
//! time, as `server.rs`'s request loop does.
//!
//! Brokers 1..=3 live in the controller nodes of the same id (combined nodes: they crash
//! and restart with their node, and their heartbeats enter through their own node); 4 and 5
//! are broker-only: they heartbeat to a controller over the lossy network (its own link
//! ends, `BROKER_LINK + id`, so a broker can be cut off alone), and crash (a new
//! incarnation when they come back) or pause (SIGSTOP: the same incarnation) on their own.
//! A broker-only broker's heartbeats come on its connection to the quorum leader (`conn`):
//! its crash closes it, and so does a reset of a live broker (which then heartbeats on a
//! new one), both told to the leader as `rpc_server.rs` does (`on_connection_closed`).
//!
//! Checked on every image each node's state machine publishes (every apply that changes
//! metadata, in apply order, per node and boot): a fenced or unregistered broker never
//! leads; a leader is one of the partition's replicas; a partition's leader epoch never
//! decreases and rises whenever its leader changes. After the healed phase: every broker
//! is registered with its current incarnation and unfenced, and every partition with a
//! live replica has a leader.
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use openraft::async_runtime::WatchReceiver as _;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::liveness::{fencing_check_interval, heartbeat_interval, Liveness};
use super::server::caught_up;
use super::simulation::{lock, Shared, SimPeer, World, NODES};
use super::types::{Command, Raft};
use crate::cluster::image::{BrokerId, BrokerMeta, MetadataImage, MetadataUpdate, NO_LEADER};

/// The production default (`broker_session_timeout_ms`).
pub const SESSION_TIMEOUT: Duration = Duration::from_millis(3000);
/// Brokers 1..=BROKERS; ids up to NODES are combined with the controller node of that id.
pub const BROKERS: BrokerId = 5;
/// A broker-only broker's end of its network links.
pub const BROKER_LINK: u64 = 100;
/// How long one proposal may wait for its commit (`server.rs`'s ROUTE_DEADLINE).
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Up,
    /// Stopped (SIGSTOP): no heartbeats, the same incarnation when it resumes.
    Paused,
    /// Crashed; comes back with a new incarnation.
    Down,
}

pub struct Broker {
    pub incarnation: [u8; 16],
    pub state: State,
    /// Which controller a broker-only broker sends its next heartbeat to.
    rng: StdRng,
    /// The connection its heartbeats come on (unique over the run; a new one after a
    /// crash or a reset).
    conn: u64,
}

/// The brokers' side of the world.
#[derive(Default)]
pub struct Brokers {
    pub brokers: BTreeMap<BrokerId, Broker>,
    /// Each live node's request loop (one request at a time, as in `server.rs`) with the
    /// liveness view it keeps in memory; replaced when the node restarts.
    loops: BTreeMap<u64, Arc<tokio::sync::Mutex<Liveness>>>,
    /// Bumped at each boot of a node: its fencing timer stops when the node goes.
    boots: BTreeMap<u64, u64>,
    /// Each node's published updates (this boot's channel) and the last image seen on it.
    updates: BTreeMap<u64, (async_channel::Receiver<MetadataUpdate>, Option<Arc<MetadataImage>>)>,
    incarnations: u64,
    pub stopped: bool,
    /// Committed liveness records, in commit order (compared by the replay test).
    pub events: Vec<String>,
    pub counts: Counts,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub registered: usize,
    pub fenced: usize,
    pub unfenced: usize,
    /// Partition leader changes seen in published images, over all nodes.
    pub leader_changes: usize,
    pub images_checked: usize,
}

impl Brokers {
    pub fn new(seed: u64) -> Brokers {
        let mut b = Brokers::default();
        for id in 1..=BROKERS {
            let incarnation = b.next_incarnation(id);
            let rng = StdRng::seed_from_u64(seed ^ ((id as u64) << 32));
            b.brokers.insert(id, Broker { incarnation, state: State::Up, rng, conn: (id as u64) << 32 });
        }
        b
    }

    /// Deterministic, unique per broker start (production draws a UUID).
    fn next_incarnation(&mut self, id: BrokerId) -> [u8; 16] {
        self.incarnations += 1;
        let mut inc = [0u8; 16];
        inc[..4].copy_from_slice(&id.to_be_bytes());
        inc[8..].copy_from_slice(&self.incarnations.to_be_bytes());
        inc
    }

    fn restart(&mut self, id: BrokerId) {
        let incarnation = self.next_incarnation(id);
        if let Some(b) = self.brokers.get_mut(&id) {
            b.incarnation = incarnation;
            b.state = State::Up;
            b.conn += 1;
        }
    }

    /// The request loop of node `id`, if it runs.
    pub fn request_loop(&self, id: u64) -> Option<Arc<tokio::sync::Mutex<Liveness>>> {
        self.loops.get(&id).cloned()
    }
}

fn now() -> std::time::Instant {
    tokio::time::Instant::now().into_std()
}

/// A node booted: its request loop and fencing timer start, its broker (if combined)
/// starts with a new incarnation.
pub fn node_started(world: &Shared, id: u64, raft: Raft, updates: async_channel::Receiver<MetadataUpdate>) {
    let boot = {
        let mut w = lock(world);
        let b = &mut w.brokers;
        b.loops.insert(id, Arc::new(tokio::sync::Mutex::new(Liveness::new(SESSION_TIMEOUT, false))));
        b.updates.insert(id, (updates, None));
        let boot = b.boots.entry(id).or_default();
        *boot += 1;
        let boot = *boot;
        if id <= NODES {
            b.restart(id as BrokerId);
        }
        boot
    };
    tokio::spawn(fencing_timer(world.clone(), id, raft, boot));
}

/// A node crashed: its in-memory liveness is gone, and so is its combined broker.
pub fn node_crashed(world: &Shared, id: u64) {
    check_updates(world);
    let mut w = lock(world);
    w.brokers.loops.remove(&id);
    if let Some(b) = w.brokers.brokers.get_mut(&(id as BrokerId)) {
        b.state = State::Down;
    }
}

/// Proposes `cmd` at node `id` and waits for its commit, as `server.rs`'s `write`.
async fn commit(world: &Shared, raft: &Raft, id: u64, cmd: Command) {
    let res = tokio::time::timeout(WRITE_TIMEOUT, raft.client_write(cmd.clone())).await;
    let Ok(Ok(written)) = res else { return };
    let mut w = lock(world);
    let ok = written.data.0.is_ok();
    if ok {
        let c = &mut w.brokers.counts;
        match cmd {
            Command::RegisterBroker { .. } => c.registered += 1,
            Command::FenceBroker { .. } => c.fenced += 1,
            Command::UnfenceBroker { .. } => c.unfenced += 1,
            _ => {}
        }
    }
    w.brokers.events.push(format!("{} via {id}: {cmd}{}", written.log_id, if ok { "" } else { " (rejected)" }));
}

/// The fencing timer of one boot of node `id` (`server.rs`: `fence_silent_brokers`).
async fn fencing_timer(world: Shared, id: u64, raft: Raft, boot: u64) {
    loop {
        tokio::time::sleep(fencing_check_interval(SESSION_TIMEOUT)).await;
        let (request_loop, publisher) = {
            let w = lock(&world);
            if w.brokers.stopped || w.brokers.boots.get(&id) != Some(&boot) || !w.nodes.contains_key(&id) {
                return;
            }
            match (w.brokers.request_loop(id), w.images.get(&id).cloned()) {
                (Some(l), Some(p)) => (l, p),
                _ => return,
            }
        };
        let mut liveness = request_loop.lock().await;
        let m = raft.metrics().borrow_watched().clone();
        let leading = (m.current_leader == Some(id)).then_some(m.current_term);
        if leading.is_some() && caught_up(&raft).await.is_err() {
            continue;
        }
        for cmd in liveness.on_fencing_tick(leading, &publisher.image(), id as BrokerId, now()) {
            commit(&world, &raft, id, cmd).await;
        }
    }
}

/// Every broker heartbeats every `heartbeat_interval` while it is up, until the run ends.
pub fn spawn_brokers(world: &Shared) {
    for id in 1..=BROKERS {
        let world = world.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(heartbeat_interval(SESSION_TIMEOUT)).await;
                if lock(&world).brokers.stopped {
                    return;
                }
                heartbeat(&world, id).await;
            }
        });
    }
}

/// One heartbeat of broker `id`: into its own node (combined) or over the network to a
/// controller (broker-only), forwarded from there to the quorum leader.
async fn heartbeat(world: &Shared, id: BrokerId) {
    let (meta, via, node, conn) = {
        let mut w = lock(world);
        let live: Vec<u64> = w.nodes.keys().copied().collect();
        let Some(b) = w.brokers.brokers.get_mut(&id) else { return };
        if b.state != State::Up {
            return;
        }
        let meta = BrokerMeta {
            id,
            incarnation: b.incarnation,
            host: format!("broker-{id}"),
            port: 9092,
            rack: None,
            shard_count: 1,
            listeners: Vec::new(),
            fenced: false,
        };
        let via = if id as u64 <= NODES { id as u64 } else { b.rng.random_range(1..=NODES) };
        let conn = (id as u64 > NODES).then_some(b.conn);
        let node = live.contains(&via).then(|| w.nodes[&via].clone());
        (meta, via, node, conn)
    };
    if id as u64 <= NODES {
        let Some(raft) = node else { return };
        let _ = at_node(world, via, raft, meta, conn).await;
    } else {
        let peer = SimPeer { from: BROKER_LINK + id as u64, to: via, world: world.clone() };
        let _ = peer
            .deliver(|raft| {
                let (world, meta) = (world.clone(), meta.clone());
                async move { at_node(&world, via, raft, meta, conn).await }
            })
            .await;
    }
}

/// A heartbeat arriving at node `id`: executed if it leads, else forwarded once to the
/// leader it knows (`server.rs`: `Router::route`).
async fn at_node(world: &Shared, id: u64, raft: Raft, meta: BrokerMeta, conn: Option<u64>) -> Result<(), String> {
    let leader = raft.metrics().borrow_watched().current_leader;
    match leader {
        Some(leader) if leader == id => execute(world, id, raft, meta, conn).await,
        Some(leader) => {
            let peer = SimPeer { from: id, to: leader, world: world.clone() };
            peer.deliver(|raft| {
                let (world, meta) = (world.clone(), meta.clone());
                async move { execute(&world, leader, raft, meta, conn).await }
            })
            .await
        }
        None => Err(format!("node {id}: no quorum leader")),
    }
}

/// The heartbeat at the leader (`server.rs`: `execute`, BrokerHeartbeat).
async fn execute(world: &Shared, id: u64, raft: Raft, meta: BrokerMeta, conn: Option<u64>) -> Result<(), String> {
    let (request_loop, publisher) = {
        let w = lock(world);
        match (w.brokers.request_loop(id), w.images.get(&id).cloned()) {
            (Some(l), Some(p)) => (l, p),
            _ => return Err(format!("node {id} is down")),
        }
    };
    let mut liveness = request_loop.lock().await;
    let m = raft.metrics().borrow_watched().clone();
    if m.current_leader != Some(id) {
        return Err(format!("node {id} does not lead"));
    }
    caught_up(&raft).await.map_err(|e| e.to_string())?;
    if let Some(cmd) = liveness.on_heartbeat(m.current_term, &publisher.image(), &meta, None, conn, now()) {
        commit(world, &raft, id, cmd).await;
    }
    Ok(())
}

/// One random event of a broker-only broker: crash, pause, come back, be cut off from the
/// controllers or reconnected.
pub fn broker_event(world: &Shared, trace: &mut Vec<String>) {
    let mut w = lock(world);
    let (roll, id) = (w.rng.random_range(0..100u32), w.rng.random_range(NODES as BrokerId + 1..=BROKERS));
    let link = BROKER_LINK + id as u64;
    let state = w.brokers.brokers[&id].state;
    let set = |w: &mut World, state: State| {
        if let Some(b) = w.brokers.brokers.get_mut(&id) {
            b.state = state;
        }
    };
    match (roll, state) {
        (0..=29, State::Up) => {
            set(&mut w, State::Down);
            let conn = w.brokers.brokers[&id].conn;
            close_at_leader(&w, conn);
            trace.push(format!("crash broker {id}"));
        }
        (30..=34, State::Up) => {
            // A reset: the live broker's next heartbeat comes on a new connection.
            let conn = w.brokers.brokers[&id].conn;
            close_at_leader(&w, conn);
            if let Some(b) = w.brokers.brokers.get_mut(&id) {
                b.conn += 1;
            }
            trace.push(format!("reset broker {id}'s connection"));
        }
        (35..=54, State::Up) => {
            set(&mut w, State::Paused);
            trace.push(format!("pause broker {id}"));
        }
        (55..=84, State::Down) => {
            w.brokers.restart(id);
            trace.push(format!("restart broker {id}"));
        }
        (55..=84, State::Paused) => {
            set(&mut w, State::Up);
            trace.push(format!("resume broker {id}"));
        }
        (85..=92, _) => {
            for node in 1..=NODES {
                w.cut.insert((link, node));
            }
            trace.push(format!("cut broker {id} off"));
        }
        (93..=99, _) => {
            for node in 1..=NODES {
                w.cut.remove(&(link, node));
            }
            trace.push(format!("reconnect broker {id}"));
        }
        _ => {}
    }
}

/// A broker's connection `conn` closed: the node leading now hears of it (`rpc_server.rs`
/// reports closes to its own controller, which only acts on them while it leads). Its
/// request loop is busy with a request at worst: then, as a close noticed late, the
/// session timeout still fences.
fn close_at_leader(w: &World, conn: u64) {
    for (id, raft) in &w.nodes {
        if raft.metrics().borrow_watched().current_leader != Some(*id) {
            continue;
        }
        if let Some(l) = w.brokers.request_loop(*id) {
            if let Ok(mut liveness) = l.try_lock() {
                liveness.on_connection_closed(conn, now());
            }
        }
    }
}

/// The healed phase: every broker-only broker runs again.
pub fn restart_all(world: &Shared) {
    let mut w = lock(world);
    for id in NODES as BrokerId + 1..=BROKERS {
        match w.brokers.brokers[&id].state {
            State::Up => {}
            State::Paused => w.brokers.brokers.get_mut(&id).into_iter().for_each(|b| b.state = State::Up),
            State::Down => w.brokers.restart(id),
        }
    }
}

/// Checks every image published since the last call, per node, in apply order.
pub fn check_updates(world: &Shared) {
    let mut w = lock(world);
    let seed = w.seed;
    let b = &mut w.brokers;
    for (node, (rx, last)) in b.updates.iter_mut() {
        while let Ok(update) = rx.try_recv() {
            let image = update.image;
            if let Err(why) = check_image(&image) {
                panic!(
                    "seed {seed}: node {node} at index {}: {why}; the last liveness records:\n{}",
                    image.applied_index,
                    b.events[b.events.len().saturating_sub(8)..].join("\n")
                );
            }
            if let Some(prev) = last {
                match check_epochs(prev, &image) {
                    Ok(changes) => b.counts.leader_changes += changes,
                    Err(why) => panic!("seed {seed}: node {node}, index {} -> {}: {why}", prev.applied_index, image.applied_index),
                }
            }
            b.counts.images_checked += 1;
            *last = Some(image);
        }
    }
}

/// A fenced or unregistered broker never leads; a leader is one of the replicas and in
/// the ISR; the ISR is a non-empty set of replicas, of live brokers only when it has more
/// than one member (a fenced broker stays only as the last member); a partition with a
/// live ISR member has a leader.
fn check_image(image: &MetadataImage) -> Result<(), String> {
    // KIP-966 (on in a new cluster): a fenced broker leaves every ISR, which may empty it;
    // the ELR holds replicas outside the ISR, and a live one leads an empty ISR.
    let elr_on = image.features.elr_enabled();
    for t in image.topics.values() {
        for p in &t.partitions {
            let at = || {
                format!(
                    "{}-{} (leader {}, ISR {:?}, ELR {:?}, replicas {:?})",
                    t.name,
                    p.partition,
                    p.leader,
                    p.isr,
                    p.elr,
                    p.replicas.iter().map(|r| r.broker).collect::<Vec<_>>()
                )
            };
            if (p.isr.is_empty() && !elr_on) || p.isr.iter().any(|b| p.replica_on(*b).is_none()) {
                return Err(format!("{}: the ISR is empty or holds a non-replica", at()));
            }
            if p.elr.iter().any(|b| p.isr.contains(b) || p.replica_on(*b).is_none()) {
                return Err(format!("{}: an ELR member in the ISR or not a replica", at()));
            }
            if elr_on && p.isr.iter().any(|b| !image.is_live(*b)) {
                return Err(format!("{}: a fenced broker in an ISR (ELR on)", at()));
            }
            if p.leader == NO_LEADER && p.isr.is_empty() && p.elr.iter().any(|b| image.is_live(*b)) {
                return Err(format!("{}: no leader though an eligible leader replica is live", at()));
            }
            if p.isr.iter().enumerate().any(|(i, b)| p.isr[..i].contains(b)) {
                return Err(format!("{}: a broker twice in the ISR", at()));
            }
            if p.isr.len() > 1 && p.isr.iter().any(|b| !image.is_live(*b)) {
                return Err(format!("{}: a fenced broker in an ISR it shares", at()));
            }
            if p.leader == NO_LEADER {
                if p.isr.iter().any(|b| image.is_live(*b)) {
                    return Err(format!("{}: no leader though an ISR member is live", at()));
                }
                continue;
            }
            if !image.is_live(p.leader) {
                return Err(format!("{}: broker {} leads but is fenced or unregistered ({:?})", at(), p.leader, image.brokers.get(&p.leader)));
            }
            if p.replica_on(p.leader).is_none() {
                return Err(format!("{}: the leader is not a replica", at()));
            }
            if !p.isr.contains(&p.leader) {
                return Err(format!("{}: the leader is not in the ISR", at()));
            }
        }
    }
    Ok(())
}

/// Whether the topic allows unclean elections (the simulation sets it on topics only;
/// its controllers' static default is false).
fn unclean_allowed(t: &crate::cluster::image::TopicMeta) -> bool {
    t.configs.get(crate::cluster::topic_config::UNCLEAN_LEADER_ELECTION_ENABLE).is_some_and(|v| v == "true")
}

/// Leader epochs never decrease, and rise whenever the leader changes. Returns how many
/// leaders changed.
fn check_epochs(prev: &MetadataImage, next: &MetadataImage) -> Result<usize, String> {
    let mut changes = 0;
    for (name, t) in &next.topics {
        let Some(old) = prev.topics.get(name).filter(|o| o.topic_id == t.topic_id) else { continue };
        for (p, q) in old.partitions.iter().zip(&t.partitions) {
            if q.leader_epoch < p.leader_epoch || q.partition_epoch < p.partition_epoch {
                return Err(format!("{name}-{}: epochs {}/{} -> {}/{}", p.partition, p.leader_epoch, p.partition_epoch, q.leader_epoch, q.partition_epoch));
            }
            if (q.leader != p.leader || q.isr != p.isr) && q.partition_epoch == p.partition_epoch {
                return Err(format!(
                    "{name}-{}: leader {} -> {}, ISR {:?} -> {:?} in the same partition epoch {}",
                    p.partition, p.leader, q.leader, p.isr, q.isr, q.partition_epoch
                ));
            }
            if q.leader != p.leader {
                changes += 1;
                if q.leader_epoch == p.leader_epoch {
                    return Err(format!("{name}-{}: leader {} -> {} in the same epoch {}", p.partition, p.leader, q.leader, q.leader_epoch));
                }
                // A clean election takes a member of the ISR it had; an unclean one (only
                // where the topic allows it) a replica that then is the whole ISR. Checked
                // across one change only (one partition epoch): a snapshot install may
                // publish several at once.
                // With KIP-966, an empty ISR's eligible leader replica is clean too, and so
                // (Kafka's balanced recovery, whatever the topic allows) is its last known
                // leader when no eligible one is left.
                let eligible = p.isr.is_empty() && (p.elr.contains(&q.leader) || (p.elr.is_empty() && p.last_known_elr == [q.leader]));
                let clean = p.isr.contains(&q.leader) || eligible;
                let one_change = q.partition_epoch == p.partition_epoch + 1;
                if one_change && q.leader != NO_LEADER && !clean && !(unclean_allowed(t) && q.isr == vec![q.leader]) {
                    return Err(format!(
                        "{name}-{}: leader {} elected from outside the ISR {:?} (unclean allowed: {})",
                        p.partition,
                        q.leader,
                        p.isr,
                        unclean_allowed(t)
                    ));
                }
            }
        }
    }
    Ok(changes)
}

/// After the healed phase, on every node: every broker is registered with the incarnation
/// it runs and unfenced, and every partition with a live replica has a leader.
pub fn check_healed(world: &Shared) {
    check_updates(world);
    let w = lock(world);
    let seed = w.seed;
    for (node, publisher) in &w.images {
        let image = publisher.image();
        for (id, b) in &w.brokers.brokers {
            assert_eq!(b.state, State::Up, "seed {seed}: broker {id} is not running after the heal");
            let meta = image.brokers.get(id);
            assert!(
                meta.is_some_and(|m| m.incarnation == b.incarnation && !m.fenced),
                "seed {seed}: node {node}: running broker {id} is not registered and unfenced: {meta:?}"
            );
        }
        for t in image.topics.values() {
            for p in &t.partitions {
                let live_replica = p.replicas.iter().any(|r| image.is_live(r.broker));
                assert!(
                    !live_replica || p.leader != NO_LEADER,
                    "seed {seed}: node {node}: {}-{} has live replicas {:?} and no leader",
                    t.name,
                    p.partition,
                    p.replicas
                );
            }
        }
    }
}
