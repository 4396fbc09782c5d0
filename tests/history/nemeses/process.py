"""Process faults: kill -9 (restarted at heal) and SIGSTOP (SIGCONT at heal) of a node
chosen by role: a partition's leader or follower, the active controller, the group
coordinator."""

from __future__ import annotations

from .base import Nemesis
from .common import Context, pick_node, restart


class Kill(Nemesis):
    """kill -9 of the node in `role`; restarted at heal (its data dir kept)."""

    def __init__(self, role: str):
        self.role = role
        self.name = f"kill-{role}"

    def inject(self, ctx: Context) -> dict | None:
        target = pick_node(ctx, self.role)
        if target is None or not ctx.node(target).alive():
            ctx.record("info", action="kill9", role=self.role, error="no target known")
            return None
        ctx.record("ok", action="kill9", role=self.role, node=target)
        ctx.node(target).kill9()
        return {"node": target}

    def heal(self, ctx: Context, fault: dict) -> None:
        restart(ctx, ctx.node(fault["node"]))


class Pause(Nemesis):
    """SIGSTOP of the node in `role` (it answers nothing, its sessions expire); SIGCONT at
    heal."""

    def __init__(self, role: str):
        self.role = role
        self.name = f"pause-{role}"

    def inject(self, ctx: Context) -> dict | None:
        target = pick_node(ctx, self.role)
        if target is None or not ctx.node(target).alive():
            ctx.record("info", action="pause", role=self.role, error="no target known")
            return None
        ctx.record("ok", action="pause", role=self.role, node=target)
        ctx.node(target).pause()
        return {"node": target}

    def heal(self, ctx: Context, fault: dict) -> None:
        ctx.node(fault["node"]).resume()
        ctx.record("ok", action="resume", node=fault["node"])
