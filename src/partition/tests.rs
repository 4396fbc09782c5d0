//! Partition + storage tests on a real glommio executor with real DMA files.
use std::path::Path;
use std::rc::Rc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{Compression, RecordBatchDecoder, TimestampType};
use proptest::prelude::*;

use super::{Partition, PartitionError, PartitionSettings, WatchSignal};
use crate::config::FlushMode;
use crate::record::tests::kv_batch;
use crate::storage::LogConfig;

/// Builds one RecordBatch v2 with `n` records (producer id -1 unless given): keys
/// `k<i>`, values of 100-106 bytes, timestamps from `ts`.
pub(crate) fn batch(n: usize, ts: i64, producer: Option<(i64, i16, i32)>, compression: Compression) -> Bytes {
    let keys: Vec<String> = (0..n).map(|i| format!("k{i}")).collect();
    let values: Vec<String> = (0..n).map(|i| "v".repeat(100 + i % 7)).collect();
    let recs: Vec<(Option<&str>, Option<&str>)> = keys.iter().zip(&values).map(|(k, v)| (Some(k.as_str()), Some(v.as_str()))).collect();
    kv_batch(0, &recs, compression, producer, ts)
}

/// Partition settings for tests: 1 MiB batches, CreateTime, no timestamp window, flush=always.
pub(crate) fn settings() -> PartitionSettings {
    PartitionSettings {
        max_message_bytes: 1 << 20,
        log_append_time: false,
        timestamp_before_max_ms: i64::MAX,
        timestamp_after_max_ms: i64::MAX,
        flush: FlushMode::Always,
        min_insync_replicas: 1,
        max_producer_ids: 10_000,
        // Without KIP-966 unless a test turns it on (`replication_tests.rs`).
        hold_high_watermark_below_min_isr: false,
        checkpoint_high_watermark_periodically: true,
        tiered: false,
    }
}

pub(crate) use crate::storage::testing::run;

async fn open(dir: &Path, cfg: LogConfig) -> Rc<Partition> {
    Partition::open(&dir.join("t-0"), "t".into(), 0, [1; 16], 0, 0, cfg, settings()).await.expect("open")
}

/// `open` with segments written the way `flush` writes them (page cache or O_DIRECT).
pub(crate) async fn open_flushed(dir: &Path, cfg: LogConfig, flush: FlushMode) -> Rc<Partition> {
    let cfg = LogConfig { write_mode: super::write_mode(flush), ..cfg };
    let settings = PartitionSettings { flush, ..settings() };
    Partition::open(&dir.join("t-0"), "t".into(), 0, [1; 16], 0, 0, cfg, settings).await.expect("open")
}

fn offsets_of(records: &[Bytes]) -> Vec<i64> {
    let mut out = Vec::new();
    for b in records {
        let mut b = b.clone();
        let set = RecordBatchDecoder::decode(&mut b).expect("stored batch decodes");
        out.extend(set.records.iter().map(|r| r.offset));
    }
    out
}

async fn read_all(p: &Partition) -> Vec<i64> {
    let mut offset = p.log_start_offset();
    let mut all = Vec::new();
    loop {
        let data = p.read(offset, 1 << 20).await.expect("read");
        if data.records.is_empty() {
            return all;
        }
        let got = offsets_of(&data.records);
        offset = *got.last().expect("non-empty") + 1;
        all.extend(got);
    }
}

#[test]
fn append_read_roll_and_recover() {
    run(|dir| async move {
        let cfg = LogConfig { segment_bytes: 8 * 1024, index_interval_bytes: 1024, cache_bytes: 4 * 1024, ..Default::default() };
        let p = open(&dir, cfg.clone()).await;
        let mut expected = 0;
        for i in 0..60 {
            let out = p.append(batch(5, 1000 + i, None, Compression::None), -1).await.expect("append");
            assert_eq!(out.base_offset, expected);
            expected += 5;
        }
        assert_eq!(p.high_watermark(), 300);
        let seen = read_all(&p).await;
        assert_eq!(seen, (0..300).collect::<Vec<_>>(), "dense offsets, read from disk and cache");
        assert!(p.dir().join("00000000000000000000.index").exists(), "sealed segments save their index");
        p.close();
        drop(p);
        let p = open(&dir, cfg).await;
        assert_eq!(p.log_end_offset(), 300);
        assert_eq!(read_all(&p).await, (0..300).collect::<Vec<_>>());
        let out = p.append(batch(1, 5000, None, Compression::None), 1).await.expect("append after restart");
        assert_eq!(out.base_offset, 300, "offsets continue after restart");
    });
}

