//! `shardlog cluster decommission <id>` / `recommission <id>`: drains a broker through
//! Kafka's own admin APIs (what `kafka-reassign-partitions.sh` and
//! `kafka-leader-election.sh` send, so the controller's reassignment path does the work:
//! `controller/reassignment.rs`), then unregisters it (UnregisterBroker) once it is empty
//! and stopped. Rerunning it resumes: every pass plans from the cluster as it is.
//!
//! One pass (`--wait` repeats it every second until the broker is gone):
//! 1. Leadership first: each partition the broker leads, with another live in-sync
//!    replica, gets its replica list reordered with the broker last (a reassignment with
//!    nothing to add completes at once) and a preferred election, so producers move to
//!    another leader with one retriable error (NOT_LEADER_OR_FOLLOWER) before any copy.
//! 2. Replica moves: each partition still holding the broker, and not already being
//!    reassigned, is reassigned to its replicas with the broker replaced by an active
//!    broker that holds no replica of it: the same rack as the leaving broker if one has
//!    room, else a rack the partition does not use yet, else any; the least loaded first.
//!    The controller adds the new replica, waits until it is in the ISR, then removes the
//!    old one, so the ISR never shrinks below what it was (min.insync.replicas holds). At
//!    most `max_moves` run at once.
//! 3. Empty: if the broker is fenced (its process stopped), UnregisterBroker; else it says
//!    to stop the process (with `--wait`, it waits for that).
//!
//! `recommission` cancels the moves still running off the broker (AlterPartitionReassignments
//! with no target: the controller reverts them). Not done here: keeping new topics off the
//! broker while it drains (placement does not know of the decommission; a rerun moves
//! what landed there), and reassignment throttles.
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use anyhow::bail;
use kafka_protocol::messages::alter_partition_reassignments_request::{ReassignablePartition, ReassignableTopic};
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, BrokerId, DescribeClusterRequest, ElectLeadersRequest, ListPartitionReassignmentsRequest, MetadataRequest, TopicName,
    UnregisterBrokerRequest,
};
use kafka_protocol::protocol::StrBytes;
use serde::Serialize;

use super::client::Client;

/// A broker as the plan sees it.
#[derive(Clone, Debug)]
pub struct Broker {
    pub id: i32,
    pub rack: Option<String>,
    pub fenced: bool,
}

/// A partition as the plan sees it.
#[derive(Clone, Debug)]
pub struct Partition {
    pub topic: String,
    pub index: i32,
    pub leader: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    /// A reassignment of it is in progress.
    pub moving: bool,
}

/// What one pass asks of the controller.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// (topic, partition, replicas reordered with the leaving broker last) to elect away from.
    pub lead_away: Vec<(String, i32, Vec<i32>)>,
    /// (topic, partition, target replicas without the leaving broker).
    pub moves: Vec<(String, i32, Vec<i32>)>,
    /// "topic-partition: why" for partitions no broker can take.
    pub stuck: Vec<String>,
}

