//! Log compaction on a real glommio executor with real DMA files. Clean passes are
//! triggered directly (`Partition::clean`), never by waiting on the cleaner loop.
use super::tests::settings;
use std::collections::BTreeMap;
use std::path::Path;
use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::records::{Compression, RecordBatchDecoder};
use proptest::prelude::*;

use super::tests::run;
use super::{Partition, PartitionError};
use crate::record::tests::{compression_of, kv_batch};
use crate::record::{iter_batches, parse_header, BatchError};
use crate::runtime::now_ms;
use crate::storage::LogConfig;

/// The cleaner's key-map budget in these tests (the broker's default).
const TEST_KEY_BYTES: usize = 256 << 20;

/// (offset, key, value) of one record read back.
type Rec = (i64, Option<Bytes>, Option<Bytes>);

fn compact_cfg() -> LogConfig {
    LogConfig {
        segment_bytes: 2048,
        index_interval_bytes: 256,
        cache_bytes: 64 * 1024,
        compact: true,
        delete: false,
        min_cleanable_dirty_ratio: 0.5,
        delete_retention_ms: 60_000,
        ..Default::default()
    }
}

async fn open(dir: &Path, cfg: LogConfig) -> Rc<Partition> {
    Partition::open(&dir.join("c-0"), "c".into(), 0, [2; 16], 0, 0, cfg, settings()).await.expect("open")
}

fn records_of(batches: &[Bytes]) -> Vec<Rec> {
    let mut out = Vec::new();
    for b in batches {
        let mut b = b.clone();
        let set = RecordBatchDecoder::decode(&mut b).expect("stored batch decodes");
        out.extend(set.records.into_iter().map(|r| (r.offset, r.key, r.value)));
    }
    out
}

/// Every record from `from` to the high watermark, fetching as a consumer does.
async fn read_from(p: &Partition, from: i64) -> Vec<Rec> {
    let mut offset = from;
    let mut all: Vec<Rec> = Vec::new();
    while offset < p.high_watermark() {
        let data = p.read(offset, 4096).await.expect("read");
        if data.records.is_empty() {
            break;
        }
        let got: Vec<Rec> = records_of(&data.records).into_iter().filter(|r| r.0 >= offset).collect();
        // As clients do: continue after the last batch's last offset, which a cleaned
        // batch keeps even when its last records are gone.
        let next = data.records.iter().filter_map(|b| parse_header(b).ok()).map(|h| h.last_offset() + 1).max();
        assert!(next.is_some_and(|n| n > offset), "a fetch below the high watermark makes progress");
        offset = next.unwrap_or(offset);
        all.extend(got);
    }
    all
}

fn active_base(p: &Partition) -> i64 {
    p.log.borrow().segment_bases().last().copied().unwrap_or(0)
}

fn sealed_count(p: &Partition) -> usize {
    p.log.borrow().segment_count() - 1
}

/// What the log must hold after a clean: every record of the active segment, and in
/// sealed segments only each key's latest record (tombstones unless dropped).
fn model(written: &[Rec], active_base: i64, drop_tombstones: bool) -> Vec<Rec> {
    let mut latest: BTreeMap<Bytes, i64> = BTreeMap::new();
    for (o, k, _) in written {
        if let Some(k) = k {
            latest.insert(k.clone(), *o);
        }
    }
    written.iter().filter(|(o, k, v)| *o >= active_base || k.as_ref().is_some_and(|k| latest[k] == *o && !(v.is_none() && drop_tombstones))).cloned().collect()
}

/// Appends one batch of (key, value) records; returns the records with their offsets.
async fn produce(p: &Rc<Partition>, recs: &[(Option<&str>, Option<&str>)], compression: Compression, ts: i64) -> Vec<Rec> {
    let out = p.append(kv_batch(0, recs, compression, None, ts), -1).await.expect("append");
    recs.iter()
        .enumerate()
        .map(|(i, (k, v))| (out.base_offset + i as i64, k.map(|s| Bytes::from(s.to_string())), v.map(|s| Bytes::from(s.to_string()))))
        .collect()
}

