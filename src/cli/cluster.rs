//! `shardlog cluster status | quorum`: the cluster as an operator reads it, from any broker
//! over the Kafka protocol, as a table or (`--format json`) for scripts.
//!
//! - `status`: every registered broker (fenced ones too: DescribeCluster v2 with
//!   `include_fenced_brokers`, KIP-1073), its rack and roles (a quorum voter is a
//!   controller too: DescribeQuorum), the partitions it leads and holds, the skew of
//!   leaders, and the under-replicated and offline partitions (Metadata). Kafka's
//!   `kafka-cluster.sh list-endpoints --include-fenced-brokers` and `kafka-topics.sh
//!   --describe --under-replicated-partitions / --unavailable-partitions` in one view.
//! - `quorum`: the metadata quorum's leader, epoch, high watermark, and each voter's and
//!   observer's log end and lag (`kafka-metadata-quorum.sh describe --status --replication`).
//! - `balance`: leader and replica skew over the active brokers and the partitions not led
//!   by their preferred replica; `--apply` runs a preferred election over them
//!   (ElectLeaders PREFERRED, `kafka-leader-election.sh --election-type preferred`);
//!   `--moves N` plans up to N replica moves that even out the replicas per broker
//!   (`replica_moves.rs`), started with `--apply` (draining a broker: `decommission.rs`).
//!
//! Per-shard figures are not in the Kafka protocol: `status --admin` reads the leaders and
//! replicas per shard from one node's admin listener (`GET /v1/cluster/shards`, from the
//! metadata image every node has); `shardlog top` reads the shards' rates from each node's.
use std::collections::BTreeMap;

use anyhow::bail;
use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::{DescribeClusterRequest, DescribeQuorumRequest, ElectLeadersRequest, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use serde::Serialize;

use super::client::Client;

/// The metadata log's topic, as DescribeQuorum names it.
const METADATA_TOPIC: &str = "__cluster_metadata";

#[derive(Serialize)]
struct BrokerRow {
    id: i32,
    host: String,
    port: i32,
    rack: Option<String>,
    fenced: bool,
    roles: &'static str,
    leaders: usize,
    replicas: usize,
}

#[derive(Serialize)]
struct Status {
    cluster_id: String,
    active_controller: i32,
    brokers: Vec<BrokerRow>,
    /// Controller-only nodes (quorum voters that register no broker).
    controllers_only: Vec<i32>,
    topics: usize,
    partitions: usize,
    /// Most leaders on one unfenced broker minus fewest (0 = balanced).
    leader_skew: usize,
    /// "topic-partition": fewer in-sync replicas than replicas.
    under_replicated: Vec<String>,
    /// "topic-partition": no leader.
    offline: Vec<String>,
    /// With `--admin`: leaders and replicas per broker and shard.
    #[serde(skip_serializing_if = "Option::is_none")]
    shards: Option<Vec<BrokerShards>>,
    /// With `--admin`: most leaders on one shard of an active broker minus fewest.
    #[serde(skip_serializing_if = "Option::is_none")]
    shard_leader_skew: Option<usize>,
}

#[derive(Serialize)]
struct ReplicaRow {
    id: i32,
    role: &'static str,
    log_end_offset: i64,
    lag: i64,
    last_fetch_timestamp: i64,
    last_caught_up_timestamp: i64,
}

#[derive(Serialize)]
struct Quorum {
    leader: i32,
    epoch: i32,
    high_watermark: i64,
    replicas: Vec<ReplicaRow>,
}

pub(super) fn err_name(code: i16) -> String {
    kafka_protocol::ResponseError::try_from_code(code).map(|e| format!("{e:?}")).unwrap_or_else(|| format!("error {code}"))
}

fn quorum_of(c: &mut Client) -> anyhow::Result<Quorum> {
    let req = DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
        .with_topic_name(TopicName(StrBytes::from_static_str(METADATA_TOPIC)))
        .with_partitions(vec![PartitionData::default().with_partition_index(0)])]);
    let resp = c.send(&req, 2)?;
    if resp.error_code != 0 {
        bail!("DescribeQuorum: {}", err_name(resp.error_code));
    }
    let Some(p) = resp.topics.first().and_then(|t| t.partitions.first()) else { bail!("DescribeQuorum answered no partition") };
    if p.error_code != 0 {
        bail!("DescribeQuorum: {}", err_name(p.error_code));
    }
    let row = |r: &kafka_protocol::messages::describe_quorum_response::ReplicaState, role| ReplicaRow {
        id: r.replica_id.0,
        role,
        log_end_offset: r.log_end_offset,
        lag: (p.high_watermark - r.log_end_offset).max(0),
        last_fetch_timestamp: r.last_fetch_timestamp,
        last_caught_up_timestamp: r.last_caught_up_timestamp,
    };
    let mut replicas: Vec<ReplicaRow> = p.current_voters.iter().map(|r| row(r, if r.replica_id == p.leader_id { "leader" } else { "voter" })).collect();
    replicas.extend(p.observers.iter().map(|r| row(r, "observer")));
    Ok(Quorum { leader: p.leader_id.0, epoch: p.leader_epoch, high_watermark: p.high_watermark, replicas })
}

