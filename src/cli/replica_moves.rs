//! The replica move plan of `shardlog cluster balance --moves N`: moves replicas from the
//! active brokers holding the most to those holding the fewest until the counts differ by
//! at most one, or N moves are planned (Kafka leaves this to `kafka-reassign-partitions.sh
//! --generate`; Redpanda's partition balancer does it on its own). Applied through
//! AlterPartitionReassignments, so each move is the controller's add-then-remove
//! reassignment (`controller/reassignment.rs`): the ISR never shrinks for it.
//!
//! Rules, in order: a partition already being reassigned is left alone; a broker never
//! gets a second replica of a partition; a move keeps the partition's rack spread (the
//! new broker is in the moved replica's rack, or in a rack the partition does not use
//! yet); a replica that is not the leader moves before one that is (no leader change).
//! Pure: planned from a snapshot of the cluster.
use std::collections::{BTreeMap, BTreeSet};

use super::decommission::{Broker, Partition};

/// One planned move: (topic, partition, replicas before, replicas after).
pub type Move = (String, i32, Vec<i32>, Vec<i32>);

pub fn plan(brokers: &[Broker], partitions: &[Partition], max_moves: usize) -> Vec<Move> {
    let active: Vec<&Broker> = brokers.iter().filter(|b| !b.fenced).collect();
    let rack_of = |id: i32| brokers.iter().find(|b| b.id == id).and_then(|b| b.rack.clone());
    let mut load: BTreeMap<i32, usize> = active.iter().map(|b| (b.id, 0)).collect();
    for p in partitions {
        for r in &p.replicas {
            if let Some(n) = load.get_mut(r) {
                *n += 1;
            }
        }
    }
    let mut replicas: Vec<Vec<i32>> = partitions.iter().map(|p| p.replicas.clone()).collect();
    let mut touched: BTreeSet<usize> = partitions.iter().enumerate().filter(|(_, p)| p.moving).map(|(i, _)| i).collect();
    let mut out = Vec::new();
    while out.len() < max_moves {
        // The pair with the widest gap (>= 2) that has a movable replica: most loaded
        // source, least loaded target, ties by id.
        let mut pairs: Vec<(i32, i32, usize)> = Vec::new();
        for (&hi, &hi_n) in &load {
            for (&lo, &lo_n) in &load {
                if hi_n >= lo_n + 2 {
                    pairs.push((hi, lo, hi_n - lo_n));
                }
            }
        }
        pairs.sort_by_key(|&(hi, lo, gap)| (std::cmp::Reverse(gap), std::cmp::Reverse(hi), lo));
        let movable = |i: usize, hi: i32, lo: i32| -> bool {
            let rs = &replicas[i];
            if touched.contains(&i) || !rs.contains(&hi) || rs.contains(&lo) {
                return false;
            }
            let others: BTreeSet<Option<String>> = rs.iter().filter(|r| **r != hi).map(|r| rack_of(*r)).collect();
            rack_of(lo) == rack_of(hi) || !others.contains(&rack_of(lo))
        };
        let found = pairs.iter().find_map(|&(hi, lo, _)| {
            // A follower moves before a leader (no leadership change).
            (0..partitions.len()).filter(|i| movable(*i, hi, lo)).min_by_key(|i| partitions[*i].leader == hi).map(|i| (hi, lo, i))
        });
        let Some((hi, lo, i)) = found else { break };
        let before = replicas[i].clone();
        let after: Vec<i32> = before.iter().map(|r| if *r == hi { lo } else { *r }).collect();
        replicas[i] = after.clone();
        touched.insert(i);
        *load.entry(hi).or_default() -= 1;
        *load.entry(lo).or_default() += 1;
        out.push((partitions[i].topic.clone(), partitions[i].index, before, after));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::decommission::fixtures::{b, p};
    use super::*;

    fn counts(brokers: &[Broker], parts: &[Partition], moves: &[Move]) -> BTreeMap<i32, usize> {
        let mut after: Vec<Vec<i32>> = parts.iter().map(|p| p.replicas.clone()).collect();
        for (_, i, _, to) in moves {
            after[*i as usize] = to.clone();
        }
        let mut n: BTreeMap<i32, usize> = brokers.iter().map(|b| (b.id, 0)).collect();
        for rs in &after {
            for r in rs {
                *n.entry(*r).or_default() += 1;
            }
        }
        n
    }

    #[test]
    fn a_new_broker_gets_replicas_until_even() {
        let brokers = [b(1, ""), b(2, ""), b(3, "")];
        let parts: Vec<Partition> = (0..6).map(|i| p(i, 1 + (i % 2), &[1 + (i % 2), 2 - (i % 2)])).collect();
        let moves = plan(&brokers, &parts, 100);
        let n = counts(&brokers, &parts, &moves);
        assert!(n.values().max().unwrap() - n.values().min().unwrap() <= 1, "{n:?} after {moves:?}");
        assert_eq!(n[&3], 4, "{n:?}");
        // Followers move, not leaders.
        for (_, i, before, after) in &moves {
            let gone: Vec<_> = before.iter().filter(|r| !after.contains(r)).collect();
            assert!(!gone.contains(&&parts[*i as usize].leader), "moved the leader of {i}: {before:?} -> {after:?}");
        }
    }

    #[test]
    fn capped_racks_kept_and_moving_partitions_left_alone() {
        let brokers = [b(1, "a"), b(2, "b"), b(3, "b")];
        let parts: Vec<Partition> = (0..4).map(|i| p(i, 1, &[1, 2])).collect();
        // 3 is in rack b: it may take 2's replicas (same rack), never 1's (rack a would be lost).
        let moves = plan(&brokers, &parts, 100);
        assert!(!moves.is_empty());
        for (_, _, before, after) in &moves {
            assert_eq!((before[0], after[0]), (1, 1), "rack a's replica stays: {before:?} -> {after:?}");
        }
        assert_eq!(plan(&brokers, &parts, 1).len(), 1, "at most max_moves");
        let mut moving = parts.clone();
        for q in &mut moving {
            q.moving = true;
        }
        assert!(plan(&brokers, &moving, 100).is_empty());
        let even = [p(0, 1, &[1, 2]), p(1, 2, &[2, 3]), p(2, 3, &[3, 1])];
        assert!(plan(&brokers, &even, 100).is_empty(), "balanced: nothing to do");
    }
}
