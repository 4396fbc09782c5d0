"""Consumer groups with real clients: the classic protocol (JoinGroup/SyncGroup/Heartbeat/
LeaveGroup), committed offsets stored in __consumer_offsets and surviving a broker
restart, and the coordinator's answers to bad input.
"""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

import kafkawire as w
from clients import admin, cli_create_topic, watermarks
from conftest import is_kafka, wait_for

HERE = Path(__file__).resolve().parent
SESSION_TIMEOUT_S = 6


def group_broker(broker_factory):
    # A new group's first rebalance waits group.initial.rebalance.delay.ms (3 s by
    # default); the tests start members at chosen moments, so no delay.
    args = [] if is_kafka() else ["--group-initial-rebalance-delay-ms", "0"]
    return broker_factory(extra_args=args)


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return {tp.partition: tp.offset for tp in tps}
    finally:
        c.close()


class OffsetWatcher(threading.Thread):
    """Polls the group's committed offsets; records any offset that moved backwards."""

    def __init__(self, bootstrap, group, topic, partitions):
        super().__init__(daemon=True)
        self.args = (bootstrap, group, topic, partitions)
        self.last: dict[int, int] = {}
        self.backwards: list[tuple[int, int, int]] = []
        self.stop = threading.Event()

    def run(self):
        bootstrap, group, topic, partitions = self.args
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
        while not self.stop.is_set():
            try:
                tps = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=5)
            except Exception:
                time.sleep(0.2)
                continue
            for tp in tps:
                if tp.offset < 0:
                    continue
                prev = self.last.get(tp.partition, -1)
                if tp.offset < prev:
                    self.backwards.append((tp.partition, prev, tp.offset))
                self.last[tp.partition] = max(prev, tp.offset)
            time.sleep(0.2)
        c.close()


class BackgroundProducer(threading.Thread):
    """Produces keyed records to `topic` (about 1000/s) until stop(); `count` is how many."""

    def __init__(self, bootstrap, topic):
        super().__init__(daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.stopping = threading.Event()
        self.count = 0

    def run(self):
        p = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5})
        i = 0
        while not self.stopping.is_set():
            for _ in range(50):
                p.produce(self.topic, key=f"k{i}".encode(), value=f"v{i}".encode())
                i += 1
            p.poll(0)
            time.sleep(0.05)
        p.flush(30)
        self.count = i

    def stop(self, timeout_s=60):
        self.stopping.set()
        self.join(timeout_s)


def read_processed(outs) -> set[tuple[int, int]]:
    """(partition, offset) pairs the workers wrote, one "partition offset" line each."""
    seen = set()
    for out in outs:
        if out.exists():
            for line in out.read_text().split("\n"):
                if line.strip():
                    p, o = line.split()
                    seen.add((int(p), int(o)))
    return seen


def start_worker(bootstrap, topic, group, out: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(HERE / "group_worker.py"), bootstrap, topic, group, str(out)],
                            stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True)


def wait_group(bootstrap, group, members: int, timeout_s: float) -> float:
    """Seconds until the group is Stable with `members` members."""
    a = admin(bootstrap)
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        try:
            d = a.describe_consumer_groups([group])[group].result(timeout=5)
            if str(d.state).endswith("STABLE") and len(d.members) == members:
                return time.monotonic() - t0
        except Exception:
            pass
        time.sleep(0.1)
    raise AssertionError(f"group {group} not Stable with {members} members within {timeout_s} s")


