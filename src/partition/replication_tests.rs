//! Replication at the partition layer, on a real executor with real files: a leader
//! with followers driven by hand (their fetches recorded as the Fetch handler will),
//! acks=all, min.insync.replicas, ISR proposals, follower appends, leadership changes,
//! the high-watermark checkpoint and truncation.
use std::cell::RefCell;
use std::path::Path;
use std::rc::Rc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::Compression;

use super::tests::{batch, run, settings, writer_idle};
use super::{BrokerId, Partition, PartitionError, PartitionSettings, ReadLimit, Role, RoleState};
use crate::config::FlushMode;
use crate::runtime::now_ms;
use crate::storage::LogConfig;

const LEADER: BrokerId = 1;

fn config(flush: FlushMode) -> (LogConfig, PartitionSettings) {
    let cfg = LogConfig { write_mode: super::write_mode(flush), ..LogConfig::default() };
    (cfg, PartitionSettings { flush, min_insync_replicas: 2, ..settings() })
}

pub(super) async fn open_leader(dir: &Path, replicas: &[BrokerId], isr: &[BrokerId], flush: FlushMode) -> Rc<Partition> {
    let (cfg, settings) = config(flush);
    let role = RoleState::Leader { leader_epoch: 0, partition_epoch: 0, replicas: replicas.to_vec(), isr: isr.to_vec() };
    Partition::open_replica(&dir.join("t-0"), "t".into(), 0, [1; 16], 0, LEADER, role, cfg, settings).await.expect("open leader")
}

pub(super) async fn open_follower(dir: &Path, broker: BrokerId, leader_epoch: i32, flush: FlushMode) -> Rc<Partition> {
    let (cfg, settings) = config(flush);
    let role = RoleState::Follower { leader_epoch, leader: LEADER };
    Partition::open_replica(&dir.join("t-0"), "t".into(), 0, [1; 16], 0, broker, role, cfg, settings).await.expect("open follower")
}

/// The outcome of a task spawned to append, once it finished.
type Outcome = Rc<RefCell<Option<Result<i64, String>>>>;

/// Appends in the background with `acks`; the outcome (base offset or error) lands in the
/// returned cell.
fn spawn_append(p: &Rc<Partition>, records: Bytes, acks: i16) -> Outcome {
    let out: Outcome = Rc::default();
    let (p, cell) = (p.clone(), out.clone());
    glommio::spawn_local(async move {
        let res = p.append(records, acks).await.map(|o| o.base_offset).map_err(|e| format!("{e:?}"));
        *cell.borrow_mut() = Some(res);
    })
    .detach();
    out
}

async fn settle() {
    glommio::timer::sleep(Duration::from_millis(20)).await;
}

/// Waits (bounded) until `cell` holds an outcome.
async fn outcome(cell: &Outcome) -> Result<i64, String> {
    for _ in 0..2_000 {
        if let Some(r) = cell.borrow().clone() {
            return r;
        }
        glommio::timer::sleep(Duration::from_millis(1)).await;
    }
    panic!("the append never finished");
}

fn one(n: usize) -> Bytes {
    batch(n, 1_000, None, Compression::None)
}

#[test]
fn acks_all_waits_until_every_isr_member_fetched_past_the_batch() {
    run(|dir| async move {
        let p = open_leader(&dir, &[1, 2, 3], &[1, 2, 3], FlushMode::Always).await;
        let acked = spawn_append(&p, one(5), -1);
        settle().await;
        assert_eq!(p.log_end_offset(), 5);
        assert!(acked.borrow().is_none(), "written, but no follower has it");
        assert_eq!(p.high_watermark(), 0);
        // A consumer sees nothing yet; a follower reads what the leader wrote.
        assert!(p.read(0, 1 << 20).await.unwrap().records.is_empty());
        let for_follower = p.read_for_follower(0, ReadLimit::at_least_one(1 << 20)).await.unwrap();
        assert_eq!((for_follower.records.len(), for_follower.high_watermark), (1, 0));
        let now = now_ms();
        assert!(!p.record_follower_fetch(2, 5, now), "3 has not fetched: the HW stays");
        assert!(p.record_follower_fetch(3, 3, now), "HW = min over the ISR");
        assert_eq!(p.high_watermark(), 3);
        settle().await;
        assert!(acked.borrow().is_none(), "3 has only part of the batch");
        assert!(p.record_follower_fetch(3, 5, now));
        assert_eq!(p.high_watermark(), 5);
        assert_eq!(outcome(&acked).await, Ok(0));
        // acks=1 does not wait for followers.
        assert_eq!(p.append(one(2), 1).await.unwrap().base_offset, 5);
        assert_eq!(p.high_watermark(), 5);
        assert!(!p.record_follower_fetch(9, 7, now), "not a replica: ignored");
    });
}

