//! ListOffsets: earliest (-2), latest (-1: the high watermark; the LSO equals it as long
//! as there are no transactions), max timestamp (-3), or the first offset whose record
//! timestamp is >= the given timestamp.
use std::rc::Rc;

use futures::future::join_all;
use kafka_protocol::messages::list_offsets_request::ListOffsetsRequest;
use kafka_protocol::messages::list_offsets_response::{ListOffsetsPartitionResponse, ListOffsetsResponse, ListOffsetsTopicResponse};

use super::code;
use crate::protocol::ErrorCode;
use crate::server::dispatch::{RequestMeta, Response};
use crate::cluster::router::{OpOutput, PartitionOp};
use crate::server::shard::ShardContext;

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: ListOffsetsRequest) -> Response {
    let image = ctx.image();
    let version = meta.version;
    let mut topics = Vec::with_capacity(req.topics.len());
    for topic in req.topics {
        let name = topic.name.0.to_string();
        let t = image.topic(&name);
        let futures = topic.partitions.into_iter().map(|p| {
            let owner = t.and_then(|t| t.partition(p.partition_index)).map(|x| (x.shard, x.leader_epoch));
            let name = name.clone();
            async move {
                let resp = ListOffsetsPartitionResponse::default().with_partition_index(p.partition_index).with_timestamp(-1).with_offset(-1);
                let Some((shard, epoch)) = owner else {
                    return resp.with_error_code(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code());
                };
                if p.current_leader_epoch >= 0 && p.current_leader_epoch > epoch {
                    return resp.with_error_code(ErrorCode::UNKNOWN_LEADER_EPOCH.code());
                }
                if p.current_leader_epoch >= 0 && p.current_leader_epoch < epoch {
                    return resp.with_error_code(ErrorCode::FENCED_LEADER_EPOCH.code());
                }
                match ctx.router.call(shard, &name, p.partition_index, PartitionOp::ListOffsets { timestamp: p.timestamp }).await {
                    Ok(OpOutput::Offset(offset, ts)) => {
                        let resp = resp.with_offset(offset).with_timestamp(ts);
                        // leader_epoch exists from v4 on.
                        if version >= 4 { resp.with_leader_epoch(epoch) } else { resp }
                    }
                    Ok(_) => resp.with_error_code(ErrorCode::UNKNOWN_SERVER_ERROR.code()),
                    Err(e) => resp.with_error_code(code(&e)),
                }
            }
        });
        let partitions = join_all(futures).await;
        topics.push(ListOffsetsTopicResponse::default().with_name(topic.name).with_partitions(partitions));
    }
    meta.respond(&ListOffsetsResponse::default().with_topics(topics))
}
