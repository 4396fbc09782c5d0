//! Produce: each partition's records go to the shard that owns the partition; all
//! partitions proceed concurrently and the response keeps the request's order.
//! acks=0 sends no response at all, as Kafka does. Checked here, in Kafka's order, before
//! the partition validates the records: the topic exists, the codec is allowed for the
//! request version (`ProduceRequest.validateRecords`), and the topic is not internal
//! (`ReplicaManager.appendToLocalLog` with internalTopicsAllowed=false: the group
//! coordinator appends to `__consumer_offsets` through `Partition::append`, never here).
use std::rc::Rc;

use futures::future::join_all;
use kafka_protocol::messages::produce_request::ProduceRequest;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, ProduceResponse, TopicProduceResponse};

use super::{code, str_bytes, topic_name};
use crate::cluster::topic_config::is_internal_topic;
use crate::partition::PartitionError;
use crate::record::check_produce_version;
use crate::protocol::ErrorCode;
use crate::server::dispatch::{RequestMeta, Response};
use crate::cluster::router::{OpOutput, PartitionOp};
use crate::server::shard::ShardContext;

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: ProduceRequest) -> Response {
    let acks = req.acks;
    let image = ctx.image();
    let valid_acks = matches!(acks, -1..=1);
    let mut topics = Vec::with_capacity(req.topic_data.len());
    for topic in req.topic_data {
        let meta_topic = if meta.version >= 13 {
            image.topic_by_id(topic.topic_id.as_bytes())
        } else {
            image.topic(topic.name.0.as_str())
        };
        let unknown = if meta.version >= 13 { ErrorCode::UNKNOWN_TOPIC_ID } else { ErrorCode::UNKNOWN_TOPIC_OR_PARTITION };
        let name = meta_topic.map(|t| t.name.clone()).unwrap_or_else(|| topic.name.0.to_string());
        let futures = topic.partition_data.into_iter().map(|pd| {
            let name = name.clone();
            async move {
                let resp = PartitionProduceResponse::default().with_index(pd.index).with_base_offset(-1).with_log_append_time_ms(-1).with_log_start_offset(-1);
                if !valid_acks {
                    return resp.with_error_code(ErrorCode::INVALID_REQUIRED_ACKS.code());
                }
                let Some(topic) = meta_topic.filter(|t| t.partition(pd.index).is_some()) else {
                    return resp.with_error_code(unknown.code());
                };
                let Some(records) = pd.records else {
                    return resp.with_error_code(ErrorCode::CORRUPT_MESSAGE.code());
                };
                if let Err(e) = check_produce_version(&records, meta.version) {
                    return resp.with_error_code(code(&e)).with_error_message(Some(str_bytes(&e.to_string())));
                }
                if is_internal_topic(&name) {
                    let message = format!("Cannot append to internal topic {name}");
                    return resp.with_error_code(ErrorCode::INVALID_TOPIC_EXCEPTION.code()).with_error_message(Some(str_bytes(&message)));
                }
                match ctx.router.route(topic, pd.index, PartitionOp::Produce { records, acks }).await {
                    Ok(OpOutput::Produce(out)) => resp
                        .with_base_offset(out.base_offset)
                        .with_log_append_time_ms(out.log_append_time_ms)
                        .with_log_start_offset(out.log_start_offset),
                    Ok(_) => resp.with_error_code(ErrorCode::UNKNOWN_SERVER_ERROR.code()),
                    Err(e) => {
                        if !matches!(e, PartitionError::Sequence(_)) {
                            tracing::debug!(topic = %name, partition = pd.index, error = %e, "produce refused");
                        }
                        resp.with_error_code(code(&e)).with_error_message(Some(str_bytes(&e.to_string())))
                    }
                }
            }
        });
        let partitions = join_all(futures).await;
        let mut t = TopicProduceResponse::default().with_partition_responses(partitions);
        if meta.version >= 13 {
            t.topic_id = topic.topic_id;
        } else {
            t.name = topic_name(&name);
        }
        topics.push(t);
    }
    if acks == 0 {
        return Response::NoResponse;
    }
    meta.respond(&ProduceResponse::default().with_responses(topics))
}
