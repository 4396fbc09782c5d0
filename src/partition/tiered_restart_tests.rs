//! A replica's restart at the tiered offset (`Partition::start_from_tiered`) on real
//! files: the state it installs survives a reopen, and a restart a crash cut short
//! (the `tiered_restart` marker still there) starts the log over at the next open.
use kafka_protocol::records::Compression;

use super::replication_tests::{open_follower, open_leader, replicate};
use super::tests::{batch, run, writer_idle};
use super::tiered_restart::{self, TIERED_RESTART_FILE};
use crate::config::FlushMode;
use crate::storage::leader_epoch_cache::EpochEntry;

const PRODUCER: i64 = 9;

/// A follower (broker 2) in `dir/b` holding 16 records of one idempotent producer, the
/// last 4 written in leader epoch 2; the leader in `dir/a`.
async fn replicated(dir: &std::path::Path) -> (std::rc::Rc<super::Partition>, std::rc::Rc<super::Partition>) {
    let leader = open_leader(&dir.join("a"), &[1, 2], &[1, 2], FlushMode::Never).await;
    let f = open_follower(&dir.join("b"), 2, 0, FlushMode::Never).await;
    for i in 0..3 {
        leader.append(batch(4, 100, Some((PRODUCER, 0, 4 * i)), Compression::None), 1).await.unwrap();
    }
    leader.become_leader(2, 1, vec![1, 2], vec![1, 2]);
    leader.append(batch(4, 100, Some((PRODUCER, 0, 12)), Compression::None), 1).await.unwrap();
    writer_idle(&leader).await;
    replicate(&leader, &f, 2, 1 << 20).await;
    assert_eq!(f.log_end_offset(), 16);
    (leader, f)
}

#[test]
fn the_state_of_a_restart_at_the_tiered_offset_survives_a_reopen() {
    run(|dir| async move {
        let (leader, f) = replicated(&dir).await;
        // What the remote log held at offset 100: the leader's producers and epochs.
        let snapshot = leader.producers.borrow().encode();
        let epochs = vec![EpochEntry { epoch: 0, start_offset: 0 }, EpochEntry { epoch: 2, start_offset: 12 }];
        f.start_from_tiered(100, epochs, &snapshot).await.unwrap();
        for round in 0..2 {
            assert_eq!((f.log_start_offset(), f.log_end_offset(), f.high_watermark()), (100, 100, 100), "round {round}");
            assert_eq!(f.epoch_end_offset(0), (0, 12), "round {round}: epoch 0 ended where epoch 2 began");
            assert!(f.producers.borrow().get(PRODUCER).is_some(), "round {round}: the remote producer is known");
            assert!(!f.dir().join(TIERED_RESTART_FILE).exists(), "round {round}: the restart finished");
            if round == 0 {
                f.close();
            }
        }
        drop(f);
        let f = open_follower(&dir.join("b"), 2, 2, FlushMode::Never).await;
        assert_eq!((f.log_start_offset(), f.log_end_offset()), (100, 100));
        assert_eq!(f.epoch_end_offset(0), (0, 12));
        assert!(f.producers.borrow().get(PRODUCER).is_some(), "the snapshot at the log start is found at open");
    });
}

#[test]
fn a_restart_at_the_tiered_offset_cut_short_by_a_crash_starts_the_log_over() {
    // Crashes after the marker, before (false) and after (true) the log was truncated;
    // neither saved the remote state.
    for truncated in [false, true] {
        run(move |dir| async move {
            let (_leader, f) = replicated(&dir).await;
            let pdir = f.dir();
            tiered_restart::begin(&pdir, 100).await.unwrap();
            if truncated {
                f.writer.truncate_fully_and_start_at(100).await.unwrap();
            }
            f.close();
            drop(f);
            let f = open_follower(&dir.join("b"), 2, 2, FlushMode::Never).await;
            assert_eq!((f.log_start_offset(), f.log_end_offset(), f.high_watermark()), (0, 0, 0), "truncated: {truncated}");
            assert_eq!(f.epoch_end_offset(0), (-1, -1), "no epoch survives");
            assert!(f.producers.borrow().get(PRODUCER).is_none());
            assert!(!pdir.join(TIERED_RESTART_FILE).exists());
            assert!(pdir.join(crate::storage::partition_metadata::PARTITION_METADATA_FILE).exists(), "the topic id stays");
        });
    }
}
