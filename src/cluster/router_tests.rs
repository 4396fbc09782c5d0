//! The router on two real shards (two glommio executors, one mesh, real partitions):
//! a batch over partitions of both shards costs one message to the other shard, results
//! come back in batch order, a long poll over many partitions of the other shard is one
//! watch woken by any of them, and cancelled long polls leave no registrations behind.
//!
//! Topics "a" and "b", partitions 0..6 each; partition i lives on shard i % 2. The test
//! body runs on shard 0. The extension operation answers a partition's registered
//! long-poll count (so shard 0 can look at shard 1's partitions).
use std::future::Future;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use futures::FutureExt;
use kafka_protocol::records::Compression;

use super::router::{OpBatch, OpOutput, OpResult, PartitionOp, Router, ShardRequest, WatchPoint};
use super::shard_partitions::ShardPartitions;
use crate::config::FlushMode;
use crate::partition::{Partition, PartitionSettings, ReadLimit};
use crate::runtime::mesh::Mesh;
use crate::runtime::ShardId;
use crate::storage::dma;
use crate::storage::LogConfig;

type TestRouter = Router<(), usize>;

const TOPICS: [&str; 2] = ["a", "b"];
const PARTITIONS: i32 = 6;
/// Bounds a wait that must end (a hang would be the failure), not a timing claim.
const MUST_END_WITHIN: Duration = Duration::from_secs(20);

fn owner(partition: i32) -> ShardId {
    (partition % 2) as ShardId
}

fn records(n: usize) -> bytes::Bytes {
    let values: Vec<String> = (0..n).map(|i| format!("v{i}")).collect();
    let recs: Vec<(Option<&str>, Option<&str>)> = values.iter().map(|v| (None, Some(v.as_str()))).collect();
    crate::record::tests::kv_batch(0, &recs, Compression::None, None, 1_000)
}

async fn open_shard(dir: &Path, shard: ShardId, mesh: Mesh<ShardRequest<(), usize>>) -> Rc<TestRouter> {
    dma::open_iopoll_probe(dir).await.expect("probe open");
    let partitions = Rc::new(ShardPartitions::new(shard, 1, Box::new(|| 0)));
    let settings = PartitionSettings {
        max_message_bytes: 1 << 20,
        log_append_time: false,
        timestamp_before_max_ms: i64::MAX,
        timestamp_after_max_ms: i64::MAX,
        flush: FlushMode::Never,
        min_insync_replicas: 1,
        max_producer_ids: 10_000,
        hold_high_watermark_below_min_isr: true,
        checkpoint_high_watermark_periodically: true,
        tiered: false,
    };
    for topic in TOPICS {
        for i in (0..PARTITIONS).filter(|i| owner(*i) == shard) {
            let path = dir.join(format!("{topic}-{i}"));
            let p = Partition::open(&path, topic.into(), i, [1; 16], shard, 0, LogConfig::default(), settings.clone()).await;
            partitions.insert(p.expect("open partition"));
        }
    }
    let router = Rc::new(TestRouter::new(partitions, mesh));
    router.set_extension(Box::new(|p, ()| Box::pin(async move { p.watcher_count() })));
    router
}

/// Runs `body` on shard 0 while shard 1 serves its inbox.
fn two_shards<F, Fut>(body: F)
where
    F: FnOnce(Rc<TestRouter>) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + 'static,
{
    two_shards_gated(1024, move |router, gate| async move {
        gate.send(()).await.expect("shard 1 waits for its gate");
        body(router).await;
    });
}

