"""Process faults: kill -9 (restarted at heal) and SIGSTOP (SIGCONT at heal) of a node
chosen by role: a partition's leader or follower, the active controller, the group
coordinator."""

from __future__ import annotations

from .base import Nemesis
from .common import Context, pick_node, restart


class _ProcessFault(Nemesis):
    """A signal to the node in `role`; `action` names it in the history."""
    action = ""

    def __init__(self, role: str):
        self.role = role
        self.name = f"{type(self).__name__.lower()}-{role}"

    def signal(self, node) -> None:
        raise NotImplementedError

    def inject(self, ctx: Context) -> dict | None:
        target = pick_node(ctx, self.role)
        if target is None or not ctx.node(target).alive():
            ctx.record("info", action=self.action, role=self.role, error="no target known")
            return None
        ctx.record("ok", action=self.action, role=self.role, node=target)
        self.signal(ctx.node(target))
        return {"node": target}


class Kill(_ProcessFault):
    """kill -9 of the node in `role`; restarted at heal (its data dir kept)."""
    action = "kill9"

    def signal(self, node) -> None:
        node.kill9()

    def heal(self, ctx: Context, fault: dict) -> None:
        restart(ctx, ctx.node(fault["node"]))


class Pause(_ProcessFault):
    """SIGSTOP of the node in `role` (it answers nothing, its sessions expire); SIGCONT at
    heal."""
    action = "pause"

    def signal(self, node) -> None:
        node.pause()

    def heal(self, ctx: Context, fault: dict) -> None:
        ctx.node(fault["node"]).resume()
        ctx.record("ok", action="resume", node=fault["node"])
