//! A seeded simulation of transactions end to end, on the real state machines: the
//! coordinator's (`state.rs`, with its log of states as `__transaction_state` holds it)
//! and each partition's producer table (`partition::producer_state`: open transactions,
//! markers, the last stable offset, the aborted list). Producers (several instances per
//! transactional id, so zombies), KIP-890 verification with guards, markers lost and
//! retried, the coordinator failing over (state reloaded from its log, decided
//! transactions finished, coordinator epoch bumped), timeouts, and partition leadership
//! moving (the table rebuilt from the log, guards lost) interleave at random.
//!
//! Checked after the run drains: every transaction the coordinator decided to commit is
//! visible to read_committed on every partition it wrote, exactly once; nothing aborted or
//! written by a fenced producer is; no partition's last stable offset is stuck below its
//! high watermark. `SHARDLOG_TXN_SIM_SEEDS=N` runs seeds 1..=N (default 300).
use std::collections::{BTreeSet, HashMap};

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::state::{TxnMetadata, TxnState};
use crate::partition::producer_state::{ProducerStateTable, SequenceCheck};
use crate::record::{build_marker, parse_header, set_base_offset, BatchHeader, ControlType, Marker};

const PARTITIONS: i32 = 3;
const IDS: usize = 2;
const STEPS: usize = 400;
const TIMEOUT_MS: i32 = 60;

#[derive(Clone, Debug)]
enum Item {
    /// One record; `value` is unique in the run.
    Data {
        header: BatchHeader,
        value: u64,
    },
    Marker {
        header: BatchHeader,
        bytes: Vec<u8>,
    },
}

#[derive(Default)]
struct Part {
    log: Vec<Item>,
    table: ProducerStateTable,
    guards: HashMap<i64, u64>,
}

impl Part {
    fn rebuild(&mut self) {
        // A new leader: its table comes from the log alone; in-memory guards are gone.
        self.table = ProducerStateTable::default();
        for item in &self.log {
            match item {
                Item::Data { header, .. } => self.table.update(header, &[]),
                Item::Marker { header, bytes } => self.table.update(header, bytes),
            }
        }
        self.guards.clear();
    }

    fn hw(&self) -> i64 {
        self.log.len() as i64
    }
}

/// A producer instance.
struct Producer {
    id: usize,
    pid: i64,
    epoch: i16,
    seq: HashMap<i32, i32>,
    /// The attempt (a transaction as this instance runs it) and the values it wrote.
    attempt: Option<u64>,
    pending_guard: Option<(i32, u64)>,
}

struct World {
    rng: StdRng,
    parts: Vec<Part>,
    /// The coordinator's log (every state written, in order) and its memory.
    log: Vec<TxnMetadata>,
    mem: HashMap<String, TxnMetadata>,
    coordinator_epoch: i32,
    /// Markers not yet delivered: (txn id, producer id, epoch, commit, coordinator epoch, partition).
    markers: Vec<(String, i64, i16, bool, i32, i32)>,
    producers: Vec<Producer>,
    next_pid: i64,
    next_value: u64,
    next_attempt: u64,
    now_ms: i64,
    /// Which attempt each id's open transaction is, and every attempt's decided outcome.
    attempt_of: HashMap<String, u64>,
    outcome: HashMap<u64, bool>,
    /// value -> (attempt, partition) for every acknowledged transactional write.
    written: HashMap<u64, (u64, i32)>,
}

fn name(id: usize) -> String {
    format!("t{id}")
}

impl World {
    fn persist(&mut self, m: TxnMetadata) {
        self.log.push(m.clone());
        self.mem.insert(m.transactional_id.clone(), m);
    }

    fn init(&mut self, id: usize) {
        let key = name(id);
        let cur = self.mem.get(&key).cloned();
        let next = match cur {
            None => {
                let pid = self.next_pid;
                self.next_pid += 1;
                TxnMetadata::new(key.clone(), pid, TIMEOUT_MS, 0, self.now_ms).initialized(TIMEOUT_MS, self.now_ms, || pid)
            }
            Some(m) if m.state == TxnState::Ongoing => {
                self.abort(&key, true);
                return; // the new instance retries (CONCURRENT_TRANSACTIONS)
            }
            Some(m) if m.state.is_prepare() => return,
            Some(m) => {
                let fresh = self.next_pid;
                self.next_pid += 1;
                m.initialized(TIMEOUT_MS, self.now_ms, || fresh)
            }
        };
        self.persist(next.clone());
        self.producers.push(Producer { id, pid: next.producer_id, epoch: next.producer_epoch, seq: HashMap::new(), attempt: None, pending_guard: None });
    }