/// The cluster's status, and the Metadata it was made from (`balance` reads it again).
fn status_of(bootstrap: &str) -> anyhow::Result<(Status, MetadataResponse)> {
    let mut c = Client::connect(bootstrap)?;
    let cluster = c.send(&DescribeClusterRequest::default().with_endpoint_type(1).with_include_fenced_brokers(true), 2)?;
    if cluster.error_code != 0 {
        bail!("DescribeCluster: {}", err_name(cluster.error_code));
    }
    let md = c.send(&MetadataRequest::default().with_topics(None), 12)?;
    let voters: Vec<i32> = quorum_of(&mut c)?.replicas.iter().filter(|r| r.role != "observer").map(|r| r.id).collect();
    let (mut leaders, mut replicas) = (BTreeMap::<i32, usize>::new(), BTreeMap::<i32, usize>::new());
    let (mut under_replicated, mut offline, mut partitions) = (Vec::new(), Vec::new(), 0);
    for t in &md.topics {
        let name = t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default();
        for p in &t.partitions {
            partitions += 1;
            let tp = format!("{name}-{}", p.partition_index);
            if p.leader_id.0 < 0 {
                offline.push(tp.clone());
            } else {
                *leaders.entry(p.leader_id.0).or_default() += 1;
            }
            for r in &p.replica_nodes {
                *replicas.entry(r.0).or_default() += 1;
            }
            if p.isr_nodes.len() < p.replica_nodes.len() {
                under_replicated.push(tp);
            }
        }
    }
    let brokers: Vec<BrokerRow> = cluster
        .brokers
        .iter()
        .map(|b| BrokerRow {
            id: b.broker_id.0,
            host: b.host.to_string(),
            port: b.port,
            rack: b.rack.as_ref().map(|r| r.to_string()),
            fenced: b.is_fenced,
            roles: if voters.contains(&b.broker_id.0) { "broker+controller" } else { "broker" },
            leaders: leaders.get(&b.broker_id.0).copied().unwrap_or(0),
            replicas: replicas.get(&b.broker_id.0).copied().unwrap_or(0),
        })
        .collect();
    let live: Vec<usize> = brokers.iter().filter(|b| !b.fenced).map(|b| b.leaders).collect();
    let leader_skew = live.iter().max().zip(live.iter().min()).map_or(0, |(a, b)| a - b);
    let controllers_only = voters.iter().copied().filter(|v| !brokers.iter().any(|b| b.id == *v)).collect();
    let status = Status {
        cluster_id: cluster.cluster_id.to_string(),
        active_controller: cluster.controller_id.0,
        brokers,
        controllers_only,
        topics: md.topics.len(),
        partitions,
        leader_skew,
        under_replicated,
        offline,
        shards: None,
        shard_leader_skew: None,
    };
    Ok((status, md))
}

fn listed(items: &[String]) -> String {
    if items.is_empty() {
        "none".into()
    } else {
        items.join(", ")
    }
}

/// One broker's shards as `GET /v1/cluster/shards` answers them (the wire's JSON: the CLI
/// is a client and does not use the broker's types).
#[derive(Serialize, serde::Deserialize)]
struct BrokerShards {
    broker: i32,
    shards: Vec<ShardLoad>,
}

#[derive(Serialize, serde::Deserialize)]
struct ShardLoad {
    shard: u16,
    leaders: usize,
    replicas: usize,
}

/// Leaders and replicas per broker and shard from an admin listener (host:port or a URL).
fn shards_of(admin: &str) -> anyhow::Result<Vec<BrokerShards>> {
    #[derive(serde::Deserialize)]
    struct Answer {
        brokers: Vec<BrokerShards>,
    }
    let (url, body) = super::client::admin_get(admin, "/v1/cluster/shards")?;
    Ok(serde_json::from_str::<Answer>(&body).map_err(|e| anyhow::anyhow!("{url}: {e}"))?.brokers)
}

