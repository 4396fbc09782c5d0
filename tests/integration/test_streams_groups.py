"""Streams groups (KIP-1071) as built so far, on the wire: StreamsGroupHeartbeat v1 with a
word-count topology (a source topic, a repartition topic, a changelog). shardlog only:
streams.version 1 is still an unstable level here (`--unstable-feature-versions-enable`,
then `kafka-features.sh upgrade`), until a Kafka Streams application runs end to end.

- below streams.version 1 the API answers UNSUPPORTED_VERSION, as Kafka 4.4;
- the first member's join stores the topology; the broker creates the missing internal
  topics (their partition counts derived from the source topic, their configs as given)
  and, once they exist, the member is given every task;
- a second member joins: the first is told to give up half and keeps its epoch until it
  acknowledges; only then does the second get them; no task is ever held by both;
- kill -9 and restart: the group comes back from its records, and the members heartbeat
  into it at their epochs with their tasks.
"""

from __future__ import annotations

import uuid

import kafkawire as w
from confluent_kafka.admin import AdminClient, ConfigResource

from clients import admin_create_topic, kafka_tool
from conftest import skip_unless_shardlog, wait_for

STREAMS_GROUP_HEARTBEAT = 88
UNSUPPORTED_VERSION = 35
MISSING_INTERNAL_TOPICS, ASSIGNMENT_DELAYED = 3, 5
BOUND_S = 60


def topic_info(name: str, configs: dict[str, str]) -> bytes:
    kvs = [w.compact_string(k) + w.compact_string(v) + w.uvarint(0) for k, v in configs.items()]
    return w.compact_string(name) + w.i32(0) + w.i16(-1) + w.compact_array(kvs) + w.uvarint(0)


def word_count(source: str, app: str) -> bytes:
    """The topology Kafka Streams' WordCountDemo declares (epoch 0)."""
    repartition, changelog = f"{app}-counts-repartition", f"{app}-counts-changelog"
    s0 = (w.compact_string("0") + w.compact_array([w.compact_string(source)]) + w.compact_array([]) + w.compact_array([])
          + w.compact_array([w.compact_string(repartition)]) + w.compact_array([]) + w.compact_array([]) + w.uvarint(0))
    s1 = (w.compact_string("1") + w.compact_array([]) + w.compact_array([])
          + w.compact_array([topic_info(changelog, {"cleanup.policy": "compact"})]) + w.compact_array([])
          + w.compact_array([topic_info(repartition, {"cleanup.policy": "delete", "retention.ms": "-1"})])
          + w.compact_array([]) + w.uvarint(0))
    return w.i8(1) + w.i32(0) + w.compact_array([s0, s1]) + w.uvarint(0)


def tasks(t: dict[str, list[int]] | None) -> bytes:
    if t is None:
        return w.uvarint(0)
    return w.compact_array([w.compact_string(s) + w.compact_array([w.i32(p) for p in ps]) + w.uvarint(0) for s, ps in sorted(t.items())])


def heartbeat(bs: str, group: str, member: str, epoch: int, topology: bytes | None = None, process: str | None = None,
              owned: dict[str, list[int]] | None = None) -> dict:
    """One StreamsGroupHeartbeat v1; `owned` None sends null task lists (unchanged)."""
    joining = epoch == 0
    owned = {} if joining else owned
    body = (w.compact_string(group) + w.compact_string(member) + w.i32(epoch) + w.i32(-1)
            + w.compact_nullable_string(None) + w.compact_nullable_string(None) + w.i32(300_000 if joining else -1)
            + (topology if topology is not None else w.i8(-1))
            + tasks(owned) + tasks({} if owned is not None else None) + tasks({} if owned is not None else None)
            + w.compact_nullable_string(process) + w.i8(-1) + w.uvarint(0) + w.uvarint(0) + w.uvarint(0) + w.i8(0))
    r = w.flexible_roundtrip(bs, STREAMS_GROUP_HEARTBEAT, 1, body)
    r.i32()
    out = {"error": r.i16(), "message": r.compact_string(), "member": r.compact_string(), "epoch": r.i32()}
    r.i32(), r.i32(), r.i64()  # heartbeat interval, task offset interval, acceptable recovery lag
    out["status"] = [c for c, _ in (r.array(lambda: (r.i8(), r.compact_string(), r.tags())[:2]) or [])]

    def task_list():
        got = r.array(lambda: (r.compact_string(), r.array(r.i32), r.tags())[:2])
        return None if got is None else {s: sorted(ps) for s, ps in got if ps}
    out["active"], out["standby"], out["warmup"] = task_list(), task_list(), task_list()
    return out


