//! Test hook: disk faults armed at run time from a control file (the chaos runner's disk
//! nemesis, `tests/history/nemeses/disk.py`). With `SHARDLOG_TEST_STORAGE_FAULTS_FILE=<path>`
//! (and the injector of `storage_fault = drop-unsynced`), every shard reads the file every
//! 100 ms and applies each line it has not applied yet:
//!
//! ```text
//! <generation> sync-eio <n>        the next n segment fdatasyncs fail (EIO; unsynced data dropped)
//! <generation> write-eio <n>       the next n segment writes fail with EIO
//! <generation> write-nospace <n>   ... with ENOSPC
//! <generation> torn-write <n>      ... apply a prefix of their bytes, then fail with EIO
//! <generation> slow-ms <ms>        every segment write and fdatasync waits <ms> first
//! <generation> clear               disarms every fault, no delay
//! ```
//!
//! Generations increase; a shard applies the lines above the last generation it applied,
//! in order, and logs each (`storage fault control: ...`), so a test can see the fault
//! really armed. A line that does not parse is logged and skipped. The read is a plain
//! blocking `std::fs` read of a small file (bounded to `MAX_FILE_BYTES`): a test hook, not
//! the data path.
use std::path::PathBuf;
use std::time::Duration;

use crate::storage::file::{shard_fault_injector, Fault};

/// The environment variable naming the control file (a test hook: needs the switch).
pub const CONTROL_FILE_ENV: &str = "SHARDLOG_TEST_STORAGE_FAULTS_FILE";
/// Bytes of the control file read at most (a file that grows beyond is cut there).
const MAX_FILE_BYTES: u64 = 64 * 1024;
const POLL: Duration = Duration::from_millis(100);
/// The longest delay a `slow-ms` line may ask for (a slower disk is a dead one).
const MAX_DELAY_MS: u64 = 60_000;

/// One line of the control file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    Arm(Fault, u32),
    SlowMs(u64),
    Clear,
}

/// `<generation> <command> [arg]` → (generation, command); None for a line that does not
/// parse.
pub fn parse_line(line: &str) -> Option<(u64, Command)> {
    let mut words = line.split_whitespace();
    let generation = words.next()?.parse::<u64>().ok()?;
    let name = words.next()?;
    let arg = words.next().map(|a| a.parse::<u64>().ok());
    if words.next().is_some() {
        return None;
    }
    let count = |fault| match arg {
        Some(Some(n)) if (1..=1000).contains(&n) => Some(Command::Arm(fault, n as u32)),
        _ => None,
    };
    let command = match name {
        "sync-eio" => count(Fault::SyncEio)?,
        "write-eio" => count(Fault::WriteEio)?,
        "write-nospace" => count(Fault::WriteNoSpace)?,
        "torn-write" => count(Fault::TornWrite)?,
        "slow-ms" => match arg {
            Some(Some(ms)) if ms <= MAX_DELAY_MS => Command::SlowMs(ms),
            _ => return None,
        },
        "clear" if arg.is_none() => Command::Clear,
        _ => return None,
    };
    Some((generation, command))
}

/// The lines of `text` above generation `after`, in file order (unparsable lines logged).
pub fn new_commands(text: &str, after: u64) -> Vec<(u64, Command)> {
    let mut out = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        match parse_line(line) {
            Some((generation, command)) if generation > after => out.push((generation, command)),
            Some(_) => {}
            None => tracing::warn!(line, "storage fault control: line ignored (see server/storage_fault_control.rs)"),
        }
    }
    out
}

fn read_bounded(path: &PathBuf) -> Option<String> {
    use std::io::Read;
    let file = std::fs::File::open(path).ok()?;
    let mut text = String::new();
    file.take(MAX_FILE_BYTES).read_to_string(&mut text).ok()?;
    Some(text)
}

/// The shard's control loop (runs forever; spawned only when the hook is on).
pub async fn control_loop(shard: u16, path: PathBuf) {
    let mut applied = 0u64;
    loop {
        glommio::timer::sleep(POLL).await;
        let Some(text) = read_bounded(&path) else { continue };
        let Some(injector) = shard_fault_injector() else {
            tracing::warn!(shard, "storage fault control: no fault injector on this shard (storage_fault = drop-unsynced is needed)");
            return;
        };
        for (generation, command) in new_commands(&text, applied) {
            applied = applied.max(generation);
            match command {
                Command::Arm(fault, n) => (0..n).for_each(|_| injector.arm(fault)),
                Command::SlowMs(ms) => injector.set_delay(Duration::from_millis(ms)),
                Command::Clear => {
                    injector.disarm_all();
                    injector.set_delay(Duration::ZERO);
                }
            }
            tracing::info!(shard, generation, ?command, "storage fault control: applied");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_to_commands() {
        assert_eq!(parse_line("1 sync-eio 2"), Some((1, Command::Arm(Fault::SyncEio, 2))));
        assert_eq!(parse_line(" 7 torn-write 1 "), Some((7, Command::Arm(Fault::TornWrite, 1))));
        assert_eq!(parse_line("3 write-nospace 5"), Some((3, Command::Arm(Fault::WriteNoSpace, 5))));
        assert_eq!(parse_line("4 slow-ms 250"), Some((4, Command::SlowMs(250))));
        assert_eq!(parse_line("5 clear"), Some((5, Command::Clear)));
    }

    #[test]
    fn bad_lines_are_refused() {
        for bad in [
            "",
            "x sync-eio 1",
            "1 sync-eio",
            "1 sync-eio 0",
            "1 sync-eio 1001",
            "1 melt 1",
            "1 clear 2",
            "1 slow-ms 60001",
            "1 slow-ms -1",
            "1 write-eio 1 extra",
        ] {
            assert_eq!(parse_line(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn only_lines_above_the_applied_generation_apply_in_order() {
        let text = "1 slow-ms 10\n2 sync-eio 1\nnonsense\n\n3 clear\n";
        assert_eq!(new_commands(text, 1), vec![(2, Command::Arm(Fault::SyncEio, 1)), (3, Command::Clear)]);
        assert!(new_commands(text, 3).is_empty());
    }
}