def test_confluent_group_join_kill_restart(broker_factory, tmp_path):
    b = group_broker(broker_factory)
    topic, group, partitions = "groups-12", f"g-{uuid.uuid4().hex[:8]}", 12
    cli_create_topic(b.bootstrap, topic, partitions)
    producer = BackgroundProducer(b.bootstrap, topic)
    producer.start()
    watcher = OffsetWatcher(b.bootstrap, group, topic, partitions)
    watcher.start()
    outs = [tmp_path / f"worker{i}.txt" for i in range(4)]
    workers = [start_worker(b.bootstrap, topic, group, outs[i]) for i in range(3)]
    try:
        wait_group(b.bootstrap, group, 3, 30)
        time.sleep(2)
        workers.append(start_worker(b.bootstrap, topic, group, outs[3]))
        join_s = wait_group(b.bootstrap, group, 4, 30)
        time.sleep(2)
        os.killpg(workers[0].pid, signal.SIGKILL)
        workers[0].wait()
        kill_s = wait_group(b.bootstrap, group, 3, 30)
        print(f"rebalance after a join: {join_s:.2f} s; after kill -9: {kill_s:.2f} s")
        # Detection takes the session timeout; the survivors rejoin on their next heartbeat.
        assert kill_s < SESSION_TIMEOUT_S + 3, f"rebalance after kill took {kill_s:.1f} s"
        time.sleep(2)
        producer.stop()
        hw = {p: high for p, (low, high) in watermarks(b.bootstrap, topic, partitions).items()}
        assert sum(hw.values()) == producer.count > 0
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if watcher.last == hw:
                break
            time.sleep(0.5)
        assert watcher.last == hw, f"committed {watcher.last} never reached the high watermarks {hw}"
    finally:
        for wk in workers:
            if wk.poll() is None:
                os.killpg(wk.pid, signal.SIGTERM)
                wk.wait(10)
        watcher.stop.set()
        watcher.join(10)
    assert not watcher.backwards, f"committed offsets moved backwards: {watcher.backwards}"
    seen = read_processed(outs)
    missing = [(p, o) for p in range(partitions) for o in range(hw[p]) if (p, o) not in seen]
    assert not missing, f"{len(missing)} records never processed, e.g. {missing[:5]}"

    # The coordinator's state survives a restart (kill -9: no clean shutdown).
    b.restart(kill=True)
    assert committed(b.bootstrap, group, topic, partitions) == hw
    a = admin(b.bootstrap)  # keep the handle alive until the future resolves
    # The workers died without LeaveGroup: the restarted coordinator loads the last
    # generation's members (Stable, as Kafka does) and expires their sessions.
    d = a.describe_consumer_groups([group])[group].result(timeout=10)
    assert str(d.state).endswith(("STABLE", "EMPTY")), d.state
    deadline = time.monotonic() + SESSION_TIMEOUT_S + 10
    while not str(d.state).endswith("EMPTY"):
        assert time.monotonic() < deadline, f"dead members never expired after the restart: {d.state}"
        time.sleep(0.5)
        d = a.describe_consumer_groups([group])[group].result(timeout=10)


def test_kafka_python_group_consumer(broker_factory):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import KafkaAdminClient
    b = group_broker(broker_factory)
    topic, group = "groups-kp", f"kp-{uuid.uuid4().hex[:8]}"
    cli_create_topic(b.bootstrap, topic, 3)
    p = KafkaProducer(bootstrap_servers=b.bootstrap)
    for i in range(300):
        p.send(topic, key=f"k{i}".encode(), value=f"v{i}".encode())
    p.flush()
    p.close()
    c = KafkaConsumer(topic, bootstrap_servers=b.bootstrap, group_id=group, auto_offset_reset="earliest",
                      enable_auto_commit=False, session_timeout_ms=6000, consumer_timeout_ms=15000)
    n = 0
    for _ in c:
        n += 1
        if n == 300:
            break
    c.commit()
    assert n == 300
    assert len(c.assignment()) == 3
    c.close()
    a = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    offsets = a.list_group_offsets(group)
    if offsets and all(isinstance(v, dict) for v in offsets.values()):
        offsets = offsets.get(group, next(iter(offsets.values())))  # keyed by group first
    assert sum(o.offset for o in offsets.values()) == 300, offsets

    def group_ids():
        return [g["group_id"] if isinstance(g, dict) else g[0] for g in a.list_groups()]

    assert group in group_ids()
    if not is_kafka():
        from clients import shardlog_cli
        assert group in shardlog_cli("group", "list", "--bootstrap", b.bootstrap).stdout
        described = shardlog_cli("group", "describe", group, "--bootstrap", b.bootstrap).stdout
        assert "state Empty" in described and described.count(topic) == 3, described
    a.delete_groups([group])
    assert group not in group_ids()
    a.close()


