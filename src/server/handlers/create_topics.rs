//! CreateTopics through the controller. Replication factor must be -1 or 1 (one node);
//! manual assignments are accepted only when every replica is this node.
use std::collections::BTreeMap;
use std::rc::Rc;

use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreateTopicsRequest};
use kafka_protocol::messages::create_topics_response::{CreatableTopicConfigs, CreatableTopicResult, CreateTopicsResponse};

use super::{code, str_bytes, uuid};
use crate::cluster::topic_config::describe;
use crate::controller::{over_limit, topic_creation_records, validate_topic_name, EXCESSIVE_BATCH};
use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::client_quotas::MutationQuota;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: CreateTopicsRequest, client_id: String) -> Response {
    let mut results = Vec::with_capacity(req.topics.len());
    // controller_mutation_rate: strict from v6, as Kafka.
    let quota = MutationQuota::new(ctx, &meta, &client_id, 6);
    let mut created = false;
    // ACLs: CREATE on the cluster, or on each topic (else TOPIC_AUTHORIZATION_FAILED).
    let access = ctx.access(&meta);
    let create_any = access.allows_cluster(Operation::Create);
    let may_create = |name: &str| create_any || access.allows_topic(Operation::Create, name);
    if over_limit(records_to_write(ctx, &req, may_create)) {
        // Kafka's controller fails the whole request; every topic gets its error.
        let refused = req.topics.iter().map(|t| {
            CreatableTopicResult::default()
                .with_name(t.name.clone())
                .with_num_partitions(-1)
                .with_replication_factor(-1)
                .with_error_code(ErrorCode::POLICY_VIOLATION.code())
                .with_error_message(Some(str_bytes(EXCESSIVE_BATCH)))
        });
        return quota.throttled(meta).respond(&CreateTopicsResponse::default().with_topics(refused.collect()));
    }
    for t in req.topics {
        let name = t.name.0.to_string();
        let mut result = CreatableTopicResult::default().with_name(t.name.clone()).with_num_partitions(-1).with_replication_factor(-1).with_error_message(None);
        if !may_create(&name) {
            result.error_code = ErrorCode::TOPIC_AUTHORIZATION_FAILED.code();
            result.error_message = Some(str_bytes("Authorization failed."));
            results.push(result);
            continue;
        }
        let mut configs = BTreeMap::new();
        let mut bad_config = None;
        for c in &t.configs {
            match &c.value {
                Some(v) => {
                    configs.insert(c.name.to_string(), v.to_string());
                }
                None => bad_config = Some(format!("config {} has a null value", c.name.as_str())),
            }
        }
        let (partitions, rf) = (t.num_partitions, t.replication_factor);
        if !t.assignments.is_empty() && (partitions != -1 || rf != -1) {
            bad_config = Some("num_partitions and replication_factor must be -1 with manual assignments".into());
        }
        if let Some(msg) = bad_config {
            result.error_code = ErrorCode::INVALID_REQUEST.code();
            result.error_message = Some(str_bytes(&msg));
            results.push(result);
            continue;
        }
        let new_partitions = requested_partitions(ctx, &t);
        if !req.validate_only && !quota.admit(new_partitions.max(0) as u32) {
            result.error_code = ErrorCode::THROTTLING_QUOTA_EXCEEDED.code();
            // No message: Kafka 4.4 sends none with this code.
            result.error_message = None;
            results.push(result);
            continue;
        }
        let outcome = if t.assignments.is_empty() {
            ctx.controller.create_topic(name, partitions, rf, configs.clone(), req.validate_only).await
        } else {
            // Kafka orders assignments by partition index; they arrive in any order.
            let mut by_index: Vec<_> = t.assignments.iter().map(|a| (a.partition_index, a.broker_ids.iter().map(|b| b.0).collect::<Vec<_>>())).collect();
            by_index.sort_by_key(|(i, _)| *i);
            if by_index.iter().enumerate().any(|(i, (p, _))| *p != i as i32) {
                result.error_code = ErrorCode::INVALID_REPLICA_ASSIGNMENT.code();
                result.error_message = Some(str_bytes("partitions of a manual assignment must be numbered 0..n without gaps"));
                results.push(result);
                continue;
            }
            let assignments = by_index.into_iter().map(|(_, b)| b).collect();
            ctx.controller.create_topic_assigned(name, assignments, configs.clone(), req.validate_only).await
        };
        match outcome {
            Ok(topic) => {
                created |= !req.validate_only;
                result.topic_id = uuid(&topic.topic_id);
                result.num_partitions = topic.partitions.len() as i32;
                result.replication_factor = topic.partitions.first().map_or(1, |p| p.replicas.len() as i16);
                if meta.version >= 5 {
                    result.configs = Some(
                        describe(&ctx.topic_defaults(), &topic.configs)
                            .into_iter()
                            .map(|e| {
                                CreatableTopicConfigs::default()
                                    .with_name(str_bytes(&e.name))
                                    .with_value(Some(str_bytes(&e.value)))
                                    .with_config_source(if e.is_default { 5 } else { 1 })
                            })
                            .collect(),
                    );
                }
            }
            Err(e) => {
                result.error_code = code(&e);
                result.error_message = Some(str_bytes(&e.to_string()));
            }
        }
        results.push(result);
    }
    if created {
        // Answer only once this shard has the topic, so the client's next Metadata call
        // (possibly on this connection) sees it.
        ctx.catch_up_with_controller().await;
    }
    quota.throttled(meta).respond(&CreateTopicsResponse::default().with_topics(results))
}

/// The metadata records Kafka would write for this request (`controller::user_op_limit`),
/// counting, as Kafka does, only the topics that reach creation: authorized, well named,
/// not existing yet.
fn records_to_write(ctx: &ShardContext, req: &CreateTopicsRequest, may_create: impl Fn(&str) -> bool) -> usize {
    let image = ctx.image();
    req.topics
        .iter()
        .filter(|t| may_create(t.name.as_str()) && validate_topic_name(t.name.as_str()).is_ok() && image.topic(t.name.as_str()).is_none())
        .map(|t| topic_creation_records(requested_partitions(ctx, t).max(1) as usize, t.configs.len()))
        .sum()
}

/// The partitions a topic of the request asks for: its manual assignment's, its count, or
/// the broker's num.partitions for -1.
fn requested_partitions(ctx: &ShardContext, t: &CreatableTopic) -> i32 {
    if !t.assignments.is_empty() {
        t.assignments.len() as i32
    } else if t.num_partitions > 0 {
        t.num_partitions
    } else {
        ctx.config.num_partitions
    }
}
