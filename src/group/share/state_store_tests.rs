use proptest::prelude::*;
use uuid::Uuid;

use super::*;

fn key(partition: i32) -> SharePartitionKey {
    SharePartitionKey { group_id: "g".into(), topic_id: Uuid::from_u128(9), partition }
}

fn b(first: i64, last: i64, state: i8, count: i16) -> PersistedBatch {
    PersistedBatch { first_offset: first, last_offset: last, delivery_state: state, delivery_count: count }
}

fn write(state_epoch: i32, leader_epoch: i32, start_offset: i64, batches: Vec<PersistedBatch>) -> WriteState {
    WriteState { state_epoch, leader_epoch, start_offset, delivery_complete_count: -1, batches }
}

/// A store and the log its records went to, as the coordinator keeps them.
struct Logged {
    store: ShareStateStore,
    log: Vec<ShareStateRecord>,
}

impl Logged {
    fn new(snapshot_every: u32) -> Logged {
        Logged { store: ShareStateStore::new(snapshot_every), log: Vec::new() }
    }

    fn append(&mut self, r: ShareStateRecord) {
        // Through the bytes, as the log holds it.
        let (k, v) = r.encode();
        let r = ShareStateRecord::decode(Some(k), v).unwrap();
        self.log.push(r.clone());
        self.store.replay(r);
    }

    fn read(&mut self, k: &SharePartitionKey, leader_epoch: i32) -> Result<ReadState, StateError> {
        let (state, record) = self.store.read(k, leader_epoch, true, 5)?;
        if let Some(r) = record {
            self.append(r);
        }
        Ok(state)
    }
}

#[test]
fn initialize_read_write_as_kafka_4_4() {
    let mut s = Logged::new(DEFAULT_SNAPSHOT_EVERY);
    let k = key(0);
    assert_eq!(s.store.read(&k, 0, true, 0).unwrap_err(), StateError::InvalidRequest("Read operation on uninitialized share partition not allowed."));
    assert!(matches!(s.store.write(&k, &write(0, 0, 0, vec![]), true, 0), Err(StateError::InvalidRequest(_))));
    s.append(s.store.initialize(&k, 3, -1, true, 1).unwrap());
    assert_eq!(s.read(&k, 5).unwrap(), ReadState { state_epoch: 3, start_offset: -1, batches: vec![] });
    // The new leader epoch was recorded: an older leader is fenced, the same one is not.
    assert_eq!(s.store.summary(&k, true).unwrap().leader_epoch, 5);
    assert_eq!(s.store.read(&k, 4, true, 0).unwrap_err(), StateError::FencedLeaderEpoch);
    assert_eq!(s.store.read(&k, 5, true, 0).unwrap().1, None, "no record for the same epoch");
    assert_eq!(s.store.write(&k, &write(3, 4, 0, vec![]), true, 0).unwrap_err(), StateError::FencedLeaderEpoch);
    assert_eq!(s.store.write(&k, &write(2, 5, 0, vec![]), true, 0).unwrap_err(), StateError::FencedStateEpoch);
    // Writes add batches; the start offset never goes back; the leader epoch is not written.
    s.append(s.store.write(&k, &write(3, 6, 10, vec![b(10, 12, 2, 1), b(13, 14, 0, 1)]), true, 0).unwrap());
    s.append(s.store.write(&k, &write(3, 6, 8, vec![b(13, 13, 4, 5)]), true, 0).unwrap());
    assert_eq!(s.read(&k, 6).unwrap(), ReadState { state_epoch: 3, start_offset: 10, batches: vec![b(10, 12, 2, 1), b(13, 13, 4, 5), b(14, 14, 0, 1)] });
    s.append(s.store.write(&k, &write(3, 6, 13, vec![]), true, 0).unwrap());
    assert_eq!(s.read(&k, 6).unwrap().batches, vec![b(13, 13, 4, 5), b(14, 14, 0, 1)]);
    // Bad input and unknown partitions.
    assert!(matches!(s.store.write(&k, &write(3, 6, 0, vec![b(5, 4, 0, 1)]), true, 0), Err(StateError::InvalidRequest(_))));
    assert!(matches!(s.store.write(&k, &write(-1, 6, 0, vec![]), true, 0), Err(StateError::InvalidRequest(_))));
    assert!(matches!(s.store.read(&key(-1), 6, true, 0), Err(StateError::InvalidRequest(_))));
    assert_eq!(s.store.write(&k, &write(3, 6, 0, vec![]), false, 0).unwrap_err(), StateError::UnknownTopicOrPartition);
    assert_eq!(s.store.initialize(&k, 2, 0, true, 0).unwrap_err(), StateError::FencedStateEpoch);
}

