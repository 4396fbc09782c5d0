//! The leader-epoch cache of one log: for each leader epoch that wrote to it, the first
//! offset written in that epoch. Kafka's `LeaderEpochFileCache`, kept in Kafka's file
//! (`leader-epoch-checkpoint`, same text format) in the partition directory.
//!
//! Why: a follower, or a leader that was deposed and comes back, asks the leader where
//! its epoch ended (OffsetForLeaderEpoch) and truncates what it has beyond that (KIP-101,
//! KIP-279); consumers validate their position the same way after a leader change
//! (KIP-320). The answer must outlive restarts, so the cache is saved whenever it gains an
//! epoch (rare: the first append after a leadership change) before that append is
//! acknowledged, and rebuilt from the active segment's batches at open (an epoch the
//! broker appended but died before saving is found there).
//!
//! Invariant: epochs and start offsets both strictly increase along the entries.
use std::path::{Path, PathBuf};

use super::dir_survey::DirSurvey;
use super::dma::write_atomic_blocking;
use super::{Result, StorageError};

pub const LEADER_EPOCH_CHECKPOINT_FILE: &str = "leader-epoch-checkpoint";

/// Kafka's "no epoch" and "no offset" answers.
pub const UNDEFINED_EPOCH: i32 = -1;
pub const UNDEFINED_EPOCH_OFFSET: i64 = -1;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpochEntry {
    pub epoch: i32,
    pub start_offset: i64,
}

#[derive(Debug)]
pub struct LeaderEpochCache {
    path: PathBuf,
    entries: Vec<EpochEntry>,
    /// An entry was assigned without a save (`assign_unsaved`): the next append saves
    /// before it is acknowledged.
    unsaved: std::cell::Cell<bool>,
}

