"""Share groups (KIP-932): ShareGroupHeartbeat and ShareGroupDescribe as Kafka 4.4 answers
them, ListGroups with type share, `kafka-share-groups.sh --list / --describe --members /
--describe --state`; ShareFetch / ShareAcknowledge with share sessions (acquisition,
acknowledgement, release and redelivery, Kafka's errors), the group's maximum size under
thousands of would-be members, and Kafka's own console share consumer (a
KafkaShareConsumer 4.4) reading through them. Both targets.

Share groups are served while share.version >= 1 is finalized; a new cluster finalizes 2
on both targets (2 adds the dead-letter queue: `test_share_dead_letter_queue.py`).
Durability: `test_share_durability.py`; the offset admin APIs: `test_share_group_offsets.py`.
"""

from __future__ import annotations

import re
import subprocess
import time
import uuid

import kafkawire as w
from confluent_kafka import Producer

from clients import admin_create_topic, kafka_tool
from conftest import kafka_classpath
from conftest import is_kafka, wait_for
from test_features import describe as describe_features, features
from test_groups import find_group_coordinator

GROUP_ID_NOT_FOUND, UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, UNSUPPORTED_VERSION = 69, 25, 110, 35


def share_broker(broker_factory, settings: dict[str, str] | None = None):
    """A broker with Kafka broker `settings` both targets take. Share groups are on by
    default on both (share.version 2)."""
    b = broker_factory(settings=settings)
    wait_for("share.version finalized", lambda: describe_features(b.bootstrap)["share.version"][2] != "0", 30)
    return b


def heartbeat(bootstrap: str, group: str, member: str, epoch: int, topics: list[str] | None = None) -> dict:
    """One ShareGroupHeartbeat v1: {error, message, member, epoch, assignment: {topic id: [partitions]} or None}."""
    body = (w.compact_string(group) + w.compact_string(member) + w.i32(epoch) + w.uvarint(0)
            + (w.compact_array([w.compact_string(t) for t in topics]) if topics is not None else w.uvarint(0)))
    r = w.flexible_roundtrip(bootstrap, 76, 1, body)
    r.i32()
    out = {"error": r.i16(), "message": r.compact_string(), "member": r.compact_string(), "epoch": r.i32()}
    r.i32()  # heartbeat interval
    if r.i8() < 0:
        out["assignment"] = None
    else:
        parts = r.array(lambda: (r.uuid(), r.array(r.i32), r.tags()))
        r.tags()
        out["assignment"] = {bytes(t).hex(): sorted(ps) for t, ps, _ in parts}
    return out


def joined(bootstrap: str, group: str, topics: list[str]) -> tuple[str, dict]:
    """A new member of `group` (after FindCoordinator, which creates __consumer_offsets)."""
    with w.connect(bootstrap) as s:
        wait_for("the group coordinator", lambda: find_group_coordinator(s, group) == 0)
    member = str(uuid.uuid4())
    hb = wait_for("a join answer", lambda: h if (h := heartbeat(bootstrap, group, member, 0, topics))["error"] not in (14, 15, 16) else None)
    assert hb["error"] == 0, hb
    return member, hb


def settled_members(bootstrap: str, group: str, topic: str, n: int) -> tuple[list[str], bytes]:
    """`n` members of `group` on `topic`, each assigned its partitions; their ids and the
    topic id."""
    members = {}
    for _ in range(n):
        m, hb = joined(bootstrap, group, [topic])
        members[m] = hb
    settle(bootstrap, group, members, lambda a: all(a.values()))
    return list(members), bytes.fromhex(next(iter(next(iter(members.values()))["assignment"])))


