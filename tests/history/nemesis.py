"""Faults the workload runs under, recorded in the history as "nemesis" ops.

A nemesis works on a cluster object shaped like tests/integration/cluster_harness.Cluster
(shardlog) or kafka_cluster.KafkaCluster (Apache Kafka): `.nodes` with `node_id`,
`bootstrap`, `alive()`, `kill9()`, `start()`, and `wait_ready(timeout_s, nodes)`.
For now: kill -9 of a partition's leader, restarted after a while (issue 28 point 2
adds the others through one seeded chaos runner).
"""

from __future__ import annotations

import random
import time

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient


def partition_leaders(bootstrap: str, topic: str) -> dict[int, tuple[int, list[int], list[int]]] | None:
    """partition → (leader id, replicas, ISR) as the brokers at `bootstrap` say; None if
    unknown."""
    try:
        md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    except KafkaException:
        return None
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        return None
    return {p.id: (p.leader, sorted(p.replicas), sorted(p.isrs)) for p in t.partitions.values()}


def _live_bootstrap(cluster, but: int | None = None) -> str:
    return ",".join(nd.bootstrap for nd in cluster.nodes
                    if nd.alive() and nd.node_id != but and getattr(nd, "is_broker", True))


def _poll(check, bound_s: float, step_s: float = 0.2):
    """`check()` until truthy (its value) or `bound_s` passed (None): a bound, not a test."""
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


class KillLeader:
    """Every `interval_s` (first after `first_s`), kill -9 the leader of a seeded-random
    partition, wait (bounded) until another broker leads it, keep the node down for
    `down_s`, restart it, wait until it is ready and (bounded) back in every ISR."""

    def __init__(self, cluster, topic: str, partitions: int, seed: int = 0, first_s: float = 10.0,
                 interval_s: float = 15.0, down_s: float = 3.0, kills: int | None = None,
                 bound_s: float = 90.0):
        self.cluster = cluster
        self.topic = topic
        self.partitions = partitions
        self.rng = random.Random(seed)
        self.first_s = first_s
        self.interval_s = interval_s
        self.down_s = down_s
        self.kills = kills
        self.bound_s = bound_s
        self.done = 0

    def __call__(self, w, duration_s: float | None = None) -> None:
        """Runs for `duration_s` (default: the workload's), then returns with every node up."""
        h = w.h
        duration_s = w.cfg.duration_s if duration_s is None else duration_s
        end = time.monotonic() + duration_s
        next_kill = time.monotonic() + self.first_s
        while time.monotonic() < end and (self.kills is None or self.done < self.kills):
            if time.monotonic() < next_kill:
                time.sleep(min(0.2, max(0.0, next_kill - time.monotonic())))
                continue
            part = self.rng.randrange(self.partitions)
            state = partition_leaders(_live_bootstrap(self.cluster), self.topic)
            if not state or part not in state or state[part][0] < 0:
                h.add("nemesis", "nemesis", "info", action="kill9", partition=part, error="no leader known")
                next_kill = time.monotonic() + 1.0
                continue
            leader = state[part][0]
            node = next(nd for nd in self.cluster.nodes if nd.node_id == leader)
            h.add("nemesis", "nemesis", "ok", action="kill9", node=leader, partition=part)
            node.kill9()
            self.done += 1
            others = _live_bootstrap(self.cluster, but=leader)

            def moved():
                s = partition_leaders(others, self.topic)
                return s is not None and part in s and s[part][0] not in (-1, leader) and s[part][0]
            new = _poll(moved, self.bound_s)
            h.add("nemesis", "nemesis", "ok" if new else "info", action="new-leader", partition=part,
                  node=new if new else None, was=leader)
            time.sleep(self.down_s)
            node.start()
            self.cluster.wait_ready(timeout_s=self.bound_s, nodes=[node])
            h.add("nemesis", "nemesis", "ok", action="restart", node=leader)

            def in_sync():
                s = partition_leaders(_live_bootstrap(self.cluster), self.topic)
                return s is not None and len(s) == self.partitions and \
                    all(ldr >= 0 and isr == reps for ldr, reps, isr in s.values())
            back = _poll(in_sync, self.bound_s)
            h.add("nemesis", "nemesis", "ok" if back else "info", action="in-sync", node=leader)
            next_kill = time.monotonic() + self.interval_s
        while time.monotonic() < end:
            time.sleep(0.2)
