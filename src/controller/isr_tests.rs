//! ISR changes as committed records (issue 12): AlterPartition's checks through `apply`,
//! the ISR and leaders after fencing and re-registration, unclean elections on and off,
//! and AlterPartition through the real controller thread (`ControllerHandle`).
use std::collections::BTreeMap;
use std::time::Duration;

use futures::executor::block_on;

use super::apply::apply;
use super::snapshot;
use super::types::{Applied, Command, Rejection, Response};
use super::*;
use crate::cluster::image::{BrokerId, BrokerMeta, MetadataDelta, MetadataImage, PartitionMeta, ReplicaMeta, TopicMeta, NO_LEADER};
use crate::cluster::topic_config::{MIN_INSYNC_REPLICAS, UNCLEAN_LEADER_ELECTION_ENABLE};

const T: [u8; 16] = [1; 16];

fn broker(id: BrokerId, inc: u8) -> BrokerMeta {
    BrokerMeta { id, incarnation: [inc; 16], host: "h".into(), port: 9092, rack: None, shard_count: 1, listeners: Vec::new(), fenced: false }
}

/// An empty image with eligible.leader.replicas.version 1 (`elr`) or 0.
fn image_with_elr(elr: bool) -> MetadataImage {
    let mut img = MetadataImage::default();
    img.features.set(&[(crate::cluster::features::ELIGIBLE_LEADER_REPLICAS_VERSION.to_string(), i16::from(elr))]);
    img
}

/// Applies `cmds` in order after the ones already in `log` (indices follow).
struct Log {
    img: MetadataImage,
    index: u64,
}

impl Log {
    /// Brokers 1, 2, 3 registered; topic "t" (configs `configs`) with one partition on
    /// [1, 2, 3], led by 1, ISR all three.
    fn new(configs: &[(&str, &str)]) -> Log {
        Log::with_elr(configs, false)
    }

    /// As `new`, with KIP-966 eligible leader replicas on (`elr`) or off (Kafka before it:
    /// the last ISR member stays in the ISR whatever happens to it).
    fn with_elr(configs: &[(&str, &str)], elr: bool) -> Log {
        let mut log = Log { img: image_with_elr(elr), index: 0 };
        for id in 1..=3 {
            log.ok(Command::RegisterBroker { broker: broker(id, id as u8), unclean_default: false, min_isr_default: 0, clean_shutdown_of: None });
        }
        let configs: BTreeMap<String, String> = configs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let replicas = vec![(1..=3).map(|b| ReplicaMeta { broker: b, shard: 0 }).collect()];
        log.ok(Command::CreateTopic { name: "t".into(), topic_id: T, shards: vec![], replicas, configs });
        assert_eq!(log.p().isr, vec![1, 2, 3], "a new partition has every replica in sync");
        log
    }

    fn apply(&mut self, cmd: Command) -> (Response, Vec<MetadataDelta>) {
        self.index += 1;
        apply(&mut self.img, self.index, &cmd)
    }

    fn ok(&mut self, cmd: Command) -> Vec<MetadataDelta> {
        let (resp, deltas) = self.apply(cmd.clone());
        assert!(resp.0.is_ok(), "{cmd}: {resp:?}");
        deltas
    }

    fn p(&self) -> PartitionMeta {
        self.img.topics["t"].partitions[0].clone()
    }

    /// AlterPartition from the current leader at the current epochs.
    fn alter(&self, isr: &[BrokerId]) -> Command {
        let p = self.p();
        Command::AlterPartition {
            topic_id: T,
            partition: 0,
            leader: p.leader,
            leader_epoch: p.leader_epoch,
            partition_epoch: p.partition_epoch,
            new_isr: isr.to_vec(),
            new_isr_epochs: vec![],
        }
    }

    fn fence(&mut self, b: BrokerId, unclean_default: bool) -> Vec<MetadataDelta> {
        let incarnation = self.img.brokers[&b].incarnation;
        self.ok(Command::FenceBroker { broker: b, incarnation, unclean_default, min_isr_default: 0 })
    }