#[test]
fn delivery_complete_count_never_goes_back() {
    let mut s = Logged::new(DEFAULT_SNAPSHOT_EVERY);
    let k = key(1);
    s.append(s.store.initialize(&k, 0, 0, true, 0).unwrap());
    assert_eq!(s.store.summary(&k, true).unwrap().delivery_complete_count, 0);
    let w = |start, dcc| WriteState { state_epoch: 0, leader_epoch: 0, start_offset: start, delivery_complete_count: dcc, batches: vec![] };
    s.append(s.store.write(&k, &w(0, 4), true, 0).unwrap());
    s.append(s.store.write(&k, &w(0, 2), true, 0).unwrap());
    assert_eq!(s.store.summary(&k, true).unwrap().delivery_complete_count, 4, "same start: the larger");
    s.append(s.store.write(&k, &w(5, 1), true, 0).unwrap());
    assert_eq!(s.store.summary(&k, true).unwrap(), StateSummary { state_epoch: 0, leader_epoch: 0, start_offset: 5, delivery_complete_count: 1 });
    s.append(s.store.write(&k, &w(3, 9), true, 0).unwrap());
    assert_eq!(s.store.summary(&k, true).unwrap().delivery_complete_count, 1, "an older start: the stored count");
}

#[test]
fn a_snapshot_every_n_updates_and_delete_is_a_tombstone() {
    let mut s = Logged::new(2);
    let k = key(2);
    s.append(s.store.initialize(&k, 0, 0, true, 0).unwrap());
    for i in 0..5 {
        let r = s.store.write(&k, &write(0, 0, 0, vec![b(i, i, 2, 1)]), true, 0).unwrap();
        // Updates 1 and 2, then a snapshot (the count reached 2), then updates again.
        assert_eq!(matches!(r, ShareStateRecord::Snapshot { .. }), i == 2, "write {i}: {r:?}");
        s.append(r);
    }
    assert_eq!(s.read(&k, 0).unwrap().batches, vec![b(0, 4, 2, 1)]);
    assert!(s.store.delete(&key(3), true).unwrap().is_none(), "nothing stored: nothing written");
    s.append(s.store.delete(&k, true).unwrap().unwrap());
    assert!(s.store.is_empty());
    assert_eq!(s.store.summary(&k, true).unwrap(), StateSummary { state_epoch: 0, leader_epoch: 0, start_offset: -1, delivery_complete_count: -1 });
    assert_eq!(s.store.delete(&k, false).unwrap_err(), StateError::UnknownTopicOrPartition);
}

#[derive(Clone, Debug)]
enum Op {
    Initialize { partition: i32, state_epoch: i32, start: i64 },
    Read { partition: i32, leader_epoch: i32 },
    Write { partition: i32, state_epoch: i32, leader_epoch: i32, start: i64, batches: Vec<(i64, i64, i8, i16)> },
    Delete { partition: i32 },
}

fn op() -> impl Strategy<Value = Op> {
    let batch = (0i64..30, 0i64..4, prop::sample::select(vec![0i8, 2, 3, 4]), 0i16..6).prop_map(|(f, len, s, c)| (f, f + len, s, c));
    prop_oneof![
        (0i32..2, 0i32..3, -1i64..10).prop_map(|(partition, state_epoch, start)| Op::Initialize { partition, state_epoch, start }),
        (0i32..2, 0i32..4).prop_map(|(partition, leader_epoch)| Op::Read { partition, leader_epoch }),
        (0i32..2, 0i32..3, 0i32..4, -1i64..20, proptest::collection::vec(batch, 0..4))
            .prop_map(|(partition, state_epoch, leader_epoch, start, batches)| Op::Write { partition, state_epoch, leader_epoch, start, batches }),
        (0i32..2).prop_map(|partition| Op::Delete { partition }),
    ]
}

/// What a key's state means, offset by offset (the model the store is checked against).
#[derive(Clone, Debug, Default)]
struct Model {
    state_epoch: i32,
    leader_epoch: i32,
    max_leader_epoch: i32,
    max_state_epoch: i32,
    start: i64,
    offsets: std::collections::BTreeMap<i64, (i16, i8)>,
}