#[test]
fn a_follower_that_stops_fetching_is_shrunk_after_the_lag_and_not_before() {
    run(|dir| async move {
        let p = open_leader(&dir, &[1, 2, 3], &[1, 2, 3], FlushMode::Never).await;
        let lag = 1_000;
        let t0 = now_ms();
        p.record_follower_fetch(2, 0, t0);
        p.record_follower_fetch(3, 0, t0);
        assert_eq!(p.isr_change_wanted(t0 + 10 * lag, lag), None, "both at the leader's end: in sync however long");
        p.append(one(5), 1).await.unwrap();
        writer_idle(&p).await;
        p.record_follower_fetch(2, 5, t0 + 100);
        assert_eq!(p.isr_change_wanted(t0 + lag, lag), None, "3 caught up exactly lag_ms ago");
        assert_eq!(p.isr_change_wanted(t0 + lag + 1, lag), Some(vec![1, 2]));
        p.set_pending_isr(vec![1, 2]);
        assert_eq!(p.isr_change_wanted(t0 + lag + 1, lag), None, "one change in flight at a time");
        assert_eq!(p.high_watermark(), 0, "3 still counts while the shrink is pending");
        p.update_isr(1, vec![1, 2]);
        assert_eq!((p.isr(), p.partition_epoch()), (vec![1, 2], 1));
        assert_eq!(p.high_watermark(), 5, "the shrink let the high watermark move");
        // 3 comes back and catches up: the leader proposes it again.
        p.record_follower_fetch(3, 2, t0 + lag + 2);
        assert_eq!(p.isr_change_wanted(t0 + lag + 2, lag), None, "behind the high watermark");
        p.record_follower_fetch(3, 5, t0 + lag + 3);
        assert_eq!(p.isr_change_wanted(t0 + lag + 3, lag), Some(vec![1, 2, 3]));
        p.set_pending_isr(vec![1, 2, 3]);
        p.clear_pending_isr();
        assert_eq!(p.isr_change_wanted(t0 + lag + 3, lag), Some(vec![1, 2, 3]), "a failed proposal is proposed again");
    });
}

#[test]
fn min_insync_replicas_is_enforced_before_and_after_the_append() {
    run(|dir| async move {
        let p = open_leader(&dir, &[1, 2, 3], &[1], FlushMode::Always).await;
        let err = p.append(one(3), -1).await.unwrap_err();
        assert!(matches!(err, PartitionError::NotEnoughReplicas { isr: 1, min_insync: 2 }), "{err:?}");
        assert_eq!(p.log_end_offset(), 0, "nothing appended");
        assert_eq!(p.append(one(3), 1).await.unwrap().base_offset, 0, "acks=1 does not need the ISR");
        assert_eq!(p.high_watermark(), 3, "the leader alone in the ISR");
        p.update_isr(1, vec![1, 2]);
        let acked = spawn_append(&p, one(2), -1);
        settle().await;
        assert!(acked.borrow().is_none());
        // 2 falls out before fetching the batch: the HW moves with the leader alone, and
        // the append is answered, but the ISR is too small now.
        p.update_isr(2, vec![1]);
        let res = outcome(&acked).await;
        assert!(res.as_ref().is_err_and(|e| e.starts_with("NotEnoughReplicasAfterAppend")), "{res:?}");
        assert_eq!(p.log_end_offset(), 5, "the batch stays appended (a retry is a duplicate for an idempotent producer)");
        p.update_isr(1, vec![1, 2, 3]);
        assert_eq!(p.isr(), vec![1], "a stale partition epoch is ignored");
    });
}

