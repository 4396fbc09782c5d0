"""OffsetForLeaderEpoch (API 23), as Kafka 4.1 answers it: for each partition, the largest
leader epoch at or below the one asked that the log holds and the offset where it ended
(the log end offset for the current epoch). Consumers call it to validate their position
after a leader change (KIP-320); clients skip that check when the API is not advertised.
Hand-built v3 requests (the last non-flexible version). Runs against Kafka 4.1 too."""
from __future__ import annotations

import random

import kafkawire as kw
from clients import Rec, admin_create_topic, produce_confluent

OFFSET_FOR_LEADER_EPOCH = 23
NONE, UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_LEADER_EPOCH, FENCED_LEADER_EPOCH = 0, 3, 75, 74


def ask(bootstrap: str, parts: list[tuple[str, int, int, int]]) -> dict[tuple[str, int], tuple[int, int, int]]:
    """parts: (topic, partition, current_leader_epoch, leader_epoch) -> (error, epoch, end offset)."""
    by_topic: dict[str, list[tuple[int, int, int]]] = {}
    for t, p, current, epoch in parts:
        by_topic.setdefault(t, []).append((p, current, epoch))
    body = kw.i32(-1) + kw.i32(len(by_topic))  # replica_id -1: a consumer
    for t, ps in by_topic.items():
        body += kw.string(t) + kw.i32(len(ps))
        for p, current, epoch in ps:
            body += kw.i32(p) + kw.i32(current) + kw.i32(epoch)
    with kw.connect(bootstrap) as s:
        s.sendall(kw.request(OFFSET_FOR_LEADER_EPOCH, 3, 9, body))
        r = kw.Reader(kw.recv_frame(s))
    assert r.i32() == 9
    r.i32()  # throttle
    out = {}
    for _ in range(r.i32()):
        t = r.string()
        for _ in range(r.i32()):
            err, p, epoch, end = r.i16(), r.i32(), r.i32(), r.i64()
            out[(t, p)] = (err, epoch, end)
    return out


def test_current_epoch_ends_at_the_log_end_and_errors_are_kafkas(bootstrap):
    topic = "ofle-" + str(random.randrange(1 << 30))
    admin_create_topic(bootstrap, topic, 2)
    produce_confluent(bootstrap, topic, [Rec(b"k", b"v%d" % i, (), None) for i in range(5)], partition=0)
    # Several partitions and topics in one request.
    got = ask(bootstrap, [(topic, 0, -1, 0), (topic, 1, -1, 0), ("no-such-topic-ofle", 0, -1, 0)])
    assert got == {(topic, 0): (NONE, 0, 5), (topic, 1): (NONE, 0, 0),
                   ("no-such-topic-ofle", 0): (UNKNOWN_TOPIC_OR_PARTITION, -1, -1)}, got

    def one(*a):
        return ask(bootstrap, [a])[(a[0], a[1])]

    assert one(topic, 0, -1, 0) == (NONE, 0, 5), "epoch 0 is current: it ends at the log end"
    assert one(topic, 1, -1, 0) == (NONE, 0, 0), "an empty partition's current epoch ends at 0"
    assert one(topic, 0, -1, 1) == (NONE, -1, -1), "a newer epoch than the log's is unknown"
    assert one(topic, 0, 0, 0) == (NONE, 0, 5), "current_leader_epoch equal to the partition's"
    assert one(topic, 0, 1, 0)[0] == UNKNOWN_LEADER_EPOCH, "a client ahead of the broker"
    assert one(topic, 9, -1, 0)[0] == UNKNOWN_TOPIC_OR_PARTITION
