"""Transactional APIs with bad input, on the wire (issue 23, "Bad input"): an unknown
transactional id, a producer id that is not the id's, a stale epoch, a transaction in the
wrong state, a timeout out of range, a marker for a partition the broker does not have.
Each gets Kafka 4.4's error code (the same assertions run against Kafka), and nothing
already acknowledged is touched.
"""
from __future__ import annotations

import time
import uuid

import kafkawire as w
from confluent_kafka import Producer

from clients import admin_create_topic, consume_confluent, kafka_tool, make_records, produce_confluent, compare

# COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR (Kafka, while the new
# __transaction_state partition loads), CONCURRENT_TRANSACTIONS: retried, as clients do.
RETRIABLE = (14, 15, 16, 51)
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TRANSACTION_TIMEOUT = 50
PRODUCER_FENCED = 90
UNKNOWN_TOPIC_OR_PARTITION = 3


def retried(call):
    """Calls `call` until its error code is not a retriable coordinator error."""
    for _ in range(300):
        out = call()
        if out[0] not in RETRIABLE:
            return out
        time.sleep(0.1)
    raise AssertionError(f"still retriable after 30 s: {out}")


def find_coordinator(bootstrap: str, txn_id: str) -> None:
    def call():
        r = w.flexible_roundtrip(bootstrap, 10, 4, w.i8(1) + w.compact_array([w.compact_string(txn_id)]))
        r.i32()
        (c,) = r.array(lambda: (r.compact_string(), r.i32(), r.compact_string(), r.i32(), r.i16(), r.compact_string(), r.tags()))
        return (c[4],)
    assert retried(call) == (0,)


def init_producer_id(bootstrap: str, txn_id: str, timeout_ms: int = 60_000) -> tuple[int, int, int]:
    body = w.compact_nullable_string(txn_id) + w.i32(timeout_ms) + w.i64(-1) + w.i16(-1)

    def call():
        r = w.flexible_roundtrip(bootstrap, 22, 4, body)
        r.i32()
        return r.i16(), r.i64(), r.i16()
    return retried(call)


def end_txn(bootstrap: str, txn_id: str, pid: int, epoch: int, commit: bool) -> int:
    body = w.compact_string(txn_id) + w.i64(pid) + w.i16(epoch) + w.i8(1 if commit else 0)

    def call():
        r = w.flexible_roundtrip(bootstrap, 26, 3, body)
        r.i32()
        return (r.i16(),)
    return retried(call)[0]


def add_offsets_to_txn(bootstrap: str, txn_id: str, pid: int, epoch: int, group: str) -> int:
    body = w.compact_string(txn_id) + w.i64(pid) + w.i16(epoch) + w.compact_string(group)

    def call():
        r = w.flexible_roundtrip(bootstrap, 25, 3, body)
        r.i32()
        return (r.i16(),)
    return retried(call)[0]


def add_partitions_to_txn(bootstrap: str, txn_id: str, pid: int, epoch: int, topic: str) -> list[int]:
    topics = w.compact_array([w.compact_string(topic) + w.compact_array([w.i32(0)]) + w.uvarint(0)])
    body = w.compact_string(txn_id) + w.i64(pid) + w.i16(epoch) + topics

    def call():
        r = w.flexible_roundtrip(bootstrap, 24, 3, body)
        r.i32()
        results = r.array(lambda: (r.compact_string(), r.array(lambda: (r.i32(), r.i16(), r.tags())), r.tags()))
        codes = [e for _, parts, _ in results for _, e, _ in parts]
        return (codes[0], codes)
    return retried(call)[1]


def write_txn_markers(bootstrap: str, topic: str, pid: int, epoch: int) -> list[int]:
    topics = w.compact_array([w.compact_string(topic) + w.compact_array([w.i32(0)]) + w.uvarint(0)])
    marker = w.i64(pid) + w.i16(epoch) + w.i8(0) + topics + w.i32(0) + w.uvarint(0)
    r = w.flexible_roundtrip(bootstrap, 27, 1, w.compact_array([marker]))
    markers = r.array(lambda: (r.i64(), r.array(lambda: (r.compact_string(), r.array(lambda: (r.i32(), r.i16(), r.tags())), r.tags())), r.tags()))
    return [e for _, topics, _ in markers for _, parts, _ in topics for _, e, _ in parts]


