"""Requests over partitions of both shards (`--shards 2`): what they cost in cross-shard
messages, and that they are answered whole.

The broker counts the messages each shard's router sends to other shards
(`shardlog_shard_cross_shard_messages_total` on the admin listener's /metrics); this suite
reads what a request adds. A topic of 6 partitions is spread over both shards (the controller places
each partition on the least-loaded shard), so whichever shard accepted the connection,
a request naming every partition must reach the other shard: exactly one message, where
routing each partition alone would send one per remote partition (3 or more).
"""

from __future__ import annotations

import threading
import time

import pytest

import kafkawire as kw
from clients import cli_create_topic, now_ms
from admin_api import scrape
from conftest import is_kafka, skip_unless_shardlog

PARTITIONS = 6
LIST_OFFSETS = 2


@pytest.fixture
def two_shards(broker_factory):
    skip_unless_shardlog("counts shardlog's cross-shard messages")
    b = broker_factory(shards=2)
    stamp = now_ms()
    topics = [f"xs-a-{stamp}", f"xs-b-{stamp}"]
    for t in topics:
        cli_create_topic(b.bootstrap, t, PARTITIONS)
    return b, topics


def messages_logged(broker) -> int:
    return int(scrape(broker.admin_url).total("shardlog_shard_cross_shard_messages_total"))


def produce_v8(correlation_id: int, topics: list[str], value: bytes) -> bytes:
    """Produce v8 with one batch of one record for every partition of every topic."""
    body = kw.string(None) + kw.i16(-1) + kw.i32(30000) + kw.i32(len(topics))
    for t in topics:
        body += kw.string(t) + kw.i32(PARTITIONS)
        for p in range(PARTITIONS):
            records = kw.record_batch([(None, value + b"-%d" % p, [])], now_ms())
            body += kw.i32(p) + kw.i32(len(records)) + records
    return kw.request(kw.PRODUCE, 8, correlation_id, body)


def list_offsets_v1(correlation_id: int, topics: list[str], timestamp: int) -> bytes:
    body = kw.i32(-1) + kw.i32(len(topics))
    for t in topics:
        body += kw.string(t) + kw.i32(PARTITIONS)
        for p in range(PARTITIONS):
            body += kw.i32(p) + kw.i64(timestamp)
    return kw.request(LIST_OFFSETS, 1, correlation_id, body)


def parse_list_offsets_v1(resp: bytes) -> dict[tuple[str, int], tuple[int, int]]:
    r = kw.Reader(resp)
    r.i32()
    out = {}
    for _ in range(r.i32()):
        name = r.string()
        for _ in range(r.i32()):
            p, err, _ts, offset = r.i32(), r.i16(), r.i64(), r.i64()
            out[(name, p)] = (err, offset)
    return out


def test_requests_over_both_shards_send_one_message_each(two_shards):
    broker, topics = two_shards
    every = {(t, p) for t in topics for p in range(PARTITIONS)}
    s = kw.connect(broker.bootstrap)
    try:
        # Produce to two topics (12 partitions): every partition acknowledged, one message.
        before = messages_logged(broker)
        _, acked = kw.parse_produce_v8(kw.roundtrip(s, produce_v8(1, topics, b"one")))
        assert set(acked) == every
        assert all(d["error_code"] == 0 and d["base_offset"] == 0 for d in acked.values()), acked
        assert messages_logged(broker) - before == 1

        _, acked = kw.parse_produce_v8(kw.roundtrip(s, produce_v8(2, topics, b"two")))
        assert all(d["error_code"] == 0 and d["base_offset"] == 1 for d in acked.values()), acked

        # Fetch every partition of one topic (one read wave): one message.
        before = messages_logged(broker)
        parts = [(p, 0, 1 << 20) for p in range(PARTITIONS)]
        _, fetched = kw.parse_fetch_v4(kw.roundtrip(s, kw.fetch_v4_request(3, topics[0], parts, 50 << 20)))
        assert [d["partition"] for d in fetched] == list(range(PARTITIONS)), "request order kept"
        for d in fetched:
            assert (d["error_code"], d["high_watermark"]) == (0, 2)
            assert [(b, last) for b, last, _ in kw.batches_in(d["records"])] == [(0, 0), (1, 1)]
        assert messages_logged(broker) - before == 1

        # ListOffsets latest over both topics: one message.
        before = messages_logged(broker)
        offsets = parse_list_offsets_v1(kw.roundtrip(s, list_offsets_v1(4, topics, -1)))
        assert offsets == {tp: (0, 2) for tp in every}
        assert messages_logged(broker) - before == 1
    finally:
        s.close()


