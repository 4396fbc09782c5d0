//! Raft log and vote storage under `<data_dir>/controller/`.
//!
//! - `raft.log`: append-only; one framed record (see `frame.rs`) per entry, payload =
//!   the entry as JSON. On open, the first record that is torn or fails its CRC ends the
//!   log: the file is truncated there (an entry is only reported flushed after fsync, so
//!   anything past a torn record was never acknowledged).
//! - `raft.meta`: the vote and the last purged log id, one framed record, replaced
//!   atomically. A bad meta file is an error, never silently reset (it holds the vote).
//!
//! The metadata log is small (it is purged after every snapshot), so entries are also kept
//! in memory and reads never touch the disk. The store runs on the controller thread only;
//! the mutex exists because openraft wants the reader and the store as separate values.
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use openraft::storage::{IOFlushed, LogState, RaftLogStorage};
use openraft::{OptionalSend, RaftLogReader};
use serde::{Deserialize, Serialize};

use super::files::{read_if_exists, sync_dir, write_atomic};
use super::frame::{self, FrameError};
use super::types::{ControllerTypes, Entry, LogId, Vote};

pub(super) const LOG_MAGIC: u32 = u32::from_le_bytes(*b"SLRL");
pub(super) const LOG_VERSION: u16 = 1;
const META_MAGIC: u32 = u32::from_le_bytes(*b"SLRM");
const META_VERSION: u16 = 1;
/// Largest encoded entry accepted on write and on read.
pub const MAX_ENTRY_BYTES: usize = 16 << 20;
const MAX_META_BYTES: usize = 64 << 10;

pub const LOG_FILE: &str = "raft.log";
pub const META_FILE: &str = "raft.meta";

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct LogMeta {
    vote: Option<Vote>,
    last_purged: Option<LogId>,
}

pub(super) struct Stored {
    entry: Entry,
    /// Byte offset of the entry's record in `raft.log`.
    offset: u64,
}

struct LogFiles {
    log_path: PathBuf,
    meta_path: PathBuf,
    log: File,
    log_len: u64,
    entries: BTreeMap<u64, Stored>,
    meta: LogMeta,
}

/// The raft log store; cloning gives another view of the same files (used as the reader).
#[derive(Clone)]
pub struct LogStore {
    inner: Arc<Mutex<LogFiles>>,
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

pub(super) fn encode_entry(out: &mut Vec<u8>, entry: &Entry) -> io::Result<()> {
    let json = serde_json::to_vec(entry).map_err(|e| invalid(format!("encode log entry: {e}")))?;
    if json.len() > MAX_ENTRY_BYTES {
        return Err(invalid(format!("log entry {} is {} bytes, limit {MAX_ENTRY_BYTES}", entry.log_id, json.len())));
    }
    frame::encode_into(out, LOG_MAGIC, LOG_VERSION, &json);
    Ok(())
}

/// Scans `raft.log`; returns the valid entries and where the valid prefix ends. A torn or
/// corrupt record (bad frame or CRC) ends the valid prefix; a record whose CRC holds but
/// whose entry does not decode was written whole by another format (another version of
/// shardlog or openraft's types): an error, never a truncation, so no committed metadata
/// is dropped by an upgrade.
pub(super) fn scan_log(buf: &[u8], path: &Path) -> io::Result<(BTreeMap<u64, Stored>, u64)> {
    let mut entries = BTreeMap::new();
    let mut pos = 0usize;
    let mut prev: Option<u64> = None;
    while pos < buf.len() {
        let why = match frame::decode(&buf[pos..], LOG_MAGIC, LOG_VERSION, MAX_ENTRY_BYTES) {
            Ok((payload, used)) => match serde_json::from_slice::<Entry>(payload) {
                Ok(entry) if prev.is_none_or(|p| entry.log_id.index == p + 1) => {
                    prev = Some(entry.log_id.index);
                    entries.insert(entry.log_id.index, Stored { entry, offset: pos as u64 });
                    pos += used;
                    continue;
                }
                Ok(entry) => format!("entry index {} does not follow {:?}", entry.log_id.index, prev),
                Err(e) => {
                    return Err(invalid(format!(
                        "{}: the record at offset {pos} is intact but does not decode ({e}): written by another version? \
                         Refusing to truncate committed metadata",
                        path.display()
                    )))
                }
            },
            Err(FrameError::Truncated { .. }) => "torn record at end of file".to_string(),
            Err(e) => e.to_string(),
        };
        tracing::warn!(
            file = %path.display(), offset = pos, dropped_bytes = buf.len() - pos, reason = %why,
            "controller log: truncating at first bad record"
        );
        break;
    }
    Ok((entries, pos as u64))
}

fn write_meta(path: &Path, meta: &LogMeta) -> io::Result<()> {
    let json = serde_json::to_vec(meta).map_err(|e| invalid(format!("encode raft meta: {e}")))?;
    write_atomic(path, &frame::encode(META_MAGIC, META_VERSION, &json))
}

impl LogStore {
    /// Opens (or creates) the log in `dir`, truncating a torn tail.
    pub fn open(dir: &Path) -> io::Result<LogStore> {
        std::fs::create_dir_all(dir)?;
        let log_path = dir.join(LOG_FILE);
        let meta_path = dir.join(META_FILE);

        let meta = match read_if_exists(&meta_path)? {
            None => LogMeta::default(),
            Some(buf) => {
                let (payload, _) = frame::decode(&buf, META_MAGIC, META_VERSION, MAX_META_BYTES)
                    .map_err(|e| invalid(format!("{} is corrupt ({e}); it holds the raft vote, restore it or wipe the controller dir", meta_path.display())))?;
                serde_json::from_slice(payload).map_err(|e| invalid(format!("{} is undecodable: {e}", meta_path.display())))?
            }
        };

        let buf = read_if_exists(&log_path)?.unwrap_or_default();
        let (mut entries, valid_len) = scan_log(&buf, &log_path)?;
        let log = OpenOptions::new().read(true).append(true).create(true).open(&log_path)?;
        if valid_len < buf.len() as u64 {
            log.set_len(valid_len)?;
            log.sync_all()?;
        }
        sync_dir(&log_path)?;
        // A crash between writing the meta and rewriting the log on purge leaves purged
        // entries in the file; they are dead.
        if let Some(p) = &meta.last_purged {
            entries.retain(|idx, _| *idx > p.index);
        }
        tracing::info!(
            dir = %dir.display(), entries = entries.len(), last_purged = ?meta.last_purged,
            "controller log opened"
        );
        Ok(LogStore { inner: Arc::new(Mutex::new(LogFiles { log_path, meta_path, log, log_len: valid_len, entries, meta })) })
    }

