"""Tiered storage (issue 30, KIP-405) against a real S3-compatible server (SeaweedFS,
`object_store.py`), with real clients:
- the topic configs and their rules, as Kafka 4.4's controller checks them (INVALID_CONFIG
  with Kafka's messages);
- a tiered topic's sealed segments are uploaded by its leader: the bucket then holds, in
  the Aiven plugin's key layout, `.log` objects whose batches are exactly the records
  produced (offsets contiguous from 0, every CRC good, every value), and `.indexes`
  objects; ListOffsets latest-tiered (-5, v9) answers the last uploaded offset;
- local.retention.bytes deletes uploaded segments from the broker's disk, the log still
  starts at 0 (ListOffsets earliest) while the local log starts later (earliest-local,
  -4), and a consumer from the beginning gets every record back, the history from the
  object store;
- what goes from remote storage: DeleteRecords into the remote part (reads stop at the
  new start at once, the segments wholly below it leave the bucket), retention.bytes
  over the whole log (the oldest remote segments go), a deleted topic's objects, and
  every segment when remote storage is turned off with remote.log.delete.on.disable;
- read_committed over remote history: aborted transactions skipped (the remote
  transaction index), read_uncommitted gets everything;
- the copy and fetch rate limits make uploads wait and put remote reads off, nothing lost;
- an object store outage under load: every acknowledged record kept, uploads fail and are
  counted, nothing leaves the disk until the store is back, then the backlog drains.
"""

from __future__ import annotations

import os
import re
import struct
import time
import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from admin_api import scrape
from clients import Rec, confluent_consumer, consume_confluent, now_ms, produce_confluent, shardlog_cli
from conftest import LOG_ROOT, skip_unless_shardlog, wait_for
from kafkawire import compact_array, compact_string, crc32c, flexible_roundtrip, i8, i32, i64, uvarint
from object_store import ObjectStore

SEGMENT_BYTES = 1 << 20
# How long the outage test keeps the object store down, at least (it produces meanwhile).
OUTAGE_S = float(os.environ.get("SHARDLOG_TIERED_OUTAGE_S", "0"))


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    skip_unless_shardlog("tiered storage against SeaweedFS (Kafka would need a remote storage plugin)")
    s = ObjectStore(tmp_path_factory.mktemp("objectstore"), LOG_ROOT / f"weed-{uuid.uuid4().hex[:6]}.log").start()
    yield s
    s.stop()


@pytest.fixture
def tiered(broker_factory, store):
    """A broker with tiered storage on against `store`, its keys under a prefix of its own."""
    prefix = f"run-{uuid.uuid4().hex[:8]}/"
    b = broker_factory(settings={**store.broker_settings(prefix), "remote.log.manager.task.interval.ms": "300",
                                 "log.retention.check.interval.ms": "500"})
    return b, prefix


def create(bootstrap: str, name: str, config: dict[str, str]):
    a = AdminClient({"bootstrap.servers": bootstrap})
    future = a.create_topics([NewTopic(name, 1, 1, config=config)], operation_timeout=30)[name]
    future.admin = a  # the client must outlive the future
    return future


def config_error(future) -> KafkaError:
    with pytest.raises(KafkaException) as e:
        future.result(timeout=60)
    return e.value.args[0]


def test_a_topic_is_tiered_only_where_the_broker_allows_it(bootstrap):
    """The module's broker has remote.log.storage.system.enable off (Kafka's default)."""
    err = config_error(create(bootstrap, f"tiered-{uuid.uuid4().hex[:6]}", {"remote.storage.enable": "true"}))
    assert err.code() == KafkaError.INVALID_CONFIG, err
    assert "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage." in err.str()
    create(bootstrap, f"plain-{uuid.uuid4().hex[:6]}", {"remote.storage.enable": "false", "local.retention.ms": "1000"}).result(timeout=60)


