//! `shardlog tune --apply <name>...`: the host changes the tool can make, one per check
//! name, each only when the operator names it; every write is printed (file, old value,
//! new value). Changes last until reboot, as `sysctl -w` (persisting them is the
//! operator's: /etc/sysctl.d, a udev rule, a systemd unit).
use std::path::{Path, PathBuf};

use super::checks::{cpu_files, selected, Host, TuneInputs};

/// The names `--apply` knows.
pub const APPLICABLE: &[&str] = &["aio_max_nr", "cpu_governor", "dirty_writeback", "io_scheduler", "swappiness", "transparent_hugepages"];

/// One write: what it changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub path: PathBuf,
    pub before: String,
    pub after: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("unknown tuning {0:?}; `--apply` knows {known}", known = APPLICABLE.join(", "))]
    Unknown(String),
    #[error("cannot write {path}: {source} (root is needed)")]
    Write { path: PathBuf, source: std::io::Error },
    #[error("{0}")]
    NotFound(String),
}

/// Checks every name first (nothing is written when one is unknown), then applies them
/// in order.
pub fn apply(host: &Host, inputs: &TuneInputs, names: &[String]) -> Result<Vec<Change>, ApplyError> {
    if let Some(bad) = names.iter().find(|n| !APPLICABLE.contains(&n.as_str())) {
        return Err(ApplyError::Unknown(bad.clone()));
    }
    let mut changes = Vec::new();
    for name in names {
        match name.as_str() {
            "aio_max_nr" => changes.push(write(&host.path("proc/sys/fs/aio-max-nr"), "1048576")?),
            "swappiness" => changes.push(write(&host.path("proc/sys/vm/swappiness"), "1")?),
            "dirty_writeback" => {
                changes.push(write(&host.path("proc/sys/vm/dirty_background_ratio"), "5")?);
                changes.push(write(&host.path("proc/sys/vm/dirty_ratio"), "60")?);
            }
            "transparent_hugepages" => changes.push(write(&host.path("sys/kernel/mm/transparent_hugepage/enabled"), "madvise")?),
            "cpu_governor" => {
                let cpus = cpu_files(host, "cpufreq/scaling_governor");
                if cpus.is_empty() {
                    return Err(ApplyError::NotFound("no cpufreq governors on this host (a VM?)".into()));
                }
                for (path, _) in cpus {
                    changes.push(write(&path, "performance")?);
                }
            }
            "io_scheduler" => {
                let mut queues: Vec<PathBuf> = inputs.log_dirs.iter().filter_map(|d| super::checks::block_queue_of(host, d)).collect();
                queues.sort();
                queues.dedup();
                if queues.is_empty() {
                    return Err(ApplyError::NotFound("no block queue found under the log dirs".into()));
                }
                for q in queues {
                    changes.push(write(&q.join("scheduler"), "none")?);
                }
            }
            _ => unreachable!("checked above"),
        }
    }
    Ok(changes)
}

/// Writes `value` to a sysctl or sysfs file, returning what it held before (a selector's
/// bracketed choice).
fn write(path: &Path, value: &str) -> Result<Change, ApplyError> {
    let raw = std::fs::read_to_string(path).map_err(|source| ApplyError::Write { path: path.to_path_buf(), source })?;
    let before = selected(&raw).unwrap_or_else(|| raw.trim().to_string());
    std::fs::write(path, value).map_err(|source| ApplyError::Write { path: path.to_path_buf(), source })?;
    Ok(Change { path: path.to_path_buf(), before, after: value.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_named_tunings_are_written_and_each_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        for (rel, body) in [
            ("proc/sys/vm/swappiness", "60\n"),
            ("proc/sys/fs/aio-max-nr", "65536\n"),
            ("sys/kernel/mm/transparent_hugepage/enabled", "[always] madvise never\n"),
        ] {
            let p = dir.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, body).unwrap();
        }
        let host = Host { root: dir.path().to_path_buf() };
        let inputs = TuneInputs { log_dirs: Vec::new(), flush_always: false };
        let changes = apply(&host, &inputs, &["swappiness".into(), "transparent_hugepages".into()]).unwrap();
        assert_eq!(changes.iter().map(|c| (c.before.as_str(), c.after.as_str())).collect::<Vec<_>>(), vec![("60", "1"), ("always", "madvise")]);
        assert_eq!(std::fs::read_to_string(dir.path().join("proc/sys/fs/aio-max-nr")).unwrap(), "65536\n", "not named: untouched");
        assert!(matches!(apply(&host, &inputs, &["swappiness".into(), "bogus".into()]), Err(ApplyError::Unknown(n)) if n == "bogus"));
        assert_eq!(std::fs::read_to_string(dir.path().join("proc/sys/vm/swappiness")).unwrap(), "1", "an unknown name writes nothing");
    }
}
