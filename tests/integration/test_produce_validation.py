"""Produce validation as Kafka 4.1's LogValidator: hand-built Produce requests whose
batches are framed right (valid CRC) but whose records are not, a codec the request
version does not allow, a client writing to an internal topic, a decompression bomb and
timestamps out of range. Each is refused with Kafka's error code and nothing is stored.
"""

from __future__ import annotations

import random
import time
import zlib

import pytest

from clients import admin_create_topic, confluent_consumer, consume_confluent, watermarks
from conftest import skip_unless_shardlog
from kafkawire import (GZIP, ZSTD, batch, connect, gzip_compress, parse_produce, produce_request,
                       record, record_batch, recv_frame, uvarint, varint, zstd_stored_frame)

NONE = 0
MESSAGE_TOO_LARGE = 10
INVALID_TOPIC_EXCEPTION = 17
INVALID_TIMESTAMP = 32
UNSUPPORTED_COMPRESSION_TYPE = 76
INVALID_RECORD = 87

NOW_MS = int(time.time() * 1000)


@pytest.fixture
def wire_topic(bootstrap):
    name = "pv-" + str(random.randrange(1 << 30))
    admin_create_topic(bootstrap, name, 1)
    return name


def _produce(bootstrap: str, topic: str, records: bytes, version: int = 8, partition: int = 0) -> dict:
    with connect(bootstrap, timeout_s=60) as s:
        s.sendall(produce_request(version, 7, topic, partition, records))
        corr, res = parse_produce(version, recv_frame(s))
    assert corr == 7
    return res[(topic, partition)]


def _good(ts: int = NOW_MS) -> bytes:
    return record_batch([(b"k", b"good", [("h", b"1")])], ts)


def _assert_only_good_stored(bootstrap: str, topic: str):
    """After the refusals, one good batch lands at offset 0 and is all there is."""
    res = _produce(bootstrap, topic, _good())
    assert res["error_code"] == NONE and res["base_offset"] == 0, res
    assert watermarks(bootstrap, topic, 1)[0] == (0, 1), "a refused batch was stored"
    consumed = consume_confluent(bootstrap, topic, 1)[0]
    assert [(c.offset, c.value) for c in consumed] == [(0, b"good")]


def test_record_count_mismatch_is_invalid_record(bootstrap, wire_topic):
    """Kafka's batch iterator: fewer records than recordsCount ("premature EOF") or more
    ("records still remaining") is an InvalidRecordException: INVALID_RECORD."""
    recs = [record(i, b"k%d" % i, b"v") for i in range(3)]
    section = b"".join(recs)
    cases = {
        "count 4, 3 records": batch(section, count=4, last_offset_delta=3, base_ts=NOW_MS),
        "count 2, 3 records": batch(section, count=2, last_offset_delta=1, base_ts=NOW_MS),
        "count 3, last record cut": batch(section[:-2], count=3, last_offset_delta=2, base_ts=NOW_MS),
        "record length longer than the record": batch(
            recs[0] + recs[1] + b"\x7f" + recs[2][1:], count=3, last_offset_delta=2, base_ts=NOW_MS),
        "gzip, count 4, 3 records": batch(gzip_compress(section), count=4, last_offset_delta=3,
                                          base_ts=NOW_MS, attributes=GZIP),
    }
    for name, b in cases.items():
        res = _produce(bootstrap, wire_topic, b)
        assert res["error_code"] == INVALID_RECORD, (name, res)
    _assert_only_good_stored(bootstrap, wire_topic)


