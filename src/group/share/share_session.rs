//! Share sessions (KIP-932), as Kafka 4.4's ShareSessionCache and share fetch contexts
//! keep them: a member's ShareFetch / ShareAcknowledge requests carry a session epoch: 0
//! opens a session (its partitions are those the request names), each next request
//! carries the epoch the session expects (then one more), adding partitions and
//! forgetting others, and -1 closes it (acknowledgements only; the member's unacknowledged
//! records are then released). A session belongs to the connection that opened it, as in
//! Kafka 4.4 (a disconnect ends it and releases the member's records), so it is kept in
//! the connection's state on its shard: nothing to share across cores. The number of open
//! sessions is bounded per shard (`group.share.max.share.sessions` divided among shards).
//!
//! Pure: the connection calls `ShareSession::step` with what the request names and gets
//! the partitions to serve or Kafka's error.
use std::collections::BTreeSet;

use uuid::Uuid;

/// The epoch that opens a session.
pub const INITIAL_EPOCH: i32 = 0;
/// The epoch that closes one.
pub const FINAL_EPOCH: i32 = -1;
/// Partitions one session may hold (every share-partition of a large group fits).
pub const MAX_SESSION_PARTITIONS: usize = 100_000;

pub type TopicIdPartition = (Uuid, i32);

/// Kafka's errors for a session that does not fit the request.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ShareSessionError {
    /// SHARE_SESSION_NOT_FOUND: an epoch > 0 for a member without a session here.
    #[error("The share session was not found.")]
    NotFound,
    /// INVALID_SHARE_SESSION_EPOCH.
    #[error("The share session epoch is invalid.")]
    InvalidEpoch,
    /// SHARE_SESSION_LIMIT_REACHED.
    #[error("The limit of share sessions has been reached.")]
    LimitReached,
    /// INVALID_REQUEST, with Kafka's reason.
    #[error("{0}")]
    InvalidRequest(String),
}

/// Which request moves the session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShareRequestKind {
    Fetch,
    Acknowledge,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShareSession {
    pub group_id: String,
    pub member_id: String,
    /// The epoch the next request must carry.
    pub next_epoch: i32,
    pub partitions: BTreeSet<TopicIdPartition>,
}

/// What a request may do once its session checks out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionStep {
    /// The session's partitions to fetch from (empty for an acknowledgement or a close).
    pub fetch: Vec<TopicIdPartition>,
    /// The session closes after this request: the member's records are released.
    pub closing: bool,
    /// A session was opened by this request (counted against the limit).
    pub opened: bool,
}

