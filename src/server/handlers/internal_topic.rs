//! Creating an internal coordinator topic the first time a key of it is looked up, as
//! Kafka does for `__transaction_state` and `__share_group_state`: the lookup answers
//! COORDINATOR_NOT_AVAILABLE meanwhile, which clients (and brokers) retry.
use std::collections::BTreeMap;
use std::rc::Rc;

use crate::server::shard::ShardContext;

/// An internal topic's shape, from the broker's settings.
pub struct InternalTopic {
    pub name: &'static str,
    pub partitions: i32,
    /// Capped by the live brokers when it is created.
    pub replication_factor: i16,
    /// Capped by the replicas it gets (Kafka would refuse every write on a single broker
    /// with the default 2).
    pub min_isr: i32,
    pub cleanup_policy: &'static str,
    pub segment_bytes: i32,
}

/// Starts creating `topic` if it does not exist (once per shard at a time).
pub fn ensure_internal_topic(ctx: &Rc<ShardContext>, topic: InternalTopic) {
    if ctx.controller.image().topic(topic.name).is_some() || !ctx.internal_topics_creating.borrow_mut().insert(topic.name) {
        return;
    }
    let ctx = ctx.clone();
    glommio::spawn_local(async move {
        let live = ctx.controller.image().live_brokers().count().max(1);
        let replication_factor = topic.replication_factor.min(i16::try_from(live).unwrap_or(i16::MAX));
        let min_isr = topic.min_isr.min(i32::from(replication_factor)).max(1);
        let configs = BTreeMap::from([
            ("cleanup.policy".to_string(), topic.cleanup_policy.to_string()),
            ("segment.bytes".to_string(), topic.segment_bytes.to_string()),
            ("min.insync.replicas".to_string(), min_isr.to_string()),
        ]);
        match ctx.controller.create_topic(topic.name.to_string(), topic.partitions, replication_factor, configs, false).await {
            Ok(_) => tracing::info!(topic = topic.name, partitions = topic.partitions, replication_factor, "created internal topic"),
            Err(crate::controller::ControllerError::TopicAlreadyExists(_)) => {}
            Err(e) => tracing::warn!(topic = topic.name, error = %e, "cannot create internal topic yet"),
        }
        ctx.internal_topics_creating.borrow_mut().remove(topic.name);
    })
    .detach();
}