    fn lock(&self) -> io::Result<MutexGuard<'_, LogFiles>> {
        self.inner.lock().map_err(|_| io::Error::other("controller log store mutex poisoned"))
    }

    /// (first, last) index held in the log, for tests and logging.
    #[cfg(test)]
    pub fn bounds(&self) -> io::Result<Option<(u64, u64)>> {
        let g = self.lock()?;
        Ok(g.entries.keys().next().copied().zip(g.entries.keys().next_back().copied()))
    }
}

impl LogFiles {
    fn append(&mut self, entries: Vec<Entry>) -> io::Result<()> {
        let mut buf = Vec::new();
        let mut offsets = Vec::with_capacity(entries.len());
        for e in &entries {
            offsets.push(self.log_len + buf.len() as u64);
            encode_entry(&mut buf, e)?;
        }
        self.log.write_all(&buf)?;
        // Durable before we tell raft the entries are flushed.
        self.log.sync_data()?;
        self.log_len += buf.len() as u64;
        for (entry, offset) in entries.into_iter().zip(offsets) {
            self.entries.insert(entry.log_id.index, Stored { entry, offset });
        }
        Ok(())
    }

    /// Removes entries with index >= `from`.
    fn truncate_from(&mut self, from: u64) -> io::Result<()> {
        let Some(offset) = self.entries.range(from..).next().map(|(_, s)| s.offset) else {
            return Ok(());
        };
        self.log.set_len(offset)?;
        self.log.sync_data()?;
        self.log_len = offset;
        self.entries.split_off(&from);
        Ok(())
    }

    /// Forgets entries up to and including `upto`: records it in the meta file first, then
    /// rewrites the log without them (the log is small: it is purged after each snapshot).
    fn purge(&mut self, upto: LogId) -> io::Result<()> {
        let mut meta = self.meta.clone();
        meta.last_purged = Some(upto);
        write_meta(&self.meta_path, &meta)?;
        self.meta = meta;
        self.entries = self.entries.split_off(&(upto.index + 1));

        let mut buf = Vec::new();
        for stored in self.entries.values_mut() {
            stored.offset = buf.len() as u64;
            encode_entry(&mut buf, &stored.entry)?;
        }
        write_atomic(&self.log_path, &buf)?;
        self.log = OpenOptions::new().read(true).append(true).open(&self.log_path)?;
        self.log_len = buf.len() as u64;
        Ok(())
    }
}

impl RaftLogReader<ControllerTypes> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(&mut self, range: RB) -> Result<Vec<Entry>, io::Error> {
        let g = self.lock()?;
        Ok(g.entries.range(range).map(|(_, s)| s.entry.clone()).collect())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, io::Error> {
        Ok(self.lock()?.meta.vote)
    }
}

