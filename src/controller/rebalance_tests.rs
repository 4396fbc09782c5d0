//! The automatic preferred-leader rebalance on the real controller thread: its timer, the
//! leader check, the proposal and the apply. Leadership can be off its preferred replica
//! while that replica is in the ISR only once replication keeps followers in sync (issue
//! 12), so the test writes such an image into the controller's snapshot file, as a
//! cluster with replication would have left it, and starts the controller on it.
use std::time::{Duration, Instant};

use futures::executor::block_on;

use super::snapshot;
use super::*;
use crate::cluster::image::{BrokerMeta, PartitionMeta, ReplicaMeta, TopicMeta};

#[test]
fn the_leader_moves_leadership_back_to_the_preferred_replica_by_itself() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = ControllerConfig { data_dir: dir.path().to_path_buf(), node_id: 1, shard_count: 1, snapshot_every_entries: 2, ..Default::default() };
    let (h, _rxs) = start(c.clone()).unwrap();
    for i in 0..4 {
        block_on(h.create_topic(format!("t{i}"), 1, 1, Default::default(), false)).unwrap();
    }
    h.shutdown();
    h.join();

    // Brokers 2 and 3 (live, other processes) hold "moved": preferred 2, led by 3, both in
    // the ISR, as after broker 2 was fenced, came back and caught up.
    let ctl = dir.path().join("controller");
    let (meta, mut image, _) = snapshot::load(&ctl).unwrap().expect("a snapshot was taken");
    for id in [2, 3] {
        image.brokers.insert(id, BrokerMeta { id, incarnation: [id as u8; 16], host: "h".into(), port: 9092, rack: None, shard_count: 1, fenced: false });
    }
    let mut p = PartitionMeta::new_on(0, vec![ReplicaMeta { broker: 2, shard: 0 }, ReplicaMeta { broker: 3, shard: 0 }]);
    (p.leader, p.isr, p.leader_epoch) = (3, vec![2, 3], 1);
    image.topics.insert("moved".into(), TopicMeta { name: "moved".into(), topic_id: [7; 16], partitions: vec![p], configs: Default::default() });
    snapshot::store(&ctl, &snapshot::encode(&meta, &image).unwrap()).unwrap();

    // Long session timeout: brokers 2 and 3 send no heartbeats and must not be fenced
    // (fencing 3 would move leadership to 2 too).
    c.session_timeout = Duration::from_secs(600);
    c.leader_imbalance_check_interval = Duration::from_secs(1);
    let (h, _rxs) = start(c).unwrap();
    assert_eq!(h.image().topic("moved").unwrap().partitions[0].leader, 3);
    let deadline = Instant::now() + Duration::from_secs(60);
    let p = loop {
        let p = h.image().topic("moved").unwrap().partitions[0].clone();
        if p.leader != 3 || Instant::now() > deadline {
            break p;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let img = h.image();
    h.shutdown();
    h.join();
    assert_eq!((p.leader, p.leader_epoch, p.isr), (2, 2, vec![2, 3]), "preferred leader elected once");
    assert!(img.is_live(2) && img.is_live(3), "moved by the rebalance, not by fencing");
}