/// Plans one pass of draining `leaving` (see the module comment). Pure.
pub fn plan(brokers: &[Broker], partitions: &[Partition], leaving: i32, max_moves: usize) -> Plan {
    let mut out = Plan::default();
    let rack_of = |id: i32| brokers.iter().find(|b| b.id == id).and_then(|b| b.rack.clone());
    let leaving_rack = rack_of(leaving);
    let active: Vec<&Broker> = brokers.iter().filter(|b| !b.fenced && b.id != leaving).collect();
    let mut load: BTreeMap<i32, usize> = active.iter().map(|b| (b.id, 0)).collect();
    for p in partitions {
        for r in &p.replicas {
            if let Some(n) = load.get_mut(r) {
                *n += 1;
            }
        }
    }
    let mut running = partitions.iter().filter(|p| p.moving && p.replicas.contains(&leaving)).count();
    for p in partitions.iter().filter(|p| p.replicas.contains(&leaving) && !p.moving) {
        let others_in_sync = p.isr.iter().any(|r| *r != leaving && active.iter().any(|b| b.id == *r));
        if p.leader == leaving && others_in_sync {
            let mut order: Vec<i32> = p.replicas.iter().copied().filter(|r| *r != leaving).collect();
            order.push(leaving);
            out.lead_away.push((p.topic.clone(), p.index, order));
            continue; // moved in a later pass, once another replica leads
        }
        if running >= max_moves {
            continue;
        }
        let used_racks: BTreeSet<Option<String>> = p.replicas.iter().filter(|r| **r != leaving).map(|r| rack_of(*r)).collect();
        let candidates = active.iter().filter(|b| !p.replicas.contains(&b.id));
        // Preference: same rack as the leaving broker, then a rack the partition lacks,
        // then any; within each, the least loaded, then the lowest id.
        let rank = |b: &&&Broker| {
            let same_rack = leaving_rack.is_some() && b.rack == leaving_rack;
            let new_rack = !used_racks.contains(&b.rack);
            (!same_rack, !new_rack, load.get(&b.id).copied().unwrap_or(0), b.id)
        };
        let Some(to) = candidates.min_by_key(rank).map(|b| b.id) else {
            out.stuck.push(format!("{}-{}: no active broker without a replica of it", p.topic, p.index));
            continue;
        };
        *load.entry(to).or_default() += 1;
        let target: Vec<i32> = p.replicas.iter().map(|r| if *r == leaving { to } else { *r }).collect();
        out.moves.push((p.topic.clone(), p.index, target));
        running += 1;
    }
    out
}

/// The cluster as the plan needs it: brokers (fenced too) and every partition, marked
/// when a reassignment of it runs.
pub(super) fn load(c: &mut Client) -> anyhow::Result<(Vec<Broker>, Vec<Partition>)> {
    let cluster = c.send(&DescribeClusterRequest::default().with_endpoint_type(1).with_include_fenced_brokers(true), 2)?;
    if cluster.error_code != 0 {
        bail!("DescribeCluster: {}", super::cluster::err_name(cluster.error_code));
    }
    let brokers = cluster.brokers.iter().map(|b| Broker { id: b.broker_id.0, rack: b.rack.as_ref().map(|r| r.to_string()), fenced: b.is_fenced }).collect();
    let ongoing = c.send(&ListPartitionReassignmentsRequest::default().with_timeout_ms(30_000).with_topics(None), 0)?;
    if ongoing.error_code != 0 {
        bail!("ListPartitionReassignments: {}", super::cluster::err_name(ongoing.error_code));
    }
    let moving: BTreeSet<(String, i32)> =
        ongoing.topics.iter().flat_map(|t| t.partitions.iter().map(move |p| (t.name.0.to_string(), p.partition_index))).collect();
    let md = c.send(&MetadataRequest::default().with_topics(None), 12)?;
    let mut partitions = Vec::new();
    for t in &md.topics {
        let name = t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default();
        for p in &t.partitions {
            partitions.push(Partition {
                topic: name.clone(),
                index: p.partition_index,
                leader: p.leader_id.0,
                replicas: p.replica_nodes.iter().map(|b| b.0).collect(),
                isr: p.isr_nodes.iter().map(|b| b.0).collect(),
                moving: moving.contains(&(name.clone(), p.partition_index)),
            });
        }
    }
    Ok((brokers, partitions))
}