impl RaftLogStorage<ControllerTypes> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<ControllerTypes>, io::Error> {
        let g = self.lock()?;
        let last_purged_log_id = g.meta.last_purged;
        let last_log_id = g.entries.values().next_back().map(|s| s.entry.log_id).or(last_purged_log_id);
        Ok(LogState { last_purged_log_id, last_log_id })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), io::Error> {
        let mut g = self.lock()?;
        let mut meta = g.meta.clone();
        meta.vote = Some(*vote);
        write_meta(&g.meta_path, &meta)?;
        g.meta = meta;
        Ok(())
    }

    async fn append<I>(&mut self, entries: I, callback: IOFlushed<ControllerTypes>) -> Result<(), io::Error>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let res = self.lock().and_then(|mut g| g.append(entries.into_iter().collect()));
        match res {
            Ok(()) => {
                callback.io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                tracing::error!(error = %e, "controller log append failed");
                callback.io_completed(Err(io::Error::new(e.kind(), e.to_string())));
                Err(e)
            }
        }
    }

    async fn truncate_after(&mut self, last_log_id: Option<LogId>) -> Result<(), io::Error> {
        let from = last_log_id.map_or(0, |l| l.index + 1);
        self.lock()?.truncate_from(from)
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), io::Error> {
        // One line per snapshot (every `metadata_snapshot_every_entries`); tests wait for it.
        tracing::info!(upto = %log_id, index = log_id.index, "controller log purged");
        self.lock()?.purge(log_id)
    }
}

#[cfg(test)]
mod tests {
    use openraft::entry::RaftEntry;
    use openraft::vote::leader_id_std::CommittedLeaderId;

    use super::*;
    use crate::controller::types::Command;

    fn entry(index: u64) -> Entry {
        let log_id = LogId::new(CommittedLeaderId::new(1), index);
        Entry::new_normal(log_id, Command::AllocateProducerIds { count: index as i64 })
    }

    fn indexes(store: &mut LogStore) -> Vec<u64> {
        futures::executor::block_on(store.try_get_log_entries(..)).unwrap().iter().map(|e| e.log_id.index).collect()
    }

    fn append(store: &mut LogStore, range: std::ops::RangeInclusive<u64>) {
        futures::executor::block_on(store.append(range.map(entry), IOFlushed::noop())).unwrap();
    }

    #[test]
    fn truncate_purge_and_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = LogStore::open(dir.path()).unwrap();
        append(&mut s, 1..=6);
        futures::executor::block_on(s.truncate_after(Some(entry(4).log_id))).unwrap();
        append(&mut s, 5..=7);
        futures::executor::block_on(s.purge(entry(2).log_id)).unwrap();
        assert_eq!(indexes(&mut s), vec![3, 4, 5, 6, 7]);
        drop(s);

        let mut s = LogStore::open(dir.path()).unwrap();
        assert_eq!(indexes(&mut s), vec![3, 4, 5, 6, 7]);
        let st = futures::executor::block_on(s.get_log_state()).unwrap();
        assert_eq!(st.last_purged_log_id.map(|l| l.index), Some(2));
        assert_eq!(st.last_log_id.map(|l| l.index), Some(7));
    }

    #[test]
    fn damaged_record_ends_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = LogStore::open(dir.path()).unwrap();
        append(&mut s, 1..=3);
        let first_len = {
            let g = s.lock().unwrap();
            g.entries[&2].offset
        };
        drop(s);
        // Flip a payload byte of entry 2: entries 2 and 3 are dropped, 1 survives.
        let path = dir.path().join(LOG_FILE);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[first_len as usize + frame::HEADER_LEN + 3] ^= 0x20;
        std::fs::write(&path, &bytes).unwrap();
        let mut s = LogStore::open(dir.path()).unwrap();
        assert_eq!(indexes(&mut s), vec![1]);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), first_len);
        // Appending continues cleanly after the truncation point.
        append(&mut s, 2..=2);
        drop(s);
        let mut s = LogStore::open(dir.path()).unwrap();
        assert_eq!(indexes(&mut s), vec![1, 2]);
    }

    #[test]
    fn an_intact_record_of_another_format_is_refused_not_truncated() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = LogStore::open(dir.path()).unwrap();
        append(&mut s, 1..=2);
        drop(s);
        // A whole, CRC-valid record whose entry is another shape (e.g. log ids written by
        // openraft's "advanced" leader ids, before 2026-12-01).
        let path = dir.path().join(LOG_FILE);
        let mut bytes = std::fs::read(&path).unwrap();
        let before = bytes.len();
        let old = br#"{"log_id":{"leader_id":{"term":1,"node_id":1},"index":3},"payload":"Blank"}"#;
        frame::encode_into(&mut bytes, LOG_MAGIC, LOG_VERSION, old);
        std::fs::write(&path, &bytes).unwrap();
        let err = LogStore::open(dir.path()).err().expect("refused");
        assert!(err.to_string().contains("does not decode"), "{err}");
        assert!(std::fs::metadata(&path).unwrap().len() > before as u64, "nothing truncated");
    }
}
