"""Group coordinator state that must outlive a broker: members and their assignments
(so members keep heartbeating into the same generation after a restart), static member
replacement, offset expiry (offsets.retention.*), OffsetDelete, and an assignment too
large to store.

Raw requests (kafkawire) where a client library would hide the coordinator's answer.
"""

from __future__ import annotations

import threading
import time
import uuid

from confluent_kafka import Consumer, TopicPartition

import kafkawire as w
from clients import cli_create_topic, commit_sync
from conftest import skip_unless_shardlog, wait_for
from test_groups import JOIN_GROUP, OFFSET_COMMIT, committed, commit_v5, find_group_coordinator, group_broker, sync_v3

HEARTBEAT = 12
LIST_GROUPS = 16
OFFSET_DELETE = 47

NONE, UNKNOWN_SERVER_ERROR, REBALANCE_IN_PROGRESS, MEMBER_ID_REQUIRED, FENCED_INSTANCE_ID = 0, -1, 27, 79, 82
GROUP_ID_NOT_FOUND, GROUP_SUBSCRIBED_TO_TOPIC = 69, 86


def join(sock, group, member_id, instance_id=None, corr=1, session_ms=30000):
    """JoinGroup v5 (has group.instance.id); protocol 'range'."""
    body = (w.string(group) + w.i32(session_ms) + w.i32(session_ms) + w.string(member_id) + w.string(instance_id)
            + w.string("consumer") + w.i32(1) + w.string("range") + w.i32(2) + b"\x00\x01")
    r = w.Reader(w.roundtrip(sock, w.request(JOIN_GROUP, 5, corr, body)))
    assert r.i32() == corr
    r.i32()
    return {"error": r.i16(), "generation": r.i32(), "protocol": r.string(), "leader": r.string(), "member_id": r.string()}


def heartbeat(sock, group, generation, member_id, instance_id=None, corr=3):
    body = w.string(group) + w.i32(generation) + w.string(member_id) + w.string(instance_id)
    r = w.Reader(w.roundtrip(sock, w.request(HEARTBEAT, 3, corr, body)))
    assert r.i32() == corr
    r.i32()
    return r.i16()


def sync(sock, group, generation, member_id, assignments, instance_id=None, corr=2):
    body = (w.string(group) + w.i32(generation) + w.string(member_id) + w.string(instance_id) + w.i32(len(assignments))
            + b"".join(w.string(m) + w.i32(len(a)) + a for m, a in assignments))
    r = w.Reader(w.roundtrip(sock, w.request(14, 3, corr, body)))
    assert r.i32() == corr
    r.i32()
    err = r.i16()
    n = r.i32()
    return err, r.b[r.i:r.i + max(n, 0)]


def list_group_ids(bootstrap) -> set[str]:
    with w.connect(bootstrap) as s:
        r = w.Reader(w.roundtrip(s, w.request(LIST_GROUPS, 2, 7, b"")))
        assert r.i32() == 7
        r.i32()
        assert r.i16() == 0
        return {(r.string(), r.string())[0] for _ in range(r.i32())}


def commit_v2(sock, group, topic, partition, offset, retention_ms, corr=5):
    """OffsetCommit v2 of a standalone consumer (generation -1) with a retention time."""
    body = (w.string(group) + w.i32(-1) + w.string("") + w.i64(retention_ms) + w.i32(1) + w.string(topic)
            + w.i32(1) + w.i32(partition) + w.i64(offset) + w.string(None))
    r = w.Reader(w.roundtrip(sock, w.request(OFFSET_COMMIT, 2, corr, body)))
    assert r.i32() == corr
    assert r.i32() == 1 and r.string() == topic and r.i32() == 1 and r.i32() == partition
    return r.i16()


def fetch_v1(sock, group, topic, partition, corr=6) -> int:
    """OffsetFetch v1 of one partition on an open connection: the committed offset."""
    body = w.string(group) + w.i32(1) + w.string(topic) + w.i32(1) + w.i32(partition)
    r = w.Reader(w.roundtrip(sock, w.request(9, 1, corr, body)))
    assert r.i32() == corr
    assert r.i32() == 1 and r.string() == topic and r.i32() == 1 and r.i32() == partition
    offset = r.i64()
    r.string()
    assert r.i16() == NONE
    return offset


def offset_delete(bootstrap, group, topic, partition) -> tuple[int, int]:
    """OffsetDelete v0: (group error, partition error)."""
    body = w.string(group) + w.i32(1) + w.string(topic) + w.i32(1) + w.i32(partition)
    with w.connect(bootstrap) as s:
        r = w.Reader(w.roundtrip(s, w.request(OFFSET_DELETE, 0, 9, body)))
    assert r.i32() == 9
    err = r.i16()
    r.i32()
    if err != NONE:
        return err, NONE
    assert r.i32() == 1 and r.string() == topic and r.i32() == 1 and r.i32() == partition
    return err, r.i16()