impl Model {
    fn prune(&mut self) {
        if self.start >= 0 {
            let start = self.start;
            self.offsets.retain(|o, _| *o >= start);
        }
    }
}

fn expand(batches: &[PersistedBatch]) -> std::collections::BTreeMap<i64, (i16, i8)> {
    batches.iter().flat_map(|x| (x.first_offset..=x.last_offset).map(move |o| (o, (x.delivery_count, x.delivery_state)))).collect()
}

proptest! {
    /// Whatever the operations and however often snapshots replace updates, the state the
    /// store rebuilds from its records (through their bytes) is the model's, offset by
    /// offset: the best (count, state) written for each offset at or above the start offset,
    /// which never goes back; the epochs as Kafka keeps them; refusals where Kafka refuses.
    #[test]
    fn the_records_keep_what_the_apis_mean(ops in proptest::collection::vec(op(), 1..60), snapshot_every in 0u32..4) {
        let mut s = Logged::new(snapshot_every);
        let mut model: [Option<Model>; 2] = [None, None];
        for op in ops {
            match op {
                Op::Initialize { partition, state_epoch, start } => {
                    let m = &mut model[partition as usize];
                    let got = s.store.initialize(&key(partition), state_epoch, start, true, 0);
                    if m.as_ref().is_some_and(|m| m.max_state_epoch > state_epoch) {
                        prop_assert_eq!(got.unwrap_err(), StateError::FencedStateEpoch);
                        continue;
                    }
                    let max_leader_epoch = m.as_ref().map_or(0, |m| m.max_leader_epoch);
                    let max_state_epoch = m.as_ref().map_or(state_epoch, |m| m.max_state_epoch.max(state_epoch));
                    *m = Some(Model { state_epoch, leader_epoch: 0, max_leader_epoch, max_state_epoch, start, ..Model::default() });
                    s.append(got.unwrap());
                }
                Op::Read { partition, leader_epoch } => {
                    let m = &mut model[partition as usize];
                    let got = s.read(&key(partition), leader_epoch);
                    match m {
                        None => prop_assert!(matches!(got, Err(StateError::InvalidRequest(_)))),
                        Some(m) if m.max_leader_epoch > leader_epoch => prop_assert_eq!(got.unwrap_err(), StateError::FencedLeaderEpoch),
                        Some(m) => {
                            prop_assert!(got.is_ok());
                            m.leader_epoch = leader_epoch;
                            m.max_leader_epoch = leader_epoch;
                        }
                    }
                }
                Op::Write { partition, state_epoch, leader_epoch, start, batches } => {
                    let m = &mut model[partition as usize];
                    let batches: Vec<_> = batches.into_iter().map(|(f, l, st, c)| b(f, l, st, c)).collect();
                    let got = s.store.write(&key(partition), &write(state_epoch, leader_epoch, start, batches.clone()), true, 0);
                    match m {
                        None => prop_assert!(matches!(got, Err(StateError::InvalidRequest(_)))),
                        Some(m) if m.max_leader_epoch > leader_epoch => prop_assert_eq!(got.unwrap_err(), StateError::FencedLeaderEpoch),
                        Some(m) if m.max_state_epoch > state_epoch => prop_assert_eq!(got.unwrap_err(), StateError::FencedStateEpoch),
                        Some(m) => {
                            m.start = m.start.max(start);
                            for x in &batches {
                                for o in x.first_offset..=x.last_offset {
                                    let rank = (x.delivery_count, x.delivery_state);
                                    let e = m.offsets.entry(o).or_insert(rank);
                                    *e = (*e).max(rank);
                                }
                            }
                            m.prune();
                            s.append(got.unwrap());
                        }
                    }
                }
                Op::Delete { partition } => {
                    if let Some(r) = s.store.delete(&key(partition), true).unwrap() {
                        s.append(r);
                    }
                    model[partition as usize] = None;
                }
            }
            for p in 0..2 {
                let sum = s.store.summary(&key(p), true).unwrap();
                match &model[p as usize] {
                    None => prop_assert_eq!(sum.start_offset, -1),
                    Some(m) => {
                        prop_assert_eq!((sum.state_epoch, sum.leader_epoch, sum.start_offset), (m.state_epoch, m.leader_epoch, m.start));
                        let (r, _) = s.store.read(&key(p), i32::MAX, true, 0).unwrap();
                        prop_assert_eq!(expand(&r.batches), m.offsets.clone());
                    }
                }
            }
        }
    }
}