    fn unfence(&mut self, b: BrokerId, unclean_default: bool) -> Vec<MetadataDelta> {
        let incarnation = self.img.brokers[&b].incarnation;
        self.ok(Command::UnfenceBroker { broker: b, incarnation, unclean_default, min_isr_default: 0 })
    }

    /// Applies an AlterPartition the image must refuse; returns why.
    fn refused(&mut self, cmd: Command) -> AlterPartitionError {
        match self.apply(cmd) {
            (Response(Err(Rejection::AlterPartition(e))), deltas) => {
                assert!(deltas.is_empty());
                e
            }
            other => panic!("{other:?}"),
        }
    }

    fn summary(&self) -> (BrokerId, Vec<BrokerId>, i32, i32) {
        let p = self.p();
        (p.leader, p.isr, p.leader_epoch, p.partition_epoch)
    }
}

fn leaders_changed() -> Vec<MetadataDelta> {
    vec![MetadataDelta::LeadersChanged { name: "t".into() }]
}

#[test]
fn alter_partition_as_a_committed_record_checks_and_bumps_the_partition_epoch() {
    let mut log = Log::new(&[]);
    let shrink = log.alter(&[1, 3]);
    let (resp, deltas) = log.apply(shrink.clone());
    let p = match resp {
        Response(Ok(Applied::PartitionAltered(p))) => p,
        other => panic!("{other:?}"),
    };
    assert_eq!((p.leader, p.isr.clone(), p.leader_epoch, p.partition_epoch), (1, vec![1, 3], 0, 1));
    assert_eq!(p, log.p());
    assert_eq!(deltas, leaders_changed(), "the shards re-read the topic");
    // The same record again (a retry after a lost answer): its partition epoch is stale.
    let before = log.img.topics.clone();
    use AlterPartitionError::*;
    assert_eq!(log.refused(shrink), InvalidUpdateVersion);
    // Each of Kafka's refusals, none of which changes anything.
    let (le, pe) = (log.p().leader_epoch, log.p().partition_epoch);
    let req = |topic_id: [u8; 16], partition: i32, leader: BrokerId, leader_epoch: i32, partition_epoch: i32| Command::AlterPartition {
        topic_id,
        partition,
        leader,
        leader_epoch,
        partition_epoch,
        new_isr: vec![1, 2, 3],
        new_isr_epochs: vec![],
    };
    assert_eq!(log.refused(req([9; 16], 0, 1, le, pe)), UnknownTopicOrPartition);
    assert_eq!(log.refused(req(T, 3, 1, le, pe)), UnknownTopicOrPartition);
    assert_eq!(log.refused(req(T, 0, 1, le - 1, pe)), FencedLeaderEpoch);
    assert_eq!(log.refused(req(T, 0, 1, le + 1, pe)), FencedLeaderEpoch);
    assert!(matches!(log.refused(req(T, 0, 2, le, pe)), InvalidRequest(m) if m.contains("not the leader")));
    assert_eq!(log.refused(req(T, 0, 1, le, pe - 1)), InvalidUpdateVersion);
    assert!(matches!(log.refused(log.alter(&[2, 3])), InvalidRequest(m) if m.contains("leader")));
    assert!(matches!(log.refused(log.alter(&[1, 4])), InvalidRequest(m) if m.contains("not a replica")));
    assert!(matches!(log.refused(log.alter(&[])), InvalidRequest(_)));
    assert_eq!(log.img.topics, before);
    // Expanding with a fenced broker: ineligible, until it is back.
    log.fence(2, false);
    assert_eq!(log.refused(log.alter(&[1, 2, 3])), IneligibleReplica);
    log.unfence(2, false);
    let deltas = log.ok(log.alter(&[1, 2, 3]));
    assert_eq!((log.summary(), deltas), ((1, vec![1, 2, 3], 0, 2), leaders_changed()));
    // The ISR asked for is the current one: applied, nothing changes, nobody is told.
    let deltas = log.ok(log.alter(&[3, 2, 1]));
    assert_eq!((log.summary(), deltas), ((1, vec![1, 2, 3], 0, 2), vec![]));
}

