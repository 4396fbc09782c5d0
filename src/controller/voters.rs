//! KIP-853 quorum membership changes, on the quorum leader: AddRaftVoter, RemoveRaftVoter,
//! UpdateRaftVoter, and the removal of a retired observer. Kafka 4.4's rules and words
//! (its AddVoterHandler / RemoveVoterHandler), on openraft's membership:
//!
//! - A voter is (node id, directory id) (`directory_id.rs`): a request naming another
//!   directory id names another replica (a wiped data dir), so it is refused.
//! - A change needs kraft.version >= 1 (UNSUPPORTED_VERSION otherwise, as a static Kafka
//!   quorum answers) and waits for no other: while the last membership entry is not
//!   committed, or openraft is between the two entries of a joint change, the answer is
//!   REQUEST_TIMED_OUT and the caller retries.
//! - A new voter must already follow the log as an observer (a raft learner: a node with
//!   the controller role started with controller_quorum_bootstrap_servers joins as one),
//!   with the same directory id, and have caught up: its last replicated entry at least
//!   the leader's commit point, waited for up to the request's timeout (Kafka asks for
//!   one fetch that caught up; openraft pushes, so the leader's view of its progress is
//!   the measure). Then one openraft `change_membership` (joint consensus: two entries)
//!   makes it a voter; the answer comes once the final entry is committed.
//! - Removing a voter that is also a registered broker keeps it as an observer (its
//!   broker still needs the metadata); a controller-only voter leaves the membership.
//!   The last voter cannot be removed. A leader that removes itself steps down once the
//!   change commits (openraft), and another voter leads.
//! - UpdateRaftVoter is sent by a voter itself at start when the membership records
//!   another controller listener or no directory id for it (`announce`).
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use openraft::async_runtime::WatchReceiver as _;
use openraft::ChangeMembers;

use crate::cluster::features::KRAFT_VERSION;
use crate::cluster::image::MetadataImage;

use super::directory_id::to_text;
use super::rpc::ClientReply;
use super::types::{ControllerNode, Raft};
use super::{ControllerError, MembershipError};

/// How often the leader looks at a new voter's progress while it catches up.
const CATCH_UP_POLL: Duration = Duration::from_millis(50);

/// Kafka's ReplicaKey text, as its messages print it.
fn replica_key(id: u64, directory_id: &[u8; 16]) -> String {
    if *directory_id == [0; 16] {
        format!("ReplicaKey(id={id}, directoryId=<undefined>)")
    } else {
        format!("ReplicaKey(id={id}, directoryId={})", to_text(directory_id))
    }
}

fn refuse(e: MembershipError, message: String) -> ControllerError {
    ControllerError::Membership(e, message)
}

/// The committed voters as Kafka prints a voter set.
fn voter_keys(raft: &Raft) -> String {
    let m = raft.metrics().borrow_watched().membership_config.clone();
    let keys: Vec<String> = m.membership().voter_ids().map(|id| replica_key(id, &m.membership().get_node(&id).map_or([0; 16], |n| n.directory_id))).collect();
    format!("[{}]", keys.join(", "))
}

/// Kafka's preconditions of every voter change: kraft.version >= 1, and no change in flight.
fn check_can_change(raft: &Raft, image: &MetadataImage, what: &str) -> Result<(), ControllerError> {
    let level = image.features.level(KRAFT_VERSION);
    if level < 1 {
        return Err(refuse(
            MembershipError::UnsupportedVersion,
            format!("Cluster doesn't support {what} voter because the {KRAFT_VERSION} feature is {level}"),
        ));
    }
    let m = raft.metrics().borrow_watched().clone();
    let at = m.membership_config.log_id().as_ref().map(|l| l.index);
    let committed = m.local_committed.as_ref().map(|l| l.index);
    if m.membership_config.membership().get_joint_config().len() > 1 || at > committed {
        return Err(refuse(
            MembershipError::RequestTimedOut,
            format!(
                "Request timed out waiting for voters to commit the latest voter change at {} with HWM {}",
                at.map_or(-1, |i| i as i64),
                committed.map_or(0, |i| i as i64 + 1)
            ),
        ));
    }
    Ok(())
}

