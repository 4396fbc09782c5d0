//! Storage hot path on one shard: validate + append (+ write, + fdatasync) through
//! `Partition::append` on a real glommio executor with O_DIRECT files, and reads served
//! from the batch cache. `cargo bench --bench storage -- --quick` for a short run.
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kafka_protocol::records::Compression;
use shardlog::config::FlushMode;
use shardlog::partition::{Partition, PartitionSettings};
use shardlog::record::{encode_batch, NewRecord};
use shardlog::storage::LogConfig;

/// One producer batch of `n` 1 KiB records (sequence tracks offset so it stays one batch).
fn batch(n: usize) -> Bytes {
    let records = (0..n).map(|i| NewRecord { key: None, value: Some(Bytes::from(vec![(i % 251) as u8; 1024])), timestamp_ms: 1_700_000_000_000 + i as i64 });
    encode_batch(records, Compression::None).expect("a bench batch encodes")
}

/// Runs `iters` appends of `records` with `acks` on a fresh partition; returns the time.
fn appends(iters: u64, records: Bytes, acks: i16, flush: FlushMode, concurrent: usize) -> Duration {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().to_path_buf();
    shardlog::storage::dma::write_iopoll_probe(&path).expect("probe");
    let elapsed = glommio::LocalExecutorBuilder::default()
        .spawn(move || async move {
            shardlog::runtime::enter_shard(0);
            shardlog::storage::dma::open_iopoll_probe(&path).await.expect("probe open");
            let settings = PartitionSettings {
                max_message_bytes: 8 << 20,
                log_append_time: false,
                timestamp_before_max_ms: i64::MAX,
                timestamp_after_max_ms: i64::MAX,
                flush,
                min_insync_replicas: 1,
                max_producer_ids: 10_000,
                hold_high_watermark_below_min_isr: true,
                checkpoint_high_watermark_periodically: true,
                tiered: false,
            };
            let p = Partition::open(&path.join("b-0"), "b".into(), 0, [0; 16], 0, 0, LogConfig::default(), settings).await.expect("open");
            let start = Instant::now();
            // `concurrent` producers in flight, as connections would be.
            let per = iters.div_ceil(concurrent as u64);
            let tasks: Vec<_> = (0..concurrent)
                .map(|_| {
                    let (p, records) = (p.clone(), records.clone());
                    glommio::spawn_local(async move {
                        for _ in 0..per {
                            p.append(records.clone(), acks).await.expect("append");
                        }
                    })
                })
                .collect();
            for t in tasks {
                t.await;
            }
            start.elapsed()
        })
        .expect("executor")
        .join()
        .expect("join");
    drop(dir);
    elapsed
}

fn bench_append(c: &mut Criterion) {
    let records = batch(16); // ~16 KiB, a typical producer batch
    let mut g = c.benchmark_group("partition_append_16KiB");
    g.throughput(Throughput::Bytes(records.len() as u64));
    g.measurement_time(Duration::from_secs(5));
    g.bench_function("acks1_write", |b| b.iter_custom(|n| appends(n, records.clone(), 1, FlushMode::Never, 1)));
    g.bench_function("acksall_fdatasync_1_producer", |b| b.iter_custom(|n| appends(n, records.clone(), -1, FlushMode::Always, 1)));
    g.bench_function("acksall_fdatasync_8_producers", |b| b.iter_custom(|n| appends(n, records.clone(), -1, FlushMode::Always, 8)));
    g.finish();
}

criterion_group!(benches, bench_append);
criterion_main!(benches);