def test_kafkas_rules_between_the_tiered_configs(tiered):
    b, _ = tiered
    err = config_error(create(b.bootstrap, f"c-{uuid.uuid4().hex[:6]}", {"remote.storage.enable": "true", "cleanup.policy": "compact"}))
    assert err.code() == KafkaError.INVALID_CONFIG and "only supports topics with cleanup.policy=delete" in err.str(), err
    err = config_error(create(b.bootstrap, f"r-{uuid.uuid4().hex[:6]}",
                              {"remote.storage.enable": "true", "retention.bytes": "1000", "local.retention.bytes": "2000"}))
    assert err.code() == KafkaError.INVALID_CONFIG, err
    assert "Value must not be more than retention.bytes property value: 1000" in err.str(), err
    name = f"on-{uuid.uuid4().hex[:6]}"
    create(b.bootstrap, name, {"remote.storage.enable": "true", "local.retention.ms": "60000"}).result(timeout=60)
    a = AdminClient({"bootstrap.servers": b.bootstrap})

    def alter(**entries):
        ops = [ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET) for k, v in entries.items()]
        return a.incremental_alter_configs([ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=ops)])

    # KIP-950: turning it off must say what happens to the remote data.
    err = config_error(next(iter(alter(remote_storage_enable="false").values())))
    assert err.code() == KafkaError.INVALID_CONFIG and "It is invalid to disable remote storage without deleting remote data." in err.str(), err
    next(iter(alter(remote_storage_enable="false", remote_log_delete_on_disable="true").values())).result(timeout=60)
    desc = a.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, name)])
    got = next(iter(desc.values())).result(timeout=60)
    assert got["remote.storage.enable"].value == "false" and got["local.retention.ms"].value == "60000"
    assert got["local.retention.bytes"].value == "-2", "Kafka's default: follow retention.bytes"


def list_offsets_flex(bootstrap: str, topic: str, timestamp: int, version: int = 9) -> tuple[int, int]:
    """ListOffsets v9+ (flexible) for partition 0 of `topic`: (error code, offset)."""
    return list_offsets_partition(bootstrap, topic, 0, timestamp, version)


def list_offsets_partition(bootstrap: str, topic: str, partition: int, timestamp: int, version: int = 9) -> tuple[int, int]:
    """ListOffsets v9+ (flexible) for one partition of `topic`: (error code, offset)."""
    entry = i32(partition) + i32(-1) + i64(timestamp) + uvarint(0)
    timeout = i32(30_000) if version >= 10 else b""
    body = i32(-1) + i8(0) + compact_array([compact_string(topic) + compact_array([entry]) + uvarint(0)]) + timeout
    r = flexible_roundtrip(bootstrap, 2, version, body)
    r.i32()  # throttle time
    assert r.uvarint() - 1 == 1 and r.compact_string() == topic
    assert r.uvarint() - 1 == 1 and r.i32() == partition
    code = r.i16()
    r.i64()  # timestamp
    return code, r.i64()