def test_a_long_poll_over_many_partitions_is_woken_by_a_produce_to_any_one(two_shards):
    broker, topics = two_shards
    topic = topics[1]
    # Every partition of the topic, waiting at its end (offset 0, empty), for up to 60 s.
    parts = [(p, 0, 1 << 20) for p in range(PARTITIONS)]
    poll = kw.fetch_v4_request(7, topic, parts, 50 << 20, min_bytes=1, max_wait_ms=60_000)
    waiter = kw.connect(broker.bootstrap, timeout_s=120)
    result: dict = {}

    def wait():
        result["fetched"] = kw.parse_fetch_v4(kw.roundtrip(waiter, poll))[1]

    t = threading.Thread(target=wait)
    try:
        before = messages_logged(broker)
        t.start()
        # The poll reads (one message to the other shard), finds nothing and registers
        # its watch (one more message); produce only then, so the wake is what answers.
        deadline = time.monotonic() + 60
        while messages_logged(broker) - before < 2:
            assert time.monotonic() < deadline, "the long poll never started waiting"
            time.sleep(0.05)
        # Produce to one partition only, on another connection.
        producer = kw.connect(broker.bootstrap)
        try:
            target = PARTITIONS - 2
            records = kw.record_batch([(None, b"wake", [])], now_ms())
            _, acked = kw.parse_produce_v8(kw.roundtrip(producer, kw.produce_v8_request(8, topic, target, records)))
            assert acked[(topic, target)]["error_code"] == 0
        finally:
            producer.close()
        t.join(timeout=90)
        assert not t.is_alive(), "the long poll never answered"
        fetched = {d["partition"]: d for d in result["fetched"]}
        # Woken by that produce (a poll that missed it would answer empty at its deadline).
        assert [b for b, _, _ in kw.batches_in(fetched[target]["records"])] == [0]
        assert all(d["error_code"] == 0 for d in fetched.values())
    finally:
        waiter.close()


def test_produce_on_any_shard_right_after_create_topics(broker_factory):
    """CreateTopics answers once the shard that took the request has the topic; the next
    produce may come on a connection of the other shard, before that shard has applied
    the new metadata. It must wait for it (the controller has committed the topic), not
    answer UNKNOWN_TOPIC_OR_PARTITION: CI once saw exactly that, with flush=always (where
    opening a partition syncs its files, so a shard takes longer to apply a topic).

    Several connections are opened first so both shards hold some; each new topic is
    then produced to on all of them at once, the moment CreateTopics returns."""
    skip_unless_shardlog("Kafka answers NOT_LEADER_OR_FOLLOWER until its broker has applied the "
                         "new topic (clients retry); shardlog's guarantee is stronger")
    from confluent_kafka.admin import NewTopic

    from clients import admin

    b = broker_factory(shards=2, flush="always")
    a = admin(b.bootstrap)
    conns = [kw.connect(b.bootstrap, timeout_s=60) for _ in range(6)]
    try:
        stamp = now_ms()
        for i in range(12):
            topic = f"xs-new-{stamp}-{i}"
            a.create_topics([NewTopic(topic, 4, 1)], operation_timeout=30)[topic].result(timeout=60)
            records = kw.record_batch([(None, b"v", [])], now_ms())
            for n, s in enumerate(conns):
                s.sendall(kw.produce_request(8, n, topic, n % 4, records))
            for n, s in enumerate(conns):
                corr, res = kw.parse_produce(8, kw.recv_frame(s))
                assert corr == n
                assert res[(topic, n % 4)]["error_code"] == 0, (topic, n, res)
    finally:
        for s in conns:
            s.close()
    b.assert_alive()


def _metadata_all_topics_v1(sock, corr: int) -> set[str]:
    """Metadata v1 for every topic (null list) on an open connection: the topic names."""
    sock.sendall(kw.request(3, 1, corr, kw.i32(-1)))
    r = kw.Reader(kw.recv_frame(sock))
    assert r.i32() == corr
    for _ in range(r.i32()):  # brokers
        r.i32(), r.string(), r.i32(), r.string()
    r.i32()  # controller id
    names = set()
    for _ in range(r.i32()):
        r.i16()
        names.add(r.string())
        r.take(">b")  # is_internal
        for _ in range(r.i32()):
            r.i16(), r.i32(), r.i32()
            for _ in range(r.i32()):
                r.i32()
            for _ in range(r.i32()):
                r.i32()
    return names


def test_metadata_of_all_topics_right_after_create_topics_lists_it_on_every_shard(broker_factory):
    """A Metadata for all topics right after CreateTopics returned (on another
    connection, so maybe another shard still applying it) lists the new topic: the
    shard catches up with what the controller committed first. CI once saw an empty
    list from a shard still opening `__consumer_offsets`."""
    from confluent_kafka.admin import NewTopic

    from clients import admin

    b = broker_factory(shards=2, flush="always")
    a = admin(b.bootstrap)
    conns = [kw.connect(b.bootstrap, timeout_s=60) for _ in range(6)]
    try:
        stamp = now_ms()
        for i in range(12):
            topic = f"xs-md-{stamp}-{i}"
            a.create_topics([NewTopic(topic, 4, 1)], operation_timeout=30)[topic].result(timeout=60)
            for n, s in enumerate(conns):
                names = _metadata_all_topics_v1(s, n)
                # shardlog creates __consumer_offsets at start-up; Kafka at the first group.
                assert topic in names and ("__consumer_offsets" in names or is_kafka()), (topic, n, sorted(names))
    finally:
        for s in conns:
            s.close()