def streams_broker(broker_factory):
    return broker_factory(extra_args=["--unstable-feature-versions-enable", "true"])


def grouped(tasks: set[tuple[str, int]]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for s, p in sorted(tasks):
        out.setdefault(s, []).append(p)
    return out


def held(active: dict[str, list[int]] | None) -> set[tuple[str, int]]:
    return {(s, p) for s, ps in (active or {}).items() for p in ps}


def test_streams_group_heartbeat_assigns_moves_and_survives_kill9(broker_factory):
    skip_unless_shardlog("streams.version 1 is an unstable level of shardlog's; Kafka 4.4 runs the same with a Kafka Streams app")
    b = streams_broker(broker_factory)
    bs = b.bootstrap
    app, source = "wc-" + uuid.uuid4().hex[:6], "words-" + uuid.uuid4().hex[:6]
    admin_create_topic(bs, source, 2)
    from test_groups import find_group_coordinator
    with w.connect(bs) as s:
        wait_for("the group coordinator", lambda: find_group_coordinator(s, app) == 0)

    # streams.version 0 (a new cluster's level here): refused as Kafka refuses it.
    assert heartbeat(bs, app, "a", 0, word_count(source, app), "pa")["error"] == UNSUPPORTED_VERSION
    r = kafka_tool("org.apache.kafka.tools.FeatureCommand", "--bootstrap-server", bs, "upgrade", "--feature", "streams.version=1")
    assert r.returncode == 0, r.stdout + r.stderr

    first = wait_for("a join answer", lambda: h if (h := heartbeat(bs, app, "a", 0, word_count(source, app), "pa"))["error"] not in (14, 15, 16, 35) else None, BOUND_S)
    assert first["error"] == 0, first
    assert MISSING_INTERNAL_TOPICS in first["status"], first
    # The broker creates the internal topics, two partitions each (the source's), with the configs given.
    internal = [f"{app}-counts-repartition", f"{app}-counts-changelog"]
    a = AdminClient({"bootstrap.servers": bs})

    def created():
        ts = a.list_topics(timeout=10).topics
        return all(t in ts and len(ts[t].partitions) == 2 for t in internal)
    wait_for("the internal topics", created, BOUND_S)
    (cfg,) = a.describe_configs([ConfigResource("topic", internal[1])]).values()
    assert cfg.result(30)["cleanup.policy"].value == "compact"

    state = {"a": first}

    def beat(member: str, owned=None):
        h = heartbeat(bs, app, member, state[member]["epoch"], owned=owned)
        assert h["error"] == 0, h
        if h["active"] is not None:
            state[member]["active"] = h["active"]
        state[member]["epoch"] = h["epoch"]
        return h
    wait_for("member a given every task", lambda: (beat("a", state["a"].get("active") or {}), len(held(state["a"]["active"])) == 4)[1], BOUND_S)
    a_all = held(state["a"]["active"])
    assert a_all == {("0", 0), ("0", 1), ("1", 0), ("1", 1)}

    # A second member: a gives up half first.
    second = heartbeat(bs, app, "b", 0, word_count(source, app), "pb")
    assert second["error"] == 0, second
    state["b"] = second
    assert not held(second["active"]), "b gets nothing a still holds"
    # (The new target may wait for group.streams.assignment.interval.ms: ASSIGNMENT_DELAYED.)
    wait_for("a told to give up half", lambda: (beat("a", grouped(a_all)), len(held(state["a"]["active"])) == 2)[1], BOUND_S)
    kept = held(state["a"]["active"])
    assert kept < a_all
    epoch_before_ack = state["a"]["epoch"]
    h = beat("b", {})
    assert not held(state["b"].get("active")), "b waits until a acknowledges"
    # a acknowledges (reports only what it kept); then b gets the rest.
    beat("a", grouped(kept))
    assert state["a"]["epoch"] > epoch_before_ack
    wait_for("b given the released tasks", lambda: (beat("b", {}), held(state["b"].get("active")) == a_all - kept)[1], BOUND_S)

    # kill -9: the group comes back from its records.
    b.kill9()
    b.start()

    def back(member: str, mine: set):
        h = heartbeat(bs, app, member, state[member]["epoch"], owned=grouped(mine))
        return h if h["error"] not in (14, 15, 16) else None
    for member, mine in (("a", kept), ("b", a_all - kept)):
        h = wait_for(f"{member} heartbeating after the restart", lambda: back(member, mine), BOUND_S)
        assert h["error"] == 0 and h["epoch"] == state[member]["epoch"], h