    /// Decides an abort of `key`'s open transaction (a timeout or a fence: epoch bumped).
    fn abort(&mut self, key: &str, bump: bool) {
        let Some(m) = self.mem.get(key).cloned() else { return };
        if m.state != TxnState::Ongoing {
            return;
        }
        let next = m.prepared(false, bump, self.now_ms).expect("Ongoing can abort");
        self.decide(next);
    }

    fn decide(&mut self, next: TxnMetadata) {
        let key = next.transactional_id.clone();
        if let Some(a) = self.attempt_of.remove(&key) {
            let prev = self.outcome.insert(a, next.state == TxnState::PrepareCommit);
            assert!(prev.is_none(), "attempt {a} decided twice");
        }
        for (t, p) in &next.partitions {
            assert_eq!(t, "data");
            self.markers.push((key.clone(), next.producer_id, next.producer_epoch, next.state == TxnState::PrepareCommit, self.coordinator_epoch, *p));
        }
        self.persist(next.clone());
        self.maybe_complete(&key);
    }

    fn maybe_complete(&mut self, key: &str) {
        if self.markers.iter().any(|m| m.0 == key) {
            return;
        }
        if let Some(done) = self.mem.get(key).and_then(|m| m.completed(self.now_ms)) {
            self.persist(done);
        }
    }

    /// One producer step: begin / write (verify, then append) / end.
    fn produce(&mut self, i: usize) {
        let key = name(self.producers[i].id);
        let p = self.rng.random_range(0..PARTITIONS);
        let Some(cur) = self.mem.get(&key).cloned() else { return };
        let (pid, epoch) = (self.producers[i].pid, self.producers[i].epoch);
        match self.rng.random_range(0..10u32) {
            // Write a record to partition p: AddPartitions (v1) then the verified append.
            0..=5 => {
                if cur.check_producer(pid, epoch).is_err() || cur.state.is_prepare() {
                    return; // fenced, or waiting for the markers (CONCURRENT_TRANSACTIONS)
                }
                let Ok(next) = cur.with_partitions([("data".to_string(), p)], self.now_ms) else { return };
                if cur.state != TxnState::Ongoing {
                    let a = self.next_attempt;
                    self.next_attempt += 1;
                    self.attempt_of.insert(key.clone(), a);
                    self.producers[i].attempt = Some(a);
                }
                if next != cur {
                    self.persist(next);
                }
                // Verification hands out a guard; the append may come later (other events between).
                let part = &mut self.parts[p as usize];
                let needs = part.table.get(pid).is_none_or(|e| e.current_txn_first_offset.is_none() || epoch > e.epoch);
                if needs {
                    let g = self.rng.random_range(1..u64::MAX);
                    part.guards.insert(pid, g);
                    if self.rng.random_bool(0.7) {
                        self.append(i, p, Some(g)); // at once, as usual
                    } else {
                        self.producers[i].pending_guard = Some((p, g)); // later: events between
                    }
                } else {
                    self.append(i, p, None);
                }
            }
            // The append of a verified write (if the guard survived).
            6 => {
                if let Some((p, g)) = self.producers[i].pending_guard.take() {
                    let coordinator_ok = self.mem.get(&key).is_some_and(|m| {
                        m.check_producer(pid, epoch).is_ok() && m.state == TxnState::Ongoing && m.partitions.contains(&("data".to_string(), p))
                    });
                    if coordinator_ok {
                        self.append(i, p, Some(g));
                    }
                }
            }
            // EndTxn: commit or abort.
            _ => {
                if cur.check_producer(pid, epoch).is_err() || cur.state != TxnState::Ongoing {
                    return;
                }
                let commit = self.rng.random_bool(0.6);
                let next = cur.prepared(commit, false, self.now_ms).expect("Ongoing ends");
                self.producers[i].attempt = None;
                self.decide(next);
            }
        }
    }