# -- raw protocol: errors for bad input --------------------------------------------------------

JOIN_GROUP, SYNC_GROUP, HEARTBEAT, OFFSET_COMMIT = 11, 14, 12, 8


def join_v5(sock, group, member_id, protocol_type="consumer", protocols=(("range", b"\x00\x01"),), corr=1):
    body = (w.string(group) + w.i32(10000) + w.i32(10000) + w.string(member_id) + w.string(None)
            + w.string(protocol_type) + w.i32(len(protocols))
            + b"".join(w.string(n) + w.i32(len(m)) + m for n, m in protocols))
    r = w.Reader(w.roundtrip(sock, w.request(JOIN_GROUP, 5, corr, body)))
    assert r.i32() == corr
    r.i32()  # throttle
    return {"error": r.i16(), "generation": r.i32(), "protocol": r.string(), "leader": r.string(), "member_id": r.string()}


def find_group_coordinator(sock, group) -> int:
    """FindCoordinator v4 for `group`: its error code (Kafka creates __consumer_offsets on
    the first one; a raw JoinGroup alone gets NOT_COORDINATOR for ever)."""
    body = w.i8(0) + w.compact_array([w.compact_string(group)]) + w.uvarint(0)
    r = w.FlexReader(w.roundtrip(sock, w.request(10, 4, 9, body, header_version=2)))
    assert r.i32() == 9
    r.tags()
    r.i32()
    (c,) = r.array(lambda: (r.compact_string(), r.i32(), r.compact_string(), r.i32(), r.i16(), r.compact_string(), r.tags()))
    return c[4]


def first_join_v5(sock, group):
    """The first JoinGroup of `group` (MEMBER_ID_REQUIRED and a member id), once the
    coordinator serves: Kafka answers COORDINATOR_NOT_AVAILABLE / LOAD_IN_PROGRESS /
    NOT_COORDINATOR while it creates and loads __consumer_offsets."""
    wait_for("the group coordinator", lambda: find_group_coordinator(sock, group) == 0)
    return wait_for("the group coordinator", lambda: j if (j := join_v5(sock, group, ""))["error"] not in (14, 15, 16) else None)


def sync_v3(sock, group, generation, member_id, assignments, corr=2):
    body = (w.string(group) + w.i32(generation) + w.string(member_id) + w.string(None) + w.i32(len(assignments))
            + b"".join(w.string(m) + w.i32(len(a)) + a for m, a in assignments))
    r = w.Reader(w.roundtrip(sock, w.request(SYNC_GROUP, 3, corr, body)))
    assert r.i32() == corr
    r.i32()
    err = r.i16()
    n = r.i32()
    return err, r.b[r.i:r.i + max(n, 0)]


def heartbeat_v3(sock, group, generation, member_id, corr=3):
    body = w.string(group) + w.i32(generation) + w.string(member_id) + w.string(None)
    r = w.Reader(w.roundtrip(sock, w.request(HEARTBEAT, 3, corr, body)))
    assert r.i32() == corr
    r.i32()
    return r.i16()


def commit_v5(sock, group, generation, member_id, topic, partition, offset, corr=4):
    body = (w.string(group) + w.i32(generation) + w.string(member_id) + w.i32(1) + w.string(topic)
            + w.i32(1) + w.i32(partition) + w.i64(offset) + w.string(None))
    r = w.Reader(w.roundtrip(sock, w.request(OFFSET_COMMIT, 5, corr, body)))
    assert r.i32() == corr
    r.i32()
    assert r.i32() == 1 and r.string() == topic and r.i32() == 1 and r.i32() == partition
    return r.i16()


