//! DeleteRecords: moves each partition's log start offset (offset -1 = high watermark).
use std::rc::Rc;

use futures::future::join_all;
use kafka_protocol::messages::delete_records_request::DeleteRecordsRequest;
use kafka_protocol::messages::delete_records_response::{DeleteRecordsPartitionResult, DeleteRecordsResponse, DeleteRecordsTopicResult};

use super::code;
use crate::protocol::ErrorCode;
use crate::server::dispatch::{RequestMeta, Response};
use crate::cluster::router::{OpOutput, PartitionOp};
use crate::server::shard::ShardContext;

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: DeleteRecordsRequest) -> Response {
    let image = ctx.image();
    let mut topics = Vec::with_capacity(req.topics.len());
    for topic in req.topics {
        let name = topic.name.0.to_string();
        let t = image.topic(&name);
        let futures = topic.partitions.into_iter().map(|p| {
            async move {
                let resp = DeleteRecordsPartitionResult::default().with_partition_index(p.partition_index).with_low_watermark(-1);
                let Some(t) = t else { return resp.with_error_code(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code()) };
                match ctx.router.route(t, p.partition_index, PartitionOp::DeleteRecords { offset: p.offset }).await {
                    Ok(OpOutput::LowWatermark(lw)) => resp.with_low_watermark(lw),
                    Ok(_) => resp.with_error_code(ErrorCode::UNKNOWN_SERVER_ERROR.code()),
                    Err(e) => resp.with_error_code(code(&e)),
                }
            }
        });
        let partitions = join_all(futures).await;
        topics.push(DeleteRecordsTopicResult::default().with_name(topic.name).with_partitions(partitions));
    }
    meta.respond(&DeleteRecordsResponse::default().with_topics(topics))
}
