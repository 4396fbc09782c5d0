//! The `range` assignor, as Kafka's server-side RangeAssignor: per topic, the subscribed
//! members in a stable order (instance id, else member id) get contiguous ranges, the
//! first `partitions % members` one partition more, so topics with the same partition
//! count are co-partitioned. Its stickiness is the order: static members (instance ids)
//! keep their ranges across restarts; it does not otherwise keep current owners.
use std::collections::{BTreeMap, BTreeSet, HashMap};

use uuid::Uuid;

use super::{Assignment, MemberSpec};

pub fn assign(members: &[MemberSpec], topics: &BTreeMap<Uuid, i32>) -> HashMap<String, Assignment> {
    let mut out: HashMap<String, Assignment> = members.iter().map(|m| (m.id.to_string(), Assignment::new())).collect();
    let mut ordered: Vec<&MemberSpec> = members.iter().collect();
    ordered.sort_by(|a, b| (a.instance_id.unwrap_or(a.id), a.id).cmp(&(b.instance_id.unwrap_or(b.id), b.id)));
    for (t, &n) in topics {
        let subscribed: Vec<&&MemberSpec> = ordered.iter().filter(|m| m.topics.contains(t)).collect();
        if subscribed.is_empty() || n <= 0 {
            continue;
        }
        let count = subscribed.len();
        let n_usize = n as usize;
        let (base, extra) = (n_usize / count, n_usize % count);
        let mut next = 0i32;
        for (i, m) in subscribed.iter().enumerate() {
            let take = (base + usize::from(i < extra)) as i32;
            if take > 0 {
                if let Some(a) = out.get_mut(m.id) {
                    a.insert(*t, (next..next + take).collect::<BTreeSet<i32>>());
                }
            }
            next += take;
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
            MemberSpec { instance_id: None, id: "b", topics: vec![t(1), t(2)], current: None },
            MemberSpec { instance_id: None, id: "a", topics: vec![t(1), t(2)], current: None },
            MemberSpec { instance_id: None, id: "c", topics: vec![t(1)], current: None },
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
        let specs: Vec<MemberSpec> =
            ["x", "y", "z", "w"].iter().map(|id| MemberSpec { instance_id: None, id, topics: vec![t(1), t(2)], current: None }).collect();
        let out = assign(&specs, &topics);
        for a in out.values() {
            assert_eq!(a.get(&t(1)), a.get(&t(2)));
        }
    }

    #[test]
    fn instance_ids_keep_ranges_across_new_member_ids() {
        let topics: BTreeMap<Uuid, i32> = [(t(1), 6)].into_iter().collect();
        let first = assign(
            &[
                MemberSpec { id: "m1", instance_id: Some("i0"), topics: vec![t(1)], current: None },
                MemberSpec { id: "m0", instance_id: Some("i1"), topics: vec![t(1)], current: None },
            ],
            &topics,
        );
        assert_eq!(first["m1"][&t(1)], set(&[0, 1, 2]));
        // After a bounce the members come back with new ids: same instance, same range.
        let second = assign(
            &[
                MemberSpec { id: "z", instance_id: Some("i0"), topics: vec![t(1)], current: None },
                MemberSpec { id: "a", instance_id: Some("i1"), topics: vec![t(1)], current: None },
            ],
            &topics,
        );
        assert_eq!(second["z"][&t(1)], set(&[0, 1, 2]));
        assert_eq!(second["a"][&t(1)], set(&[3, 4, 5]));
    }
}
