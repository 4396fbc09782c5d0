//! Moving leadership back to preferred replicas on the real controller thread: the
//! automatic rebalance (timer, leader check, proposal, apply) and ElectLeaders PREFERRED
//! through the handle. Leadership can be off its preferred replica while that replica is
//! in the ISR only once replication keeps followers in sync (issue 12), so these tests
//! write such an image into the controller's snapshot file, as a cluster with replication
//! would have left it, and start the controller on it.
use std::time::{Duration, Instant};

use futures::executor::block_on;

use super::snapshot;
use super::*;
use crate::cluster::image::{BrokerMeta, PartitionMeta, ReplicaMeta, TopicMeta};

/// A controller (node 1) whose image has topic "moved": preferred replica 2, led by 3,
/// both in the ISR, as after broker 2 was fenced, came back and caught up. Brokers 2 and 3
/// are live other processes that send no heartbeats: the session timeout is long enough
/// that they are not fenced during the test (fencing 3 would move leadership to 2 too).
fn start_on_moved_image(dir: &std::path::Path, rebalance_every: Option<Duration>) -> ControllerHandle {
    let mut c = ControllerConfig { data_dir: dir.to_path_buf(), node_id: 1, shard_count: 1, snapshot_every_entries: 2, ..Default::default() };
    let (h, _rxs) = start(c.clone()).unwrap();
    for i in 0..4 {
        block_on(h.create_topic(format!("t{i}"), 1, 1, Default::default(), false)).unwrap();
    }
    h.shutdown();
    h.join();

    let ctl = dir.join("controller");
    let (meta, mut image, _) = snapshot::load(&ctl).unwrap().expect("a snapshot was taken");
    for id in [2, 3] {
        image.brokers.insert(
            id,
            BrokerMeta { id, incarnation: [id as u8; 16], host: "h".into(), port: 9092, rack: None, shard_count: 1, listeners: Vec::new(), fenced: false },
        );
    }
    let mut p = PartitionMeta::new_on(0, vec![ReplicaMeta { broker: 2, shard: 0 }, ReplicaMeta { broker: 3, shard: 0 }]);
    (p.leader, p.isr, p.leader_epoch) = (3, vec![2, 3], 1);
    image.topics.insert("moved".into(), TopicMeta { name: "moved".into(), topic_id: [7; 16], partitions: vec![p], configs: Default::default() });
    snapshot::store(&ctl, &snapshot::encode(&meta, &image).unwrap()).unwrap();

    c.session_timeout = Duration::from_secs(600);
    c.auto_leader_rebalance_enable = rebalance_every.is_some();
    c.leader_imbalance_check_interval = rebalance_every.unwrap_or(Duration::from_secs(300));
    let (h, _rxs) = start(c).unwrap();
    assert_eq!(moved(&h).leader, 3);
    h
}

fn moved(h: &ControllerHandle) -> PartitionMeta {
    h.image().topic("moved").unwrap().partitions[0].clone()
}

fn stop(h: ControllerHandle) -> std::sync::Arc<crate::cluster::image::MetadataImage> {
    let img = h.image();
    h.shutdown();
    h.join();
    img
}

#[test]
fn the_leader_moves_leadership_back_to_the_preferred_replica_by_itself() {
    let dir = tempfile::tempdir().unwrap();
    let h = start_on_moved_image(dir.path(), Some(Duration::from_secs(1)));
    let deadline = Instant::now() + Duration::from_secs(60);
    while moved(&h).leader == 3 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let p = moved(&h);
    let img = stop(h);
    assert_eq!((p.leader, p.leader_epoch, p.isr), (2, 2, vec![2, 3]), "preferred leader elected once");
    assert!(img.is_live(2) && img.is_live(3), "moved by the rebalance, not by fencing");
}

#[test]
fn elect_leaders_preferred_moves_leadership_back_once() {
    let dir = tempfile::tempdir().unwrap();
    let h = start_on_moved_image(dir.path(), None);
    let all = block_on(h.elect_leaders(ElectionType::Preferred, None)).unwrap();
    let moved_results: Vec<_> = all.iter().filter(|t| t.topic == "moved").map(|t| t.partitions.clone()).collect();
    assert_eq!(moved_results, vec![vec![(0, Ok(()))]]);
    // The other topics' preferred replicas lead: left out, as Kafka does for "all".
    assert!(all.iter().filter(|t| t.topic != "moved").all(|t| t.partitions.is_empty()), "{all:?}");
    let p = moved(&h);
    assert_eq!((p.leader, p.leader_epoch), (2, 2));
    // Again: nothing to do, nothing written.
    let again = block_on(h.elect_leaders(ElectionType::Preferred, Some(vec![("moved".into(), vec![0])]))).unwrap();
    assert_eq!(again[0].partitions, vec![(0, Err(ElectionError::NotNeeded))]);
    let applied = h.image().applied_index;
    assert!(block_on(h.elect_leaders(ElectionType::Preferred, None)).unwrap().iter().all(|t| t.partitions.is_empty()));
    let img = stop(h);
    assert_eq!(img.applied_index, applied, "an election with nothing to elect commits no record");
    assert_eq!(img.topic("moved").unwrap().partitions[0].leader_epoch, 2);
}