    fn append(&mut self, i: usize, p: i32, guard: Option<u64>) {
        let (pid, epoch) = (self.producers[i].pid, self.producers[i].epoch);
        let Some(attempt) = self.producers[i].attempt else { return };
        let part = &mut self.parts[p as usize];
        let seq = *self.producers[i].seq.get(&p).unwrap_or(&0);
        let header = BatchHeader {
            base_offset: part.hw(),
            batch_length: 100,
            partition_leader_epoch: 0,
            magic: 2,
            crc: 0,
            attributes: 0x10,
            last_offset_delta: 0,
            base_timestamp: self.now_ms,
            max_timestamp: self.now_ms,
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: seq,
            records_count: 1,
        };
        let first = part.table.get(pid).is_none_or(|e| e.current_txn_first_offset.is_none() || epoch > e.epoch);
        if first {
            // The partition's KIP-890 check (`Partition::append_batches`).
            match guard {
                Some(g) if part.guards.get(&pid) == Some(&g) => {
                    part.guards.remove(&pid);
                }
                _ => return,
            }
        }
        match part.table.check(&header) {
            Ok(SequenceCheck::Append) => {}
            _ => return,
        }
        part.table.update(&header, &[]);
        let value = self.next_value;
        self.next_value += 1;
        part.log.push(Item::Data { header, value });
        self.producers[i].seq.insert(p, seq + 1);
        self.written.insert(value, (attempt, p));
    }

    /// Delivers (or loses) one pending marker.
    fn deliver(&mut self) {
        if self.markers.is_empty() {
            return;
        }
        let k = self.rng.random_range(0..self.markers.len());
        if self.rng.random_bool(0.2) {
            return; // lost: retried later
        }
        let (key, pid, epoch, commit, coordinator_epoch, p) = self.markers[k].clone();
        if coordinator_epoch != self.coordinator_epoch {
            self.markers.swap_remove(k); // an old coordinator's send: its successor resends
            return;
        }
        let part = &mut self.parts[p as usize];
        let control = if commit { ControlType::Commit } else { ControlType::Abort };
        let written = match part.table.check_marker(pid, epoch, coordinator_epoch, 0) {
            Ok(()) => {
                let mut bytes = build_marker(pid, epoch, Marker { control, coordinator_epoch }, self.now_ms).to_vec();
                set_base_offset(&mut bytes, part.hw()).expect("marker");
                let header = parse_header(&bytes).expect("marker");
                part.table.update(&header, &bytes);
                part.guards.remove(&pid);
                part.log.push(Item::Marker { header, bytes });
                true
            }
            // A newer epoch wrote there: the marker is moot (the coordinator drops it).
            Err(_) => true,
        };
        if written {
            self.markers.swap_remove(k);
            self.maybe_complete(&key);
        }
    }

    /// The coordinator fails over: memory from its log, decided transactions resent.
    fn fail_over(&mut self) {
        self.coordinator_epoch += 1;
        self.mem.clear();
        for m in self.log.clone() {
            self.mem.insert(m.transactional_id.clone(), m);
        }
        self.markers.clear();
        let decided: Vec<TxnMetadata> = self.mem.values().filter(|m| m.state.is_prepare()).cloned().collect();
        for m in decided {
            for (_, p) in &m.partitions {
                self.markers.push((
                    m.transactional_id.clone(),
                    m.producer_id,
                    m.producer_epoch,
                    m.state == TxnState::PrepareCommit,
                    self.coordinator_epoch,
                    *p,
                ));
            }
            self.maybe_complete(&m.transactional_id);
        }
    }

    fn step(&mut self) {
        self.now_ms += 1;
        match self.rng.random_range(0..100u32) {
            0..=4 => {
                let id = self.rng.random_range(0..IDS);
                self.init(id);
            }
            5..=49 if !self.producers.is_empty() => {
                // Mostly the newest instance of an id; sometimes any (a zombie).
                let i = if self.rng.random_bool(0.8) {
                    let id = self.rng.random_range(0..IDS);
                    match self.producers.iter().rposition(|p| p.id == id) {
                        Some(i) => i,
                        None => return,
                    }
                } else {
                    self.rng.random_range(0..self.producers.len())
                };
                self.produce(i);
            }
            50..=84 => self.deliver(),
            85..=87 => self.fail_over(),
            88..=90 => {
                let p = self.rng.random_range(0..PARTITIONS) as usize;
                self.parts[p].rebuild();
            }
            91..=93 => {
                let timed_out: Vec<String> = self.mem.values().filter(|m| m.timed_out(self.now_ms)).map(|m| m.transactional_id.clone()).collect();
                for key in timed_out {
                    self.abort(&key, true);
                }
            }
            _ => {}
        }
    }