/// Copies the leader's log to the follower with the calls the fetcher makes, in reads of
/// at most `max_bytes`. Returns the number of fetches.
pub(super) async fn replicate(leader: &Partition, follower: &Partition, broker: BrokerId, max_bytes: usize) -> usize {
    let mut fetches = 0;
    loop {
        let offset = follower.log_end_offset();
        leader.record_follower_fetch(broker, offset, now_ms());
        let data = leader.read_for_follower(offset, ReadLimit::at_least_one(max_bytes)).await.expect("leader read");
        follower.set_follower_high_watermark(data.high_watermark);
        if data.records.is_empty() {
            return fetches;
        }
        let mut all = BytesMut::new();
        for b in &data.records {
            all.extend_from_slice(b);
        }
        let end = follower.append_as_follower(all.freeze()).await.expect("follower append");
        assert_eq!(end, follower.log_end_offset());
        fetches += 1;
    }
}

fn segment_bytes(p: &Partition) -> Vec<u8> {
    std::fs::read(p.dir().join("00000000000000000000.log")).expect("segment")
}

#[test]
fn a_follower_chain_gives_byte_identical_logs_and_replicated_producer_state() {
    run(|dir| async move {
        let leader = open_leader(&dir.join("a"), &[1, 2], &[1, 2], FlushMode::Never).await;
        let follower = open_follower(&dir.join("b"), 2, 0, FlushMode::Never).await;
        assert_eq!(follower.role(), Role::Follower { leader: LEADER });
        assert_eq!(follower.last_fetched_epoch(), -1, "a follower assigns no epoch at open");
        for i in 0..6 {
            leader.append(batch(3, 100 + i, Some((7, 0, 3 * i as i32)), Compression::Lz4), 1).await.unwrap();
        }
        // A new leader epoch mid-way: the follower's epoch cache must learn it.
        leader.become_leader(3, 1, vec![1, 2], vec![1, 2]);
        for i in 6..10 {
            leader.append(batch(3, 100 + i, Some((7, 0, 3 * i as i32)), Compression::None), 1).await.unwrap();
        }
        writer_idle(&leader).await;
        let fetches = replicate(&leader, &follower, 2, 700).await;
        assert!(fetches > 1, "several fetches of a few batches each ({fetches})");
        assert_eq!(follower.log_end_offset(), 30);
        assert_eq!(leader.high_watermark(), 30, "the follower fetched at the end: HW moved");
        replicate(&leader, &follower, 2, 700).await;
        assert_eq!(follower.high_watermark(), 30, "the follower took the leader's HW");
        writer_idle(&follower).await;
        assert_eq!(segment_bytes(&leader), segment_bytes(&follower), "byte-identical logs");
        assert_eq!(follower.last_fetched_epoch(), 3);
        for epoch in 0..5 {
            assert_eq!(follower.epoch_end_offset(epoch), leader.epoch_end_offset(epoch), "epoch {epoch}");
        }
        // The follower is no leader, and the leader no follower.
        assert!(matches!(follower.append(one(1), 1).await, Err(PartitionError::NotLeader)));
        assert!(matches!(follower.read(0, 1000).await, Err(PartitionError::NotLeader)));
        assert!(matches!(leader.append_as_follower(one(1)).await, Err(PartitionError::NotFollower)));
        // Batches that do not continue the log are refused, and nothing is stored.
        let copy = leader.read_for_follower(0, ReadLimit::at_least_one(1)).await.unwrap().records[0].clone();
        let err = follower.append_as_follower(copy).await.unwrap_err();
        assert!(matches!(err, PartitionError::OffsetMismatch { expected: 30, got: 0 }), "{err:?}");
        let mut bad = BytesMut::from(&leader.read_for_follower(27, ReadLimit::at_least_one(1)).await.unwrap().records[0][..]);
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert!(matches!(follower.append_as_follower(bad.freeze()).await, Err(PartitionError::Batch(_))));
        assert_eq!(follower.log_end_offset(), 30);
        // The follower becomes leader: the producer's retry of its last batch is a duplicate.
        follower.become_leader(4, 2, vec![1, 2], vec![2]);
        let dup = follower.append(batch(3, 109, Some((7, 0, 27)), Compression::None), 1).await.unwrap();
        assert_eq!(dup.base_offset, 27, "producer state was replicated with the log");
        assert_eq!(follower.log_end_offset(), 30);
        assert_eq!(follower.append(batch(1, 110, Some((7, 0, 30)), Compression::None), 1).await.unwrap().base_offset, 30);
    });
}

