"""Produce keyed records with headers through each real client, consume them back, compare.

Each client run: a fresh 6-partition topic, 100k records (SHARDLOG_TEST_RECORDS overrides,
for local iteration only), then every partition read back from the beginning with assign()
and compared record by record, in offset order, with the producer's delivery reports:
offset, key, value, headers, CreateTime timestamp.

Codec matrix (none, gzip, snappy, lz4, zstd): 20k records each, produced by confluent-kafka
and read by Java, and produced by Java and read by confluent-kafka, so every stored
compressed batch is decoded by a different client than the one that wrote it.
"""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from clients import (Consumed, Rec, admin_create_topic, assert_dense, cli_create_topic, compare,
                     consume_confluent, consume_java, consume_kafka_python, kcat_bin, make_records,
                     now_ms, produce_confluent, produce_java, produce_kafka_python)

N_CLIENT = int(os.environ.get("SHARDLOG_TEST_RECORDS", "100000"))
N_CODEC = int(os.environ.get("SHARDLOG_TEST_CODEC_RECORDS", "20000"))
PARTITIONS = 6
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def _check_spread(produced, n):
    assert len(produced) == n
    parts = {p.partition for p in produced}
    assert parts == set(range(PARTITIONS)), f"records landed only in partitions {sorted(parts)}"


def test_confluent_kafka_roundtrip(bootstrap, topic_name):
    cli_create_topic(bootstrap, topic_name, PARTITIONS)
    recs = make_records(N_CLIENT, seed=1)
    produced = produce_confluent(bootstrap, topic_name, recs)
    _check_spread(produced, N_CLIENT)
    consumed = consume_confluent(bootstrap, topic_name, PARTITIONS)
    assert_dense(consumed)
    assert compare(produced, consumed) == N_CLIENT


def test_kafka_python_roundtrip_topic_from_admin_client(bootstrap, topic_name):
    # This topic comes from confluent-kafka's AdminClient (CreateTopics), not the CLI.
    admin_create_topic(bootstrap, topic_name, PARTITIONS)
    recs = make_records(N_CLIENT, seed=2)
    produced = produce_kafka_python(bootstrap, topic_name, recs)
    _check_spread(produced, N_CLIENT)
    consumed = consume_kafka_python(bootstrap, topic_name, PARTITIONS)
    assert_dense(consumed)
    assert compare(produced, consumed) == N_CLIENT


def test_java_roundtrip(bootstrap, topic_name, tmp_path):
    cli_create_topic(bootstrap, topic_name, PARTITIONS)
    recs = make_records(N_CLIENT, seed=3)
    produced = produce_java(bootstrap, topic_name, recs, tmp_path)  # idempotence on (default)
    _check_spread(produced, N_CLIENT)
    consumed = consume_java(bootstrap, topic_name, PARTITIONS)
    assert_dense(consumed)
    assert compare(produced, consumed) == N_CLIENT


def _parse_kcat_headers(s: str) -> tuple:
    if not s:
        return ()
    return tuple((kv.split("=", 1)[0], kv.split("=", 1)[1].encode()) for kv in s.split(","))


def test_kcat_roundtrip(bootstrap, topic_name, tmp_path):
    """kcat cannot set per-record timestamps nor report offsets: the file order must be
    kept within each partition, every record must arrive exactly once, each key must map
    to one partition, and CreateTime must lie within the produce run."""
    kcat = kcat_bin()
    cli_create_topic(bootstrap, topic_name, PARTITIONS)
    recs = make_records(N_CLIENT, seed=4, ascii_only=True, with_ts=False)
    src = tmp_path / "kcat-in.txt"
    with open(src, "wb") as f:
        for r in recs:
            f.write(r.key + b"\t" + r.value + b"\n")
    fixed_headers = (("client", b"kcat"), ("run", topic_name.encode()))
    t0 = now_ms()
    cmd = [kcat, "-P", "-b", bootstrap, "-t", topic_name, "-K", "\t", "-l", str(src),
           "-X", "linger.ms=5", "-X", "acks=all"]
    for k, v in fixed_headers:
        cmd += ["-H", f"{k}={v.decode()}"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    t1 = now_ms()
    assert r.returncode == 0, f"kcat -P failed ({r.returncode}): {r.stderr[-3000:]}"

    r = subprocess.run([kcat, "-C", "-b", bootstrap, "-t", topic_name, "-o", "beginning", "-e", "-q",
                        "-f", "%p\t%o\t%T\t%k\t%s\t%h\n"],
                       capture_output=True, timeout=600)
    assert r.returncode == 0, f"kcat -C failed ({r.returncode}): {r.stderr[-3000:]!r}"
    consumed: dict[int, list[Consumed]] = {}
    for line in r.stdout.decode().splitlines():
        if not line:
            continue
        p, o, ts, k, v, h = line.split("\t")
        consumed.setdefault(int(p), []).append(
            Consumed(int(p), int(o), k.encode(), v.encode(), _parse_kcat_headers(h), int(ts)))
    for recs_p in consumed.values():
        recs_p.sort(key=lambda c: c.offset)
    assert_dense(consumed)

    seen = set()
    key_part: dict[bytes, int] = {}
    for part, got in consumed.items():
        last_idx, last_ts = -1, 0
        for c in got:
            idx = int(c.value.split(b"-", 2)[1])
            assert idx not in seen, f"record {idx} consumed twice (partition {part} offset {c.offset})"
            seen.add(idx)
            assert idx > last_idx, f"partition {part} offset {c.offset}: file order broken ({idx} after {last_idx})"
            rec = recs[idx]
            assert c.key == rec.key and c.value == rec.value, f"partition {part} offset {c.offset}: record differs"
            assert c.headers == fixed_headers, f"partition {part} offset {c.offset}: headers {c.headers}"
            assert key_part.setdefault(c.key, part) == part, f"key {c.key!r} in two partitions"
            assert t0 - 1000 <= c.ts <= t1 + 1000, f"partition {part} offset {c.offset}: CreateTime {c.ts} outside the run"
            assert c.ts >= last_ts, f"partition {part} offset {c.offset}: CreateTime went backwards"
            last_idx, last_ts = idx, c.ts
    assert len(seen) == N_CLIENT, f"consumed {len(seen)} distinct records of {N_CLIENT}"
    assert set(consumed) == set(range(PARTITIONS))


@pytest.mark.parametrize("codec", CODECS)
def test_codec_confluent_to_java(bootstrap, topic_name, codec):
    cli_create_topic(bootstrap, topic_name, PARTITIONS)
    recs = make_records(N_CODEC, seed=10 + CODECS.index(codec))
    produced = produce_confluent(bootstrap, topic_name, recs, compression=codec)
    consumed = consume_java(bootstrap, topic_name, PARTITIONS)
    assert_dense(consumed)
    assert compare(produced, consumed) == N_CODEC


@pytest.mark.parametrize("codec", CODECS)
def test_codec_java_to_confluent(bootstrap, topic_name, codec, tmp_path):
    cli_create_topic(bootstrap, topic_name, PARTITIONS)
    recs = make_records(N_CODEC, seed=20 + CODECS.index(codec))
    produced = produce_java(bootstrap, topic_name, recs, tmp_path, compression=codec)
    consumed = consume_confluent(bootstrap, topic_name, PARTITIONS)
    assert_dense(consumed)
    assert compare(produced, consumed) == N_CODEC
