//! The share sessions (KIP-932) of the members this shard serves, by (group, member).
//! A member's connection stays on one shard, so its session does too (Kafka 4.4 ties a
//! session to its connection). Bounded: `group.share.max.share.sessions` divided among the
//! shards; beyond it a new session is SHARE_SESSION_LIMIT_REACHED.
use std::cell::RefCell;
use std::collections::HashMap;

use crate::group::share::share_session::{SessionStep, ShareRequestKind, ShareSession, ShareSessionError, TopicIdPartition};

pub struct ShareSessions {
    sessions: RefCell<HashMap<(String, String), ShareSession>>,
    /// Sessions this shard keeps at most.
    max: usize,
}

impl ShareSessions {
    /// This shard's part of the broker's `max_sessions` over `shards` shards (at least one).
    pub fn new(max_sessions: usize, shards: usize) -> ShareSessions {
        ShareSessions { sessions: RefCell::new(HashMap::new()), max: max_sessions.div_ceil(shards.max(1)).max(1) }
    }

    /// Moves the member's session by one request (see `ShareSession::step`); a closing
    /// step removes it, returning its partitions (their records are released).
    pub fn step(
        &self,
        group_id: &str,
        member_id: &str,
        epoch: i32,
        kind: ShareRequestKind,
        named: &[TopicIdPartition],
        forgotten: &[TopicIdPartition],
    ) -> Result<(SessionStep, Vec<TopicIdPartition>), ShareSessionError> {
        let mut sessions = self.sessions.borrow_mut();
        let key = (group_id.to_string(), member_id.to_string());
        let room = sessions.len() < self.max;
        let mut current = sessions.remove(&key);
        let step = ShareSession::step(&mut current, group_id, member_id, epoch, kind, named, forgotten, room);
        let closed = match (&step, current) {
            (Ok(s), Some(session)) if s.closing => session.partitions.into_iter().collect(),
            (_, Some(session)) => {
                sessions.insert(key, session);
                Vec::new()
            }
            (_, None) => Vec::new(),
        };
        step.map(|s| (s, closed))
    }

    pub fn len(&self) -> usize {
        self.sessions.borrow().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::share::share_session::ShareRequestKind::Fetch;

    fn tp(p: i32) -> TopicIdPartition {
        (uuid::Uuid::from_bytes([1; 16]), p)
    }

    /// group.share.max.share.sessions 5 over 2 shards: 3 here. A fourth member is refused
    /// with Kafka's error; a member's own next request is not a new session; a closed
    /// session makes room.
    #[test]
    fn sessions_are_bounded_by_the_brokers_limit_divided_among_shards() {
        let s = ShareSessions::new(5, 2);
        for m in ["a", "b", "c"] {
            s.step("g", m, 0, Fetch, &[tp(0)], &[]).unwrap();
        }
        assert_eq!(s.step("g", "d", 0, Fetch, &[tp(0)], &[]).unwrap_err(), ShareSessionError::LimitReached);
        assert_eq!(s.len(), 3);
        s.step("g", "a", 1, Fetch, &[tp(1)], &[]).unwrap();
        s.step("g", "a", -1, Fetch, &[], &[]).unwrap();
        assert_eq!(s.len(), 2, "epoch -1 closes the session");
        s.step("g", "d", 0, Fetch, &[tp(0)], &[]).unwrap();
    }
}