#[test]
fn a_flush_always_follower_stores_the_same_batches() {
    run(|dir| async move {
        let leader = open_leader(&dir.join("a"), &[1, 2], &[1, 2], FlushMode::Never).await;
        let follower = open_follower(&dir.join("b"), 2, 0, FlushMode::Always).await;
        for i in 0..8 {
            leader.append(batch(2 + i % 3, 100 + i as i64, None, Compression::None), 1).await.unwrap();
        }
        writer_idle(&leader).await;
        replicate(&leader, &follower, 2, 500).await;
        assert!(follower.synced_offset() >= follower.log_end_offset(), "flush=always: synced before reported");
        let all = ReadLimit::at_least_one(1 << 20);
        let end = leader.log_end_offset();
        let theirs = leader.read_below(0, all, end).await.unwrap().records;
        let ours = follower.read_below(0, all, end).await.unwrap().records;
        assert_eq!(theirs, ours, "the same batches, byte for byte (O_DIRECT pads between them on disk)");
    });
}

#[test]
fn become_follower_fails_a_waiting_acks_all_append() {
    run(|dir| async move {
        let p = open_leader(&dir, &[1, 2], &[1, 2], FlushMode::Always).await;
        let acked = spawn_append(&p, one(4), -1);
        settle().await;
        assert!(acked.borrow().is_none());
        p.become_follower(1, 2);
        assert_eq!(outcome(&acked).await, Err("NotLeader".into()));
        assert!(!p.is_leader());
        // Even when the follower then reports it has everything, nothing is acknowledged.
        assert!(!p.record_follower_fetch(2, 4, now_ms()));
        assert!(matches!(p.append(one(1), 1).await, Err(PartitionError::NotLeader)));
        assert!(matches!(p.append(one(1), -1).await, Err(PartitionError::NotLeader)));
        assert_eq!(p.isr_change_wanted(now_ms(), 0), None);
        // A stale become-leader (older epoch) changes nothing.
        p.become_leader(0, 5, vec![1, 2], vec![1, 2]);
        assert!(!p.is_leader());
    });
}

#[test]
fn the_high_watermark_survives_a_reopen_through_its_checkpoint() {
    run(|dir| async move {
        let p = open_leader(&dir, &[1, 2], &[1, 2], FlushMode::Never).await;
        p.append(one(10), 1).await.unwrap();
        writer_idle(&p).await;
        p.record_follower_fetch(2, 6, now_ms());
        assert_eq!(p.high_watermark(), 6);
        p.checkpoint_high_watermark().await.unwrap();
        p.close();
        drop(p);
        let f = open_follower(&dir, 1, 1, FlushMode::Never).await;
        assert_eq!((f.high_watermark(), f.log_end_offset()), (6, 10), "from the checkpoint, not the log end");
        f.set_follower_high_watermark(4);
        assert_eq!(f.high_watermark(), 6, "never moves back");
        f.set_follower_high_watermark(99);
        assert_eq!(f.high_watermark(), 10, "capped at the log end");
        f.close();
        drop(f);
        // As leader with unknown followers, the HW starts at the checkpoint; as the only
        // replica, at its written offset (as before replication).
        let p = open_leader(&dir, &[1, 2], &[1, 2], FlushMode::Never).await;
        assert_eq!(p.high_watermark(), 6, "the last checkpoint, until the follower fetches");
        p.close();
        drop(p);
        let alone = super::tests::open_flushed(&dir, LogConfig::default(), FlushMode::Never).await;
        assert_eq!(alone.high_watermark(), 10);
    });
}