#[test]
fn corrupt_batch_is_refused_and_not_stored() {
    run(|dir| async move {
        let p = open(&dir, LogConfig::default()).await;
        let mut b = BytesMut::from(&batch(3, 1, None, Compression::None)[..]);
        let last = b.len() - 1;
        b[last] ^= 0xFF;
        let err = p.append(b.freeze(), -1).await.expect_err("bad CRC must be refused");
        assert!(matches!(err, PartitionError::Batch(_)), "{err:?}");
        assert_eq!(p.log_end_offset(), 0);
    });
}

#[test]
fn idempotent_duplicate_returns_original_offset() {
    run(|dir| async move {
        let p = open(&dir, LogConfig::default()).await;
        let first = batch(4, 1, Some((42, 0, 0)), Compression::None);
        assert_eq!(p.append(first.clone(), -1).await.unwrap().base_offset, 0);
        assert_eq!(p.append(batch(2, 1, Some((42, 0, 4)), Compression::None), -1).await.unwrap().base_offset, 4);
        assert_eq!(p.append(first, -1).await.unwrap().base_offset, 0, "duplicate answers its original offset");
        assert_eq!(p.log_end_offset(), 6, "a duplicate is not stored twice");
        let err = p.append(batch(1, 1, Some((42, 0, 9)), Compression::None), -1).await.unwrap_err();
        assert!(matches!(err, PartitionError::Sequence(_)), "{err:?}");
        // Producer state survives a restart (rebuilt from the active segment).
        p.close();
        drop(p);
        let p = open(&dir, LogConfig::default()).await;
        assert_eq!(p.append(first_again(), -1).await.unwrap().base_offset, 0, "duplicate still recognised after restart");
        assert_eq!(p.log_end_offset(), 6);
        assert_eq!(p.append(batch(1, 1, Some((42, 0, 6)), Compression::None), -1).await.unwrap().base_offset, 6);
    });
}

fn first_again() -> Bytes {
    batch(4, 1, Some((42, 0, 0)), Compression::None)
}

#[test]
fn log_append_time_and_segment_ms_roll() {
    run(|dir| async move {
        let cfg = LogConfig { segment_ms: 0, ..Default::default() };
        let settings = PartitionSettings { log_append_time: true, ..settings() };
        let p = Partition::open(&dir.join("t-0"), "t".into(), 0, [1; 16], 0, 3, cfg, settings).await.unwrap();
        let before = crate::runtime::now_ms();
        let out = p.append(batch(3, 5, None, Compression::Zstd), -1).await.unwrap();
        assert!(out.log_append_time_ms >= before, "LogAppendTime is the broker's clock");
        p.append(batch(2, 5, None, Compression::None), -1).await.unwrap();
        let data = p.read(0, 1 << 20).await.unwrap();
        let mut first = data.records[0].clone();
        let set = RecordBatchDecoder::decode(&mut first).unwrap();
        // Clients read a LogAppendTime batch's maxTimestamp as every record's timestamp
        // (kafka-protocol's decoder reports only the type, so check the header).
        assert!(set.records.iter().all(|r| r.timestamp_type == TimestampType::LogAppend));
        let header = crate::record::parse_header(&data.records[0]).unwrap();
        assert!(header.timestamp_type_is_log_append());
        assert_eq!(header.max_timestamp, out.log_append_time_ms);
        assert!(set.records.iter().all(|r| r.partition_leader_epoch == 3), "leader epoch stamped into stored batches");
        assert!(p.dir().join("00000000000000000003.log").exists(), "segment.ms=0 rolls before the next append");
    });
}

