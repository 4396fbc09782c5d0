//! The deterministic metadata transition: (image, committed command) → (image', response,
//! deltas). Every replica and every replay computes the same result from the same log, so
//! nothing here may read the clock, randomness or local config.
use crate::cluster::image::{ConfigResource, MetadataDelta, MetadataImage, PartitionMeta, ReplicaMeta, TopicMeta};
use crate::runtime::ShardId;

use super::alter_partition::{self, AlterIsr};
use super::election;
use super::leadership::{self, ChangedTopics};
use super::reassignment;

use super::types::{Applied, Command, Rejection, Response};

/// Applies `cmd`, committed at log `index`, to `image`.
pub fn apply(image: &mut MetadataImage, index: u64, cmd: &Command) -> (Response, Vec<MetadataDelta>) {
    image.applied_index = index;
    match apply_inner(image, cmd) {
        Ok((applied, deltas)) => (Response(Ok(applied)), deltas),
        Err(rej) => {
            tracing::info!(index, command = %cmd, rejection = ?rej, "controller: committed command rejected on apply");
            (Response(Err(rej)), Vec::new())
        }
    }
}

fn live_topic<'a>(image: &'a mut MetadataImage, name: &str, id: &[u8; 16]) -> Result<&'a mut TopicMeta, Rejection> {
    match image.topics.get_mut(name) {
        Some(t) if &t.topic_id == id => Ok(t),
        _ => Err(Rejection::UnknownTopic(name.to_string())),
    }
}

/// The topic's name, if `leader` leads the partition in `leader_epoch` (fencing of the
/// remote log records, invariant 7: a deposed leader changes nothing).
fn remote_log_leader(image: &MetadataImage, topic_id: &[u8; 16], partition: i32, leader: i32, leader_epoch: i32) -> Result<String, Rejection> {
    let Some(topic) = image.topic_by_id(topic_id) else {
        return Err(Rejection::InvalidRequest("the topic of the remote log record is gone".into()));
    };
    let Some(p) = topic.partition(partition) else {
        return Err(Rejection::InvalidRequest(format!("{} has no partition {partition}", topic.name)));
    };
    if p.leader != leader || p.leader_epoch != leader_epoch {
        return Err(Rejection::InvalidRequest(format!(
            "stale remote log record: broker {leader} epoch {leader_epoch}, the partition is led by {} in epoch {}",
            p.leader, p.leader_epoch
        )));
    }
    Ok(topic.name.clone())
}