/// Runs one openraft membership change, bounded by `timeout`.
async fn change(raft: &Raft, change: ChangeMembers<u64, ControllerNode>, retain: bool, timeout: Duration, what: &str) -> Result<(), ControllerError> {
    match tokio::time::timeout(timeout, raft.change_membership(change, retain)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(ControllerError::NotController(format!("{what}: {e}"))),
        Err(_) => Err(refuse(MembershipError::RequestTimedOut, format!("{what} was not committed within {} ms", timeout.as_millis()))),
    }
}

/// AddRaftVoter on the leader.
pub async fn add(raft: &Raft, image: &MetadataImage, id: u64, directory_id: [u8; 16], addr: String, timeout: Duration) -> Result<ClientReply, ControllerError> {
    check_can_change(raft, image, "adding")?;
    let key = replica_key(id, &directory_id);
    let membership = raft.metrics().borrow_watched().membership_config.membership().clone();
    if membership.voter_ids().any(|v| v == id) {
        return Err(refuse(MembershipError::DuplicateVoter, format!("The voter id for {key} is already part of the set of voters {}.", voter_keys(raft))));
    }
    let node = match membership.get_node(&id) {
        Some(n) if n.directory_id == directory_id => n.clone(),
        Some(n) => {
            return Err(refuse(
                MembershipError::RequestTimedOut,
                format!(
                    "The new voter {key} is not an observer of the metadata quorum: observer {id} has directory id {} \
                     (a replaced data dir?)",
                    to_text(&n.directory_id)
                ),
            ))
        }
        None => {
            return Err(refuse(
                MembershipError::RequestTimedOut,
                format!(
                    "The new voter {key} is not an observer of the metadata quorum: start it with \
                     controller_quorum_bootstrap_servers so it joins and catches up first"
                ),
            ))
        }
    };
    if !node.controller {
        return Err(ControllerError::InvalidRequest(format!("node {id} is broker-only (process_roles has no controller): only a controller can be a voter")));
    }
    wait_caught_up(raft, id, &key, timeout).await?;
    if !addr.is_empty() && addr != node.addr {
        // The request's listener wins (Kafka takes the new voter's endpoints from it); the
        // node is still a learner, so re-addressing it cannot split a quorum.
        let moved = ControllerNode { addr: addr.clone(), ..node };
        change(raft, ChangeMembers::SetNodes(BTreeMap::from([(id, moved)])), true, timeout, "re-addressing the new voter").await?;
    }
    tracing::info!(voter = %key, "controller: adding a voter to the metadata quorum (AddRaftVoter)");
    change(raft, ChangeMembers::AddVoterIds(BTreeSet::from([id])), true, timeout, "adding the voter").await?;
    Ok(ClientReply::Done)
}

/// Waits until the leader knows learner `id` holds every committed entry (as of the
/// call), or `timeout`.
async fn wait_caught_up(raft: &Raft, id: u64, key: &str, timeout: Duration) -> Result<(), ControllerError> {
    let deadline = Instant::now() + timeout;
    let target = raft.metrics().borrow_watched().local_committed.as_ref().map(|l| l.index);
    loop {
        let m = raft.metrics().borrow_watched().clone();
        let matched = m.replication.as_ref().and_then(|r| r.get(&id).cloned().flatten()).map(|l| l.index);
        if matched.is_some() && matched >= target {
            return Ok(());
        }
        if Instant::now() + CATCH_UP_POLL > deadline {
            return Err(refuse(
                MembershipError::RequestTimedOut,
                format!(
                    "The new voter {key} is not caught up to the leader: it holds the metadata log up to offset {}, \
                     the high watermark is {}",
                    matched.map_or(0, |i| i as i64 + 1),
                    target.map_or(0, |i| i as i64 + 1)
                ),
            ));
        }
        tokio::time::sleep(CATCH_UP_POLL).await;
    }
}