/// Runs `body` on shard 0; shard 1's inboxes hold `capacity` messages, and shard 1 starts
/// serving its inbox only once `body` sends on the gate it is given.
fn two_shards_gated<F, Fut>(capacity: usize, body: F)
where
    F: FnOnce(Rc<TestRouter>, async_channel::Sender<()>) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + 'static,
{
    let dir = tempfile::tempdir().expect("tempdir");
    let path: PathBuf = dir.path().to_path_buf();
    dma::write_iopoll_probe(&path).expect("probe");
    let (mesh, mut inboxes) = Mesh::<ShardRequest<(), usize>>::new(2, capacity);
    let inbox1 = inboxes.pop().expect("two inboxes");
    let inbox0 = inboxes.pop().expect("two inboxes");
    let (done_tx, done_rx) = async_channel::bounded::<()>(1);
    let (gate_tx, gate_rx) = async_channel::bounded::<()>(1);
    let (mesh1, path1) = (mesh.clone(), path.clone());
    let shard1 = glommio::LocalExecutorBuilder::default()
        .spawn(move || async move {
            crate::runtime::enter_shard(1);
            let router = open_shard(&path1, 1, mesh1).await;
            if gate_rx.recv().await.is_ok() {
                glommio::spawn_local(router.serve_inbox(inbox1)).detach();
            }
            let _ = done_rx.recv().await;
        })
        .expect("executor 1");
    let shard0 = glommio::LocalExecutorBuilder::default()
        .spawn(move || async move {
            crate::runtime::enter_shard(0);
            let router = open_shard(&path, 0, mesh).await;
            glommio::spawn_local(router.clone().serve_inbox(inbox0)).detach();
            body(router, gate_tx).await;
            let _ = done_tx.send(()).await;
        })
        .expect("executor 0");
    shard0.join().expect("shard 0");
    shard1.join().expect("shard 1");
    drop(dir);
}

/// A batch of one operation per partition of both topics, built by `op(topic, partition)`.
fn every_partition<P>(mut op: impl FnMut(usize, i32) -> P) -> OpBatch<'static, P> {
    let mut batch = OpBatch::with_capacity(TOPICS.len() * PARTITIONS as usize);
    for (t, topic) in TOPICS.iter().enumerate() {
        for i in 0..PARTITIONS {
            batch.push(owner(i), topic, i, op(t, i));
        }
    }
    batch
}

/// Runs `batch` and returns its results with the messages it cost.
async fn run_counted(router: &TestRouter, batch: OpBatch<'_, PartitionOp<()>>) -> (Vec<OpResult<usize>>, u64) {
    let before = router.messages_sent();
    let out = router.run(batch).await;
    (out, router.messages_sent() - before)
}

async fn must_end<T>(f: impl Future<Output = T>) -> T {
    futures::select! {
        out = f.fuse() => out,
        _ = glommio::timer::sleep(MUST_END_WITHIN).fuse() => panic!("did not end within {MUST_END_WITHIN:?}"),
    }
}

/// Registered long polls of `topic`/`partition`, asked on its own shard.
async fn watchers(router: &TestRouter, topic: &str, partition: i32) -> usize {
    match router.call(owner(partition), topic, partition, PartitionOp::Extension(())).await {
        Ok(OpOutput::Extension(n)) => n,
        _ => panic!("watcher count of {topic}-{partition}"),
    }
}

