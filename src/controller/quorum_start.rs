//! Start-up checks of the metadata quorum, run by `server.rs` before the controller goes
//! live: a new quorum's membership (`initialize`), a data dir whose log holds another
//! static quorum (`check_persisted_voters`), replicas placed on shards this node does not
//! run (`check_placement`).
use std::collections::BTreeMap;

use openraft::async_runtime::WatchReceiver as _;

use crate::cluster::image::MetadataImage;

use super::types::{ControllerNode, Raft};
use super::{ControllerConfig, ControllerError};

/// The quorum the metadata log holds must be this node's: peers are reached at the
/// addresses the log's membership records, so a data dir from another cluster, or from
/// the same ids on other ports, would only time out waiting for a leader. With KIP-853
/// changes the log's voters may differ from `controller_quorum_voters` (which only made
/// the quorum), so the log wins when it is plainly this quorum's: it records this node
/// (voter or observer) at its own listener, or records this node's metadata dir (its
/// directory id) as a voter whose listener moved while the configured voters (if any)
/// keep another voter where the log has it, or this node is not a voter and the log
/// shares a voter (same id at the same address) with the configured voters, or a voter
/// address with the bootstrap servers. Anything else is refused at start, naming both.
pub(super) fn check_persisted_voters(cfg: &ControllerConfig, node_id: u64, directory_id: [u8; 16], raft: &Raft) -> Result<(), ControllerError> {
    let metrics = raft.metrics().borrow_watched().clone();
    let membership = metrics.membership_config.membership();
    let persisted: BTreeMap<u64, String> =
        membership.voter_ids().map(|id| (id, membership.get_node(&id).map(|n| n.addr.clone()).unwrap_or_default())).collect();
    // No membership yet although the log is no longer empty: a new node (an observer)
    // that the leader began replicating to between its start and this check; it has
    // nothing of its own to compare (seen: a broker-only node added to a running cluster
    // refused to start, "holds the quorum  but ...").
    if persisted.is_empty() {
        return Ok(());
    }
    // A single node (no voters configured) initialized itself alone, with no address.
    let configured = if cfg.voters.is_empty() && cfg.bootstrap_servers.is_empty() { BTreeMap::from([(node_id, String::new())]) } else { cfg.voters.clone() };
    if persisted == configured {
        return Ok(());
    }
    let own = cfg.advertised_listener.clone().or_else(|| cfg.listener.clone()).unwrap_or_default();
    let shares_a_voter =
        persisted.iter().any(|(id, addr)| configured.get(id) == Some(addr)) || persisted.values().any(|addr| cfg.bootstrap_servers.contains(addr));
    let removed = match persisted.get(&node_id) {
        // The log records this node at its own listener: a voter, or an observer (a
        // broker, or a removed voter kept as one) whose configured voters may all be gone.
        _ if !own.is_empty() && membership.get_node(&node_id).is_some_and(|n| n.addr == own) => None,
        Some(addr) if *addr == own => None,
        // A voter whose controller listener moved: the log records this very metadata
        // dir (its directory id) as the voter, and the configured voters, if any, keep
        // another voter where the log has it (when every address differs, the data dir
        // is another start's: refused below). It tells the leader its new listener
        // (UpdateRaftVoter, `server::announce_moved_listener`).
        Some(_)
            if !own.is_empty()
                && directory_id != [0; 16]
                && membership.get_node(&node_id).is_some_and(|n| n.directory_id == directory_id)
                && (cfg.voters.is_empty() || shares_a_voter) =>
        {
            None
        }
        None if !configured.contains_key(&node_id) && shares_a_voter => None,
        None if shares_a_voter => Some(true),
        _ => Some(false),
    };
    let show = |m: &BTreeMap<u64, String>| {
        m.iter().map(|(id, addr)| if addr.is_empty() { format!("{id} (single node)") } else { format!("{id}@{addr}") }).collect::<Vec<_>>().join(",")
    };
    let Some(removed) = removed else {
        tracing::info!(log = %show(&persisted), configured = %show(&configured),
            "controller: the metadata log's voters differ from controller_quorum_voters (changed by AddRaftVoter / RemoveRaftVoter); the log's are used");
        return Ok(());
    };
    if removed {
        return Err(ControllerError::Config(format!(
            "node {node_id} is not a voter of the metadata quorum the log in {} holds ({}); it was removed \
             (RemoveRaftVoter): to bring it back, start it with an empty data dir and controller_quorum_bootstrap_servers, \
             then add it (kafka-metadata-quorum.sh add-controller)",
            cfg.data_dir.join("controller").display(),
            show(&persisted),
        )));
    }
    Err(ControllerError::Config(format!(
        "the metadata log in {} holds the quorum {} but controller_quorum_voters is {}: this data dir belongs to \
         another cluster or configuration; start it with the voters it was created with, or with an empty data dir",
        cfg.data_dir.join("controller").display(),
        show(&persisted),
        if cfg.voters.is_empty() { "empty (a single node)".to_string() } else { show(&configured) },
    )))
}

/// Sets up the membership of a new quorum. Single node: this node alone. Quorum: only the
/// voter with the lowest id does it (with every voter), so two nodes never initialize two
/// different clusters; the others learn the membership from its first append. It runs only
/// on an empty log (`is_initialized` is false), so it is idempotent across restarts. A
/// wiped lowest voter rejoining an existing quorum must not re-initialize: restore its
/// data dir or start it with another id (membership changes are a later step).
pub(super) async fn initialize(cfg: &ControllerConfig, node_id: u64, directory_id: [u8; 16], raft: &Raft) -> Result<(), ControllerError> {
    // Only this node's directory id is known here; the other voters announce theirs when
    // they start (`voters::announce`).
    let me = |addr: String| ControllerNode { addr, directory_id, controller: true };
    let members: BTreeMap<u64, ControllerNode> = if cfg.voters.is_empty() {
        tracing::info!(node_id, "controller: initializing a new single-voter metadata quorum");
        BTreeMap::from([(node_id, me(String::new()))])
    } else if cfg.voters.keys().next() == Some(&node_id) {
        tracing::info!(node_id, voters = ?cfg.voters, "controller: lowest voter id, initializing the metadata quorum");
        cfg.voters
            .iter()
            .map(|(id, addr)| (*id, if *id == node_id { me(addr.clone()) } else { ControllerNode { controller: true, ..ControllerNode::at(addr.clone()) } }))
            .collect()
    } else {
        tracing::info!(node_id, "controller: empty log, waiting for the lowest voter to initialize the quorum");
        return Ok(());
    };
    raft.initialize(members).await.map_err(|e| ControllerError::Storage(format!("raft initialize: {e}")))
}

/// Every replica of this broker must live on a shard it runs (partitions of a data dir
/// from before brokers existed have no replicas yet: they are all this node's).
pub(super) fn check_placement(image: &MetadataImage, me: i32, shard_count: u16) -> Result<(), ControllerError> {
    for t in image.topics.values() {
        let mine = |p: &&crate::cluster::image::PartitionMeta| match p.replica_on(me) {
            Some(r) => r.shard >= shard_count,
            None => p.replicas.is_empty() && p.shard >= shard_count,
        };
        if let Some(p) = t.partitions.iter().find(mine) {
            let shard = p.replica_on(me).map_or(p.shard, |r| r.shard);
            return Err(ControllerError::Config(format!(
                "topic '{}' partition {} is placed on shard {} but only {shard_count} shards are configured; \
                 start with at least {} shards",
                t.name,
                p.partition,
                shard,
                shard + 1
            )));
        }
    }
    Ok(())
}