/// log.cleaner.dedupe.buffer.size driven to its bound: 8 distinct keys of 5 bytes need
/// 8 x (5 + 64) bytes; one byte less and the pass cleans nothing (the log is left as it
/// is, and stays due), exactly that much and it cleans.
#[test]
fn a_key_map_over_its_budget_leaves_the_log_uncleaned() {
    run(|dir| async move {
        let p = open(&dir, compact_cfg()).await;
        let ts = now_ms();
        let keys: Vec<String> = (0..8).map(|k| format!("key-{k}")).collect();
        for i in 0..60usize {
            let recs: Vec<(Option<&str>, Option<&str>)> = (0..3).map(|j| (Some(keys[(i + j) % 8].as_str()), Some("some value"))).collect();
            produce(&p, &recs, Compression::None, ts + i as i64).await;
        }
        assert!(sealed_count(&p) >= 2 && p.needs_cleaning());
        let need = 8 * (5 + crate::storage::compaction::KEY_OVERHEAD_BYTES);
        let size = p.size_bytes();
        let stats = p.clean(now_ms(), need - 1).await.expect("clean");
        assert_eq!((stats.segments_cleaned, p.size_bytes()), (0, size), "over budget: nothing cleaned");
        assert!(p.needs_cleaning(), "still due");
        let stats = p.clean(now_ms(), need).await.expect("clean");
        assert!(stats.segments_cleaned > 0 && p.size_bytes() < size, "{stats:?}");
        assert_eq!(stats.keys, 8);
    });
}

