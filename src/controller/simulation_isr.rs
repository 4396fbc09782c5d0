//! ISR changes inside the seeded quorum simulation (`simulation.rs`, issue 12): partition
//! leaders propose AlterPartition (shrinks and expands) through the quorum leader, mixed
//! with the broker crashes, pauses, restarts and fencings of `simulation_brokers.rs`.
//!
//! A leader proposes from its view of the metadata, and views lag: each proposal is built
//! from an image some node published, recent or up to `VIEWS` ticks old, so stale leader
//! and partition epochs are common. The request travels as a real one does: a combined
//! broker through its own node, a broker-only one over the lossy network (lost, delayed,
//! duplicated: a duplicate is a retry with stale epochs), forwarded once to the quorum
//! leader, which checks it against its caught-up image (`alter_partition::check`, the
//! production check) and commits it, one request at a time with the heartbeats.
//!
//! Checked on every answer: an applied request had exactly the current epochs (the
//! committed partition is at the request's leader epoch and its partition epoch + 1, with
//! the ISR asked for); nothing else is ever applied. The per-image checks (ISR rules,
//! epochs, clean elections) are in `simulation_brokers.rs`.
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use openraft::async_runtime::WatchReceiver as _;
use rand::RngExt;

use super::alter_partition::{self, AlterIsr, AlterPartitionError};
use super::server::caught_up;
use super::simulation::{lock, Shared, SimPeer, NODES};
use super::simulation_brokers::{State, BROKER_LINK};
use super::types::{Applied, Command, Raft, Rejection, Response};
use crate::cluster::image::{BrokerId, MetadataImage, PartitionMeta, NO_LEADER};

/// How many past images proposals may be built from.
const VIEWS: usize = 24;
/// How long one proposal may wait for its commit (short, as the simulation's client
/// writes: the proposing loop does nothing else meanwhile).
const WRITE_TIMEOUT: Duration = Duration::from_secs(1);

/// The proposals' side of the world.
#[derive(Default)]
pub struct Isr {
    /// Images nodes published, newest last: what leaders propose from.
    views: VecDeque<Arc<MetadataImage>>,
    /// Committed or refused AlterPartitions, in answer order (compared by the replay test).
    pub events: Vec<String>,
    pub counts: IsrCounts,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IsrCounts {
    pub proposed: usize,
    /// Committed and changed the ISR.
    pub applied: usize,
    /// Valid, asked for the ISR already there.
    pub unchanged: usize,
    /// Refused as stale (FENCED_LEADER_EPOCH or INVALID_UPDATE_VERSION).
    pub stale: usize,
    pub ineligible: usize,
    /// INVALID_REQUEST or UNKNOWN_TOPIC_OR_PARTITION.
    pub invalid: usize,
    /// No answer (lost on the network, no quorum leader, timed out).
    pub unanswered: usize,
}

/// One AlterPartition request as a leader sends it.
#[derive(Clone, Debug)]
struct Request {
    topic_id: [u8; 16],
    partition: i32,
    leader: BrokerId,
    leader_epoch: i32,
    partition_epoch: i32,
    new_isr: Vec<BrokerId>,
}

impl Request {
    fn as_check(&self) -> AlterIsr<'_> {
        AlterIsr {
            topic_id: &self.topic_id,
            partition: self.partition,
            leader: self.leader,
            leader_epoch: self.leader_epoch,
            partition_epoch: self.partition_epoch,
            new_isr: &self.new_isr,
            new_isr_epochs: &[],
        }
    }
}

type Answer = Result<PartitionMeta, AlterPartitionError>;

/// Remembers the image of one random live node as a view leaders may propose from.
pub fn record_view(world: &Shared) {
    let mut w = lock(world);
    let live: Vec<u64> = w.nodes.keys().copied().collect();
    if live.is_empty() {
        return;
    }
    let id = live[w.rng.random_range(0..live.len())];
    let Some(image) = w.images.get(&id).map(|p| p.image()) else { return };
    let views = &mut w.isr.views;
    if views.back().is_some_and(|v| v.applied_index == image.applied_index) {
        return;
    }
    views.push_back(image);
    if views.len() > VIEWS {
        views.pop_front();
    }
}

/// Builds one proposal from a random view: the partition's leader there drops a random
/// follower from the ISR or adds a random replica that is not in it (fenced or not).
fn propose(world: &Shared) -> Option<Request> {
    let mut w = lock(world);
    let n = w.isr.views.len();
    if n == 0 {
        return None;
    }
    // The newest view a quarter of the time, else any: stale epochs are common.
    let i = if w.rng.random_bool(0.25) { n - 1 } else { w.rng.random_range(0..n) };
    let view = w.isr.views[i].clone();
    let parts: Vec<([u8; 16], &PartitionMeta)> = view
        .topics
        .values()
        .flat_map(|t| t.partitions.iter().map(move |p| (t.topic_id, p)))
        .filter(|(_, p)| p.leader != NO_LEADER && p.replicas.len() > 1)
        .collect();
    if parts.is_empty() {
        return None;
    }
    let (topic_id, p) = parts[w.rng.random_range(0..parts.len())];
    // A crashed or paused broker sends nothing.
    if w.brokers.brokers.get(&p.leader).map(|b| b.state) != Some(State::Up) {
        return None;
    }
    let followers: Vec<BrokerId> = p.isr.iter().copied().filter(|b| *b != p.leader).collect();
    let outside: Vec<BrokerId> = p.replicas.iter().map(|r| r.broker).filter(|b| !p.isr.contains(b)).collect();
    let mut new_isr = p.isr.clone();
    if !followers.is_empty() && (outside.is_empty() || w.rng.random_bool(0.5)) {
        let out = followers[w.rng.random_range(0..followers.len())];
        new_isr.retain(|b| *b != out);
    } else if !outside.is_empty() {
        new_isr.push(outside[w.rng.random_range(0..outside.len())]);
    }
    Some(Request { topic_id, partition: p.partition, leader: p.leader, leader_epoch: p.leader_epoch, partition_epoch: p.partition_epoch, new_isr })
}

