//! The share-partition leaders' dead-letter writer (`group/share/dead_letter.rs`'s
//! `DeadLetterWriter`), as Kafka 4.4's ShareGroupDLQStateManager writes:
//! - `prepare` checks the group's queue against the broker's and the topic's settings
//!   (`errors.deadletterqueue.topic.name.prefix`, the topic's
//!   `errors.deadletterqueue.group.enable`) and creates a missing topic when
//!   `errors.deadletterqueue.auto.create.topics.enable` allows it (the broker's default
//!   partitions and replication factor, the topic opted in, CreateTime timestamps);
//! - `write` appends a batch with acks=all to the queue's partition `source % partitions`:
//!   on this broker through the router, on another as a Produce over the inter-broker
//!   listener; a moving leader and an unanswered call are retried with Kafka's backoff
//!   (1 s doubling, 5 attempts), any other error gives up at once.
//!
//! Not a hot path: one call per range of dead letters, so the codecs are kafka-protocol's.
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::LocalBoxFuture;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::shard::ShardRouter;
use crate::cluster::image::MetadataImage;
use crate::cluster::router::PartitionOp;
use crate::cluster::topic_config::{ERRORS_DEADLETTERQUEUE_GROUP_ENABLE, MESSAGE_TIMESTAMP_TYPE};
use crate::controller::{ControllerError, ControllerHandle};
use crate::group::share::dead_letter::{DeadLetterQueue, DeadLetterWriter};
use crate::protocol::ErrorCode;
use crate::security::peer_security::PeerSecurity;

/// Kafka's ShareGroupDLQStateManager: 5 attempts, 1 s backoff doubling (up to 30 s).
const ATTEMPTS: u32 = 5;
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// Kafka's request.timeout.ms default, which its dead-letter Produce carries.
const PRODUCE_TIMEOUT_MS: i32 = 30_000;
/// The Produce version brokers send each other here (topic names, not ids).
const PRODUCE_VERSION: i16 = 11;
/// How long a created topic may take to have leaders in this broker's image.
const CREATED_TOPIC_WAIT: Duration = Duration::from_secs(10);

pub struct BrokerDeadLetterWriter {
    pub router: Rc<ShardRouter>,
    pub controller: ControllerHandle,
    pub node_id: i32,
    pub inter_broker: Arc<PeerSecurity>,
    /// errors.deadletterqueue.topic.name.prefix ("" allows any name).
    pub prefix: String,
    /// errors.deadletterqueue.auto.create.topics.enable.
    pub auto_create: bool,
}

impl BrokerDeadLetterWriter {
    /// Kafka's validateDlqTopic, with its words.
    fn check(&self, image: &MetadataImage, group_id: &str, topic: &str) -> Result<bool, String> {
        if topic.starts_with("__") {
            return Err(format!("Configured DLQ topic name in share group: {group_id} cannot start with __, topic: {topic}."));
        }
        let exists = image.topic(topic).is_some();
        if exists
            && !image.topic(topic).is_some_and(|t| t.configs.get(ERRORS_DEADLETTERQUEUE_GROUP_ENABLE).is_some_and(|v| v.trim().eq_ignore_ascii_case("true")))
        {
            return Err(format!("DLQ is not enabled on configured DLQ topic for share group: {group_id}, topic: {topic}."));
        }
        if !exists && !self.auto_create {
            return Err(format!("DLQ topic does not exist and auto create is disabled on cluster for share group: {group_id}, topic: {topic}."));
        }
        if !self.prefix.is_empty() && !topic.starts_with(&self.prefix) {
            return Err(format!(
                "Configured DLQ topic name does not comply with the DLQ topic prefix in share group: {group_id}, topic: {topic}, prefix: {}.",
                self.prefix
            ));
        }
        Ok(exists)
    }

