//! The raft state machine: applies committed commands to the metadata image (see
//! `apply.rs`), publishes the new image and its deltas to the shards, and builds/installs
//! snapshots (see `snapshot.rs`).
use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use futures::{Stream, TryStreamExt};
use openraft::storage::{EntryResponder, RaftStateMachine};
use openraft::{EntryPayload, OptionalSend, RaftSnapshotBuilder};

use crate::cluster::image::{MetadataDelta, MetadataImage, MetadataUpdate};

use super::apply::{apply, diff_images};
use super::shard_updates::UpdateSink;
use super::snapshot;
use super::types::{Applied, ControllerTypes, LogId, Response, Snapshot, SnapshotData, SnapshotMeta, StoredMembership};

/// The latest committed image and the shards' update channels. Shared by the state machine
/// (writer, on the controller thread) and every `ControllerHandle` (readers).
pub struct Publisher {
    state: Mutex<PubState>,
    /// The raft node's metrics, once it started: read by metrics scrapes on any thread.
    raft_metrics: std::sync::OnceLock<RaftMetricsWatch>,
    /// Snapshots installed from the leader since this process started (a metric).
    snapshots_installed: std::sync::atomic::AtomicU64,
}

type RaftMetricsWatch = openraft::type_config::alias::WatchReceiverOf<super::types::ControllerTypes, openraft::RaftMetrics<super::types::ControllerTypes>>;

struct PubState {
    image: Arc<MetadataImage>,
    senders: Vec<Box<dyn UpdateSink>>,
    /// False until start-up recovery is done: replayed records are not sent as deltas,
    /// the shards get the recovered image as their first update instead.
    live: bool,
    /// The applied index of the last image sent to the shards. Entries that change
    /// nothing a shard holds (producer-id blocks, raft blanks) are committed without
    /// being sent, so a shard catching up waits for this index, never the committed
    /// one: it would wait for an update that is not coming.
    sent_index: u64,
}