#[test]
fn a_tiered_log_deletes_only_what_is_in_remote_storage() {
    run(|dir| async move {
        let cfg = LogConfig { segment_bytes: 4 * 1024, retention_bytes: 0, ..Default::default() };
        let p = open(&dir, cfg.clone()).await;
        p.apply_config(cfg, PartitionSettings { tiered: true, ..settings() });
        for i in 0..400 {
            p.append(batch(2, 10_000 + i * 10, None, Compression::None), -1).await.unwrap();
        }
        let now = crate::runtime::now_ms();
        // local.retention.bytes 0 wants every sealed segment gone, but nothing is uploaded.
        p.apply_retention(now, -1).await.unwrap();
        assert_eq!(p.log_start_offset(), 0);
        // Uploaded through offset 250: the local log starts right after it, not later.
        p.apply_retention(now, 250).await.unwrap();
        assert_eq!(p.log_start_offset(), 251);
        // Batches go whole: the one holding 251 starts at 250.
        assert_eq!(read_all(&p).await.first(), Some(&250));
        assert!(matches!(p.read(250, 1000).await, Err(PartitionError::OffsetOutOfRange { .. })));
        // Everything uploaded: only the active segment stays.
        p.apply_retention(now, 10_000).await.unwrap();
        assert!(p.log_start_offset() > 251 && p.log_start_offset() < 800);
    });
}

#[test]
fn timestamps_delete_records_and_retention() {
    run(|dir| async move {
        let cfg = LogConfig { segment_bytes: 4 * 1024, retention_bytes: -1, ..Default::default() };
        let p = open(&dir, cfg.clone()).await;
        for i in 0..40 {
            p.append(batch(2, 10_000 + i * 10, None, Compression::Lz4), -1).await.unwrap();
        }
        // Record timestamps are 10000+10i and 10000+10i+1 at offsets 2i and 2i+1.
        assert_eq!(p.offset_for_timestamp(10_101).await.unwrap(), Some((21, 10_101)));
        assert_eq!(p.offset_for_timestamp(10_102).await.unwrap(), Some((22, 10_110)));
        assert_eq!(p.offset_for_timestamp(99_999).await.unwrap(), None);
        assert_eq!(p.max_timestamp_offset().await.unwrap(), Some((79, 10_391)));
        assert_eq!(p.delete_records(30).await.unwrap(), 30);
        assert!(matches!(p.read(10, 1000).await, Err(PartitionError::OffsetOutOfRange { .. })));
        assert_eq!(read_all(&p).await.first(), Some(&30));
        let log_files =
            |p: &Partition| std::fs::read_dir(p.dir()).unwrap().filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "log")).count();
        // Size retention: keep at most 0 bytes of sealed segments.
        let before = p.size_bytes();
        p.apply_config(LogConfig { retention_bytes: 0, ..cfg.clone() }, settings());
        p.apply_retention(crate::runtime::now_ms(), -1).await.unwrap();
        assert!(p.size_bytes() < before, "size retention deleted sealed segments");
        assert_eq!(log_files(&p), 1);
        let start_after_size = p.log_start_offset();
        assert!(start_after_size > 30);
        // Time retention: record timestamps are from 1970, so sealed segments are old.
        p.apply_config(LogConfig { retention_ms: 60_000, ..cfg }, settings());
        for i in 0..40 {
            p.append(batch(2, 10_000 + i * 10, None, Compression::None), -1).await.unwrap();
        }
        assert!(log_files(&p) > 1);
        p.apply_retention(crate::runtime::now_ms(), -1).await.unwrap();
        assert_eq!(log_files(&p), 1, "time retention keeps only the active segment");
        assert!(p.log_start_offset() > start_after_size);
        assert_eq!(read_all(&p).await.first(), Some(&p.log_start_offset()));
    });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]
    /// Recovery after cutting the active segment at any byte keeps exactly the batches
    /// that are whole before the cut, and offsets continue from there; in both write
    /// modes, reopened in either (the format is the same; O_DIRECT pads after each
    /// synced append, which every reader skips).
    #[test]
    fn recovery_after_truncation_at_random_byte(
        cut_frac in 0.0f64..1.0,
        n_batches in 1usize..12,
        direct in any::<bool>(),
        reopen_direct in any::<bool>(),
    ) {
        let mode = |d: bool| if d { FlushMode::Always } else { FlushMode::Never };
        run(move |dir| async move {
            let p = open_flushed(&dir, LogConfig::default(), mode(direct)).await;
            let mut ends = Vec::new();
            let mut size = 0u64;
            for i in 0..n_batches {
                let b = batch(3, i as i64, None, Compression::None);
                if direct {
                    // Each synced append was written alone, padded: the next one starts
                    // after the padding.
                    size = crate::storage::after_padding(size);
                }
                size += b.len() as u64;
                p.append(b, -1).await.unwrap();
                ends.push((size, p.log_end_offset()));
            }
            p.close();
            drop(p);
            let seg = dir.join("t-0").join("00000000000000000000.log");
            let cut = (size as f64 * cut_frac) as u64;
            std::fs::OpenOptions::new().write(true).open(&seg).unwrap().set_len(cut).unwrap();
            let expected_end = ends.iter().filter(|(e, _)| *e <= cut).map(|(_, o)| *o).next_back().unwrap_or(0);
            let p = open_flushed(&dir, LogConfig::default(), mode(reopen_direct)).await;
            assert_eq!(p.log_end_offset(), expected_end);
            assert_eq!(read_all(&p).await, (0..expected_end).collect::<Vec<_>>());
            assert_eq!(p.append(batch(1, 0, None, Compression::None), -1).await.unwrap().base_offset, expected_end);
        });
    }
}

