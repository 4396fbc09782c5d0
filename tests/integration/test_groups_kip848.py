"""KIP-848 consumer groups (group.protocol=consumer) with the real Java 4.1 consumer:
ConsumerGroupHeartbeat membership and server-side assignment, fencing on kill -9 after the
session timeout, committed offsets that never move backwards, a broker kill -9 + restart
the members ride through (same member ids, epochs and partitions: no rebalance),
AdminClient describeConsumerGroups (ConsumerGroupDescribe), partitions added to a
subscribed topic, and the coordinator's answers to bad heartbeats (raw protocol).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewPartitions

import kafkawire as w
import test_groups as tg  # helpers only (a module attribute is not collected again)
from clients import JAVA_JAR, admin, cli_create_topic, java_tool, json_lines, wait_topic, watermarks
from conftest import is_kafka, wait_for

SESSION_TIMEOUT_S = 6
HEARTBEAT_INTERVAL_MS = 500


def kip848_broker(broker_factory, extra: list[str] | None = None):
    args = [] if is_kafka() else [
        "--group-initial-rebalance-delay-ms", "0",
        "--group-consumer-session-timeout-ms", str(SESSION_TIMEOUT_S * 1000),
        "--group-consumer-heartbeat-interval-ms", str(HEARTBEAT_INTERVAL_MS),
    ] + (extra or [])
    return broker_factory(extra_args=args)


def start_java_worker(bootstrap, topic, group, out: Path, log: Path, props: str = "",
                      protocol: str = "consumer") -> subprocess.Popen:
    assert JAVA_JAR.exists(), f"{JAVA_JAR} missing: mvn -f tests/java/pom.xml package"
    cmd = ["java", "-Xmx256m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-jar", str(JAVA_JAR),
           "group-worker", "--bootstrap", bootstrap, "--topic", topic, "--group", group, "--out", str(out),
           "--protocol", protocol]
    if props:
        cmd += ["--prop", props]
    with open(log, "ab") as f:
        return subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)


def describe(bootstrap, group, wait_members: int | None = None, timeout_s: float = 60) -> dict:
    args = ["describe-group", "--bootstrap", bootstrap, "--group", group]
    if wait_members is not None:
        args += ["--wait-members", str(wait_members), "--timeout-ms", str(int(timeout_s * 1000))]
    r = java_tool(*args, timeout=timeout_s + 60)
    return json_lines(r.stdout)[-1]


def owned_partitions(d: dict) -> list[int]:
    return sorted(p for m in d["members"] for p in m["assignment"])


def members_view(d: dict) -> list[tuple[str, int, tuple[int, ...]]]:
    """(member id, member epoch, assigned partitions) per member, sorted."""
    return sorted((m["member_id"], m["epoch"], tuple(m["assignment"])) for m in d["members"])


def revocations(log: Path) -> int:
    """{"revoked":..} lines a group-worker printed (onPartitionsLost prints them too)."""
    return sum(1 for line in log.read_text(errors="replace").splitlines() if line.startswith('{"revoked"'))


read_processed = tg.read_processed


def stop_workers(workers) -> None:
    """SIGTERM (a clean leave), then SIGKILL after 20 s."""
    for wk in workers:
        if wk.poll() is None:
            os.killpg(wk.pid, signal.SIGTERM)
            try:
                wk.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(wk.pid, signal.SIGKILL)


def test_java_kip848_join_kill_restart(broker_factory, tmp_path):
    b = kip848_broker(broker_factory)
    topic, group, partitions = "kip848-12", f"k848-{uuid.uuid4().hex[:8]}", 12
    cli_create_topic(b.bootstrap, topic, partitions)
    producer = tg.BackgroundProducer(b.bootstrap, topic)
    producer.start()
    watcher = tg.OffsetWatcher(b.bootstrap, group, topic, partitions)
    watcher.start()
    outs = [tmp_path / f"worker{i}.txt" for i in range(4)]
    logs = [tmp_path / f"worker{i}.log" for i in range(4)]
    workers = [start_java_worker(b.bootstrap, topic, group, outs[i], logs[i]) for i in range(3)]
    try:
        d = describe(b.bootstrap, group, wait_members=3)
        assert d["type"] == "Consumer" and d["assignor"] == "uniform", d
        assert owned_partitions(d) == list(range(partitions)), d
        assert sorted(len(m["assignment"]) for m in d["members"]) == [4, 4, 4], d
        epoch_3 = d["group_epoch"]
        time.sleep(2)

        workers.append(start_java_worker(b.bootstrap, topic, group, outs[3], logs[3]))
        t0 = time.monotonic()
        d = describe(b.bootstrap, group, wait_members=4)
        join_s = time.monotonic() - t0
        assert owned_partitions(d) == list(range(partitions)), d
        assert sorted(len(m["assignment"]) for m in d["members"]) == [3, 3, 3, 3], d
        assert d["group_epoch"] > epoch_3
        time.sleep(2)

        os.killpg(workers[0].pid, signal.SIGKILL)
        workers[0].wait()
        t0 = time.monotonic()
        d = describe(b.bootstrap, group, wait_members=3)
        kill_s = time.monotonic() - t0
        print(f"KIP-848 reconciliation after a join: {join_s:.2f} s; after kill -9: {kill_s:.2f} s")
        assert owned_partitions(d) == list(range(partitions)), d
        assert sorted(len(m["assignment"]) for m in d["members"]) == [4, 4, 4], d
        if not is_kafka():
            # Detection takes the session timeout; survivors get the partitions on their
            # next heartbeats.
            assert kill_s < SESSION_TIMEOUT_S + 8, f"reassignment after kill took {kill_s:.1f} s"
        time.sleep(2)
        producer.stop()
        hw = {p: high for p, (low, high) in watermarks(b.bootstrap, topic, partitions).items()}
        assert sum(hw.values()) == producer.count > 0
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and watcher.last != hw:
            time.sleep(0.5)
        assert watcher.last == hw, f"committed {watcher.last} never reached the high watermarks {hw}"
        before = describe(b.bootstrap, group, wait_members=3)
        revoked_before = [revocations(logs[i]) for i in (1, 2, 3)]

        # kill -9 the broker with the three members running. The coordinator reloads the
        # members from __consumer_offsets (metadata, target and current assignments), so
        # the same members keep heartbeating with their member ids and epochs and keep
        # their partitions: no rejoin, no rebalance, no revocation.
        b.restart(kill=True)
        assert tg.committed(b.bootstrap, group, topic, partitions) == hw
        d = describe(b.bootstrap, group, wait_members=3, timeout_s=90)
        assert members_view(d) == members_view(before), (before, d)
        assert (d["group_epoch"], d["assignment_epoch"]) == (before["group_epoch"], before["assignment_epoch"]), (before, d)
        # Past a session timeout (the timers restart at load): still the same members.
        time.sleep(SESSION_TIMEOUT_S + 2)
        d = describe(b.bootstrap, group, wait_members=3)
        assert members_view(d) == members_view(before), (before, d)
        assert d["group_epoch"] == before["group_epoch"], (before, d)
        # They keep consuming and committing: records produced now are processed and their
        # offsets committed by the same members.
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
        for i in range(600):
            p.produce(topic, key=f"r{i}".encode(), value=f"after{i}".encode(), partition=i % partitions)
        assert p.flush(30) == 0
        hw = {p: high for p, (low, high) in watermarks(b.bootstrap, topic, partitions).items()}
        assert sum(hw.values()) == producer.count + 600
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and watcher.last != hw:
            time.sleep(0.5)
        assert watcher.last == hw, f"committed {watcher.last} never reached the high watermarks {hw} after the restart"
        d = describe(b.bootstrap, group, wait_members=3)
        assert members_view(d) == members_view(before), (before, d)
        assert [revocations(logs[i]) for i in (1, 2, 3)] == revoked_before, "a member lost or gave up partitions"
    finally:
        producer.stopping.set()
        stop_workers(workers)
        watcher.stop.set()
        watcher.join(10)
    assert not watcher.backwards, f"committed offsets moved backwards: {watcher.backwards}"
    seen = read_processed(outs)
    missing = [(p, o) for p in range(partitions) for o in range(hw[p]) if (p, o) not in seen]
    assert not missing, f"{len(missing)} records never processed, e.g. {missing[:5]}"
    # The members left cleanly (SIGTERM): the group is Empty, offsets unchanged.
    d = describe(b.bootstrap, group)
    assert d["state"].upper() == "EMPTY" and d["members"] == [], d
    assert tg.committed(b.bootstrap, group, topic, partitions) == hw


def test_java_kip848_range_describe_and_new_partitions(broker_factory, tmp_path):
    b = kip848_broker(broker_factory)
    topic, group = "kip848-range", f"k848r-{uuid.uuid4().hex[:8]}"
    cli_create_topic(b.bootstrap, topic, 6)
    p = Producer({"bootstrap.servers": b.bootstrap})
    for i in range(600):
        p.produce(topic, key=f"k{i}".encode(), value=b"v", partition=i % 6)
    p.flush(30)
    outs = [tmp_path / f"w{i}.txt" for i in range(2)]
    workers = [start_java_worker(b.bootstrap, topic, group, outs[i], tmp_path / f"w{i}.log",
                                 props="group.remote.assignor=range,client.id=kip848-w" + str(i))
               for i in range(2)]
    try:
        d = describe(b.bootstrap, group, wait_members=2)
        assert d["assignor"] == "range", d
        ranges = sorted(m["assignment"] for m in d["members"])
        assert ranges == [[0, 1, 2], [3, 4, 5]], d
        for m in d["members"]:
            assert m["target"] == m["assignment"] and m["epoch"] == d["assignment_epoch"], d
            assert m["client_id"].startswith("kip848-w"), d
        # ListGroups (librdkafka) sees a consumer group.
        a = admin(b.bootstrap)  # keep the handle alive until the future resolves
        listed = a.list_consumer_groups().result(timeout=30)
        mine = [g for g in listed.valid if g.group_id == group]
        assert len(mine) == 1, ([g.group_id for g in listed.valid], listed.errors)
        if hasattr(mine[0], "type"):
            assert "CONSUMER" in str(mine[0].type).upper(), mine[0]
        # DescribeGroups v5 (the classic API) on a consumer group: a Dead group, as Kafka 4.1.
        body = w.i32(1) + w.string(group) + w.i8(0)
        r = w.Reader(w.roundtrip(b.bootstrap, w.request(15, 4, 5, body)))
        assert r.i32() == 5
        r.i32()  # throttle
        assert r.i32() == 1
        assert (r.i16(), r.string(), r.string()) == (0, group, "Dead")

        # Two more partitions: the group epoch goes up and the range covers 0-7.
        a.create_partitions([NewPartitions(topic, 8)])[topic].result(timeout=30)
        wait_topic(b.bootstrap, topic, 8)
        deadline = time.monotonic() + 60
        while True:
            d = describe(b.bootstrap, group, wait_members=2)
            if owned_partitions(d) == list(range(8)):
                break
            assert time.monotonic() < deadline, f"new partitions never assigned: {d}"
            time.sleep(0.5)
        assert sorted(m["assignment"] for m in d["members"]) == [[0, 1, 2, 3], [4, 5, 6, 7]], d
        # Records in the new partitions are consumed (a new producer knows of them).
        p = Producer({"bootstrap.servers": b.bootstrap})
        for i in range(20):
            p.produce(topic, key=b"n", value=b"v", partition=6 + i % 2)
        p.flush(30)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            seen = read_processed(outs)
            if all((q, o) in seen for q in (6, 7) for o in range(10)):
                break
            time.sleep(0.5)
        assert all((q, o) in seen for q in (6, 7) for o in range(10)), sorted(x for x in seen if x[0] >= 6)
    finally:
        stop_workers(workers)


# -- raw protocol: ConsumerGroupHeartbeat (flexible versions) -------------------------------------

CONSUMER_GROUP_HEARTBEAT = 68
(NONE, INCONSISTENT_GROUP_PROTOCOL, UNKNOWN_MEMBER_ID, UNSUPPORTED_VERSION, INVALID_REQUEST, GROUP_ID_NOT_FOUND,
 MEMBER_ID_REQUIRED, GROUP_MAX_SIZE_REACHED, FENCED_MEMBER_EPOCH, UNRELEASED_INSTANCE_ID, UNSUPPORTED_ASSIGNOR,
 STALE_MEMBER_EPOCH) = (0, 23, 25, 35, 42, 69, 79, 81, 110, 111, 112, 113)


def cstr(s: str | None) -> bytes:
    if s is None:
        return w.uvarint(0)
    b = s.encode()
    return w.uvarint(len(b) + 1) + b


def heartbeat(sock, version, group, member_id, epoch, topics=None, assignor=None, instance_id=None,
              owned=None, rebalance_timeout_ms=30000, corr=1) -> dict:
    """ConsumerGroupHeartbeat v0/v1; `owned` None = null topicPartitions."""
    body = cstr(group) + cstr(member_id) + w.i32(epoch) + cstr(instance_id) + cstr(None) + w.i32(rebalance_timeout_ms)
    body += w.uvarint(0) if topics is None else w.uvarint(len(topics) + 1) + b"".join(cstr(t) for t in topics)
    if version >= 1:
        body += cstr(None)  # subscribedTopicRegex
    body += cstr(assignor)
    if owned is None:
        body += w.uvarint(0)
    else:
        body += w.uvarint(len(owned) + 1) + b"".join(
            tid + w.uvarint(len(ps) + 1) + b"".join(w.i32(p) for p in ps) + w.uvarint(0) for tid, ps in owned)
    body += w.uvarint(0)  # tagged fields
    r = w.Reader(w.roundtrip(sock, w.request(CONSUMER_GROUP_HEARTBEAT, version, corr, body, header_version=2)))
    assert r.i32() == corr
    assert r.b[r.i] == 0  # no tagged fields in the response header
    r.i += 1
    r.i32()  # throttle

    def read_cstr():
        n, shift = 0, 0
        while True:
            byte = r.b[r.i]
            r.i += 1
            n |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        if n == 0:
            return None
        s = r.b[r.i:r.i + n - 1].decode()
        r.i += n - 1
        return s

    out = {"error": r.i16(), "message": read_cstr(), "member_id": read_cstr(), "epoch": r.i32(),
           "interval": r.i32()}
    out["assignment"] = r.b[r.i] == 1
    if out["assignment"]:
        # The assigned partitions (topicPartitions: uuid, partitions, tags each).
        f = w.FlexReader(r.b)
        f.i = r.i + 1
        out["partitions"] = sorted(p for _, ps, _ in f.array(lambda: (f.uuid(), f.array(f.i32), f.tags())) for p in ps)
    return out


def first_heartbeat(sock, version, group, member_id, topics, **kw) -> dict:
    """A join, repeated while the coordinator is not ready (Kafka answers NOT_COORDINATOR
    or COORDINATOR_LOAD_IN_PROGRESS until `__consumer_offsets` is created and loaded)."""
    # Kafka creates `__consumer_offsets` at the first FindCoordinator.
    wait_for("a group coordinator", lambda: tg.find_group_coordinator(sock, group) == 0, 60)

    def answered():
        j = heartbeat(sock, version, group, member_id, 0, topics=topics, owned=[], **kw)
        return None if j["error"] in (14, 15, 16) else j
    return wait_for("the group coordinator", answered, 60)


def commit_v10(bootstrap, group, member, epoch, tid, partitions) -> list[int]:
    """OffsetCommit v10 (topics by id) of offset 1 for `partitions`: their error codes."""
    parts = [w.i32(p) + w.i64(1) + w.i32(-1) + w.compact_nullable_string(None) + w.uvarint(0) for p in partitions]
    body = (w.compact_string(group) + w.i32(epoch) + w.compact_string(member) + w.compact_nullable_string(None)
            + w.compact_array([tid + w.compact_array(parts) + w.uvarint(0)]))
    r = w.flexible_roundtrip(bootstrap, 8, 10, body)
    r.i32()
    return [e for _, ps, _ in r.array(lambda: (r.uuid(), r.array(lambda: (r.i32(), r.i16(), r.tags())), r.tags())) for _, e, _ in ps]


def test_kip848_commit_at_an_older_epoch(broker_factory):
    """Kafka 4.4 checks a commit's member epoch per partition: at an older epoch it is
    taken for the partitions the member has held since then (a commit sent just before a
    rebalance lands for those that did not move), STALE_MEMBER_EPOCH for one it gave
    back, and the whole request fails with it. Both targets."""
    b = kip848_broker(broker_factory)
    topic, group = f"k848-old-{uuid.uuid4().hex[:8]}", f"k848o-{uuid.uuid4().hex[:8]}"
    cli_create_topic(b.bootstrap, topic, 2)
    tid = tg.topic_id_of(b.bootstrap, topic)
    ida, idb = str(uuid.uuid4()), str(uuid.uuid4())
    with w.connect(b.bootstrap) as s:
        # a alone: both partitions, at its first epoch.
        first = first_heartbeat(s, 1, group, ida, [topic])
        assert first["error"] == NONE, first
        old = first["epoch"]
        a = first
        while a.get("partitions") != [0, 1]:
            time.sleep(0.2)
            a = heartbeat(s, 1, group, ida, old, owned=[(tid, [])])
            assert a["error"] == NONE and a["epoch"] == old, a
        assert heartbeat(s, 1, group, ida, old, owned=[(tid, [0, 1])])["error"] == NONE
        # b joins: a is told to give one partition back, keeping its epoch until it has.
        # (Kafka 4.4 computes the new target within group.consumer.assignment.interval.ms.)
        jb = heartbeat(s, 1, group, idb, 0, topics=[topic], owned=[])
        assert jb["error"] == NONE, jb

        def told_to_revoke():
            r = heartbeat(s, 1, group, ida, old, owned=[(tid, [0, 1])])
            assert r["error"] == NONE and r["epoch"] == old, r
            return len(r.get("partitions") or [0, 1]) == 1 and r
        kept = wait_for("a told to give a partition back", told_to_revoke, 60)["partitions"]
        gone = [p for p in (0, 1) if p not in kept]
        r = heartbeat(s, 1, group, ida, old, owned=[(tid, kept)])
        new = r["epoch"]
        assert r["error"] == NONE and new > old, r

        b_epoch = [jb["epoch"]]

        def b_holds_it():
            r = heartbeat(s, 1, group, idb, b_epoch[0], owned=[(tid, [])])
            assert r["error"] == NONE, r
            b_epoch[0] = r["epoch"]
            return r.get("partitions") == gone
        wait_for("b given the partition a gave back", b_holds_it, 60)
    assert commit_v10(b.bootstrap, group, ida, new, tid, [0, 1]) == [NONE, NONE], "the current epoch: anything"
    assert commit_v10(b.bootstrap, group, ida, old, tid, kept) == [NONE], "held since the older epoch"
    assert commit_v10(b.bootstrap, group, ida, old, tid, gone) == [STALE_MEMBER_EPOCH]
    assert commit_v10(b.bootstrap, group, ida, old, tid, kept + gone) == [STALE_MEMBER_EPOCH] * 2, "one refuses all"
    assert commit_v10(b.bootstrap, group, ida, new + 1, tid, kept) == [STALE_MEMBER_EPOCH], "newer than the member's"
    assert b_epoch[0] > old
    assert commit_v10(b.bootstrap, group, idb, old, tid, gone) == [STALE_MEMBER_EPOCH], "b was given it later"


def test_kip848_heartbeat_errors(broker_factory):
    b = kip848_broker(broker_factory, ["--group-max-size", "3"])
    topic, group = "kip848-bad", f"k848b-{uuid.uuid4().hex[:8]}"
    cli_create_topic(b.bootstrap, topic, 2)
    with w.connect(b.bootstrap) as s:
        # Join (v0: the coordinator names the member).
        j = first_heartbeat(s, 0, group, "", [topic])
        assert j["error"] == NONE and j["member_id"] and j["epoch"] >= 1 and j["assignment"], j
        if not is_kafka():
            assert j["interval"] == HEARTBEAT_INTERVAL_MS
        member, epoch = j["member_id"], j["epoch"]
        h = heartbeat(s, 0, group, member, epoch)
        assert (h["error"], h["epoch"]) == (NONE, epoch), h
        # Wrong epochs are fenced; an unknown member is told so.
        assert heartbeat(s, 0, group, member, epoch + 5)["error"] == FENCED_MEMBER_EPOCH
        assert heartbeat(s, 0, group, member, epoch - 1 if epoch > 1 else 77, owned=[])["error"] == FENCED_MEMBER_EPOCH
        assert heartbeat(s, 0, group, "nobody", epoch)["error"] == UNKNOWN_MEMBER_ID
        assert heartbeat(s, 0, f"{group}-none", "nobody", 3)["error"] == GROUP_ID_NOT_FOUND
        # Bad joins.
        bad = heartbeat(s, 0, group, "", 0, topics=[topic], assignor="bogus", owned=[])
        assert bad["error"] == UNSUPPORTED_ASSIGNOR and "bogus" in bad["message"], bad
        assert heartbeat(s, 0, group, "", 0, topics=None, owned=[])["error"] == INVALID_REQUEST
        assert heartbeat(s, 0, group, "", 0, topics=[topic], owned=None)["error"] == INVALID_REQUEST
        assert heartbeat(s, 0, group, "", 0, topics=[topic], owned=[], rebalance_timeout_ms=-1)["error"] == INVALID_REQUEST
        assert heartbeat(s, 0, group, member, -3)["error"] == INVALID_REQUEST
        assert heartbeat(s, 1, group, "", 0, topics=[topic], owned=[])["error"] == INVALID_REQUEST  # v1: id required
        assert heartbeat(s, 0, "", "", 0, topics=[topic], owned=[])["error"] == INVALID_REQUEST
        # A classic JoinGroup into this consumer group (group.consumer.migration.policy
        # bidirectional, Kafka 4.4's default) first gets its member id; its protocol
        # metadata here is not a consumer subscription, so it is then refused.
        j = tg.join_v5(s, group, "")
        assert j["error"] == MEMBER_ID_REQUIRED and j["member_id"], j
        assert tg.join_v5(s, group, j["member_id"])["error"] == INCONSISTENT_GROUP_PROTOCOL
        # OffsetCommit from a non-member, and from a member with a pre-v9 request.
        assert tg.commit_v5(s, group, epoch, "someone-else", topic, 0, 5) == UNKNOWN_MEMBER_ID
        if not is_kafka():
            assert tg.commit_v5(s, group, epoch, member, topic, 0, 5) == UNSUPPORTED_VERSION
        # Static members: a second instance with the same instance id is refused.
        st = heartbeat(s, 1, group, str(uuid.uuid4()), 0, topics=[topic], instance_id="inst-1", owned=[])
        assert st["error"] == NONE, st
        dup = heartbeat(s, 1, group, str(uuid.uuid4()), 0, topics=[topic], instance_id="inst-1", owned=[])
        assert dup["error"] == UNRELEASED_INSTANCE_ID, dup
        # group.max.size 3 (shardlog flag; Kafka: group.consumer.max.size).
        if not is_kafka():
            third = heartbeat(s, 1, group, str(uuid.uuid4()), 0, topics=[topic], owned=[])
            assert third["error"] == NONE, third
            assert heartbeat(s, 1, group, str(uuid.uuid4()), 0, topics=[topic], owned=[])["error"] == GROUP_MAX_SIZE_REACHED
        # Leave: epoch -1 echoed; the member is gone afterwards.
        lv = heartbeat(s, 0, group, member, -1)
        assert (lv["error"], lv["epoch"], lv["member_id"]) == (NONE, -1, member), lv
        assert heartbeat(s, 0, group, member, epoch)["error"] == UNKNOWN_MEMBER_ID
    # A truncated heartbeat closes that connection only.
    with w.connect(b.bootstrap) as s:
        s.sendall(w.request(CONSUMER_GROUP_HEARTBEAT, 0, 9, cstr(group) + b"\x05", header_version=2))
        try:
            s.recv(1)
        except OSError:
            pass
    b.assert_alive()
