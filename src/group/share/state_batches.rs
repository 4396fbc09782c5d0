//! Combining a share-partition's persisted state batches with a write's, as Kafka 4.4's
//! share coordinator does (its PersisterStateBatchCombiner): where ranges overlap, the
//! one with the higher delivery count wins, then the higher delivery state (4 ARCHIVED >
//! 3 ARCHIVING > 2 ACKNOWLEDGED > 0 AVAILABLE); the newer write does not win for being
//! newer, so a late write can never undo a delivery or an acknowledgement. Offsets below the
//! start offset are dropped (nothing is dropped while the start offset is -1, unknown);
//! the result is sorted, without overlaps, and adjacent ranges with the same state and
//! count are merged.
//!
//! The sweep runs once over the ranges' ends: O(n log n) in the number of ranges.
use std::collections::BTreeMap;

use super::state_records::PersistedBatch;

/// Whether `b` can be stored: a non-empty range of offsets and a count that is not negative
/// (a write carrying anything else is refused with INVALID_REQUEST).
pub fn is_valid(b: &PersistedBatch) -> bool {
    b.first_offset >= 0 && b.first_offset <= b.last_offset && b.delivery_count >= 0
}

/// `current` and `update` combined, every range at or above `start_offset`. Both must be
/// valid (`is_valid`); within each, ranges may overlap and come in any order.
pub fn combine(current: &[PersistedBatch], update: &[PersistedBatch], start_offset: i64) -> Vec<PersistedBatch> {
    // Ends are exclusive and i128, so a range ending at i64::MAX cannot overflow.
    let mut events: Vec<(i128, bool, (i16, i8))> = Vec::with_capacity(2 * (current.len() + update.len()));
    for b in current.iter().chain(update) {
        debug_assert!(is_valid(b), "{b:?}");
        let first = if start_offset >= 0 { b.first_offset.max(start_offset) } else { b.first_offset };
        if first > b.last_offset {
            continue;
        }
        let rank = (b.delivery_count, b.delivery_state);
        events.push((first as i128, true, rank));
        events.push((b.last_offset as i128 + 1, false, rank));
    }
    events.sort_unstable_by_key(|(at, _, _)| *at);
    let mut active: BTreeMap<(i16, i8), usize> = BTreeMap::new();
    let mut out: Vec<PersistedBatch> = Vec::new();
    let mut i = 0;
    while i < events.len() {
        let at = events[i].0;
        while i < events.len() && events[i].0 == at {
            let (_, opens, rank) = events[i];
            if opens {
                *active.entry(rank).or_default() += 1;
            } else if let Some(n) = active.get_mut(&rank) {
                *n -= 1;
                if *n == 0 {
                    active.remove(&rank);
                }
            }
            i += 1;
        }
        let (Some((&(count, state), _)), Some(&(next, _, _))) = (active.last_key_value(), events.get(i)) else { continue };
        let (first, last) = (at as i64, (next - 1) as i64);
        match out.last_mut() {
            Some(prev) if prev.last_offset + 1 == first && prev.delivery_count == count && prev.delivery_state == state => prev.last_offset = last,
            _ => out.push(PersistedBatch { first_offset: first, last_offset: last, delivery_state: state, delivery_count: count }),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn b(first: i64, last: i64, state: i8, count: i16) -> PersistedBatch {
        PersistedBatch { first_offset: first, last_offset: last, delivery_state: state, delivery_count: count }
    }

    #[test]
    fn the_higher_count_then_the_higher_state_wins_not_the_newer() {
        let current = [b(0, 9, 0, 2)];
        // A late write of an earlier delivery loses; a later delivery wins.
        assert_eq!(combine(&current, &[b(3, 4, 2, 1)], 0), vec![b(0, 9, 0, 2)]);
        assert_eq!(combine(&current, &[b(3, 4, 0, 3)], 0), vec![b(0, 2, 0, 2), b(3, 4, 0, 3), b(5, 9, 0, 2)]);
        // At one count, acknowledged beats available and archived beats both.
        assert_eq!(combine(&current, &[b(3, 4, 2, 2), b(4, 6, 4, 2)], 0), vec![b(0, 2, 0, 2), b(3, 3, 2, 2), b(4, 6, 4, 2), b(7, 9, 0, 2)]);
    }

    #[test]
    fn the_start_offset_prunes_and_minus_one_keeps_all() {
        let current = [b(0, 4, 2, 1), b(5, 9, 0, 1)];
        assert_eq!(combine(&current, &[], 7), vec![b(7, 9, 0, 1)]);
        assert_eq!(combine(&current, &[], 10), vec![]);
        assert_eq!(combine(&current, &[], -1), current.to_vec());
        // Adjacent equal ranges merge; a gap stays a gap.
        assert_eq!(combine(&[b(0, 1, 2, 1), b(2, 3, 2, 1), b(6, 6, 2, 1)], &[], 0), vec![b(0, 3, 2, 1), b(6, 6, 2, 1)]);
        assert_eq!(combine(&[b(i64::MAX - 1, i64::MAX, 4, 1)], &[], 0), vec![b(i64::MAX - 1, i64::MAX, 4, 1)]);
    }

    proptest! {
        /// Against the definition, offset by offset: every offset covered by some range and
        /// at or above the start is in exactly one output range, with the best (count, state)
        /// of the ranges covering it; nothing else is; the output is sorted and merged.
        #[test]
        fn agrees_with_the_offset_by_offset_definition(
            current in proptest::collection::vec((0i64..40, 0i64..6, prop::sample::select(vec![0i8, 2, 3, 4]), 0i16..4), 0..8),
            update in proptest::collection::vec((0i64..40, 0i64..6, prop::sample::select(vec![0i8, 2, 3, 4]), 0i16..4), 0..8),
            start in -1i64..45,
        ) {
            let to_batches = |v: &[(i64, i64, i8, i16)]| v.iter().map(|&(f, len, s, c)| b(f, f + len, s, c)).collect::<Vec<_>>();
            let (current, update) = (to_batches(&current), to_batches(&update));
            let out = combine(&current, &update, start);
            for w in out.windows(2) {
                prop_assert!(w[0].last_offset < w[1].first_offset);
                prop_assert!(!(w[0].last_offset + 1 == w[1].first_offset && (w[0].delivery_count, w[0].delivery_state) == (w[1].delivery_count, w[1].delivery_state)), "not merged: {:?}", w);
            }
            for offset in 0..50 {
                let best = current.iter().chain(&update)
                    .filter(|x| x.first_offset <= offset && offset <= x.last_offset && (start < 0 || offset >= start))
                    .map(|x| (x.delivery_count, x.delivery_state)).max();
                let got: Vec<_> = out.iter().filter(|x| x.first_offset <= offset && offset <= x.last_offset).map(|x| (x.delivery_count, x.delivery_state)).collect();
                prop_assert_eq!(got, best.into_iter().collect::<Vec<_>>(), "offset {}", offset);
            }
        }
    }
}