#[test]
fn fencing_shrinks_the_isr_and_moves_leadership_within_it() {
    let mut log = Log::new(&[]);
    assert_eq!(log.fence(1, false)[1..], leaders_changed()[..]);
    assert_eq!(log.summary(), (2, vec![2, 3], 1, 1));
    // A leader's AlterPartition from before the fencing is stale now.
    let stale =
        Command::AlterPartition { topic_id: T, partition: 0, leader: 1, leader_epoch: 0, partition_epoch: 0, new_isr: vec![1, 2], new_isr_epochs: vec![] };
    assert!(matches!(log.apply(stale).0, Response(Err(Rejection::AlterPartition(AlterPartitionError::FencedLeaderEpoch)))));
    log.fence(3, false);
    assert_eq!(log.summary(), (2, vec![2], 1, 2));
    // The last ISR member fenced: it stays in the ISR, the partition is offline.
    log.fence(2, false);
    assert_eq!(log.summary(), (NO_LEADER, vec![2], 2, 3));
    // Broker 1 comes back first: not in the ISR, so it does not lead (no unclean election).
    log.unfence(1, false);
    assert_eq!(log.summary().0, NO_LEADER);
    // Broker 2 comes back: it leads again, in a new epoch.
    log.unfence(2, false);
    assert_eq!(log.summary(), (2, vec![2], 3, 4));
}

#[test]
fn a_restart_leaves_every_isr_it_shares_and_may_lead_where_it_was_alone() {
    // Two partitions: "t"-0 on [1, 2, 3] (ISR all) and "u"-0 on [1, 2] with ISR [1].
    let mut log = Log::new(&[]);
    let on = |bs: &[BrokerId]| bs.iter().map(|b| ReplicaMeta { broker: *b, shard: 0 }).collect::<Vec<_>>();
    log.ok(Command::CreateTopic { name: "u".into(), topic_id: [2; 16], shards: vec![], replicas: vec![on(&[1, 2])], configs: BTreeMap::new() });
    log.ok(Command::AlterPartition {
        topic_id: [2; 16],
        partition: 0,
        leader: 1,
        leader_epoch: 0,
        partition_epoch: 0,
        new_isr: vec![1],
        new_isr_epochs: vec![],
    });
    // Broker 1 restarts before the session timeout noticed: a new incarnation registers.
    let deltas = log.ok(Command::RegisterBroker { broker: broker(1, 11), unclean_default: false, min_isr_default: 0, clean_shutdown_of: None });
    assert!(deltas.contains(&MetadataDelta::BrokersChanged) && deltas.contains(&MetadataDelta::LeadersChanged { name: "u".into() }), "{deltas:?}");
    // It may have lost unsynced writes: out of the ISR it shared, leadership moved on.
    assert_eq!(log.summary(), (2, vec![2, 3], 1, 1));
    // Where it was the only ISR member, its log is the only complete one: it leads again,
    // in a new epoch (two: the old incarnation's leadership ended first).
    let u = log.img.topics["u"].partitions[0].clone();
    assert_eq!((u.leader, u.isr, u.leader_epoch), (1, vec![1], 2));
    assert!(!log.img.brokers[&1].fenced && log.img.brokers[&1].incarnation == [11; 16]);
    // Restarted again after the session timeout fenced it: the same end state.
    log.fence(1, false);
    log.ok(Command::RegisterBroker { broker: broker(1, 12), unclean_default: false, min_isr_default: 0, clean_shutdown_of: None });
    let u = log.img.topics["u"].partitions[0].clone();
    assert_eq!((u.leader, u.isr, u.leader_epoch), (1, vec![1], 4));
    assert_eq!(log.summary(), (2, vec![2, 3], 1, 1), "t untouched: broker 1 was already out of its ISR");
    // It rejoins an ISR through its leader's AlterPartition once caught up.
    log.ok(log.alter(&[1, 2, 3]));
    assert_eq!(log.summary(), (2, vec![1, 2, 3], 1, 2));
}

