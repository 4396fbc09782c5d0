//! The metadata channel to a shard that does not take its updates: one waits, the rest
//! merge into it; the deltas stay in order where order matters and stay bounded.
use std::collections::BTreeMap;
use std::sync::Arc;

use futures::executor::block_on;

use super::*;
use crate::controller::apply::diff_images;

/// An image at `index` holding topics `names` (no partitions).
fn image(index: u64, names: &[String]) -> Arc<MetadataImage> {
    let topics = names
        .iter()
        .map(|n| (n.clone(), crate::cluster::image::TopicMeta { name: n.clone(), topic_id: [7; 16], partitions: Vec::new(), configs: BTreeMap::new() }))
        .collect();
    Arc::new(MetadataImage { applied_index: index, topics, ..MetadataImage::default() })
}

fn update(index: u64, deltas: Vec<MetadataDelta>) -> MetadataUpdate {
    MetadataUpdate { image: image(index, &[]), deltas }
}

fn leaders(name: &str) -> MetadataDelta {
    MetadataDelta::LeadersChanged { name: name.into() }
}

/// The first update (the whole image) taken, so later ones have a base.
fn started() -> (ShardUpdatesSender, ShardUpdates) {
    let (tx, rx) = shard_updates();
    tx.post(update(1, Vec::new())).expect("shard there");
    let (first, merged) = block_on(rx.recv()).expect("first image");
    assert_eq!((first.image.applied_index, first.deltas.len(), merged), (1, 0, 0));
    (tx, rx)
}

#[test]
fn a_flood_of_updates_leaves_one_waiting_with_the_newest_image() {
    let (tx, rx) = started();
    const FLOOD: u64 = if cfg!(miri) { 1_000 } else { 100_000 };
    for i in 0..FLOOD {
        let name = ["a", "b"][(i % 2) as usize];
        tx.post(update(2 + i, vec![leaders(name), MetadataDelta::BrokersChanged])).expect("shard there");
    }
    let (got, merged) = block_on(rx.recv()).expect("an update waits");
    assert_eq!(got.image.applied_index, 1 + FLOOD, "the newest image");
    assert_eq!(merged, FLOOD - 1, "every other update merged into the first");
    // Re-reading a topic's leaders twice against one image changes nothing: kept once each.
    assert_eq!(got.deltas, vec![leaders("a"), MetadataDelta::BrokersChanged, leaders("b")]);
    // Nothing else waits.
    drop(tx);
    assert!(block_on(rx.recv()).is_none());
}

#[test]
fn creations_and_deletions_keep_their_order() {
    let (tx, rx) = started();
    let t = || "t".to_string();
    let posted = [
        MetadataDelta::TopicCreated { name: t() },
        leaders("t"),
        MetadataDelta::TopicDeleted { name: t(), topic_id: [1; 16] },
        MetadataDelta::TopicCreated { name: t() },
        leaders("t"),
        leaders("t"),
    ];
    for (i, d) in posted.iter().enumerate() {
        tx.post(update(2 + i as u64, vec![d.clone()])).expect("shard there");
    }
    let (got, merged) = block_on(rx.recv()).expect("an update waits");
    assert_eq!(merged, posted.len() as u64 - 1);
    // The leaders re-read after the re-creation is not the one before the deletion: kept.
    assert_eq!(got.deltas, posted[..5].to_vec());
}

#[test]
fn past_the_bound_the_deltas_are_the_difference_from_the_image_the_shard_took() {
    let (tx, rx) = started();
    let t = vec!["t".to_string()];
    // A topic created and deleted over and over: none of these deltas merges away, so the
    // post that takes the list past the bound recomputes it.
    let posts = MAX_MERGED_DELTAS + 1;
    for i in 0..posts {
        let (img, delta) = if i % 2 == 0 {
            (image(2 + i as u64, &t), MetadataDelta::TopicCreated { name: t[0].clone() })
        } else {
            (image(2 + i as u64, &[]), MetadataDelta::TopicDeleted { name: t[0].clone(), topic_id: [7; 16] })
        };
        tx.post(MetadataUpdate { image: img, deltas: vec![delta] }).expect("shard there");
    }
    let (got, merged) = block_on(rx.recv()).expect("an update waits");
    assert_eq!(merged, posts as u64 - 1);
    // From the image the shard took (no topics) to the newest (topic t): one creation.
    assert_eq!(got.deltas, diff_images(&image(1, &[]), &got.image));
    assert_eq!(got.deltas, vec![MetadataDelta::TopicCreated { name: t[0].clone() }]);
}

#[test]
fn an_update_merged_into_the_first_image_leaves_a_whole_image() {
    let (tx, rx) = shard_updates();
    tx.post(update(1, Vec::new())).expect("shard there");
    tx.post(update(2, vec![leaders("a")])).expect("shard there");
    let (got, merged) = block_on(rx.recv()).expect("an update waits");
    // No deltas: the shard reads the whole (newest) image, as it does the first one.
    assert_eq!((got.image.applied_index, got.deltas.len(), merged), (2, 0, 1));
}

#[test]
fn the_last_update_outlives_its_sender_and_a_gone_shard_is_reported() {
    let (tx, rx) = started();
    tx.post(update(2, vec![leaders("a")])).expect("shard there");
    drop(tx);
    assert_eq!(block_on(rx.recv()).map(|(u, _)| u.image.applied_index), Some(2));
    assert!(block_on(rx.recv()).is_none());

    let (tx, rx) = shard_updates();
    drop(rx);
    assert!(tx.post(update(1, Vec::new())).is_err());
}

/// The controller's thread posts while the shard's thread takes (the channel's one
/// cross-thread use): the shard sees images in order, never one twice, ends with the
/// newest, and every posted update is either taken or counted as merged.
#[test]
fn a_poster_and_a_taker_on_two_threads_agree() {
    // Small under miri (scripts/miri.sh runs this test), larger natively.
    const POSTS: u64 = if cfg!(miri) { 200 } else { 20_000 };
    let (tx, rx) = shard_updates();
    tx.post(update(1, Vec::new())).expect("shard there");
    let poster = std::thread::spawn(move || {
        for i in 0..POSTS {
            tx.post(update(2 + i, vec![leaders(["a", "b", "c"][(i % 3) as usize])])).expect("shard there");
        }
    });
    let mut last = 0;
    let mut taken = 0u64;
    let mut merged = 0u64;
    while let Some((u, m)) = block_on(rx.recv()) {
        assert!(u.image.applied_index > last, "images in order: {} after {last}", u.image.applied_index);
        last = u.image.applied_index;
        taken += 1;
        merged += m;
    }
    poster.join().expect("poster");
    assert_eq!(last, 1 + POSTS, "the newest image arrives");
    assert_eq!(taken + merged, 1 + POSTS, "every update taken or merged into one taken");
}
