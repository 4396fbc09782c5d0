//! StreamsGroupDescribe of one group, as Kafka 4.4 answers it (its StreamsGroup
//! .asDescribedGroup): state and epochs, the topology (configured against the metadata
//! when it is ready, else as stored), and every member with its current and target tasks.
use kafka_protocol::messages::streams_group_describe_response::{
    Assignment, DescribedGroup, Endpoint, KeyValue, Member, Subtopology, TaskIds, TaskOffset, TopicInfo, Topology,
};
use kafka_protocol::messages::{GroupId, TopicName};

use super::configure::{configure, ConfiguredInternalTopic};
use super::group::StreamsGroup;
use super::tasks::{TaskSet, TasksTuple};
use crate::group::state::Group;
use crate::protocol::acl_operations::{self, NOT_REQUESTED as OPERATIONS_NOT_REQUESTED};
use crate::protocol::strings::str_bytes;
use crate::protocol::ErrorCode;

/// Kafka's TopologyDescriptionStatus NOT_STORED: asked for, but this broker (as a Kafka
/// 4.4 broker without the topology description plugin) keeps none.
const TOPOLOGY_DESCRIPTION_NOT_STORED: i8 = 1;

fn task_ids(set: &TaskSet) -> Vec<TaskIds> {
    set.iter()
        .filter(|(_, ps)| !ps.is_empty())
        .map(|(s, ps)| TaskIds::default().with_subtopology_id(str_bytes(s)).with_partitions(ps.iter().copied().collect()))
        .collect()
}

fn assignment(t: &TasksTuple) -> Assignment {
    Assignment::default().with_active_tasks(task_ids(&t.active)).with_standby_tasks(task_ids(&t.standby)).with_warmup_tasks(task_ids(&t.warmup))
}

fn kvs(items: impl IntoIterator<Item = (String, String)>) -> Vec<KeyValue> {
    items.into_iter().map(|(k, v)| KeyValue::default().with_key(str_bytes(&k)).with_value(str_bytes(&v))).collect()
}

fn configured_topic(t: &ConfiguredInternalTopic) -> TopicInfo {
    TopicInfo::default()
        .with_name(TopicName(str_bytes(&t.name)))
        .with_partitions(t.number_of_partitions)
        .with_replication_factor(t.described_replication_factor())
        .with_topic_configs(kvs(t.topic_configs.clone()))
}

fn topology(s: &StreamsGroup, partitions_of: &dyn Fn(&str) -> Option<i32>) -> Option<Topology> {
    let t = s.topology.as_ref()?;
    let configured = configure(t, partitions_of).ok().filter(|c| c.is_ready()).and_then(|c| c.subtopologies);
    let subtopologies = match configured {
        Some(subs) => subs
            .iter()
            .map(|(id, c)| {
                Subtopology::default()
                    .with_subtopology_id(str_bytes(id))
                    .with_source_topics(c.source_topics.iter().map(|n| TopicName(str_bytes(n))).collect())
                    .with_repartition_sink_topics(c.repartition_sink_topics.iter().map(|n| TopicName(str_bytes(n))).collect())
                    .with_state_changelog_topics(c.state_changelog_topics.values().map(configured_topic).collect())
                    .with_repartition_source_topics(c.repartition_source_topics.values().map(configured_topic).collect())
            })
            .collect(),
        None => t
            .subtopologies
            .iter()
            .map(|sub| {
                let raw = |i: &super::topology::TopicInfo| {
                    TopicInfo::default()
                        .with_name(TopicName(str_bytes(&i.name)))
                        .with_partitions(i.partitions)
                        .with_replication_factor(i.replication_factor.max(0))
                        .with_topic_configs(kvs(i.configs.clone()))
                };
                Subtopology::default()
                    .with_subtopology_id(str_bytes(&sub.id))
                    .with_source_topics(sub.source_topics.iter().map(|n| TopicName(str_bytes(n))).collect())
                    .with_repartition_sink_topics(sub.repartition_sink_topics.iter().map(|n| TopicName(str_bytes(n))).collect())
                    .with_state_changelog_topics(sub.state_changelog_topics.iter().map(raw).collect())
                    .with_repartition_source_topics(sub.repartition_source_topics.iter().map(raw).collect())
            })
            .collect(),
    };
    Some(Topology::default().with_epoch(t.epoch).with_subtopologies(Some(subtopologies)))
}

/// One group's entry; `partitions_of` gives the topics' partition counts.
pub fn describe(
    group_id: &str,
    g: Option<&Group>,
    include_authorized_operations: bool,
    version: i16,
    partitions_of: &dyn Fn(&str) -> Option<i32>,
) -> DescribedGroup {
    let base = DescribedGroup::default().with_group_id(GroupId(str_bytes(group_id))).with_authorized_operations(OPERATIONS_NOT_REQUESTED);
    let Some(g) = g else {
        return base.with_error_code(ErrorCode::GROUP_ID_NOT_FOUND.code()).with_error_message(Some(str_bytes(&format!("Group {group_id} not found."))));
    };
    let Some(s) = g.streams.as_deref() else {
        return base
            .with_error_code(ErrorCode::GROUP_ID_NOT_FOUND.code())
            .with_error_message(Some(str_bytes(&format!("Group {group_id} is not a streams group."))));
    };
    let offsets = |o: &std::collections::BTreeMap<(String, i32), i64>| -> Vec<TaskOffset> {
        o.iter().map(|((s, p), off)| TaskOffset::default().with_subtopology_id(str_bytes(s)).with_partition(*p).with_offset(*off)).collect()
    };
    let members = s
        .members
        .iter()
        .map(|(id, m)| {
            let md = &m.metadata;
            Member::default()
                .with_member_id(str_bytes(id))
                .with_member_epoch(m.assignment.member_epoch)
                .with_instance_id(md.instance_id.as_deref().map(str_bytes))
                .with_rack_id(md.rack_id.as_deref().map(str_bytes))
                .with_client_id(str_bytes(&md.client_id))
                .with_client_host(str_bytes(&md.client_host))
                .with_topology_epoch(md.topology_epoch)
                .with_process_id(str_bytes(&md.process_id))
                .with_user_endpoint(md.user_endpoint.as_ref().map(|e| Endpoint::default().with_host(str_bytes(&e.host)).with_port(e.port)))
                .with_client_tags(kvs(md.client_tags.clone()))
                .with_task_offsets(offsets(&m.task_offsets))
                .with_task_end_offsets(offsets(&m.task_end_offsets))
                .with_assignment(assignment(&m.assignment.assigned.tasks()))
                .with_target_assignment(assignment(&s.targets.get(id).cloned().unwrap_or_default()))
        })
        .collect();
    let mut d = base
        .with_group_state(str_bytes(s.state().name()))
        .with_group_epoch(s.group_epoch)
        .with_assignment_epoch(s.assignment_epoch)
        .with_assignor_name(Some(str_bytes(super::assignor::sticky::NAME)))
        .with_members(members)
        // Kafka's Admin refuses an entry without one ("Topology information is missing").
        .with_topology(Some(topology(s, partitions_of).unwrap_or_else(|| Topology::default().with_epoch(-1).with_subtopologies(Some(Vec::new())))))
        .with_authorized_operations(acl_operations::if_requested(include_authorized_operations, acl_operations::GROUP));
    if version >= 1 {
        d.topology_description_status = TOPOLOGY_DESCRIPTION_NOT_STORED;
    }
    d
}