#[test]
fn unclean_election_only_where_the_topic_or_the_default_allows_it() {
    // ISR [1] (the followers lag), then broker 1 is fenced.
    let offline = |topic_configs: &[(&str, &str)], unclean_default: bool| {
        let mut log = Log::new(topic_configs);
        log.ok(log.alter(&[1]));
        log.fence(1, unclean_default);
        log
    };
    assert_eq!(offline(&[], false).summary(), (NO_LEADER, vec![1], 1, 2), "off by default");
    assert_eq!(offline(&[], true).summary(), (2, vec![2], 1, 2), "the controller's static default");
    assert_eq!(offline(&[(UNCLEAN_LEADER_ELECTION_ENABLE, "true")], false).summary(), (2, vec![2], 1, 2));
    assert_eq!(offline(&[(UNCLEAN_LEADER_ELECTION_ENABLE, "false")], true).summary().0, NO_LEADER, "the topic's key wins");

    // Every replica down, the partition offline; broker 3 comes back first.
    let mut log = offline(&[], false);
    log.fence(2, false);
    log.fence(3, false);
    log.unfence(3, false);
    assert_eq!(log.summary().0, NO_LEADER, "waits for broker 1, the ISR");
    // The operator allows unclean elections on the topic: broker 3 leads at once.
    let deltas =
        log.ok(Command::SetTopicConfigs { name: "t".into(), topic_id: T, configs: [(UNCLEAN_LEADER_ELECTION_ENABLE.to_string(), "true".to_string())].into() });
    assert_eq!(deltas, vec![MetadataDelta::TopicConfigChanged { name: "t".into() }, MetadataDelta::LeadersChanged { name: "t".into() }]);
    assert_eq!(log.summary(), (3, vec![3], 2, 3));
    // Broker 1 returns: the partition has a leader; broker 1 is out of the ISR.
    log.unfence(1, false);
    assert_eq!(log.summary(), (3, vec![3], 2, 3));

    // Enabled cluster-wide (dynamic broker default) while offline, a replica live: elected.
    let mut log = offline(&[], false);
    assert_eq!(log.summary().0, NO_LEADER);
    log.ok(Command::SetResourceConfigs {
        resource: crate::cluster::image::ConfigResource::Broker(String::new()),
        configs: [(UNCLEAN_LEADER_ELECTION_ENABLE.to_string(), "true".to_string())].into(),
    });
    assert_eq!(log.summary(), (2, vec![2], 2, 3));
}

#[test]
fn replaying_the_log_gives_the_same_isrs() {
    let cmds = {
        let mut log = Log::new(&[(UNCLEAN_LEADER_ELECTION_ENABLE, "true")]);
        let mut cmds = Vec::new();
        let mut push = |log: &mut Log, c: Command| {
            log.apply(c.clone());
            cmds.push(c);
        };
        let c = log.alter(&[1, 2]);
        push(&mut log, c);
        let inc = log.img.brokers[&1].incarnation;
        push(&mut log, Command::FenceBroker { broker: 1, incarnation: inc, unclean_default: false, min_isr_default: 0 });
        let c = log.alter(&[2, 3]);
        push(&mut log, c);
        push(&mut log, Command::RegisterBroker { broker: broker(2, 22), unclean_default: true, min_isr_default: 0, clean_shutdown_of: None });
        cmds
    };
    let run = || {
        let mut log = Log::new(&[(UNCLEAN_LEADER_ELECTION_ENABLE, "true")]);
        let out: Vec<_> = cmds.iter().map(|c| log.apply(c.clone())).collect();
        (log.img, out)
    };
    let (a, b) = (run(), run());
    assert_eq!(a, b);
    // ISR [1, 2], then [2] (1 fenced), then [2, 3]; broker 2 restarts: it leaves the ISR,
    // 3 leads cleanly; 2, live again, is a follower.
    let p = &a.0.topics["t"].partitions[0];
    assert_eq!((p.leader, p.isr.clone()), (3, vec![3]));
}