def test_group_errors_for_bad_input(broker_factory):
    b = group_broker(broker_factory)
    topic, group = "groups-bad", f"bad-{uuid.uuid4().hex[:8]}"
    cli_create_topic(b.bootstrap, topic, 1)
    with w.connect(b.bootstrap) as s:
        # v4+: a first join without member id gets MEMBER_ID_REQUIRED and its id.
        j = first_join_v5(s, group)
        assert j["error"] == 79 and j["member_id"]
        member = j["member_id"]
        j = join_v5(s, group, member)
        assert j["error"] == 0 and j["generation"] == 1 and j["leader"] == member and j["protocol"] == "range"
        err, assignment = sync_v3(s, group, 1, member, [(member, b"assigned"), ("not-a-member", b"x")])
        assert (err, assignment) == (0, b"assigned")
        assert heartbeat_v3(s, group, 1, member) == 0
        # Another protocol type, or no protocols: INCONSISTENT_GROUP_PROTOCOL.
        assert join_v5(s, group, "", protocol_type="bogus")["error"] == 23
        assert join_v5(s, group, "", protocols=())["error"] == 23
        assert join_v5(s, f"{group}-new", "", protocols=())["error"] == 23
        # No common protocol with the current member.
        assert join_v5(s, group, "", protocols=(("roundrobin", b""),))["error"] == 23
        # Stale or unknown generation / member.
        assert commit_v5(s, group, 99, member, topic, 0, 5) == 22
        assert heartbeat_v3(s, group, 0, member) == 22
        assert commit_v5(s, group, 1, "someone-else", topic, 0, 5) == 25
        assert commit_v5(s, f"{group}-nonexistent", 3, "m", topic, 0, 5) == 22
        assert heartbeat_v3(s, group, 1, "someone-else") == 25
        assert sync_v3(s, group, 7, member, [])[0] == 22
        # Unknown topic; then a valid commit.
        assert commit_v5(s, group, 1, member, "no-such-topic", 0, 5) == 3
        assert commit_v5(s, group, 1, member, topic, 0, 5) == 0
    # A truncated JoinGroup closes that connection only.
    with w.connect(b.bootstrap) as s:
        s.sendall(w.request(JOIN_GROUP, 5, 9, w.string(group) + w.i32(1)))
        try:
            s.recv(1)
        except OSError:
            pass
    b.assert_alive()
    assert committed(b.bootstrap, group, topic, 1) == {0: 5}


def test_java_classic_group_consumer(broker_factory):
    from clients import java_tool, json_lines
    b = group_broker(broker_factory)
    topic, group = "groups-java", f"java-{uuid.uuid4().hex[:8]}"
    cli_create_topic(b.bootstrap, topic, 4)
    p = Producer({"bootstrap.servers": b.bootstrap})
    for i in range(400):
        p.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % 4)
    p.flush(30)
    r = java_tool("group-consume", "--bootstrap", b.bootstrap, "--topic", topic, "--group", group,
                  "--count", "400", "--timeout-ms", "60000", "--prop", "session.timeout.ms=10000")
    assert "#done\t400" in r.stdout
    got = {l["p"]: l["committed"] for l in json_lines(r.stdout)}
    assert got == {0: 100, 1: 100, 2: 100, 3: 100}
    assert committed(b.bootstrap, group, topic, 4) == got


def test_delete_groups_v3(broker_factory):
    """DeleteGroups v3 (Kafka 4.4: an error message per group, nullable): a group with a
    member is refused NON_EMPTY_GROUP, an unknown one GROUP_ID_NOT_FOUND, an empty one is
    deleted; every result decodes with v3's fields."""
    b = group_broker(broker_factory)
    topic, live, empty = "groups-del-v3", f"live-{uuid.uuid4().hex[:8]}", f"empty-{uuid.uuid4().hex[:8]}"
    cli_create_topic(b.bootstrap, topic, 1)
    with w.connect(b.bootstrap) as s:
        member = first_join_v5(s, live)["member_id"]
        assert join_v5(s, live, member)["error"] == 0
        # Offsets committed outside any generation (as a standalone consumer): an empty group.
        assert commit_v5(s, empty, -1, "", topic, 0, 5) == 0
    groups = [live, empty, f"missing-{uuid.uuid4().hex[:8]}"]
    r = w.flexible_roundtrip(b.bootstrap, 42, 3, w.uvarint(len(groups) + 1) + b"".join(w.compact_string(g) for g in groups))
    r.i32()  # throttle time
    results = r.array(lambda: (r.compact_string(), r.i16(), r.compact_string(), r.tags()))
    codes = {g: code for g, code, _message, _ in results}
    assert codes == {live: 68, empty: 0, groups[2]: 69}, results