#[test]
fn clean_keeps_latest_per_key_and_survives_restart() {
    run(|dir| async move {
        let p = open(&dir, compact_cfg()).await;
        // A record without a key is refused on a compacted topic (INVALID_RECORD).
        let err = p.append(kv_batch(0, &[(Some("a"), Some("x")), (None, Some("y"))], Compression::None, None, 1), -1).await;
        assert!(matches!(err, Err(PartitionError::Batch(BatchError::RecordErrors(_)))), "{err:?}");
        assert_eq!(p.log_end_offset(), 0);
        let ts = now_ms();
        let mut written = Vec::new();
        let values: Vec<String> = (0..200).map(|i| format!("value-{i}-{}", "x".repeat(i % 13))).collect();
        let keys: Vec<String> = (0..8).map(|k| format!("key-{k}")).collect();
        for i in 0..60usize {
            let recs: Vec<(Option<&str>, Option<&str>)> =
                (0..3).map(|j| (Some(keys[(i * 5 + j * 3) % 8].as_str()), Some(values[(i * 3 + j) % 200].as_str()))).collect();
            // Every codec, so re-encoding is exercised for each.
            written.extend(produce(&p, &recs, compression_of(i as u8), ts + i as i64).await);
        }
        assert!(sealed_count(&p) >= 4, "several rolled segments");
        assert!(p.needs_cleaning(), "everything sealed is dirty before the first clean");
        let before: Vec<Rec> = read_from(&p, 0).await;
        assert_eq!(before, written);
        // A read planned before the clean keeps its (old) file readable afterwards.
        let old_plan = p.log.borrow().locate(0).expect("segment 0");
        let size_before = p.size_bytes();

        let sealed_before = sealed_count(&p);
        let stats = p.clean(now_ms(), TEST_KEY_BYTES).await.expect("clean");
        assert_eq!(stats.segments_cleaned, sealed_before);
        assert!(stats.bytes_after < stats.bytes_before, "{stats:?}");
        assert!(p.size_bytes() < size_before);
        assert!(!p.needs_cleaning(), "nothing dirty right after a clean");
        let expect = model(&written, active_base(&p), false);
        let after = read_from(&p, 0).await;
        assert_eq!(after, expect, "latest value per key in sealed segments, the active segment untouched");
        assert!(after.windows(2).all(|w| w[0].0 < w[1].0), "offsets strictly increase");
        let sealed_keys: Vec<&Bytes> = after.iter().filter(|r| r.0 < active_base(&p)).filter_map(|r| r.1.as_ref()).collect();
        let mut dedup = sealed_keys.clone();
        dedup.sort();
        dedup.dedup();
        assert_eq!(dedup.len(), sealed_keys.len(), "at most one record per key in the cleaned range");

        let old = crate::storage::dma::read_bytes(&old_plan.file, 0, old_plan.end as usize).await.expect("old file readable");
        assert!(iter_batches(&old).all(|b| b.is_ok()), "the old file still holds whole, valid batches");

        // A fetch at a compacted-away offset answers with the batch covering it or the
        // next one: never empty, never an error.
        let present: Vec<i64> = after.iter().map(|r| r.0).collect();
        let gone: Vec<i64> = (0..p.high_watermark()).filter(|o| !present.contains(o)).collect();
        assert!(!gone.is_empty(), "something was compacted away");
        for &o in &gone {
            let data = p.read(o, 1).await.expect("read at a removed offset");
            let h = parse_header(data.records.first().expect("a batch")).expect("header");
            assert!(h.last_offset() >= o, "the batch returned for {o} covers it or comes after it");
            let got = read_from(&p, o).await;
            assert_eq!(got.first().map(|r| r.0), present.iter().copied().find(|&x| x > o), "fetch at {o}");
        }
        // An offset in a gap at the end of a segment continues into the next segment.
        let gaps_at_end: Vec<i64> = {
            let log = p.log.borrow();
            let bases = log.segment_bases();
            bases.windows(2).map(|w| w[1] - 1).filter(|o| !present.contains(o)).collect()
        };
        for o in gaps_at_end {
            let got = read_from(&p, o).await;
            assert_eq!(got.first().map(|r| r.0), present.iter().copied().find(|&x| x > o), "fetch at {o}");
        }
        // New data after a clean, then a restart: identical content, offsets continue.
        written.extend(produce(&p, &[(Some("key-1"), Some("after"))], Compression::None, ts).await);
        let expect = read_from(&p, 0).await;
        let end = p.log_end_offset();
        p.close();
        drop(p);
        // A leftover of an interrupted clean is deleted on open.
        let leftover = dir.join("c-0").join("00000000000000000000.log.cleaned");
        std::fs::write(&leftover, b"partial").unwrap();
        let p = open(&dir, compact_cfg()).await;
        assert!(!leftover.exists(), "recovery deletes *.log.cleaned");
        assert_eq!(p.log_end_offset(), end);
        assert_eq!(read_from(&p, 0).await, expect, "same content after restart (saved indexes)");
        p.close();
        drop(p);
        // Without the saved indexes the sealed segments are scanned: gaps are accepted.
        for e in std::fs::read_dir(dir.join("c-0")).unwrap() {
            let path = e.unwrap().path();
            if path.extension().is_some_and(|x| x == "index" || x == "timeindex") {
                std::fs::remove_file(path).unwrap();
            }
        }
        let p = open(&dir, compact_cfg()).await;
        assert_eq!(p.log_end_offset(), end);
        assert_eq!(read_from(&p, 0).await, expect, "same content after a scan of the cleaned segments");
        assert_eq!(p.append(kv_batch(0, &[(Some("k"), Some("v"))], Compression::None, None, ts), -1).await.unwrap().base_offset, end);
        // Cleaning again is idempotent on what is already clean.
        p.clean(now_ms(), TEST_KEY_BYTES).await.expect("second clean");
        let again = read_from(&p, 0).await;
        assert_eq!(again, model(&again.clone(), active_base(&p), false));
    });
}

