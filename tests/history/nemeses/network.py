"""Network partitions between nodes in namespaces (tests/history/netns.py): the clients
still reach every node, the nodes do not reach each other across the cut.

  isolate-one         one seeded-random node cut from all others
  isolate-controller  the active controller cut from all others
  minority            a seeded-random minority (< half) cut from the majority
  bridge              one node keeps both sides; the two sides do not see each other
                      (Jepsen's bridge: with 3 nodes, one link cut)
  flap                a seeded-random split, healed and cut again every 1-3 s while held
"""

from __future__ import annotations

import time

from .base import Nemesis
from .common import Context

MODES = ("isolate-one", "isolate-controller", "minority", "bridge", "flap")


class Partition(Nemesis):
    needs = frozenset({"netns"})

    def __init__(self, mode: str):
        if mode not in MODES:
            raise ValueError(f"partition mode: one of {MODES}")
        self.mode = mode
        self.name = f"partition-{mode}"

    def _groups(self, ctx: Context) -> list[list[int]] | None:
        """Node indexes (1-based, namespace numbers) on each side of the cut."""
        n = len(ctx.cluster.nodes)
        everyone = list(range(1, n + 1))
        rng = ctx.rng
        if self.mode == "isolate-controller":
            got = ctx.cluster.active_controller()
            if got is None:
                return None
            one = ctx.index(got[0])
            return [[one], [i for i in everyone if i != one]]
        if self.mode == "isolate-one":
            one = rng.choice(everyone)
            return [[one], [i for i in everyone if i != one]]
        if self.mode in ("minority", "flap"):
            shuffled = everyone[:]
            rng.shuffle(shuffled)
            k = rng.randint(1, max(1, (n - 1) // 2))
            return [sorted(shuffled[:k]), sorted(shuffled[k:])]
        # bridge: a middle node sees both halves, which do not see each other.
        shuffled = everyone[:]
        rng.shuffle(shuffled)
        middle, rest = shuffled[0], shuffled[1:]
        half = max(1, len(rest) // 2)
        return [sorted(rest[:half]), sorted(rest[half:])] if len(rest) >= 2 else None

    def inject(self, ctx: Context) -> dict | None:
        groups = self._groups(ctx)
        if groups is None:
            ctx.record("info", action="partition", mode=self.mode, error="no split known")
            return None
        ctx.net.split(groups)
        ids = [[ctx.cluster.nodes[i - 1].node_id for i in g] for g in groups]
        ctx.record("ok", action="partition", mode=self.mode, groups=ids)
        return {"groups": groups}

    def hold(self, ctx: Context, fault: dict, until: float) -> None:
        if self.mode != "flap":
            return super().hold(ctx, fault, until)
        cut = True
        while time.monotonic() < until:
            time.sleep(min(ctx.rng.uniform(1.0, 3.0), max(0.0, until - time.monotonic())))
            if time.monotonic() >= until:
                break
            if cut:
                ctx.net.heal()
            else:
                ctx.net.split(fault["groups"])
            cut = not cut
            ctx.record("ok", action="flap", cut=cut)

    def heal(self, ctx: Context, fault: dict) -> None:
        ctx.net.heal()
        ctx.record("ok", action="heal-network")