    /// Ends everything: open transactions time out, every marker arrives.
    fn drain(&mut self) {
        self.now_ms += 10 * i64::from(TIMEOUT_MS);
        let open: Vec<String> = self.mem.values().filter(|m| m.state == TxnState::Ongoing).map(|m| m.transactional_id.clone()).collect();
        for key in open {
            self.abort(&key, true);
        }
        let mut rounds = 0;
        while !self.markers.is_empty() {
            rounds += 1;
            assert!(rounds < 100_000, "markers never delivered");
            self.deliver();
        }
    }
}

/// What one run did (the test checks the runs did something worth checking).
#[derive(Default, Debug)]
struct Stats {
    committed: usize,
    aborted: usize,
    values_visible: usize,
    markers_written: usize,
}

fn run(seed: u64) -> Stats {
    let mut w = World {
        rng: StdRng::seed_from_u64(seed),
        parts: (0..PARTITIONS).map(|_| Part::default()).collect(),
        log: Vec::new(),
        mem: HashMap::new(),
        coordinator_epoch: 0,
        markers: Vec::new(),
        producers: Vec::new(),
        next_pid: 1000,
        next_value: 0,
        next_attempt: 0,
        now_ms: 0,
        attempt_of: HashMap::new(),
        outcome: HashMap::new(),
        written: HashMap::new(),
    };
    for _ in 0..STEPS {
        w.step();
    }
    w.drain();
    for m in w.mem.values() {
        assert!(!m.state.is_prepare() && m.state != TxnState::Ongoing, "seed {seed}: {} left {:?}", m.transactional_id, m.state);
    }
    // What read_committed delivers, partition by partition (as a consumer filters with the
    // aborted list), against the coordinator's decisions.
    let mut visible: BTreeSet<u64> = BTreeSet::new();
    for (p, part) in w.parts.iter_mut().enumerate() {
        let hw = part.hw();
        let lso = part.table.first_unstable_offset(hw).map_or(hw, |f| f.min(hw));
        assert_eq!(lso, hw, "seed {seed}: partition {p}'s last stable offset is stuck");
        for (offset, item) in part.log.iter().enumerate() {
            let Item::Data { header, value } = item else { continue };
            let offset = offset as i64;
            let aborted = part.table.aborted_between(offset, offset + 1).iter().any(|a| a.producer_id == header.producer_id && a.first_offset <= offset);
            if !aborted {
                assert!(visible.insert(*value), "seed {seed}: value {value} seen twice");
            }
        }
    }
    for (value, (attempt, p)) in &w.written {
        let committed = w.outcome.get(attempt).copied().unwrap_or(false);
        assert_eq!(visible.contains(value), committed, "seed {seed}: value {value} of attempt {attempt} on partition {p}: committed {committed}");
    }
    assert_eq!(visible.len(), w.written.values().filter(|(a, _)| w.outcome.get(a) == Some(&true)).count(), "seed {seed}");
    Stats {
        committed: w.outcome.values().filter(|c| **c).count(),
        aborted: w.outcome.values().filter(|c| !**c).count(),
        values_visible: visible.len(),
        markers_written: w.parts.iter().map(|p| p.log.iter().filter(|i| matches!(i, Item::Marker { .. })).count()).sum(),
    }
}

#[test]
fn transactions_survive_lost_markers_failovers_timeouts_and_zombies() {
    let seeds: u64 = std::env::var("SHARDLOG_TXN_SIM_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(300);
    let mut total = Stats::default();
    for seed in 1..=seeds {
        let s = run(seed);
        total.committed += s.committed;
        total.aborted += s.aborted;
        total.values_visible += s.values_visible;
        total.markers_written += s.markers_written;
    }
    eprintln!("transaction simulation, {seeds} seeds: {total:?}");
    // The runs must exercise both outcomes and deliver data, or they check nothing.
    assert!(total.committed > seeds as usize && total.aborted > seeds as usize / 2 && total.values_visible > seeds as usize, "{total:?}");
}
