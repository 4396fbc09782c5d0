//! The coordinator on one real shard (a glommio executor, a real `__consumer_offsets`
//! partition): what its timer does while a commit's append is in flight.
use std::rc::Rc;

use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::{GroupId, OffsetCommitRequest, TopicName};

use super::super::context::{CoordinatorContext, GroupConfig};
use super::super::ops::{GroupOp, GroupReply};
use super::super::share::state_coordinator::ShareStateFailure;
use super::super::OFFSETS_TOPIC;
use crate::cluster::image::{MetadataImage, PartitionMeta, TopicMeta};
use crate::cluster::shard_partitions::ShardPartitions;
use crate::config::FlushMode;
use crate::partition::{Partition, PartitionSettings};
use crate::protocol::ErrorCode;
use crate::storage::{dma, LogConfig};

fn config() -> GroupConfig {
    GroupConfig {
        group_min_session_timeout_ms: 6_000,
        group_max_session_timeout_ms: 1_800_000,
        group_initial_rebalance_delay_ms: 0,
        group_max_size: 100,
        group_consumer_migration_policy: Default::default(),
        max_groups_per_shard: 1_000,
        group_consumer_session_timeout_ms: 45_000,
        group_consumer_heartbeat_interval_ms: 5_000,
        group_streams_session_timeout_ms: 45_000,
        group_streams_heartbeat_interval_ms: 5_000,
        group_streams_num_standby_replicas: 0,
        group_streams_rack_aware_assignment_tags: Vec::new(),
        group_streams_initial_rebalance_delay_ms: 0,
        offset_metadata_max_bytes: 4096,
        offsets_retention_minutes: 10_080,
        offsets_retention_check_interval_ms: 600_000,
    }
}

fn settings() -> PartitionSettings {
    PartitionSettings {
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
    }
}

/// Runs `body` on shard 0 with a coordinator leading `__consumer_offsets-0`, and an image
/// holding topic "t" (2 partitions).
fn one_shard<F, Fut>(body: F)
where
    F: FnOnce(Rc<CoordinatorContext>, Rc<Partition>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().to_path_buf();
    dma::write_iopoll_probe(&path).expect("probe");
    glommio::LocalExecutorBuilder::default()
        .spawn(move || async move {
            crate::runtime::enter_shard(0);
            dma::open_iopoll_probe(&path).await.expect("probe open");
            let partitions = Rc::new(ShardPartitions::new(0, 1, Box::new(|| 0)));
            let mut image = MetadataImage::default();
            let metas = (0..2).map(|p| PartitionMeta::unassigned(p, 0)).collect();
            image.topics.insert("t".into(), TopicMeta { name: "t".into(), topic_id: [7; 16], partitions: metas, configs: Default::default() });
            partitions.publish(std::sync::Arc::new(image));
            let p = Partition::open(&path.join("offsets-0"), OFFSETS_TOPIC.into(), 0, [1; 16], 0, 0, LogConfig::default(), settings()).await;
            let p = p.expect("open partition");
            partitions.insert(p.clone());
            let persister: super::super::share::state_persister::StatePersister =
                Box::new(|_, _| Box::pin(async { Err(ShareStateFailure { code: ErrorCode::COORDINATOR_NOT_AVAILABLE, message: None }) }));
            let ctx = Rc::new(CoordinatorContext::new(config(), partitions, persister));
            body(ctx, p).await;
        })
        .expect("executor")
        .join()
        .expect("shard 0");
    drop(dir);
}

fn simple_commit(group: &str, offsets: &[(i32, i64)]) -> OffsetCommitRequest {
    let partitions = offsets.iter().map(|&(p, o)| OffsetCommitRequestPartition::default().with_partition_index(p).with_committed_offset(o)).collect();
    OffsetCommitRequest::default()
        .with_group_id(GroupId(group.to_string().into()))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default().with_name(TopicName("t".to_string().into())).with_partitions(partitions)])
}

/// A simple group's first commit creates the group before its append and fills its offsets
/// after it. The timer that forgets disposable groups (no members, no offsets) may run in
/// between; the commit answered NONE must still be what OffsetFetch reads (a CI run read
/// -1 after a commit was answered, before this was fixed).
#[test]
fn a_first_commit_survives_the_timer_running_during_its_append() {
    one_shard(|ctx, p| async move {
        let commit = {
            let (ctx, p) = (ctx.clone(), p.clone());
            glommio::spawn_local(async move { ctx.groups.execute(&ctx, &p, GroupOp::Commit { req: simple_commit("g", &[(0, 42), (1, 7)]), version: 9 }).await })
        };
        // Until the commit has created its group and waits on its append.
        let mut polls = 0;
        while !ctx.groups.groups.borrow().contains_key("g") {
            polls += 1;
            assert!(polls < 100_000, "the commit never created its group");
            glommio::executor().yield_task_queue_now().await;
        }
        {
            let groups = ctx.groups.groups.borrow();
            assert!(groups["g"].offsets.is_empty(), "the test must catch the commit between its group's creation and its append's end");
            assert!(groups["g"].is_disposable());
        }
        ctx.groups.tick(&ctx);
        let Ok(GroupReply::Commit(resp)) = commit.await else { panic!("commit not answered") };
        let codes: Vec<i16> = resp.topics.iter().flat_map(|t| t.partitions.iter().map(|p| p.error_code)).collect();
        assert_eq!(codes, vec![0, 0]);
        let fetched = ctx.groups.execute(&ctx, &p, GroupOp::FetchOffsets { group_id: "g".into(), topics: Some(vec![("t".into(), vec![0, 1])]) }).await;
        let Ok(GroupReply::Offsets(ErrorCode::NONE, topics)) = fetched else { panic!("fetch failed") };
        let offsets: Vec<i64> = topics[0].1.iter().map(|o| o.offset).collect();
        assert_eq!(offsets, vec![42, 7], "the answered commit is what the group reads");
    });
}

