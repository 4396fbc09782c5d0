//! The share groups' `simple` assignor (KIP-932): partitions may be shared, so every
//! subscribed partition goes to at least one member and every member subscribed to a
//! topic with partitions gets at least one of them. Per topic, over the members
//! subscribed to it (in member-id order): with at least as many members as partitions,
//! member k reads partition k mod P (several members share a partition); with fewer,
//! partition j goes to member j mod M. A running offset spreads the first partitions of
//! successive topics over different members. Deterministic: every coordinator computes
//! the same assignment from the same group.
use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

/// Partitions by topic id.
pub type Assignment = BTreeMap<Uuid, BTreeSet<i32>>;

/// `members`: member id → subscribed topic ids; `partitions`: topic id → the partitions
/// that may be assigned (those whose share state is initialized; topics that do not
/// exist are absent). The result has an entry for every member.
pub fn assign(members: &BTreeMap<String, BTreeSet<Uuid>>, partitions: &BTreeMap<Uuid, BTreeSet<i32>>) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = members.keys().map(|m| (m.clone(), Assignment::new())).collect();
    let mut rotation = 0usize;
    for (&topic, assignable) in partitions {
        if assignable.is_empty() {
            continue;
        }
        let subscribed: Vec<&String> = members.iter().filter(|(_, topics)| topics.contains(&topic)).map(|(m, _)| m).collect();
        if subscribed.is_empty() {
            continue;
        }
        let assignable: Vec<i32> = assignable.iter().copied().collect();
        let (n_members, n_partitions) = (subscribed.len(), assignable.len());
        let mut give = |member: &String, j: usize| {
            out.get_mut(member).expect("every member has an entry").entry(topic).or_default().insert(assignable[j]);
        };
        if n_members >= n_partitions {
            for (k, member) in subscribed.iter().enumerate() {
                give(member, (k + rotation) % n_partitions);
            }
        } else {
            for j in 0..n_partitions {
                give(subscribed[(j + rotation) % n_members], j);
            }
        }
        rotation += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic(n: u8) -> Uuid {
        Uuid::from_bytes([n; 16])
    }

    fn members(spec: &[(&str, &[u8])]) -> BTreeMap<String, BTreeSet<Uuid>> {
        spec.iter().map(|(m, ts)| (m.to_string(), ts.iter().map(|&t| topic(t)).collect())).collect()
    }

    fn all(n: i32) -> BTreeSet<i32> {
        (0..n).collect()
    }

    fn count(a: &Assignment) -> usize {
        a.values().map(|p| p.len()).sum()
    }

    #[test]
    fn more_members_than_partitions_share_them() {
        let got = assign(&members(&[("a", &[1]), ("b", &[1]), ("c", &[1]), ("d", &[1])]), &[(topic(1), all(1))].into());
        assert!(got.values().all(|a| a[&topic(1)] == BTreeSet::from([0])), "{got:?}");
        let got = assign(&members(&[("a", &[1]), ("b", &[1]), ("c", &[1])]), &[(topic(1), all(2))].into());
        let mut readers = [0; 2];
        for a in got.values() {
            assert_eq!(count(a), 1);
            readers[*a[&topic(1)].first().unwrap() as usize] += 1;
        }
        assert!(readers.iter().all(|&r| r >= 1), "every partition read: {readers:?}");
    }

    #[test]
    fn fewer_members_split_the_partitions() {
        let got = assign(&members(&[("a", &[1, 2]), ("b", &[1, 2])]), &[(topic(1), all(5)), (topic(2), all(1))].into());
        let all: BTreeSet<i32> = got.values().flat_map(|a| a.get(&topic(1)).into_iter().flatten().copied()).collect();
        assert_eq!(all, (0..5).collect());
        let of_t1 = |m: &str| got[m].get(&topic(1)).map_or(0, |p| p.len());
        assert_eq!(of_t1("a") + of_t1("b"), 5, "t1: each partition to one member");
        assert!(of_t1("a").abs_diff(of_t1("b")) <= 1, "balanced: {} vs {}", of_t1("a"), of_t1("b"));
        assert!(got.values().all(|a| a[&topic(2)] == BTreeSet::from([0])), "t2's one partition shared by both");
    }

    #[test]
    fn only_subscribers_and_existing_topics() {
        let got = assign(&members(&[("a", &[1]), ("b", &[2]), ("c", &[9])]), &[(topic(1), all(2)), (topic(2), all(1))].into());
        assert_eq!(got["a"], Assignment::from([(topic(1), BTreeSet::from([0, 1]))]));
        assert_eq!(got["b"], Assignment::from([(topic(2), BTreeSet::from([0]))]));
        assert!(got["c"].is_empty(), "topic 9 does not exist");
        assert_eq!(
            assign(&members(&[("a", &[1])]), &[(topic(1), all(3))].into()),
            assign(&members(&[("a", &[1])]), &[(topic(1), all(3))].into()),
            "deterministic"
        );
    }
}