def varint(buf: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint at `pos`: (value, position after it)."""
    shift = raw = 0
    while True:
        byte = buf[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7


def records_of(batch: bytes) -> list[tuple[int, bytes]]:
    """(offset, value) of each record of an uncompressed RecordBatch v2."""
    base, = struct.unpack_from(">q", batch, 0)
    attributes, = struct.unpack_from(">h", batch, 21)
    assert attributes & 7 == 0, "the test produces uncompressed batches"
    count, = struct.unpack_from(">i", batch, 57)
    pos, out = 61, []
    for _ in range(count):
        _, pos = varint(batch, pos)  # length
        pos += 1  # attributes
        _, pos = varint(batch, pos)  # timestamp delta
        delta, pos = varint(batch, pos)
        klen, pos = varint(batch, pos)
        pos += max(klen, 0)
        vlen, pos = varint(batch, pos)
        out.append((base + delta, bytes(batch[pos:pos + vlen])))
        pos += vlen
        headers, pos = varint(batch, pos)
        for _ in range(headers):
            n, pos = varint(batch, pos)
            pos += n
            n, pos = varint(batch, pos)
            pos += max(n, 0)
    return out


def test_sealed_segments_are_uploaded_whole_and_in_order(tiered, store):
    b, prefix = tiered
    topic = f"tiered-{uuid.uuid4().hex[:6]}"
    create(b.bootstrap, topic, {"remote.storage.enable": "true", "segment.bytes": str(SEGMENT_BYTES)}).result(timeout=60)
    values = [b"%06d-" % i + bytes([65 + i % 26]) * 1000 for i in range(4000)]
    produced = produce_confluent(b.bootstrap, topic, [Rec(None, v, (), None) for v in values], partition=0, compression="none",
                                  **{"batch.size": 65536})
    assert [p.offset for p in produced] == list(range(len(values)))

    def uploaded() -> list[str]:
        logs = [k for k in store.keys(prefix) if k.endswith(".log")]
        return logs if len(logs) >= 3 else []

    logs = wait_for("three sealed segments in the bucket", uploaded, 120)
    keys = store.keys(prefix)
    topic_folder = f"{prefix}{topic}-"
    assert all(k.startswith(topic_folder) and f"/0/" in k for k in keys), keys
    got: list[tuple[int, bytes]] = []
    for key in sorted(logs):
        data = store.get(key)
        start = int(key.rsplit("/", 1)[1].split("-", 1)[0])
        assert key[:-len(".log")] + ".indexes" in keys, f"{key} has no .indexes object"
        assert store.get(key[:-len(".log")] + ".indexes")[:4] == b"SLRI"
        pos, first = 0, None
        while pos < len(data):
            base, length = struct.unpack_from(">qi", data, pos)
            batch = data[pos:pos + 12 + length]
            assert len(batch) == 12 + length, f"{key}: a batch cut at {pos}"
            crc, = struct.unpack_from(">I", batch, 17)
            assert crc32c(batch[21:]) == crc, f"{key}: bad CRC at offset {base}"
            first = base if first is None else first
            got += records_of(batch)
            pos += 12 + length
        assert first == start, f"{key} starts at {first}"
    offsets = [o for o, _ in got]
    assert offsets == list(range(len(offsets))), "remote segments are contiguous from 0 with no overlap"
    assert len(offsets) < len(values), "the active segment stays local"
    assert [v for _, v in got] == values[:len(got)], "every uploaded record is the one produced"
    code, latest_tiered = wait_for("latest-tiered answered", lambda: list_offsets_flex(b.bootstrap, topic, -5), 30)
    assert code == 0 and latest_tiered >= len(got) - 1, (code, latest_tiered)


def test_history_past_local_retention_is_read_back_from_the_object_store(tiered, store):
    b, prefix = tiered
    topic = f"history-{uuid.uuid4().hex[:6]}"
    create(b.bootstrap, topic, {"remote.storage.enable": "true", "segment.bytes": str(SEGMENT_BYTES),
                                "local.retention.bytes": str(SEGMENT_BYTES)}).result(timeout=60)
    values = [b"%06d-" % i + bytes([97 + i % 26]) * 1000 for i in range(8000)]
    base_ts = now_ms() - 600_000
    produce_confluent(b.bootstrap, topic, [Rec(b"k%d" % (i % 7), v, (("h", b"%d" % i),), base_ts + i) for i, v in enumerate(values)],
                      partition=0, **{"batch.size": 65536})
    # Uploaded, then deleted locally down to local.retention.bytes (about the active
    # segment and one more): the local log starts well past 0.
    def local_logs() -> list:
        return [f for f in (b.data_dir).rglob("*.log") if f.parent.name == f"{topic}-0"]

    wait_for("local segments deleted once uploaded", lambda: len(local_logs()) <= 3, 120)
    code, local_start = list_offsets_flex(b.bootstrap, topic, -4)
    assert code == 0 and local_start > 4000, local_start
    assert list_offsets_flex(b.bootstrap, topic, -2) == (0, 0), "the log still starts at 0: in remote storage"
    # KIP-1023: the earliest offset pending upload is the one past the remote log.
    code, latest_tiered = list_offsets_flex(b.bootstrap, topic, -5)
    assert code == 0 and local_start <= latest_tiered + 1 < len(values), (local_start, latest_tiered)
    assert list_offsets_flex(b.bootstrap, topic, -6, version=11) == (0, latest_tiered + 1)
    got = consume_confluent(b.bootstrap, topic, 1, **{"max.partition.fetch.bytes": 200_000})[0]
    assert [c.offset for c in got] == list(range(len(values)))
    assert [c.value for c in got] == values, "every record, history from the object store"
    assert all(c.key == b"k%d" % (c.offset % 7) and c.headers == (("h", b"%d" % c.offset),) for c in got)
    assert local_start > 0
    assert [c.ts for c in got] == [base_ts + i for i in range(len(values))]
    # ListOffsets by timestamp looks at the remote part first (Kafka's order).
    c = confluent_consumer(b.bootstrap)
    try:
        # One call per timestamp: librdkafka merges entries for the same partition.
        found = [c.offsets_for_times([TopicPartition(topic, 0, base_ts + t)], timeout=30)[0].offset for t in (0, 100, 2500, local_start + 10)]
    finally:
        c.close()
    assert found == [0, 100, 2500, local_start + 10]
    # Every feature visible as a metric.
    m = scrape(b.admin_url)
    assert m.total("shardlog_remote_copy_bytes_total") >= 6 * SEGMENT_BYTES * 0.9
    assert m.total("shardlog_remote_copy_requests_total", result="ok") >= 6
    assert m.total("shardlog_remote_fetch_requests_total", result="ok") > 0
    assert m.total("shardlog_remote_fetch_bytes_total") >= local_start * 1000
    assert m.total("shardlog_remote_fetch_time_seconds_count") > 0
    # 200 KB fetches of 1 MiB segments: a segment's first fetch waits for its chunk from
    # the store, the next ones find it in memory (the chunk cache).
    assert m.total("shardlog_remote_fetch_cache_bytes_total", result="miss") > 0
    assert m.total("shardlog_remote_fetch_cache_bytes_total", result="hit") >= local_start * 1000 / 2
    assert m.total("shardlog_remote_log_size_bytes") >= 6 * SEGMENT_BYTES * 0.9
    # The admin view: local against remote (`shardlog topic describe`; remote sizes from
    # the admin listener), as the bucket and ListOffsets see them.
    def described() -> dict[str, int] | None:
        out = shardlog_cli("topic", "describe", topic, "--bootstrap", b.bootstrap, "--admin", b.admin_url).stdout.splitlines()
        assert len(out) == 3 and "Partition: 0" in out[1], out
        fields = {k: int(v) for k, v in re.findall(r"(\w+): (-?\d+)", out[2])}
        logs = [k for k in store.keys(f"{prefix}{topic}-") if k.endswith(".log")]
        bucket = {"RemoteSegments": len(logs), "RemoteBytes": sum(len(store.get(k)) for k in logs)}
        return fields if all(fields.get(k) == v for k, v in bucket.items()) else None
    fields = wait_for("topic describe matches the bucket", described, 60)
    assert fields["LogStartOffset"] == 0 and fields["LocalLogStartOffset"] == list_offsets_flex(b.bootstrap, topic, -4)[1], fields
    assert fields["HighestRemoteOffset"] == list_offsets_flex(b.bootstrap, topic, -5)[1] >= fields["LocalLogStartOffset"] - 1, fields
    assert 0 < fields["LocalBytes"] <= 4 * SEGMENT_BYTES and fields["RemoteBytes"] >= 6 * SEGMENT_BYTES * 0.9, fields


def remote_logs(store: ObjectStore, prefix: str, topic: str) -> list[int]:
    """Start offsets of the topic's `.log` objects in the bucket, in order."""
    return sorted(int(k.rsplit("/", 1)[1].split("-", 1)[0]) for k in store.keys(f"{prefix}{topic}-") if k.endswith(".log"))


def test_delete_records_retention_and_topic_deletion_remove_remote_data(tiered, store):
    b, prefix = tiered
    topic = f"expire-{uuid.uuid4().hex[:6]}"
    create(b.bootstrap, topic, {"remote.storage.enable": "true", "segment.bytes": str(SEGMENT_BYTES),
                                "local.retention.bytes": str(SEGMENT_BYTES)}).result(timeout=60)
    values = [b"%06d-" % i + bytes([97 + i % 26]) * 1000 for i in range(8000)]
    produce_confluent(b.bootstrap, topic, [Rec(None, v, (), None) for v in values], partition=0, **{"batch.size": 65536})
    starts = wait_for("the sealed segments uploaded", lambda: (lambda s: s if len(s) >= 7 else None)(remote_logs(store, prefix, topic)), 120)
    wait_for("local segments deleted once uploaded",
             lambda: (lambda r: r[0] == 0 and r[1] > 4000)(list_offsets_flex(b.bootstrap, topic, -4)), 120)
    assert starts[0] == 0, starts

    # DeleteRecords into the remote part: the log starts there at once.
    target = starts[2] + 10
    a = AdminClient({"bootstrap.servers": b.bootstrap})
    (f,) = a.delete_records([TopicPartition(topic, 0, target)], request_timeout=30, operation_timeout=30).values()
    assert f.result(timeout=60).low_watermark == target
    assert list_offsets_flex(b.bootstrap, topic, -2) == (0, target)
    got = consume_confluent(b.bootstrap, topic, 1, **{"max.partition.fetch.bytes": 200_000})[0]
    assert [c.offset for c in got] == list(range(target, len(values)))
    assert [c.value for c in got] == values[target:]
    # The two segments wholly below it leave the bucket; the one holding it stays.
    wait_for("segments below the log start deleted", lambda: remote_logs(store, prefix, topic)[:1] == [starts[2]], 60)

    # retention.bytes over the whole log (remote + local-only): the oldest remote go.
    (f,) = a.incremental_alter_configs([ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.bytes", str(4 * SEGMENT_BYTES), incremental_operation=AlterConfigOpType.SET)])]).values()
    f.result(timeout=60)
    left = wait_for("remote segments past retention.bytes deleted", lambda: (lambda s: s if len(s) <= 4 else None)(remote_logs(store, prefix, topic)), 60)
    code, earliest = list_offsets_flex(b.bootstrap, topic, -2)
    assert code == 0 and earliest == left[0], (earliest, left)
    got = consume_confluent(b.bootstrap, topic, 1, **{"max.partition.fetch.bytes": 200_000})[0]
    assert [c.value for c in got] == values[earliest:]

    # A deleted topic's objects go too.
    a.delete_topics([topic], operation_timeout=30)[topic].result(timeout=60)
    wait_for("a deleted topic's objects deleted", lambda: store.keys(f"{prefix}{topic}-") == [], 60)


def test_turning_remote_storage_off_with_delete_on_disable_deletes_the_remote_data(tiered, store):
    """KIP-950: remote.storage.enable=false with remote.log.delete.on.disable=true deletes
    every remote segment; the log then starts where the local log does."""
    b, prefix = tiered
    topic = f"off-{uuid.uuid4().hex[:6]}"
    create(b.bootstrap, topic, {"remote.storage.enable": "true", "segment.bytes": str(SEGMENT_BYTES),
                                "local.retention.bytes": str(2 * SEGMENT_BYTES)}).result(timeout=60)
    values = [b"%06d-" % i + bytes([97 + i % 26]) * 1000 for i in range(5000)]
    produce_confluent(b.bootstrap, topic, [Rec(None, v, (), None) for v in values], partition=0, **{"batch.size": 65536})
    wait_for("history uploaded and deleted locally",
             lambda: (lambda r: r[0] == 0 and r[1] > 1000)(list_offsets_flex(b.bootstrap, topic, -4)), 120)
    assert remote_logs(store, prefix, topic), "segments in the bucket"
    a = AdminClient({"bootstrap.servers": b.bootstrap})
    ops = [ConfigEntry("remote.storage.enable", "false", incremental_operation=AlterConfigOpType.SET),
           ConfigEntry("remote.log.delete.on.disable", "true", incremental_operation=AlterConfigOpType.SET)]
    next(iter(a.incremental_alter_configs([ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=ops)]).values())).result(timeout=60)
    wait_for("the remote data deleted", lambda: store.keys(f"{prefix}{topic}-") == [], 60)
    code, local_start = list_offsets_flex(b.bootstrap, topic, -4)
    assert code == 0 and local_start > 1000
    wait_for("the log starts locally", lambda: list_offsets_flex(b.bootstrap, topic, -2) == (0, local_start), 30)
    assert list_offsets_flex(b.bootstrap, topic, -5) == (0, -1)
    got = consume_confluent(b.bootstrap, topic, 1, **{"max.partition.fetch.bytes": 200_000})[0]
    assert [c.offset for c in got] == list(range(local_start, len(values)))
    assert [c.value for c in got] == values[local_start:]


def test_read_committed_consumers_skip_aborted_transactions_in_remote_storage(tiered, store):
    """Kafka's remote transaction index: each uploaded segment carries the aborted
    transactions overlapping it, so a read_committed consumer reading history from the
    object store gets exactly the committed records (aborted transactions spanning
    segments included), and a read_uncommitted one gets every record."""
    b, prefix = tiered
    topic = f"txn-{uuid.uuid4().hex[:6]}"
    create(b.bootstrap, topic, {"remote.storage.enable": "true", "segment.bytes": str(SEGMENT_BYTES),
                                "local.retention.bytes": str(SEGMENT_BYTES)}).result(timeout=60)
    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": f"tiered-{uuid.uuid4().hex[:6]}",
                  "batch.size": 65536, "linger.ms": 5})
    p.init_transactions(30)
    committed, everything = [], []
    for t in range(8):
        p.begin_transaction()
        values = [b"t%d-%05d-" % (t, i) + bytes([97 + i % 26]) * 1000 for i in range(700)]
        for v in values:
            while True:
                try:
                    p.produce(topic, value=v, partition=0)
                    break
                except BufferError:
                    p.poll(0.05)
        p.flush(60)
        everything += values
        if t % 3 == 1:
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
            committed += values
    wait_for("history uploaded and deleted locally",
             lambda: (lambda r: r[0] == 0 and r[1] > 3000)(list_offsets_flex(b.bootstrap, topic, -4)), 120)
    got = consume_confluent(b.bootstrap, topic, 1, **{"isolation.level": "read_committed", "max.partition.fetch.bytes": 200_000})[0]
    assert [c.value for c in got] == committed, f"{len(got)} records read_committed, {len(committed)} committed"
    got = consume_confluent(b.bootstrap, topic, 1, **{"isolation.level": "read_uncommitted", "max.partition.fetch.bytes": 200_000})[0]
    assert [c.value for c in got] == everything
    assert aborted_in_bucket(store, prefix, topic) >= 2, "the aborted transactions are in the remote transaction indexes"