/// Kafka's epoch after `epoch` (wrapping past i32::MAX to 1, never to 0 or -1).
pub fn next_epoch(epoch: i32) -> i32 {
    if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

impl ShareSession {
    /// Moves `current` (this connection's session, if any) by one request of `kind` from
    /// member `member_id` of `group_id` at `epoch`, naming partitions `named` (with
    /// something to fetch or acknowledge) and `forgotten`. `room`: whether the shard may
    /// open one more session. On error the session is unchanged.
    pub fn step(
        current: &mut Option<ShareSession>,
        group_id: &str,
        member_id: &str,
        epoch: i32,
        kind: ShareRequestKind,
        named: &[TopicIdPartition],
        forgotten: &[TopicIdPartition],
        room: bool,
    ) -> Result<SessionStep, ShareSessionError> {
        let mine = |s: &ShareSession| s.group_id == group_id && s.member_id == member_id;
        match epoch {
            INITIAL_EPOCH => {
                if kind == ShareRequestKind::Acknowledge {
                    // An acknowledgement cannot open a session (Kafka: invalid epoch).
                    return Err(ShareSessionError::InvalidEpoch);
                }
                let replacing = current.as_ref().is_some_and(mine);
                if !replacing && !room {
                    return Err(ShareSessionError::LimitReached);
                }
                let partitions: BTreeSet<TopicIdPartition> = named.iter().copied().collect();
                if partitions.len() > MAX_SESSION_PARTITIONS {
                    return Err(ShareSessionError::InvalidRequest(format!("A share session may hold at most {MAX_SESSION_PARTITIONS} partitions.")));
                }
                let fetch = partitions.iter().copied().collect();
                let opened = current.as_ref().is_none_or(|s| !mine(s));
                *current =
                    Some(ShareSession { group_id: group_id.to_string(), member_id: member_id.to_string(), next_epoch: next_epoch(INITIAL_EPOCH), partitions });
                Ok(SessionStep { fetch, closing: false, opened })
            }
            FINAL_EPOCH => {
                if kind == ShareRequestKind::Fetch && !named.is_empty() && current.is_none() {
                    return Err(ShareSessionError::NotFound);
                }
                Ok(SessionStep { fetch: Vec::new(), closing: true, opened: false })
            }
            e if e > 0 => {
                let Some(s) = current.as_mut().filter(|s| mine(s)) else { return Err(ShareSessionError::NotFound) };
                if s.next_epoch != e {
                    return Err(ShareSessionError::InvalidEpoch);
                }
                if kind == ShareRequestKind::Fetch {
                    let mut partitions = s.partitions.clone();
                    partitions.extend(named.iter().copied());
                    for f in forgotten {
                        partitions.remove(f);
                    }
                    if partitions.len() > MAX_SESSION_PARTITIONS {
                        return Err(ShareSessionError::InvalidRequest(format!("A share session may hold at most {MAX_SESSION_PARTITIONS} partitions.")));
                    }
                    s.partitions = partitions;
                }
                s.next_epoch = next_epoch(e);
                let fetch = if kind == ShareRequestKind::Fetch { s.partitions.iter().copied().collect() } else { Vec::new() };
                Ok(SessionStep { fetch, closing: false, opened: false })
            }
            _ => Err(ShareSessionError::InvalidEpoch),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ShareRequestKind::*;

    fn tp(t: u8, p: i32) -> TopicIdPartition {
        (Uuid::from_bytes([t; 16]), p)
    }

    #[test]
    fn a_session_opens_moves_forward_and_closes() {
        let mut s = None;
        let step = ShareSession::step(&mut s, "g", "m", 0, Fetch, &[tp(1, 0), tp(1, 1)], &[], true).unwrap();
        assert_eq!((step.fetch.len(), step.opened, step.closing), (2, true, false));
        // The next request carries 1, may add and forget partitions; an acknowledgement moves it too.
        let step = ShareSession::step(&mut s, "g", "m", 1, Fetch, &[tp(2, 0)], &[tp(1, 0)], true).unwrap();
        assert_eq!(step.fetch, vec![tp(1, 1), tp(2, 0)]);
        assert_eq!(ShareSession::step(&mut s, "g", "m", 2, Acknowledge, &[tp(1, 1)], &[], true).unwrap().fetch, vec![]);
        assert_eq!(s.as_ref().unwrap().next_epoch, 3);
        let step = ShareSession::step(&mut s, "g", "m", -1, Acknowledge, &[tp(1, 1)], &[], true).unwrap();
        assert!(step.closing);
    }

    #[test]
    fn kafka_errors_for_sessions_that_do_not_fit() {
        let mut s = None;
        assert_eq!(ShareSession::step(&mut s, "g", "m", 3, Fetch, &[], &[], true), Err(ShareSessionError::NotFound));
        assert_eq!(ShareSession::step(&mut s, "g", "m", 0, Acknowledge, &[tp(1, 0)], &[], true), Err(ShareSessionError::InvalidEpoch));
        assert_eq!(ShareSession::step(&mut s, "g", "m", 0, Fetch, &[tp(1, 0)], &[], false), Err(ShareSessionError::LimitReached));
        ShareSession::step(&mut s, "g", "m", 0, Fetch, &[tp(1, 0)], &[], true).unwrap();
        let before = s.clone();
        assert_eq!(ShareSession::step(&mut s, "g", "m", 5, Fetch, &[tp(2, 0)], &[], true), Err(ShareSessionError::InvalidEpoch));
        assert_eq!(ShareSession::step(&mut s, "g", "m", -7, Fetch, &[], &[], true), Err(ShareSessionError::InvalidEpoch));
        assert_eq!(ShareSession::step(&mut s, "g", "other", 1, Fetch, &[], &[], true), Err(ShareSessionError::NotFound));
        assert_eq!(s, before, "a refused request changes nothing");
        // Epoch 0 again replaces the member's session (a client that lost its state), without
        // counting as a new one.
        let step = ShareSession::step(&mut s, "g", "m", 0, Fetch, &[tp(3, 0)], &[], false).unwrap();
        assert_eq!((step.fetch, step.opened), (vec![tp(3, 0)], false));
        assert_eq!(next_epoch(i32::MAX), 1);
    }
}
