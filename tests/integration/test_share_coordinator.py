"""The share coordinator (KIP-932) as brokers reach it, on the wire, against shardlog and
Apache Kafka 4.4 alike: FindCoordinator's SHARE key type (2, from v6) names the broker
leading the `__share_group_state` partition of `group:topic_id:partition`, creating the
topic on the first lookup (COORDINATOR_NOT_AVAILABLE meanwhile); before v6, or with a key
that is not `group:topic_id:partition`, the answer is INVALID_REQUEST. The state APIs
(Initialize / Read / Write / Delete / ReadSummary ShareGroupState) keep a share-partition's
state by Kafka 4.4's rules, durably."""
from __future__ import annotations

import base64
import uuid

import kafkawire as w

from conftest import wait_for
from test_share_groups import share_broker

FIND_COORDINATOR, KEY_TYPE_SHARE = 10, 2
COORDINATOR_NOT_AVAILABLE, INVALID_REQUEST = 15, 42


def find_share_coordinator(bootstrap: str, key: str, version: int = 6) -> tuple[int, int, int]:
    """FindCoordinator (batched keys, v4+) for one SHARE key: (error, node id, port)."""
    body = w.i8(KEY_TYPE_SHARE) + w.compact_array([w.compact_string(key)]) + w.uvarint(0)
    r = w.FlexReader(w.roundtrip(bootstrap, w.request(FIND_COORDINATOR, version, 3, body, header_version=2)))
    assert r.i32() == 3
    r.tags()
    r.i32()  # throttle
    (c,) = r.array(lambda: (r.compact_string(), r.i32(), r.compact_string(), r.i32(), r.i16(), r.compact_string(), r.tags()))
    assert c[0] == key
    return c[4], c[1], c[3]


def share_key(group: str, partition: int) -> str:
    topic_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
    return f"{group}:{topic_id}:{partition}"


def test_find_coordinator_share_key_type(broker_factory):
    b = share_broker(broker_factory)
    port = int(b.bootstrap.rsplit(":", 1)[1])
    key = share_key("orders:readers", 3)  # a ':' in the group id is part of the group
    first = find_share_coordinator(b.bootstrap, key)
    assert first[0] in (0, COORDINATOR_NOT_AVAILABLE), first
    error, node, answered_port = wait_for("the share coordinator", lambda: a if (a := find_share_coordinator(b.bootstrap, key))[0] == 0 else None, 60)
    assert node >= 0 and answered_port == port, (node, answered_port)
    for bad in ["no-colons", "g:not-a-topic-id:0", share_key("g", 0).rsplit(":", 1)[0] + ":x"]:
        assert find_share_coordinator(b.bootstrap, bad)[0] == INVALID_REQUEST, bad
    assert find_share_coordinator(b.bootstrap, key, version=5)[0] == INVALID_REQUEST


# -- the share coordinator's state APIs (as share-partition leaders call them) -------------

INITIALIZE, READ, WRITE, DELETE, SUMMARY = 83, 84, 85, 86, 87
FENCED_LEADER_EPOCH, FENCED_STATE_EPOCH = 74, 124
NOT_COORDINATOR, LOAD_IN_PROGRESS = 16, 14


def state_call(bootstrap: str, api: int, version: int, group: str, tid: bytes, partition_body: bytes) -> w.FlexReader:
    """One state request for one partition of one topic; a reader at the first (only)
    partition result, past its partition index and error code, which it returns too."""
    body = w.compact_string(group) + w.compact_array([tid + w.compact_array([partition_body + w.uvarint(0)]) + w.uvarint(0)])
    r = w.flexible_roundtrip(bootstrap, api, version, body)
    assert r.uvarint() == 2  # one topic result
    assert r.uuid() == tid
    assert r.uvarint() == 2  # one partition result
    r.i32()
    return r


def initialize(bootstrap, group, tid, partition, state_epoch, start_offset) -> int:
    r = state_call(bootstrap, INITIALIZE, 0, group, tid, w.i32(partition) + w.i32(state_epoch) + w.i64(start_offset))
    return r.i16()


def write(bootstrap, group, tid, partition, state_epoch, leader_epoch, start_offset, batches, dcc=-1) -> int:
    """WriteShareGroupState v1; batches: [(first, last, state, count)]."""
    enc = [w.i64(f) + w.i64(l) + w.i8(s) + w.i16(c) + w.uvarint(0) for f, l, s, c in batches]
    body = w.i32(partition) + w.i32(state_epoch) + w.i32(leader_epoch) + w.i64(start_offset) + w.i32(dcc) + w.compact_array(enc)
    return state_call(bootstrap, WRITE, 1, group, tid, body).i16()