#[test]
fn tombstones_kept_until_delete_retention_then_dropped() {
    run(|dir| async move {
        // segment.ms = 0: every append rolls, so each batch is its own segment.
        let cfg = LogConfig { segment_ms: 0, delete_retention_ms: 60_000, ..compact_cfg() };
        let p = open(&dir, cfg).await;
        let ts = now_ms();
        let mut written = Vec::new();
        written.extend(produce(&p, &[(Some("a"), Some("1")), (Some("b"), Some("1"))], Compression::Lz4, ts).await);
        written.extend(produce(&p, &[(Some("a"), None)], Compression::None, ts).await); // tombstone
        written.extend(produce(&p, &[(Some("c"), Some("1"))], Compression::Gzip, ts).await);
        written.extend(produce(&p, &[(Some("b"), Some("2"))], Compression::None, ts).await);
        assert_eq!(active_base(&p), 4);
        p.clean(ts, TEST_KEY_BYTES).await.expect("clean");
        let got = read_from(&p, 0).await;
        assert_eq!(got, model(&written, 4, false));
        assert!(got.iter().any(|r| r.1.as_deref() == Some(&b"a"[..]) && r.2.is_none()), "a young tombstone is kept");
        // Later than delete.retention.ms after the tombstone's batch: it goes.
        p.clean(ts + 60_001, TEST_KEY_BYTES).await.expect("clean");
        let got = read_from(&p, 0).await;
        assert_eq!(got, model(&written, 4, true));
        assert!(got.iter().all(|r| r.1.as_deref() != Some(&b"a"[..])), "key a is gone entirely");
        assert_eq!(got.iter().map(|r| r.0).collect::<Vec<_>>(), vec![3, 4]);
        // Offsets 0..3 are gone: a fetch from the log start gets the first retained batch.
        let data = p.read(0, 1).await.unwrap();
        assert_eq!(records_of(&data.records).first().map(|r| r.0), Some(3));
        assert_eq!(p.log_start_offset(), 0, "compaction does not move the log start offset");
        assert_eq!(p.high_watermark(), 5);
        // Segment 2 (only the tombstone) is deleted; segment 0 is empty but stays, as the
        // first segment (its base is the log start recovery finds).
        assert_eq!(p.log.borrow().segment_bases(), vec![0, 3, 4]);
        assert!(!dir.join("c-0").join("00000000000000000002.log").exists());
        assert_eq!(read_from(&p, 2).await.first().map(|r| r.0), Some(3), "a fetch inside a deleted segment's range");
        p.close();
        drop(p);
        let p = open(&dir, LogConfig { segment_ms: 0, delete_retention_ms: 60_000, ..compact_cfg() }).await;
        assert_eq!((p.log_start_offset(), p.log_end_offset()), (0, 5));
        assert_eq!(read_from(&p, 0).await, model(&written, 4, true));
        assert_eq!(p.append(kv_batch(0, &[(Some("d"), Some("1"))], Compression::None, None, ts), -1).await.unwrap().base_offset, 5);
    });
}

#[test]
fn compact_only_topic_ignores_time_retention() {
    run(|dir| async move {
        let cfg = LogConfig { segment_ms: 0, retention_ms: 1, ..compact_cfg() };
        let p = open(&dir, cfg.clone()).await;
        for i in 0..4 {
            produce(&p, &[(Some("k"), Some("v"))], Compression::None, 1000 + i).await;
        }
        p.apply_retention(now_ms(), -1).await.unwrap();
        assert_eq!(p.log_start_offset(), 0, "cleanup.policy=compact alone keeps old segments");
        p.apply_config(LogConfig { delete: true, ..cfg }, settings());
        p.apply_retention(now_ms(), -1).await.unwrap();
        assert_eq!(p.log_start_offset(), 3, "compact,delete applies retention.ms too");
    });
}

#[test]
fn reads_and_appends_during_a_clean_stay_correct() {
    run(|dir| async move {
        let p = open(&dir, LogConfig { cache_bytes: 1024, ..compact_cfg() }).await;
        let ts = now_ms();
        let mut written = Vec::new();
        for i in 0..80usize {
            let k = format!("k{}", i % 5);
            let v = format!("v{i}");
            written.extend(produce(&p, &[(Some(k.as_str()), Some(v.as_str()))], compression_of(i as u8), ts).await);
        }
        let by_offset: BTreeMap<i64, Rec> = written.iter().map(|r| (r.0, r.clone())).collect();
        // Readers and a producer run while the clean yields between batches.
        let readers: Vec<_> = (0..3)
            .map(|_| {
                let p = p.clone();
                glommio::spawn_local(async move {
                    let mut runs = Vec::new();
                    for _ in 0..4 {
                        runs.push(read_from(&p, 0).await);
                        glommio::yield_if_needed().await;
                    }
                    runs
                })
            })
            .collect();
        let producer = {
            let p = p.clone();
            glommio::spawn_local(async move {
                let mut out = Vec::new();
                for i in 0..20 {
                    let v = format!("late{i}");
                    out.extend(produce(&p, &[(Some("late"), Some(v.as_str()))], Compression::None, ts).await);
                }
                out
            })
        };
        p.clean(now_ms(), TEST_KEY_BYTES).await.expect("clean");
        for r in readers {
            for run in r.await {
                assert!(run.windows(2).all(|w| w[0].0 < w[1].0), "offsets strictly increase");
                for rec in run.iter().filter(|r| r.0 < 80) {
                    assert_eq!(Some(rec), by_offset.get(&rec.0), "every record read is one that was written");
                }
            }
        }
        written.extend(producer.await);
        p.clean(now_ms(), TEST_KEY_BYTES).await.expect("second clean");
        assert_eq!(read_from(&p, 0).await, model(&written, active_base(&p), false));
    });
}

