//! Fault-injected storage (issue 9, points 5 and 6): a `Partition` on a real executor
//! with real DMA files, whose files go through the storage seam with a `FaultInjector`
//! (`storage/file.rs`): unsynced writes live in an overlay a crash drops or tears, and
//! armed faults fail writes (EIO, ENOSPC, torn) and fdatasyncs (EIO).
//!
//! The property test drives random appends (acks=1: written; acks=-1 with flush=always:
//! synced), segment rolls (small segment.bytes), faults and crashes, against a model:
//! - every offset acknowledged as synced is read back after recovery with its exact
//!   record (value), and the recovered log end is at least the synced end;
//! - no offset is ever reused for different bytes: within one incarnation reads return
//!   exactly what was acknowledged; after a crash the recovered log holds, at every
//!   offset, a record that was appended (or attempted) there — never invented data;
//! - after a failed fdatasync the partition is offline: produce, fetch and ListOffsets
//!   fail with `StorageError::Offline` until recovery (invariant 8);
//! - idempotent-producer state after recovery matches the recovered log (the producer's
//!   next sequence is accepted at the recovered end: no snapshot "from the future");
//! - recovery never panics, and a bit flipped in a sealed segment is reported on read
//!   (CRC-32C), never served.
//!
//! Seeded: proptest's seed and the injector's seed make a run replayable. Cases:
//! `SHARDLOG_PROPTEST_CASES` (default 16).
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::records::Compression;
use proptest::prelude::*;

use super::tests::writer_idle;
use super::{Partition, PartitionError, PartitionSettings};
use crate::config::FlushMode;
use crate::record::tests::{decode_kv, kv_batch};
use crate::storage::file::{set_shard_fault_injector, Fault, FaultInjector, SegmentWrite};
use crate::storage::{LogConfig, StorageError};

const PRODUCER_ID: i64 = 4242;