def aborted_in_bucket(store: ObjectStore, prefix: str, topic: str) -> int:
    """Distinct aborted transactions (by first offset) the topic's `.indexes` objects name."""
    import json
    firsts = set()
    for key in [k for k in store.keys(f"{prefix}{topic}-") if k.endswith(".indexes")]:
        data = store.get(key)
        assert data[:4] == b"SLRI"
        payload = json.loads(data[14:])
        firsts |= {a["first_offset"] for a in payload.get("aborted_transactions") or []}
    return len(firsts)


def test_copy_and_fetch_rates_bound_the_remote_traffic(broker_factory, store):
    """remote.log.manager.copy.max.bytes.per.second makes uploads wait (counted in
    shardlog_remote_copy_throttle_seconds); over ...fetch.max.bytes.per.second a remote read
    is not made and the partition answers empty (throttled), the consumer asks again and
    still gets every record. Rates, not timings: only what waited is asserted."""
    prefix = f"rates-{uuid.uuid4().hex[:6]}/"
    b = broker_factory(settings={**store.broker_settings(prefix), "remote.log.manager.task.interval.ms": "200",
                                 "log.retention.check.interval.ms": "500",
                                 "remote.log.manager.copy.max.bytes.per.second": str(2 * SEGMENT_BYTES),
                                 "remote.log.manager.fetch.max.bytes.per.second": str(SEGMENT_BYTES)})
    topic = f"rates-{uuid.uuid4().hex[:6]}"
    create(b.bootstrap, topic, {"remote.storage.enable": "true", "segment.bytes": str(SEGMENT_BYTES),
                                "local.retention.bytes": str(SEGMENT_BYTES)}).result(timeout=60)
    values = [b"%06d-" % i + bytes([97 + i % 26]) * 1000 for i in range(6000)]
    produce_confluent(b.bootstrap, topic, [Rec(None, v, (), None) for v in values], partition=0, **{"batch.size": 65536})
    wait_for("history uploaded and deleted locally",
             lambda: (lambda r: r[0] == 0 and r[1] > 3000)(list_offsets_flex(b.bootstrap, topic, -4)), 120)
    assert scrape(b.admin_url).total("shardlog_remote_copy_throttle_seconds_total") > 0, "uploads waited for the copy rate"
    got = consume_confluent(b.bootstrap, topic, 1, **{"max.partition.fetch.bytes": 200_000})[0]
    assert [c.value for c in got] == values
    m = scrape(b.admin_url)
    assert m.total("shardlog_remote_fetch_requests_total", result="throttled") > 0, "reads over the fetch rate were put off"
    assert m.total("shardlog_remote_fetch_bytes_total") >= 3000 * 1000