#[test]
fn damaged_sealed_segment_stops_the_cleaner_without_touching_files() {
    run(|dir| async move {
        let cfg = LogConfig { segment_ms: 0, ..compact_cfg() };
        let p = open(&dir, cfg.clone()).await;
        for i in 0..4 {
            produce(&p, &[(Some("k"), Some(format!("v{i}").as_str()))], Compression::None, now_ms()).await;
        }
        p.close();
        drop(p);
        // Flip a byte inside the first batch's records (sealed segments open from their
        // index, so recovery does not look at it).
        let seg = dir.join("c-0").join("00000000000000000000.log");
        let mut bytes = std::fs::read(&seg).unwrap();
        bytes[70] ^= 0xff;
        std::fs::write(&seg, &bytes).unwrap();
        let p = open(&dir, cfg).await;
        assert!(p.needs_cleaning());
        let err = p.clean(now_ms(), TEST_KEY_BYTES).await.expect_err("a bad CRC stops the clean");
        assert!(matches!(err, PartitionError::Storage(crate::storage::StorageError::Corrupt { .. })), "{err:?}");
        assert!(!p.needs_cleaning(), "the partition is marked uncleanable");
        assert_eq!(std::fs::read(&seg).unwrap(), bytes, "the damaged segment is left as it is");
        assert!(!dir.join("c-0").join("00000000000000000000.log.cleaned").exists());
    });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10, ..ProptestConfig::default() })]
    /// Random key/value/tombstone sequences compact to exactly the latest-per-key model,
    /// before and after a restart.
    #[test]
    fn compaction_matches_latest_per_key_model(
        ops in proptest::collection::vec((0u8..6, proptest::option::weighted(0.8, 0u8..50), 0u8..5, any::<bool>()), 1..60),
        drop_tombstones in any::<bool>(),
        segment_bytes in 300u64..2000,
    ) {
        run(move |dir| async move {
            let cfg = LogConfig { segment_bytes, ..compact_cfg() };
            let p = open(&dir, cfg.clone()).await;
            let ts = now_ms();
            let mut written = Vec::new();
            let mut batch: Vec<(String, Option<String>)> = Vec::new();
            for (i, (k, v, codec, end_batch)) in ops.iter().enumerate() {
                batch.push((format!("k{k}"), v.map(|v| format!("v{v}-{i}"))));
                if *end_batch || i + 1 == ops.len() {
                    let recs: Vec<(Option<&str>, Option<&str>)> = batch.iter().map(|(k, v)| (Some(k.as_str()), v.as_deref())).collect();
                    written.extend(produce(&p, &recs, compression_of(*codec), ts).await);
                    batch.clear();
                }
            }
            let now = if drop_tombstones { ts + cfg.delete_retention_ms + 1000 } else { ts };
            p.clean(now, TEST_KEY_BYTES).await.expect("clean");
            let expect = model(&written, active_base(&p), drop_tombstones);
            assert_eq!(read_from(&p, 0).await, expect);
            p.close();
            drop(p);
            let p = open(&dir, cfg).await;
            assert_eq!(read_from(&p, 0).await, expect);
        });
    }
}

