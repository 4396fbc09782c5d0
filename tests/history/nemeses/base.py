"""The shape of a nemesis: `inject` a fault (recorded; returns what `heal` needs, or None
when nothing could be done now), `hold` it until a moment (flapping faults act meanwhile),
`heal` it. `needs` names what the cluster must be built with: "netns" (nodes in network
namespaces), "disks" (data dirs on their own small file systems), "storage-faults" (the
storage fault seam: `storage_fault = drop-unsynced` and the control file; shardlog only)."""

from __future__ import annotations

import time

from .common import Context


class Nemesis:
    name = "nemesis"
    needs: frozenset[str] = frozenset()
    kafka = True  # also runs against Apache Kafka

    def inject(self, ctx: Context) -> dict | None:
        raise NotImplementedError

    def hold(self, ctx: Context, fault: dict, until: float) -> None:
        while time.monotonic() < until:
            time.sleep(min(0.2, max(0.0, until - time.monotonic())))

    def heal(self, ctx: Context, fault: dict) -> None:
        raise NotImplementedError