def settle(bootstrap: str, group: str, members: dict[str, dict], want) -> dict[str, dict]:
    """Heartbeats every member until `want(assignments)` holds (Kafka assigns asynchronously)."""
    def all_settled():
        for m, last in members.items():
            hb = heartbeat(bootstrap, group, m, last["epoch"])
            assert hb["error"] == 0, hb
            if hb["assignment"] is not None:
                last["assignment"] = hb["assignment"]
            last["epoch"] = hb["epoch"]
        return want({m: last["assignment"] or {} for m, last in members.items()})
    wait_for("the assignment", all_settled, 60)
    return members


def share_groups_tool(bootstrap: str, *args: str) -> str:
    r = kafka_tool("org.apache.kafka.tools.consumer.group.ShareGroupCommand", "--bootstrap-server", bootstrap, *args)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_members_share_partitions_and_the_tools_see_them(broker_factory, topic_name):
    b = share_broker(broker_factory)
    admin_create_topic(b.bootstrap, topic_name, 3)
    group = "sg-" + topic_name
    members = {}
    for _ in range(4):
        m, hb = joined(b.bootstrap, group, [topic_name])
        members[m] = hb

    def every_partition_read_by_someone(assignments):
        parts = [p for a in assignments.values() for ps in a.values() for p in ps]
        return sorted(set(parts)) == [0, 1, 2] and all(a for a in assignments.values())
    settle(b.bootstrap, group, members, every_partition_read_by_someone)

    assert group in share_groups_tool(b.bootstrap, "--list").split()
    out = share_groups_tool(b.bootstrap, "--describe", "--members", "--group", group)
    assert sum(1 for m in members if m in out) == 4, out
    state = share_groups_tool(b.bootstrap, "--describe", "--state", "--group", group)
    assert re.search(rf"{re.escape(group)}\s+\S+\s+\(\d+\)\s+Stable\s+4", state), state

    # Kafka's epoch checks and words.
    m, last = next(iter(members.items()))
    hb = heartbeat(b.bootstrap, group, m, last["epoch"] + 5)
    assert hb["error"] == FENCED_MEMBER_EPOCH, hb
    assert hb["message"].startswith(f"The share group member has a greater member epoch ({last['epoch'] + 5})"), hb
    hb = heartbeat(b.bootstrap, group, "not-a-member", 1)
    assert (hb["error"], hb["message"]) == (UNKNOWN_MEMBER_ID, f"Member not-a-member is not a member of group {group}."), hb
    # Leaving: epoch -1, and the group has one member fewer.
    hb = heartbeat(b.bootstrap, group, m, -1)
    assert (hb["error"], hb["epoch"]) == (0, -1), hb
    def three_members():
        out = share_groups_tool(b.bootstrap, "--describe", "--state", "--group", group)
        return re.search(r"Stable\s+3\b", out) is not None
    wait_for("3 members", three_members, 30)


GROUP_MAX_SIZE_REACHED = 81


def test_thousands_of_would_be_members_stop_at_the_groups_maximum_size(broker_factory, topic_name):
    """Bad input: 2,000 members try to join one share group. Kafka 4.4's bound
    (group.share.max.size, 200) takes the first 200; every later one gets
    GROUP_MAX_SIZE_REACHED with Kafka's message; the group holds exactly 200 members, and
    one leaving makes room for exactly one more."""
    b = share_broker(broker_factory)
    bs = b.bootstrap
    admin_create_topic(bs, topic_name, 1)
    group = "sg-max-" + topic_name
    first, _ = joined(bs, group, [topic_name])
    accepted, refused = [first], 0
    full = (GROUP_MAX_SIZE_REACHED, "The share group has reached its maximum capacity of 200 members.")
    for _ in range(1999):
        m = str(uuid.uuid4())
        hb = heartbeat(bs, group, m, 0, [topic_name])
        if hb["error"] == 0:
            accepted.append(m)
        else:
            assert (hb["error"], hb["message"]) == full, hb
            refused += 1
    assert (len(accepted), refused) == (200, 1800)
    state = share_groups_tool(bs, "--describe", "--state", "--group", group)
    assert re.search(r"Stable\s+200\b", state), state
    # One leaves: one more fits, the next does not.
    assert heartbeat(bs, group, accepted[0], -1)["error"] == 0
    assert heartbeat(bs, group, str(uuid.uuid4()), 0, [topic_name])["error"] == 0
    hb = heartbeat(bs, group, str(uuid.uuid4()), 0, [topic_name])
    assert (hb["error"], hb["message"]) == full, hb


