//! The share sessions (KIP-932) of the members this shard serves, by (group, member).
//! A member's connection stays on one shard, so its session does too (Kafka 4.4 ties a
//! session to its connection). Bounded: `group.share.max.share.sessions` divided among the
//! shards; beyond it a new session is SHARE_SESSION_LIMIT_REACHED.
use std::cell::RefCell;
use std::collections::HashMap;
use std::net::SocketAddr;

use crate::group::share::share_session::{SessionStep, ShareRequestKind, ShareSession, ShareSessionError, TopicIdPartition};

pub struct ShareSessions {
    /// Each session with the connection (client address) that opened it: that
    /// connection's close ends the session and releases the member's records (Kafka's
    /// ShareSessionCache disconnect listener). A session the member opened again from
    /// another connection is not ended by the old one's close.
    sessions: RefCell<HashMap<(String, String), (ShareSession, Option<SocketAddr>)>>,
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
    /// `peer`: the connection the request came on (recorded when it opens the session).
    #[allow(clippy::too_many_arguments)]
    pub fn step(
        &self,
        group_id: &str,
        member_id: &str,
        epoch: i32,
        kind: ShareRequestKind,
        named: &[TopicIdPartition],
        forgotten: &[TopicIdPartition],
        peer: Option<SocketAddr>,
    ) -> Result<(SessionStep, Vec<TopicIdPartition>), ShareSessionError> {
        let mut sessions = self.sessions.borrow_mut();
        let key = (group_id.to_string(), member_id.to_string());
        let room = sessions.len() < self.max;
        let (mut current, opened_on) = match sessions.remove(&key) {
            Some((session, on)) => (Some(session), on),
            None => (None, None),
        };
        let step = ShareSession::step(&mut current, group_id, member_id, epoch, kind, named, forgotten, room);
        // Epoch 0 opens the session, or opens it again (on this connection, perhaps another).
        let opened_on = if epoch == 0 && step.is_ok() { peer } else { opened_on };
        let closed = match (&step, current) {
            (Ok(s), Some(session)) if s.closing => session.partitions.into_iter().collect(),
            (_, Some(session)) => {
                sessions.insert(key, (session, opened_on));
                Vec::new()
            }
            (_, None) => Vec::new(),
        };
        step.map(|s| (s, closed))
    }

    /// Ends the sessions the connection from `peer` opened: (group, member, partitions)
    /// of each, whose records are to be released.
    pub fn close_connection(&self, peer: SocketAddr) -> Vec<(String, String, Vec<TopicIdPartition>)> {
        let mut sessions = self.sessions.borrow_mut();
        let ended: Vec<(String, String)> = sessions.iter().filter(|(_, (_, on))| *on == Some(peer)).map(|(k, _)| k.clone()).collect();
        ended.into_iter().filter_map(|k| sessions.remove(&k).map(|(session, _)| (k.0, k.1, session.partitions.into_iter().collect()))).collect()
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
            s.step("g", m, 0, Fetch, &[tp(0)], &[], None).unwrap();
        }
        assert_eq!(s.step("g", "d", 0, Fetch, &[tp(0)], &[], None).unwrap_err(), ShareSessionError::LimitReached);
        assert_eq!(s.len(), 3);
        s.step("g", "a", 1, Fetch, &[tp(1)], &[], None).unwrap();
        s.step("g", "a", -1, Fetch, &[], &[], None).unwrap();
        assert_eq!(s.len(), 2, "epoch -1 closes the session");
        s.step("g", "d", 0, Fetch, &[tp(0)], &[], None).unwrap();
    }

    /// A connection's close ends the sessions it opened, not one the member opened again
    /// from another connection.
    #[test]
    fn a_connection_ends_only_the_sessions_it_opened() {
        let s = ShareSessions::new(10, 1);
        let (c1, c2): (SocketAddr, SocketAddr) = ("127.0.0.1:1000".parse().unwrap(), "127.0.0.1:2000".parse().unwrap());
        s.step("g", "a", 0, Fetch, &[tp(0)], &[], Some(c1)).unwrap();
        s.step("g", "a", 1, Fetch, &[tp(1)], &[], Some(c2)).unwrap();
        s.step("g", "b", 0, Fetch, &[tp(0)], &[], Some(c2)).unwrap();
        assert_eq!(s.close_connection(c2).len(), 1, "b's session only: a's was opened on c1");
        assert_eq!(s.close_connection(c1), vec![("g".to_string(), "a".to_string(), vec![tp(0), tp(1)])]);
        assert!(s.is_empty());
        s.step("g", "a", 0, Fetch, &[tp(0)], &[], Some(c1)).unwrap();
        s.step("g", "a", 0, Fetch, &[tp(0)], &[], Some(c2)).unwrap();
        assert!(s.close_connection(c1).is_empty(), "reopened on c2");
        assert_eq!(s.len(), 1);
    }
}