impl LeaderEpochCache {
    /// The cache of the log in `dir`, as last saved (empty if never saved).
    pub async fn load(dir: &Path) -> Result<LeaderEpochCache> {
        let path = dir.join(LEADER_EPOCH_CHECKPOINT_FILE);
        let p = path.clone();
        let text = glommio::executor()
            .spawn_blocking(move || match std::fs::read_to_string(&p) {
                Ok(t) => Ok(Some(t)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(e),
            })
            .await
            .map_err(|e| StorageError::io(format!("reading {}", path.display()), e))?;
        Self::from_text(path, text)
    }

    /// `load` from the directory's survey (read with the rest of the directory at open).
    pub async fn load_surveyed(survey: &mut DirSurvey) -> Result<LeaderEpochCache> {
        let text = survey.text_file(LEADER_EPOCH_CHECKPOINT_FILE).await?;
        Self::from_text(survey.dir().join(LEADER_EPOCH_CHECKPOINT_FILE), text)
    }

    fn from_text(path: PathBuf, text: Option<String>) -> Result<LeaderEpochCache> {
        let entries = match text {
            None => Vec::new(),
            Some(t) => {
                decode(&t).ok_or_else(|| StorageError::Corrupt { what: path.display().to_string(), detail: "not a leader-epoch-checkpoint file".into() })?
            }
        };
        Ok(LeaderEpochCache { path, entries, unsaved: Default::default() })
    }

    /// A cache with `entries` and no file behind it, for the replication simulation
    /// (`replication/simulation.rs`), which keeps its "disk" in memory: `save` must not be
    /// called on it.
    #[cfg(test)]
    pub fn in_memory(entries: &[EpochEntry]) -> LeaderEpochCache {
        let c =
            LeaderEpochCache { path: PathBuf::from("/nonexistent/in-memory/leader-epoch-checkpoint"), entries: entries.to_vec(), unsaved: Default::default() };
        c.check();
        c
    }

    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    pub fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|e| e.epoch)
    }

    /// Records that `epoch` wrote first at `start_offset`; true when that is new (the
    /// caller saves). An epoch not above the latest changes nothing (the latest already
    /// covers those offsets).
    pub fn assign(&mut self, epoch: i32, start_offset: i64) -> bool {
        if epoch < 0 || self.latest_epoch().is_some_and(|latest| epoch <= latest) {
            return false;
        }
        // A new epoch never starts below where the previous one did; if it claims to (a
        // truncated tail re-written), the older entries from there are gone already.
        self.truncate_from_end(start_offset);
        self.entries.push(EpochEntry { epoch, start_offset });
        self.check();
        true
    }

    /// `assign`, leaving the save to the next append (`is_unsaved`): for a leader's new
    /// epoch at open, which has no batch yet. Until a batch of it is written, losing the
    /// entry changes no answer: OffsetForLeaderEpoch for an older epoch ends where the
    /// next entry starts, and a later epoch then starts at the same log end. A restarted
    /// broker with 100k partitions paid two fsyncs per partition for these saves.
    pub fn assign_unsaved(&mut self, epoch: i32, start_offset: i64) -> bool {
        let assigned = self.assign(epoch, start_offset);
        if assigned {
            self.unsaved.set(true);
        }
        assigned
    }

    /// The entries were saved by other means (the replication simulation's in-memory
    /// "disk", where `save` must not be called).
    #[cfg(test)]
    pub fn saved_in_memory(&self) {
        self.unsaved.set(false);
    }

    /// Whether an entry awaits its save (`assign_unsaved`).
    pub fn is_unsaved(&self) -> bool {
        self.unsaved.get()
    }

    /// Replaces every entry (a follower restarting its log at the tiered offset takes the
    /// epochs of the remote log up to there, KIP-405); the caller saves.
    pub fn replace(&mut self, entries: Vec<EpochEntry>) {
        self.entries = entries;
        self.check();
    }

    /// Drops what the log no longer has past `end_offset` (entries starting at or after
    /// it); true if anything was dropped.
    pub fn truncate_from_end(&mut self, end_offset: i64) -> bool {
        let keep = self.entries.partition_point(|e| e.start_offset < end_offset);
        let changed = keep < self.entries.len();
        self.entries.truncate(keep);
        changed
    }

    /// Kafka's `endOffsetFor`: the largest epoch at or below `requested` this log has, and
    /// the offset where the next higher epoch starts (the log end offset when `requested`
    /// is the latest). `(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)` when `requested` is
    /// above every epoch here, or undefined.
    pub fn end_offset_for(&self, requested: i32, log_end_offset: i64) -> (i32, i64) {
        if requested == UNDEFINED_EPOCH {
            return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
        }
        if self.latest_epoch() == Some(requested) {
            return (requested, log_end_offset);
        }
        let higher = self.entries.partition_point(|e| e.epoch <= requested);
        let Some(next) = self.entries.get(higher) else { return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET) };
        match higher.checked_sub(1).map(|i| self.entries[i]) {
            // Below the first epoch here: that epoch's start is where `requested` ended.
            None => (requested, next.start_offset),
            Some(floor) => (floor.epoch, next.start_offset),
        }
    }

    /// Writes the entries to the checkpoint file (temporary file, fsync, rename, fsync
    /// the directory), off the shard.
    pub async fn save(&self) -> Result<()> {
        self.save_job().await
    }

    /// `save` as a future that does not borrow the cache (the cache sits in a `RefCell`
    /// that must not stay borrowed across the wait).
    pub fn save_job(&self) -> impl std::future::Future<Output = Result<()>> + 'static {
        // The save carries every entry: none is left unsaved once it is done (a failed
        // save fails its caller: the append, or the follower's fetch).
        self.unsaved.set(false);
        let (path, text) = (self.path.clone(), encode(&self.entries));
        save_text(path, text)
    }

    fn check(&self) {
        debug_assert!(
            self.entries.windows(2).all(|w| w[0].epoch < w[1].epoch && w[0].start_offset < w[1].start_offset),
            "leader epochs and their start offsets strictly increase: {:?}",
            self.entries
        );
    }
}

async fn save_text(path: PathBuf, text: String) -> Result<()> {
    let p = path.clone();
    glommio::executor()
        .spawn_blocking(move || write_atomic_blocking(&p, text.as_bytes()))
        .await
        .map_err(|e| StorageError::io(format!("writing {}", path.display()), e))
}

/// Kafka's checkpoint text: version (0), entry count, then "epoch offset" per line.
pub fn encode(entries: &[EpochEntry]) -> String {
    let mut s = format!("0\n{}\n", entries.len());
    for e in entries {
        s.push_str(&format!("{} {}\n", e.epoch, e.start_offset));
    }
    s
}