/// A controller (node 1) whose image has brokers 2 and 3 (live, long session timeout) and
/// topic "r" on [1, 2, 3] led by 1, every replica in sync, as a cluster with replication
/// would have left it.
fn start_replicated(dir: &std::path::Path) -> (ControllerHandle, Vec<super::ShardUpdates>) {
    let mut c = ControllerConfig { data_dir: dir.to_path_buf(), node_id: 1, shard_count: 1, snapshot_every_entries: 2, ..Default::default() };
    let (h, _rxs) = start(c.clone()).unwrap();
    for i in 0..3 {
        block_on(h.create_topic(format!("t{i}"), 1, 1, Default::default(), false)).unwrap();
    }
    h.shutdown();
    h.join();
    let ctl = dir.join("controller");
    let (meta, mut image, _) = snapshot::load(&ctl).unwrap().expect("a snapshot was taken");
    for id in [2, 3] {
        image.brokers.insert(id, broker(id, id as u8));
    }
    let p = PartitionMeta::new_on(0, (1..=3).map(|b| ReplicaMeta { broker: b, shard: 0 }).collect());
    image.topics.insert("r".into(), TopicMeta { name: "r".into(), topic_id: [7; 16], partitions: vec![p], configs: Default::default() });
    snapshot::store(&ctl, &snapshot::encode(&meta, &image).unwrap()).unwrap();
    c.session_timeout = Duration::from_secs(600);
    c.auto_leader_rebalance_enable = false;
    start(c).unwrap()
}

#[test]
fn alter_partition_through_the_controller_thread() {
    let dir = tempfile::tempdir().unwrap();
    let (h, rxs) = start_replicated(dir.path());
    let r = |h: &ControllerHandle| h.image().topic("r").unwrap().partitions[0].clone();
    // Node 1 restarted (a new incarnation): it left the ISR, broker 2 leads.
    let before = r(&h);
    assert_eq!((before.leader, before.isr.clone(), before.leader_epoch), (2, vec![2, 3], 1));
    while rxs[0].try_recv().is_ok() {}
    // Broker 1 caught up: the leader expands the ISR.
    let p = block_on(h.alter_partition([7; 16], 0, 2, before.leader_epoch, before.partition_epoch, vec![2, 3, 1], vec![])).unwrap();
    assert_eq!((p.isr.clone(), p.leader, p.leader_epoch, p.partition_epoch), (vec![1, 2, 3], 2, before.leader_epoch, before.partition_epoch + 1));
    assert_eq!(r(&h), p, "the handle's image has it once answered");
    let (update, _) = block_on(rxs[0].recv()).unwrap();
    assert!(update.deltas.contains(&MetadataDelta::LeadersChanged { name: "r".into() }), "{:?}", update.deltas);
    // The same request again: refused, nothing written.
    let applied = h.image().applied_index;
    let err = block_on(h.alter_partition([7; 16], 0, 2, before.leader_epoch, before.partition_epoch, vec![1, 2, 3], vec![])).unwrap_err();
    assert_eq!(err, ControllerError::AlterPartition(AlterPartitionError::InvalidUpdateVersion));
    let err = block_on(h.alter_partition([7; 16], 0, 1, p.leader_epoch, p.partition_epoch, vec![1, 2], vec![])).unwrap_err();
    assert!(matches!(err, ControllerError::AlterPartition(AlterPartitionError::InvalidRequest(_))), "{err}");
    let err = block_on(h.alter_partition([8; 16], 0, 2, p.leader_epoch, p.partition_epoch, vec![2], vec![])).unwrap_err();
    assert_eq!(err, ControllerError::AlterPartition(AlterPartitionError::UnknownTopicOrPartition));
    // The current ISR asked for: the partition as it is, nothing written.
    assert_eq!(block_on(h.alter_partition([7; 16], 0, 2, p.leader_epoch, p.partition_epoch, vec![3, 2, 1], vec![])).unwrap(), p);
    assert_eq!(h.image().applied_index, applied, "refused or unchanged requests commit no record");
    h.shutdown();
    h.join();
    // The change survived (log replay); this restart takes broker 1 out of the ISR again.
    let c = ControllerConfig {
        data_dir: dir.path().to_path_buf(),
        node_id: 1,
        shard_count: 1,
        session_timeout: Duration::from_secs(600),
        auto_leader_rebalance_enable: false,
        ..Default::default()
    };
    let (h, _rxs) = start(c).unwrap();
    let after = r(&h);
    assert_eq!((after.leader, after.isr, after.partition_epoch), (2, vec![2, 3], p.partition_epoch + 1));
    h.shutdown();
    h.join();
}