/// Appends one transactional batch of `keys` for producer `pid` (first write of its
/// transaction: verified, as KIP-890 asks), sequence `seq`.
async fn produce_txn(p: &Rc<Partition>, pid: i64, seq: i32, keys: &[&str], ts: i64) {
    let recs: Vec<(Option<&str>, Option<&str>)> = keys.iter().map(|k| (Some(*k), Some("txn-value"))).collect();
    let b = super::txn_tests::transactional(kv_batch(0, &recs, Compression::None, Some((pid, 0, seq)), ts));
    let guard = match p.append_client(b.clone(), -1, None, None).await {
        Err(PartitionError::TxnVerificationNeeded { guard, .. }) => Some(guard),
        Ok(_) => return,
        Err(e) => panic!("transactional append: {e:?}"),
    };
    p.append_client(b, -1, None, guard).await.expect("verified transactional append");
}

/// Kafka's cleaner on transactions: the data of an aborted transaction goes, committed data
/// and the markers stay, and nothing at or above the last stable offset (an open
/// transaction) decides what is superseded.
#[test]
fn aborted_transactions_are_cleaned_away_and_the_cleaner_stops_at_the_lso() {
    use super::txn_tests::{marker, TIMEOUT};
    use crate::record::ControlType;
    run(|dir| async move {
        let p = open(&dir, compact_cfg()).await;
        let ts = now_ms();
        for i in 0..30 {
            produce(&p, &[(Some("k0"), Some("old")), (Some(&format!("early-{i}")), Some("v"))], Compression::None, ts).await;
        }
        produce(&p, &[(Some("k0"), Some("new"))], Compression::None, ts).await;
        produce_txn(&p, 5, 0, &["ta-1", "ta-2"], ts).await;
        p.append_marker(5, 0, marker(ControlType::Abort, 0), TIMEOUT).await.expect("abort marker");
        produce_txn(&p, 6, 0, &["tb-1", "tb-2"], ts).await;
        p.append_marker(6, 0, marker(ControlType::Commit, 0), TIMEOUT).await.expect("commit marker");
        let open_txn_start = p.log_end_offset();
        produce_txn(&p, 7, 0, &["tc-1"], ts).await;
        assert_eq!(p.last_stable_offset(), open_txn_start, "the open transaction holds the LSO");
        // After the LSO: a key written twice, and the filler that seals the segments.
        produce(&p, &[(Some("dup"), Some("first"))], Compression::None, ts).await;
        produce(&p, &[(Some("dup"), Some("second"))], Compression::None, ts).await;
        for i in 0..40 {
            produce(&p, &[(Some(&format!("late-{i}")), Some("v"))], Compression::None, ts).await;
        }
        assert!(active_base(&p) > open_txn_start + 3, "the transactions and the duplicates are in sealed segments");
        let stats = p.clean(now_ms(), TEST_KEY_BYTES).await.expect("clean");
        assert!(stats.segments_cleaned > 0, "{stats:?}");

        let after = read_from(&p, 0).await;
        let values_of =
            |key: &str| -> Vec<Bytes> { after.iter().filter(|(_, k, _)| k.as_deref() == Some(key.as_bytes())).filter_map(|(_, _, v)| v.clone()).collect() };
        assert_eq!(values_of("k0"), vec![Bytes::from("new")], "below the LSO the latest value wins");
        assert!(values_of("ta-1").is_empty() && values_of("ta-2").is_empty(), "aborted data is removed");
        assert_eq!(values_of("tb-1").len() + values_of("tb-2").len(), 2, "committed data stays");
        assert_eq!(values_of("tc-1").len(), 1, "the open transaction's data stays");
        assert_eq!(values_of("dup"), vec![Bytes::from("first"), Bytes::from("second")], "nothing above the LSO supersedes");
        // Both markers stay (Kafka removes them only after delete.retention.ms; shardlog keeps them).
        let mut markers = 0;
        let mut offset = 0;
        while offset < p.high_watermark() {
            let data = p.read(offset, 1 << 20).await.expect("read");
            let headers: Vec<_> = data.records.iter().filter_map(|b| parse_header(b).ok()).collect();
            markers += headers.iter().filter(|h| h.is_control()).count();
            offset = headers.iter().map(|h| h.last_offset() + 1).max().expect("progress");
        }
        assert_eq!(markers, 2);
    });
}