fn apply_inner(image: &mut MetadataImage, cmd: &Command) -> Result<(Applied, Vec<MetadataDelta>), Rejection> {
    match cmd {
        Command::InitCluster { cluster_id } => {
            // First writer wins; a second InitCluster (a retry after a leader change) is a no-op.
            if image.cluster_id.is_empty() {
                image.cluster_id = cluster_id.clone();
            }
            Ok((Applied::Done, Vec::new()))
        }
        Command::CreateTopic { name, topic_id, shards, replicas, configs } => {
            if image.topics.contains_key(name) {
                return Err(Rejection::TopicAlreadyExists(name.clone()));
            }
            if image.topic_by_id(topic_id).is_some() {
                return Err(Rejection::InvalidRequest(format!("topic id of '{name}' collides with an existing topic")));
            }
            let partitions = new_partitions(image, 0, shards, replicas);
            let meta = TopicMeta { name: name.clone(), topic_id: *topic_id, partitions, configs: configs.clone() };
            image.topics.insert(name.clone(), meta.clone());
            Ok((Applied::TopicCreated(meta), vec![MetadataDelta::TopicCreated { name: name.clone() }]))
        }
        Command::CreatePartitions { name, topic_id, new_shards, new_replicas } => {
            let first_new = live_topic(image, name, topic_id)?.partitions.len() as i32;
            let added = new_partitions(image, first_new, new_shards, new_replicas);
            live_topic(image, name, topic_id)?.partitions.extend(added);
            Ok((Applied::Done, vec![MetadataDelta::PartitionsCreated { name: name.clone(), first_new }]))
        }
        Command::DeleteTopic { name, topic_id } => {
            live_topic(image, name, topic_id)?;
            image.topics.remove(name);
            // Its remote objects stay in the bucket for now (issue 30 point 3: the leader
            // deleting them before the topic's records go).
            image.remote_log.remove_topic(topic_id);
            Ok((Applied::TopicDeleted { topic_id: *topic_id }, vec![MetadataDelta::TopicDeleted { name: name.clone(), topic_id: *topic_id }]))
        }
        Command::SetTopicConfigs { name, topic_id, configs } => {
            let topic = live_topic(image, name, topic_id)?;
            if &topic.configs == configs {
                return Ok((Applied::Done, Vec::new()));
            }
            topic.configs = configs.clone();
            let mut deltas = vec![MetadataDelta::TopicConfigChanged { name: name.clone() }];
            // Unclean elections newly allowed: leaderless partitions with a live replica get
            // a leader now (Kafka elects them on its periodic check). The record carries no
            // static default: when only that allows them, fencing and unfencing did already.
            if !leadership::elect_leaderless(image, Some(name), false).is_empty() {
                deltas.push(MetadataDelta::LeadersChanged { name: name.clone() });
            }
            Ok((Applied::Done, deltas))
        }
        Command::AllocateProducerIds { count } => {
            let first = image.next_producer_id;
            let next = (*count > 0)
                .then(|| first.checked_add(*count))
                .flatten()
                .ok_or_else(|| Rejection::InvalidRequest(format!("cannot allocate {count} producer ids after {first}")))?;
            image.next_producer_id = next;
            Ok((Applied::ProducerIds { first }, Vec::new()))
        }
        Command::AlterScramCredentials { upsertions, deletions } => {
            for (user, mechanism) in deletions {
                image.security.remove_scram_credential(user, *mechanism);
            }
            for u in upsertions {
                image.security.set_scram_credential(&u.user, u.mechanism, u.credential.clone());
            }
            Ok((Applied::Done, vec![MetadataDelta::SecurityChanged]))
        }
        Command::CreateAcls { acls } => {
            let set = std::sync::Arc::make_mut(&mut image.security.acls);
            let added = acls.iter().fold(false, |added, b| set.insert(b.clone()) | added);
            Ok((Applied::Done, if added { vec![MetadataDelta::SecurityChanged] } else { Vec::new() }))
        }
        Command::DeleteAcls { acls } => {
            if !acls.iter().any(|b| image.security.acls.contains(b)) {
                return Ok((Applied::Done, Vec::new()));
            }
            let set = std::sync::Arc::make_mut(&mut image.security.acls);
            for b in acls {
                set.remove(b);
            }
            Ok((Applied::Done, vec![MetadataDelta::SecurityChanged]))
        }
        Command::PutDelegationToken { token } => {
            image.security.delegation_tokens.insert(token.token_id.clone(), token.clone());
            Ok((Applied::Done, vec![MetadataDelta::SecurityChanged]))
        }
        Command::RemoveDelegationTokens { token_ids } => {
            let removed = token_ids.iter().fold(false, |any, id| image.security.delegation_tokens.remove(id).is_some() | any);
            Ok((Applied::Done, if removed { vec![MetadataDelta::SecurityChanged] } else { Vec::new() }))
        }
        Command::AlterClientQuotas { entries } => {
            for e in entries {
                let ops: Vec<_> = e.ops.iter().map(|(k, v)| (*k, v.map(|v| v.0))).collect();
                image.security.client_quotas.alter(&e.entity, &ops);
            }
            Ok((Applied::Done, vec![MetadataDelta::SecurityChanged]))
        }
        Command::RemoteLogSegment { topic_id, partition, leader, leader_epoch, segment, expected } => {
            let name = remote_log_leader(image, topic_id, *partition, *leader, *leader_epoch)?;
            image.remote_log.apply_expecting(topic_id, *partition, segment, *expected).map_err(Rejection::InvalidRequest)?;
            Ok((Applied::Done, vec![MetadataDelta::RemoteLogChanged { name }]))
        }
        Command::RemoteLogStartOffset { topic_id, partition, leader, leader_epoch, offset } => {
            let name = remote_log_leader(image, topic_id, *partition, *leader, *leader_epoch)?;
            image.remote_log.advance_log_start(topic_id, *partition, *offset);
            Ok((Applied::Done, vec![MetadataDelta::RemoteLogChanged { name }]))
        }
        Command::UpdateFeatures { levels } => {
            image.features.set(levels);
            Ok((Applied::Done, vec![MetadataDelta::FeaturesChanged]))
        }
        Command::SetResourceConfigs { resource, configs } => {
            if image.configs_of(resource) == configs {
                return Ok((Applied::Done, Vec::new()));
            }
            if configs.is_empty() {
                image.resource_configs.remove(resource);
            } else {
                image.resource_configs.insert(resource.clone(), configs.clone());
            }
            let mut deltas = match resource {
                ConfigResource::Broker(_) => vec![MetadataDelta::BrokerConfigChanged],
                ConfigResource::Group(group) => vec![MetadataDelta::GroupConfigChanged { group: group.clone() }],
            };
            if matches!(resource, ConfigResource::Broker(b) if b.is_empty()) {
                // The cluster-wide default may allow unclean elections now (as SetTopicConfigs).
                let changed = leadership::elect_leaderless(image, None, false);
                deltas.extend(changed.into_iter().map(|name| MetadataDelta::LeadersChanged { name }));
            }
            Ok((Applied::Done, deltas))
        }
        Command::RegisterBroker { broker, unclean_default, min_isr_default, clean_shutdown_of } => {
            note_min_isr_default(image, *min_isr_default);
            let mut changed = ChangedTopics::new();
            let mut unclean_restart = false;
            if let Some(old) = image.brokers.get_mut(&broker.id) {
                if old.incarnation != broker.incarnation {
                    // A restart, which may have lost unsynced writes (Kafka's unclean
                    // shutdown handling): the old incarnation is fenced first, so it
                    // leaves every ISR where it is not the last member (with ELR, every
                    // ISR) and its leaderships end (epochs bump); it rejoins ISRs through
                    // its leaders' AlterPartition once caught up. A no-op when the session
                    // timeout fenced it already.
                    unclean_restart = *clean_shutdown_of != Some(old.incarnation);
                    old.fenced = true;
                    changed.extend(leadership::on_fenced(image, broker.id, *unclean_default));
                }
            }
            let mut registered = broker.clone();
            registered.fenced = false;
            image.brokers.insert(broker.id, registered);
            if unclean_restart {
                // With ELR: its log may lack records below the high watermark now.
                changed.extend(leadership::on_unclean_shutdown(image, broker.id, *unclean_default));
            }
            changed.extend(leadership::adopt_unassigned(image, broker));
            // Where it is still the only ISR member (its log may be the only complete one),
            // or an eligible leader replica of an empty ISR, it leads again, in a new epoch.
            changed.extend(leadership::on_unfenced(image, broker.id, *unclean_default));
            changed.extend(reassignment::complete_ready(image));
            Ok((Applied::Done, broker_deltas(changed)))
        }
        Command::AlterPartition { topic_id, partition, leader, leader_epoch, partition_epoch, new_isr, new_isr_epochs } => {
            let req = AlterIsr {
                topic_id,
                partition: *partition,
                leader: *leader,
                leader_epoch: *leader_epoch,
                partition_epoch: *partition_epoch,
                new_isr,
                new_isr_epochs,
            };
            let (meta, changed) = alter_partition::apply(image, req).map_err(Rejection::AlterPartition)?;
            // LeadersChanged: the shards re-read every partition of the topic (leader, ISR).
            let deltas = changed.into_iter().map(|name| MetadataDelta::LeadersChanged { name }).collect();
            Ok((Applied::PartitionAltered(meta), deltas))
        }
        Command::FenceBroker { broker, incarnation, unclean_default, min_isr_default }
        | Command::UnfenceBroker { broker, incarnation, unclean_default, min_isr_default } => {
            let fence = matches!(cmd, Command::FenceBroker { .. });
            note_min_isr_default(image, *min_isr_default);
            let Some(b) = image.brokers.get_mut(broker) else {
                return Err(Rejection::StaleIncarnation(*broker));
            };
            if &b.incarnation != incarnation {
                return Err(Rejection::StaleIncarnation(*broker));
            }
            if b.fenced == fence {
                return Ok((Applied::Done, Vec::new()));
            }
            b.fenced = fence;
            let mut changed =
                if fence { leadership::on_fenced(image, *broker, *unclean_default) } else { leadership::on_unfenced(image, *broker, *unclean_default) };
            changed.extend(reassignment::complete_ready(image));
            Ok((Applied::Done, broker_deltas(changed)))
        }
        Command::UnregisterBroker { broker, unclean_default, min_isr_default } => {
            note_min_isr_default(image, *min_isr_default);
            let Some(b) = image.brokers.get_mut(broker) else {
                return Ok((Applied::Done, Vec::new()));
            };
            // Fenced first, so its leaderships move and it leaves the ISRs, as a fencing.
            let was_fenced = std::mem::replace(&mut b.fenced, true);
            let mut changed = if was_fenced { ChangedTopics::new() } else { leadership::on_fenced(image, *broker, *unclean_default) };
            image.brokers.remove(broker);
            changed.extend(reassignment::complete_ready(image));
            Ok((Applied::Done, broker_deltas(changed)))
        }
        Command::ElectLeaders { election, partitions } => {
            let (results, changed) = election::apply_elections(image, *election, partitions);
            let deltas = changed.into_iter().map(|name| MetadataDelta::LeadersChanged { name }).collect();
            Ok((Applied::Elected(results), deltas))
        }
        Command::AlterPartitionReassignments { topic_id, partition, target } => {
            let changed = reassignment::apply(image, topic_id, *partition, target.as_deref()).map_err(Rejection::Reassignment)?;
            Ok((Applied::Done, changed.into_iter().map(|name| MetadataDelta::LeadersChanged { name }).collect()))
        }
    }
}

