//! The share sessions (KIP-932) of the members this shard serves, by (group, member).
//! A member's connection stays on one shard, so its session does too (Kafka 4.4 ties a
//! session to its connection). Bounded: at most `MAX_SHARE_SESSIONS_PER_SHARD` (Kafka's
//! `group.share.max.share.sessions` default, per shard here); beyond it a new session is
//! SHARE_SESSION_LIMIT_REACHED.
use std::cell::RefCell;
use std::collections::HashMap;

use crate::group::share::share_session::{SessionStep, ShareRequestKind, ShareSession, ShareSessionError, TopicIdPartition};

pub const MAX_SHARE_SESSIONS_PER_SHARD: usize = 2000;

#[derive(Default)]
pub struct ShareSessions {
    sessions: RefCell<HashMap<(String, String), ShareSession>>,
}

impl ShareSessions {
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
        let room = sessions.len() < MAX_SHARE_SESSIONS_PER_SHARD;
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
