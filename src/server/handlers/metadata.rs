//! Metadata: every live broker (with its rack) and each partition's leader, replicas,
//! ISR and offline replicas (`cluster_view.rs`); the controller id is this broker, as
//! Kafka's brokers answer since KIP-919 (any live broker forwards to the quorum). Unknown topics
//! are created when the client allows it and `auto_create_topics_enable` is on.
//! Authorized operations (v8+), when asked: what the ACLs allow the principal (every
//! operation without an authorizer), as Kafka — per topic for every topic answered (errors
//! too), for the cluster only in v8-10 (v11 dropped the field; Kafka ignores the flag from
//! then on). With an authorizer, topics the principal may not DESCRIBE are left out of an
//! all-topics answer and are TOPIC_AUTHORIZATION_FAILED when named (existing or not).
use std::rc::Rc;

use kafka_protocol::messages::metadata_request::MetadataRequest;
use kafka_protocol::messages::metadata_response::{MetadataResponse, MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic};
use kafka_protocol::messages::BrokerId;

use super::cluster_view::{live_brokers, partition_view};
use super::{code, str_bytes, this_node, topic_name, uuid};
use crate::cluster::image::TopicMeta;
use crate::protocol::{acl_operations, ErrorCode};
use crate::security::acl::{Operation, ResourceType, CLUSTER_NAME};
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: MetadataRequest) -> Response {
    let (node, _, _) = this_node(ctx, meta.listener);
    // v0: an empty list means all topics; v1+: null means all.
    let wanted: Option<Vec<(Option<String>, [u8; 16])>> = match &req.topics {
        None => None,
        Some(t) if t.is_empty() && meta.version == 0 => None,
        // A topic named by id (v10+) is looked up by id, its name ignored, as Kafka does: the
        // Java consumer sends ids with an empty name for a regex subscription's topics.
        Some(t) => Some(
            t.iter()
                .map(|t| {
                    let by_id = !t.topic_id.is_nil();
                    (t.name.as_ref().filter(|_| !by_id).map(|n| n.0.to_string()), *t.topic_id.as_bytes())
                })
                .collect(),
        ),
    };
    let allow_create = (meta.version < 4 || req.allow_auto_topic_creation) && ctx.config.auto_create_topics_enable;
    let access = ctx.access(&meta);
    let mut created_any = false;
    let mut errors: Vec<(String, i16)> = Vec::new();
    if let Some(w) = &wanted {
        let image = ctx.image();
        for (name, _) in w {
            let Some(name) = name else { continue };
            if image.topic(name).is_some() || !allow_create || !access.allows_topic(Operation::Describe, name) {
                continue;
            }
            // Auto-creation needs CREATE on the cluster or the topic (Kafka's KafkaApis).
            if !access.allows_cluster(Operation::Create) && !access.allows_topic(Operation::Create, name) {
                errors.push((name.clone(), ErrorCode::TOPIC_AUTHORIZATION_FAILED.code()));
                continue;
            }
            match ctx.controller.create_topic(name.clone(), -1, -1, Default::default(), false).await {
                Ok(_) => created_any = true,
                Err(crate::controller::ControllerError::TopicAlreadyExists(_)) => created_any = true,
                Err(e) => errors.push((name.clone(), code(&e))),
            }
        }
    }
    if created_any {
        ctx.catch_up_with_controller().await;
    }
    // A topic created a moment ago (through another connection, so on another shard)
    // may not be applied here yet: catch up with the controller before calling it unknown.
    let image = match &wanted {
        // All topics: a shard still applying earlier changes (opening a new topic's
        // partitions) would list fewer topics than the controller committed, even one
        // this client just created on another connection.
        None => {
            ctx.catch_up_for_topics(None).await;
            ctx.image()
        }
        Some(w) => {
            // Named topics this shard has applied with fewer partitions than committed.
            let named: Vec<&str> = w.iter().filter_map(|(name, _)| name.as_deref()).collect();
            ctx.catch_up_for_topics(Some(&named)).await;
            ctx.image_for_request(|image| {
                w.iter().filter(|(name, id)| name.as_ref().map_or_else(|| image.topic_by_id(id).is_none(), |n| image.topic(n).is_none())).count()
            })
            .await
        }
    };
    // The codec encodes neither field below v8.
    let topic_ops = |name: &str| {
        let ops = || access.authorized_operations(ResourceType::Topic, name, acl_operations::TOPIC);
        if req.include_topic_authorized_operations {
            ops()
        } else {
            acl_operations::NOT_REQUESTED
        }
    };
    let cluster_ops = if meta.version <= 10 && req.include_cluster_authorized_operations {
        access.authorized_operations(ResourceType::Cluster, CLUSTER_NAME, acl_operations::CLUSTER)
    } else {
        acl_operations::NOT_REQUESTED
    };
    let describe = |t: &TopicMeta| {
        MetadataResponseTopic::default()
            .with_name(Some(topic_name(&t.name)))
            .with_topic_id(uuid(&t.topic_id))
            .with_is_internal(crate::cluster::topic_config::is_internal_topic(&t.name))
            .with_topic_authorized_operations(topic_ops(&t.name))
            .with_partitions(
                t.partitions
                    .iter()
                    .map(|p| {
                        let v = partition_view(&image, p);
                        MetadataResponsePartition::default()
                            .with_error_code(v.error)
                            .with_partition_index(p.partition)
                            .with_leader_id(v.leader)
                            .with_leader_epoch(p.leader_epoch)
                            .with_replica_nodes(v.replicas)
                            .with_isr_nodes(v.isr)
                            .with_offline_replicas(v.offline)
                    })
                    .collect(),
            )
    };
    // All topics: those the principal may not describe are left out; named ones are
    // TOPIC_AUTHORIZATION_FAILED whether they exist or not (nothing tells them apart).
    let refused = |name: Option<&str>, id: &[u8; 16]| {
        MetadataResponseTopic::default()
            .with_error_code(ErrorCode::TOPIC_AUTHORIZATION_FAILED.code())
            .with_name(name.map(topic_name))
            .with_topic_id(uuid(id))
            .with_topic_authorized_operations(topic_ops(name.unwrap_or("")))
    };
    let topics: Vec<MetadataResponseTopic> = match wanted {
        None => image.topics.values().filter(|t| access.allows_topic(Operation::Describe, &t.name)).map(describe).collect(),
        Some(w) => w
            .iter()
            .map(|(name, id)| {
                let found = match name {
                    Some(n) => image.topic(n),
                    None => image.topic_by_id(id),
                };
                let denied = |n: &str| !access.allows_topic(Operation::Describe, n);
                match found {
                    Some(t) if denied(&t.name) => refused(name.as_deref(), id),
                    None if name.as_deref().is_some_and(denied) => refused(name.as_deref(), id),
                    Some(t) => describe(t),
                    None => {
                        let err = errors.iter().find(|(n, _)| Some(n) == name.as_ref()).map(|(_, c)| *c).unwrap_or(if name.is_some() {
                            ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code()
                        } else {
                            ErrorCode::UNKNOWN_TOPIC_ID.code()
                        });
                        MetadataResponseTopic::default()
                            .with_error_code(err)
                            .with_name(name.as_deref().map(topic_name))
                            .with_topic_id(uuid(id))
                            .with_topic_authorized_operations(topic_ops(name.as_deref().unwrap_or("")))
                    }
                }
            })
            .collect(),
    };
    let resp = MetadataResponse::default()
        .with_brokers(
            live_brokers(ctx, &image, meta.listener)
                .into_iter()
                .map(|b| {
                    MetadataResponseBroker::default()
                        .with_node_id(BrokerId(b.id))
                        .with_host(str_bytes(&b.host))
                        .with_port(b.port)
                        .with_rack(b.rack.as_deref().map(str_bytes))
                })
                .collect(),
        )
        .with_cluster_id(Some(str_bytes(&image.cluster_id)))
        .with_controller_id(BrokerId(node))
        .with_cluster_authorized_operations(cluster_ops)
        .with_topics(topics);
    meta.respond(&resp)
}
