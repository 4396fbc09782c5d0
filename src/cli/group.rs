//! `shardlog group list|describe` against a running broker: groups, their state, members
//! with their assigned partitions, committed offsets and lag per partition.
use std::collections::BTreeMap;

use anyhow::bail;
use kafka_protocol::messages::describe_groups_request::DescribeGroupsRequest;
use kafka_protocol::messages::list_groups_request::ListGroupsRequest;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic};
use kafka_protocol::messages::offset_fetch_request::{OffsetFetchRequest, OffsetFetchRequestGroup};
use kafka_protocol::messages::{BrokerId, ConsumerProtocolAssignment, GroupId, TopicName};
use kafka_protocol::protocol::{Decodable, StrBytes};

use super::client::Client;

fn err_name(code: i16) -> String {
    kafka_protocol::ResponseError::try_from_code(code).map(|e| format!("{e:?}")).unwrap_or_else(|| format!("error {code}"))
}

pub fn list(bootstrap: &str) -> anyhow::Result<()> {
    let mut c = Client::connect(bootstrap)?;
    let resp = c.send(&ListGroupsRequest::default(), 5)?;
    if resp.error_code != 0 {
        bail!("list groups: {}", err_name(resp.error_code));
    }
    println!("{:<40} {:<20} {:<10} TYPE", "GROUP", "STATE", "PROTOCOL");
    for g in resp.groups {
        println!("{:<40} {:<20} {:<10} {}", g.group_id.0.as_str(), g.group_state.as_str(), g.protocol_type.as_str(), g.group_type.as_str());
    }
    Ok(())
}

/// The partitions in a consumer-protocol assignment (empty if it is not one).
fn assigned(bytes: &[u8]) -> Vec<(String, i32)> {
    if bytes.len() < 2 {
        return Vec::new();
    }
    let version = i16::from_be_bytes([bytes[0], bytes[1]]).clamp(0, 3);
    let mut b = bytes::Bytes::copy_from_slice(&bytes[2..]);
    match ConsumerProtocolAssignment::decode(&mut b, version) {
        Ok(a) => a.assigned_partitions.iter().flat_map(|tp| tp.partitions.iter().map(move |p| (tp.topic.0.to_string(), *p))).collect(),
        Err(_) => Vec::new(),
    }
}

pub fn describe(bootstrap: &str, group: &str) -> anyhow::Result<()> {
    let mut c = Client::connect(bootstrap)?;
    let gid = GroupId(StrBytes::from_string(group.to_string()));
    let resp = c.send(&DescribeGroupsRequest::default().with_groups(vec![gid.clone()]), 5)?;
    let Some(d) = resp.groups.first() else { bail!("no answer for group {group}") };
    if d.error_code != 0 {
        bail!("describe {group}: {}", err_name(d.error_code));
    }
    println!("group {group}: state {}, protocol {} / {}", d.group_state.as_str(), d.protocol_type.as_str(), d.protocol_data.as_str());
    let mut owner: BTreeMap<(String, i32), String> = BTreeMap::new();
    for m in &d.members {
        let parts = assigned(&m.member_assignment);
        println!(
            "  member {} (client {}, host {}{}) {} partitions",
            m.member_id.as_str(),
            m.client_id.as_str(),
            m.client_host.as_str(),
            m.group_instance_id.as_ref().map(|i| format!(", instance {}", i.as_str())).unwrap_or_default(),
            parts.len()
        );
        for tp in parts {
            owner.insert(tp, m.member_id.to_string());
        }
    }
    let offsets = c.send(&OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default().with_group_id(gid).with_topics(None)]), 8)?;
    let Some(og) = offsets.groups.first() else { bail!("no offsets answer for group {group}") };
    if og.error_code != 0 {
        bail!("offsets of {group}: {}", err_name(og.error_code));
    }
    let topics = og
        .topics
        .iter()
        .map(|t| {
            ListOffsetsTopic::default().with_name(t.name.clone()).with_partitions(
                t.partitions.iter().map(|p| ListOffsetsPartition::default().with_partition_index(p.partition_index).with_timestamp(-1)).collect(),
            )
        })
        .collect();
    let ends = c.send(&ListOffsetsRequest::default().with_replica_id(BrokerId(-1)).with_topics(topics), 7)?;
    let mut end: BTreeMap<(String, i32), i64> = BTreeMap::new();
    for t in &ends.topics {
        for p in &t.partitions {
            end.insert((t.name.0.to_string(), p.partition_index), if p.error_code == 0 { p.offset } else { -1 });
        }
    }
    println!("{:<30} {:>9} {:>12} {:>12} {:>8}  MEMBER", "TOPIC", "PARTITION", "COMMITTED", "END", "LAG");
    for t in &og.topics {
        let name: &TopicName = &t.name;
        for p in &t.partitions {
            let key = (name.0.to_string(), p.partition_index);
            let hw = end.get(&key).copied().unwrap_or(-1);
            let lag = if hw >= 0 && p.committed_offset >= 0 { (hw - p.committed_offset).to_string() } else { "-".into() };
            println!(
                "{:<30} {:>9} {:>12} {:>12} {:>8}  {}",
                name.0.as_str(),
                p.partition_index,
                p.committed_offset,
                hw,
                lag,
                owner.get(&key).map(String::as_str).unwrap_or("-")
            );
        }
    }
    Ok(())
}