fn cases() -> u32 {
    std::env::var("SHARDLOG_PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(16)
}

fn log_config() -> LogConfig {
    LogConfig { segment_bytes: 3 * 1024, index_interval_bytes: 512, cache_bytes: 2 * 1024, ..Default::default() }
}

async fn try_open(dir: &Path, flush: FlushMode) -> Result<Rc<Partition>, PartitionError> {
    let settings = PartitionSettings { flush, ..super::tests::settings() };
    let config = LogConfig { write_mode: super::write_mode(flush), ..log_config() };
    Partition::open(&dir.join("f-0"), "f".into(), 0, [2; 16], 0, 0, config, settings).await
}

async fn open(dir: &Path, flush: FlushMode) -> Rc<Partition> {
    try_open(dir, flush).await.expect("recovery opens the log")
}

/// One idempotent batch of `values` starting at producer sequence `seq`.
fn batch_of(values: &[String], seq: i32) -> Bytes {
    let recs: Vec<(Option<&str>, Option<&str>)> = values.iter().map(|v| (Some("k"), Some(v.as_str()))).collect();
    kv_batch(0, &recs, Compression::None, Some((PRODUCER_ID, 0, seq)), 1_000)
}

/// Every record below the high watermark as (offset, value), or the first read error.
async fn read_log(p: &Partition) -> (Vec<(i64, Bytes)>, Option<PartitionError>) {
    let mut out = Vec::new();
    let mut offset = p.log_start_offset();
    loop {
        match p.read(offset, 4096).await {
            Ok(data) if data.records.is_empty() => return (out, None),
            Ok(data) => {
                let from = offset;
                for b in &data.records {
                    // A fetch answers whole batches: the first may start below `from`.
                    for (o, _k, v, _ts) in decode_kv(b).into_iter().filter(|r| r.0 >= from) {
                        out.push((o, v.unwrap_or_default()));
                        offset = o + 1;
                    }
                }
            }
            Err(e) => return (out, Some(e)),
        }
    }
}

fn is_offline(e: &PartitionError) -> bool {
    matches!(e, PartitionError::Storage(StorageError::Offline { .. }))
}

#[derive(Clone, Debug)]
enum Op {
    /// Append a batch of `records` records (values `value_len` long); acks=-1 when synced.
    Append { records: usize, value_len: usize, synced: bool },
    /// Arm a fault for the next segment write / fdatasync.
    Arm(Fault),
    /// Power loss: unsynced data dropped (or torn), then recovery.
    Crash { tear: bool },
    /// Read the whole log and compare with the model.
    Check,
    /// Flip a bit in a sealed segment, recover, and expect the damage to be reported.
    FlipBit { pick: u64 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (1usize..6, 1usize..300, any::<bool>()).prop_map(|(records, value_len, synced)| Op::Append { records, value_len, synced }),
        2 => prop_oneof![Just(Fault::WriteEio), Just(Fault::WriteNoSpace), Just(Fault::TornWrite), Just(Fault::SyncEio)].prop_map(Op::Arm),
        2 => any::<bool>().prop_map(|tear| Op::Crash { tear }),
        1 => Just(Op::Check),
        1 => any::<u64>().prop_map(|pick| Op::FlipBit { pick }),
    ]
}

/// What the test knows about the log.
#[derive(Default)]
struct Model {
    /// The record at each offset of the current incarnation (appended and acknowledged,
    /// or appended before the log went offline).
    records: Vec<Bytes>,
    /// Offsets below this were acknowledged as fdatasync'ed (or recovered from disk).
    synced_end: i64,
    /// Every value ever attempted at each offset (failed appends may still reach the disk).
    attempted: BTreeMap<i64, BTreeSet<Bytes>>,
    offline: bool,
    attempt: u64,
}

impl Model {
    fn end(&self) -> i64 {
        self.records.len() as i64
    }

    /// Within one incarnation, what a reader sees is exactly what was acknowledged.
    fn check_reads(&self, got: &[(i64, Bytes)], hw: i64) {
        assert_eq!(got.len() as i64, hw, "dense offsets from 0 up to the high watermark");
        for (o, v) in got {
            assert_eq!(Some(v), self.records.get(*o as usize), "offset {o} reads back what was appended");
        }
    }

    /// After recovery: the synced prefix is intact, and nothing else was invented.
    fn check_recovered(&mut self, got: &[(i64, Bytes)], end: i64) {
        assert!(end >= self.synced_end, "recovered log end {end} below the synced end {}", self.synced_end);
        assert_eq!(got.len() as i64, end, "recovered offsets are dense");
        for (o, v) in got {
            if *o < self.synced_end {
                assert_eq!(Some(v), self.records.get(*o as usize), "synced offset {o} survives with its exact bytes");
            } else {
                assert!(self.attempted.get(o).is_some_and(|s| s.contains(v)), "offset {o} recovered a record never appended there");
            }
        }
        self.records = got.iter().map(|(_, v)| v.clone()).collect();
        self.synced_end = end;
        self.attempted.retain(|&o, _| o < end);
        self.offline = false;
    }
}

/// `flush`: always (O_DIRECT; acks=-1 waits for fdatasync) or never (page cache; no ack
/// waits for fdatasync, which runs at rolls). Either way the model counts as synced what
/// the log reports synced, and with flush=always an acks=-1 ack must be synced.
async fn run_case(dir: PathBuf, ops: Vec<Op>, seed: u64, flush: FlushMode) {
    let inj = FaultInjector::new(seed);
    inj.record_writes();
    set_shard_fault_injector(Some(inj.clone()));
    let mut p = open(&dir, flush).await;
    // After each acknowledged append: how many writes were issued then, and which bytes
    // were written (and possibly acknowledged). No later write may cover those bytes.
    let mut acked: Vec<(usize, Vec<(PathBuf, u64)>)> = Vec::new();
    let mut m = Model::default();
    let trace = std::env::var_os("SHARDLOG_FAULT_TRACE").is_some();
    if trace {
        let _ = tracing_subscriber::fmt().with_max_level(tracing::Level::DEBUG).with_test_writer().try_init();
    }
    for op in ops {
        if trace {
            eprintln!("op {op:?} (log end {}, synced end {}, offline {})", m.end(), m.synced_end, m.offline);
        }
        match op {
            Op::Append { records, value_len, synced } => {
                m.attempt += 1;
                let base = m.end();
                let values: Vec<String> = (0..records).map(|i| format!("{}-{i}-{}", m.attempt, "x".repeat(value_len))).collect();
                for (i, v) in values.iter().enumerate() {
                    m.attempted.entry(base + i as i64).or_default().insert(Bytes::from(v.clone()));
                }
                let append = p.append(batch_of(&values, base as i32), if synced { -1 } else { 1 });
                let res = match glommio::timer::timeout(std::time::Duration::from_secs(10), async { Ok(append.await) }).await {
                    Ok(res) => res,
                    Err(_) => panic!(
                        "append hung: writer running {}, log end {}, high watermark {}, armed {:?}",
                        p.writer_running(),
                        p.log_end_offset(),
                        p.high_watermark(),
                        inj.armed()
                    ),
                };
                if m.offline {
                    assert!(matches!(&res, Err(e) if is_offline(e)), "an offline partition refuses produce: {res:?}");
                    continue;
                }
                match res {
                    Ok(out) => {
                        assert_eq!(out.base_offset, base, "offsets continue densely (and the producer's sequence is accepted)");
                        m.records.extend(values.into_iter().map(Bytes::from));
                        if synced && flush == FlushMode::Always {
                            assert!(p.synced_offset() >= m.end(), "an acks=-1 ack with flush=always is synced");
                        }
                        m.synced_end = m.synced_end.max(p.synced_offset());
                        acked.push((inj.segment_writes().len(), p.written_positions()));
                        assert_no_write_covers_acked_bytes(&inj.segment_writes(), &acked);
                    }
                    Err(e) => {
                        assert!(matches!(e, PartitionError::Storage(_)), "only storage errors under fault injection: {e}");
                        if p.is_offline() {
                            // The batch may have been appended and written before the sync failed.
                            m.offline = true;
                            assert!(is_offline(&e) || matches!(e, PartitionError::Storage(StorageError::Io { .. })), "{e}");
                        } else {
                            // A failed write rolled the log back to what was written before.
                            assert_eq!(p.log_end_offset(), base, "a failed write rolls back only the failed batch");
                        }
                    }
                }
            }
            Op::Arm(fault) => inj.arm(fault),
            Op::Check => {
                let (got, err) = read_log(&p).await;
                if m.offline || p.is_offline() {
                    assert!(err.as_ref().is_some_and(is_offline), "an offline partition refuses fetch: {err:?}");
                    assert!(p.offset_for_timestamp(0).await.is_err_and(|e| is_offline(&e)), "and ListOffsets");
                    m.offline = true;
                } else {
                    assert!(err.is_none(), "read error without a fault: {err:?}");
                    m.check_reads(&got, p.high_watermark());
                }
            }
            Op::Crash { tear } => {
                inj.crash(tear).await;
                p.close();
                writer_idle(&p).await;
                assert_no_write_covers_acked_bytes(&inj.segment_writes(), &acked);
                drop(p);
                inj.restart();
                // A power loss may lose unsynced acknowledged bytes; the next incarnation
                // writes from what recovery found.
                acked.clear();
                p = open(&dir, flush).await;
                let (got, err) = read_log(&p).await;
                assert!(err.is_none(), "a recovered log reads cleanly: {err:?}");
                m.check_recovered(&got, p.log_end_offset());
            }
            Op::FlipBit { pick } => {
                if m.offline || !flip_bit_in_sealed_segment(&dir.join("f-0"), pick).await {
                    continue;
                }
                inj.crash(false).await;
                p.close();
                writer_idle(&p).await;
                drop(p);
                inj.restart();
                match try_open(&dir, flush).await {
                    Ok(reopened) => p = reopened,
                    // Detected at recovery: a sealed segment without its index is scanned,
                    // and damage there is reported, not truncated away.
                    Err(PartitionError::Storage(StorageError::Corrupt { .. })) => return finish(None).await,
                    Err(e) => panic!("recovery of a damaged sealed segment failed oddly: {e}"),
                }
                let (got, err) = read_log(&p).await;
                // Detected on read (the sealed segment opens from its index unscanned).
                assert!(
                    matches!(err, Some(PartitionError::Storage(StorageError::Corrupt { .. }))),
                    "a flipped bit in a sealed segment is reported, not served: {err:?}"
                );
                for (o, v) in &got {
                    if *o < m.synced_end {
                        assert_eq!(Some(v), m.records.get(*o as usize), "records before the damage are intact");
                    }
                }
                break;
            }
        }
    }
    finish(Some(p)).await;
}

/// Invariant 2 (an acknowledged byte is never rewritten, not even by a later write of the
/// same block): every write issued after an acknowledged append starts at or after the
/// written end of its segment as of that ack.
fn assert_no_write_covers_acked_bytes(writes: &[SegmentWrite], acked: &[(usize, Vec<(PathBuf, u64)>)]) {
    for (issued_before, ends) in acked {
        for w in &writes[(*issued_before).min(writes.len())..] {
            for (path, end) in ends {
                assert!(w.path != *path || w.pos >= *end, "write {w:?} covers bytes below {end}, written (and acknowledged) before it was issued");
            }
        }
    }
}

async fn finish(p: Option<Rc<Partition>>) {
    if let Some(p) = p {
        p.close();
        writer_idle(&p).await;
    }
    set_shard_fault_injector(None);
}

/// Flips one bit inside the CRC-covered part of a batch of a sealed segment (not the base
/// offset, length or leader epoch, which Kafka's CRC-32C does not cover). False when
/// there is no sealed segment with data.
async fn flip_bit_in_sealed_segment(dir: &Path, pick: u64) -> bool {
    let dir = dir.to_path_buf();
    glommio::executor()
        .spawn_blocking(move || {
            let mut logs: Vec<PathBuf> = std::fs::read_dir(&dir)
                .expect("partition dir")
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "log"))
                .collect();
            logs.sort();
            // Sealed segments the writer synced whole: their successor's base has a seal
            // snapshot. (One not synced yet is recovered as the active segment is: a bad
            // batch there is a torn tail, cut.)
            let synced_whole: Vec<PathBuf> = logs.windows(2).filter(|w| w[1].with_extension("snapshot").exists()).map(|w| w[0].clone()).collect();
            let sealed: Vec<(PathBuf, Vec<u8>)> =
                synced_whole.into_iter().map(|p| (p.clone(), std::fs::read(&p).expect("segment"))).filter(|(_, d)| !d.is_empty()).collect();
            if sealed.is_empty() {
                return false;
            }
            let (path, mut data) = sealed[(pick % sealed.len() as u64) as usize].clone();
            let batches: Vec<std::ops::Range<usize>> = crate::record::iter_batches(&data).map_while(|r| r.ok()).map(|(_, r)| r).collect();
            if batches.is_empty() {
                return false;
            }
            let b = &batches[(pick / 7 % batches.len() as u64) as usize];
            // Bytes 17.. of a batch: CRC, attributes, ..., records.
            let covered = b.start + 17..b.end;
            let at = covered.start + (pick / 131 % covered.len() as u64) as usize;
            data[at] ^= 1 << (pick % 8);
            std::fs::write(&path, &data).expect("write segment");
            true
        })
        .await
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), max_shrink_iters: 64, ..ProptestConfig::default() })]

    #[test]
    fn log_survives_crashes_and_faults(ops in proptest::collection::vec(op(), 1..50), seed in any::<u64>(), direct in any::<bool>()) {
        let flush = if direct { FlushMode::Always } else { FlushMode::Never };
        crate::storage::testing::run(move |dir| run_case(dir, ops, seed, flush));
    }
}