def test_bad_offset_deltas_are_invalid_record(bootstrap, wire_topic):
    """A producer's batch holds offset deltas 0..count-1. Kafka does not check them in an
    uncompressed batch and rewrites a compressed one; shardlog stores batches as sent, so
    it refuses them (INVALID_RECORD, Kafka's code for a malformed batch)."""
    skip_unless_shardlog("Kafka accepts (uncompressed) or rewrites (compressed) wrong inner offsets")
    cases = {
        "gap": [0, 2],
        "reversed": [1, 0],
        "duplicate": [0, 0],
        "negative": [-1, 1],
    }
    for name, deltas in cases.items():
        section = b"".join(record(d, b"k", b"v") for d in deltas)
        for attributes, body in ((NONE, section), (GZIP, gzip_compress(section)), (ZSTD, zstd_stored_frame(section))):
            b = batch(body, count=2, last_offset_delta=1, base_ts=NOW_MS, attributes=attributes)
            res = _produce(bootstrap, wire_topic, b)
            assert res["error_code"] == INVALID_RECORD, (name, attributes, res)
    _assert_only_good_stored(bootstrap, wire_topic)


def test_zstd_needs_produce_v7(bootstrap, wire_topic):
    """ProduceRequest.validateRecords: zstd below Produce v7 is UNSUPPORTED_COMPRESSION_TYPE;
    the same batch on v7 is stored and reads back."""
    section = b"".join(record(i, b"k", b"zstd-%d" % i) for i in range(3))
    zstd_batch = batch(zstd_stored_frame(section), count=3, last_offset_delta=2, base_ts=NOW_MS, attributes=ZSTD)
    for version in (3, 5, 6):
        res = _produce(bootstrap, wire_topic, zstd_batch, version=version)
        assert res["error_code"] == UNSUPPORTED_COMPRESSION_TYPE, (version, res)
    assert watermarks(bootstrap, wire_topic, 1)[0] == (0, 0), "a zstd batch on Produce < v7 was stored"
    # gzip is fine on v3.
    gz = batch(gzip_compress(section), count=3, last_offset_delta=2, base_ts=NOW_MS, attributes=GZIP)
    res = _produce(bootstrap, wire_topic, gz, version=3)
    assert res["error_code"] == NONE and res["base_offset"] == 0, res
    res = _produce(bootstrap, wire_topic, zstd_batch, version=7)
    assert res["error_code"] == NONE and res["base_offset"] == 3, res
    consumed = consume_confluent(bootstrap, wire_topic, 1)[0]
    assert [c.value for c in consumed] == [b"zstd-0", b"zstd-1", b"zstd-2"] * 2


def test_produce_to_consumer_offsets_is_invalid_topic(bootstrap, wire_topic):
    """ReplicaManager.appendToLocalLog with internalTopicsAllowed=false: a client's Produce
    to __consumer_offsets is INVALID_TOPIC_EXCEPTION and nothing is appended; the group
    coordinator's own appends to it keep working."""
    before = watermarks(bootstrap, "__consumer_offsets", 50)
    for partition in (0, 7, 49):
        res = _produce(bootstrap, "__consumer_offsets", _good(), partition=partition)
        assert res["error_code"] == INVALID_TOPIC_EXCEPTION, (partition, res)
    assert watermarks(bootstrap, "__consumer_offsets", 50) == before, "a client record reached __consumer_offsets"

    # Offset commits still go through the coordinator (which appends to __consumer_offsets).
    from confluent_kafka import TopicPartition
    group = "pv-group-" + str(random.randrange(1 << 30))
    c = confluent_consumer(bootstrap, **{"group.id": group})
    try:
        # A synchronous commit reports a partition's error in its result, not by raising;
        # a retriable one (the offsets write timed out under load) is retried, as the Java
        # consumer's commitSync does, and any other fails the test with its cause.
        deadline = time.monotonic() + 60
        while True:
            (res,) = c.commit(offsets=[TopicPartition(wire_topic, 0, 42)], asynchronous=False)
            if res.error is None:
                break
            assert res.error.retriable() and time.monotonic() < deadline, res.error
            time.sleep(0.2)
        [tp] = c.committed([TopicPartition(wire_topic, 0)], timeout=30)
        assert tp.offset == 42
    finally:
        c.close()
    after = watermarks(bootstrap, "__consumer_offsets", 50)
    assert sum(h for _, h in after.values()) > sum(h for _, h in before.values()), "the commit appended nothing"


