//! ConsumerGroupDescribe for one group, and what the classic admin APIs (DescribeGroups,
//! ListGroups) report about a consumer group, as Kafka 4.1 does.
use kafka_protocol::messages::consumer_group_describe_response::{Assignment as DescribedAssignment, DescribedGroup, Member, TopicPartitions};
use kafka_protocol::messages::describe_groups_response::DescribedGroup as ClassicDescribedGroup;
use kafka_protocol::messages::{GroupId, TopicName};

use super::group::Assignment;
use crate::cluster::image::MetadataImage;
use crate::group::state::Group;
use crate::protocol::acl_operations::{self, NOT_REQUESTED as OPERATIONS_NOT_REQUESTED};
use crate::protocol::strings::str_bytes;
use crate::protocol::ErrorCode;

/// Kafka's MemberType (ConsumerGroupDescribe v1, KIP-1099): a member speaking the
/// classic protocol inside the group, or a KIP-848 one.
const MEMBER_TYPE_CLASSIC: i8 = 0;
const MEMBER_TYPE_CONSUMER: i8 = 1;

fn described_assignment(a: &Assignment, image: &MetadataImage) -> DescribedAssignment {
    DescribedAssignment::default().with_topic_partitions(
        a.iter()
            .map(|(t, ps)| {
                let name = image.topic_by_id(t.as_bytes()).map(|m| m.name.as_str()).unwrap_or("");
                TopicPartitions::default().with_topic_id(*t).with_topic_name(TopicName(str_bytes(name))).with_partitions(ps.iter().copied().collect())
            })
            .collect(),
    )
}

pub fn describe(group_id: &str, g: Option<&Group>, include_authorized_operations: bool, image: &MetadataImage) -> DescribedGroup {
    let base = DescribedGroup::default().with_group_id(GroupId(str_bytes(group_id))).with_authorized_operations(OPERATIONS_NOT_REQUESTED);
    let Some(g) = g else {
        return base.with_error_code(ErrorCode::GROUP_ID_NOT_FOUND.code()).with_error_message(Some(str_bytes(&format!("Group {group_id} not found."))));
    };
    let Some(c) = g.consumer.as_deref() else {
        return base
            .with_error_code(ErrorCode::GROUP_ID_NOT_FOUND.code())
            .with_error_message(Some(str_bytes(&format!("Group {group_id} is not a consumer group."))));
    };
    let members = c
        .members
        .values()
        .map(|m| {
            let target = c.target.get(&m.id).cloned().unwrap_or_default();
            Member::default()
                .with_member_id(str_bytes(&m.id))
                .with_instance_id(m.instance_id.as_deref().map(str_bytes))
                .with_rack_id(m.rack_id.as_deref().map(str_bytes))
                .with_member_epoch(m.member_epoch)
                .with_client_id(str_bytes(&m.client_id))
                .with_client_host(str_bytes(&m.client_host))
                .with_subscribed_topic_names(m.subscribed_topic_names.iter().map(|n| TopicName(str_bytes(n))).collect())
                .with_subscribed_topic_regex(m.subscribed_topic_regex.as_deref().map(str_bytes))
                .with_assignment(described_assignment(&m.assigned, image))
                .with_target_assignment(described_assignment(&target, image))
                .with_member_type(if m.uses_classic_protocol() { MEMBER_TYPE_CLASSIC } else { MEMBER_TYPE_CONSUMER })
        })
        .collect();
    base.with_group_state(str_bytes(c.state().name()))
        .with_group_epoch(c.group_epoch)
        .with_assignment_epoch(c.assignment_epoch)
        .with_assignor_name(str_bytes(c.preferred_assignor()))
        .with_members(members)
        .with_authorized_operations(acl_operations::if_requested(include_authorized_operations, acl_operations::GROUP))
}

/// DescribeGroups (the classic API) on a consumer group: Kafka 4.1 answers that it is
/// not a classic group (GROUP_ID_NOT_FOUND from v6, a Dead group before).
pub fn classic_describe(group_id: &str, version: i16) -> ClassicDescribedGroup {
    let d = ClassicDescribedGroup::default().with_group_id(GroupId(str_bytes(group_id))).with_group_state(str_bytes("Dead"));
    if version >= 6 {
        d.with_error_code(ErrorCode::GROUP_ID_NOT_FOUND.code()).with_error_message(Some(str_bytes(&format!("Group {group_id} is not a classic group."))))
    } else {
        d
    }
}

/// (group type, state) ListGroups reports for `g`.
pub fn listed_type_and_state(g: &Group) -> (&'static str, &'static str) {
    if let Some(s) = g.share.as_deref() {
        return ("share", s.state().name());
    }
    if let Some(s) = g.streams.as_deref() {
        return ("streams", s.state().name());
    }
    match g.consumer.as_deref() {
        Some(c) => ("consumer", c.state().name()),
        None => ("classic", g.state.name()),
    }
}
