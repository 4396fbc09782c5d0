"""Log compaction (cleanup.policy=compact) with real clients against the real binary.

A compacted topic with tiny segments gets many overwrites of a few keys; the broker's
cleaner (run every 200 ms here via --log-cleaner-backoff-ms) must leave at most one
record per key in the cleaned segments, the latest one, with the original offsets; the
same content must come back after a restart. A record without a key is refused with
INVALID_RECORD, as Kafka does on a compacted topic.

Nothing here asserts on timing: the waits are polls with generous safety-net deadlines.
"""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, KafkaError, Producer, TopicPartition

from clients import (Rec, admin_create_topic, confluent_consumer, now_ms, produce_confluent,
                     watermarks)
from conftest import default_flush, skip_unless_shardlog

KEYS = 12
ROUNDS = 60
DEADLINE_S = 180


def _consume_all(bootstrap: str, topic: str) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of partition 0 from the beginning to the high watermark."""
    c = confluent_consumer(bootstrap)
    try:
        high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)[1]
        out: list[tuple[int, bytes | None, bytes | None]] = []
        if high == 0:
            return out
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + DEADLINE_S
        while not out or out[-1][0] + 1 < high:
            assert time.monotonic() < deadline, f"consumed up to {out[-1][0] if out else None}, high watermark {high}"
            for m in c.consume(num_messages=10_000, timeout=0.5):
                if m.error():
                    raise AssertionError(m.error())
                out.append((m.offset(), m.key(), m.value()))
        return out
    finally:
        c.close()


def _segments(data_dir: Path, topic: str) -> list[tuple[int, int]]:
    """(base offset, file size) of each segment of partition 0, in order. The cleaner
    runs meanwhile: a segment it deletes between the listing and the stat is skipped."""
    d = data_dir / f"{topic}-0"
    out = []
    for p in d.glob("*.log"):
        try:
            out.append((int(p.name[:-4]), p.stat().st_size))
        except FileNotFoundError:
            continue
    return sorted(out)


def _check_compacted(records, latest: dict[bytes, tuple[int, bytes]], active_base: int,
                     kept: dict[bytes, tuple[int, bytes]]):
    """`kept`: the record of each key the cleaner keeps below the active segment."""
    offsets = [r[0] for r in records]
    assert offsets == sorted(set(offsets)), "offsets strictly increase"
    seen = {}
    for off, key, value in records:
        assert key is not None
        if off < active_base:
            assert key not in seen, f"key {key!r} twice in the cleaned range"
            assert kept[key][0] == off, f"offset {off} of key {key!r} is not the one kept ({kept[key][0]})"
        seen[key] = value
    # Whatever was cleaned, a consumer ends with the latest value of every key.
    assert seen == {k: v for k, (_, v) in latest.items()}


def test_compacted_topic_keeps_latest_per_key_across_restart(broker_factory):
    skip_unless_shardlog("reads segment files and uses --log-cleaner-backoff-ms")
    b = broker_factory(extra_args=["--log-cleaner-backoff-ms", "200"])
    topic = f"compacted-{now_ms()}"
    admin_create_topic(b.bootstrap, topic, 1, config={
        "cleanup.policy": "compact", "segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.1"})

    # Many overwrites of a few keys, in many small batches, half of them lz4-compressed.
    # Half of the keys stop being written half-way, so their latest records end up in
    # segments the cleaner rewrites (not only in the active one).
    ts = now_ms()
    recs = [Rec(f"key-{k}".encode(), f"round-{r}-key-{k}-".encode() + b"x" * (r % 50), (), ts + r)
            for r in range(ROUNDS) for k in range(KEYS) if k < KEYS // 2 or r < ROUNDS // 2]
    half = len(recs) // 2
    small_batches = {"linger.ms": 0, "batch.num.messages": 6}
    produced = produce_confluent(b.bootstrap, topic, recs[:half], compression="lz4", **small_batches)
    produced += produce_confluent(b.bootstrap, topic, recs[half:], **small_batches)
    latest: dict[bytes, tuple[int, bytes]] = {}
    for p in sorted(produced, key=lambda p: p.offset):
        latest[p.rec.key] = (p.offset, p.rec.value)
    assert watermarks(b.bootstrap, topic, 1)[0] == (0, len(recs))

    # Small segments rolled often (the cleaner may already have deleted emptied ones).
    segs = _segments(b.data_dir, topic)
    assert segs[-1][0] >= len(recs) // 2, f"most records are in sealed segments: {segs}"

    # Wait for the cleaner (it may already have run): reading from the beginning shows
    # at most one record per key below the active segment.
    deadline = time.monotonic() + DEADLINE_S
    while True:
        active_base = _segments(b.data_dir, topic)[-1][0]
        records = _consume_all(b.bootstrap, topic)
        keys_below = [k for off, k, _ in records if off < active_base]
        if len(keys_below) == len(set(keys_below)):
            break
        assert time.monotonic() < deadline, f"no compaction within {DEADLINE_S} s: segments {segs}"
        time.sleep(0.2)
    assert len(records) < len(recs), "compaction removed superseded records"
    assert len(keys_below) < active_base, "offsets below the active segment were removed"
    assert len(keys_below) >= KEYS // 2, f"latest records of the early keys stay in cleaned segments: {keys_below}"
    # The cleaner keys on the log's durable data only (`partition/cleaner.rs`). With
    # flush = always that is every record: a key keeps its latest record. With flush =
    # never the active segment is durable only once it rolls (Kafka's default flush
    # policy), so a key keeps its latest record below the active segment.
    if default_flush() == "never":
        kept = {}
        for p in sorted(produced, key=lambda p: p.offset):
            if p.offset < active_base:
                kept[p.rec.key] = (p.offset, p.rec.value)
    else:
        kept = latest
    _check_compacted(records, latest, active_base, kept)
    assert watermarks(b.bootstrap, topic, 1)[0] == (0, len(recs)), "log start and high watermark unchanged"

    # A restart recovers the cleaned segments with identical content.
    b.restart()
    again = _consume_all(b.bootstrap, topic)
    assert again == records
    _check_compacted(again, latest, active_base, kept)

    # Offsets continue after the restart.
    more = produce_confluent(b.bootstrap, topic, [Rec(b"key-0", b"after-restart", (), None)])
    assert more[0].offset == len(recs)


def test_null_key_on_compacted_topic_is_invalid_record(broker_factory):
    skip_unless_shardlog("uses --log-cleaner-backoff-ms")
    b = broker_factory(extra_args=["--log-cleaner-backoff-ms", "200"])
    topic = f"compacted-nokey-{now_ms()}"
    admin_create_topic(b.bootstrap, topic, 1, config={"cleanup.policy": "compact"})
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "enable.idempotence": False,
                  "retries": 0, "message.timeout.ms": 60_000})
    errors = []
    p.produce(topic, value=b"no key", partition=0, on_delivery=lambda err, msg: errors.append(err))
    assert p.flush(120) == 0
    assert len(errors) == 1 and errors[0] is not None, errors
    assert errors[0].code() == KafkaError.INVALID_RECORD, errors[0]
    # A keyed record is accepted, and nothing of the refused one was stored.
    ok = produce_confluent(b.bootstrap, topic, [Rec(b"k", b"v", (), None)], partition=0)
    assert ok[0].offset == 0
