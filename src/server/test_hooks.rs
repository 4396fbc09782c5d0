//! The binary's test hooks, all behind one switch. Each loses data or breaks the broker
//! on purpose, so none runs unless the environment says `SHARDLOG_TEST_HOOKS=1`; asking
//! for one without it stops the start with a message naming the switch, so a stray flag
//! or variable in a production config cannot silently take effect.
//!
//! - `storage_fault = drop-unsynced` (config key): unsynced segment writes are held in
//!   memory and lost on kill -9, as a power loss would lose them (crash-recovery tests);
//! - `SHARDLOG_TEST_PANIC_SHARD=<n>`: shard n panics once the broker listens (the
//!   abort-on-panic test);
//! - `SHARDLOG_TEST_STALL_MS=<ms>`: shard 0 spins that long once (the stall detector test);
//! - `SHARDLOG_TEST_STORAGE_FAULTS_FILE=<path>`: disk faults armed at run time from that file
//!   (`storage_fault_control.rs`; needs `storage_fault = drop-unsynced`).
//!
//! They stay compiled into release builds because the integration tests drive the release
//! binary; the switch, not the build, keeps them out of production.
use crate::config::{Config, StorageFault};

/// The switch.
pub const ENABLE_ENV: &str = "SHARDLOG_TEST_HOOKS";
pub const PANIC_SHARD_ENV: &str = "SHARDLOG_TEST_PANIC_SHARD";
pub const STALL_ENV: &str = "SHARDLOG_TEST_STALL_MS";
pub use super::storage_fault_control::CONTROL_FILE_ENV as STORAGE_FAULTS_FILE_ENV;

/// The hooks a start asked for, read once.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TestHooks {
    pub panic_shard: Option<u16>,
    pub stall_ms: Option<u64>,
    pub storage_faults_file: Option<std::path::PathBuf>,
}

/// The hooks `config` and the environment (`var`) ask for; an error naming them when the
/// switch is not on. A hook variable that does not parse is an error too, not ignored.
pub fn requested(config: &Config, var: impl Fn(&str) -> Option<String>) -> Result<TestHooks, String> {
    let mut asked = Vec::new();
    if config.storage_fault != StorageFault::None {
        asked.push("storage_fault = drop-unsynced".to_string());
    }
    let parse = |name: &str| -> Result<Option<u64>, String> {
        match var(name) {
            None => Ok(None),
            Some(v) => v.trim().parse::<u64>().map(Some).map_err(|_| format!("{name}={v} is not a number")),
        }
    };
    let panic_shard = parse(PANIC_SHARD_ENV)?;
    let stall_ms = parse(STALL_ENV)?;
    for (name, v) in [(PANIC_SHARD_ENV, panic_shard), (STALL_ENV, stall_ms)] {
        if let Some(v) = v {
            asked.push(format!("{name}={v}"));
        }
    }
    let storage_faults_file = var(STORAGE_FAULTS_FILE_ENV).filter(|v| !v.is_empty()).map(std::path::PathBuf::from);
    if let Some(path) = &storage_faults_file {
        asked.push(format!("{STORAGE_FAULTS_FILE_ENV}={}", path.display()));
        if config.storage_fault != StorageFault::DropUnsynced {
            return Err(format!("{STORAGE_FAULTS_FILE_ENV} arms faults on the injector of storage_fault = drop-unsynced; set that too"));
        }
    }
    if asked.is_empty() {
        return Ok(TestHooks::default());
    }
    if var(ENABLE_ENV).as_deref() != Some("1") {
        return Err(format!(
            "test hooks asked for ({}) but {ENABLE_ENV}=1 is not set: they lose data or stop the broker on purpose \
             and are for tests only; remove them, or set {ENABLE_ENV}=1 in a test environment",
            asked.join(", ")
        ));
    }
    tracing::warn!(hooks = %asked.join(", "), "TEST HOOKS ON: this broker loses data or fails on purpose; never in production");
    let panic_shard = panic_shard.map(|s| u16::try_from(s).map_err(|_| format!("{PANIC_SHARD_ENV}={s} is not a shard"))).transpose()?;
    Ok(TestHooks { panic_shard, stall_ms, storage_faults_file })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
    }

    #[test]
    fn nothing_asked_needs_no_switch() {
        assert_eq!(requested(&Config::default(), env(&[])), Ok(TestHooks::default()));
    }

    #[test]
    fn a_hook_without_the_switch_is_refused_by_name() {
        let c = Config { storage_fault: StorageFault::DropUnsynced, ..Config::default() };
        let e = requested(&c, env(&[])).unwrap_err();
        assert!(e.contains("storage_fault = drop-unsynced") && e.contains("SHARDLOG_TEST_HOOKS=1"), "{e}");
        let e = requested(&Config::default(), env(&[(PANIC_SHARD_ENV, "1")])).unwrap_err();
        assert!(e.contains("SHARDLOG_TEST_PANIC_SHARD=1"), "{e}");
        assert!(requested(&c, env(&[(ENABLE_ENV, "yes")])).is_err(), "only 1 turns them on");
    }

    #[test]
    fn with_the_switch_they_run() {
        let got = requested(&Config::default(), env(&[(ENABLE_ENV, "1"), (PANIC_SHARD_ENV, "1"), (STALL_ENV, "250")]));
        assert_eq!(got, Ok(TestHooks { panic_shard: Some(1), stall_ms: Some(250), storage_faults_file: None }));
        assert!(requested(&Config::default(), env(&[(ENABLE_ENV, "1"), (STALL_ENV, "soon")])).unwrap_err().contains("not a number"));
    }

    #[test]
    fn the_storage_fault_control_file_needs_the_switch_and_the_injector() {
        let file = [(STORAGE_FAULTS_FILE_ENV, "/tmp/f")];
        let c = Config { storage_fault: StorageFault::DropUnsynced, ..Config::default() };
        assert!(requested(&c, env(&file)).unwrap_err().contains("SHARDLOG_TEST_HOOKS=1"));
        let on = [(ENABLE_ENV, "1"), (STORAGE_FAULTS_FILE_ENV, "/tmp/f")];
        assert!(requested(&Config::default(), env(&on)).unwrap_err().contains("drop-unsynced"));
        assert_eq!(requested(&c, env(&on)).unwrap().storage_faults_file, Some(std::path::PathBuf::from("/tmp/f")));
    }
}