mod properties {
    use proptest::prelude::*;

    use super::*;

    /// Brokers 1..=4; topic "t" with a partition per assignment; unclean elections as asked.
    fn start(assignments: &[Vec<BrokerId>], unclean: bool, elr: bool) -> Log {
        let mut log = Log { img: image_with_elr(elr), index: 0 };
        for id in 1..=4 {
            log.ok(Command::RegisterBroker { broker: broker(id, id as u8), unclean_default: false, min_isr_default: 0, clean_shutdown_of: None });
        }
        let replicas = assignments.iter().map(|bs| bs.iter().map(|b| ReplicaMeta { broker: *b, shard: 0 }).collect()).collect();
        let configs = if unclean { [(UNCLEAN_LEADER_ELECTION_ENABLE.to_string(), "true".to_string())].into() } else { BTreeMap::new() };
        log.ok(Command::CreateTopic { name: "t".into(), topic_id: T, shards: vec![], replicas, configs });
        log
    }

    fn check(img: &MetadataImage) -> Result<(), TestCaseError> {
        let elr = img.features.elr_enabled();
        for p in &img.topics["t"].partitions {
            prop_assert!((elr || !p.isr.is_empty()) && p.isr.iter().all(|b| p.replica_on(*b).is_some()), "{p:?}");
            prop_assert!(p.isr.len() == 1 && !elr || p.isr.iter().all(|b| img.is_live(*b)), "a fenced broker in a shared ISR (or any, with ELR): {p:?}");
            prop_assert!(p.elr.iter().all(|b| !p.isr.contains(b) && p.replica_on(*b).is_some()), "ELR outside the ISR: {p:?}");
            prop_assert!(p.elr.is_empty() || p.isr.is_empty(), "ELR only below min ISR (1 here): {p:?}");
            if p.leader == NO_LEADER {
                prop_assert!(!p.isr.iter().any(|b| img.is_live(*b)), "leaderless with a live ISR member: {p:?}");
                prop_assert!(!p.isr.is_empty() || !p.elr.iter().any(|b| img.is_live(*b)), "leaderless with a live ELR member: {p:?}");
            } else {
                prop_assert!(img.is_live(p.leader) && p.isr.contains(&p.leader), "{p:?}");
            }
        }
        Ok(())
    }

