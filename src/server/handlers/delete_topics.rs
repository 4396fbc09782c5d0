//! DeleteTopics by name (v1-5) or by name or topic id (v6).
use std::rc::Rc;

use kafka_protocol::messages::delete_topics_request::DeleteTopicsRequest;
use kafka_protocol::messages::delete_topics_response::{DeletableTopicResult, DeleteTopicsResponse};

use super::{code, str_bytes, topic_name, uuid};
use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::client_quotas::MutationQuota;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: DeleteTopicsRequest, client_id: String) -> Response {
    let image = ctx.image();
    // controller_mutation_rate: strict from v5, as Kafka.
    let quota = MutationQuota::new(ctx, &meta, &client_id, 5);
    let targets: Vec<(Option<String>, [u8; 16])> = if meta.version >= 6 {
        req.topics.iter().map(|t| (t.name.as_ref().map(|n| n.0.to_string()), *t.topic_id.as_bytes())).collect()
    } else {
        req.topic_names.iter().map(|n| (Some(n.0.to_string()), [0; 16])).collect()
    };
    let mut results = Vec::with_capacity(targets.len());
    let mut deleted = false;
    // ACLs: DELETE on each topic, else TOPIC_AUTHORIZATION_FAILED (existing or not).
    let access = ctx.access(&meta);
    for (name, id) in targets {
        let name = name.or_else(|| image.topic_by_id(&id).map(|t| t.name.clone()));
        let mut r = DeletableTopicResult::default().with_name(name.as_deref().map(topic_name)).with_topic_id(uuid(&id));
        match name {
            None => r.error_code = ErrorCode::UNKNOWN_TOPIC_ID.code(),
            Some(n) if !access.allows_topic(Operation::Delete, &n) => {
                r.error_code = ErrorCode::TOPIC_AUTHORIZATION_FAILED.code();
                r.error_message = Some(str_bytes("Authorization failed."));
            }
            Some(n) if !quota.admit(image.topic(&n).map_or(0, |t| t.partitions.len() as u32)) => {
                r.error_code = ErrorCode::THROTTLING_QUOTA_EXCEEDED.code();
                // No message: Kafka 4.4 sends none with this code.
                r.error_message = None;
            }
            Some(n) => match ctx.controller.delete_topic(n).await {
                Ok(tid) => {
                    deleted = true;
                    r.topic_id = uuid(&tid);
                }
                Err(e) => {
                    r.error_code = code(&e);
                    r.error_message = Some(str_bytes(&e.to_string()));
                }
            },
        }
        results.push(r);
    }
    if deleted {
        ctx.catch_up_with_controller().await;
    }
    quota.throttled(meta).respond(&DeleteTopicsResponse::default().with_responses(results))
}
