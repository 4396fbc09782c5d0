//! `shardlog topic create|list|describe|delete` against a running broker.
use std::collections::BTreeMap;

use anyhow::bail;
use kafka_protocol::messages::create_topics_request::{CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig, CreateTopicsRequest};
use kafka_protocol::messages::delete_topics_request::{DeleteTopicState, DeleteTopicsRequest};
use kafka_protocol::messages::describe_configs_request::{DescribeConfigsRequest, DescribeConfigsResource};
use kafka_protocol::messages::metadata_request::{MetadataRequest, MetadataRequestTopic};
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;

use super::client::Client;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

fn check(code: i16, what: &str, message: Option<&StrBytes>) -> anyhow::Result<()> {
    if code != 0 {
        let err = kafka_protocol::ResponseError::try_from_code(code).map(|e| format!("{e:?}")).unwrap_or_else(|| format!("error {code}"));
        bail!("{what}: {err}{}", message.map(|m| format!(" ({})", m.as_str())).unwrap_or_default());
    }
    Ok(())
}

/// Broker ids of each partition's replicas, in partition order (preferred leader first).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaAssignment(pub Vec<Vec<i32>>);

/// `--replica-assignment` as kafka-topics.sh reads it: `1:2:3,2:3:1` = partition 0 on
/// brokers 1, 2, 3 (1 preferred), partition 1 on 2, 3, 1.
pub fn parse_replica_assignment(s: &str) -> Result<ReplicaAssignment, String> {
    s.split(',')
        .enumerate()
        .map(|(p, replicas)| {
            let ids = replicas
                .split(':')
                .map(|b| b.trim().parse::<i32>().map_err(|_| format!("partition {p}: '{b}' is not a broker id")))
                .collect::<Result<Vec<i32>, String>>()?;
            let mut unique = ids.clone();
            unique.sort_unstable();
            unique.dedup();
            if unique.len() != ids.len() {
                return Err(format!("partition {p} names a broker twice: {replicas}"));
            }
            Ok(ids)
        })
        .collect::<Result<Vec<_>, String>>()
        .and_then(|a| {
            if a.windows(2).all(|w| w[0].len() == w[1].len()) {
                Ok(ReplicaAssignment(a))
            } else {
                Err("every partition needs the same number of replicas".into())
            }
        })
}

/// CreateTopics for one topic; with `assignment`, the counts are -1 (Kafka's rule: the
/// assignment says both).
pub fn create(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    replication_factor: i16,
    configs: &[(String, String)],
    assignment: Option<&[Vec<i32>]>,
) -> anyhow::Result<()> {
    let mut c = Client::connect(bootstrap)?;
    let (partitions, replication_factor) = if assignment.is_some() { (-1, -1) } else { (partitions, replication_factor) };
    let assignments = assignment
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(i, brokers)| {
            CreatableReplicaAssignment::default()
                .with_partition_index(i as i32)
                .with_broker_ids(brokers.iter().map(|&b| kafka_protocol::messages::BrokerId(b)).collect())
        })
        .collect();
    let req = CreateTopicsRequest::default().with_timeout_ms(30_000).with_topics(vec![CreatableTopic::default()
        .with_name(name(topic))
        .with_num_partitions(partitions)
        .with_replication_factor(replication_factor)
        .with_assignments(assignments)
        .with_configs(
            configs
                .iter()
                .map(|(k, v)| CreatableTopicConfig::default().with_name(StrBytes::from_string(k.clone())).with_value(Some(StrBytes::from_string(v.clone()))))
                .collect(),
        )]);
    let resp = c.send(&req, 7)?;
    for t in &resp.topics {
        check(t.error_code, &format!("create {}", t.name.0.as_str()), t.error_message.as_ref())?;
        println!("created topic {} with {} partitions (id {})", t.name.0.as_str(), t.num_partitions, t.topic_id);
    }
    Ok(())
}

