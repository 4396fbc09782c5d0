"""The share coordinator (KIP-932) as brokers reach it, on the wire, against shardlog and
Apache Kafka 4.4 alike: FindCoordinator's SHARE key type (2, from v6) names the broker
leading the `__share_group_state` partition of `group:topic_id:partition`, creating the
topic on the first lookup (COORDINATOR_NOT_AVAILABLE meanwhile); before v6, or with a key
that is not `group:topic_id:partition`, the answer is INVALID_REQUEST."""
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