def topic_id_of(bootstrap: str, topic: str) -> bytes:
    from confluent_kafka import TopicCollection
    a = admin(bootstrap)  # kept referenced until the result is in
    u = a.describe_topics(TopicCollection([topic]))[topic].result(timeout=30).topic_id
    return struct.pack(">qq", u.get_most_significant_bits(), u.get_least_significant_bits())


def test_offsets_by_topic_id(broker_factory):
    """OffsetCommit v10 and OffsetFetch v10 (Kafka 4.4, KIP-848) name topics by id: a
    commit by id is read back by id (and by name through an older version); an id no
    topic has is UNKNOWN_TOPIC_ID, and the rest of the request is still served."""
    b = group_broker(broker_factory)
    topic, group = f"by-id-{uuid.uuid4().hex[:8]}", f"g-by-id-{uuid.uuid4().hex[:8]}"
    cli_create_topic(b.bootstrap, topic, 2)
    tid, bogus = topic_id_of(b.bootstrap, topic), uuid.uuid4().bytes

    def partition(index, offset):
        return w.i32(index) + w.i64(offset) + w.i32(-1) + w.compact_nullable_string("m") + w.uvarint(0)

    with w.connect(b.bootstrap) as s:
        wait_for("the group coordinator", lambda: find_group_coordinator(s, group) == 0)
    # OffsetCommit v10, a simple group (no generation): topics by id.
    body = (w.compact_string(group) + w.i32(-1) + w.compact_string("") + w.compact_nullable_string(None)
            + w.compact_array([tid + w.compact_array([partition(0, 42), partition(1, 7)]) + w.uvarint(0),
                               bogus + w.compact_array([partition(0, 5)]) + w.uvarint(0)]))

    def commit():
        r = w.flexible_roundtrip(b.bootstrap, OFFSET_COMMIT, 10, body)
        r.i32()
        got = r.array(lambda: (r.uuid(), r.array(lambda: (r.i32(), r.i16(), r.tags())), r.tags()))
        codes = {(t, p): e for t, ps, _ in got for p, e, _ in ps}
        # Kafka: NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS until the group's offsets
        # partition is loaded.
        return None if set(codes.values()) & {14, 15, 16} else codes
    codes = wait_for("the commit", commit)
    assert codes == {(tid, 0): 0, (tid, 1): 0, (bogus, 0): 100}, codes
    # OffsetFetch v10 by id: the committed offsets; the unknown id: UNKNOWN_TOPIC_ID.
    topics = w.compact_array([tid + w.compact_array([w.i32(0), w.i32(1)]) + w.uvarint(0),
                              bogus + w.compact_array([w.i32(0)]) + w.uvarint(0)])
    body = w.compact_array([w.compact_string(group) + w.compact_nullable_string(None) + w.i32(-1) + topics + w.uvarint(0)]) + w.i8(0)
    r = w.flexible_roundtrip(b.bootstrap, 9, 10, body)
    r.i32()
    groups = r.array(lambda: (r.compact_string(), r.array(lambda: (r.uuid(), r.array(
        lambda: (r.i32(), r.i64(), r.i32(), r.compact_string(), r.i16(), r.tags())), r.tags())), r.i16(), r.tags()))
    ((g, ts, err, _),) = groups
    assert g == group and err == 0
    fetched = {(t, p): (off, e) for t, ps, _ in ts for p, off, _, _, e, _ in ps}
    assert fetched[(tid, 0)] == (42, 0) and fetched[(tid, 1)] == (7, 0), fetched
    assert fetched[(bogus, 0)][1] == 100, fetched
    # The same offsets by name, through the classic API.
    assert committed(b.bootstrap, group, topic, 2) == {0: 42, 1: 7}
