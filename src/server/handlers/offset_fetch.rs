//! OffsetFetch 1-10: one group per request up to v7, several (`groups`) from v8, each
//! routed to its coordinating shard. A null topic list (v2+) asks for every committed
//! partition. v10 names topics by id (`group_topic_ids.rs`); an all-topics answer leaves
//! out topics deleted since their offsets were committed (they have no id to name them).
use std::rc::Rc;

use futures::future::join_all;
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions, OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{GroupId, OffsetFetchRequest, OffsetFetchResponse};

use super::group_topic_ids::{id_of, names_by_id};
use super::{str_bytes, topic_name};
use crate::group::consumer::ConsumerOp;
use crate::group::ops::{route, GroupOp, GroupReply, PartitionOffset};
use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::authorization::Access;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

/// Groups one v8+ request may name.
const MAX_GROUPS: usize = 10_000;

type Topics = Option<Vec<(String, Vec<i32>)>>;

/// (member id, member epoch) an OffsetFetch v9 carries for KIP-848 groups.
type Member = Option<(String, i32)>;

/// One group's committed offsets, as `access` may see them (Kafka's KafkaApis): DESCRIBE
/// on the group (else GROUP_AUTHORIZATION_FAILED), and on each topic (a named one is
/// TOPIC_AUTHORIZATION_FAILED, an all-topics answer leaves it out).
async fn fetch_one(
    ctx: &Rc<ShardContext>,
    access: &Access<'_>,
    group_id: String,
    topics: Topics,
    member: Member,
    require_stable: bool,
) -> (ErrorCode, Vec<(String, Vec<PartitionOffset>)>) {
    if !access.allows_group(Operation::Describe, &group_id) {
        return (ErrorCode::GROUP_AUTHORIZATION_FAILED, Vec::new());
    }
    let visible = |t: &str| access.allows_topic(Operation::Describe, t);
    let (topics, denied): (Topics, Vec<(String, Vec<i32>)>) = match topics {
        None => (None, Vec::new()),
        Some(ts) => {
            let (allowed, denied) = ts.into_iter().partition(|(t, _)| visible(t));
            (Some(allowed), denied)
        }
    };
    let (e, mut found) = fetch_stable(ctx, group_id, topics, member, require_stable).await;
    found.retain(|(t, _)| visible(t));
    let refused =
        |partition| PartitionOffset { partition, offset: -1, leader_epoch: -1, metadata: Some(String::new()), error: ErrorCode::TOPIC_AUTHORIZATION_FAILED };
    found.extend(denied.into_iter().map(|(t, ps)| (t, ps.into_iter().map(refused).collect())));
    (e, found)
}

async fn fetch_stable(
    ctx: &Rc<ShardContext>,
    group_id: String,
    topics: Topics,
    member: Member,
    require_stable: bool,
) -> (ErrorCode, Vec<(String, Vec<PartitionOffset>)>) {
    let (e, mut found) = fetch_committed(ctx, group_id.clone(), topics.clone(), member).await;
    // v7+ require_stable (KIP-447): while a transaction holds offsets of these partitions,
    // UNSTABLE_OFFSET_COMMIT (retriable), so a consumer starts from committed ones only.
    // Judged for the request's partitions together: one pending offset marks them all.
    if require_stable && e == ErrorCode::NONE {
        let pending =
            matches!(route(&ctx.router, &group_id, GroupOp::HasPendingOffsets { group_id: group_id.clone(), topics }).await, Ok(GroupReply::Pending(true)));
        if pending {
            for p in found.iter_mut().flat_map(|(_, ps)| ps.iter_mut()) {
                p.offset = -1;
                p.error = ErrorCode::UNSTABLE_OFFSET_COMMIT;
            }
        }
    }
    (e, found)
}