    proptest! {
        /// AlterPartitions built from the current or an older image, mixed with fencings,
        /// unfencings and restarts: the ISR rules hold after every record, epochs never go
        /// back, and an AlterPartition is applied only at the current epochs.
        #[test]
        fn alter_partition_fencing_and_restarts_keep_the_isr_rules(
            assignments in prop::collection::vec(prop::sample::subsequence(vec![1, 2, 3, 4], 2..=3), 1..4),
            unclean in any::<bool>(),
            elr in any::<bool>(),
            steps in prop::collection::vec((0..5u8, 1..=4i32, 0..4usize, any::<u8>(), 0..8usize), 1..60),
        ) {
            let mut log = start(&assignments, unclean, elr);
            let mut past: Vec<Vec<PartitionMeta>> = vec![log.img.topics["t"].partitions.clone()];
            let mut incarnation = 10u8;
            for (kind, b, part, mask, age) in steps {
                let before = log.img.topics["t"].partitions.clone();
                match kind {
                    0 | 1 => {
                        // From a view `age` records old (or the current one).
                        let view = &past[past.len() - 1 - age.min(past.len() - 1)];
                        let p = &view[part % view.len()];
                        if p.leader == NO_LEADER {
                            continue;
                        }
                        let new_isr: Vec<BrokerId> = p.replicas.iter().enumerate().filter(|(i, r)| mask & (1 << i) != 0 || r.broker == p.leader && kind == 0).map(|(_, r)| r.broker).collect();
                        let cmd = Command::AlterPartition { topic_id: T, partition: p.partition, leader: p.leader, leader_epoch: p.leader_epoch, partition_epoch: p.partition_epoch, new_isr, new_isr_epochs: vec![] };
                        let cur = &before[p.partition as usize];
                        match log.apply(cmd).0 {
                            Response(Ok(Applied::PartitionAltered(after))) => {
                                prop_assert_eq!((p.leader, p.leader_epoch, p.partition_epoch), (cur.leader, cur.leader_epoch, cur.partition_epoch), "applied a stale request");
                                prop_assert_eq!(after.leader_epoch, cur.leader_epoch);
                                let changed = after.isr != cur.isr;
                                prop_assert_eq!(after.partition_epoch, cur.partition_epoch + i32::from(changed));
                            }
                            Response(Err(Rejection::AlterPartition(_))) => prop_assert_eq!(&log.img.topics["t"].partitions, &before),
                            other => prop_assert!(false, "{:?}", other),
                        }
                    }
                    2 => {
                        if log.img.is_live(b) {
                            log.fence(b, false);
                        }
                    }
                    3 => {
                        if !log.img.is_live(b) {
                            log.unfence(b, false);
                        }
                    }
                    _ => {
                        incarnation = incarnation.wrapping_add(1);
                        log.ok(Command::RegisterBroker { broker: broker(b, incarnation), unclean_default: false, min_isr_default: 0, clean_shutdown_of: None });
                    }
                }
                check(&log.img)?;
                for (p, q) in before.iter().zip(&log.img.topics["t"].partitions) {
                    prop_assert!(q.leader_epoch >= p.leader_epoch && q.partition_epoch >= p.partition_epoch);
                    if q.leader != p.leader {
                        prop_assert!(q.leader_epoch > p.leader_epoch);
                    }
                    if q.isr != p.isr || q.leader != p.leader {
                        prop_assert!(q.partition_epoch > p.partition_epoch);
                    }
                }
                past.push(log.img.topics["t"].partitions.clone());
            }
        }
    }
}

/// (leader, ISR, ELR, last known ELR) of "t"-0.
fn elr_view(log: &Log) -> (BrokerId, Vec<BrokerId>, Vec<BrokerId>, Vec<BrokerId>) {
    let p = log.p();
    (p.leader, p.isr, p.elr, p.last_known_elr)
}

/// Broker `b` restarts as incarnation `inc`, after a clean shutdown or not.
fn restart(log: &mut Log, b: BrokerId, inc: u8, clean: bool) {
    let clean_shutdown_of = clean.then(|| log.img.brokers[&b].incarnation);
    log.ok(Command::RegisterBroker { broker: broker(b, inc), unclean_default: false, min_isr_default: 0, clean_shutdown_of });
}