def read(bootstrap, group, tid, partition, leader_epoch) -> tuple[int, int, int, list]:
    """ReadShareGroupState v0: (error, state epoch, start offset, [(first, last, state, count)])."""
    r = state_call(bootstrap, READ, 0, group, tid, w.i32(partition) + w.i32(leader_epoch))
    error = r.i16()
    r.compact_string()
    epoch, start = r.i32(), r.i64()
    batches = r.array(lambda: (r.i64(), r.i64(), r.i8(), r.i16(), r.tags())[:4])
    return error, epoch, start, batches


def summary(bootstrap, group, tid, partition) -> tuple[int, int, int, int, int]:
    """ReadShareGroupStateSummary v1: (error, state epoch, leader epoch, start offset, delivery-complete count)."""
    r = state_call(bootstrap, SUMMARY, 1, group, tid, w.i32(partition) + w.i32(0))
    error = r.i16()
    r.compact_string()
    return error, r.i32(), r.i32(), r.i64(), r.i32()


def delete(bootstrap, group, tid, partition) -> int:
    return state_call(bootstrap, DELETE, 0, group, tid, w.i32(partition)).i16()


def coordinated(bootstrap: str, group: str, tid: bytes, partition: int) -> None:
    """Waits until the share coordinator of (group, topic, partition) answers (it creates
    and loads __share_group_state on the first lookup)."""
    key = f"{group}:{base64.urlsafe_b64encode(tid).rstrip(b'=').decode()}:{partition}"
    wait_for("the share coordinator", lambda: find_share_coordinator(bootstrap, key)[0] == 0, 60)
    wait_for("the state partition loaded", lambda: summary(bootstrap, group, tid, partition)[0] == 0, 60)


def test_share_group_state_is_kept_as_kafka_keeps_it_across_kill9(broker_factory, topic_name):
    """Initialize, write, read, summarize and delete a share-partition's state through the
    coordinator's own APIs: Kafka 4.4's rules (the higher delivery count then state wins,
    the start offset never goes back, older epochs fenced, writes to an uninitialized
    partition refused) give the same answers on both targets, and after kill -9 the
    restarted broker answers from its log exactly as before."""
    from clients import admin_create_topic
    from test_groups import topic_id_of

    b = share_broker(broker_factory)
    admin_create_topic(b.bootstrap, topic_name, 2)
    tid = topic_id_of(b.bootstrap, topic_name)
    g = "state-readers"
    coordinated(b.bootstrap, g, tid, 0)
    assert write(b.bootstrap, g, tid, 0, 0, 0, 0, []) == INVALID_REQUEST, "no state yet"
    assert read(b.bootstrap, g, tid, 0, 0)[0] == INVALID_REQUEST
    assert summary(b.bootstrap, g, tid, 0) == (0, 0, 0, -1, -1), "a key never seen"
    assert initialize(b.bootstrap, g, tid, 0, 2, 10) == 0
    assert initialize(b.bootstrap, g, tid, 0, 1, 10) == FENCED_STATE_EPOCH
    # A new leader reads (its epoch is kept), then writes its changes.
    assert read(b.bootstrap, g, tid, 0, 4) == (0, 2, 10, [])
    assert write(b.bootstrap, g, tid, 0, 2, 4, 10, [(10, 14, 2, 1), (15, 19, 0, 1)], dcc=5) == 0
    assert write(b.bootstrap, g, tid, 0, 2, 4, 12, [(15, 15, 4, 5), (16, 16, 2, 0)]) == 0
    assert write(b.bootstrap, g, tid, 0, 2, 3, 12, []) == FENCED_LEADER_EPOCH
    assert write(b.bootstrap, g, tid, 0, 1, 4, 12, []) == FENCED_STATE_EPOCH
    assert write(b.bootstrap, g, tid, 0, 2, 4, 11, [(20, 21, 0, 2)]) == 0, "an older start offset: kept at 12"
    want = (0, 2, 12, [(12, 14, 2, 1), (15, 15, 4, 5), (16, 19, 0, 1), (20, 21, 0, 2)])
    assert read(b.bootstrap, g, tid, 0, 4) == want
    assert summary(b.bootstrap, g, tid, 0)[:4] == (0, 2, 4, 12)
    assert read(b.bootstrap, g, tid, 0, 3)[0] == FENCED_LEADER_EPOCH
    assert initialize(b.bootstrap, g, tid, 1, 0, 0) == 0
    assert delete(b.bootstrap, g, tid, 1) == 0
    assert read(b.bootstrap, g, tid, 1, 0)[0] == INVALID_REQUEST, "deleted"

    b.restart(kill=True)
    coordinated(b.bootstrap, g, tid, 0)
    assert read(b.bootstrap, g, tid, 0, 4) == want, "after kill -9"
    assert read(b.bootstrap, g, tid, 0, 3)[0] == FENCED_LEADER_EPOCH
    assert read(b.bootstrap, g, tid, 1, 0)[0] == INVALID_REQUEST
