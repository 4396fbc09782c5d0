//! Where executors run: one shard per usable core (intersecting with this process's
//! affinity mask, which glommio's CpuSet::online ignores), and a core for the
//! controller thread when one is spare.

/// Cores this process may run on, ascending.
pub fn usable_cores() -> Vec<usize> {
    let mut ids: Vec<usize> = core_affinity::get_core_ids().unwrap_or_default().into_iter().map(|c| c.id).collect();
    ids.sort_unstable();
    if ids.is_empty() {
        ids.push(0);
    }
    ids
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// Core of each shard, indexed by shard id.
    pub shard_cores: Vec<usize>,
    /// Core of the controller thread; None = unpinned (shares the shards' cores).
    pub controller_core: Option<usize>,
}

/// `shards` 0 = one per usable core. `controller_core` -1 = a spare core if any.
pub fn plan(usable: &[usize], shards: usize, controller_core: i64) -> Placement {
    let n = if shards == 0 { usable.len() } else { shards };
    let shard_cores: Vec<usize> = (0..n).map(|i| usable[i % usable.len()]).collect();
    let controller_core = if controller_core >= 0 { Some(controller_core as usize) } else { usable.iter().copied().find(|c| !shard_cores.contains(c)) };
    Placement { shard_cores, controller_core }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_shard_per_core_and_spare_core_for_controller() {
        assert_eq!(plan(&[0, 1], 0, -1), Placement { shard_cores: vec![0, 1], controller_core: None });
        assert_eq!(plan(&[0, 1, 2], 2, -1), Placement { shard_cores: vec![0, 1], controller_core: Some(2) });
        assert_eq!(plan(&[4, 5], 3, 5), Placement { shard_cores: vec![4, 5, 4], controller_core: Some(5) });
    }
}