impl Publisher {
    pub fn new(senders: Vec<Box<dyn UpdateSink>>) -> Publisher {
        Publisher {
            state: Mutex::new(PubState { image: Arc::new(MetadataImage::default()), senders, live: false, sent_index: 0 }),
            raft_metrics: std::sync::OnceLock::new(),
            snapshots_installed: std::sync::atomic::AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, PubState> {
        // A panic while holding this lock leaves only a stale Arc behind: keep serving it.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn image(&self) -> Arc<MetadataImage> {
        self.lock().image.clone()
    }

    /// Called once the raft node runs.
    pub fn set_raft_metrics(&self, watch: RaftMetricsWatch) {
        let _ = self.raft_metrics.set(watch);
    }

    /// The quorum as this node sees it; None before the raft node started.
    pub fn quorum_status(&self) -> Option<super::quorum_info::LocalQuorumStatus> {
        use openraft::async_runtime::WatchReceiver as _;
        let installed = self.snapshots_installed.load(std::sync::atomic::Ordering::Relaxed);
        self.raft_metrics
            .get()
            .map(|w| super::quorum_info::LocalQuorumStatus { snapshots_installed: installed, ..super::quorum_info::local_status(&w.borrow_watched()) })
    }

    /// The newest metadata index the shards will apply: what a shard catching up with
    /// the controller waits for (see `PubState::sent_index`).
    pub fn shard_index(&self) -> u64 {
        self.lock().sent_index
    }

    /// Stores `image` as the latest committed one and, once live, sends it with `deltas` to
    /// every shard (only when something changed for them).
    fn publish(&self, image: Arc<MetadataImage>, deltas: Vec<MetadataDelta>) {
        let mut st = self.lock();
        st.image = image.clone();
        if st.live && !deltas.is_empty() {
            st.sent_index = image.applied_index;
            send_all(&st.senders, MetadataUpdate { image, deltas });
        }
    }

    /// Whether recovery ended (`go_live`).
    fn is_live(&self) -> bool {
        self.lock().live
    }

    /// Ends recovery: every shard gets the current image with no deltas, then live updates.
    pub fn go_live(&self) {
        let mut st = self.lock();
        if st.live {
            return;
        }
        st.live = true;
        st.sent_index = st.image.applied_index;
        send_all(&st.senders, MetadataUpdate { image: st.image.clone(), deltas: Vec::new() });
    }
}

fn send_all(senders: &[Box<dyn UpdateSink>], update: MetadataUpdate) {
    for (shard, tx) in senders.iter().enumerate() {
        // Never waits (a slow shard's updates merge, see `shard_updates`): the only
        // failure is a stopped shard.
        if tx.post(update.clone()).is_err() {
            tracing::debug!(shard, "metadata update not delivered: shard channel closed");
        }
    }
}

pub struct StateMachine {
    dir: PathBuf,
    image: Arc<MetadataImage>,
    last_applied: Option<LogId>,
    membership: StoredMembership,
    publisher: Arc<Publisher>,
}

impl StateMachine {
    /// Loads the snapshot in `dir` (if any); raft replays the log after it.
    pub fn open(dir: PathBuf, publisher: Arc<Publisher>) -> Result<StateMachine, String> {
        let mut sm = StateMachine { dir, image: Arc::new(MetadataImage::default()), last_applied: None, membership: StoredMembership::default(), publisher };
        if let Some((meta, image, bytes)) = snapshot::load(&sm.dir)? {
            tracing::info!(last_log_id = ?meta.last_log_id, bytes = bytes.len(), topics = image.topics.len(), "controller snapshot loaded");
            sm.last_applied = meta.last_log_id;
            sm.membership = meta.last_membership;
            sm.image = Arc::new(image);
        }
        sm.publisher.publish(sm.image.clone(), Vec::new());
        Ok(sm)
    }

    fn snapshot_meta(&self) -> SnapshotMeta {
        SnapshotMeta { last_log_id: self.last_applied, last_membership: self.membership.clone() }
    }
}

/// Builds a snapshot of the state at the time it was created (the state machine keeps
/// applying meanwhile).
pub struct Builder {
    dir: PathBuf,
    image: Arc<MetadataImage>,
    meta: SnapshotMeta,
}

impl RaftSnapshotBuilder<ControllerTypes> for Builder {
    type SnapshotData = SnapshotData;

    async fn build_snapshot(&mut self) -> Result<Snapshot, io::Error> {
        let bytes = snapshot::encode(&self.meta, &self.image)?;
        snapshot::store(&self.dir, &bytes)?;
        tracing::info!(last_log_id = ?self.meta.last_log_id, bytes = bytes.len(), "controller snapshot written");
        Ok(Snapshot { meta: self.meta.clone(), snapshot: bytes })
    }
}

impl RaftStateMachine<ControllerTypes> for StateMachine {
    type SnapshotData = SnapshotData;
    type SnapshotBuilder = Builder;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), io::Error> {
        Ok((self.last_applied, self.membership.clone()))
    }

    async fn apply<Strm>(&mut self, mut entries: Strm) -> Result<(), io::Error>
    where
        Strm: Stream<Item = Result<EntryResponder<ControllerTypes>, io::Error>> + Unpin + OptionalSend,
    {
        // While recovering, an entry nobody waits for is not published one by one: the
        // publisher holding the image makes the next entry's `make_mut` copy all of it
        // (a restart of 100k partitions replayed 200 entries in 5 s that way). The image is
        // stored once at the end, or before answering a waiter.
        let mut unpublished = false;
        while let Some((entry, responder)) = entries.try_next().await? {
            let index = entry.log_id.index;
            let (response, deltas) = match &entry.payload {
                EntryPayload::Blank => {
                    Arc::make_mut(&mut self.image).applied_index = index;
                    (Response(Ok(Applied::Done)), Vec::new())
                }
                EntryPayload::Normal(cmd) => apply(Arc::make_mut(&mut self.image), index, cmd),
                EntryPayload::Membership(m) => {
                    self.membership = StoredMembership::new(Some(entry.log_id), m.clone());
                    Arc::make_mut(&mut self.image).applied_index = index;
                    (Response(Ok(Applied::Done)), Vec::new())
                }
            };
            self.last_applied = Some(entry.log_id);
            if responder.is_some() || self.publisher.is_live() {
                self.publisher.publish(self.image.clone(), deltas);
                unpublished = false;
            } else {
                unpublished = true;
            }
            if let Some(r) = responder {
                r.send(response);
            }
        }
        if unpublished {
            self.publisher.publish(self.image.clone(), Vec::new());
        }
        Ok(())
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        Builder { dir: self.dir.clone(), image: self.image.clone(), meta: self.snapshot_meta() }
    }

    async fn install_snapshot(&mut self, meta: &SnapshotMeta, data: SnapshotData) -> Result<(), io::Error> {
        let (_, image) = snapshot::decode(&data)?;
        snapshot::store(&self.dir, &data)?;
        let deltas = diff_images(&self.image, &image);
        tracing::info!(last_log_id = ?meta.last_log_id, changes = deltas.len(), "controller snapshot installed");
        self.publisher.snapshots_installed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.image = Arc::new(image);
        self.last_applied = meta.last_log_id;
        self.membership = meta.last_membership.clone();
        self.publisher.publish(self.image.clone(), deltas);
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, io::Error> {
        match snapshot::load(&self.dir) {
            Ok(Some((meta, _, bytes))) => Ok(Some(Snapshot { meta, snapshot: bytes })),
            Ok(None) => Ok(None),
            Err(msg) => Err(io::Error::new(io::ErrorKind::InvalidData, msg)),
        }
    }
}