#[test]
fn a_batch_over_two_shards_costs_one_message_and_keeps_its_order() {
    two_shards(|router| async move {
        // Partition i of topic t gets 1 + i + 10t records: its next offset tells them apart.
        let records_of = |t: usize, i: i32| 1 + i as usize + 10 * t;
        let (out, messages) = run_counted(
            &router,
            every_partition(|t, i| PartitionOp::Produce { records: records(records_of(t, i)), acks: -1, timeout_ms: 30_000, txn_guard: None }),
        )
        .await;
        assert_eq!(messages, 1, "12 partitions over 2 shards: one message to the other shard");
        assert!(out.iter().all(|r| matches!(r, Ok(OpOutput::Produce(o)) if o.base_offset == 0)));
        // A second produce: each base offset is what that partition held.
        let (out, messages) =
            run_counted(&router, every_partition(|_, _| PartitionOp::Produce { records: records(1), acks: -1, timeout_ms: 30_000, txn_guard: None })).await;
        assert_eq!(messages, 1);
        let mut expected = Vec::new();
        for t in 0..TOPICS.len() {
            expected.extend((0..PARTITIONS).map(|i| records_of(t, i) as i64));
        }
        let got: Vec<i64> = out
            .iter()
            .map(|r| match r {
                Ok(OpOutput::Produce(o)) => o.base_offset,
                _ => -1,
            })
            .collect();
        assert_eq!(got, expected, "results in batch order");

        let (out, messages) = run_counted(&router, every_partition(|_, _| PartitionOp::ListOffsets { timestamp: -1, read_committed: false })).await;
        assert_eq!(messages, 1);
        let got: Vec<i64> = out
            .iter()
            .map(|r| match r {
                Ok(OpOutput::Offset(o, _)) => *o,
                _ => -1,
            })
            .collect();
        assert_eq!(got, expected.iter().map(|n| n + 1).collect::<Vec<_>>());

        let limit = ReadLimit::at_least_one(1 << 20);
        let (out, messages) = run_counted(&router, every_partition(|_, _| PartitionOp::Fetch { offset: 0, limit, read_committed: false })).await;
        assert_eq!(messages, 1);
        for (r, n) in out.iter().zip(&expected) {
            let Ok(OpOutput::Fetch(data)) = r else { panic!("fetch failed") };
            assert_eq!((data.records.len(), data.high_watermark), (2, n + 1));
        }

        // Only this shard's partitions: no message at all.
        let mut local = OpBatch::with_capacity(3);
        for i in [0, 2, 4] {
            local.push(0, "a", i, PartitionOp::ListOffsets { timestamp: -2, read_committed: false });
        }
        let (out, messages) = run_counted(&router, local).await;
        assert_eq!((messages, out.len()), (0, 3));
        // An unknown partition is answered in its place, the others still run.
        let mut mixed = OpBatch::with_capacity(2);
        mixed.push(1, "a", 1, PartitionOp::ListOffsets { timestamp: -2, read_committed: false });
        mixed.push(1, "nope", 1, PartitionOp::ListOffsets { timestamp: -2, read_committed: false });
        let out = router.run(mixed).await;
        assert!(matches!(out[0], Ok(OpOutput::Offset(0, _))));
        assert!(matches!(out[1], Err(crate::partition::PartitionError::UnknownTopicOrPartition)));
    });
}

#[test]
fn a_long_poll_over_many_partitions_of_the_other_shard_is_one_watch_woken_by_any() {
    two_shards(|router| async move {
        let remote: Vec<i32> = (0..PARTITIONS).filter(|i| owner(*i) == 1).collect();
        for topic in TOPICS {
            let mut watches = OpBatch::with_capacity(remote.len());
            for &i in &remote {
                watches.push(1, topic, i, WatchPoint::HighWatermark(0));
            }
            let poll = glommio::spawn_local({
                let router = router.clone();
                async move { router.watch_any(watches).await }
            });
            // Let the watch reach shard 1 and register there.
            let last = *remote.last().expect("remote partitions");
            must_end(async {
                while watchers(&router, topic, last).await == 0 {
                    glommio::timer::sleep(Duration::from_millis(5)).await;
                }
            })
            .await;
            for &i in &remote {
                assert_eq!(watchers(&router, topic, i).await, 1, "{topic}-{i}: one registration of the one watch");
            }
            // A produce to any one of them (the middle one) wakes the whole poll.
            let mid = remote[remote.len() / 2];
            let produced = router.call(1, topic, mid, PartitionOp::Produce { records: records(1), acks: -1, timeout_ms: 30_000, txn_guard: None }).await;
            assert!(produced.is_ok());
            must_end(poll).await;
        }
    });
}

