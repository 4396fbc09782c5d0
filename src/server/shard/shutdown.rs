//! A shard's part of a clean broker shutdown (`server/shutdown.rs`): once the process
//! asks, every replica this shard holds, led or followed, closes cleanly
//! (`Partition::close_cleanly`: durable, marked clean, high watermark saved), all at
//! once so their syncs overlap; then the shard reports back.
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Duration;

use super::context::ShardContext;

/// How often an idle shard looks at the shutdown flag: a shutdown waits at most this
/// long to start, and the check costs nothing measurable.
const POLL: Duration = Duration::from_millis(50);

/// Waits for `requested`, closes this shard's replicas cleanly, then sends its id on
/// `done`.
pub async fn close_on_shutdown(ctx: Rc<ShardContext>, requested: Arc<AtomicBool>, done: Sender<u16>) {
    while !requested.load(Ordering::Acquire) {
        glommio::timer::sleep(POLL).await;
    }
    let replicas: Vec<_> = ctx.partitions.all().into_iter().chain(ctx.partitions.followers()).collect();
    tracing::info!(shard = ctx.shard, replicas = replicas.len(), "closing the replicas cleanly");
    futures::future::join_all(replicas.iter().map(|p| p.close_cleanly())).await;
    let _ = done.send(ctx.shard);
}
