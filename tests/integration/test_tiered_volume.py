"""Tiered storage at volume (issue 30's test): a 3-node cluster, RF 3, small
`local.retention.bytes`; a real client produces SHARDLOG_TIERED_VOLUME_MIB of records
(48 MiB here in CI; `scripts/tiered_volume.sh` runs 2 GiB) and a real client reads them all
back from offset 0, most of them from the object store:
- every acknowledged record comes back once, at its acknowledged offset, with the bytes
  that were sent (and librdkafka checks every batch's CRC);
- each broker's local copy of the topic stays bounded by local retention while the
  history goes remote (the bucket holds it);
- produce and historical-read MB/s are printed (run with -s), never asserted.
"""

from __future__ import annotations

import os
import struct
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import conftest
from conftest import LOG_ROOT, wait_for
from object_store import ObjectStore
from test_tiered_storage import list_offsets_flex

MIB = 1 << 20
TOTAL_BYTES = int(os.environ.get("SHARDLOG_TIERED_VOLUME_MIB", "48")) * MIB
PARTITIONS = 3
RECORD_BYTES = 16 * 1024
# Segments scale with the volume (1 MiB in CI, 16 MiB at 2 GiB); local retention is four
# segments per partition.
SEGMENT_BYTES = max(MIB, min(16 * MIB, TOTAL_BYTES // 128 // MIB * MIB))
LOCAL_RETENTION_BYTES = 4 * SEGMENT_BYTES
DEADLINE_S = 120 + TOTAL_BYTES // (2 * MIB)
# The payload source: each record's value is its (partition, sequence) then a slice of
# this block chosen by the sequence, so the consumer can rebuild what was sent.
BLOCK = os.urandom(4 * MIB)


def value_of(partition: int, seq: int) -> bytes:
    head = struct.pack(">IQ", partition, seq)
    start = (seq * 104_729) % (len(BLOCK) - RECORD_BYTES)
    return head + BLOCK[start:start + RECORD_BYTES - len(head)]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    conftest.skip_unless_shardlog("tiered storage against SeaweedFS")
    s = ObjectStore(tmp_path_factory.mktemp("volume-store"), LOG_ROOT / f"weed-volume-{uuid.uuid4().hex[:6]}.log").start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, store):
    args = store.broker_args("volume/", {"remote.log.manager.task.interval.ms": "200", "log.retention.check.interval.ms": "500"})
    yield from conftest.running_cluster(tmp_path_factory, "tiered-volume", extra_args=args)


def local_log_bytes(node, topic: str) -> int:
    return sum(f.stat().st_size for f in node.data_dir.rglob("*.log") if f.parent.name.startswith(f"{topic}-"))


def remote_log_bytes(store: ObjectStore, topic: str) -> int:
    c, total, token = store.client(), 0, None
    while True:
        kw = {"Bucket": store.bucket, "Prefix": f"volume/{topic}-", **({"ContinuationToken": token} if token else {})}
        page = c.list_objects_v2(**kw)
        total += sum(o["Size"] for o in page.get("Contents", []) if o["Key"].endswith(".log"))
        if not page.get("IsTruncated"):
            return total
        token = page["NextContinuationToken"]


def test_every_record_of_a_mostly_remote_log_comes_back_intact(cluster, store):
    topic = f"tiered-volume-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 3, config={
        "remote.storage.enable": "true", "segment.bytes": str(SEGMENT_BYTES),
        "local.retention.bytes": str(LOCAL_RETENTION_BYTES), "min.insync.replicas": "2"})],
        operation_timeout=30)[topic].result(timeout=60)

    # Produce: acks=all, idempotent; every delivery report kept as offset -> sequence.
    per_partition = TOTAL_BYTES // RECORD_BYTES // PARTITIONS
    acked: dict[int, dict[int, int]] = {p: {} for p in range(PARTITIONS)}
    failed: list[str] = []

    def delivered(err, msg):
        if err is not None:
            failed.append(str(err))
        else:
            acked[msg.partition()][msg.offset()] = struct.unpack(">IQ", msg.value()[:12])[1]

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 20, "batch.size": 1 << 20, "queue.buffering.max.kbytes": 256 * 1024,
                         "message.max.bytes": 2 << 20})
    began = time.monotonic()
    for seq in range(per_partition):
        for p in range(PARTITIONS):
            while True:
                try:
                    producer.produce(topic, value_of(p, seq), partition=p, on_delivery=delivered)
                    break
                except BufferError:
                    producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(DEADLINE_S) == 0
    produce_s = time.monotonic() - began
    assert not failed, failed[:5]
    assert [len(acked[p]) for p in range(PARTITIONS)] == [per_partition] * PARTITIONS
    for p in range(PARTITIONS):
        assert sorted(acked[p]) == list(range(per_partition)), f"partition {p}: acknowledged offsets are not 0..{per_partition - 1}"

    # The history goes remote and every broker's local copy shrinks to local retention:
    # per partition, the retained segments, the active one and one sealed but not yet
    # uploaded (on every broker: RF 3).
    bound = PARTITIONS * (LOCAL_RETENTION_BYTES + 2 * SEGMENT_BYTES)
    wait_for("every broker's local copy bounded by local retention",
             lambda: all(local_log_bytes(n, topic) <= bound for n in cluster.brokers), DEADLINE_S)
    # Partition 0's first local offset on its leader is well past the start: what is read
    # below from offset 0 comes from the object store first.
    leader0 = cluster.node(admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader)
    code, local_start = list_offsets_flex(leader0.bootstrap, topic, -4)
    assert code == 0 and local_start > per_partition // 2, (code, local_start, per_partition)
    remote = remote_log_bytes(store, topic)
    assert remote >= TOTAL_BYTES - bound, f"only {remote} bytes of {TOTAL_BYTES} remote"

    # Read everything back from offset 0.
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"volume-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "check.crcs": True, "fetch.max.bytes": 16 << 20,
                         "max.partition.fetch.bytes": 4 << 20, "enable.partition.eof": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    next_offset = {p: 0 for p in range(PARTITIONS)}
    read_bytes, began = 0, time.monotonic()
    deadline = began + DEADLINE_S
    try:
        while any(next_offset[p] < per_partition for p in range(PARTITIONS)):
            assert time.monotonic() < deadline, f"read back {next_offset} of {per_partition} per partition"
            for m in consumer.consume(500, timeout=1.0):
                assert m.error() is None, m.error()
                p, off = m.partition(), m.offset()
                assert off == next_offset[p], f"partition {p}: offset {off}, expected {next_offset[p]} (gap or duplicate)"
                v = m.value()
                assert v == value_of(p, acked[p][off]), f"partition {p} offset {off}: the bytes differ from what was sent"
                next_offset[p] = off + 1
                read_bytes += len(v)
    finally:
        consumer.close()
    read_s = time.monotonic() - began
    print(f"\ntiered volume: {TOTAL_BYTES / MIB:.0f} MiB, RF 3, {PARTITIONS} partitions, segments {SEGMENT_BYTES // MIB} MiB, "
          f"local retention {LOCAL_RETENTION_BYTES // MIB} MiB per partition; produce (acks=all) "
          f"{TOTAL_BYTES / MIB / produce_s:.1f} MB/s, read from offset 0 {read_bytes / MIB / read_s:.1f} MB/s; "
          f"remote {remote / MIB:.0f} MiB; local per broker {[local_log_bytes(n, topic) // MIB for n in cluster.brokers]} MiB")
