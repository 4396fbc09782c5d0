//! Remote objects of partitions whose topic was deleted while this broker was down: the
//! start-up removal of stray partition directories (`server/stray_partitions.rs`) finds
//! them, and when every replica of a deleted tiered topic was down at the deletion,
//! nobody else deletes its objects (a running replica deletes them when it applies the
//! deletion: `partition_lifecycle.rs`). Runs once on the first shard, off the data path,
//! retrying with back-off while the store fails (the directory is gone: the next start
//! would not find it again). Each folder is keyed by the deleted topic's own id, so no
//! live topic's object is ever under it.
use std::time::Duration;

use crate::remote::object_keys::partition_prefix;
use crate::remote::store::RemoteStore;

/// A deleted topic incarnation's partition: (topic, partition, topic id).
pub type DeletedPartition = (String, i32, [u8; 16]);

const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(60);

pub async fn delete_remote_orphans(store: RemoteStore, partitions: Vec<DeletedPartition>) {
    for (topic, partition, topic_id) in partitions {
        let folder = partition_prefix(&store.settings.key_prefix, &topic, &topic_id, partition);
        let mut backoff = FIRST_BACKOFF;
        loop {
            match store.delete_prefix(folder.clone()).await {
                Ok(0) => break,
                Ok(objects) => {
                    tracing::info!(topic, partition, objects, "topic deleted while this broker was down: its remote objects deleted");
                    break;
                }
                Err(e) => {
                    tracing::warn!(topic, partition, error = %e, retry_in_ms = backoff.as_millis() as u64,
                        "topic deleted while this broker was down: deleting its remote objects failed");
                    glommio::timer::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
    }
}
