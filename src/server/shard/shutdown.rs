//! A shard's part of a clean broker shutdown (`server/shutdown.rs`): once the process
//! asks, every replica this shard holds, led or followed, closes cleanly
//! (`Partition::close_cleanly`: durable, marked clean, high watermark saved),
//! `CLOSE_CONCURRENCY` at a time so their syncs overlap; then the shard reports back.
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;

use super::context::ShardContext;

/// How often an idle shard looks at the shutdown flag: a shutdown waits at most this
/// long to start, and the check costs nothing measurable.
const POLL: Duration = Duration::from_millis(50);

/// Replicas closing at once: enough for their syncs to overlap, few enough that the
/// descriptors they open (the marker's and checkpoint's temporary files, the segment a
/// closed idle file reopens to sync) stay within the open-files reserve: all 50k of a
/// shard at once ran out of descriptors (EMFILE) and left logs unmarked.
const CLOSE_CONCURRENCY: usize = 256;

/// Waits for `requested`, closes this shard's replicas cleanly, then sends its id on
/// `done`.
pub async fn close_on_shutdown(ctx: Rc<ShardContext>, requested: Arc<AtomicBool>, done: Sender<u16>) {
    while !requested.load(Ordering::Acquire) {
        glommio::timer::sleep(POLL).await;
    }
    let replicas: Vec<_> = ctx.partitions.all().into_iter().chain(ctx.partitions.followers()).collect();
    tracing::info!(shard = ctx.shard, replicas = replicas.len(), "closing the replicas cleanly");
    futures::stream::iter(&replicas).for_each_concurrent(CLOSE_CONCURRENCY, |p| p.close_cleanly()).await;
    let _ = done.send(ctx.shard);
}