async fn fetch_committed(ctx: &Rc<ShardContext>, group_id: String, topics: Topics, member: Member) -> (ErrorCode, Vec<(String, Vec<PartitionOffset>)>) {
    let asked = topics.clone();
    let op = match member {
        // Validated against the member's epoch on the coordinator (group/consumer/).
        Some((member_id, member_epoch)) => {
            GroupOp::Consumer(ConsumerOp::FetchOffsets { group_id: group_id.clone(), member_id: Some(member_id), member_epoch, topics })
        }
        None => GroupOp::FetchOffsets { group_id: group_id.clone(), topics },
    };
    match route(&ctx.router, &group_id, op).await {
        Ok(GroupReply::Offsets(e, t)) => (e, t),
        Ok(_) => (ErrorCode::UNKNOWN_SERVER_ERROR, Vec::new()),
        Err(e) => {
            // Group-level error; listed partitions carry it too (as Kafka's v1 did).
            let t = asked
                .unwrap_or_default()
                .into_iter()
                .map(|(t, ps)| {
                    (
                        t,
                        ps.into_iter()
                            .map(|partition| PartitionOffset { partition, offset: -1, leader_epoch: -1, metadata: Some(String::new()), error: e })
                            .collect(),
                    )
                })
                .collect();
            (e, t)
        }
    }
}

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: OffsetFetchRequest) -> Response {
    let v = meta.version;
    let access = &ctx.access(&meta);
    if v >= 8 {
        if req.groups.len() > MAX_GROUPS {
            return meta.respond(&OffsetFetchResponse::default().with_error_code(ErrorCode::INVALID_REQUEST.code()));
        }
        let image = ctx.image();
        let names =
            if v >= 10 { names_by_id(&image, req.groups.iter().flat_map(|g| g.topics.iter().flatten().map(|t| t.topic_id))) } else { Default::default() };
        let image = &image;
        let names = &names;
        let futures = req.groups.into_iter().map(|g| {
            // v10: ids the image does not know are answered UNKNOWN_TOPIC_ID.
            let mut unknown_ids = Vec::new();
            let topics: Topics = g.topics.map(|ts| {
                ts.into_iter()
                    .filter_map(|t| match (v >= 10).then(|| names.get(&t.topic_id)) {
                        None => Some((t.name.0.to_string(), t.partition_indexes)),
                        Some(Some(name)) => Some((name.0.to_string(), t.partition_indexes)),
                        Some(None) => {
                            unknown_ids.push((t.topic_id, t.partition_indexes));
                            None
                        }
                    })
                    .collect()
            });
            let group_id = g.group_id.clone();
            let member: Member = g.member_id.as_ref().map(|m| (m.to_string(), g.member_epoch));
            async move {
                let (e, topics) = fetch_one(ctx, access, group_id.0.to_string(), topics, member, req.require_stable).await;
                let partition = |p: PartitionOffset| {
                    OffsetFetchResponsePartitions::default()
                        .with_partition_index(p.partition)
                        .with_committed_offset(p.offset)
                        .with_committed_leader_epoch(p.leader_epoch)
                        .with_metadata(p.metadata.as_deref().map(str_bytes))
                        .with_error_code(p.error.code())
                };
                let mut topics: Vec<OffsetFetchResponseTopics> = topics
                    .into_iter()
                    .filter_map(|(t, ps)| {
                        let topic_id = if v >= 10 { id_of(image, &t) } else { uuid::Uuid::nil() };
                        (v < 10 || !topic_id.is_nil()).then(|| {
                            OffsetFetchResponseTopics::default()
                                .with_name(topic_name(&t))
                                .with_topic_id(topic_id)
                                .with_partitions(ps.into_iter().map(partition).collect())
                        })
                    })
                    .collect();
                topics.extend(unknown_ids.into_iter().map(|(id, ps)| {
                    let unknown =
                        |p| PartitionOffset { partition: p, offset: -1, leader_epoch: -1, metadata: Some(String::new()), error: ErrorCode::UNKNOWN_TOPIC_ID };
                    OffsetFetchResponseTopics::default().with_topic_id(id).with_partitions(ps.into_iter().map(unknown).map(partition).collect())
                }));
                OffsetFetchResponseGroup::default().with_group_id(GroupId(group_id.0)).with_error_code(e.code()).with_topics(topics)
            }
        });
        let groups = join_all(futures).await;
        return meta.respond(&OffsetFetchResponse::default().with_groups(groups));
    }
    let topics: Topics = req.topics.map(|ts| ts.into_iter().map(|t| (t.name.0.to_string(), t.partition_indexes)).collect());
    let (e, topics) = fetch_one(ctx, access, req.group_id.0.to_string(), topics, None, v >= 7 && req.require_stable).await;
    let topics = topics
        .into_iter()
        .map(|(t, ps)| {
            OffsetFetchResponseTopic::default().with_name(topic_name(&t)).with_partitions(
                ps.into_iter()
                    .map(|p| {
                        let r = OffsetFetchResponsePartition::default()
                            .with_partition_index(p.partition)
                            .with_committed_offset(p.offset)
                            .with_metadata(p.metadata.as_deref().map(str_bytes))
                            .with_error_code(p.error.code());
                        // committed_leader_epoch exists from v5.
                        if v >= 5 {
                            r.with_committed_leader_epoch(p.leader_epoch)
                        } else {
                            r
                        }
                    })
                    .collect(),
            )
        })
        .collect();
    let resp = OffsetFetchResponse::default().with_topics(topics);
    // The top-level error_code exists from v2.
    let resp = if v >= 2 { resp.with_error_code(e.code()) } else { resp };
    meta.respond(&resp)
}