/// Sends one AlterPartitionReassignments for `targets` (None = cancel); the refusals.
pub(super) fn reassign(c: &mut Client, targets: &[(String, i32, Option<Vec<i32>>)]) -> anyhow::Result<Vec<String>> {
    let mut by_topic: BTreeMap<&str, Vec<ReassignablePartition>> = BTreeMap::new();
    for (t, p, r) in targets {
        let replicas = r.as_ref().map(|r| r.iter().map(|b| BrokerId(*b)).collect());
        by_topic.entry(t).or_default().push(ReassignablePartition::default().with_partition_index(*p).with_replicas(replicas));
    }
    let topics = by_topic
        .into_iter()
        .map(|(t, ps)| ReassignableTopic::default().with_name(TopicName(StrBytes::from_string(t.to_string()))).with_partitions(ps))
        .collect();
    let resp = c.send(&AlterPartitionReassignmentsRequest::default().with_timeout_ms(60_000).with_topics(topics), 0)?;
    if resp.error_code != 0 {
        bail!("AlterPartitionReassignments: {}", super::cluster::err_name(resp.error_code));
    }
    Ok(resp
        .responses
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .filter(|p| p.error_code != 0)
                .map(move |p| format!("{}-{}: {}", t.name.0, p.partition_index, super::cluster::err_name(p.error_code)))
        })
        .collect())
}

/// A preferred election over `partitions`; the refusals.
fn elect_preferred(c: &mut Client, partitions: &[(String, i32)]) -> anyhow::Result<Vec<String>> {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (t, p) in partitions {
        by_topic.entry(t).or_default().push(*p);
    }
    let req = ElectLeadersRequest::default().with_election_type(0).with_timeout_ms(60_000).with_topic_partitions(Some(
        by_topic
            .into_iter()
            .map(|(t, ps)| TopicPartitions::default().with_topic(TopicName(StrBytes::from_string(t.to_string()))).with_partitions(ps))
            .collect(),
    ));
    let resp = c.send(&req, 2)?;
    if resp.error_code != 0 {
        bail!("ElectLeaders: {}", super::cluster::err_name(resp.error_code));
    }
    Ok(resp
        .replica_election_results
        .iter()
        .flat_map(|t| {
            t.partition_result
                .iter()
                .filter(|p| p.error_code != 0)
                .map(move |p| format!("{}-{}: {}", t.topic.0, p.partition_id, super::cluster::err_name(p.error_code)))
        })
        .collect())
}

/// Progress of a decommission, as printed after each pass.
#[derive(Debug, Serialize)]
struct Progress {
    broker: i32,
    /// Partitions with a replica on it.
    replicas_left: usize,
    /// Of those, the ones it leads.
    leaders_left: usize,
    /// Reassignments running off it.
    moving: usize,
    /// Started in this pass.
    started: usize,
    stuck: Vec<String>,
    refused: Vec<String>,
    fenced: bool,
    registered: bool,
    unregistered: bool,
}

/// One pass: plan, send, report.
fn pass(bootstrap: &str, id: i32, max_moves: usize) -> anyhow::Result<Progress> {
    let mut c = Client::connect(bootstrap)?;
    let (brokers, partitions) = load(&mut c)?;
    let Some(me) = brokers.iter().find(|b| b.id == id).cloned() else {
        let left = partitions.iter().filter(|p| p.replicas.contains(&id)).count();
        return Ok(Progress {
            broker: id,
            replicas_left: left,
            leaders_left: 0,
            moving: 0,
            started: 0,
            stuck: vec![],
            refused: vec![],
            fenced: true,
            registered: false,
            unregistered: false,
        });
    };
    let plan = plan(&brokers, &partitions, id, max_moves);
    let mut refused = Vec::new();
    if !plan.lead_away.is_empty() {
        let order: Vec<(String, i32, Option<Vec<i32>>)> = plan.lead_away.iter().map(|(t, p, r)| (t.clone(), *p, Some(r.clone()))).collect();
        refused.extend(reassign(&mut c, &order)?);
        let parts: Vec<(String, i32)> = plan.lead_away.iter().map(|(t, p, _)| (t.clone(), *p)).collect();
        // ELECTION_NOT_NEEDED is no refusal: the leader moved already.
        refused.extend(elect_preferred(&mut c, &parts)?.into_iter().filter(|e| !e.ends_with("ELECTION_NOT_NEEDED")));
    }
    if !plan.moves.is_empty() {
        let moves: Vec<(String, i32, Option<Vec<i32>>)> = plan.moves.iter().map(|(t, p, r)| (t.clone(), *p, Some(r.clone()))).collect();
        refused.extend(reassign(&mut c, &moves)?);
    }
    let holding: Vec<&Partition> = partitions.iter().filter(|p| p.replicas.contains(&id)).collect();
    let mut progress = Progress {
        broker: id,
        replicas_left: holding.len(),
        leaders_left: holding.iter().filter(|p| p.leader == id).count(),
        moving: holding.iter().filter(|p| p.moving).count(),
        started: plan.moves.len(),
        stuck: plan.stuck,
        refused,
        fenced: me.fenced,
        registered: true,
        unregistered: false,
    };
    if holding.is_empty() && me.fenced {
        let resp = c.send(&UnregisterBrokerRequest::default().with_broker_id(BrokerId(id)), 0)?;
        if resp.error_code != 0 {
            bail!("UnregisterBroker {id}: {}", super::cluster::err_name(resp.error_code));
        }
        progress.registered = false;
        progress.unregistered = true;
    }
    Ok(progress)
}