pub fn status(bootstrap: &str, admin: Option<&str>, json: bool) -> anyhow::Result<()> {
    let (mut s, _) = status_of(bootstrap)?;
    if let Some(admin) = admin {
        let shards = shards_of(admin)?;
        let active = |id: i32| s.brokers.iter().any(|b| b.id == id && !b.fenced);
        s.shard_leader_skew = Some(skew(shards.iter().filter(|b| active(b.broker)).flat_map(|b| &b.shards).map(|x| &x.leaders)));
        s.shards = Some(shards);
    }
    if json {
        println!("{}", serde_json::to_string(&s)?);
        return Ok(());
    }
    println!("cluster {}  active controller {}  {} topics, {} partitions", s.cluster_id, s.active_controller, s.topics, s.partitions);
    let by_shard = |id: i32| -> String {
        let shards = s.shards.as_ref().and_then(|all| all.iter().find(|b| b.broker == id));
        shards.map_or_else(|| "-".into(), |b| b.shards.iter().map(|x| format!("{}:{}/{}", x.shard, x.leaders, x.replicas)).collect::<Vec<_>>().join(" "))
    };
    let rows: Vec<Vec<String>> = s
        .brokers
        .iter()
        .map(|b| {
            let state = if b.fenced { "fenced" } else { "active" };
            let mut row = vec![
                b.id.to_string(),
                format!("{}:{}", b.host, b.port),
                b.rack.clone().unwrap_or_else(|| "-".into()),
                b.roles.into(),
                state.into(),
                b.leaders.to_string(),
                b.replicas.to_string(),
            ];
            if s.shards.is_some() {
                row.push(by_shard(b.id));
            }
            row
        })
        .collect();
    let mut header = vec!["BROKER", "ADDRESS", "RACK", "ROLES", "STATE", "LEADERS", "REPLICAS"];
    if s.shards.is_some() {
        header.push("SHARD:LEADERS/REPLICAS");
    }
    super::print_table(&header, &rows);
    if !s.controllers_only.is_empty() {
        println!("controller-only nodes: {}", s.controllers_only.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(", "));
    }
    println!("leader skew: {}", s.leader_skew);
    match s.shard_leader_skew {
        Some(skew) => println!("shard leader skew: {skew}"),
        None => println!("shard leader skew: not shown (--admin HOST:PORT names a node's admin listener)"),
    }
    println!("under-replicated: {}", listed(&s.under_replicated));
    println!("offline: {}", listed(&s.offline));
    Ok(())
}

#[derive(Serialize)]
struct Balance {
    /// Most minus fewest leaders over the active brokers.
    leader_skew: usize,
    /// Most minus fewest replicas over the active brokers.
    replica_skew: usize,
    /// Leaders per active broker.
    leaders: BTreeMap<i32, usize>,
    /// "topic-partition" whose leader is not its preferred (first) replica, though that
    /// replica is in sync and active: what a preferred election moves.
    not_preferred: Vec<String>,
    /// After `--apply`: partitions elected, and those refused with Kafka's error name.
    elected: Vec<String>,
    refused: Vec<String>,
    /// With `--moves N`: the replica moves planned ("topic-partition: [before] -> [after]",
    /// `replica_moves.rs`), started with `--apply`.
    moves: Vec<String>,
}

fn skew<'a>(counts: impl Iterator<Item = &'a usize> + Clone) -> usize {
    counts.clone().max().zip(counts.min()).map_or(0, |(a, b)| a - b)
}

fn balance_of(bootstrap: &str) -> anyhow::Result<(Balance, Vec<(String, i32)>)> {
    let (s, md) = status_of(bootstrap)?;
    let active: Vec<&BrokerRow> = s.brokers.iter().filter(|b| !b.fenced).collect();
    let mut targets = Vec::new();
    for t in &md.topics {
        let name = t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default();
        for p in &t.partitions {
            let Some(preferred) = p.replica_nodes.first() else { continue };
            let electable = p.isr_nodes.contains(preferred) && active.iter().any(|b| b.id == preferred.0);
            if p.leader_id != *preferred && electable {
                targets.push((name.clone(), p.partition_index));
            }
        }
    }
    let balance = Balance {
        leader_skew: skew(active.iter().map(|b| &b.leaders)),
        replica_skew: skew(active.iter().map(|b| &b.replicas)),
        leaders: active.iter().map(|b| (b.id, b.leaders)).collect(),
        not_preferred: targets.iter().map(|(t, p)| format!("{t}-{p}")).collect(),
        elected: Vec::new(),
        refused: Vec::new(),
        moves: Vec::new(),
    };
    Ok((balance, targets))
}