@pytest.mark.parametrize("copiers", [1, 4])
def test_the_copier_pool_bounds_the_partitions_uploading_at_once(broker_factory, store, copiers):
    """remote.log.manager.copier.thread.pool.size partitions upload at once (one shard
    here: its share is the whole pool). The store hangs (SIGSTOP) so every upload begun
    stays in flight; four partitions have segments waiting. remote.log.reader.threads 1:
    the history still reads back, one remote read at a time."""
    prefix = f"copiers-{copiers}-{uuid.uuid4().hex[:6]}/"
    b = broker_factory(shards=1, settings={
        **store.broker_settings(prefix), "remote.log.manager.task.interval.ms": "200", "log.retention.check.interval.ms": "500",
        "remote.log.manager.copier.thread.pool.size": str(copiers), "remote.log.reader.threads": "1",
        "rsm.config.storage.s3.api.call.timeout": "60000"})
    topic = f"copiers-{uuid.uuid4().hex[:6]}"
    a = AdminClient({"bootstrap.servers": b.bootstrap})
    a.create_topics([NewTopic(topic, 4, 1, config={"remote.storage.enable": "true", "segment.bytes": str(SEGMENT_BYTES),
                                                   "local.retention.bytes": str(SEGMENT_BYTES)})], operation_timeout=30)[topic].result(timeout=60)
    values = [b"%06d-" % i + bytes([97 + i % 26]) * 1000 for i in range(3000)]

    def in_flight() -> int:
        log = b.log_path.read_text(errors="replace")
        return log.count("uploading a segment to remote storage") - log.count("segment copied to remote storage")

    store.pause()
    try:
        for p in range(4):
            produce_confluent(b.bootstrap, topic, [Rec(None, v, (), None) for v in values], partition=p, **{"batch.size": 65536})
        wait_for(f"{copiers} uploads in flight", lambda: in_flight() >= copiers, 60)
        time.sleep(2)  # ten task intervals: no further upload begins while the pool is busy
        assert in_flight() == copiers, f"{in_flight()} uploads in flight, the pool is {copiers}"
    finally:
        store.resume()
    wait_for("every partition's history uploaded and deleted locally",
             lambda: all(r[0] == 0 and r[1] >= 1024 for r in (list_offsets_partition(b.bootstrap, topic, p, -4) for p in range(4))), 180)
    for p, got in consume_confluent(b.bootstrap, topic, 4, **{"max.partition.fetch.bytes": 200_000}).items():
        assert [c.value for c in got] == values, f"partition {p}"


