//! CreatePartitions: grow a topic to `count` partitions (never shrink), placed by the
//! controller or on the brokers an explicit assignment names.
use std::rc::Rc;

use kafka_protocol::messages::create_partitions_request::CreatePartitionsRequest;
use kafka_protocol::messages::create_partitions_response::{CreatePartitionsResponse, CreatePartitionsTopicResult};

use super::{code, str_bytes};
use crate::controller::{over_limit, EXCESSIVE_BATCH};
use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::client_quotas::MutationQuota;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: CreatePartitionsRequest, client_id: String) -> Response {
    let mut results = Vec::with_capacity(req.topics.len());
    // controller_mutation_rate: strict from v3, as Kafka.
    let quota = MutationQuota::new(ctx, &meta, &client_id, 3);
    let image = ctx.image();
    let mut changed = false;
    // ACLs: ALTER on each topic, else TOPIC_AUTHORIZATION_FAILED.
    let access = ctx.access(&meta);
    // A PartitionRecord per new partition, over the topics Kafka's controller is asked to
    // grow (authorized, existing); over Kafka's bound the whole request is refused.
    let new_partitions: usize = req
        .topics
        .iter()
        .filter(|t| access.allows_topic(Operation::Alter, t.name.as_str()))
        .filter_map(|t| image.topic(t.name.as_str()).map(|x| (t.count.max(0) as usize).saturating_sub(x.partitions.len())))
        .sum();
    if over_limit(new_partitions) {
        let refused = req.topics.iter().map(|t| {
            CreatePartitionsTopicResult::default()
                .with_name(t.name.clone())
                .with_error_code(ErrorCode::POLICY_VIOLATION.code())
                .with_error_message(Some(str_bytes(EXCESSIVE_BATCH)))
        });
        return quota.throttled(meta).respond(&CreatePartitionsResponse::default().with_results(refused.collect()));
    }
    for t in req.topics {
        let mut r = CreatePartitionsTopicResult::default().with_name(t.name.clone());
        if !access.allows_topic(Operation::Alter, t.name.as_str()) {
            r.error_code = ErrorCode::TOPIC_AUTHORIZATION_FAILED.code();
            r.error_message = Some(str_bytes("Authorization failed."));
            results.push(r);
            continue;
        }
        let current = image.topic(t.name.as_str()).map_or(0, |x| x.partitions.len() as i32);
        if !req.validate_only && t.count > current && !quota.admit((t.count - current) as u32) {
            r.error_code = ErrorCode::THROTTLING_QUOTA_EXCEEDED.code();
            // No message: Kafka 4.4 sends none with this code.
            r.error_message = None;
            results.push(r);
            continue;
        }
        // Kafka: a null assignment lets the controller place the new partitions.
        let assignments: Vec<Vec<i32>> = t.assignments.iter().flatten().map(|a| a.broker_ids.iter().map(|b| b.0).collect()).collect();
        match ctx.controller.create_partitions(t.name.0.to_string(), t.count, assignments, req.validate_only).await {
            Ok(()) => changed |= !req.validate_only,
            Err(e) => {
                r.error_code = code(&e);
                r.error_message = Some(str_bytes(&e.to_string()));
            }
        }
        results.push(r);
    }
    if changed {
        ctx.catch_up_with_controller().await;
    }
    quota.throttled(meta).respond(&CreatePartitionsResponse::default().with_results(results))
}