/// Point 5, directly: one failed fdatasync takes the partition offline for good — the
/// acks=-1 append fails, later produce / fetch / ListOffsets answer `Offline` (mapped to
/// KAFKA_STORAGE_ERROR), nothing more is reported synced — and a restart recovers it.
#[test]
fn fdatasync_failure_is_sticky_until_restart() {
    crate::storage::testing::run(|dir| async move {
        let inj = FaultInjector::new(1);
        set_shard_fault_injector(Some(inj.clone()));
        let p = open(&dir, FlushMode::Always).await;
        let v = |s: &str| vec![s.to_string()];
        p.append(batch_of(&v("a"), 0), -1).await.expect("synced append");
        inj.arm(Fault::SyncEio);
        let err = p.append(batch_of(&v("b"), 1), -1).await.expect_err("the sync fails");
        assert!(is_offline(&err), "{err}");
        assert_eq!(inj.stats().sync_errors, 1);
        assert!(p.is_offline());
        // Sticky: no retry of the sync can make it durable; everything is refused.
        for acks in [1, -1] {
            let e = p.append(batch_of(&v("c"), 1), acks).await.expect_err("offline");
            assert!(is_offline(&e), "{e}");
        }
        assert!(p.read(0, 4096).await.is_err_and(|e| is_offline(&e)));
        assert!(p.offset_for_timestamp(0).await.is_err_and(|e| is_offline(&e)));
        assert!(p.max_timestamp_offset().await.is_err_and(|e| is_offline(&e)));
        p.close();
        writer_idle(&p).await;
        drop(p);
        // The dropped pages of the failed sync are gone; a restart serves what is on disk.
        inj.crash(false).await;
        inj.restart();
        let p = open(&dir, FlushMode::Always).await;
        assert!(!p.is_offline());
        let (got, err) = read_log(&p).await;
        assert!(err.is_none());
        assert_eq!(got, vec![(0, Bytes::from("a"))], "the synced record survives; the unsynced one is gone");
        let out = p.append(batch_of(&v("b"), 1), -1).await.expect("appends again after the restart");
        assert_eq!(out.base_offset, 1);
        p.close();
        set_shard_fault_injector(None);
    });
}