def test_an_object_store_outage_keeps_everything_local_until_it_returns(broker_factory, tmp_path_factory):
    skip_unless_shardlog("tiered storage against SeaweedFS")
    own = ObjectStore(tmp_path_factory.mktemp("outage-store"), LOG_ROOT / f"weed-outage-{uuid.uuid4().hex[:6]}.log").start()
    try:
        prefix = "outage/"
        b = broker_factory(settings={**own.broker_settings(prefix), "remote.log.manager.task.interval.ms": "300",
                                     "log.retention.check.interval.ms": "500", "rsm.config.storage.s3.api.call.timeout": "3000"})
        topic = f"outage-{uuid.uuid4().hex[:6]}"
        create(b.bootstrap, topic, {"remote.storage.enable": "true", "segment.bytes": str(SEGMENT_BYTES),
                                    "local.retention.bytes": str(SEGMENT_BYTES)}).result(timeout=60)
        own.stop()
        stopped = time.monotonic()
        values = [b"%06d-" % i + bytes([97 + i % 26]) * 1000 for i in range(6000)]
        produced = produce_confluent(b.bootstrap, topic, [Rec(None, v, (), None) for v in values], partition=0, **{"batch.size": 65536})
        assert len(produced) == len(values), "every record acknowledged while the store is down"
        wait_for("failed uploads counted", lambda: scrape(b.admin_url).total("shardlog_remote_copy_requests_total", result="error") >= 2, 60)
        # Nothing is remote, so nothing leaves the disk, whatever local.retention.bytes says.
        assert list_offsets_flex(b.bootstrap, topic, -4) == (0, 0)
        assert list_offsets_flex(b.bootstrap, topic, -5) == (0, -1)
        local = [f for f in b.data_dir.rglob("*.log") if f.parent.name == f"{topic}-0"]
        assert len(local) >= 5, local
        assert scrape(b.admin_url).total("shardlog_remote_copy_lag_bytes") >= 4 * SEGMENT_BYTES
        # The outage goes on for OUTAGE_S in all (scripts/tiered_volume.sh: a minute), the
        # producer writing on: every record acknowledged, the local log grows.
        while time.monotonic() - stopped < OUTAGE_S:
            more = [b"%06d-" % i + bytes([97 + i % 26]) * 1000 for i in range(len(values), len(values) + 1000)]
            assert len(produce_confluent(b.bootstrap, topic, [Rec(None, v, (), None) for v in more], partition=0,
                                         **{"batch.size": 65536})) == len(more)
            values += more
            time.sleep(1)
        grown = [f for f in b.data_dir.rglob("*.log") if f.parent.name == f"{topic}-0"]
        assert len(grown) >= len(values) // 1024, (len(grown), len(values))
        assert list_offsets_flex(b.bootstrap, topic, -4) == (0, 0), "nothing deleted locally during the outage"
        own.start()
        wait_for("the backlog uploaded and deleted locally",
                 lambda: (lambda r: r[0] == 0 and r[1] > 3000)(list_offsets_flex(b.bootstrap, topic, -4)), 180)
        got = consume_confluent(b.bootstrap, topic, 1, **{"max.partition.fetch.bytes": 200_000})[0]
        assert [c.value for c in got] == values
    finally:
        own.stop()