#[test]
fn leader_epoch_checks_follow_kafka() {
    run(|dir| async move {
        let p = open_leader(&dir, &[1, 2], &[1, 2], FlushMode::Never).await;
        p.become_leader(4, 1, vec![1, 2], vec![1, 2]);
        assert!(p.check_leader_epoch(-1).is_ok());
        assert!(p.check_leader_epoch(4).is_ok());
        assert!(matches!(p.check_leader_epoch(3), Err(PartitionError::FencedLeaderEpoch { request: 3, current: 4 })));
        assert!(matches!(p.check_leader_epoch(5), Err(PartitionError::UnknownLeaderEpoch { request: 5, current: 4 })));
        assert_eq!(p.epoch_end_offset(4), (4, 0), "a leader's epoch starts at its log end");
    });
}

#[test]
fn truncation_cuts_log_producer_state_epochs_and_high_watermark() {
    run(|dir| async move {
        let leader = open_leader(&dir.join("a"), &[1, 2], &[1, 2], FlushMode::Never).await;
        let f = open_follower(&dir.join("b"), 2, 0, FlushMode::Never).await;
        for i in 0..3 {
            leader.append(batch(4, 100, Some((9, 0, 4 * i)), Compression::None), 1).await.unwrap();
        }
        leader.become_leader(2, 1, vec![1, 2], vec![1, 2]);
        leader.append(batch(4, 100, Some((9, 0, 12)), Compression::None), 1).await.unwrap();
        writer_idle(&leader).await;
        replicate(&leader, &f, 2, 1 << 20).await;
        assert_eq!((f.log_end_offset(), f.high_watermark(), f.last_fetched_epoch()), (16, 16, 2));
        // Offset 9 is inside the batch [8, 11]: the whole batch goes (Kafka's truncateTo).
        assert_eq!(f.truncate_to(9).await.unwrap(), 8);
        assert_eq!((f.log_end_offset(), f.high_watermark(), f.last_fetched_epoch()), (8, 8, 0));
        assert_eq!(f.epoch_end_offset(2), (-1, -1), "epoch 2 wrote nothing left here");
        // The producer's batches from 8 on are gone from its state: as leader, a retry of
        // the batch at 8 is appended again, not answered as a duplicate.
        f.become_leader(3, 2, vec![1, 2], vec![2]);
        let again = f.append(batch(4, 100, Some((9, 0, 8)), Compression::None), 1).await.unwrap();
        assert_eq!(again.base_offset, 8);
        f.become_follower(4, 1);
        f.truncate_fully_and_start_at(100).await.unwrap();
        assert_eq!((f.log_start_offset(), f.log_end_offset(), f.high_watermark(), f.last_fetched_epoch()), (100, 100, 100, -1));
    });
}

/// A replica that led an epoch without writing in it holds that epoch's start at its log
/// end; once a follower again, the leader (which never had that epoch) answers a
/// divergence at exactly this log end. Truncating there must drop the empty epoch, or
/// every fetch names it again and diverges again forever (seen in test_txn_failover: a
/// 3.7 GB log of "diverging epoch" lines).
#[test]
fn truncating_at_the_log_end_drops_epochs_started_there() {
    run(|dir| async move {
        let p = open_leader(&dir, &[1, 2], &[1, 2], FlushMode::Never).await;
        p.append(batch(4, 100, None, Compression::None), 1).await.unwrap();
        writer_idle(&p).await;
        p.become_leader(3, 1, vec![1, 2], vec![1, 2]);
        assert_eq!(p.last_fetched_epoch(), 3, "an empty epoch starts at the log end");
        p.become_follower(4, 2);
        assert_eq!(p.truncate_to(4).await.unwrap(), 4);
        assert_eq!(p.last_fetched_epoch(), 0, "the empty epoch is gone");
        assert_eq!(p.log_end_offset(), 4);
    });
}

