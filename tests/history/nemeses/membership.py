"""Membership and leadership changes under load: a partition reassigned with Kafka's own
`kafka-reassign-partitions` tool (ReassignPartitionsCommand, from the Kafka jars) to a new
replica order (its preferred leader changes), to one replica fewer, or (more nodes than
replicas) to other brokers; heal restores a full replica set and runs a preferred leader
election over every partition (confluent-kafka's elect_leaders), so leadership moves."""

from __future__ import annotations

import json
import subprocess
import tempfile

from confluent_kafka import ElectionType, TopicPartition
from confluent_kafka.admin import AdminClient

from ..clusters import kafka_classpath
from .base import Nemesis
from .common import Context, partition_state, poll

TOOL = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
_CLASSPATH: list[str] = []


def reassign_tool(bootstrap: str, topic: str, part: int, replicas: list[int], action: str) -> subprocess.CompletedProcess:
    if not _CLASSPATH:
        _CLASSPATH.append(kafka_classpath())
    plan = {"version": 1, "partitions": [{"topic": topic, "partition": part, "replicas": replicas}]}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(plan, f)
    cmd = ["java", "-Xmx256m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", _CLASSPATH[0], TOOL,
           "--bootstrap-server", bootstrap, "--reassignment-json-file", f.name, action]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180)


class Reassign(Nemesis):
    name = "reassign"

    def _move(self, ctx: Context, part: int, replicas: list[int], action: str) -> bool:
        r = reassign_tool(ctx.live_bootstrap(), ctx.topic, part, replicas, "--execute")
        ok = r.returncode == 0
        ctx.record("ok" if ok else "info", action=action, partition=part, replicas=replicas,
                   **({} if ok else {"error": (r.stderr or r.stdout)[-400:]}))
        if ok:  # bounded: until the tool says it is done
            done = poll(lambda: "complete" in reassign_tool(ctx.live_bootstrap(), ctx.topic, part, replicas,
                                                            "--verify").stdout, ctx.bound_s, step_s=1.0)
            ctx.record("ok" if done else "info", action=f"{action}-done", partition=part)
        return ok

    def inject(self, ctx: Context) -> dict | None:
        rng = ctx.rng
        state = partition_state(ctx.live_bootstrap(), ctx.topic)
        part = rng.randrange(ctx.partitions)
        if not state or part not in state:
            ctx.record("info", action="reassign", partition=part, error="no metadata")
            return None
        replicas = state[part][1]
        brokers = [nd.node_id for nd in ctx.brokers()]
        kind = rng.choice(["reorder", "shrink"] + (["move"] if len(brokers) > len(replicas) else []))
        if kind == "move":
            new = rng.sample(brokers, len(replicas))
        elif kind == "shrink" and len(replicas) > 2:
            new = rng.sample(replicas, len(replicas) - 1)
        else:
            new = replicas[:]
            while new == replicas and len(replicas) > 1:
                rng.shuffle(new)
        self._move(ctx, part, new, f"reassign-{kind}")
        return {"partition": part, "size": len(replicas)}

    def heal(self, ctx: Context, fault: dict) -> None:
        part = fault["partition"]
        state = partition_state(ctx.live_bootstrap(), ctx.topic) or {}
        current = state.get(part, (None, [], []))[1]
        if len(current) < fault["size"]:
            spare = [nd.node_id for nd in ctx.brokers() if nd.node_id not in current]
            new = current + ctx.rng.sample(spare, fault["size"] - len(current))
            ctx.rng.shuffle(new)
            self._move(ctx, part, new, "reassign-grow")
        try:
            admin = AdminClient({"bootstrap.servers": ctx.live_bootstrap()})  # kept alive until the result
            res = admin.elect_leaders(
                # No timeout kwargs: confluent-kafka 2.x fails to parse them (a client bug).
                ElectionType.PREFERRED, [TopicPartition(ctx.topic, p) for p in range(ctx.partitions)]).result(timeout=60)
            errors = {tp.partition: str(e) for tp, e in res.items() if e is not None}
            ctx.record("ok", action="preferred-election", errors=errors)
        except Exception as e:  # ELECTION_NOT_NEEDED for all is an error to the client
            ctx.record("info", action="preferred-election", error=str(e)[:300])