def first_member(sock, group, instance_id=None):
    # Kafka creates __consumer_offsets on the first FindCoordinator (shardlog at start-up):
    # a raw JoinGroup before it, or before the coordinator loaded, gets NOT_COORDINATOR.
    wait_for("the group coordinator", lambda: find_group_coordinator(sock, group) == NONE)
    j = wait_for("a coordinator that takes the join", lambda: j if (j := join(sock, group, "", instance_id))["error"] not in (14, 15, 16) else None)
    if j["error"] == MEMBER_ID_REQUIRED:
        j = join(sock, group, j["member_id"], instance_id)
    assert j["error"] == NONE, j
    return j


def heartbeat_after_restart(sock, group, generation, member, instance_id=None) -> int:
    """The first heartbeat after a restart, once a coordinator has the group loaded (Kafka
    answers NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS while it loads
    __consumer_offsets; shardlog answered at once in every run here)."""
    def answered():
        err = heartbeat(sock, group, generation, member, instance_id)
        return None if err in (14, 15, 16) else (err,)
    return wait_for("the group's coordinator after the restart", answered)[0]


def test_members_and_static_replacement_survive_restart(broker_factory):
    """A Stable group is stored with its members and assignments: after kill -9 and a
    restart both members heartbeat into the same generation (no rebalance); a static
    member replaced while Stable keeps its assignment, fences its old member id, and the
    replacement survives a second restart."""
    b = group_broker(broker_factory)
    group = f"durable-{uuid.uuid4().hex[:8]}"
    with w.connect(b.bootstrap, 40) as s1, w.connect(b.bootstrap, 40) as s2:
        j1 = first_member(s1, group)
        m1 = j1["member_id"]
        assert sync(s1, group, j1["generation"], m1, [(m1, b"solo")]) == (NONE, b"solo")
        # A static member joins: m1 must rejoin for the new generation.
        result = {}
        t = threading.Thread(target=lambda: result.update(
            join=join(s2, group, "", "inst-2", corr=11)))
        t.start()
        deadline = time.monotonic() + 20
        while heartbeat(s1, group, j1["generation"], m1) != REBALANCE_IN_PROGRESS:
            assert time.monotonic() < deadline, "static member's join never started a rebalance"
            time.sleep(0.05)
        j1 = join(s1, group, m1)
        t.join(30)
        j2 = result["join"]
        assert j1["error"] == NONE and j2["error"] == NONE, (j1, j2)
        gen, m2 = j1["generation"], j2["member_id"]
        assert j2["generation"] == gen and j1["leader"] == m1
        t = threading.Thread(target=lambda: result.update(sync2=sync(s2, group, gen, m2, [], "inst-2", corr=12)))
        t.start()
        assert sync(s1, group, gen, m1, [(m1, b"A1"), (m2, b"A2")]) == (NONE, b"A1")
        t.join(30)
        assert result["sync2"] == (NONE, b"A2")

    b.restart(kill=True)
    with w.connect(b.bootstrap, 40) as s:
        assert heartbeat_after_restart(s, group, gen, m1) == NONE
        assert heartbeat(s, group, gen, m2, "inst-2") == NONE
        # The static member restarts (empty member id): same generation, same assignment,
        # no rebalance; its previous member id is fenced.
        j3 = join(s, group, "", "inst-2")
        assert j3["error"] == NONE and j3["generation"] == gen, j3
        m3 = j3["member_id"]
        assert m3 != m2
        assert sync(s, group, gen, m3, [], "inst-2") == (NONE, b"A2")
        assert heartbeat(s, group, gen, m2, "inst-2") == FENCED_INSTANCE_ID
        assert heartbeat(s, group, gen, m1) == NONE

    b.restart(kill=True)
    with w.connect(b.bootstrap, 40) as s:
        assert heartbeat_after_restart(s, group, gen, m3, "inst-2") == NONE
        assert heartbeat(s, group, gen, m1) == NONE
        assert heartbeat(s, group, gen, m2, "inst-2") == FENCED_INSTANCE_ID
    b.assert_alive()


def test_oversized_assignment_is_refused_and_group_recovers(broker_factory):
    """An assignment larger than __consumer_offsets' max.message.bytes (1 MiB) cannot be
    stored: SyncGroup answers UNKNOWN_SERVER_ERROR (Kafka's mapping) and the group
    rebalances; a normal assignment then works."""
    b = group_broker(broker_factory)
    group = f"oversized-{uuid.uuid4().hex[:8]}"
    with w.connect(b.bootstrap, 40) as s:
        j = first_member(s, group)
        m = j["member_id"]
        err, _ = sync(s, group, j["generation"], m, [(m, b"x" * (2 << 20))])
        assert err == UNKNOWN_SERVER_ERROR
        assert heartbeat(s, group, j["generation"], m) == REBALANCE_IN_PROGRESS
        j = join(s, group, m)
        assert j["error"] == NONE
        assert sync(s, group, j["generation"], m, [(m, b"ok")]) == (NONE, b"ok")
    b.assert_alive()


