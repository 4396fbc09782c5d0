//! Clean (controlled) shutdown on SIGTERM or SIGINT (what Kafka's kafka-server-stop.sh sends; Kafka
//! then runs a controlled shutdown). The signals are blocked in every thread from the
//! start and taken by `TerminationSignals::wait` on the main thread, so no handler runs
//! in signal context. The broker's sequence (`broker.rs`): the controller moves this
//! broker's leaderships to other in-sync replicas and takes it out of the ISRs
//! (`ControllerHandle::controlled_shutdown`), then every shard closes its replicas
//! cleanly (`shard/shutdown.rs`), then the controller stops and the process exits 0. A
//! second signal exits at once; a step that takes too long is given up, leaving what it
//! did not close to be recovered at the next start, as after a crash.
use std::time::{Duration, Instant};

/// How long the shards may take to close their replicas (a sync of everything written
/// since the last one): past it the process exits anyway.
pub const CLOSE_DEADLINE: Duration = Duration::from_secs(60);

/// How long the controlled shutdown may wait for the quorum to fence this broker (no
/// quorum leader, say): past it the shards close anyway, and the broker is fenced when
/// its heartbeats stop.
pub const FENCE_DEADLINE: Duration = Duration::from_secs(5);

/// Asks the quorum to fence this broker (`ControllerHandle::controlled_shutdown`) and
/// waits at most `deadline` for it to commit.
pub fn controlled_shutdown(controller: &crate::controller::ControllerHandle, broker: i32, deadline: Duration) {
    let (tx, rx) = std::sync::mpsc::channel();
    let c = controller.clone();
    let asked = std::thread::Builder::new().name("controlled-shutdown".into()).spawn(move || {
        let _ = tx.send(futures::executor::block_on(c.controlled_shutdown(broker)));
    });
    match asked.map_err(|e| e.to_string()).and_then(|_| rx.recv_timeout(deadline).map_err(|e| e.to_string())) {
        Ok(Ok(())) => tracing::info!("controlled shutdown: fenced; leaderships moved to the other in-sync replicas"),
        Ok(Err(e)) => tracing::warn!(error = %e, "controlled shutdown: not fenced; closing anyway"),
        Err(e) => tracing::warn!(error = %e, "controlled shutdown: no answer in time; closing anyway"),
    }
}

/// How long the controller thread may take to stop. Its committed state is durable
/// already (the raft log is synced before a commit), so giving up is as safe as a crash;
/// without a quorum (the last voters stopping) raft's shutdown can take longer.
pub const CONTROLLER_DEADLINE: Duration = Duration::from_secs(1);

/// Joins the controller thread (asked to stop already), giving up after `deadline`.
pub fn join_within(controller: &crate::controller::ControllerHandle, deadline: Duration) {
    let (tx, rx) = std::sync::mpsc::channel();
    let c = controller.clone();
    let joined = std::thread::Builder::new().name("controller-join".into()).spawn(move || {
        c.join();
        let _ = tx.send(());
    });
    if joined.is_err() || rx.recv_timeout(deadline).is_err() {
        tracing::warn!("the controller did not stop in time");
    }
}

/// SIGTERM and SIGINT, blocked.
#[derive(Clone, Copy)]
pub struct TerminationSignals(libc::sigset_t);

impl TerminationSignals {
    /// Blocks SIGTERM and SIGINT in the calling thread. Threads started afterwards inherit
    /// the mask, so call it before any thread starts: the signals then stay pending until
    /// `wait` takes them, whichever thread the kernel picked.
    pub fn block() -> TerminationSignals {
        // SAFETY: plain libc calls on a local, initialized sigset.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGTERM);
            libc::sigaddset(&mut set, libc::SIGINT);
            let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            debug_assert_eq!(rc, 0, "pthread_sigmask with a valid set cannot fail");
            TerminationSignals(set)
        }
    }

    /// Waits for one of them; returns its number.
    pub fn wait(&self) -> i32 {
        loop {
            let mut sig = 0;
            // SAFETY: the set was built by `block`; `sig` is a valid out pointer.
            if unsafe { libc::sigwait(&self.0, &mut sig) } == 0 {
                return sig;
            }
        }
    }

    /// From now on the next signal exits the process at once (status 1).
    pub fn exit_on_next(self) {
        std::thread::Builder::new()
            .name("second-signal".into())
            .spawn(move || {
                let sig = self.wait();
                eprintln!("shardlog: signal {sig} during shutdown: exiting now");
                std::process::exit(1);
            })
            .map(drop)
            .unwrap_or_else(|e| tracing::warn!(error = %e, "cannot watch for a second signal"));
    }
}

/// Waits until `count` shards reported on `done`, at most until `deadline`; returns how
/// many did.
pub fn wait_for_shards(done: &std::sync::mpsc::Receiver<u16>, count: usize, deadline: Instant) -> usize {
    let mut closed = 0;
    while closed < count {
        let left = deadline.saturating_duration_since(Instant::now());
        match done.recv_timeout(left) {
            Ok(_) => closed += 1,
            Err(_) => break,
        }
    }
    closed
}

/// The broker's handler for a log that went offline (`storage/log_dir_failure.rs`): halt
/// at once, as Kafka's broker halts when no log dir is left online (Exit.halt: no clean
/// shutdown, which would wait on the failed log). The controller fences this broker when
/// its heartbeats stop and elects leaders from the rest of the ISR; at the next start
/// recovery re-validates the log. Not as Kafka with several log dirs: Kafka keeps serving
/// the partitions of the other dirs, shardlog halts too.
pub fn halt_on_offline_log(offline: &crate::storage::log_dir_failure::OfflineLog) {
    tracing::error!(
        topic = offline.topic,
        partition = offline.partition,
        reason = offline.reason,
        "a log went offline (its fdatasync or truncation failed): halting the broker so the controller moves \
         its leaderships to the other in-sync replicas; fix the disk, then restart (recovery re-validates the log)"
    );
    eprintln!("shardlog: log {}-{} offline ({}): halting", offline.topic, offline.partition, offline.reason);
    // SAFETY: _exit ends the process at once; nothing runs after it.
    unsafe { libc::_exit(1) }
}