fn print(p: &Progress, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string(p)?);
        return Ok(());
    }
    if p.unregistered {
        println!("broker {}: empty and stopped: unregistered", p.broker);
    } else if !p.registered {
        println!("broker {}: not registered ({} partitions still name it)", p.broker, p.replicas_left);
    } else if p.replicas_left == 0 {
        println!("broker {}: holds no replicas; stop its process to unregister it (rerun this command then)", p.broker);
    } else {
        println!("broker {}: {} replicas left ({} leaders), {} moving, {} moves started", p.broker, p.replicas_left, p.leaders_left, p.moving, p.started);
    }
    for s in &p.stuck {
        println!("  stuck: {s}");
    }
    for r in &p.refused {
        println!("  refused: {r}");
    }
    Ok(())
}

/// `shardlog cluster decommission`: one pass, or (`wait`) passes every second until the
/// broker is unregistered or `timeout` passes.
pub fn decommission(bootstrap: &str, id: i32, wait: bool, max_moves: usize, timeout: Duration, json: bool) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        let p = pass(bootstrap, id, max_moves.max(1))?;
        print(&p, json)?;
        if !wait || !p.registered {
            return Ok(());
        }
        // Nothing running, nothing started, and what is left has nowhere to go (e.g. a
        // replication factor equal to the number of brokers): waiting cannot help.
        if p.replicas_left > 0 && p.moving == 0 && p.started == 0 && p.stuck.len() == p.replicas_left {
            bail!(
                "broker {id} cannot be drained: {} partitions have no active broker to move to (add a broker, or lower their replication factor)",
                p.stuck.len()
            );
        }
        if Instant::now() >= deadline {
            bail!("broker {id} not drained and unregistered within {} s", timeout.as_secs());
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// `shardlog cluster recommission`: cancels the reassignments still moving replicas off
/// `id` (the controller reverts each to its replicas before it).
pub fn recommission(bootstrap: &str, id: i32, json: bool) -> anyhow::Result<()> {
    let mut c = Client::connect(bootstrap)?;
    let ongoing = c.send(&ListPartitionReassignmentsRequest::default().with_timeout_ms(30_000).with_topics(None), 0)?;
    if ongoing.error_code != 0 {
        bail!("ListPartitionReassignments: {}", super::cluster::err_name(ongoing.error_code));
    }
    let cancel: Vec<(String, i32, Option<Vec<i32>>)> = ongoing
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().filter(|p| p.removing_replicas.contains(&BrokerId(id))).map(move |p| (t.name.0.to_string(), p.partition_index, None)))
        .collect();
    let refused = if cancel.is_empty() { Vec::new() } else { reassign(&mut c, &cancel)? };
    let cancelled: Vec<String> = cancel.iter().map(|(t, p, _)| format!("{t}-{p}")).collect();
    if json {
        println!("{}", serde_json::json!({"broker": id, "cancelled": cancelled, "refused": refused}));
    } else {
        println!(
            "broker {id}: {} moves cancelled{}",
            cancelled.len(),
            if cancelled.is_empty() { String::new() } else { format!(": {}", cancelled.join(", ")) }
        );
        for r in &refused {
            println!("  refused: {r}");
        }
    }
    Ok(())
}