def test_offsets_expire_and_empty_group_is_deleted(broker_factory):
    """offsets.retention: a standalone commit with a 5 s retention time (OffsetCommit v2)
    expires, the group left without offsets disappears, and stays gone after a restart;
    a commit without retention time (7 days by default) stays."""
    skip_unless_shardlog("sets shardlog's offsets_retention_check_interval_ms flag")
    b = broker_factory(extra_args=["--group-initial-rebalance-delay-ms", "0",
                                   "--offsets-retention-check-interval-ms", "200"])
    topic = "expiry"
    cli_create_topic(b.bootstrap, topic, 2)
    short, kept = f"short-{uuid.uuid4().hex[:8]}", f"kept-{uuid.uuid4().hex[:8]}"
    with w.connect(b.bootstrap) as s:
        # Read back on the same connection, right after the commit: the read must come
        # before expiry, and a new client (connect, metadata, coordinator lookup) took
        # more than 5 s once on a loaded machine.
        assert commit_v2(s, short, topic, 0, 42, retention_ms=5000) == NONE
        assert fetch_v1(s, short, topic, 0) == 42
        assert commit_v5(s, kept, -1, "", topic, 1, 7) == NONE
    deadline = time.monotonic() + 30
    while committed(b.bootstrap, short, topic, 1) != {0: -1001}:
        assert time.monotonic() < deadline, "offset with 5 s retention never expired"
        time.sleep(0.2)
    deadline = time.monotonic() + 10
    while short in list_group_ids(b.bootstrap):
        assert time.monotonic() < deadline, "empty group without offsets was not deleted"
        time.sleep(0.2)
    assert kept in list_group_ids(b.bootstrap)
    b.restart(kill=True)
    assert committed(b.bootstrap, short, topic, 1) == {0: -1001}
    assert committed(b.bootstrap, kept, topic, 2) == {0: -1001, 1: 7}
    assert short not in list_group_ids(b.bootstrap)


def test_offset_delete(broker_factory):
    """OffsetDelete: removes offsets of an Empty group; refused per partition with
    GROUP_SUBSCRIBED_TO_TOPIC for a topic a Stable group consumes; GROUP_ID_NOT_FOUND for
    an unknown group."""
    b = group_broker(broker_factory)
    topic = f"offdel-{uuid.uuid4().hex[:6]}"
    cli_create_topic(b.bootstrap, topic, 2)
    idle, active = f"idle-{uuid.uuid4().hex[:8]}", f"active-{uuid.uuid4().hex[:8]}"
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": idle, "enable.auto.commit": False})
    commit_sync(c, [TopicPartition(topic, 0, 5), TopicPartition(topic, 1, 6)])
    c.close()
    assert offset_delete(b.bootstrap, idle, topic, 0) == (NONE, NONE)
    assert committed(b.bootstrap, idle, topic, 2) == {0: -1001, 1: 6}
    assert offset_delete(b.bootstrap, f"nobody-{uuid.uuid4().hex[:6]}", topic, 0)[0] == GROUP_ID_NOT_FOUND

    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": active, "enable.auto.commit": False,
                  "session.timeout.ms": 10000})
    c.subscribe([topic])
    deadline = time.monotonic() + 30
    while not c.assignment():
        assert time.monotonic() < deadline, "consumer never got an assignment"
        c.poll(0.2)
    c.commit(offsets=[TopicPartition(topic, 0, 3)], asynchronous=False)
    assert offset_delete(b.bootstrap, active, topic, 0) == (NONE, GROUP_SUBSCRIBED_TO_TOPIC)
    assert committed(b.bootstrap, active, topic, 1) == {0: 3}
    c.close()


def count_records(bootstrap, topic, partition) -> int:
    """Records in topic/partition from its start to the high watermark."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        c.assign([TopicPartition(topic, partition, low)])
        n, last = 0, low - 1
        deadline = time.monotonic() + 30
        while last < high - 1 and time.monotonic() < deadline:
            for m in c.consume(500, 0.5):
                if not m.error():
                    n += 1
                    last = m.offset()
        assert last >= high - 1, f"could not read {topic}/{partition} to its end {high}"
        return n
    finally:
        c.close()


def test_offsets_topic_is_compacted(broker_factory):
    """__consumer_offsets is compacted: 2000 commits of one partition in small segments
    shrink to a handful of records, and the latest commit is what a restart loads."""
    skip_unless_shardlog("sets shardlog's offsets topic and cleaner flags")
    b = broker_factory(extra_args=["--offsets-topic-num-partitions", "1", "--offsets-topic-segment-bytes", "4096",
                                   "--log-cleaner-backoff-ms", "200"])
    topic, group = "compacted-commits", f"cc-{uuid.uuid4().hex[:8]}"
    cli_create_topic(b.bootstrap, topic, 1)
    with w.connect(b.bootstrap) as s:
        for off in range(2000):
            assert commit_v5(s, group, -1, "", topic, 0, off, corr=off) == NONE
    deadline = time.monotonic() + 60
    while (n := count_records(b.bootstrap, "__consumer_offsets", 0)) > 200:
        assert time.monotonic() < deadline, f"__consumer_offsets still holds {n} records"
        time.sleep(0.5)
    assert committed(b.bootstrap, group, topic, 1) == {0: 1999}
    b.restart(kill=True)
    assert committed(b.bootstrap, group, topic, 1) == {0: 1999}