/// A write that fails drops the segments rolled after the one it failed in (never written);
/// their files must go (left behind, one would come back at recovery and cut the segment
/// before it at its base offset, where later acknowledged records are). A removal that
/// fails takes the partition offline instead; when the removals work the partition goes on.
#[test]
fn a_rolled_back_segment_that_cannot_be_removed_takes_the_partition_offline() {
    crate::storage::testing::run(|dir| async move {
        let inj = FaultInjector::new(1);
        set_shard_fault_injector(Some(inj.clone()));
        for (remove_fails, sub) in [(false, "ok"), (true, "fails")] {
            let dir = dir.join(sub);
            let p = open(&dir, FlushMode::Always).await;
            p.append(batch_of(&big('a', 2000), 0), -1).await.expect("synced append");
            // Three batches that do not fit a 3 KiB segment together: each rolls a
            // segment. The disk is slow, so the three are staged before the first write
            // ends; it fails, and the two segments after it (never written) are dropped.
            inj.arm(Fault::WriteEio);
            if remove_fails {
                inj.arm(Fault::RemoveEio);
            }
            inj.set_delay(std::time::Duration::from_millis(200));
            let before = inj.stats();
            let appends = (1..=3).map(|i| p.append(batch_of(&big('b', 2000), i), -1));
            let outcomes = futures::future::join_all(appends).await;
            inj.set_delay(std::time::Duration::ZERO);
            assert!(outcomes.iter().all(Result::is_err), "every batch of the failed write fails: {outcomes:?}");
            assert_eq!(inj.stats().write_errors, before.write_errors + 1);
            writer_idle(&p).await;
            if remove_fails {
                assert_eq!(inj.stats().remove_errors, before.remove_errors + 1, "a dropped segment's removal was tried");
                assert!(p.is_offline(), "a dropped segment's file left on disk takes the partition offline");
                let e = p.append(batch_of(&big('c', 10), 1), -1).await.expect_err("offline");
                assert!(is_offline(&e), "{e}");
            } else {
                assert!(!p.is_offline());
                let out = p.append(batch_of(&big('c', 10), 1), -1).await.expect("appends go on");
                assert_eq!(out.base_offset, 1);
            }
            p.close();
            writer_idle(&p).await;
        }
        set_shard_fault_injector(None);
    });
}