pub fn balance(bootstrap: &str, apply: bool, max_moves: usize, json: bool) -> anyhow::Result<()> {
    let (mut b, targets) = balance_of(bootstrap)?;
    let mut moves = Vec::new();
    let mut move_refusals = Vec::new();
    if max_moves > 0 {
        let mut c = Client::connect(bootstrap)?;
        let (brokers, partitions) = super::decommission::load(&mut c)?;
        let planned = super::replica_moves::plan(&brokers, &partitions, max_moves);
        moves = planned.iter().map(|(t, p, from, to)| format!("{t}-{p}: {from:?} -> {to:?}")).collect();
        if apply && !planned.is_empty() {
            let targets: Vec<(String, i32, Option<Vec<i32>>)> = planned.into_iter().map(|(t, p, _, to)| (t, p, Some(to))).collect();
            move_refusals = super::decommission::reassign(&mut c, &targets)?;
        }
    }
    if apply && !targets.is_empty() {
        let mut by_topic: BTreeMap<String, Vec<i32>> = BTreeMap::new();
        for (t, p) in &targets {
            by_topic.entry(t.clone()).or_default().push(*p);
        }
        let req = ElectLeadersRequest::default().with_election_type(0).with_timeout_ms(60_000).with_topic_partitions(Some(
            by_topic.into_iter().map(|(t, ps)| TopicPartitions::default().with_topic(TopicName(StrBytes::from_string(t))).with_partitions(ps)).collect(),
        ));
        let resp = Client::connect(bootstrap)?.send(&req, 2)?;
        if resp.error_code != 0 {
            bail!("ElectLeaders: {}", err_name(resp.error_code));
        }
        let (elected, refused) = (&mut Vec::new(), &mut Vec::new());
        for t in &resp.replica_election_results {
            for p in &t.partition_result {
                let tp = format!("{}-{}", t.topic.0, p.partition_id);
                if p.error_code == 0 {
                    elected.push(tp);
                } else {
                    refused.push(format!("{tp}: {}", err_name(p.error_code)));
                }
            }
        }
        let (after, _) = balance_of(bootstrap)?;
        b = Balance { elected: std::mem::take(elected), refused: std::mem::take(refused), ..after };
    }
    b.moves = moves;
    b.refused.extend(move_refusals);
    if json {
        println!("{}", serde_json::to_string(&b)?);
        return Ok(());
    }
    let leaders = b.leaders.iter().map(|(id, n)| format!("{id}: {n}")).collect::<Vec<_>>().join(", ");
    println!("leaders per active broker: {leaders}");
    println!("leader skew: {}  replica skew: {}", b.leader_skew, b.replica_skew);
    println!("not led by their preferred replica: {}", listed(&b.not_preferred));
    if max_moves > 0 {
        println!("replica moves{}: {}", if apply { " started" } else { " planned" }, listed(&b.moves));
    }
    if apply {
        println!("elected: {}", listed(&b.elected));
        println!("refused: {}", listed(&b.refused));
    } else if !b.not_preferred.is_empty() || !b.moves.is_empty() {
        println!("run with --apply to elect their preferred replicas{}", if b.moves.is_empty() { "" } else { " and start the moves" });
    }
    Ok(())
}

pub fn quorum(bootstrap: &str, json: bool) -> anyhow::Result<()> {
    let q = quorum_of(&mut Client::connect(bootstrap)?)?;
    if json {
        println!("{}", serde_json::to_string(&q)?);
        return Ok(());
    }
    println!("leader {}  epoch {}  high watermark {}", q.leader, q.epoch, q.high_watermark);
    let rows: Vec<Vec<String>> = q
        .replicas
        .iter()
        .map(|r| {
            vec![
                r.id.to_string(),
                r.role.into(),
                r.log_end_offset.to_string(),
                r.lag.to_string(),
                r.last_fetch_timestamp.to_string(),
                r.last_caught_up_timestamp.to_string(),
            ]
        })
        .collect();
    super::print_table(&["NODE", "ROLE", "LOG END", "LAG", "LAST FETCH MS", "LAST CAUGHT UP MS"], &rows);
    Ok(())
}
