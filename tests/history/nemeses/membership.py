"""Membership and leadership changes under load. Reassign: a partition reassigned with Kafka's own
`kafka-reassign-partitions` tool (ReassignPartitionsCommand, from the Kafka jars) to a new
replica order (its preferred leader changes), to one replica fewer, or (more nodes than
replicas) to other brokers; heal restores a full replica set and runs a preferred leader
election over every partition (confluent-kafka's elect_leaders), so leadership moves.
Decommission: a broker drained, stopped and unregistered, then back (see the class)."""

from __future__ import annotations

import json
import subprocess
import tempfile

from confluent_kafka import ElectionType, TopicPartition
from confluent_kafka.admin import AdminClient

from ..clusters import kafka_classpath
from .base import Nemesis
from .common import Context, partition_state, poll, restart

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


def _names(bootstrap: str, broker: int) -> list[str] | None:
    """Partitions (every topic, the internal ones too) that still list `broker` as a
    replica; None when the cluster could not be asked."""
    try:
        md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    except Exception:
        return None
    return [f"{name}-{p.id}" for name, t in md.topics.items() for p in t.partitions.values() if broker in p.replicas]


class Decommission(Nemesis):
    """A broker decommissioned under load: `shardlog cluster decommission <id> --wait`
    moves its leaderships, then its replicas (the controller's reassignment path), the
    broker is stopped once it holds nothing, and the command unregisters it; the cluster
    runs without it for the hold. Heal starts it again (it registers anew, empty) and
    `shardlog cluster balance --apply` moves replicas back to it. Needs a broker to spare
    (chaos.py builds 4 nodes for it: the topic and the internal topics have 3 replicas).
    shardlog only (the commands are shardlog's)."""
    name = "decommission"
    needs = frozenset({"spare-broker"})
    kafka = False

    def _cli(self, ctx: Context, *args: str, timeout: float) -> subprocess.CompletedProcess:
        return subprocess.run([str(ctx.cluster.binary), "cluster", *args], capture_output=True, text=True, timeout=timeout)

    def inject(self, ctx: Context) -> dict | None:
        live = [nd for nd in ctx.brokers() if nd.alive()]
        if len(live) < 4:
            ctx.record("info", action="decommission", error=f"{len(live)} live brokers: none to spare")
            return None
        victim = ctx.rng.choice(live)
        bootstrap = ctx.live_bootstrap(but=victim.node_id)
        cmd = [str(ctx.cluster.binary), "cluster", "decommission", str(victim.node_id), "--bootstrap", bootstrap,
               "--wait", "--timeout-s", str(int(3 * ctx.bound_s))]
        ctx.record("ok", action="decommission", node=victim.node_id)
        drain = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            # Bounded: until no partition names the broker (the command then asks for a stop).
            empty = poll(lambda: _names(bootstrap, victim.node_id) == [], 2 * ctx.bound_s, step_s=1.0)
            left = _names(bootstrap, victim.node_id)
            ctx.record("ok" if empty else "info", action="decommission-drained", node=victim.node_id,
                       **({} if empty else {"left": (left or [])[:10]}))
            victim.stop()
            out, _ = drain.communicate(timeout=2 * ctx.bound_s)
        except subprocess.TimeoutExpired:
            drain.kill()
            out, _ = drain.communicate()
        finally:
            if drain.poll() is None:
                drain.kill()
        done = drain.returncode == 0 and "unregistered" in out
        ctx.record("ok" if done else "info", action="decommission-unregistered" if done else "decommission-failed",
                   node=victim.node_id, **({} if done else {"exit": drain.returncode, "output": out[-400:]}))
        return {"node": victim.node_id}

    def heal(self, ctx: Context, fault: dict) -> None:
        node = ctx.node(fault["node"])
        restart(ctx, node)
        bootstrap = ctx.live_bootstrap()
        poll(lambda: node.node_id in AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).brokers,
             ctx.bound_s, step_s=0.5)
        r = self._cli(ctx, "balance", "--bootstrap", bootstrap, "--moves", "200", "--apply", "--format", "json",
                      timeout=ctx.bound_s)
        ctx.record("ok" if r.returncode == 0 else "info", action="balance", node=node.node_id,
                   output=(r.stdout or r.stderr)[-400:])
