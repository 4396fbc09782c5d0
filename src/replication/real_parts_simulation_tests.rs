//! The seeds of the replication simulation on the real parts (`real_parts_simulation.rs`).
use super::real_parts_simulation::{run_seed, run_traced, RealSimConfig, RealSimStats, BASE};

/// Seeds 1..=`default`, or 1..=`SHARDLOG_REAL_SIM_SEEDS`.
/// `SHARDLOG_REAL_SIM_FIRST` moves the first seed (to replay one: FIRST=N SEEDS=N).
fn seeds(default: u64) -> std::ops::RangeInclusive<u64> {
    let env = |k: &str| std::env::var(k).ok().and_then(|s| s.parse::<u64>().ok());
    env("SHARDLOG_REAL_SIM_FIRST").unwrap_or(1)..=env("SHARDLOG_REAL_SIM_SEEDS").unwrap_or(default)
}

fn run_all(cfg: RealSimConfig, default_seeds: u64) {
    crate::storage::testing::run(move |dir| async move {
        let mut total = RealSimStats::default();
        let mut failures = Vec::new();
        let started = std::time::Instant::now();
        for seed in seeds(default_seeds) {
            if seed % 50 == 0 {
                eprintln!("{}: seed {seed} after {:.0?}", if cfg.kills_only { "kills" } else { "power" }, started.elapsed());
            }
            match run_seed(seed, cfg, &dir.join("sim")).await {
                Ok(s) => total.add(&s),
                Err(e) => failures.push(e),
            }
        }
        eprintln!("{cfg:?}: {total:?}");
        for f in &failures {
            eprintln!("FAILED {}", f.lines().next().unwrap_or(""));
        }
        if let Some(first) = failures.first() {
            panic!("{} of {} seeds failed; first:\n{first}", failures.len(), seeds(default_seeds).count());
        }
        assert!(total.acked > 0, "no acknowledged record in any seed: the simulation did not run: {total:?}");
        assert!(total.faults > 0 && total.elections > 0, "no fault or election: {total:?}");
    });
}

#[test]
fn rf3_min_isr2_power_loss_and_kills_within_the_budget() {
    run_all(BASE, 16);
}

/// Determinism: the simulation awaits every write before its next step, so a seed's
/// trace (every fault, election, ISR change and acknowledgement, at its simulated
/// time) is the same on every run.
#[test]
fn a_seed_replays_exactly() {
    crate::storage::testing::run(|dir| async move {
        for (seed, cfg) in [(3, BASE), (4, BASE), (5, BASE), (6, RealSimConfig { kills_only: true, ..BASE })] {
            let (first, trace) = run_traced(seed, cfg, &dir.join("a")).await;
            let (second, again) = run_traced(seed, cfg, &dir.join("b")).await;
            assert!(first.is_ok() && second.is_ok(), "{first:?} {second:?}");
            assert!(trace.iter().any(|l| l.contains(" ack offset ")) && trace.iter().any(|l| l.contains("fault:")), "a trace with acks and faults");
            let differs = trace.iter().zip(&again).position(|(a, b)| a != b);
            assert!(
                differs.is_none() && trace.len() == again.len(),
                "seed {seed}: the runs part at line {differs:?}: {:?} vs {:?}",
                differs.map(|i| &trace[i]),
                differs.map(|i| &again[i])
            );
        }
    });
}

#[test]
fn kills_and_pauses_without_budget_lose_nothing() {
    run_all(RealSimConfig { kills_only: true, ..BASE }, 16);
}
