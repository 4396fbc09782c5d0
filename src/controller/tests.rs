//! Controller tests: the real controller thread on a temp dir, plus a seeded simulation of
//! the pure propose/apply path.
use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;

use futures::executor::block_on;

use super::log_store::{LogStore, LOG_FILE};
use super::snapshot::SNAPSHOT_FILE;
use super::*;
use crate::cluster::image::{ConfigResource, MetadataDelta, MetadataImage};

fn cfg(dir: &Path, shards: u16) -> ControllerConfig {
    ControllerConfig {
        data_dir: dir.to_path_buf(),
        node_id: 1,
        shard_count: shards,
        core: None,
        default_num_partitions: 3,
        default_replication_factor: 1,
        snapshot_every_entries: 1_000_000,
        ..Default::default()
    }
}

fn cfgs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn stop(h: &ControllerHandle) {
    h.shutdown();
    h.join();
}

/// The image without what a restart changes by itself: `applied_index` (it appends a
/// blank entry for the new term), and the broker's incarnation with the epochs its
/// re-registration bumps.
fn content(img: &MetadataImage) -> MetadataImage {
    let mut img = MetadataImage { applied_index: 0, ..img.clone() };
    for b in img.brokers.values_mut() {
        b.incarnation = [0; 16];
    }
    for p in img.topics.values_mut().flat_map(|t| t.partitions.iter_mut()) {
        (p.leader_epoch, p.partition_epoch) = (0, 0);
    }
    img
}

#[test]
fn create_delete_alter_partitions_happy_path() {
    let dir = tempfile::tempdir().unwrap();
    let (h, rxs) = start(cfg(dir.path(), 2)).unwrap();
    assert_eq!(rxs.len(), 2);
    for rx in &rxs {
        let first = rx.try_recv().unwrap();
        assert!(first.deltas.is_empty());
        assert_eq!(first.image.cluster_id.len(), 22);
    }

    let t = block_on(h.create_topic("orders".into(), -1, -1, cfgs(&[("retention.ms", "1000")]), false)).unwrap();
    assert_eq!(t.partitions.len(), 3);
    assert!(t.partitions.iter().all(|p| p.leader_epoch == 0));
    assert_eq!(h.image().topic("orders"), Some(&t));
    for rx in &rxs {
        let u = rx.try_recv().unwrap();
        assert_eq!(u.deltas, vec![MetadataDelta::TopicCreated { name: "orders".into() }]);
        assert_eq!(u.image.topic("orders"), Some(&t));
    }

    // validate_only changes nothing and sends nothing.
    let v = block_on(h.create_topic("dry".into(), 5, 1, BTreeMap::new(), true)).unwrap();
    assert_eq!(v.partitions.len(), 5);
    assert!(h.image().topic("dry").is_none());
    block_on(h.create_partitions("orders".into(), 10, vec![], true)).unwrap();
    assert_eq!(h.image().topic("orders").unwrap().partitions.len(), 3);
    assert!(rxs[0].try_recv().is_err());

    block_on(h.create_partitions("orders".into(), 5, vec![], false)).unwrap();
    let parts = &h.image().topic("orders").unwrap().partitions.clone();
    assert_eq!(parts.iter().map(|p| p.partition).collect::<Vec<_>>(), vec![0, 1, 2, 3, 4]);
    for rx in &rxs {
        assert_eq!(rx.try_recv().unwrap().deltas, vec![MetadataDelta::PartitionsCreated { name: "orders".into(), first_new: 3 }]);
    }

    block_on(h.alter_topic_configs(
        "orders".into(),
        vec![
            ConfigOp::Set("segment.bytes".into(), "1048576".into()),
            ConfigOp::Delete("retention.ms".into()),
            ConfigOp::Append("cleanup.policy".into(), "compact".into()),
        ],
        false,
    ))
    .unwrap();
    assert_eq!(h.image().topic("orders").unwrap().configs, cfgs(&[("cleanup.policy", "delete,compact"), ("segment.bytes", "1048576")]));
    assert_eq!(rxs[0].try_recv().unwrap().deltas, vec![MetadataDelta::TopicConfigChanged { name: "orders".into() }]);
    block_on(h.alter_topic_configs("orders".into(), vec![ConfigOp::Subtract("cleanup.policy".into(), "delete".into())], false)).unwrap();
    assert_eq!(h.image().topic("orders").unwrap().configs["cleanup.policy"], "compact");

    let a = block_on(h.allocate_producer_ids(1000)).unwrap();
    let b = block_on(h.allocate_producer_ids(10)).unwrap();
    assert_eq!((a, b), (0, 1000));
    assert_eq!(h.image().next_producer_id, 1010);

    let id = block_on(h.delete_topic("orders".into())).unwrap();
    assert_eq!(id, t.topic_id);
    assert!(h.image().topics.is_empty());
    let deltas: Vec<_> = std::iter::from_fn(|| rxs[0].try_recv().ok()).flat_map(|u| u.deltas).collect();
    assert_eq!(deltas.last(), Some(&MetadataDelta::TopicDeleted { name: "orders".into(), topic_id: id }));
    stop(&h);
    // After shutdown calls fail cleanly.
    assert!(matches!(block_on(h.delete_topic("x".into())), Err(ControllerError::NotController(_))));
}