SHARE_SESSION_LIMIT_REACHED = 133


def test_share_sessions_stop_at_the_brokers_limit(broker_factory, topic_name):
    """Bad input: 210 members of two share groups open share sessions on a broker that keeps
    at most 200 (group.share.max.share.sessions; Kafka requires at least group.share.max.size,
    200). No more than 200 are opened; every other is SHARE_SESSION_LIMIT_REACHED (shardlog
    divides the limit among its shards and keeps a session on its connection's shard, so it
    may refuse a few earlier than Kafka); an opened session keeps working."""
    b = share_broker(broker_factory, {"group.share.max.share.sessions": "200"})
    bs = b.bootstrap
    admin_create_topic(bs, topic_name, 1)
    members = []
    for g in ("ss-a-" + topic_name, "ss-b-" + topic_name):
        ids, tid = settled_members(bs, g, topic_name, 105)
        members += [(g, m) for m in ids]
    opened, refused = [], 0
    socks = [w.connect(bs) for _ in members]
    try:
        for (g, m), s in zip(members, socks):
            err, _ = share_fetch(bs, g, m, 0, tid, [0], sock=s)
            if err == 0:
                opened.append((g, m, s))
            else:
                assert err == SHARE_SESSION_LIMIT_REACHED, err
                refused += 1
        assert len(opened) <= 200 and refused == len(members) - len(opened) and refused >= 10, (len(opened), refused)
        g, m, s = opened[0]
        err, _ = share_fetch(bs, g, m, 1, tid, [0], sock=s)
        assert err == 0, err
    finally:
        for s in socks:
            s.close()


def test_a_group_id_has_one_type(broker_factory, topic_name):
    b = share_broker(broker_factory)
    group = "sg-type-" + topic_name
    joined(b.bootstrap, group, [topic_name])
    # A KIP-848 heartbeat for the share group's id.
    body = (w.compact_string(group) + w.compact_string(str(uuid.uuid4())) + w.i32(0) + w.uvarint(0) + w.uvarint(0) + w.i32(30000)
            + w.compact_array([w.compact_string(topic_name)]) + w.uvarint(0) + w.compact_array([]))
    r = w.flexible_roundtrip(b.bootstrap, 68, 0, body)
    r.i32()
    assert (r.i16(), r.compact_string()) == (GROUP_ID_NOT_FOUND, f"Group {group} is not a consumer group.")
    # ShareGroupDescribe of a group that does not exist.
    missing = "sg-missing-" + topic_name
    body = w.compact_array([w.compact_string(missing)]) + w.i8(0)
    r = w.flexible_roundtrip(b.bootstrap, 77, 1, body)
    r.i32()
    ((err, msg, gid, members),) = r.array(lambda: (r.i16(), r.compact_string(), r.compact_string(), r.compact_string(), r.i32(), r.i32(),
                                                   r.compact_string(), r.array(lambda: None), r.i32(), r.tags())[:3] + ((),))
    assert (err, msg, gid) == (GROUP_ID_NOT_FOUND, f"Group {missing} not found.", missing)


