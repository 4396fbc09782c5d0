//! `shardlog tune`: what the broker needs of the host it runs on, checked (`--check`) and,
//! only for what the operator names, changed (`--apply`), as Redpanda's `rpk redpanda tune`
//! and `rpk iotune` do for theirs. `shardlog serve` runs the required checks before it
//! starts and refuses with the same words (`required_failures`).
//!
//! Host facts only: it reads /proc and /sys (under `Host::root`, "/" outside tests) and
//! makes the syscalls the broker depends on (io_uring_setup, an O_DIRECT open); it names
//! no broker module.
//!
//! - `checks.rs` every check: what it reads, what it wants, required or recommended
//! - `apply.rs`  the changes `--apply` can make, each printed before and after
pub mod apply;
pub mod checks;

pub use checks::{check_all, required_failures, CheckResult, Host, Level, Outcome, TuneInputs};