#[test]
fn error_paths() {
    let dir = tempfile::tempdir().unwrap();
    let (h, _rxs) = start(cfg(dir.path(), 1)).unwrap();
    let create = |name: &str, n: i32, rf: i16, c: BTreeMap<String, String>| block_on(h.create_topic(name.into(), n, rf, c, false));
    for bad in ["", ".", "..", "a b", "ä", &"x".repeat(250)] {
        assert!(matches!(create(bad, 1, 1, BTreeMap::new()), Err(ControllerError::InvalidTopic(_))), "{bad:?}");
    }
    assert!(create(&"x".repeat(249), 1, 1, BTreeMap::new()).is_ok());
    assert!(matches!(create("p", 0, 1, BTreeMap::new()), Err(ControllerError::InvalidPartitions(_))));
    assert!(matches!(create("p", -2, 1, BTreeMap::new()), Err(ControllerError::InvalidPartitions(_))));
    assert!(matches!(create("p", 1, 0, BTreeMap::new()), Err(ControllerError::InvalidReplicationFactor(_))));
    assert!(matches!(create("p", 1, 3, BTreeMap::new()), Err(ControllerError::InvalidReplicationFactor(_))));
    match create("p", 1, 1, cfgs(&[("retention.ms", "soon")])) {
        Err(ControllerError::InvalidConfig(m)) => assert!(m.contains("retention.ms"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(create("p", 1, 1, cfgs(&[("bogus", "1")])), Err(ControllerError::InvalidConfig(_))));

    create("a.b", 1, -1, BTreeMap::new()).unwrap();
    assert!(matches!(create("a.b", 1, 1, BTreeMap::new()), Err(ControllerError::TopicAlreadyExists(_))));
    assert!(matches!(create("a_b", 1, 1, BTreeMap::new()), Err(ControllerError::InvalidTopic(_))));

    assert!(matches!(block_on(h.delete_topic("nope".into())), Err(ControllerError::UnknownTopic(_))));
    assert!(matches!(block_on(h.create_partitions("nope".into(), 3, vec![], false)), Err(ControllerError::UnknownTopic(_))));
    assert!(matches!(block_on(h.create_partitions("a.b".into(), 1, vec![], false)), Err(ControllerError::InvalidPartitions(_))));
    assert!(matches!(block_on(h.create_partitions("a.b".into(), 0, vec![], false)), Err(ControllerError::InvalidPartitions(_))));
    let alter = |ops| block_on(h.alter_topic_configs("a.b".into(), ops, false));
    assert!(matches!(alter(vec![ConfigOp::Append("retention.ms".into(), "1".into())]), Err(ControllerError::InvalidConfig(_))));
    assert!(matches!(alter(vec![ConfigOp::Set("segment.ms".into(), "0".into())]), Err(ControllerError::InvalidConfig(_))));
    assert!(matches!(alter(vec![ConfigOp::Delete("bogus".into())]), Err(ControllerError::InvalidConfig(_))));
    assert!(matches!(alter(vec![ConfigOp::Append("cleanup.policy".into(), "shred".into())]), Err(ControllerError::InvalidConfig(_))));
    assert!(matches!(alter(vec![ConfigOp::Subtract("cleanup.policy".into(), "delete".into())]), Err(ControllerError::InvalidConfig(_))));
    assert!(matches!(alter(vec![ConfigOp::Set("flush.ms".into(), "1".into()), ConfigOp::Delete("flush.ms".into())]), Err(ControllerError::InvalidConfig(_))));
    assert!(matches!(block_on(h.alter_topic_configs("nope".into(), vec![], false)), Err(ControllerError::UnknownTopic(_))));
    assert!(matches!(block_on(h.allocate_producer_ids(0)), Err(ControllerError::InvalidRequest(_))));
    assert!(h.image().topic("a.b").unwrap().configs.is_empty());
    stop(&h);
}

#[test]
fn placement_balances_across_topics() {
    let dir = tempfile::tempdir().unwrap();
    let (h, _rxs) = start(cfg(dir.path(), 3)).unwrap();
    let shards = |name: &str| -> Vec<u16> { h.image().topic(name).unwrap().partitions.iter().map(|p| p.shard).collect() };
    block_on(h.create_topic("a".into(), 4, 1, BTreeMap::new(), false)).unwrap();
    assert_eq!(shards("a"), vec![0, 1, 2, 0]);
    block_on(h.create_topic("b".into(), 2, 1, BTreeMap::new(), false)).unwrap();
    assert_eq!(shards("b"), vec![1, 2]);
    block_on(h.delete_topic("a".into())).unwrap();
    block_on(h.create_partitions("b".into(), 4, vec![], false)).unwrap();
    assert_eq!(shards("b"), vec![1, 2, 0, 0]);
    stop(&h);
}

fn populate(h: &ControllerHandle) {
    block_on(h.create_topic("t1".into(), 4, 1, cfgs(&[("cleanup.policy", "compact")]), false)).unwrap();
    block_on(h.create_topic("t2".into(), 1, 1, BTreeMap::new(), false)).unwrap();
    block_on(h.create_topic("gone".into(), 2, 1, BTreeMap::new(), false)).unwrap();
    block_on(h.create_partitions("t2".into(), 3, vec![], false)).unwrap();
    block_on(h.alter_topic_configs("t2".into(), vec![ConfigOp::Set("retention.bytes".into(), "123".into())], false)).unwrap();
    block_on(h.allocate_producer_ids(5000)).unwrap();
    block_on(h.delete_topic("gone".into())).unwrap();
    set_resource_configs(h);
}

/// Dynamic broker (cluster default and per broker) and group configs.
fn set_resource_configs(h: &ControllerHandle) {
    let set = |k: &str, v: &str| ConfigOp::Set(k.into(), v.into());
    block_on(h.alter_resource_configs(ConfigResource::Broker(String::new()), vec![set("log.retention.ms", "1000")], false, false)).unwrap();
    block_on(h.alter_resource_configs(ConfigResource::Broker("1".into()), vec![set("message.max.bytes", "5000")], false, false)).unwrap();
    block_on(h.alter_resource_configs(ConfigResource::Group("g".into()), vec![set("consumer.session.timeout.ms", "50000")], false, false)).unwrap();
}

#[test]
fn resource_configs_validate_replace_and_publish() {
    let dir = tempfile::tempdir().unwrap();
    let (h, rxs) = start(cfg(dir.path(), 1)).unwrap();
    rxs[0].try_recv().unwrap();
    set_resource_configs(&h);
    // Three commits the shard had not taken yet: merged into one update, the second broker
    // change dropped (re-reading the broker configs once against the newest image is enough).
    let deltas: Vec<MetadataDelta> = std::iter::from_fn(|| rxs[0].try_recv().ok()).flat_map(|u| u.deltas).collect();
    assert_eq!(deltas, vec![MetadataDelta::BrokerConfigChanged, MetadataDelta::GroupConfigChanged { group: "g".into() }]);
    let broker = ConfigResource::Broker("1".into());
    // Read-only and unknown keys, bad values, list ops: refused, nothing committed.
    let bad = [
        (ConfigOp::Set("num.partitions".into(), "3".into()), "InvalidRequest"),
        (ConfigOp::Set("no.such".into(), "3".into()), "InvalidRequest"),
        (ConfigOp::Set("log.retention.ms".into(), "x".into()), "InvalidConfig"),
        (ConfigOp::Append("log.cleanup.policy".into(), "compact".into()), "InvalidConfig"),
    ];
    for (op, kind) in bad {
        let e = block_on(h.alter_resource_configs(broker.clone(), vec![op.clone()], false, false)).unwrap_err();
        assert!(format!("{e:?}").starts_with(kind), "{op:?}: {e:?}");
    }
    // validate_only commits nothing; replace drops the keys not named.
    let set = |k: &str, v: &str| ConfigOp::Set(k.into(), v.into());
    block_on(h.alter_resource_configs(broker.clone(), vec![set("log.segment.bytes", "1048576")], true, true)).unwrap();
    assert_eq!(h.image().configs_of(&broker), &cfgs(&[("message.max.bytes", "5000")]));
    block_on(h.alter_resource_configs(broker.clone(), vec![set("log.segment.bytes", "1048576")], true, false)).unwrap();
    assert_eq!(h.image().configs_of(&broker), &cfgs(&[("log.segment.bytes", "1048576")]));
    block_on(h.alter_resource_configs(broker.clone(), vec![ConfigOp::Delete("log.segment.bytes".into())], false, false)).unwrap();
    assert!(!h.image().resource_configs.contains_key(&broker));
    stop(&h);
}

#[test]
fn resource_configs_survive_a_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = cfg(dir.path(), 1);
    c.snapshot_every_entries = 2;
    let (h, _rxs) = start(c.clone()).unwrap();
    set_resource_configs(&h);
    for i in 0..4 {
        block_on(h.create_topic(format!("t{i}"), 1, 1, BTreeMap::new(), false)).unwrap();
    }
    let before = h.image();
    assert_eq!(before.resource_configs.len(), 3);
    stop(&h);
    assert!(dir.path().join("controller").join(SNAPSHOT_FILE).exists());
    let (h2, _rxs2) = start(c).unwrap();
    assert_eq!(content(&h2.image()), content(&before));
    stop(&h2);
}

#[test]
fn restart_recovers_the_same_image() {
    let dir = tempfile::tempdir().unwrap();
    let (h, _rxs) = start(cfg(dir.path(), 4)).unwrap();
    populate(&h);
    let before = h.image();
    stop(&h);
    assert!(dir.path().join("controller").join(SNAPSHOT_FILE).exists(), "a clean stop leaves a snapshot (snapshot_at_shutdown)");

    let (h2, rxs2) = start(cfg(dir.path(), 4)).unwrap();
    let first = rxs2[3].try_recv().unwrap();
    assert!(first.deltas.is_empty());
    assert_eq!(content(&first.image), content(&before));
    assert_eq!(content(&h2.image()), content(&before));
    assert!(h2.image().applied_index >= before.applied_index);
    // The id allocator continues, it does not restart.
    assert_eq!(block_on(h2.allocate_producer_ids(1)).unwrap(), 5000);
    stop(&h2);

    // Fewer shards than the metadata uses: refuse to start, say why.
    match start(cfg(dir.path(), 2)) {
        Err(ControllerError::Config(m)) => assert!(m.contains("shard"), "{m}"),
        other => panic!("expected config error, got {:?}", other.map(|_| ())),
    }
}

#[test]
fn torn_log_tail_is_truncated_on_restart() {
    let dir = tempfile::tempdir().unwrap();
    // The log, not a snapshot taken at each stop, must carry the state here.
    let cfg = |dir: &Path, shards| ControllerConfig { snapshot_at_shutdown: false, ..cfg(dir, shards) };
    let (h, _rxs) = start(cfg(dir.path(), 2)).unwrap();
    populate(&h);
    let before = h.image();
    stop(&h);

    let log_path = dir.path().join("controller").join(LOG_FILE);
    let good_len = std::fs::metadata(&log_path).unwrap().len();
    // A torn write: a header that promises more bytes than follow.
    let mut f = OpenOptions::new().append(true).open(&log_path).unwrap();
    f.write_all(&super::frame::encode(u32::from_le_bytes(*b"SLRL"), 1, &[b'{'; 100])[..40]).unwrap();
    drop(f);

    let (h2, _rxs2) = start(cfg(dir.path(), 2)).unwrap();
    assert_eq!(content(&h2.image()), content(&before));
    block_on(h2.create_topic("after".into(), 1, 1, BTreeMap::new(), false)).unwrap();
    stop(&h2);
    let (h3, _rxs3) = start(cfg(dir.path(), 2)).unwrap();
    assert!(h3.image().topic("after").is_some());
    stop(&h3);
    assert!(std::fs::metadata(&log_path).unwrap().len() > good_len);
}

#[test]
fn log_is_purged_after_snapshot_and_state_survives() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = cfg(dir.path(), 2);
    c.snapshot_every_entries = 5;
    let (h, _rxs) = start(c.clone()).unwrap();
    for i in 0..12 {
        block_on(h.create_topic(format!("t{i}"), 2, 1, BTreeMap::new(), false)).unwrap();
    }
    let before = h.image();
    stop(&h);

    let ctl = dir.path().join("controller");
    assert!(ctl.join(SNAPSHOT_FILE).exists());
    // Everything up to the last snapshot is purged (no log is kept behind it).
    if let Some((first, last)) = LogStore::open(&ctl).unwrap().bounds().unwrap() {
        assert!(first > 1, "log not purged: first index {first}, last {last}");
        assert!(last + 1 - first < 5, "log holds {} entries", last + 1 - first);
    }
    let log_len = std::fs::metadata(ctl.join(LOG_FILE)).unwrap().len();
    assert!(log_len < 5 * 1024, "log file is {log_len} bytes");

    let (h2, _rxs2) = start(c).unwrap();
    assert_eq!(content(&h2.image()), content(&before));
    stop(&h2);
}