def test_transactional_apis_answer_bad_input_with_kafkas_codes(bootstrap):
    topic = f"txn-bad-{uuid.uuid4().hex[:8]}"
    admin_create_topic(bootstrap, topic, 1)
    kept = produce_confluent(bootstrap, topic, make_records(200, seed=11))
    txn_id = f"txn-bad-{uuid.uuid4().hex[:8]}"
    find_coordinator(bootstrap, txn_id)

    # A timeout above transaction.max.timeout.ms (15 min).
    err, _, _ = init_producer_id(bootstrap, txn_id, timeout_ms=15 * 60_000 + 1)
    assert err == INVALID_TRANSACTION_TIMEOUT
    # An id that has never been initialised.
    unknown = f"txn-never-{uuid.uuid4().hex[:8]}"
    find_coordinator(bootstrap, unknown)
    assert end_txn(bootstrap, unknown, 1234, 0, True) == INVALID_PRODUCER_ID_MAPPING
    assert add_offsets_to_txn(bootstrap, unknown, 1234, 0, "g") == INVALID_PRODUCER_ID_MAPPING
    assert add_partitions_to_txn(bootstrap, unknown, 1234, 0, topic) == [INVALID_PRODUCER_ID_MAPPING]

    err, pid, epoch = init_producer_id(bootstrap, txn_id)
    assert err == 0 and pid >= 0
    # A producer id that is not this id's.
    assert end_txn(bootstrap, txn_id, pid + 1000, epoch, True) == INVALID_PRODUCER_ID_MAPPING
    assert add_partitions_to_txn(bootstrap, txn_id, pid + 1000, epoch, topic) == [INVALID_PRODUCER_ID_MAPPING]
    # Committing with no transaction open: the wrong state.
    assert end_txn(bootstrap, txn_id, pid, epoch, True) == INVALID_TXN_STATE
    # A second InitProducerId fences the first epoch: the old one is a zombie.
    err, pid2, epoch2 = init_producer_id(bootstrap, txn_id)
    assert err == 0 and (pid2, epoch2) == (pid, epoch + 1)
    assert add_partitions_to_txn(bootstrap, txn_id, pid, epoch, topic) == [PRODUCER_FENCED]
    assert end_txn(bootstrap, txn_id, pid, epoch, False) == PRODUCER_FENCED
    assert add_offsets_to_txn(bootstrap, txn_id, pid, epoch, "g") == PRODUCER_FENCED
    # A marker for a partition the broker does not have.
    assert write_txn_markers(bootstrap, f"no-such-topic-{uuid.uuid4().hex[:8]}", pid2, epoch2) == [UNKNOWN_TOPIC_OR_PARTITION]
    # The current epoch still works: a transaction on the topic, aborted.
    assert add_partitions_to_txn(bootstrap, txn_id, pid2, epoch2, topic) == [0]
    assert end_txn(bootstrap, txn_id, pid2, epoch2, False) == 0
    # Nothing acknowledged was touched.
    compare(kept, consume_confluent(bootstrap, topic, 1))


INVALID_PRODUCER_EPOCH = 47


def write_txn_markers_v2(bootstrap: str, topic: str, pid: int, epoch: int, transaction_version: int) -> list[int]:
    """One abort marker for partition 0, WriteTxnMarkers v2 (KIP-1228's TransactionVersion)."""
    topics = w.compact_array([w.compact_string(topic) + w.compact_array([w.i32(0)]) + w.uvarint(0)])
    marker = w.i64(pid) + w.i16(epoch) + w.i8(0) + topics + w.i32(0) + w.i8(transaction_version) + w.uvarint(0)
    r = w.flexible_roundtrip(bootstrap, 27, 2, w.compact_array([marker]))
    markers = r.array(lambda: (r.i64(), r.array(lambda: (r.compact_string(), r.array(lambda: (r.i32(), r.i16(), r.tags())), r.tags())), r.tags()))
    return [e for _, topics, _ in markers for _, parts, _ in topics for _, e, _ in parts]


def test_write_txn_markers_v2_checks_the_epoch_by_transaction_version(bootstrap):
    """KIP-1228: a transaction-version-2 coordinator bumps the producer's epoch before it
    writes a marker, so a TV2 marker at the epoch of a transaction still open is stale
    (INVALID_PRODUCER_EPOCH); the bumped one is written; its retry (same epoch, nothing
    open any more) is accepted (KAFKA-19999); older epochs are refused whatever the
    version. The same codes from Kafka 4.4."""
    topic = f"txn-tv2-{uuid.uuid4().hex[:8]}"
    admin_create_topic(bootstrap, topic, 1)
    # A transaction left open on partition 0; it times out on its coordinator afterwards.
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"txn-tv2-{uuid.uuid4().hex[:8]}",
                  "transaction.timeout.ms": 5000, "log_level": 3})
    p.init_transactions(60)
    p.begin_transaction()
    p.produce(topic, value=b"open", partition=0)
    assert p.flush(60) == 0
    r = kafka_tool("org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server", bootstrap,
                   "describe-producers", "--topic", topic, "--partition", "0")
    assert r.returncode == 0, r.stderr[-2000:]
    header, row = r.stdout.splitlines()[0].split(), r.stdout.splitlines()[1].split()
    pid, epoch = int(row[header.index("ProducerId")]), int(row[header.index("ProducerEpoch")])

    assert write_txn_markers_v2(bootstrap, topic, pid, epoch, 2) == [INVALID_PRODUCER_EPOCH], "TV2 needs the bumped epoch"
    assert write_txn_markers_v2(bootstrap, topic, pid, epoch + 1, 2) == [0]
    assert write_txn_markers_v2(bootstrap, topic, pid, epoch + 1, 2) == [0], "the retry of a written marker"
    assert write_txn_markers_v2(bootstrap, topic, pid, epoch, 2) == [INVALID_PRODUCER_EPOCH]
    assert write_txn_markers_v2(bootstrap, topic, pid, epoch, 0) == [INVALID_PRODUCER_EPOCH], "TV0: below the producer's epoch"
    r = kafka_tool("org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server", bootstrap,
                   "describe-producers", "--topic", topic, "--partition", "0")
    row = r.stdout.splitlines()[1].split()
    assert (int(row[header.index("ProducerEpoch")]), row[header.index("CurrentTransactionStartOffset")]) == (epoch + 1, "None"), r.stdout