pub fn delete(bootstrap: &str, topic: &str) -> anyhow::Result<()> {
    let mut c = Client::connect(bootstrap)?;
    let req = DeleteTopicsRequest::default().with_timeout_ms(30_000).with_topics(vec![DeleteTopicState::default().with_name(Some(name(topic)))]);
    let resp = c.send(&req, 6)?;
    for t in &resp.responses {
        check(t.error_code, &format!("delete {topic}"), t.error_message.as_ref())?;
        println!("deleted topic {topic}");
    }
    Ok(())
}

pub fn list(bootstrap: &str) -> anyhow::Result<()> {
    let mut c = Client::connect(bootstrap)?;
    let resp = c.send(&MetadataRequest::default().with_topics(None), 12)?;
    let mut names: Vec<String> = resp.topics.iter().filter_map(|t| t.name.as_ref().map(|n| n.0.to_string())).collect();
    names.sort();
    for n in names {
        println!("{n}");
    }
    Ok(())
}

/// Kafka's kafka-topics --describe layout; a tiered topic's partitions (remote.storage.enable
/// set) get a second line with their local and remote storage (`topic_storage.rs`; remote
/// sizes with `admin`, a node's admin listener).
pub fn describe(bootstrap: &str, topic: Option<&str>, admin: Option<&str>) -> anyhow::Result<()> {
    let mut c = Client::connect(bootstrap)?;
    let topics = topic.map(|t| vec![MetadataRequestTopic::default().with_name(Some(name(t)))]);
    let resp = c.send(&MetadataRequest::default().with_topics(topics).with_allow_auto_topic_creation(false), 12)?;
    for t in &resp.topics {
        let tname = t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default();
        check(t.error_code, &format!("describe {tname}"), None)?;
        let cfg = c.send(
            &DescribeConfigsRequest::default()
                // Every key (null; the default, an empty list, asks for none).
                .with_resources(vec![DescribeConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(StrBytes::from_string(tname.clone()))
                    .with_configuration_keys(None)]),
            4,
        )?;
        let mut set = BTreeMap::new();
        for r in &cfg.results {
            for e in &r.configs {
                if e.config_source == 1 {
                    set.insert(e.name.to_string(), e.value.as_ref().map(|v| v.to_string()).unwrap_or_default());
                }
            }
        }
        let configs: Vec<String> = set.iter().map(|(k, v)| format!("{k}={v}")).collect();
        println!("Topic: {tname}\tTopicId: {}\tPartitionCount: {}\tConfigs: {}", t.topic_id, t.partitions.len(), configs.join(","));
        let tiered = set.get("remote.storage.enable").is_some_and(|v| v == "true");
        let storage = if tiered { super::topic_storage::partition_storage(&resp, t, admin)? } else { BTreeMap::new() };
        for p in &t.partitions {
            println!(
                "\tTopic: {tname}\tPartition: {}\tLeader: {}\tLeaderEpoch: {}\tReplicas: {:?}\tIsr: {:?}",
                p.partition_index,
                p.leader_id.0,
                p.leader_epoch,
                p.replica_nodes.iter().map(|b| b.0).collect::<Vec<_>>(),
                p.isr_nodes.iter().map(|b| b.0).collect::<Vec<_>>()
            );
            if let Some(s) = storage.get(&p.partition_index) {
                println!("{}", s.line());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::parse_replica_assignment;

    #[test]
    fn replica_assignments_as_kafka_topics_reads_them() {
        assert_eq!(parse_replica_assignment("1:2:3,2:3:1").map(|a| a.0), Ok(vec![vec![1, 2, 3], vec![2, 3, 1]]));
        assert_eq!(parse_replica_assignment("1,1,2").map(|a| a.0), Ok(vec![vec![1], vec![1], vec![2]]));
        assert!(parse_replica_assignment("1:x").is_err());
        assert!(parse_replica_assignment("1:1").is_err(), "a broker twice");
        assert!(parse_replica_assignment("1:2,3").is_err(), "uneven replica counts");
    }
}