#[test]
fn a_long_poll_sends_one_message_per_other_shard() {
    two_shards(|router| async move {
        let before = router.messages_sent();
        let poll = router.watch_any(every_partition(|_, _| WatchPoint::HighWatermark(0)));
        // Polled once: sends its watches, then waits (nothing was produced).
        let mut poll = std::pin::pin!(poll.fuse());
        futures::select! {
            _ = poll.as_mut() => panic!("woken with nothing produced"),
            _ = glommio::timer::sleep(Duration::from_millis(1)).fuse() => {}
        }
        assert_eq!(router.messages_sent() - before, 1, "12 partitions over 2 shards: one watch message");
        // A produce to a local partition wakes it as well.
        let produced = router.call(0, "b", 4, PartitionOp::Produce { records: records(1), acks: -1, timeout_ms: 30_000, txn_guard: None }).await;
        assert!(produced.is_ok());
        must_end(poll).await;
    });
}

#[test]
fn cancelled_long_polls_leave_no_registrations_on_the_owning_shard() {
    two_shards(|router| async move {
        let remote: Vec<i32> = (0..PARTITIONS).filter(|i| owner(*i) == 1).collect();
        for _ in 0..200 {
            let mut watches = OpBatch::with_capacity(remote.len());
            for &i in &remote {
                watches.push(1, "a", i, WatchPoint::HighWatermark(0));
            }
            // The fetch deadline passes (or the connection closes): the poll is dropped.
            futures::select! {
                _ = router.watch_any(watches).fuse() => panic!("woken with nothing produced"),
                _ = glommio::timer::sleep(Duration::from_micros(200)).fuse() => {}
            }
        }
        // Each partition keeps at most the registration of the last poll (pruned by the
        // next one), not one per poll.
        for &i in &remote {
            let n = watchers(&router, "a", i).await;
            assert!(n <= 1, "a-{i}: {n} registrations kept after 200 cancelled polls");
        }
        // And a live poll after them is still woken.
        let mut watches = OpBatch::with_capacity(1);
        watches.push(1, "a", 5, WatchPoint::HighWatermark(0));
        let poll = glommio::spawn_local({
            let router = router.clone();
            async move { router.watch_any(watches).await }
        });
        // Registered or not yet, the produce ends it (a watch arriving after it sees the
        // high watermark past 0 and answers at once).
        glommio::timer::sleep(Duration::from_millis(5)).await;
        assert!(router.call(1, "a", 5, PartitionOp::Produce { records: records(1), acks: -1, timeout_ms: 30_000, txn_guard: None }).await.is_ok());
        must_end(poll).await;
    });
}

/// A flood of requests at a shard that does not take its inbox: exactly `capacity`
/// messages get in, every other sender waits (nothing piles up, nothing fails), and once
/// the shard serves its inbox every request completes.
#[test]
fn a_full_inbox_makes_senders_wait_and_every_request_completes() {
    const CAPACITY: usize = 4;
    const FLOOD: usize = 200;
    two_shards_gated(CAPACITY, |router, gate| async move {
        let waited_before = crate::metrics::with(|m| m.cross_shard_sends_waited);
        let calls = (0..FLOOD).map(|_| router.call(owner(1), "a", 1, PartitionOp::Extension(())));
        let mut all = Box::pin(futures::future::join_all(calls));
        // join_all polls every call once: each either got into the inbox or waits for room.
        let pause = std::pin::pin!(glommio::timer::sleep(Duration::from_millis(100)));
        match futures::future::select(all.as_mut(), pause).await {
            futures::future::Either::Left(_) => panic!("the flood completed while shard 1 took nothing from its inbox"),
            futures::future::Either::Right(_) => {}
        }
        assert_eq!(router.messages_sent(), CAPACITY as u64, "only the inbox's capacity got in");
        gate.send(()).await.expect("open the gate");
        let out = must_end(all).await;
        assert_eq!(out.len(), FLOOD);
        assert!(out.iter().all(|r| matches!(r, Ok(OpOutput::Extension(0)))), "every request answered by shard 1");
        assert_eq!(router.messages_sent(), FLOOD as u64);
        let waited = crate::metrics::with(|m| m.cross_shard_sends_waited) - waited_before;
        assert_eq!(waited, (FLOOD - CAPACITY) as u64, "the senders that found the inbox full are counted");
    });
}
