//! The `uniform` assignor: spreads all partitions of the subscribed topics as evenly as
//! the subscriptions allow (member loads differ by at most one when every member
//! subscribes to the same topics), keeping each member's current partitions where that
//! stays balanced.
//!
//! 1. each member keeps the partitions of its current target it still subscribes to;
//! 2. free partitions go, one by one, to the least loaded subscribed member;
//! 3. a partition moves from the most loaded member to the least loaded subscribed one
//!    while the giver has at least two more: each move lowers the sum of squared loads,
//!    so it ends, and a member gives up only what balance needs.
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

    // 3. Balance: always from the most loaded member that can give, to the least loaded
    // member that can take, so each old member gives up only what it must.
    let mut owned_by: Vec<BTreeSet<(Uuid, i32)>> = vec![BTreeSet::new(); members.len()];
    for (k, &i) in &owner {
        owned_by[i].insert(*k);
    }
    loop {
        let mut by_load: Vec<usize> = (0..members.len()).collect();
        by_load.sort_by_key(|&i| (std::cmp::Reverse(load[i]), i));
        let mut step = None;
        'find: for &a in &by_load {
            // Highest partitions move first: a member keeps the front of its range.
            for k in owned_by[a].iter().rev() {
                if let Some(b) = by_topic.get(&k.0).and_then(|e| least_loaded(&load, e)) {
                    if load[a] > load[b] + 1 {
                        step = Some((a, b, *k));
                        break 'find;
                    }
                }
            }
        }
        let Some((a, b, k)) = step else { break };
        owned_by[a].remove(&k);
        owned_by[b].insert(k);
        owner.insert(k, b);
        load[a] -= 1;
        load[b] += 1;
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
    fn a_joining_member_takes_one_from_each_and_nobody_swaps() {
        // Three members holding contiguous blocks (as after sequential joins).
        let topics: BTreeMap<Uuid, i32> = [(t(1), 12)].into_iter().collect();
        let block = |r: std::ops::Range<i32>| -> Assignment { [(t(1), r.collect())].into_iter().collect() };
        let (a, b, c) = (block(0..4), block(4..8), block(8..12));
        let specs = vec![
            MemberSpec { instance_id: None, id: "a", topics: vec![t(1)], current: Some(&a) },
            MemberSpec { instance_id: None, id: "b", topics: vec![t(1)], current: Some(&b) },
            MemberSpec { instance_id: None, id: "c", topics: vec![t(1)], current: Some(&c) },
            MemberSpec { instance_id: None, id: "d", topics: vec![t(1)], current: None },
        ];
        let out = assign(&specs, &topics);
        for (id, before) in [("a", &a), ("b", &b), ("c", &c)] {
            assert_eq!(count(&out[id]), 3);
            assert!(out[id][&t(1)].is_subset(&before[&t(1)]), "{id} received a partition: {:?}", out[id]);
        }
        assert_eq!(count(&out["d"]), 3);
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