#[test]
fn timed_out_long_polls_do_not_pile_up_on_an_idle_partition() {
    run(|dir| async move {
        let p = open(&dir, LogConfig::default()).await;
        // One fetch keeps waiting; hundreds of others time out, as consumers polling an
        // idle partition do (the fetch handler drops its receiver at the deadline).
        let waiting = WatchSignal::new();
        p.watch(&waiting);
        for _ in 0..500 {
            let signal = WatchSignal::new();
            p.watch(&signal);
            let rx = signal.woken();
            futures::pin_mut!(rx);
            let timeout = glommio::timer::sleep(std::time::Duration::from_micros(50));
            futures::pin_mut!(timeout);
            let _ = futures::future::select(rx, timeout).await;
        }
        assert!(p.watcher_count() <= 2, "{} watchers kept for 1 waiting fetch", p.watcher_count());
        // The waiting one is still registered and is woken by the next append.
        p.append(batch(1, 1000, None, Compression::None), -1).await.expect("append");
        assert!(waiting.is_woken(), "woken by the append");
        assert_eq!(p.watcher_count(), 0);
    });
}

#[test]
fn share_fetches_waiting_in_turn_are_woken_one_per_move_oldest_first() {
    run(|dir| async move {
        let p = open(&dir, LogConfig::default()).await;
        let fetch = WatchSignal::new();
        p.watch(&fetch);
        let first = WatchSignal::new();
        let gone = WatchSignal::new();
        let second = WatchSignal::new();
        let third = WatchSignal::new();
        for s in [&first, &gone, &second, &third] {
            p.watch_in_turn(s);
        }
        drop(gone);
        p.append(batch(1, 1000, None, Compression::None), -1).await.expect("append");
        // A plain long poll re-reads on every move; of those in turn, the oldest only.
        assert!(fetch.is_woken());
        assert!(first.is_woken());
        assert!(!second.is_woken() && !third.is_woken(), "one share fetch per move");
        // The next move skips the one that gave up and wakes the next in order; one
        // already woken elsewhere (another partition it watches) does not use the turn.
        third.wake();
        p.append(batch(1, 1001, None, Compression::None), -1).await.expect("append");
        assert!(second.is_woken(), "the next in turn");
        assert_eq!(p.live_watcher_count(), 1, "only the one woken elsewhere is still queued");
        // Closing wakes everyone still waiting in turn.
        let last = WatchSignal::new();
        let after = WatchSignal::new();
        p.watch_in_turn(&last);
        p.watch_in_turn(&after);
        p.close();
        assert!(last.is_woken() && after.is_woken());
    });
}