/// A transaction's offsets for a group that has nothing else (no members, no committed
/// offsets) keep the group until the transaction ends: the timer must not forget it, or
/// the marker's commit finds no group and the offsets are gone.
#[test]
fn pending_transactional_offsets_keep_their_group_through_the_timer() {
    use kafka_protocol::messages::txn_offset_commit_request::{TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic};
    use kafka_protocol::messages::{ProducerId, TransactionalId, TxnOffsetCommitRequest};
    one_shard(|ctx, p| async move {
        let req = TxnOffsetCommitRequest::default()
            .with_transactional_id(TransactionalId("tx".to_string().into()))
            .with_group_id(GroupId("g".to_string().into()))
            .with_producer_id(ProducerId(5))
            .with_producer_epoch(0)
            .with_generation_id_or_member_epoch(-1)
            .with_topics(vec![TxnOffsetCommitRequestTopic::default()
                .with_name(TopicName("t".to_string().into()))
                .with_partitions(vec![TxnOffsetCommitRequestPartition::default().with_partition_index(0).with_committed_offset(11)])]);
        let Ok(GroupReply::TxnCommit(resp)) = ctx.groups.execute(&ctx, &p, GroupOp::TxnCommit { req, version: 3 }).await else { panic!("not answered") };
        assert_eq!(resp.topics[0].partitions[0].error_code, 0);
        ctx.groups.tick(&ctx);
        ctx.groups.execute(&ctx, &p, GroupOp::CompleteTxn { producer_id: 5, commit: true }).await.expect("marker applied");
        let fetched = ctx.groups.execute(&ctx, &p, GroupOp::FetchOffsets { group_id: "g".into(), topics: Some(vec![("t".into(), vec![0])]) }).await;
        let Ok(GroupReply::Offsets(ErrorCode::NONE, topics)) = fetched else { panic!("fetch failed") };
        assert_eq!(topics[0].1[0].offset, 11, "the transaction's committed offset is the group's");
    });
}

/// Kafka 4.4: a TxnOffsetCommit naming a generation creates no group; it is answered
/// GROUP_ID_NOT_FOUND from v6 (KIP-1319), ILLEGAL_GENERATION before.
#[test]
fn a_transactional_commit_with_a_generation_creates_no_group() {
    use kafka_protocol::messages::txn_offset_commit_request::{TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic};
    use kafka_protocol::messages::{ProducerId, TransactionalId, TxnOffsetCommitRequest};
    one_shard(|ctx, p| async move {
        for (version, want) in [(4, ErrorCode::ILLEGAL_GENERATION), (6, ErrorCode::GROUP_ID_NOT_FOUND)] {
            let req = TxnOffsetCommitRequest::default()
                .with_transactional_id(TransactionalId("tx".to_string().into()))
                .with_group_id(GroupId("nobody".to_string().into()))
                .with_producer_id(ProducerId(5))
                .with_member_id("m".to_string().into())
                .with_generation_id_or_member_epoch(3)
                .with_topics(vec![TxnOffsetCommitRequestTopic::default()
                    .with_name(TopicName("t".to_string().into()))
                    .with_partitions(vec![TxnOffsetCommitRequestPartition::default().with_partition_index(0).with_committed_offset(11)])]);
            let Ok(GroupReply::TxnCommit(resp)) = ctx.groups.execute(&ctx, &p, GroupOp::TxnCommit { req, version }).await else { panic!("not answered") };
            assert_eq!(resp.topics[0].partitions[0].error_code, want.code(), "v{version}");
        }
        let fetched = ctx.groups.execute(&ctx, &p, GroupOp::FetchOffsets { group_id: "nobody".into(), topics: Some(vec![("t".into(), vec![0])]) }).await;
        let Ok(GroupReply::Offsets(ErrorCode::NONE, topics)) = fetched else { panic!("fetch failed") };
        assert_eq!(topics[0].1[0].offset, -1, "nothing was committed");
    });
}