/// One AlterPartition from a partition leader, sent, answered, checked and counted.
pub async fn leader_alters_isr(world: &Shared, trace: &mut Vec<String>) {
    let Some(req) = propose(world) else { return };
    let (via, node) = {
        let mut w = lock(world);
        w.isr.counts.proposed += 1;
        let via = if req.leader as u64 <= NODES { req.leader as u64 } else { w.rng.random_range(1..=NODES) };
        (via, w.nodes.get(&via).cloned())
    };
    let answer = if req.leader as u64 <= NODES {
        match node {
            Some(raft) => at_node(world, via, raft, req.clone()).await,
            None => Err(format!("node {via} is down")),
        }
    } else {
        let peer = SimPeer { from: BROKER_LINK + req.leader as u64, to: via, world: world.clone() };
        peer.deliver(|raft| {
            let (world, req) = (world.clone(), req.clone());
            async move { at_node(&world, via, raft, req).await }
        })
        .await
    };
    let seed = lock(world).seed;
    // The simulation's topic ids start with the topic's number.
    let topic = u64::from_be_bytes(req.topic_id[..8].try_into().unwrap_or([0; 8]));
    let line = format!("alter t{topic}-{} by {} at {}/{} to {:?}: {answer:?}", req.partition, req.leader, req.leader_epoch, req.partition_epoch, req.new_isr);
    let mut w = lock(world);
    let c = &mut w.isr.counts;
    match &answer {
        Ok(Ok(meta)) => {
            // Never applied unless its epochs were the current ones.
            let want: Vec<BrokerId> = meta.replicas.iter().map(|r| r.broker).filter(|b| req.new_isr.contains(b)).collect();
            assert!(
                meta.leader == req.leader && meta.leader_epoch == req.leader_epoch && meta.isr == want,
                "seed {seed}: {line}: the committed partition is not what the request asked for"
            );
            if meta.partition_epoch == req.partition_epoch + 1 {
                c.applied += 1;
            } else {
                assert_eq!(meta.partition_epoch, req.partition_epoch, "seed {seed}: {line}: applied at another partition epoch");
                c.unchanged += 1;
            }
        }
        Ok(Err(AlterPartitionError::FencedLeaderEpoch | AlterPartitionError::InvalidUpdateVersion)) => c.stale += 1,
        Ok(Err(AlterPartitionError::IneligibleReplica)) => c.ineligible += 1,
        Ok(Err(_)) => c.invalid += 1,
        Err(_) => c.unanswered += 1,
    }
    if answer.is_ok() {
        w.isr.events.push(line.clone());
        trace.push(line);
    }
}

/// The request arriving at node `id`: executed if it leads, else forwarded once to the
/// leader it knows (`server.rs`: `Router::route`).
async fn at_node(world: &Shared, id: u64, raft: Raft, req: Request) -> Result<Answer, String> {
    let leader = raft.metrics().borrow_watched().current_leader;
    match leader {
        Some(leader) if leader == id => execute(world, id, raft, req).await,
        Some(leader) => {
            let peer = SimPeer { from: id, to: leader, world: world.clone() };
            peer.deliver(|raft| {
                let (world, req) = (world.clone(), req.clone());
                async move { execute(&world, leader, raft, req).await }
            })
            .await
        }
        None => Err(format!("node {id}: no quorum leader")),
    }
}

/// The request at the quorum leader (`server.rs`: `execute`, AlterPartition): checked on
/// the caught-up image, committed if it changes the ISR, in the node's request loop.
async fn execute(world: &Shared, id: u64, raft: Raft, req: Request) -> Result<Answer, String> {
    let (request_loop, publisher) = {
        let w = lock(world);
        match (w.brokers.request_loop(id), w.images.get(&id).cloned()) {
            (Some(l), Some(p)) => (l, p),
            _ => return Err(format!("node {id} is down")),
        }
    };
    let _serial = request_loop.lock().await;
    if raft.metrics().borrow_watched().current_leader != Some(id) {
        return Err(format!("node {id} does not lead"));
    }
    caught_up(&raft).await.map_err(|e| e.to_string())?;
    let image = publisher.image();
    let checked = match alter_partition::check(&image, req.as_check()) {
        Ok(c) => c,
        Err(e) => return Ok(Err(e)),
    };
    if checked.isr.is_none() {
        let p = image.topic(&checked.topic).and_then(|t| t.partition(req.partition)).cloned();
        return Ok(p.ok_or(AlterPartitionError::UnknownTopicOrPartition));
    }
    let cmd = Command::AlterPartition {
        topic_id: req.topic_id,
        partition: req.partition,
        leader: req.leader,
        leader_epoch: req.leader_epoch,
        partition_epoch: req.partition_epoch,
        new_isr: req.new_isr.clone(),
        new_isr_epochs: vec![],
    };
    match tokio::time::timeout(WRITE_TIMEOUT, raft.client_write(cmd)).await {
        Ok(Ok(written)) => match written.data {
            Response(Ok(Applied::PartitionAltered(meta))) => Ok(Ok(meta)),
            // Refused on apply: the image changed between the check and the commit.
            Response(Err(Rejection::AlterPartition(e))) => Ok(Err(e)),
            other => Err(format!("AlterPartition answered {other:?}")),
        },
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("not committed in time".into()),
    }
}