/// Partitions `first..` from a record: its replica lists (every live replica in sync,
/// `leadership::settle_new`), or (a record written before brokers existed) its shards,
/// unassigned until a broker adopts them.
fn new_partitions(image: &MetadataImage, first: i32, shards: &[ShardId], replicas: &[Vec<ReplicaMeta>]) -> Vec<PartitionMeta> {
    if replicas.is_empty() {
        return shards.iter().enumerate().map(|(i, s)| PartitionMeta::unassigned(first + i as i32, *s)).collect();
    }
    replicas
        .iter()
        .enumerate()
        .map(|(i, rs)| {
            let mut p = PartitionMeta::new_on(first + i as i32, rs.clone());
            leadership::settle_new(&mut p, image);
            p
        })
        .collect()
}

/// The proposing controller's static min.insync.replicas, as liveness records carry it
/// (0: a record from before KIP-966, which changes nothing).
fn note_min_isr_default(image: &mut MetadataImage, min_isr_default: i32) {
    if min_isr_default > 0 {
        image.min_insync_replicas_default = min_isr_default;
    }
}

fn broker_deltas(changed: ChangedTopics) -> Vec<MetadataDelta> {
    let mut deltas = vec![MetadataDelta::BrokersChanged];
    deltas.extend(changed.into_iter().map(|name| MetadataDelta::LeadersChanged { name }));
    deltas
}