    async fn create(&self, topic: &str) -> Result<(), String> {
        let configs = BTreeMap::from([
            (ERRORS_DEADLETTERQUEUE_GROUP_ENABLE.to_string(), "true".to_string()),
            // Each dead letter's timestamp is when it was written (retention counts from it).
            (MESSAGE_TIMESTAMP_TYPE.to_string(), "CreateTime".to_string()),
        ]);
        match self.controller.create_topic(topic.to_string(), -1, -1, configs, false).await {
            Ok(_) => tracing::info!(topic, "created a share group's dead-letter queue topic"),
            Err(ControllerError::TopicAlreadyExists(_)) => {}
            Err(e) => return Err(format!("Unable to create DLQ topic {topic}: {e}")),
        }
        let waited = std::time::Instant::now();
        while !self.router.partitions().image().topic(topic).is_some_and(|t| t.partitions.iter().all(|p| p.leader >= 0)) {
            if waited.elapsed() > CREATED_TOPIC_WAIT {
                return Err(format!("DLQ topic {topic} was created but has no leaders yet"));
            }
            glommio::timer::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }

    /// One attempt: the queue's partition for `source_partition`, appended with acks=all.
    /// Err: (whether to try again, why).
    async fn write_once(&self, topic: &str, source_partition: i32, batch: &Bytes) -> Result<(), (bool, String)> {
        let code_error = |code: ErrorCode, what: String| {
            let again = matches!(code, ErrorCode::NOT_LEADER_OR_FOLLOWER | ErrorCode::LEADER_NOT_AVAILABLE | ErrorCode::REQUEST_TIMED_OUT);
            (again, format!("{what}: {code}"))
        };
        let image = self.router.partitions().image();
        let t = image.topic(topic).ok_or_else(|| (false, format!("DLQ topic {topic} does not exist")))?;
        let count = i32::try_from(t.partitions.len()).unwrap_or(i32::MAX).max(1);
        let partition = source_partition.rem_euclid(count);
        let pm = t.partition(partition).ok_or_else(|| (false, format!("DLQ topic {topic} has no partition {partition}")))?;
        if pm.leader < 0 {
            return Err((true, format!("DLQ topic partition {topic}-{partition} has no leader")));
        }
        if pm.leader == self.node_id {
            let op = PartitionOp::Produce { records: batch.clone(), acks: -1, timeout_ms: PRODUCE_TIMEOUT_MS, txn_guard: None };
            return match self.router.call(pm.shard, topic, partition, op).await {
                Ok(_) => Ok(()),
                Err(e) => Err(code_error(ErrorCode::from(&e), format!("{topic}-{partition}"))),
            };
        }
        let broker = image.brokers.get(&pm.leader).filter(|b| !b.fenced).ok_or_else(|| (true, format!("DLQ topic leader {} is not live", pm.leader)))?;
        let request = ProduceRequest::default().with_acks(-1).with_timeout_ms(PRODUCE_TIMEOUT_MS).with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partition_data(vec![PartitionProduceData::default().with_index(partition).with_records(Some(batch.clone()))])]);
        let client_id = format!("shardlog-share-dlq-{}", self.node_id);
        let timeout = Duration::from_millis(PRODUCE_TIMEOUT_MS as u64 + 5_000);
        let resp: ProduceResponse = super::broker_call::call(broker, &self.inter_broker, &client_id, ApiKey::Produce, PRODUCE_VERSION, &request, timeout)
            .await
            .map_err(|e| (true, e))?;
        let code = resp
            .responses
            .iter()
            .flat_map(|t| t.partition_responses.iter())
            .find(|p| p.index == partition)
            .map_or(ErrorCode::UNKNOWN_SERVER_ERROR, |p| ErrorCode(p.error_code));
        if code == ErrorCode::NONE {
            Ok(())
        } else {
            Err(code_error(code, format!("{topic}-{partition}")))
        }
    }
}

impl DeadLetterWriter for BrokerDeadLetterWriter {
    fn prepare<'a>(&'a self, group_id: &'a str, queue: &'a DeadLetterQueue) -> LocalBoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let exists = self.check(&self.router.partitions().image(), group_id, &queue.topic)?;
            if !exists {
                self.create(&queue.topic).await?;
                // Created with the opt-in; checked again as the image now has it.
                self.check(&self.router.partitions().image(), group_id, &queue.topic)?;
            }
            Ok(())
        })
    }

    fn write<'a>(&'a self, queue: &'a DeadLetterQueue, source_partition: i32, batch: Bytes) -> LocalBoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let mut backoff = FIRST_BACKOFF;
            let mut attempt = 1;
            loop {
                match self.write_once(&queue.topic, source_partition, &batch).await {
                    Ok(()) => return Ok(()),
                    Err((true, e)) if attempt < ATTEMPTS => {
                        tracing::debug!(topic = %queue.topic, attempt, error = %e, "dead-letter write failed; retrying");
                        glommio::timer::sleep(backoff).await;
                        backoff = (backoff * 2).min(Duration::from_secs(30));
                        attempt += 1;
                    }
                    Err((true, e)) => return Err(format!("Exhausted {ATTEMPTS} attempts to write to the DLQ topic: {e}")),
                    Err((false, e)) => return Err(e),
                }
            }
        })
    }
}