/// Test data for the planners' unit tests (here and `replica_moves.rs`).
#[cfg(test)]
pub(super) mod fixtures {
    use super::{Broker, Partition};

    /// An active broker; "" = no rack.
    pub fn b(id: i32, rack: &str) -> Broker {
        Broker { id, rack: (!rack.is_empty()).then(|| rack.to_string()), fenced: false }
    }

    /// Partition `index` of topic "t", fully in sync.
    pub fn p(index: i32, leader: i32, replicas: &[i32]) -> Partition {
        Partition { topic: "t".into(), index, leader, replicas: replicas.to_vec(), isr: replicas.to_vec(), moving: false }
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::{b, p};
    use super::*;

    #[test]
    fn leadership_moves_first_then_replicas() {
        let brokers = [b(1, ""), b(2, ""), b(3, ""), b(4, "")];
        let parts = [p(0, 4, &[4, 1]), p(1, 1, &[1, 4]), p(2, 2, &[2, 3])];
        let plan = plan(&brokers, &parts, 4, 10);
        assert_eq!(plan.lead_away, vec![("t".into(), 0, vec![1, 4])], "partition 0 is led away first, not moved yet");
        // Partition 1 moves to the least loaded broker holding none of it: 3 holds one
        // replica, 2 holds one: the lower id.
        assert_eq!(plan.moves, vec![("t".into(), 1, vec![1, 2])]);
        assert!(plan.stuck.is_empty());
    }

    #[test]
    fn racks_are_kept_then_spread() {
        let brokers = [b(1, "a"), b(2, "b"), b(3, "b"), b(4, "a"), b(5, "c")];
        // Broker 4 (rack a) leaves; 1 is in rack a but holds the partition already.
        let plan1 = plan(&brokers, &[p(0, 2, &[2, 4])], 4, 10);
        assert_eq!(plan1.moves, vec![("t".into(), 0, vec![2, 1])], "same rack as the leaving broker");
        let plan2 = plan(&brokers, &[p(0, 2, &[2, 1, 4])], 4, 10);
        assert_eq!(plan2.moves, vec![("t".into(), 0, vec![2, 1, 5])], "no room in rack a: a rack the partition lacks");
    }

    #[test]
    fn no_room_is_stuck_and_moves_are_capped() {
        let brokers = [b(1, ""), b(2, "")];
        let plan1 = plan(&brokers, &[p(0, 1, &[1, 2])], 2, 10);
        assert_eq!(plan1.stuck, vec!["t-0: no active broker without a replica of it".to_string()]);
        let brokers = [b(1, ""), b(2, ""), b(3, "")];
        let parts: Vec<Partition> = (0..5).map(|i| p(i, 1, &[1, 3])).collect();
        assert_eq!(plan(&brokers, &parts, 3, 2).moves.len(), 2, "at most max_moves at once");
        let mut running = parts.clone();
        running[0].moving = true;
        assert_eq!(plan(&brokers, &running, 3, 2).moves.len(), 1, "running moves count");
    }

    #[test]
    fn a_fenced_broker_takes_nothing() {
        let mut brokers = vec![b(1, ""), b(2, ""), b(3, "")];
        brokers[1].fenced = true;
        let plan = plan(&brokers, &[p(0, 1, &[1, 3])], 3, 10);
        assert_eq!(plan.stuck.len(), 1, "{plan:?}");
    }
}
