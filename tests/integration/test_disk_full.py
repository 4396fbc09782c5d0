"""Disk full: the data dir sits on a 64 MiB tmpfs that the test fills. Produce answers
KAFKA_STORAGE_ERROR, the broker stays up, acknowledged records stay readable, and once
space returns produce succeeds again.
"""

from __future__ import annotations

import errno
import os
import subprocess
import time

import pytest
from confluent_kafka import KafkaError, Producer

from clients import cli_create_topic, consume_confluent
from conftest import skip_unless_shardlog

VALUE = b"d" * 65536
MAX_ATTEMPTS = 3000  # 3000 * 64 KiB is far more than the filesystem holds
SAFETY_NET_S = 120


def _fill(path, chunk: int):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        buf = b"\0" * chunk
        while True:
            try:
                os.write(fd, buf)
            except OSError as e:
                if e.errno == errno.ENOSPC:
                    return
                raise
    finally:
        os.close(fd)


@pytest.fixture
def small_fs(tmp_path):
    mnt = tmp_path / "small-fs"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a 64 MiB tmpfs (needs root): {r.stderr.strip()}")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_disk_full_storage_error_then_recovery(broker_factory, small_fs):
    skip_unless_shardlog("Apache Kafka takes a full log dir offline (and stops with a single dir)")
    b = broker_factory(data_dir=small_fs / "data", flush="always")
    topic = "disk-full"
    cli_create_topic(b.bootstrap, topic, 1, config={"segment.bytes": str(8 << 20)})

    results = []

    def dr(err, msg):
        results.append((err, msg.offset() if err is None else None))

    p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 0, "retries": 0,
                  "enable.idempotence": False, "message.timeout.ms": 30000})

    def produce_one(i: int):
        results.clear()
        p.produce(topic, key=str(i).encode(), value=VALUE, partition=0, on_delivery=dr)
        assert p.flush(60) == 0
        [(err, off)] = results
        return err, off

    acked = {}
    for i in range(20):
        err, off = produce_one(i)
        assert err is None, err
        acked[off] = str(i).encode()

    filler = small_fs / "filler"
    _fill(filler, 1 << 20)
    _fill(filler, 4096)

    first_err = None
    for i in range(20, 20 + MAX_ATTEMPTS):
        err, off = produce_one(i)
        if err is not None:
            first_err = err
            break
        acked[off] = str(i).encode()
    assert first_err is not None, "the filesystem is full but every produce succeeded"
    assert first_err.code() == KafkaError.KAFKA_STORAGE_ERROR, f"expected KAFKA_STORAGE_ERROR (56), got {first_err}"
    b.assert_alive()

    # Space returns: produce must succeed again (the loop is only a safety net).
    filler.unlink()
    deadline = time.monotonic() + SAFETY_NET_S
    while True:
        err, off = produce_one(10_000)
        if err is None:
            acked[off] = b"10000"
            break
        assert time.monotonic() < deadline, f"produce still failing {SAFETY_NET_S} s after space returned: {err}"
        time.sleep(0.2)
    b.assert_alive()

    got = {c.offset: c.key for c in consume_confluent(b.bootstrap, topic, 1)[0]}
    lost = [o for o, k in acked.items() if got.get(o) != k]
    assert not lost, f"acknowledged records missing after disk full: offsets {lost[:10]}"
    offs = sorted(got)
    assert offs == list(range(len(offs))), "offsets not dense"