#[test]
fn reads_honour_hard_limits_and_refuse_negative_ones() {
    use super::ReadLimit;
    run(|dir| async move {
        // A tiny cache so the reads below come from disk in chunks.
        let cfg = LogConfig { cache_bytes: 1, ..Default::default() };
        let p = open(&dir, cfg).await;
        for i in 0..10 {
            p.append(batch(20, 1000 + i, None, Compression::None), -1).await.expect("append");
        }
        let one = p.read(0, 0).await.unwrap();
        assert_eq!(one.records.len(), 1, "at least one batch");
        let b = one.bytes;
        // Hard limit: a first batch that does not fit is not returned, and said so.
        let hard = p.read_with(0, ReadLimit { max_bytes: b as i64 - 1, min_one_batch: false, file_slice: false }).await.unwrap();
        assert!(hard.records.is_empty() && hard.first_batch_exceeds_limit);
        let zero = p.read_with(0, ReadLimit { max_bytes: 0, min_one_batch: false, file_slice: false }).await.unwrap();
        assert!(zero.records.is_empty() && zero.first_batch_exceeds_limit);
        // Whole batches up to the limit, from disk (the cache holds only the last batch).
        let some = p.read_with(0, ReadLimit { max_bytes: 3 * b as i64 + 10, min_one_batch: false, file_slice: false }).await.unwrap();
        assert_eq!((some.records.len(), some.bytes), (3, 3 * b));
        assert!(!some.first_batch_exceeds_limit);
        // Negative is refused where there is data, and harmless where there is none.
        assert!(matches!(p.read_with(0, ReadLimit { max_bytes: -1, min_one_batch: true, file_slice: false }).await, Err(PartitionError::InvalidFetchSize(-1))));
        let caught_up = p.read_with(p.high_watermark(), ReadLimit { max_bytes: -1, min_one_batch: true, file_slice: false }).await.unwrap();
        assert!(caught_up.records.is_empty());
    });
}

/// Waits until the partition's writer is idle (its background syncs and saves done; the
/// fault tests crash at such a quiet point, so a crashed incarnation's loop does not
/// outlive it).
pub(crate) async fn writer_idle(p: &Partition) {
    for _ in 0..10_000 {
        if !p.writer_running() {
            return;
        }
        glommio::timer::sleep(std::time::Duration::from_millis(1)).await;
    }
    panic!("the log writer did not go idle");
}

#[test]
fn flush_never_acks_without_fdatasync_and_syncs_every_flush_messages() {
    run(|dir| async move {
        // Kafka's defaults (never by count or time): acks=-1 is answered without any sync.
        let p = open_flushed(&dir.join("a"), LogConfig::default(), FlushMode::Never).await;
        for i in 0..25 {
            p.append(batch(1, i, None, Compression::None), -1).await.unwrap();
        }
        writer_idle(&p).await;
        assert_eq!(p.synced_offset(), 0, "nothing asked for an fdatasync");
        assert_eq!(read_all(&p).await, (0..25).collect::<Vec<_>>(), "written data is readable unsynced");
        // flush.messages=10: the writer syncs in the background each time 10 are unsynced,
        // with no acks=-1 waiter at all.
        let cfg = LogConfig { flush_interval_messages: 10, ..LogConfig::default() };
        let p = open_flushed(&dir.join("b"), cfg, FlushMode::Never).await;
        for i in 0..25 {
            p.append(batch(1, i, None, Compression::None), 1).await.unwrap();
        }
        writer_idle(&p).await;
        let synced = p.synced_offset();
        assert!((20..25).contains(&synced), "synced {synced}: every 10 messages, and the last 5 are not due");
    });
}