#[test]
fn corrupt_snapshot_is_rejected_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = cfg(dir.path(), 2);
    c.snapshot_every_entries = 3;
    let (h, _rxs) = start(c.clone()).unwrap();
    for i in 0..6 {
        block_on(h.create_topic(format!("t{i}"), 1, 1, BTreeMap::new(), false)).unwrap();
    }
    stop(&h);

    let path = dir.path().join("controller").join(SNAPSHOT_FILE);
    let mut bytes = std::fs::read(&path).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    match start(c) {
        Err(ControllerError::Storage(m)) => {
            assert!(m.contains(SNAPSHOT_FILE) && m.contains("CRC"), "{m}");
        }
        other => panic!("expected storage error, got {:?}", other.map(|_| ())),
    }
}

/// Seeded, deterministic simulation of random command sequences through the same propose
/// and apply code the controller runs, checking the image invariants after every step.
mod simulation {
    use super::super::apply::apply;
    use super::super::propose::{self, ProposeCtx};
    use super::super::types::Command;
    use super::*;
    use crate::cluster::topic_config::TopicConfigDefaults;

    /// xorshift64*: tiny, seedable, reproducible.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// An image where broker 1 (with `shard_count` shards) has registered.
    fn registered(shard_count: u16) -> MetadataImage {
        let mut img = MetadataImage::default();
        let broker = crate::cluster::image::BrokerMeta {
            id: 1,
            incarnation: [1; 16],
            host: "h".into(),
            port: 9092,
            rack: None,
            shard_count,
            listeners: Vec::new(),
            fenced: false,
        };
        let _ = apply(&mut img, 1, &Command::RegisterBroker { broker, unclean_default: false, min_isr_default: 0, clean_shutdown_of: None });
        img
    }

