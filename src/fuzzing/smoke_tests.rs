//! The CI smoke of every fuzz target (`cargo test`, no nightly toolchain): each target's
//! committed corpus (`fuzz/corpus/<target>/`) and seeds (`seeds.rs`), then seeded inputs: random bytes and
//! mutations of corpus entries (bytes flipped, cut, spliced), for a fixed budget per
//! target. Not coverage-guided (that is `scripts/fuzz.sh`, the campaign); it keeps every
//! target compiling and its invariants holding on what the campaign found.
use std::path::PathBuf;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::TARGETS;

/// Seeded inputs per target after the corpus. `SHARDLOG_FUZZ_SMOKE_SECS=N` runs for N
/// seconds shared by the targets instead (`scripts/test.sh`'s 60-second smoke).
const INPUTS: usize = 3_000;

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus").join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir).map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect()).unwrap_or_default();
    files.sort();
    let mut entries: Vec<Vec<u8>> = files.iter().filter_map(|f| std::fs::read(f).ok()).collect();
    entries.extend(super::seeds::seeds(target));
    entries
}

/// A seeded stream: the same inputs on every run.
struct Rng(StdRng);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0.random()
    }

    fn below(&mut self, n: usize) -> usize {
        self.0.random_range(0..n.max(1))
    }
}

/// One input: random bytes, or a corpus entry mutated a few times.
fn input(rng: &mut Rng, corpus: &[Vec<u8>]) -> Vec<u8> {
    if corpus.is_empty() || rng.below(4) == 0 {
        let len = rng.below(512);
        return (0..len).map(|_| rng.next() as u8).collect();
    }
    let mut data = corpus[rng.below(corpus.len())].clone();
    for _ in 0..=rng.below(4) {
        match rng.below(4) {
            0 if !data.is_empty() => {
                let at = rng.below(data.len());
                data[at] ^= 1 << rng.below(8);
            }
            1 if !data.is_empty() => {
                let at = rng.below(data.len());
                data[at] = [0, 0xff, 0x7f, 0x80][rng.below(4)];
            }
            2 => data.truncate(rng.below(data.len() + 1)),
            _ => {
                let other = &corpus[rng.below(corpus.len())];
                let from = rng.below(other.len() + 1);
                data.extend_from_slice(&other[from..]);
            }
        }
    }
    data
}

#[test]
fn every_fuzz_target_holds_on_its_corpus_and_seeded_inputs() {
    let secs: Option<f64> = std::env::var("SHARDLOG_FUZZ_SMOKE_SECS").ok().and_then(|v| v.parse().ok());
    for (seed, (name, check)) in TARGETS.iter().enumerate() {
        let corpus = corpus(name);
        for entry in &corpus {
            check(entry);
        }
        let mut rng = Rng(StdRng::seed_from_u64(seed as u64 + 1));
        let deadline = secs.map(|s| std::time::Instant::now() + std::time::Duration::from_secs_f64(s / TARGETS.len() as f64));
        let mut ran = 0usize;
        while deadline.map_or(ran < INPUTS, |d| std::time::Instant::now() < d) {
            check(&input(&mut rng, &corpus));
            ran += 1;
        }
        eprintln!("fuzz smoke: {name}: {} corpus entries and {ran} seeded inputs", corpus.len());
    }
}