#[test]
fn a_fetched_batch_cut_by_the_size_limit_waits_for_the_next_fetch() {
    run(|dir| async move {
        let leader = open_leader(&dir.join("a"), &[1, 2], &[1, 2], FlushMode::Never).await;
        let follower = open_follower(&dir.join("b"), 2, 0, FlushMode::Never).await;
        leader.append(one(3), 1).await.unwrap();
        leader.append(one(2), 1).await.unwrap();
        writer_idle(&leader).await;
        let data = leader.read_for_follower(0, ReadLimit::at_least_one(1 << 20)).await.unwrap();
        assert_eq!(data.records.len(), 2);
        let mut cut = BytesMut::from(&data.records[0][..]);
        cut.extend_from_slice(&data.records[1][..data.records[1].len() - 7]);
        assert_eq!(follower.append_as_follower(cut.freeze()).await.unwrap(), 3, "the whole first batch only");
        let only_cut = data.records[1].slice(..20);
        assert!(matches!(follower.append_as_follower(only_cut).await, Err(PartitionError::Batch(_))), "no whole batch at all");
        assert_eq!(follower.append_as_follower(Bytes::new()).await.unwrap(), 3, "nothing fetched: nothing to do");
        assert_eq!(follower.append_as_follower(data.records[1].clone()).await.unwrap(), 5);
    });
}

#[test]
fn producer_state_replayed_from_disk_matches_the_live_table() {
    // The rebuild after a truncation replays the active segment from disk (at open its
    // batches come from recovery's scan): with nothing cut, it must give the live table.
    run(|dir| async move {
        let cfg = LogConfig { segment_bytes: 2048, ..LogConfig::default() };
        let settings = PartitionSettings { flush: FlushMode::Never, ..settings() };
        let p = Partition::open(&dir.join("t-0"), "t".into(), 0, [1; 16], 0, 0, cfg, settings).await.unwrap();
        for i in 0..30 {
            let producer = (i % 4, 0, (i / 4) as i32 * 2);
            p.append(batch(2, i, Some(producer), Compression::None), 1).await.unwrap();
        }
        writer_idle(&p).await;
        assert!(p.log.borrow().segment_count() > 2, "several segments, some with snapshots");
        let replayed = super::state::recover_producers(&p.log, None, None, "t", 0).await.unwrap();
        assert_eq!(&replayed, &*p.producers.borrow());
        assert!(p.producers.borrow().has_batches_from(58) && !p.producers.borrow().has_batches_from(60));
    });
}

#[derive(Clone, Debug)]
enum Step {
    Append(usize),
    /// A follower fetches `ahead` offsets further than it was (never past the leader).
    Fetch {
        broker: BrokerId,
        ahead: i64,
    },
    /// Time passes; the leader's ISR loop runs and proposes what it wants.
    Tick {
        ms: i64,
    },
    /// The controller answers the proposal in flight: commit or refuse.
    Answer {
        commit: bool,
    },
}

