//! The `uniform` assignor: spreads all partitions of the subscribed topics as evenly as
//! the subscriptions allow (member loads differ by at most one when every member
//! subscribes to the same topics), keeping each member's current partitions where that
//! stays balanced.
//!
//! 1. each member keeps the partitions of its current target it still subscribes to;
//! 2. free partitions go, one by one, to the least loaded subscribed member;
//! 3. a partition moves from its owner to the least loaded subscribed member while the
//!    owner has at least two more: each move lowers the sum of squared loads, so it ends.
use std::collections::{BTreeMap, BTreeSet, HashMap};

use uuid::Uuid;

use super::{Assignment, MemberSpec};

pub fn assign(members: &[MemberSpec], topics: &BTreeMap<Uuid, i32>) -> HashMap<String, Assignment> {
    let mut order: Vec<usize> = (0..members.len()).collect();
    order.sort_by(|a, b| members[*a].id.cmp(members[*b].id));
    let members: Vec<&MemberSpec> = order.into_iter().map(|i| &members[i]).collect();
    let subs: Vec<BTreeSet<Uuid>> = members.iter().map(|m| m.topics.iter().filter(|t| topics.contains_key(t)).copied().collect()).collect();
    let mut by_topic: HashMap<Uuid, Vec<usize>> = HashMap::new();
    for (i, s) in subs.iter().enumerate() {
        for t in s {
            by_topic.entry(*t).or_default().push(i);
        }
    }
    let mut owner: BTreeMap<(Uuid, i32), usize> = BTreeMap::new();
    let mut load = vec![0usize; members.len()];

    // 1. Stickiness.
    for (i, m) in members.iter().enumerate() {
        let Some(cur) = m.current else { continue };
        for (t, ps) in cur {
            let Some(&n) = topics.get(t) else { continue };
            if !subs[i].contains(t) {
                continue;
            }
            for &p in ps.iter().filter(|p| (0..n).contains(*p)) {
                if let std::collections::btree_map::Entry::Vacant(e) = owner.entry((*t, p)) {
                    e.insert(i);
                    load[i] += 1;
                }
            }
        }
    }
    let least_loaded = |load: &[usize], eligible: &[usize]| eligible.iter().copied().min_by_key(|&i| (load[i], i));

    // 2. Free partitions.
    for (t, &n) in topics {
        let Some(eligible) = by_topic.get(t) else { continue };
        for p in 0..n.max(0) {
            if owner.contains_key(&(*t, p)) {
                continue;
            }
            if let Some(i) = least_loaded(&load, eligible) {
                owner.insert((*t, p), i);
                load[i] += 1;
            }
        }
    }

    // 3. Balance.
    loop {
        let mut moved = false;
        let keys: Vec<(Uuid, i32)> = owner.keys().copied().collect();
        for k in keys {
            let Some(&a) = owner.get(&k) else { continue };
            let Some(b) = by_topic.get(&k.0).and_then(|e| least_loaded(&load, e)) else { continue };
            if load[a] > load[b] + 1 {
                owner.insert(k, b);
                load[a] -= 1;
                load[b] += 1;
                moved = true;
            }
        }
        if !moved {
            break;
        }
    }

    let mut out: HashMap<String, Assignment> = members.iter().map(|m| (m.id.to_string(), Assignment::new())).collect();
    for ((t, p), i) in owner {
        if let Some(a) = out.get_mut(members[i].id) {
            a.entry(t).or_default().insert(p);
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

    fn count(a: &Assignment) -> usize {
        a.values().map(|s| s.len()).sum()
    }

    fn all_assigned_once(out: &HashMap<String, Assignment>, topics: &BTreeMap<Uuid, i32>, eligible: impl Fn(&str, Uuid) -> bool) {
        let mut seen = BTreeSet::new();
        for (m, a) in out {
            for (topic, ps) in a {
                assert!(eligible(m, *topic), "{m} got unsubscribed topic");
                for p in ps {
                    assert!(seen.insert((*topic, *p)), "partition {topic}/{p} assigned twice");
                }
            }
        }
        let total: i32 = topics.values().sum();
        assert_eq!(seen.len(), total as usize);
    }

    #[test]
    fn balanced_and_complete() {
        let topics: BTreeMap<Uuid, i32> = [(t(1), 12), (t(2), 5)].into_iter().collect();
        for n in 1..=7 {
            let ids: Vec<String> = (0..n).map(|i| format!("m{i}")).collect();
            let specs: Vec<MemberSpec> = ids.iter().map(|id| MemberSpec { instance_id: None, id, topics: vec![t(1), t(2)], current: None }).collect();
            let out = assign(&specs, &topics);
            all_assigned_once(&out, &topics, |_, _| true);
            let loads: Vec<usize> = out.values().map(count).collect();
            assert!(loads.iter().max().unwrap() - loads.iter().min().unwrap() <= 1, "{n} members: {loads:?}");
        }
    }

    #[test]
    fn sticky_when_a_member_joins_and_leaves() {
        let topics: BTreeMap<Uuid, i32> = [(t(1), 12)].into_iter().collect();
        let ids = ["a", "b", "c"];
        let specs: Vec<MemberSpec> = ids.iter().map(|id| MemberSpec { instance_id: None, id, topics: vec![t(1)], current: None }).collect();
        let first = assign(&specs, &topics);
        // d joins: each of a, b, c gives up exactly one partition, keeping the rest.
        let ids4 = ["a", "b", "c", "d"];
        let specs: Vec<MemberSpec> = ids4.iter().map(|id| MemberSpec { instance_id: None, id, topics: vec![t(1)], current: first.get(*id) }).collect();
        let second = assign(&specs, &topics);
        all_assigned_once(&second, &topics, |_, _| true);
        for id in ids {
            assert_eq!(count(&second[id]), 3);
            let kept = second[id][&t(1)].intersection(&first[id][&t(1)]).count();
            assert_eq!(kept, 3, "{id} moved more than needed");
        }
        // a leaves: the others keep theirs and share a's.
        let ids3 = ["b", "c", "d"];
        let specs: Vec<MemberSpec> = ids3.iter().map(|id| MemberSpec { instance_id: None, id, topics: vec![t(1)], current: second.get(*id) }).collect();
        let third = assign(&specs, &topics);
        all_assigned_once(&third, &topics, |_, _| true);
        for id in ids3 {
            assert_eq!(count(&third[id]), 4);
            assert!(second[id][&t(1)].is_subset(&third[id][&t(1)]), "{id} lost a partition");
        }
    }

    #[test]
    fn heterogeneous_subscriptions() {
        let topics: BTreeMap<Uuid, i32> = [(t(1), 6), (t(2), 6)].into_iter().collect();
        let specs = vec![
            MemberSpec { instance_id: None, id: "a", topics: vec![t(1)], current: None },
            MemberSpec { instance_id: None, id: "b", topics: vec![t(1), t(2)], current: None },
            MemberSpec { instance_id: None, id: "c", topics: vec![t(2)], current: None },
            MemberSpec { instance_id: None, id: "d", topics: vec![t(3)], current: None },
        ];
        let out = assign(&specs, &topics);
        all_assigned_once(&out, &topics, |m, topic| match m {
            "a" => topic == t(1),
            "c" => topic == t(2),
            "b" => true,
            _ => false,
        });
        assert_eq!((count(&out["a"]), count(&out["b"]), count(&out["c"]), count(&out["d"])), (4, 4, 4, 0));
    }
}
