//! Tasks of a streams group: a task is (subtopology id, partition). A member holds active,
//! standby and warm-up tasks; its active tasks carry the assignment epoch at which each was
//! granted (Kafka's TasksTupleWithEpochs), which OffsetCommit checks.
use std::collections::{BTreeMap, BTreeSet};

/// Subtopology id → partitions.
pub type TaskSet = BTreeMap<String, BTreeSet<i32>>;

/// Subtopology id → partition → the assignment epoch it was granted in.
pub type TaskEpochs = BTreeMap<String, BTreeMap<i32, i32>>;

/// Active, standby and warm-up tasks (a target assignment, or tasks pending revocation).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TasksTuple {
    pub active: TaskSet,
    pub standby: TaskSet,
    pub warmup: TaskSet,
}

/// A member's current tasks: active ones with their assignment epochs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TasksWithEpochs {
    pub active: TaskEpochs,
    pub standby: TaskSet,
    pub warmup: TaskSet,
}

impl TasksTuple {
    pub fn is_empty(&self) -> bool {
        is_empty(&self.active) && is_empty(&self.standby) && is_empty(&self.warmup)
    }
}

impl TasksWithEpochs {
    pub fn is_empty(&self) -> bool {
        self.active.values().all(|p| p.is_empty()) && is_empty(&self.standby) && is_empty(&self.warmup)
    }

    /// The tasks without their epochs.
    pub fn tasks(&self) -> TasksTuple {
        TasksTuple {
            active: self
                .active
                .iter()
                .map(|(s, ps)| (s.clone(), ps.keys().copied().collect()))
                .filter(|(_, ps): &(String, BTreeSet<i32>)| !ps.is_empty())
                .collect(),
            standby: self.standby.clone(),
            warmup: self.warmup.clone(),
        }
    }
}

/// No partition in any subtopology.
pub fn is_empty(set: &TaskSet) -> bool {
    set.values().all(|p| p.is_empty())
}

/// Whether `(subtopology, partition)` is in `set`.
pub fn contains(set: &TaskSet, subtopology: &str, partition: i32) -> bool {
    set.get(subtopology).is_some_and(|p| p.contains(&partition))
}

/// Adds `(subtopology, partition)` to `set`.
pub fn insert(set: &mut TaskSet, subtopology: &str, partition: i32) {
    set.entry(subtopology.to_string()).or_default().insert(partition);
}

/// Removes `(subtopology, partition)` from `set` (and the subtopology once empty).
pub fn remove(set: &mut TaskSet, subtopology: &str, partition: i32) {
    if let Some(p) = set.get_mut(subtopology) {
        p.remove(&partition);
        if p.is_empty() {
            set.remove(subtopology);
        }
    }
}

/// Every `(subtopology, partition)` of `set`, in order.
pub fn iter(set: &TaskSet) -> impl Iterator<Item = (&str, i32)> {
    set.iter().flat_map(|(s, ps)| ps.iter().map(move |p| (s.as_str(), *p)))
}

/// A task set from `(subtopology, [partitions])` pairs (tests and records).
pub fn task_set<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a [i32])>) -> TaskSet {
    pairs.into_iter().filter(|(_, ps)| !ps.is_empty()).map(|(s, ps)| (s.to_string(), ps.iter().copied().collect())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_insert_remove_and_drop_empty_subtopologies() {
        let mut s = task_set([("0", &[1, 2][..])]);
        insert(&mut s, "1", 0);
        assert!(contains(&s, "1", 0) && contains(&s, "0", 2) && !contains(&s, "0", 0));
        remove(&mut s, "1", 0);
        assert!(!s.contains_key("1"));
        assert_eq!(iter(&s).collect::<Vec<_>>(), vec![("0", 1), ("0", 2)]);
        let w = TasksWithEpochs { active: [("0".to_string(), [(1, 3)].into())].into(), ..Default::default() };
        assert_eq!(w.tasks().active, task_set([("0", &[1][..])]));
        assert!(!w.is_empty() && TasksTuple::default().is_empty());
    }
}