#[test]
fn flush_never_syncs_after_flush_ms_without_more_appends() {
    run(|dir| async move {
        let cfg = LogConfig { flush_interval_ms: 20, ..LogConfig::default() };
        let p = open_flushed(&dir, cfg, FlushMode::Never).await;
        for i in 0..3 {
            p.append(batch(2, i, None, Compression::None), 1).await.unwrap();
        }
        // An idle writer is woken by its flush.ms timer (bounded wait: liveness, not timing).
        for _ in 0..5_000 {
            if p.synced_offset() == 6 {
                break;
            }
            glommio::timer::sleep(std::time::Duration::from_millis(2)).await;
        }
        assert_eq!(p.synced_offset(), 6, "flush.ms synced the unsynced data in the background");
    });
}

#[test]
fn flush_never_roll_syncs_the_sealed_segment_and_saves_its_snapshot_in_the_background() {
    run(|dir| async move {
        let cfg = LogConfig { segment_bytes: 2048, ..LogConfig::default() };
        let p = open_flushed(&dir, cfg.clone(), FlushMode::Never).await;
        for i in 0..40 {
            p.append(batch(2, i, Some((7, 0, i as i32 * 2)), Compression::None), 1).await.unwrap();
        }
        writer_idle(&p).await;
        let bases = p.log.borrow().segment_bases();
        assert!(bases.len() > 2, "the load rolled segments");
        let active = *bases.last().unwrap();
        assert!(p.synced_offset() >= active, "every sealed segment was synced at its roll");
        for b in &bases[1..] {
            assert!(crate::storage::segment::snapshot_path(&p.dir(), *b).exists(), "seal snapshot at {b}");
        }
        p.close();
        drop(p);
        // Without the newest snapshot (a crash before the writer saved it), recovery
        // replays from an older one: the producer's next sequence is still accepted and
        // a retry of its last batch is still a duplicate.
        std::fs::remove_file(crate::storage::segment::snapshot_path(&dir.join("t-0"), active)).unwrap();
        let p = open_flushed(&dir, cfg, FlushMode::Never).await;
        let end = p.log_end_offset();
        let dup = p.append(batch(2, 39, Some((7, 0, 78)), Compression::None), 1).await.unwrap();
        assert_eq!(dup.base_offset, end - 2, "the last batch is recognised as a duplicate");
        let next = p.append(batch(2, 40, Some((7, 0, 80)), Compression::None), 1).await.unwrap();
        assert_eq!(next.base_offset, end, "the next sequence continues");
    });
}

#[test]
fn leader_epochs_are_remembered_across_restarts_and_answer_offset_for_leader_epoch() {
    run(|dir| async move {
        let open_at = |epoch: i32| {
            let dir = dir.join("t-0");
            async move { Partition::open(&dir, "t".into(), 0, [1; 16], 0, epoch, LogConfig::default(), settings()).await.unwrap() }
        };
        let p = open_at(0).await;
        p.append(batch(3, 5, None, Compression::None), -1).await.unwrap();
        assert_eq!(p.epoch_end_offset(0), (0, 3), "the current epoch ends at the log end");
        p.close();
        drop(p);
        // A new leadership (as after a restart that bumped the epoch): epoch 2 from offset 3.
        let p = open_at(2).await;
        assert_eq!(p.epoch_end_offset(0), (0, 3), "saved before the restart");
        p.append(batch(2, 5, None, Compression::None), -1).await.unwrap();
        assert_eq!(p.epoch_end_offset(0), (0, 3), "epoch 0 ended where epoch 2 began");
        assert_eq!(p.epoch_end_offset(1), (0, 3), "an epoch this log never had: the one below it");
        assert_eq!(p.epoch_end_offset(2), (2, 5));
        assert_eq!(p.epoch_end_offset(3), (-1, -1), "a future epoch is unknown");
        p.close();
        drop(p);
        // The checkpoint is Kafka's file, and it survives a restart.
        let text = std::fs::read_to_string(dir.join("t-0").join("leader-epoch-checkpoint")).unwrap();
        assert_eq!(text, "0\n2\n0 0\n2 3\n");
        let p = open_at(2).await;
        assert_eq!(p.epoch_end_offset(0), (0, 3));
        assert_eq!(p.epoch_end_offset(2), (2, 5));
    });
}