def _gzip_bomb(value_bytes: int) -> bytes:
    """A gzip records section holding one valid record whose value is `value_bytes` zeros,
    compressed as a stream (the test never holds the expanded bytes)."""
    body_head = b"\x00" + varint(0) + varint(0) + varint(-1)  # attributes, ts delta, offset delta, null key
    body_len = len(body_head) + len(varint(value_bytes)) + value_bytes + 1  # + header count
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    out = [c.compress(varint(body_len) + body_head + varint(value_bytes))]
    chunk = bytes(1 << 20)
    left = value_bytes
    while left:
        n = min(left, len(chunk))
        out.append(c.compress(chunk[:n]))
        left -= n
    out.append(c.compress(varint(0)))
    out.append(c.flush())
    return b"".join(out)


def _vm_hwm_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM")


def test_decompression_bomb_is_refused_without_expanding_it(broker_factory):
    """A 900 KiB gzip batch expanding to 1 GiB is refused with MESSAGE_TOO_LARGE (the Java
    producer splits a batch on that code) and the broker never holds the expanded bytes:
    its peak RSS stays far below 1 GiB. An 8 MiB expansion of the same kind is accepted."""
    skip_unless_shardlog("Kafka streams decompression and sets no expansion limit")
    b = broker_factory(shards=1)
    admin_create_topic(b.bootstrap, "bomb", 1)
    bomb = _gzip_bomb(1 << 30)
    assert len(bomb) < 1_048_588 - 100, len(bomb)
    res = _produce(b.bootstrap, "bomb", batch(bomb, count=1, last_offset_delta=0, base_ts=NOW_MS, attributes=GZIP))
    assert res["error_code"] == MESSAGE_TOO_LARGE, res
    b.assert_alive()
    peak_mib = _vm_hwm_kib(b.proc.pid) // 1024
    print(f"broker VmHWM after the 1 GiB bomb: {peak_mib} MiB")
    assert peak_mib < 768, f"broker peak RSS {peak_mib} MiB: the bomb was expanded"
    assert watermarks(b.bootstrap, "bomb", 1)[0] == (0, 0)

    ok = _gzip_bomb(8 << 20)
    res = _produce(b.bootstrap, "bomb", batch(ok, count=1, last_offset_delta=0, base_ts=NOW_MS, attributes=GZIP))
    assert res["error_code"] == NONE and res["base_offset"] == 0, res
    assert watermarks(b.bootstrap, "bomb", 1)[0] == (0, 1)


def test_timestamps_outside_the_window_are_invalid_timestamp(bootstrap, wire_topic):
    """message.timestamp.after.max.ms (Kafka 4.x default 1 h): a record stamped 2 h ahead is
    INVALID_TIMESTAMP; before.max.ms defaults to unlimited, so an old timestamp is fine, and
    a topic with before.max.ms=1 day refuses a record from 2 days ago."""
    hour = 3_600_000
    res = _produce(bootstrap, wire_topic, _good(NOW_MS + 2 * hour))
    assert res["error_code"] == INVALID_TIMESTAMP, res
    # The second record (timestamp delta) is the one out of range.
    section = record(0, b"k", b"v") + record(1, b"k", b"v", ts_delta=3 * hour)
    res = _produce(bootstrap, wire_topic, batch(section, count=2, last_offset_delta=1, base_ts=NOW_MS))
    assert res["error_code"] == INVALID_TIMESTAMP, res
    assert watermarks(bootstrap, wire_topic, 1)[0] == (0, 0)
    res = _produce(bootstrap, wire_topic, _good(1_000_000_000_000))  # 2001
    assert res["error_code"] == NONE and res["base_offset"] == 0, res

    strict = wire_topic + "-strict"
    admin_create_topic(bootstrap, strict, 1, {"message.timestamp.before.max.ms": str(24 * hour)})
    res = _produce(bootstrap, strict, _good(NOW_MS - 48 * hour))
    assert res["error_code"] == INVALID_TIMESTAMP, res
    res = _produce(bootstrap, strict, _good(NOW_MS - hour))
    assert res["error_code"] == NONE and res["base_offset"] == 0, res
