//! Which fetcher pulls which followed partition on one shard: one `Fetcher` per leader
//! broker, its partition set replaced whenever metadata moved leaderships
//! (`reconcile`, called by the partition lifecycle after each metadata update).
//! Shard-owned (invariant 1).
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use super::fetcher::Fetcher;
use super::settings::FetcherSettings;
use crate::cluster::image::BrokerId;
use crate::cluster::shard_partitions::ShardPartitions;
use crate::partition::{Partition, Role};

pub struct FetcherManager {
    settings: FetcherSettings,
    partitions: Rc<ShardPartitions>,
    fetchers: RefCell<HashMap<BrokerId, Rc<Fetcher>>>,
}

impl FetcherManager {
    pub fn new(settings: FetcherSettings, partitions: Rc<ShardPartitions>) -> FetcherManager {
        FetcherManager { settings, partitions, fetchers: RefCell::new(HashMap::new()) }
    }

    /// Assigns every followed partition with a live leader to that leader's fetcher,
    /// starting fetchers for new leaders and stopping those left with nothing.
    pub fn reconcile(&self) {
        let image = self.partitions.image();
        let mut wanted: HashMap<BrokerId, Vec<(Rc<Partition>, [u8; 16])>> = HashMap::new();
        for p in self.partitions.followers() {
            let Role::Follower { leader } = p.role() else { continue };
            if leader < 0 || leader == self.settings.node_id {
                continue;
            }
            let Some(topic_id) = image.topic(&p.topic).map(|t| t.topic_id) else { continue };
            wanted.entry(leader).or_default().push((p, topic_id));
        }
        let mut fetchers = self.fetchers.borrow_mut();
        fetchers.retain(|leader, f| {
            let keep = wanted.contains_key(leader);
            if !keep {
                f.stop();
            }
            keep
        });
        for (leader, ps) in wanted {
            match fetchers.get(&leader) {
                Some(f) => f.set_partitions(ps),
                None => {
                    let f = Fetcher::new(leader, self.settings.clone(), self.partitions.clone());
                    // Partitions first: glommio polls a spawned task at once, and a fetcher
                    // that finds nothing to fetch sleeps replica_fetch_backoff_ms (1 s) —
                    // which every failover paid before the new leader's first fetch.
                    f.set_partitions(ps);
                    tracing::info!(shard = self.partitions.shard(), leader, "starting a replica fetcher");
                    glommio::spawn_local(f.clone().run()).detach();
                    fetchers.insert(leader, f);
                }
            }
        }
    }

    /// (leader, partitions fetched from it) for each running fetcher.
    pub fn assignments(&self) -> Vec<(BrokerId, usize)> {
        self.fetchers.borrow().values().map(|f| (f.leader(), f.partition_count())).collect()
    }
}