/// RemoveRaftVoter on the leader.
pub async fn remove(raft: &Raft, image: &MetadataImage, id: u64, directory_id: [u8; 16], timeout: Duration) -> Result<ClientReply, ControllerError> {
    check_can_change(raft, image, "removing")?;
    let key = replica_key(id, &directory_id);
    let membership = raft.metrics().borrow_watched().membership_config.membership().clone();
    let voters: Vec<u64> = membership.voter_ids().collect();
    let same_replica = membership.get_node(&id).is_some_and(|n| n.directory_id == directory_id);
    if !voters.contains(&id) || !same_replica || voters.len() == 1 {
        return Err(refuse(MembershipError::VoterNotFound, format!("Cannot remove voter {key} from the set of voters {}", voter_keys(raft))));
    }
    // A combined node stays an observer: its broker goes on following the log.
    let keep_as_observer = i32::try_from(id).is_ok_and(|b| image.brokers.contains_key(&b));
    tracing::info!(voter = %key, keep_as_observer, "controller: removing a voter from the metadata quorum (RemoveRaftVoter)");
    change(raft, ChangeMembers::RemoveVoters(BTreeSet::from([id])), keep_as_observer, timeout, "removing the voter").await?;
    Ok(ClientReply::Done)
}

/// UpdateRaftVoter on the leader: a voter's new controller listener, or its directory id
/// where the membership has none (voters listed in controller_quorum_voters when the
/// quorum was made).
pub async fn update(
    raft: &Raft,
    image: &MetadataImage,
    id: u64,
    directory_id: [u8; 16],
    addr: String,
    timeout: Duration,
) -> Result<ClientReply, ControllerError> {
    check_can_change(raft, image, "updating")?;
    let key = replica_key(id, &directory_id);
    let membership = raft.metrics().borrow_watched().membership_config.membership().clone();
    let node = match membership.get_node(&id) {
        Some(n) if membership.voter_ids().any(|v| v == id) && (n.directory_id == directory_id || n.directory_id == [0; 16]) => n.clone(),
        _ => return Err(refuse(MembershipError::VoterNotFound, format!("Voter {key} is not in the set of voters {}", voter_keys(raft)))),
    };
    let updated = ControllerNode { addr: if addr.is_empty() { node.addr.clone() } else { addr }, directory_id, controller: true };
    if updated == node {
        return Ok(ClientReply::Done);
    }
    tracing::info!(voter = %key, from = %node.addr, to = %updated.addr, "controller: updating a voter (UpdateRaftVoter)");
    change(raft, ChangeMembers::SetNodes(BTreeMap::from([(id, updated)])), true, timeout, "updating the voter").await?;
    Ok(ClientReply::Done)
}

/// Removes observer `id` from the membership (a retired broker), if it is one.
pub async fn remove_observer(raft: &Raft, id: u64, timeout: Duration) -> Result<(), ControllerError> {
    let membership = raft.metrics().borrow_watched().membership_config.membership().clone();
    if membership.get_node(&id).is_none() || membership.voter_ids().any(|v| v == id) {
        return Ok(());
    }
    tracing::info!(observer = id, "controller: removing a retired observer from the metadata quorum");
    change(raft, ChangeMembers::RemoveNodes(BTreeSet::from([id])), false, timeout, "removing the observer").await
}

/// What a voter tells the leader at start (UpdateRaftVoter), if the membership records
/// another listener or no directory id for it; None when it is right, or not a voter.
pub fn announcement(raft: &Raft, me: u64, directory_id: [u8; 16], addr: &str) -> Option<super::rpc::ClientRequest> {
    let membership = raft.metrics().borrow_watched().membership_config.membership().clone();
    let node = membership.get_node(&me)?;
    let is_voter = membership.voter_ids().any(|v| v == me);
    let stale = node.directory_id != directory_id || (!addr.is_empty() && node.addr != addr);
    (is_voter && stale).then(|| super::rpc::ClientRequest::UpdateVoter { id: me, directory_id, addr: addr.to_string() })
}