#[test]
fn elr_keeps_the_replica_that_has_the_acknowledged_records_eligible() {
    // The scenario that loses records without KIP-966: min ISR 2, the ISR shrinks to the
    // leader, the follower that left is stopped, the leader crashes (losing what it had
    // not synced) and comes back first.
    let mut log = Log::with_elr(&[(MIN_INSYNC_REPLICAS, "2")], true);
    log.ok(log.alter(&[1, 2]));
    assert_eq!(elr_view(&log), (1, vec![1, 2], vec![], vec![]), "ISR at min ISR: no ELR (3 may lack records below the high watermark)");
    log.ok(log.alter(&[1]));
    assert_eq!(elr_view(&log), (1, vec![1], vec![2], vec![]), "2 left an ISR below min: it has everything below the held high watermark");
    log.fence(2, false);
    log.fence(3, false);
    assert_eq!(elr_view(&log).2, vec![2], "a fenced ELR member stays eligible");
    log.fence(1, false);
    assert_eq!(elr_view(&log), (NO_LEADER, vec![], vec![1, 2], vec![1]), "the last ISR member leaves the ISR, into the ELR");
    restart(&mut log, 1, 11, false);
    assert_eq!(elr_view(&log), (NO_LEADER, vec![], vec![2], vec![1]), "back after a crash: not eligible, so it does not lead");
    log.unfence(2, false);
    assert_eq!(elr_view(&log), (2, vec![2], vec![], vec![]), "the eligible replica leads");
    let p = log.p();
    assert!(p.leader_epoch > 0 && p.partition_epoch > 0);
}

#[test]
fn a_clean_restart_stays_eligible_and_leads_again() {
    let mut log = Log::with_elr(&[(MIN_INSYNC_REPLICAS, "2")], true);
    log.ok(log.alter(&[1]));
    log.fence(2, false);
    log.fence(3, false);
    log.fence(1, false);
    assert_eq!(elr_view(&log), (NO_LEADER, vec![], vec![1, 2, 3], vec![1]));
    restart(&mut log, 1, 11, true);
    assert_eq!(elr_view(&log), (1, vec![1], vec![2, 3], vec![]), "a clean shutdown kept 1 eligible: it leads, 2 and 3 stay eligible");
}

#[test]
fn the_last_known_leader_leads_when_nothing_else_is_eligible() {
    // min ISR 1 (the default): the ELR fills only when the ISR empties.
    let mut log = Log::with_elr(&[], true);
    log.ok(log.alter(&[1]));
    assert_eq!(elr_view(&log), (1, vec![1], vec![], vec![]));
    log.fence(2, false);
    log.fence(3, false);
    log.fence(1, false);
    assert_eq!(elr_view(&log), (NO_LEADER, vec![], vec![1], vec![1]));
    restart(&mut log, 1, 11, false);
    assert_eq!(elr_view(&log), (1, vec![1], vec![], vec![]), "Kafka's balanced recovery: the lone last leader, even after a crash");
}

#[test]
fn elr_off_keeps_the_last_isr_member_as_before() {
    let mut log = Log::with_elr(&[(MIN_INSYNC_REPLICAS, "2")], false);
    log.ok(log.alter(&[1]));
    log.fence(1, false);
    assert_eq!(elr_view(&log), (NO_LEADER, vec![1], vec![], vec![]));
}

#[test]
fn the_controllers_min_isr_default_comes_with_the_liveness_records() {
    let mut log = Log::with_elr(&[], true);
    let incarnation = log.img.brokers[&3].incarnation;
    log.ok(Command::FenceBroker { broker: 3, incarnation, unclean_default: false, min_isr_default: 2 });
    assert_eq!(log.img.min_insync_replicas_default, 2);
    log.ok(log.alter(&[1]));
    assert_eq!(elr_view(&log).2, vec![2], "min ISR 2 from the controllers' default");
}
