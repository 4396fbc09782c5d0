//! The `range` assignor: per topic, the subscribed members (by member id) get contiguous
//! ranges, the first `partitions % members` one partition more, so topics with the same
//! partition count are co-partitioned. Sticky: a member keeps partitions of its current
//! target up to its quota; the free ones fill the members under quota in order.
use std::collections::{BTreeMap, BTreeSet, HashMap};

use uuid::Uuid;

use super::{Assignment, MemberSpec};

pub fn assign(members: &[MemberSpec], topics: &BTreeMap<Uuid, i32>) -> HashMap<String, Assignment> {
    let mut out: HashMap<String, Assignment> = members.iter().map(|m| (m.id.to_string(), Assignment::new())).collect();
    for (t, &n) in topics {
        let mut subscribed: Vec<&MemberSpec> = members.iter().filter(|m| m.topics.contains(t)).collect();
        if subscribed.is_empty() || n <= 0 {
            continue;
        }
        subscribed.sort_by(|a, b| a.id.cmp(b.id));
        let count = subscribed.len();
        let n_usize = n as usize;
        let (base, extra) = (n_usize / count, n_usize % count);
        let quota = |i: usize| base + usize::from(i < extra);
        let mut taken: BTreeSet<i32> = BTreeSet::new();
        let mut got: Vec<BTreeSet<i32>> = vec![BTreeSet::new(); count];
        for (i, m) in subscribed.iter().enumerate() {
            let Some(cur) = m.current.and_then(|c| c.get(t)) else { continue };
            for &p in cur.iter().filter(|p| (0..n).contains(*p)) {
                if got[i].len() >= quota(i) {
                    break;
                }
                if taken.insert(p) {
                    got[i].insert(p);
                }
            }
        }
        let mut free = (0..n).filter(|p| !taken.contains(p));
        for (i, g) in got.iter_mut().enumerate() {
            while g.len() < quota(i) {
                match free.next() {
                    Some(p) => {
                        g.insert(p);
                    }
                    None => break,
                }
            }
        }
        for (m, g) in subscribed.iter().zip(got) {
            if !g.is_empty() {
                if let Some(a) = out.get_mut(m.id) {
                    a.insert(*t, g);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    fn set(ps: &[i32]) -> BTreeSet<i32> {
        ps.iter().copied().collect()
    }

    #[test]
    fn contiguous_ranges_per_topic() {
        let topics: BTreeMap<Uuid, i32> = [(t(1), 7), (t(2), 3)].into_iter().collect();
        let specs = vec![
            MemberSpec { id: "b", topics: vec![t(1), t(2)], current: None },
            MemberSpec { id: "a", topics: vec![t(1), t(2)], current: None },
            MemberSpec { id: "c", topics: vec![t(1)], current: None },
        ];
        let out = assign(&specs, &topics);
        assert_eq!(out["a"][&t(1)], set(&[0, 1, 2]));
        assert_eq!(out["b"][&t(1)], set(&[3, 4]));
        assert_eq!(out["c"][&t(1)], set(&[5, 6]));
        // Topic 2 is split between its two subscribers only.
        assert_eq!(out["a"][&t(2)], set(&[0, 1]));
        assert_eq!(out["b"][&t(2)], set(&[2]));
        assert!(!out["c"].contains_key(&t(2)));
    }

    #[test]
    fn co_partitioned_topics_get_the_same_ranges() {
        let topics: BTreeMap<Uuid, i32> = [(t(1), 6), (t(2), 6)].into_iter().collect();
        let specs: Vec<MemberSpec> = ["x", "y", "z", "w"].iter().map(|id| MemberSpec { id, topics: vec![t(1), t(2)], current: None }).collect();
        let out = assign(&specs, &topics);
        for a in out.values() {
            assert_eq!(a.get(&t(1)), a.get(&t(2)));
        }
    }

    #[test]
    fn sticky_within_quota() {
        let topics: BTreeMap<Uuid, i32> = [(t(1), 6)].into_iter().collect();
        let specs = vec![MemberSpec { id: "a", topics: vec![t(1)], current: None }, MemberSpec { id: "b", topics: vec![t(1)], current: None }];
        let first = assign(&specs, &topics);
        assert_eq!(first["a"][&t(1)], set(&[0, 1, 2]));
        // "0" joins and sorts first: a and b keep what fits their new quota of 2.
        let specs = vec![
            MemberSpec { id: "0", topics: vec![t(1)], current: None },
            MemberSpec { id: "a", topics: vec![t(1)], current: first.get("a") },
            MemberSpec { id: "b", topics: vec![t(1)], current: first.get("b") },
        ];
        let second = assign(&specs, &topics);
        assert!(second["a"][&t(1)].is_subset(&first["a"][&t(1)]));
        assert!(second["b"][&t(1)].is_subset(&first["b"][&t(1)]));
        assert_eq!(second["0"][&t(1)].len(), 2);
        let all: BTreeSet<i32> = second.values().flat_map(|a| a[&t(1)].iter().copied()).collect();
        assert_eq!(all, set(&[0, 1, 2, 3, 4, 5]));
    }
}