fn step() -> impl proptest::strategy::Strategy<Value = Step> {
    use proptest::prelude::*;
    prop_oneof![
        2 => (1..4usize).prop_map(Step::Append),
        4 => (2..=3i32, 0..8i64).prop_map(|(broker, ahead)| Step::Fetch { broker, ahead }),
        2 => (0..400i64).prop_map(|ms| Step::Tick { ms }),
        2 => any::<bool>().prop_map(|commit| Step::Answer { commit }),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 16, ..Default::default() })]
    /// Under any interleaving of appends, follower fetches, ISR proposals and the
    /// controller's answers: the high watermark never moves back, never passes the
    /// leader's written offset, never passes the log end of a member of the maximal ISR
    /// (members join only once caught up), and moves as far as that allows.
    #[test]
    fn the_leaders_high_watermark_follows_the_isr(steps in proptest::collection::vec(step(), 1..50)) {
        run(move |dir| async move {
            let p = open_leader(&dir, &[1, 2, 3], &[1, 2, 3], FlushMode::Never).await;
            let lag = 300;
            let mut now = now_ms();
            let mut fetched = std::collections::HashMap::from([(2, 0i64), (3, 0i64)]);
            let mut proposal: Option<Vec<BrokerId>> = None;
            // Both followers have fetched once (their log ends are known from here on).
            p.record_follower_fetch(2, 0, now);
            p.record_follower_fetch(3, 0, now);
            let mut hw = p.high_watermark();
            for s in steps {
                match s {
                    Step::Append(n) => {
                        p.append(one(n), 1).await.unwrap();
                    }
                    Step::Fetch { broker, ahead } => {
                        let written = p.log.borrow().written_offset();
                        let at = (fetched[&broker] + ahead).min(written);
                        fetched.insert(broker, at);
                        p.record_follower_fetch(broker, at, now);
                    }
                    Step::Tick { ms } => {
                        now += ms;
                        if let Some(isr) = p.isr_change_wanted(now, lag) {
                            assert!(isr.contains(&1), "the leader stays in its ISR");
                            p.set_pending_isr(isr.clone());
                            proposal = Some(isr);
                        }
                    }
                    Step::Answer { commit } => match proposal.take() {
                        Some(isr) if commit => p.update_isr(p.partition_epoch() + 1, isr),
                        Some(_) => p.clear_pending_isr(),
                        None => {}
                    },
                }
                let written = p.log.borrow().written_offset();
                let tracker = p.tracker_snapshot();
                let mut bound = written;
                for b in tracker.maximal_isr() {
                    if b != 1 {
                        bound = bound.min(tracker.follower(b).map_or(-1, |f| f.log_end_offset));
                    }
                }
                let now_hw = p.high_watermark();
                assert!(now_hw >= hw, "the high watermark moved back: {hw} -> {now_hw}");
                assert!(now_hw <= written, "past the written offset");
                assert_eq!(now_hw, hw.max(bound), "as far as the maximal ISR allows, never back");
                assert!(now_hw <= bound, "above a member of the maximal ISR (members join only once caught up)");
                hw = now_hw;
            }
        });
    }
}

#[test]
fn kip966_holds_the_high_watermark_while_the_isr_is_below_min_insync_replicas() {
    run(|dir| async move {
        let p = open_leader(&dir, &[1, 2, 3], &[1], FlushMode::Always).await;
        let (cfg, settings) = config(FlushMode::Always);
        p.apply_config(cfg.clone(), PartitionSettings { hold_high_watermark_below_min_isr: true, ..settings.clone() });
        assert_eq!(p.append(one(3), 1).await.unwrap().base_offset, 0, "acks=1 does not need the ISR");
        assert_eq!(p.high_watermark(), 0, "ISR [1] below min 2: held, so a replica that left holds everything below it");
        p.update_isr(1, vec![1, 2]);
        assert_eq!(p.high_watermark(), 0, "2 has not fetched yet");
        p.record_follower_fetch(2, 3, now_ms());
        assert_eq!(p.high_watermark(), 3, "at min ISR the high watermark moves again");
        assert_eq!(p.append(one(2), 1).await.unwrap().base_offset, 3);
        p.update_isr(2, vec![1]);
        assert_eq!(p.high_watermark(), 3, "below min again: held");
        // KIP-966 off: the leader alone moves it (Kafka before 4.x).
        p.apply_config(cfg, settings);
        assert_eq!(p.high_watermark(), 5);
    });
}

#[test]
fn kip966_min_isr_is_capped_at_the_replica_count() {
    run(|dir| async move {
        let p = open_leader(&dir, &[1], &[1], FlushMode::Always).await;
        let (cfg, settings) = config(FlushMode::Always);
        p.apply_config(cfg, PartitionSettings { hold_high_watermark_below_min_isr: true, ..settings });
        p.append(one(3), 1).await.unwrap();
        assert_eq!(p.high_watermark(), 3, "one replica with min.insync.replicas 2: the effective min ISR is 1");
    });
}
