"""kill -9 of the broker during an acks=all load (broker in --flush always), then restart on
the same data dir: every acknowledged record is present at its acknowledged offset, offsets
are dense, and new records continue right after the existing ones.
"""

from __future__ import annotations

import time

from confluent_kafka import Producer

from clients import cli_create_topic, consume_confluent, produce_confluent, make_records, watermarks, Rec

PARTITIONS = 6
KILL_AFTER_ACKED = 30_000
SAFETY_NET_S = 180


def test_kill9_during_acks_all_load(broker_factory):
    b = broker_factory(flush="always")
    topic = "crash-recovery"
    cli_create_topic(b.bootstrap, topic, PARTITIONS)

    acked: dict[tuple[int, int], bytes] = {}  # (partition, offset) -> value
    failed = 0

    def on_delivery(err, msg):
        nonlocal failed
        if err is None:
            acked[(msg.partition(), msg.offset())] = msg.value()
        else:
            failed += 1

    p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 2,
                  "enable.idempotence": False, "message.timeout.ms": 8000,
                  "queue.buffering.max.messages": 100_000, "socket.timeout.ms": 5000})
    i = 0
    deadline = time.monotonic() + SAFETY_NET_S
    killed_at = None
    while True:
        value = f"crash-{i}".encode() + b"x" * (i % 200)
        try:
            p.produce(topic, key=f"k{i % 997}".encode(), value=value, on_delivery=on_delivery)
            i += 1
        except BufferError:
            p.poll(0.01)
        p.poll(0)
        if killed_at is None and len(acked) >= KILL_AFTER_ACKED:
            b.kill9()  # mid-load: records are in flight right now
            killed_at = i
        if killed_at is not None and i >= killed_at + 2000:
            break  # keep producing a little into the dead broker, then stop
        assert time.monotonic() < deadline, f"load did not reach {KILL_AFTER_ACKED} acks ({len(acked)} so far)"
    p.flush(60)  # in-flight records fail (message.timeout.ms) or were acked just before the kill
    acked_count = len(acked)
    assert acked_count >= KILL_AFTER_ACKED
    print(f"produced {i} records, {acked_count} acknowledged, {failed} failed before/after kill -9")

    b.start()  # same port, same data dir
    hw = {part: high for part, (low, high) in watermarks(b.bootstrap, topic, PARTITIONS).items()}
    max_acked = {part: max((o for (pp, o) in acked if pp == part), default=-1) for part in range(PARTITIONS)}
    for part in range(PARTITIONS):
        assert hw[part] > max_acked[part], (
            f"partition {part}: high watermark {hw[part]} after restart, but offset {max_acked[part]} was acknowledged")

    consumed = consume_confluent(b.bootstrap, topic, PARTITIONS)
    for part, recs in consumed.items():
        offs = [c.offset for c in recs]
        assert offs == list(range(len(offs))), f"partition {part}: offsets not dense after recovery"
        assert len(recs) == hw[part]
    by_off = {(c.partition, c.offset): c.value for recs in consumed.values() for c in recs}
    missing = [(k, v) for k, v in acked.items() if by_off.get(k) != v]
    assert not missing, (f"{len(missing)} acknowledged records lost or changed after kill -9, e.g. "
                         f"{[(k, v[:20], by_off.get(k, b'<absent>')[:20]) for k, v in sorted(missing)[:5]]}")

    # New records continue right after the recovered ones, in every partition.
    for part in range(PARTITIONS):
        [new] = produce_confluent(b.bootstrap, topic, [Rec(b"after", f"after-{part}".encode(), (), None)],
                                  partition=part)
        assert new.offset == hw[part], f"partition {part}: new record at {new.offset}, expected {hw[part]}"