/// A roll opens its segment file while the writer runs: a write that fails meanwhile moves
/// the log end back, and the file opened is named for an end that no longer is. The roll
/// drops it and rolls again at the new end. However the writes and rolls interleave, every
/// acknowledged batch is read back after a restart at the offset it was given, and nothing
/// else is there.
#[test]
fn a_roll_racing_a_failed_write_rolls_again_at_the_new_end() {
    crate::storage::testing::run(|dir| async move {
        let inj = FaultInjector::new(1);
        set_shard_fault_injector(Some(inj.clone()));
        let p = open(&dir, FlushMode::Always).await;
        p.append(batch_of(&big('a', 2000), 0), -1).await.expect("synced append");
        inj.arm(Fault::WriteEio);
        let mut acked = vec![(0, Bytes::from(big('a', 2000).remove(0)))];
        let mut seq = 1;
        for round in 0..4 {
            let values: Vec<String> = (0..3).map(|i| format!("{round}-{i}-{}", "x".repeat(1500))).collect();
            let appends = values.iter().map(|v| {
                let b = batch_of(std::slice::from_ref(v), seq);
                seq += 1;
                p.append(b, -1)
            });
            let appends: Vec<_> = appends.collect();
            for (v, out) in values.iter().zip(futures::future::join_all(appends).await) {
                if let Ok(out) = out {
                    acked.push((out.base_offset, Bytes::from(v.clone())));
                }
            }
            if round == 1 {
                inj.arm(Fault::WriteEio);
            }
        }
        assert!(acked.len() > 1, "some batches were acknowledged");
        assert!(!p.is_offline());
        p.close();
        writer_idle(&p).await;
        drop(p);
        inj.crash(false).await;
        inj.restart();
        let p = open(&dir, FlushMode::Always).await;
        let (got, err) = read_log(&p).await;
        assert!(err.is_none(), "{err:?}");
        acked.sort();
        assert_eq!(got, acked, "exactly the acknowledged batches, at their offsets");
        p.close();
        set_shard_fault_injector(None);
    });
}

fn big(c: char, n: usize) -> Vec<String> {
    vec![c.to_string().repeat(n)]
}
