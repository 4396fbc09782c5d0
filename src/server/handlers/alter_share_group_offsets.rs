//! AlterShareGroupOffsets 0 (KIP-932), as Kafka 4.4 answers it: share.version below 1
//! UNSUPPORTED_VERSION, no READ on the group GROUP_AUTHORIZATION_FAILED (top level); a
//! topic without READ TOPIC_AUTHORIZATION_FAILED, an unknown one UNKNOWN_TOPIC_OR_PARTITION
//! (per partition); the rest is the group coordinator's (`group/share/offsets_admin.rs`:
//! the group must be empty, the partitions are initialized again at the given offsets).
use std::rc::Rc;

use kafka_protocol::messages::alter_share_group_offsets_response::{AlterShareGroupOffsetsResponsePartition, AlterShareGroupOffsetsResponseTopic};
use kafka_protocol::messages::{AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse};

use super::route_group;
use crate::group::share::coordinator::{ShareOp, ShareReply};
use crate::group::{GroupOp, GroupReply};
use crate::protocol::strings::str_bytes;
use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

/// Topics and partitions one request may name.
const MAX_PARTITIONS: usize = 100_000;

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: AlterShareGroupOffsetsRequest) -> Response {
    let failed = |e: ErrorCode| meta.respond(&AlterShareGroupOffsetsResponse::default().with_error_code(e.code()));
    if !ctx.image().features.share_groups_enabled() {
        return failed(ErrorCode::UNSUPPORTED_VERSION);
    }
    let group_id = req.group_id.0.to_string();
    let access = ctx.access(&meta);
    if !access.allows_group(Operation::Read, &group_id) {
        return failed(ErrorCode::GROUP_AUTHORIZATION_FAILED);
    }
    let image = ctx.image();
    let mut refused = Vec::new();
    let mut topics = Vec::new();
    let mut budget = MAX_PARTITIONS;
    for t in req.topics {
        let name = t.topic_name.0.to_string();
        let take = t.partitions.len().min(budget);
        budget -= take;
        let error = if !access.allows_topic(Operation::Read, &name) {
            Some((ErrorCode::TOPIC_AUTHORIZATION_FAILED, "Not authorized to access topics: [Topic authorization failed.]"))
        } else if image.topic(&name).is_none() {
            Some((ErrorCode::UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."))
        } else {
            None
        };
        match error {
            Some((e, message)) => refused.push(
                AlterShareGroupOffsetsResponseTopic::default().with_topic_name(t.topic_name.clone()).with_partitions(
                    t.partitions[..take]
                        .iter()
                        .map(|p| {
                            AlterShareGroupOffsetsResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(e.code())
                                .with_error_message(Some(str_bytes(message)))
                        })
                        .collect(),
                ),
            ),
            None => topics.push((name, t.partitions[..take].iter().map(|p| (p.partition_index, p.start_offset)).collect())),
        }
    }
    let op = GroupOp::Share(ShareOp::AlterOffsets { group_id: group_id.clone(), topics });
    let resp = match route_group(ctx, &meta, Operation::Read, &group_id, op).await {
        Ok(GroupReply::Share(r)) => match *r {
            ShareReply::AlteredOffsets(mut resp) => {
                if resp.error_code == 0 {
                    resp.responses.extend(refused);
                }
                resp
            }
            _ => AlterShareGroupOffsetsResponse::default().with_error_code(ErrorCode::UNKNOWN_SERVER_ERROR.code()),
        },
        Ok(_) => AlterShareGroupOffsetsResponse::default().with_error_code(ErrorCode::UNKNOWN_SERVER_ERROR.code()),
        Err(e) => AlterShareGroupOffsetsResponse::default().with_error_code(e.code()),
    };
    meta.respond(&resp)
}