def test_share_version_0_turns_share_groups_off(broker_factory, topic_name):
    b = broker_factory()
    # Level 2 (KIP-1191's dead-letter queue) is the highest: 3 is refused, naming the range.
    rc, out = features(b.bootstrap, "upgrade", "--feature", "share.version=3")
    assert re.search(r"Local controller \d+ only supports versions 0-2", out), out
    rc, out = features(b.bootstrap, "downgrade", "--feature", "share.version=0")
    assert "share.version was downgraded to 0." in out, out
    wait_for("share.version 0", lambda: describe_features(b.bootstrap)["share.version"][2] == "0", 30)
    group = "sg-off-" + topic_name
    with w.connect(b.bootstrap) as s:
        wait_for("the group coordinator", lambda: find_group_coordinator(s, group) == 0)
    assert heartbeat(b.bootstrap, group, str(uuid.uuid4()), 0, [topic_name])["error"] == UNSUPPORTED_VERSION


# -- ShareFetch / ShareAcknowledge ----------------------------------------------------------


def produce(bootstrap: str, topic: str, partition: int, n: int) -> None:
    """`n` records with values v0..v{n-1}, acknowledged by the leader."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(n):
        p.produce(topic, f"v{i}".encode(), partition=partition)
    assert p.flush(30) == 0

INVALID_RECORD_STATE, SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH = 121, 122, 123
ACCEPT, RELEASE, REJECT = 1, 2, 3


def _ack_batches(acks):
    return w.compact_array([w.i64(f) + w.i64(l) + w.compact_array([w.i8(t) for t in types]) + w.uvarint(0) for f, l, types in acks])


def share_fetch(bootstrap, group, member, epoch, topic_id: bytes, partitions, acks=None, max_wait_ms=0, sock=None):
    """ShareFetch v1 of `partitions` of one topic (`acks`: {partition: [(first, last, [types])]})
    → (top error, {partition: {error, ack_error, acquired: [(first, last, count)], offsets: [..]}})."""
    acks = acks or {}
    parts = [w.i32(p) + _ack_batches(acks.get(p, [])) + w.uvarint(0) for p in partitions]
    body = (w.compact_string(group) + w.compact_string(member) + w.i32(epoch) + w.i32(max_wait_ms) + w.i32(1)
            + w.i32(1 << 20) + w.i32(500) + w.i32(500)
            + w.compact_array([topic_id + w.compact_array(parts) + w.uvarint(0)]) + w.compact_array([]))
    r = w.flexible_roundtrip(sock or bootstrap, 78, 1, body)
    r.i32()
    err = r.i16()
    r.compact_string()
    r.i32()
    out = {}

    def partition():
        idx, perr = r.i32(), r.i16()
        r.compact_string()
        aerr = r.i16()
        r.compact_string()
        r.i32(), r.i32(), r.tags()
        records = r.compact_bytes() or b""
        acquired = r.array(lambda: (r.i64(), r.i64(), r.i16(), r.tags())[:3])
        r.tags()
        offsets = [o for base, last, _ in w.batches_in(records) for o in range(base, last + 1)]
        out[idx] = {"error": perr, "ack_error": aerr, "acquired": acquired or [], "offsets": offsets}
    r.array(lambda: (r.uuid(), r.array(partition), r.tags()))
    for p in partitions:  # Kafka leaves out partitions with nothing to say
        out.setdefault(p, {"error": 0, "ack_error": 0, "acquired": [], "offsets": []})
    return err, out


def share_ack(bootstrap, group, member, epoch, topic_id: bytes, acks, sock=None):
    """ShareAcknowledge v1 → (top error, {partition: error})."""
    parts = [w.i32(p) + _ack_batches(a) + w.uvarint(0) for p, a in acks.items()]
    body = (w.compact_string(group) + w.compact_string(member) + w.i32(epoch)
            + w.compact_array([topic_id + w.compact_array(parts) + w.uvarint(0)]))
    r = w.flexible_roundtrip(sock or bootstrap, 79, 1, body)
    r.i32()
    err = r.i16()
    r.compact_string()
    out = {}
    r.array(lambda: (r.uuid(), r.array(lambda: out.__setitem__(r.i32(), (r.i16(), r.compact_string(), r.i32(), r.i32(), r.tags(), r.tags())[0])), r.tags()))
    for p in acks:
        out.setdefault(p, 0)
    return err, out


def acquired_offsets(res) -> list[int]:
    return [o for f, l, _ in res["acquired"] for o in range(f, l + 1)]


def test_share_fetch_acquires_acknowledges_and_redelivers(broker_factory, topic_name):
    """Two members of one share group on one partition: what A holds B cannot get; A
    accepts some, releases others (B gets them, delivered a second time), rejects the rest
    (nobody gets them again); acknowledging what one does not hold is INVALID_RECORD_STATE;
    session epochs are checked (SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH)."""
    b = share_broker(broker_factory)
    bs = b.bootstrap
    admin_create_topic(bs, topic_name, 1)
    group = "sf-" + topic_name
    (a, b_), tid = settled_members(bs, group, topic_name, 2)
    # Sessions open (epoch 0) before any record exists; the share-partition starts at the end.
    with w.connect(bs) as sa, w.connect(bs) as sb:
        assert share_fetch(bs, group, a, 0, tid, [0], sock=sa)[0] == 0
        assert share_fetch(bs, group, b_, 0, tid, [0], sock=sb)[0] == 0
        # Kafka initializes the share-partition (at the end of the log) asynchronously:
        # records are written until A gets some.
        epoch_a = 1

        def a_gets_records():
            nonlocal epoch_a
            produce(bs, topic_name, 0, 10)
            r = share_fetch(bs, group, a, epoch_a, tid, [0], max_wait_ms=1000, sock=sa)
            epoch_a += 1
            return r if r[1][0]["acquired"] else None
        got = wait_for("A's records", a_gets_records, 60)
        held = acquired_offsets(got[1][0])
        assert held and set(held) <= set(got[1][0]["offsets"]), got
        assert all(c == 1 for _, _, c in got[1][0]["acquired"])
        # B cannot get what A holds.
        err, res = share_fetch(bs, group, b_, 1, tid, [0], sock=sb)
        assert err == 0 and not (set(acquired_offsets(res[0])) & set(held)), res
        # Session epochs: A's next is epoch_a.
        assert share_fetch(bs, group, a, epoch_a + 5, tid, [0], sock=sa)[0] == INVALID_SHARE_SESSION_EPOCH
        assert share_fetch(bs, group, "no-such-member", 3, tid, [0], sock=sa)[0] == SHARE_SESSION_NOT_FOUND
        # B acknowledging A's records: refused, nothing changes.
        err, res = share_ack(bs, group, b_, 2, tid, {0: [(held[0], held[0], [ACCEPT])]}, sock=sb)
        assert res[0] == INVALID_RECORD_STATE, res
        # A: accept the first, release the second, reject the rest.
        first, second, rest = held[0], held[1], held[2:]
        acks = [(first, first, [ACCEPT]), (second, second, [RELEASE])] + ([(rest[0], rest[-1], [REJECT])] if rest else [])
        err, res = share_ack(bs, group, a, epoch_a, tid, {0: acks}, sock=sa)
        assert (err, res[0]) == (0, 0), res
        # B now gets the released record, delivered a second time, and nothing A accepted or rejected.
        got = wait_for("the released record", lambda: (r := share_fetch(bs, group, b_, 3, tid, [0], sock=sb))[1][0]["acquired"] and r)
        offsets = acquired_offsets(got[1][0])
        assert second in offsets and first not in offsets and not set(rest) & set(offsets), got
        assert [c for f, l, c in got[1][0]["acquired"] if f <= second <= l] == [2], got


def test_console_share_consumers_split_the_records(broker_factory, topic_name):
    """Kafka's own `kafka-console-share-consumer.sh` (a KafkaShareConsumer 4.4, implicit
    acknowledgement): two of them in one share group on one partition read every record,
    none twice."""
    import threading
    b = share_broker(broker_factory)
    admin_create_topic(b.bootstrap, topic_name, 1)
    group = "csc-" + topic_name
    cmd = ["java", "-Xmx256m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", kafka_classpath(),
           "org.apache.kafka.tools.consumer.ConsoleShareConsumer", "--bootstrap-server", b.bootstrap,
           "--topic", topic_name, "--group", group]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) for _ in range(2)]
    lines: list[str] = []

    def read(p):
        for line in p.stdout:
            lines.append(line.strip())
    threads = [threading.Thread(target=read, args=(p,), daemon=True) for p in procs]
    for t in threads:
        t.start()
    try:
        # Warm-up records until the consumers read (Kafka starts the share-partition at
        # the end of the log once the group is assigned).
        def reading():
            p = Producer({"bootstrap.servers": b.bootstrap})
            p.produce(topic_name, b"warmup", partition=0)
            p.flush(30)
            time.sleep(1)
            return any(l == "warmup" for l in lines)
        wait_for("the consumers reading", reading, 120)
        p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all"})
        for i in range(200):
            p.produce(topic_name, f"r{i}".encode(), partition=0)
        assert p.flush(30) == 0
        wait_for("every record", lambda: len([l for l in lines if l.startswith("r")]) >= 200, 60)
        time.sleep(2)  # a duplicate would show up by now
    finally:
        for p in procs:
            p.terminate()
            p.wait(30)
    values = [l for l in lines if l.startswith("r")]
    assert len(values) == 200 and len(set(values)) == 200, (len(values), len(set(values)))


def test_share_acknowledgements_that_do_not_fit_are_refused(broker_factory, topic_name):
    """Bad input, as Kafka 4.4 answers it: acknowledgement batches that run backwards,
    overlap, carry the wrong number of types or an unknown type, or name offsets never
    delivered, are INVALID_REQUEST (INVALID_RECORD_STATE is for in-flight records the
    member does not hold, test above); none changes what
    the member holds (it can still accept its records). An acknowledgement cannot open a
    session; a closed session is gone."""
    b = share_broker(broker_factory)
    bs = b.bootstrap
    admin_create_topic(bs, topic_name, 1)
    group = "sbad-" + topic_name
    m, _ = joined(bs, group, [topic_name])
    members = settle(bs, group, {m: _}, lambda a: all(a.values()))
    tid = bytes.fromhex(next(iter(members[m]["assignment"])))
    with w.connect(bs) as s:
        assert share_fetch(bs, group, m, 0, tid, [0], sock=s)[0] == 0
        epoch = 1

        def gets_records():
            nonlocal epoch
            produce(bs, topic_name, 0, 10)
            r = share_fetch(bs, group, m, epoch, tid, [0], max_wait_ms=1000, sock=s)
            epoch += 1
            return r if r[1][0]["acquired"] else None
        held = acquired_offsets(wait_for("records", gets_records, 60)[1][0])
        first, last = held[0], held[-1]
        end = max(held) + 1000
        bad_requests = [
            [(last, first, [ACCEPT])] if last > first else [(first + 1, first, [ACCEPT])],  # backwards
            [(first, last, [ACCEPT]), (first, first, [ACCEPT])],  # overlapping
            [(first, first + 1, [ACCEPT, ACCEPT, ACCEPT])],  # 3 types for 2 offsets
            [(first, first, [9])],  # no such type
        ]
        for acks in bad_requests:
            err, res = share_ack(bs, group, m, epoch, tid, {0: acks}, sock=s)
            epoch += 1
            assert (err, res[0]) == (0, 42), (acks, err, res)
        err, res = share_ack(bs, group, m, epoch, tid, {0: [(end, end + 5, [ACCEPT])]}, sock=s)
        epoch += 1
        assert res[0] == 42, res
        # Nothing changed: the member still holds, and accepts, its records.
        err, res = share_ack(bs, group, m, epoch, tid, {0: [(first, last, [ACCEPT])]}, sock=s)
        epoch += 1
        assert (err, res[0]) == (0, 0), res
        # Closing (-1) ends the session; acknowledgements never open one.
        assert share_ack(bs, group, m, -1, tid, {}, sock=s)[0] == 0
        assert share_fetch(bs, group, m, epoch, tid, [0], sock=s)[0] == SHARE_SESSION_NOT_FOUND
        assert share_ack(bs, group, m, 0, tid, {0: [(first, first, [ACCEPT])]}, sock=s)[0] == INVALID_SHARE_SESSION_EPOCH


def lock_duration_told(sock_or_bootstrap, group: str, member: str, topic_id: bytes) -> int:
    """The acquisition_lock_timeout_ms of a member's first ShareFetch (session epoch 0, of
    partition 0, acquiring nothing)."""
    body = (w.compact_string(group) + w.compact_string(member) + w.i32(0) + w.i32(0) + w.i32(1) + w.i32(1 << 20)
            + w.i32(500) + w.i32(500) + w.compact_array([topic_id + w.compact_array([w.i32(0) + _ack_batches([]) + w.uvarint(0)]) + w.uvarint(0)])
            + w.compact_array([]))
    r = w.flexible_roundtrip(sock_or_bootstrap, 78, 1, body)
    r.i32()
    assert r.i16() == 0
    r.compact_string()
    return r.i32()


def test_group_share_limits_are_the_brokers_settings(broker_factory, topic_name):
    """group.share.record.lock.duration.ms (with its max raised) and
    group.share.delivery.count.limit: ShareFetch reports the lock duration, and a record
    released as often as the limit is archived, not delivered again."""
    b = share_broker(broker_factory, {"group.share.record.lock.duration.ms": "90000",
                                      "group.share.max.record.lock.duration.ms": "90000",
                                      "group.share.delivery.count.limit": "2"})
    bs = b.bootstrap
    admin_create_topic(bs, topic_name, 1)
    group = "sl-" + topic_name
    m, hb = joined(bs, group, [topic_name])
    members = settle(bs, group, {m: hb}, lambda a: all(a.values()))
    tid = bytes.fromhex(next(iter(members[m]["assignment"])))
    with w.connect(bs) as s:
        assert lock_duration_told(s, group, m, tid) == 90000, "acquisition_lock_timeout_ms is group.share.record.lock.duration.ms"
        epoch = 1

        def delivered():
            nonlocal epoch
            produce(bs, topic_name, 0, 1)
            res = share_fetch(bs, group, m, epoch, tid, [0], max_wait_ms=1000, sock=s)
            epoch += 1
            return acquired_offsets(res[1][0]) or None
        first = wait_for("a record", delivered, 60)[0]

        def fetch():
            nonlocal epoch
            res = share_fetch(bs, group, m, epoch, tid, [0], max_wait_ms=500, sock=s)
            epoch += 1
            return res[1][0]["acquired"] and res[1][0]

        def release(offset):
            nonlocal epoch
            err, res = share_ack(bs, group, m, epoch, tid, {0: [(offset, offset, [RELEASE])]}, sock=s)
            epoch += 1
            assert (err, res[0]) == (0, 0), res
        # Released after delivery 1, delivered again (delivery 2), released again: that
        # reaches the limit of 2, so it is archived and never delivered a third time.
        release(first)
        again = wait_for("the released record again", fetch, 60)
        assert [c for f, l, c in again["acquired"] if f <= first <= l] == [2], again
        release(first)
        produce(bs, topic_name, 0, 1)
        later = wait_for("the next record", fetch, 60)
        assert first not in acquired_offsets(later), later


def test_a_closed_connection_releases_its_members_records(broker_factory, topic_name):
    """Kafka ties a share session to the connection that opened it: when that connection
    closes, the session ends and the member's acquired records are released at once. The
    locks here last an hour, so only that release can give B the records A held."""
    b = share_broker(broker_factory, {"group.share.record.lock.duration.ms": "3600000",
                                      "group.share.max.record.lock.duration.ms": "3600000"})
    bs = b.bootstrap
    admin_create_topic(bs, topic_name, 1)
    group = "sc-" + topic_name
    (a, b_), tid = settled_members(bs, group, topic_name, 2)
    with w.connect(bs) as sb:
        assert share_fetch(bs, group, b_, 0, tid, [0], sock=sb)[0] == 0
        with w.connect(bs) as sa:
            assert share_fetch(bs, group, a, 0, tid, [0], sock=sa)[0] == 0
            epoch = 1

            def a_gets_records():
                nonlocal epoch
                produce(bs, topic_name, 0, 5)
                r = share_fetch(bs, group, a, epoch, tid, [0], max_wait_ms=1000, sock=sa)
                epoch += 1
                return acquired_offsets(r[1][0]) or None
            held = wait_for("A's records", a_gets_records, 60)
        # A's connection is closed (no acknowledgement, no final epoch): B gets what A held.
        epoch_b = 1
        seen: list[int] = []

        def b_gets_them():
            nonlocal epoch_b
            r = share_fetch(bs, group, b_, epoch_b, tid, [0], max_wait_ms=500, sock=sb)
            epoch_b += 1
            seen.extend(acquired_offsets(r[1][0]))
            return set(held) <= set(seen)
        wait_for(f"B to get A's records {held}", b_gets_them, 60)


def configs_tool(bootstrap: str, *args: str) -> str:
    r = kafka_tool("org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", bootstrap, *args)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_a_groups_share_configs_apply(broker_factory, topic_name):
    """A share group's own configs, set with kafka-configs.sh: share.auto.offset.reset
    earliest (records written before the group existed are delivered; latest, the
    default, starts at the log end) and share.record.lock.duration.ms (reported by
    ShareFetch); an out-of-range value is refused. (share.isolation.level:
    test_share_read_committed.py.)"""
    b = share_broker(broker_factory)
    bs = b.bootstrap
    admin_create_topic(bs, topic_name, 1)
    produce(bs, topic_name, 0, 5)
    group = "sc-" + topic_name
    configs_tool(bs, "--alter", "--entity-type", "groups", "--entity-name", group,
                 "--add-config", "share.auto.offset.reset=earliest,share.record.lock.duration.ms=20000")
    out = configs_tool(bs, "--describe", "--entity-type", "groups", "--entity-name", group)
    assert "share.auto.offset.reset=earliest" in out and "share.record.lock.duration.ms=20000" in out, out
    bad = kafka_tool("org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", bs, "--alter", "--entity-type", "groups",
                     "--entity-name", group, "--add-config", "share.record.lock.duration.ms=100")
    assert bad.returncode != 0 and "share.record.lock.duration.ms" in bad.stdout + bad.stderr, bad.stdout + bad.stderr

    m, hb = joined(bs, group, [topic_name])
    members = settle(bs, group, {m: hb}, lambda a: all(a.values()))
    tid = bytes.fromhex(next(iter(members[m]["assignment"])))
    with w.connect(bs) as s:
        got: list[int] = []
        epoch = 0

        def all_five():
            nonlocal epoch
            res = share_fetch(bs, group, m, epoch, tid, [0], max_wait_ms=500, sock=s)
            epoch += 1
            got.extend(acquired_offsets(res[1][0]))
            return sorted(got) == [0, 1, 2, 3, 4]
        wait_for("the records written before the group, from the log start", all_five, 60)
        assert len(got) == 5, f"each delivered once: {got}"
        # Another member's first ShareFetch: the lock duration it is told (nothing is left to acquire).
        m2, hb2 = joined(bs, group, [topic_name])
        settle(bs, group, {m2: hb2}, lambda a: all(a.values()))
        assert lock_duration_told(bs, group, m2, tid) == 20000, "acquisition_lock_timeout_ms is the group's share.record.lock.duration.ms"
