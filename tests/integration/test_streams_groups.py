"""Streams groups (KIP-1071) on the wire: StreamsGroupHeartbeat v1 with a word-count
topology (a source topic, a repartition topic, a changelog). shardlog only (it checks
shardlog's own steps; test_streams_wordcount.py runs Kafka Streams against both targets).

- streams.version 1 is finalized in a new cluster, as Kafka 4.4 formats one; downgraded
  to 0, the API answers UNSUPPORTED_VERSION, as Kafka 4.4;
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

from clients import admin_create_topic, commit_sync, kafka_tool
from conftest import is_kafka, skip_unless_shardlog, wait_for

STREAMS_GROUP_HEARTBEAT = 88
UNSUPPORTED_VERSION = 35
MISSING_INTERNAL_TOPICS, ASSIGNMENT_DELAYED, MISSING_CLIENT_TAGS = 3, 5, 6
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
    out["interval"] = r.i32()
    r.i32(), r.i64()  # task offset interval, acceptable recovery lag
    out["status"] = [c for c, _ in (r.array(lambda: (r.i8(), r.compact_string(), r.tags())[:2]) or [])]

    def task_list():
        got = r.array(lambda: (r.compact_string(), r.array(r.i32), r.tags())[:2])
        return None if got is None else {s: sorted(ps) for s, ps in got if ps}
    out["active"], out["standby"], out["warmup"] = task_list(), task_list(), task_list()
    return out


def streams_broker(broker_factory):
    # A new streams group assigns at once (Kafka's default waits 3 s for more members).
    return broker_factory(extra_args=["--group-streams-initial-rebalance-delay-ms", "0"])


def grouped(tasks: set[tuple[str, int]]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for s, p in sorted(tasks):
        out.setdefault(s, []).append(p)
    return out


def held(active: dict[str, list[int]] | None) -> set[tuple[str, int]]:
    return {(s, p) for s, ps in (active or {}).items() for p in ps}


def test_streams_group_heartbeat_assigns_moves_and_survives_kill9(broker_factory):
    skip_unless_shardlog("shardlog's steps on the wire; test_streams_wordcount.py runs a Kafka Streams app on both targets")
    b = streams_broker(broker_factory)
    bs = b.bootstrap
    app, source = "wc-" + uuid.uuid4().hex[:6], "words-" + uuid.uuid4().hex[:6]
    admin_create_topic(bs, source, 2)
    from test_groups import find_group_coordinator
    with w.connect(bs) as s:
        wait_for("the group coordinator", lambda: find_group_coordinator(s, app) == 0)

    # streams.version 0: refused as Kafka refuses it; 1 (a new cluster's level) again.
    r = kafka_tool("org.apache.kafka.tools.FeatureCommand", "--bootstrap-server", bs, "downgrade", "--feature", "streams.version=0")
    assert "streams.version was downgraded to 0." in r.stdout + r.stderr, r.stdout + r.stderr
    assert wait_for("streams groups off", lambda: heartbeat(bs, app, "a", 0, word_count(source, app), "pa")["error"] == UNSUPPORTED_VERSION, BOUND_S)
    r = kafka_tool("org.apache.kafka.tools.FeatureCommand", "--bootstrap-server", bs, "upgrade", "--feature", "streams.version=1")
    assert "streams.version was upgraded to 1." in r.stdout + r.stderr, r.stdout + r.stderr

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


def test_a_groups_streams_configs_apply(broker_factory):
    """A streams group's own configs, set with kafka-configs.sh (Kafka 4.4's
    streams.heartbeat.interval.ms, streams.session.timeout.ms, streams.num.standby.replicas,
    streams.initial.rebalance.delay.ms, streams.rack.aware.assignment.tags,
    streams.assignor.name): described, applied (the heartbeat interval a member is told, the
    MISSING_CLIENT_TAGS warning of a member without the named tag), refused out of Kafka's
    default bounds, with duplicate tags or an unknown assignor. Both targets."""
    b = broker_factory() if is_kafka() else streams_broker(broker_factory)
    bs = b.bootstrap
    app, source = "wcc-" + uuid.uuid4().hex[:6], "words-" + uuid.uuid4().hex[:6]
    admin_create_topic(bs, source, 2)

    def configs(*args: str):
        r = kafka_tool("org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", bs, *args)
        return r.returncode, r.stdout + r.stderr
    rc, out = configs("--alter", "--entity-type", "groups", "--entity-name", app, "--add-config",
                      "streams.heartbeat.interval.ms=7000,streams.session.timeout.ms=50000,streams.num.standby.replicas=1,"
                      "streams.rack.aware.assignment.tags=zone,streams.assignor.name=sticky")
    assert rc == 0, out
    rc, out = configs("--describe", "--entity-type", "groups", "--entity-name", app)
    assert rc == 0 and "streams.heartbeat.interval.ms=7000" in out and "streams.session.timeout.ms=50000" in out, out
    assert "streams.num.standby.replicas=1" in out, out
    assert "streams.rack.aware.assignment.tags=zone" in out and "streams.assignor.name=sticky" in out, out
    for bad in ("streams.session.timeout.ms=1000", "streams.heartbeat.interval.ms=20000", "streams.num.standby.replicas=3",
                "streams.rack.aware.assignment.tags=[zone,zone]", "streams.assignor.name=mine"):
        rc, out = configs("--alter", "--entity-type", "groups", "--entity-name", app, "--add-config", bad)
        assert rc != 0 and bad.split("=")[0] in out, out
    from test_groups import find_group_coordinator
    with w.connect(bs) as s:
        wait_for("the group coordinator", lambda: find_group_coordinator(s, app) == 0)
    first = wait_for("a join answer", lambda: h if (h := heartbeat(bs, app, "a", 0, word_count(source, app), "pa"))["error"] not in (14, 15, 16) else None, BOUND_S)
    assert first["error"] == 0, first
    assert first["interval"] == 7000, first
    # The member sent no client tags while the group names `zone`: warned (v1), not refused.
    assert MISSING_CLIENT_TAGS in first["status"], first


def test_an_empty_classic_group_becomes_a_streams_group(broker_factory):
    """Kafka 4.4 converts an empty classic group (here a simple one: offsets committed
    without membership) to a streams group on its first streams heartbeat; the committed
    offsets stay, before and after a kill -9. A classic group with a member is refused.
    Both targets."""
    from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
    b = broker_factory() if is_kafka() else streams_broker(broker_factory)
    bs = b.bootstrap
    app, source = "wcv-" + uuid.uuid4().hex[:6], "words-" + uuid.uuid4().hex[:6]
    admin_create_topic(bs, source, 2)
    c = Consumer({"bootstrap.servers": bs, "group.id": app, "enable.auto.commit": False})
    try:
        commit_sync(c, [TopicPartition(source, 0, 42)])
    finally:
        c.close()

    def committed() -> int:
        a = AdminClient({"bootstrap.servers": bs})
        got = a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(app, [TopicPartition(source, 0)])])[app].result(timeout=30)
        return got.topic_partitions[0].offset

    assert committed() == 42
    first = wait_for("a join answer", lambda: h if (h := heartbeat(bs, app, "a", 0, word_count(source, app), "pa"))["error"] not in (14, 15, 16) else None, BOUND_S)
    assert first["error"] == 0, first
    assert committed() == 42
    r = kafka_tool("org.apache.kafka.tools.streams.StreamsGroupCommand", "--bootstrap-server", bs, "--list")
    assert app in r.stdout.split(), r.stdout + r.stderr
    if not is_kafka():
        b.kill9()
        b.start()
        again = wait_for("the member back", lambda: h if (h := heartbeat(bs, app, "a", first["epoch"]))["error"] not in (14, 15, 16) else None, BOUND_S)
        assert again["error"] == 0, again
        assert committed() == 42

    # A classic group with a member is not a streams group.
    busy = "wcb-" + uuid.uuid4().hex[:6]
    member = Consumer({"bootstrap.servers": bs, "group.id": busy, "group.protocol": "classic", "session.timeout.ms": 30000})
    try:
        member.subscribe([source])
        wait_for("a classic member", lambda: (member.poll(0.5), bool(member.assignment()))[1], BOUND_S)
        h = heartbeat(bs, busy, "x", 0, word_count(source, busy), "px")
        assert h["error"] == 69, h  # GROUP_ID_NOT_FOUND
    finally:
        member.close()