    fn check_invariants(img: &MetadataImage, shard_count: u16) {
        let mut ids = std::collections::BTreeSet::new();
        for (name, t) in &img.topics {
            assert_eq!(name, &t.name);
            assert!(ids.insert(t.topic_id), "duplicate topic id in {name}");
            for (i, p) in t.partitions.iter().enumerate() {
                assert_eq!(p.partition, i as i32, "{name}: partition ids not dense");
                assert!(p.shard < shard_count, "{name}-{i} on shard {}", p.shard);
            }
            assert!(!t.partitions.is_empty());
        }
        // Balance: placement never lets shards drift by more than a topic's worth when
        // only creations happen; here just check every shard is used once there is load.
    }

    fn run(seed: u64, steps: usize) -> MetadataImage {
        let defaults = TopicConfigDefaults::default();
        let shard_count = 1 + (seed % 5) as u16;
        let ctx = ProposeCtx {
            default_num_partitions: 2,
            default_replication_factor: 1,
            defaults: &defaults,
            unstable_feature_versions: false,
            remote_storage_system_enabled: false,
        };
        let mut rng = Rng(seed | 1);
        let mut img = registered(shard_count);
        let names: Vec<String> = (0..8).map(|i| format!("topic-{i}")).collect();
        let mut index = 0u64;
        for _ in 0..steps {
            let name = names[rng.below(names.len() as u64) as usize].clone();
            let mut id = [0u8; 16];
            id[..8].copy_from_slice(&rng.next().to_le_bytes());
            id[8..].copy_from_slice(&rng.next().to_le_bytes());
            let proposal: Result<Command, ControllerError> = match rng.below(5) {
                0 => {
                    let n = rng.below(6) as i32 - 1;
                    propose::create_topic(&ctx, &img, name, propose::Layout::counts(n, 1), BTreeMap::new(), id).map(|(c, _)| c)
                }
                1 => propose::delete_topic(&img, &name),
                2 => {
                    let total = rng.below(10) as i32;
                    propose::create_partitions(&ctx, &img, &name, total, &[])
                }
                3 => {
                    let op = match rng.below(3) {
                        0 => ConfigOp::Set("retention.ms".into(), (rng.below(5) as i64 - 2).to_string()),
                        1 => ConfigOp::Append("cleanup.policy".into(), "compact".into()),
                        _ => ConfigOp::Subtract("cleanup.policy".into(), "delete".into()),
                    };
                    propose::alter_configs(&ctx, &img, &name, vec![op], false)
                }
                _ => propose::allocate_producer_ids(&img, rng.below(3) as i64),
            };
            // Sometimes apply a stale proposal twice, as a leader change could: the second
            // apply must be refused or be harmless, never break invariants.
            if let Ok(cmd) = proposal {
                index += 1;
                let before_pid = img.next_producer_id;
                let _ = apply(&mut img, index, &cmd);
                assert!(img.next_producer_id >= before_pid);
                if rng.below(4) == 0 {
                    index += 1;
                    let _ = apply(&mut img, index, &cmd);
                }
            }
            check_invariants(&img, shard_count);
        }
        img
    }

