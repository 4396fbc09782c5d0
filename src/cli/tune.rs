//! `shardlog tune --check | --apply NAME...`: the host checks of `crate::tune` as a table
//! (or JSON), and the changes the operator names. Exits non-zero when a required check
//! fails or a change cannot be written.
use std::path::PathBuf;

use anyhow::{bail, Context};

use crate::config::FlushMode;
use crate::tune::{apply, check_all, CheckResult, Host, Level, Outcome, TuneInputs};

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("mode").required(true).args(["check", "apply"])))]
pub struct TuneArgs {
    /// Print what the broker needs of this host and whether it holds; exit status 1 when
    /// a required check fails.
    #[arg(long)]
    check: bool,
    /// Change these (comma-separated), and nothing else: aio_max_nr, cpu_governor,
    /// dirty_writeback, io_scheduler, swappiness, transparent_hugepages. Needs root; lasts
    /// until reboot.
    #[arg(long, value_delimiter = ',', num_args = 1..)]
    apply: Vec<String>,
    /// The broker's log dirs (its `log_dirs`, or `data_dir`).
    #[arg(long = "log-dirs", value_delimiter = ',', default_value = "./data")]
    log_dirs: Vec<PathBuf>,
    /// The broker's flush mode: `always` needs O_DIRECT in every log dir.
    #[arg(long, value_enum, default_value_t = FlushMode::Always)]
    flush: FlushMode,
    /// `table` or `json`.
    #[arg(long, default_value = "table", value_parser = ["table", "json"])]
    format: String,
    /// Read /proc and /sys under this directory instead of / (tests).
    #[arg(long, hide = true, default_value = "/")]
    sysroot: PathBuf,
}

pub fn run(args: TuneArgs) -> anyhow::Result<()> {
    let host = Host { root: args.sysroot.clone() };
    let inputs = TuneInputs { log_dirs: args.log_dirs.clone(), flush_always: args.flush == FlushMode::Always };
    if !args.apply.is_empty() {
        let changes = apply::apply(&host, &inputs, &args.apply).context("tune --apply")?;
        for c in &changes {
            println!("{}: {} -> {}", c.path.display(), c.before, c.after);
        }
    }
    if !args.check {
        return Ok(());
    }
    let results = check_all(&host, &inputs);
    let failed = results.iter().filter(|r| r.level == Level::Required && r.outcome == Outcome::Fail).count();
    if args.format == "json" {
        println!("{}", serde_json::json!({ "checks": results, "required_failed": failed }));
    } else {
        print_table(&results);
    }
    if failed > 0 {
        bail!("{failed} required check(s) failed: the broker will not start on this host");
    }
    Ok(())
}

fn print_table(results: &[CheckResult]) {
    let rows: Vec<Vec<String>> = results
        .iter()
        .map(|r| {
            let level = match r.level {
                Level::Required => "required",
                Level::Recommended => "recommended",
            };
            let outcome = match r.outcome {
                Outcome::Ok => "ok",
                Outcome::Fail => "FAIL",
                Outcome::Unknown => "unknown",
            };
            vec![r.name.to_string(), level.into(), outcome.into(), r.current.clone(), r.wanted.clone(), r.fix.clone()]
        })
        .collect();
    super::print_table(&["CHECK", "LEVEL", "RESULT", "CURRENT", "WANTED", "FIX"], &rows);
}
