"""What every nemesis needs: the chaos context (the cluster, its network, the workload's
topic and group, the history) and how to find a partition's leader, the active
controller, or the group coordinator. Every wait here is a bound, not a test."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient


@dataclass
class Context:
    """What a nemesis acts on. `cluster` is shaped like cluster_harness.Cluster (shardlog)
    or kafka_cluster.KafkaCluster (Apache Kafka): `.nodes` with `node_id`, `bootstrap`,
    `alive()`, `kill9()`, `pause()`, `resume()`, `stop()`, `start()`; `wait_ready(timeout_s,
    nodes)`; `active_controller()`."""
    cluster: object
    topic: str
    partitions: int
    group: str
    history: object  # HistoryWriter: .add(proc, f, type, **fields)
    rng: random.Random
    net: object | None = None  # netns.Net when the nodes run in namespaces
    disks: dict = field(default_factory=dict)  # node id → disk.NodeDisk
    bound_s: float = 90.0

    def record(self, type_: str, **fields) -> None:
        self.history.add("nemesis", "nemesis", type_, **fields)

    def node(self, node_id: int):
        return next(nd for nd in self.cluster.nodes if nd.node_id == node_id)

    def brokers(self) -> list:
        return [nd for nd in self.cluster.nodes if getattr(nd, "is_broker", True)]

    def live_bootstrap(self, but: int | None = None) -> str:
        return ",".join(nd.bootstrap for nd in self.brokers() if nd.alive() and nd.node_id != but)

    def index(self, node_id: int) -> int:
        """The node's 1-based position (its namespace number)."""
        return [nd.node_id for nd in self.cluster.nodes].index(node_id) + 1


def poll(check, bound_s: float, step_s: float = 0.2):
    """`check()` until truthy (its value) or `bound_s` passed (None)."""
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        try:
            got = check()
        except Exception:
            got = None
        if got:
            return got
        time.sleep(step_s)
    return None


def partition_state(bootstrap: str, topic: str) -> dict[int, tuple[int, list[int], list[int]]] | None:
    """partition → (leader id, replicas, ISR) as the brokers at `bootstrap` say; None if
    unknown."""
    if not bootstrap:
        return None
    try:
        md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    except KafkaException:
        return None
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        return None
    return {p.id: (p.leader, sorted(p.replicas), sorted(p.isrs)) for p in t.partitions.values()}


def group_coordinator(bootstrap: str, group: str) -> int | None:
    try:
        # Kept until the result: a dropped client cancels its requests (the kill-coordinator
        # nemesis found no target, ever, while the client was a temporary).
        admin = AdminClient({"bootstrap.servers": bootstrap})
        fut = admin.describe_consumer_groups([group], request_timeout=10)[group]
        return fut.result(timeout=15).coordinator.id
    except Exception:
        return None


def pick_node(ctx: Context, role: str) -> int | None:
    """A node id for `role`: leader (of a seeded-random partition of the topic), follower
    (a replica of one that does not lead it), controller (the active one), coordinator (the
    workload group's), or any (a seeded-random live node). None if none is known now."""
    rng = ctx.rng
    if role == "any":
        live = [nd.node_id for nd in ctx.cluster.nodes if nd.alive()]
        return rng.choice(live) if live else None
    if role == "controller":
        got = ctx.cluster.active_controller()
        return got[0] if got else None
    if role == "coordinator":
        return group_coordinator(ctx.live_bootstrap(), ctx.group)
    state = partition_state(ctx.live_bootstrap(), ctx.topic)
    if not state:
        return None
    part = rng.randrange(ctx.partitions)
    if part not in state or state[part][0] < 0:
        return None
    leader, replicas, _ = state[part]
    if role == "leader":
        return leader
    if role == "follower":
        others = [r for r in replicas if r != leader]
        return rng.choice(others) if others else None
    raise ValueError(f"unknown role {role}")


def healthy(ctx: Context) -> bool:
    """Every node up, every partition led with its whole replica set in sync."""
    if not all(nd.alive() for nd in ctx.cluster.nodes):
        return False
    s = partition_state(ctx.live_bootstrap(), ctx.topic)
    return s is not None and len(s) == ctx.partitions and all(
        ldr >= 0 and isr == reps for ldr, reps, isr in s.values())


def restart(ctx: Context, node) -> None:
    """Starts a stopped node and waits (bounded) until it is ready."""
    if not node.alive():
        node.start()
    try:
        ctx.cluster.wait_ready(timeout_s=ctx.bound_s, nodes=[node])
        ctx.record("ok", action="restart", node=node.node_id)
    except Exception as e:
        ctx.record("info", action="restart", node=node.node_id, error=str(e)[:300])


def restart_halted(ctx: Context) -> list[int]:
    """Restarts every node whose process ended on its own (a broker halts when a log goes
    offline: src/storage/log_dir_failure.rs); returns their ids."""
    halted = [nd for nd in ctx.cluster.nodes if not nd.alive()]
    for nd in halted:
        ctx.record("ok", action="halted", node=nd.node_id)
        restart(ctx, nd)
    return [nd.node_id for nd in halted]