/// The entries of a checkpoint text; `None` if it is not one (or breaks the invariant).
pub fn decode(text: &str) -> Option<Vec<EpochEntry>> {
    let mut lines = text.lines();
    if lines.next()?.trim() != "0" {
        return None;
    }
    let count: usize = lines.next()?.trim().parse().ok()?;
    // Bounded by the text itself, not by the count it claims.
    let mut entries = Vec::with_capacity(count.min(text.len() / 4));
    for _ in 0..count {
        let (epoch, offset) = lines.next()?.trim().split_once(' ')?;
        entries.push(EpochEntry { epoch: epoch.parse().ok()?, start_offset: offset.trim().parse().ok()? });
    }
    let ordered = entries.windows(2).all(|w| w[0].epoch < w[1].epoch && w[0].start_offset < w[1].start_offset);
    (ordered && lines.all(|l| l.trim().is_empty())).then_some(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(entries: &[(i32, i64)]) -> LeaderEpochCache {
        LeaderEpochCache {
            path: PathBuf::from("/nonexistent/leader-epoch-checkpoint"),
            entries: entries.iter().map(|&(epoch, start_offset)| EpochEntry { epoch, start_offset }).collect(),
            unsaved: Default::default(),
        }
    }

    #[test]
    fn an_epoch_assigned_unsaved_waits_for_the_next_save() {
        let mut c = cache(&[(1, 0)]);
        assert!(!c.assign_unsaved(1, 5), "not new: nothing to save");
        assert!(!c.is_unsaved());
        assert!(c.assign_unsaved(3, 5));
        assert!(c.is_unsaved(), "the next append saves it");
        drop(c.save_job());
        assert!(!c.is_unsaved(), "a save carries every entry");
    }

    #[test]
    fn end_offset_for_follows_kafka() {
        let c = cache(&[(1, 0), (3, 100), (4, 250)]);
        let leo = 300;
        assert_eq!(c.end_offset_for(4, leo), (4, 300), "the latest epoch ends at the log end");
        assert_eq!(c.end_offset_for(3, leo), (3, 250));
        assert_eq!(c.end_offset_for(2, leo), (1, 100), "an epoch this log never had: the floor epoch, ended where 3 began");
        assert_eq!(c.end_offset_for(0, leo), (0, 0), "below the first epoch: it ended where the first began");
        assert_eq!(c.end_offset_for(5, leo), (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET), "above every epoch here");
        assert_eq!(c.end_offset_for(UNDEFINED_EPOCH, leo), (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET));
        assert_eq!(cache(&[]).end_offset_for(0, 5), (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET));
    }

    #[test]
    fn assign_only_adds_newer_epochs_and_truncation_drops_the_tail() {
        let mut c = cache(&[]);
        assert!(c.assign(0, 0));
        assert!(!c.assign(0, 10), "same epoch: already covered");
        assert!(c.assign(2, 10));
        assert!(!c.assign(1, 20), "an older epoch never comes back");
        assert!(c.assign(5, 40));
        assert!(c.truncate_from_end(40), "the log lost offset 40 on: epoch 5 wrote nothing left");
        assert_eq!(c.latest_epoch(), Some(2));
        assert!(!c.truncate_from_end(40));
        assert!(c.assign(6, 35), "a new epoch after truncation");
        assert_eq!(c.entries().iter().map(|e| (e.epoch, e.start_offset)).collect::<Vec<_>>(), vec![(0, 0), (2, 10), (6, 35)]);
    }

    #[test]
    fn checkpoint_text_round_trips_and_refuses_garbage() {
        let entries = vec![EpochEntry { epoch: 0, start_offset: 0 }, EpochEntry { epoch: 7, start_offset: 1234 }];
        let text = encode(&entries);
        assert_eq!(text, "0\n2\n0 0\n7 1234\n", "Kafka's format");
        assert_eq!(decode(&text), Some(entries));
        for bad in ["", "1\n0\n", "0\n2\n0 0\n", "0\n1\nx 0\n", "0\n2\n5 10\n3 20\n", "0\n1\n0 0\nextra\n", "0\n99999999999\n"] {
            assert_eq!(decode(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn saved_entries_load_back() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        glommio::LocalExecutorBuilder::default()
            .spawn(move || async move {
                let mut c = LeaderEpochCache::load(&dir).await.unwrap();
                assert!(c.entries().is_empty());
                c.assign(0, 0);
                c.assign(4, 77);
                c.save().await.unwrap();
                let back = LeaderEpochCache::load(&dir).await.unwrap();
                assert_eq!(back.entries(), c.entries());
                std::fs::write(dir.join(LEADER_EPOCH_CHECKPOINT_FILE), "junk").unwrap();
                assert!(LeaderEpochCache::load(&dir).await.is_err());
            })
            .unwrap()
            .join()
            .unwrap();
    }
}