/// What a shard must do to go from `old` to `new` (used when a whole snapshot replaces the
/// image, e.g. a follower catching up): deletions first, then creations and changes.
pub fn diff_images(old: &MetadataImage, new: &MetadataImage) -> Vec<MetadataDelta> {
    let mut deltas = Vec::new();
    for (name, t) in &old.topics {
        match new.topics.get(name) {
            Some(n) if n.topic_id == t.topic_id => {}
            _ => deltas.push(MetadataDelta::TopicDeleted { name: name.clone(), topic_id: t.topic_id }),
        }
    }
    for (name, n) in &new.topics {
        match old.topics.get(name) {
            Some(t) if t.topic_id == n.topic_id => {
                if n.partitions.len() > t.partitions.len() {
                    deltas.push(MetadataDelta::PartitionsCreated { name: name.clone(), first_new: t.partitions.len() as i32 });
                }
                if n.configs != t.configs {
                    deltas.push(MetadataDelta::TopicConfigChanged { name: name.clone() });
                }
                // Leader, ISR or replicas: every change bumps the partition epoch.
                let leaders = |m: &TopicMeta| m.partitions.iter().map(|p| (p.leader, p.leader_epoch, p.partition_epoch, p.isr.clone())).collect::<Vec<_>>();
                if leaders(n) != leaders(t) {
                    deltas.push(MetadataDelta::LeadersChanged { name: name.clone() });
                }
                let remote =
                    |img: &MetadataImage| (0..n.partitions.len() as i32).map(|p| img.remote_log.partition(&n.topic_id, p).cloned()).collect::<Vec<_>>();
                if (!old.remote_log.is_empty() || !new.remote_log.is_empty()) && remote(old) != remote(new) {
                    deltas.push(MetadataDelta::RemoteLogChanged { name: name.clone() });
                }
            }
            _ => deltas.push(MetadataDelta::TopicCreated { name: name.clone() }),
        }
    }
    let resources = old.resource_configs.keys().chain(new.resource_configs.keys()).collect::<std::collections::BTreeSet<_>>();
    let mut brokers_changed = false;
    for r in resources {
        if old.configs_of(r) == new.configs_of(r) {
            continue;
        }
        match r {
            ConfigResource::Broker(_) => brokers_changed = true,
            ConfigResource::Group(group) => deltas.push(MetadataDelta::GroupConfigChanged { group: group.clone() }),
        }
    }
    if brokers_changed {
        deltas.push(MetadataDelta::BrokerConfigChanged);
    }
    if old.brokers != new.brokers {
        deltas.push(MetadataDelta::BrokersChanged);
    }
    if old.security != new.security {
        deltas.push(MetadataDelta::SecurityChanged);
    }
    if old.features != new.features {
        deltas.push(MetadataDelta::FeaturesChanged);
    }
    deltas
}
