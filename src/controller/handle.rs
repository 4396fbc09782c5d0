//! `ControllerHandle`: how shards and request handlers talk to the controller thread.
//!
//! Requests go over an async_channel and answers come back on a futures oneshot, so the
//! futures run on any executor (glommio shards included) without a tokio context.
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use futures::channel::oneshot;

use crate::cluster::image::{ConfigResource, MetadataImage, TopicMeta};

use super::state_machine::Publisher;
use super::{ConfigOp, ControllerError};

type Reply<T> = oneshot::Sender<Result<T, ControllerError>>;

/// One client request to the controller thread.
pub(super) enum Request {
    CreateTopic {
        name: String,
        num_partitions: i32,
        replication_factor: i16,
        configs: BTreeMap<String, String>,
        validate_only: bool,
        reply: Reply<TopicMeta>,
    },
    DeleteTopic {
        name: String,
        reply: Reply<[u8; 16]>,
    },
    CreatePartitions {
        name: String,
        total_count: i32,
        validate_only: bool,
        reply: Reply<()>,
    },
    AlterConfigs {
        name: String,
        ops: Vec<ConfigOp>,
        /// Legacy AlterConfigs: the ops (all `Set`) replace every override.
        replace: bool,
        validate_only: bool,
        reply: Reply<()>,
    },
    AlterResourceConfigs {
        resource: ConfigResource,
        ops: Vec<ConfigOp>,
        replace: bool,
        validate_only: bool,
        reply: Reply<()>,
    },
    AllocateProducerIds {
        count: i64,
        reply: Reply<i64>,
    },
}

/// Cheap to clone; Send + Sync.
#[derive(Clone)]
pub struct ControllerHandle {
    tx: async_channel::Sender<Request>,
    publisher: Arc<Publisher>,
    thread: Arc<Mutex<Option<JoinHandle<()>>>>,
}

fn stopped() -> ControllerError {
    ControllerError::NotController("the controller has stopped".into())
}

impl ControllerHandle {
    pub(super) fn new(
        tx: async_channel::Sender<Request>,
        publisher: Arc<Publisher>,
        thread: JoinHandle<()>,
    ) -> ControllerHandle {
        ControllerHandle {
            tx,
            publisher,
            thread: Arc::new(Mutex::new(Some(thread))),
        }
    }

    async fn call<T>(&self, make: impl FnOnce(Reply<T>) -> Request) -> Result<T, ControllerError> {
        let (reply, rx) = oneshot::channel();
        self.tx.send(make(reply)).await.map_err(|_| stopped())?;
        rx.await.map_err(|_| stopped())?
    }

    /// The latest committed image.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.publisher.image()
    }

    pub async fn create_topic(
        &self,
        name: String,
        num_partitions: i32,
        replication_factor: i16,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<TopicMeta, ControllerError> {
        self.call(|reply| Request::CreateTopic {
            name,
            num_partitions,
            replication_factor,
            configs,
            validate_only,
            reply,
        })
        .await
    }

    /// Returns the deleted topic's id.
    pub async fn delete_topic(&self, name: String) -> Result<[u8; 16], ControllerError> {
        self.call(|reply| Request::DeleteTopic { name, reply })
            .await
    }

    pub async fn create_partitions(
        &self,
        name: String,
        total_count: i32,
        validate_only: bool,
    ) -> Result<(), ControllerError> {
        self.call(|reply| Request::CreatePartitions {
            name,
            total_count,
            validate_only,
            reply,
        })
        .await
    }

    pub async fn alter_topic_configs(
        &self,
        name: String,
        ops: Vec<ConfigOp>,
        validate_only: bool,
    ) -> Result<(), ControllerError> {
        self.call(|reply| Request::AlterConfigs {
            name,
            ops,
            replace: false,
            validate_only,
            reply,
        })
        .await
    }

    /// Legacy AlterConfigs on a topic: `configs` become the topic's whole override set.
    pub async fn replace_topic_configs(
        &self,
        name: String,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<(), ControllerError> {
        let ops = configs.into_iter().map(|(k, v)| ConfigOp::Set(k, v)).collect();
        self.call(|reply| Request::AlterConfigs { name, ops, replace: true, validate_only, reply })
            .await
    }

    /// Changes the dynamic configs of a broker (or the cluster-wide default) or a group;
    /// `replace` = legacy AlterConfigs (keys not in `ops` are removed).
    pub async fn alter_resource_configs(
        &self,
        resource: ConfigResource,
        ops: Vec<ConfigOp>,
        replace: bool,
        validate_only: bool,
    ) -> Result<(), ControllerError> {
        self.call(|reply| Request::AlterResourceConfigs { resource, ops, replace, validate_only, reply })
            .await
    }

    /// Reserves `count` producer ids; returns the first of the block.
    pub async fn allocate_producer_ids(&self, count: i64) -> Result<i64, ControllerError> {
        self.call(|reply| Request::AllocateProducerIds { count, reply })
            .await
    }

    /// Asks the controller to stop (non-blocking): queued requests are still answered, later
    /// ones fail with NotController. Use `join` to wait until its files are closed.
    pub fn shutdown(&self) {
        self.tx.close();
    }

    /// Blocks until the controller thread has exited. Blocking: never call it on a shard
    /// thread; meant for process shutdown and tests.
    pub fn join(&self) {
        let thread = match self.thread.lock() {
            Ok(mut g) => g.take(),
            Err(p) => p.into_inner().take(),
        };
        if let Some(t) = thread {
            if t.join().is_err() {
                tracing::error!("controller thread panicked");
            }
        }
    }
}