    #[test]
    fn random_command_sequences_keep_invariants() {
        for seed in 0..64u64 {
            let a = run(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15), 300);
            // Same seed, same result: the simulation (and apply) is deterministic.
            let b = run(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15), 300);
            assert_eq!(a, b, "seed {seed} not deterministic");
        }
    }

    #[test]
    fn creations_only_stay_balanced() {
        let defaults = TopicConfigDefaults::default();
        let ctx = ProposeCtx {
            default_num_partitions: 1,
            default_replication_factor: 1,
            defaults: &defaults,
            unstable_feature_versions: false,
            remote_storage_system_enabled: false,
        };
        let mut rng = Rng(42);
        let mut img = registered(4);
        for i in 0..50u64 {
            let n = 1 + rng.below(7) as i32;
            let (cmd, _) = propose::create_topic(&ctx, &img, format!("t{i}"), propose::Layout::counts(n, 1), BTreeMap::new(), [i as u8; 16]).unwrap();
            apply(&mut img, i + 1, &cmd);
            let mut load = [0usize; 4];
            for p in img.topics.values().flat_map(|t| &t.partitions) {
                load[p.shard as usize] += 1;
            }
            let (min, max) = (load.iter().min().unwrap(), load.iter().max().unwrap());
            assert!(max - min <= 1, "unbalanced after {i}: {load:?}");
        }
    }
}

