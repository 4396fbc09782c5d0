"""The nemeses of the chaos runner (tests/history/chaos.py), by name, and the groups a
campaign picks from. Each is a base.Nemesis: inject, hold, heal; its `needs` say how the
cluster must be built (chaos.py builds it so)."""

from __future__ import annotations

from .base import Nemesis
from .disk import DiskFull, PowerLoss, StorageFault
from .membership import Decommission, Reassign
from .network import Partition
from .process import Kill, Pause


def all_nemeses() -> dict[str, Nemesis]:
    out: list[Nemesis] = [
        Kill("leader"), Kill("follower"), Kill("controller"), Kill("coordinator"),
        Pause("leader"), Pause("follower"), Pause("controller"),
        Partition("isolate-one"), Partition("isolate-controller"), Partition("minority"), Partition("bridge"),
        Partition("flap"),
        DiskFull(), StorageFault("fsync-eio"), StorageFault("write-eio"), StorageFault("torn-write"),
        StorageFault("slow-disk"), PowerLoss(),
        Reassign(), Decommission(),
    ]
    return {n.name: n for n in out}


GROUPS = {
    "process": ["kill-leader", "kill-follower", "kill-controller", "kill-coordinator", "pause-leader",
                "pause-follower", "pause-controller"],
    "network": ["partition-isolate-one", "partition-isolate-controller", "partition-minority", "partition-bridge",
                "partition-flap"],
    "disk": ["disk-full", "fsync-eio", "write-eio", "torn-write", "slow-disk", "power-loss"],
    "membership": ["reassign", "decommission"],
}
GROUPS["all"] = [n for g in GROUPS.values() for n in g]


def select(spec: str) -> list[Nemesis]:
    """Nemeses named by `spec`: a comma-separated list of names and group names."""
    known = all_nemeses()
    names: list[str] = []
    for word in (w.strip() for w in spec.split(",") if w.strip()):
        for name in GROUPS.get(word, [word]):
            if name not in known:
                raise ValueError(f"unknown nemesis {name!r}; names: {sorted(known)}; groups: {sorted(GROUPS)}")
            if name not in names:
                names.append(name)
    return [known[n] for n in names]
