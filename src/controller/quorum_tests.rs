//! A 3-voter quorum of real controller threads in one process, talking over loopback TCP
//! (rpc.rs / network.rs / rpc_server.rs): election, forwarding to the leader, apply on every
//! node, DescribeQuorum, and losing the leader. Polls with generous deadlines, asserts no
//! timings (benches/controller_failover.py measures them on real processes).
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use futures::executor::block_on;

use super::*;

const DEADLINE: Duration = Duration::from_secs(60);

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

fn voter_cfg(dir: &Path, id: i32, voters: &BTreeMap<u64, String>) -> ControllerConfig {
    ControllerConfig {
        data_dir: dir.join(format!("node-{id}")),
        node_id: id,
        shard_count: 1,
        listener: Some(voters[&(id as u64)].clone()),
        voters: voters.clone(),
        ..Default::default()
    }
}

/// Starts the given voters at once (each start blocks until the quorum has a leader).
fn start_all(cfgs: Vec<ControllerConfig>) -> Vec<ControllerHandle> {
    let threads: Vec<_> = cfgs.into_iter().map(|c| std::thread::spawn(move || start(c).map(|(h, _rx)| h))).collect();
    threads.into_iter().map(|t| t.join().unwrap().unwrap()).collect()
}

fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !ok() {
        assert!(Instant::now() < deadline, "not within {DEADLINE:?}: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn three_voters_elect_forward_apply_and_survive_losing_the_leader() {
    let dir = tempfile::tempdir().unwrap();
    let voters: BTreeMap<u64, String> = (1..=3).map(|id| (id, format!("127.0.0.1:{}", free_port()))).collect();
    let mut nodes: Vec<Option<ControllerHandle>> = start_all((1..=3).map(|id| voter_cfg(dir.path(), id, &voters)).collect()).into_iter().map(Some).collect();
    let node = |nodes: &Vec<Option<ControllerHandle>>, id: u64| nodes[id as usize - 1].clone().unwrap();

    // One cluster id on every node (written once by the first leader).
    let cluster_id = node(&nodes, 1).image().cluster_id.clone();
    assert_eq!(cluster_id.len(), 22);
    for id in 2..=3 {
        wait_until("every node has the cluster id", || node(&nodes, id).image().cluster_id == cluster_id);
    }

    // Created through each node in turn: forwarded to the leader, applied everywhere.
    for id in 1..=3u64 {
        let name = format!("via-{id}");
        let t = block_on(node(&nodes, id).create_topic(name.clone(), 2, -1, BTreeMap::new(), false)).unwrap();
        // The node that answered has applied it (it waits for the leader's applied index).
        assert_eq!(node(&nodes, id).image().topic(&name), Some(&t));
        for other in 1..=3 {
            wait_until("applied on every node", || node(&nodes, other).image().topic(&name) == Some(&t));
        }
    }
    // A duplicate is refused by the leader, whichever node forwards it.
    let dup = block_on(node(&nodes, 2).create_topic("via-1".into(), 1, -1, BTreeMap::new(), false));
    assert_eq!(dup, Err(ControllerError::TopicAlreadyExists("via-1".into())));

    // DescribeQuorum, asked of any node, answers the leader's view.
    let q = block_on(node(&nodes, 3).describe_quorum()).unwrap();
    assert_eq!(q.voters.iter().map(|v| v.id).collect::<Vec<_>>(), vec![1, 2, 3]);
    assert!(q.observers.is_empty());
    assert_eq!(q.listeners, voters);
    let leader = q.leader_id;
    assert!(q.leader_epoch >= 1 && q.high_watermark >= 5, "{q:?}");
    let me = q.voters.iter().find(|v| v.id == leader).unwrap();
    assert!(me.log_end_offset >= q.high_watermark);

    // Lose the leader: the two others elect a new one and keep committing; nothing is lost.
    let old = nodes[leader as usize - 1].take().unwrap();
    old.shutdown();
    old.join();
    let survivor = (1..=3).find(|id| *id != leader).unwrap();
    let t = block_on(node(&nodes, survivor).create_topic("after".into(), 1, -1, BTreeMap::new(), false)).unwrap();
    let q2 = block_on(node(&nodes, survivor).describe_quorum()).unwrap();
    assert_ne!(q2.leader_id, leader);
    assert!(q2.leader_epoch > q.leader_epoch);
    for id in (1..=3).filter(|id| *id != leader) {
        wait_until("survivors apply", || node(&nodes, id).image().topic("after").map(|x| x.topic_id) == Some(t.topic_id));
        let img = node(&nodes, id).image();
        assert!(["via-1", "via-2", "via-3"].iter().all(|n| img.topic(n).is_some()));
    }

    // The old leader restarts on its data dir, rejoins, and catches up.
    let back = start_all(vec![voter_cfg(dir.path(), leader as i32, &voters)]).remove(0);
    // ("after" may have been placed on the dead leader before it was fenced: its leader
    // and epochs move since, so the topic is compared by id.)
    wait_until("the restarted node catches up", || back.image().topic("after").map(|x| x.topic_id) == Some(t.topic_id));
    assert_eq!(back.image().cluster_id, cluster_id);
    nodes[leader as usize - 1] = Some(back);

    for h in nodes.into_iter().flatten() {
        h.shutdown();
        h.join();
    }
}

#[test]
fn a_single_node_describes_itself_as_the_whole_quorum() {
    let dir = tempfile::tempdir().unwrap();
    let (h, _rx) = start(ControllerConfig { data_dir: dir.path().to_path_buf(), ..Default::default() }).unwrap();
    let q = block_on(h.describe_quorum()).unwrap();
    assert_eq!(q.leader_id, 1);
    assert_eq!(q.voters.len(), 1);
    assert!(q.listeners.is_empty());
    assert!(q.voters[0].log_end_offset >= q.high_watermark && q.high_watermark >= 1);
    h.shutdown();
    h.join();
}

/// Roles: a controller-only voter (no shards, never a broker) and a broker-only observer
/// (a raft learner). The observer joins through the voter, follows the log, forwards its
/// requests; DescribeQuorum lists it as an observer; a restart re-joins idempotently.
#[test]
fn a_controller_only_voter_and_a_broker_only_observer() {
    let dir = tempfile::tempdir().unwrap();
    let voters = BTreeMap::from([(1u64, format!("127.0.0.1:{}", free_port()))]);
    let controller = ControllerConfig { shard_count: 0, broker: false, ..voter_cfg(dir.path(), 1, &voters) };
    let observer_addr = format!("127.0.0.1:{}", free_port());
    let observer = ControllerConfig {
        data_dir: dir.path().join("node-7"),
        node_id: 7,
        shard_count: 2,
        listener: Some(observer_addr.clone()),
        voters: voters.clone(),
        ..Default::default()
    };
    let (c, no_shards) = start(controller).unwrap();
    assert!(no_shards.is_empty());
    let (o, rx) = start(observer.clone()).unwrap();
    assert_eq!(rx.len(), 2);
    // Only the observer's broker registered; the controller-only node never does.
    wait_until("the observer's broker registered", || c.image().brokers.keys().copied().collect::<Vec<_>>() == vec![7]);
    assert_eq!(o.image().cluster_id, c.image().cluster_id);
    // Forwarded to the voter, committed, applied on the observer before it answers.
    let t = block_on(o.create_topic("via-observer".into(), 3, -1, BTreeMap::new(), false)).unwrap();
    assert_eq!(o.image().topic("via-observer"), Some(&t));
    assert!(t.partitions.iter().all(|p| p.replicas.iter().all(|r| r.broker == 7)));
    let q = block_on(o.describe_quorum()).unwrap();
    assert_eq!(q.leader_id, 1);
    assert_eq!(q.voters.iter().map(|r| r.id).collect::<Vec<_>>(), vec![1]);
    assert_eq!(q.observers.iter().map(|r| r.id).collect::<Vec<_>>(), vec![7]);
    assert_eq!(q.listeners.get(&7), Some(&observer_addr));
    // A restarted observer re-joins (AddObserver is idempotent) and has everything.
    o.shutdown();
    o.join();
    let before = c.image().brokers[&7].incarnation;
    let (o, _rx) = start(observer).unwrap();
    // (Its partitions' leader epochs moved: the new incarnation re-registered.)
    assert_eq!(o.image().topic("via-observer").map(|x| x.topic_id), Some(t.topic_id));
    // Its new incarnation re-registered before start returned.
    assert_ne!(c.image().brokers[&7].incarnation, before);
    let q = block_on(c.describe_quorum()).unwrap();
    assert_eq!(q.observers.iter().map(|r| r.id).collect::<Vec<_>>(), vec![7]);
    o.shutdown();
    o.join();
    c.shutdown();
    c.join();
}