/// A log written before brokers existed (CreateTopic with shards, no replicas) still
/// applies; the node's first registration adopts its partitions, on the same shards.
#[test]
fn pre_broker_records_are_adopted_by_the_first_registration() {
    use super::apply::apply;
    use super::types::Command;
    use crate::cluster::image::{BrokerMeta, ReplicaMeta};
    let old: Command =
        serde_json::from_str(r#"{"CreateTopic":{"name":"t","topic_id":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],"shards":[1,0],"configs":{}}}"#).unwrap();
    // Liveness records written before issue 12 carry no unclean default: false.
    let fence: Command = serde_json::from_str(r#"{"FenceBroker":{"broker":4,"incarnation":[4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4]}}"#).unwrap();
    assert_eq!(fence, Command::FenceBroker { broker: 4, incarnation: [4; 16], unclean_default: false, min_isr_default: 0 });
    let mut img = MetadataImage::default();
    let _ = apply(&mut img, 1, &old);
    assert!(img.topics["t"].partitions.iter().all(|p| p.leader == -1 && p.replicas.is_empty()));
    let me = BrokerMeta { id: 4, incarnation: [4; 16], host: "h".into(), port: 1, rack: None, shard_count: 2, listeners: Vec::new(), fenced: false };
    let (_, deltas) = apply(&mut img, 2, &Command::RegisterBroker { broker: me.clone(), unclean_default: false, min_isr_default: 0, clean_shutdown_of: None });
    assert!(deltas.contains(&MetadataDelta::LeadersChanged { name: "t".into() }));
    let p = &img.topics["t"].partitions;
    assert_eq!((p[0].leader, p[0].shard, p[0].replicas.clone(), p[0].isr.clone()), (4, 1, vec![ReplicaMeta { broker: 4, shard: 1 }], vec![4]));
    assert_eq!((p[1].leader, p[1].shard), (4, 0));

    // A restart (new incarnation, never fenced): the old incarnation's leaderships end,
    // the new one leads again, each change a new leader epoch.
    let again = BrokerMeta { incarnation: [5; 16], ..me };
    let _ = apply(&mut img, 3, &Command::RegisterBroker { broker: again, unclean_default: false, min_isr_default: 0, clean_shutdown_of: None });
    let p = &img.topics["t"].partitions[0];
    assert_eq!((p.leader, p.leader_epoch), (4, 2));
    assert_eq!(img.brokers[&4].incarnation, [5; 16]);
    // A fencing record for the old incarnation is stale.
    let (resp, _) = apply(&mut img, 4, &Command::FenceBroker { broker: 4, incarnation: [4; 16], unclean_default: false, min_isr_default: 0 });
    assert!(resp.0.is_err());
    assert!(!img.brokers[&4].fenced);
}
