"""ListOffsets: by timestamp (confluent-kafka offsets_for_times, Java offsetsForTimes and
AdminClient OffsetSpec.forTimestamp), earliest, latest, and max timestamp
(Java AdminClient OffsetSpec.maxTimestamp()).

Layout of the topic (3 partitions, CreateTime timestamps chosen by the test, base = an hour ago):
  p0: two batches of 10 records, ts = base + 1000*i for offsets i = 0..19 (monotonic)
  p1: one batch of 10 records, ts = base + 10*i except offset 4, which has base + 100000
      (the maximum, in the middle of the batch)
  p2: empty
"""

from __future__ import annotations

import pytest
from confluent_kafka import TopicPartition

from clients import (Rec, cli_create_topic, confluent_consumer, java_tool, json_lines, now_ms,
                     produce_confluent, watermarks)


@pytest.fixture(scope="module")
def ts_topic(module_broker):
    bootstrap = module_broker.bootstrap
    topic = "list-offsets-" + str(now_ms())
    cli_create_topic(bootstrap, topic, 3)
    base = (now_ms() - 3_600_000) // 1000 * 1000
    p0a = [Rec(f"k{i}".encode(), f"p0-{i}".encode(), (), base + 1000 * i) for i in range(10)]
    p0b = [Rec(f"k{i}".encode(), f"p0-{i}".encode(), (), base + 1000 * i) for i in range(10, 20)]
    p1 = [Rec(f"k{i}".encode(), f"p1-{i}".encode(), (), base + (100_000 if i == 4 else 10 * i))
          for i in range(10)]
    # linger.ms makes each list one batch; flush between them makes separate batches.
    for recs, part in ((p0a, 0), (p0b, 0), (p1, 1)):
        produced = produce_confluent(bootstrap, topic, recs, partition=part, **{"linger.ms": 200})
        assert [p.partition for p in produced] == [part] * len(recs)
    return bootstrap, topic, base


def _confluent_offsets_for_times(bootstrap, topic, part, ts):
    c = confluent_consumer(bootstrap)
    try:
        [r] = c.offsets_for_times([TopicPartition(topic, part, ts)], timeout=30)
        assert r.error is None, r.error
        return r.offset
    finally:
        c.close()


def _expected(base):
    """(partition, target timestamp) -> (offset, timestamp) or None when no record has ts >= target."""
    return {
        (0, base - 5000): (0, base),
        (0, base): (0, base),
        (0, base + 1): (1, base + 1000),
        (0, base + 4500): (5, base + 5000),
        (0, base + 9000): (9, base + 9000),
        (0, base + 9001): (10, base + 10000),   # first record of the second batch
        (0, base + 12500): (13, base + 13000),
        (0, base + 19000): (19, base + 19000),
        (0, base + 19001): None,
        (1, base): (0, base),
        (1, base + 35): (4, base + 100_000),     # offsets 0..3 are below, offset 4 is the first >=
        (1, base + 100_000): (4, base + 100_000),
        (1, base + 100_001): None,
        (2, base): None,
    }


def test_offsets_for_times_confluent(ts_topic):
    bootstrap, topic, base = ts_topic
    for (part, ts), want in _expected(base).items():
        got = _confluent_offsets_for_times(bootstrap, topic, part, ts)
        want_off = -1 if want is None else want[0]
        assert got == want_off, f"offsets_for_times(p{part}, base{ts - base:+d}) = {got}, want {want_off}"


def test_offsets_for_times_java(ts_topic):
    bootstrap, topic, base = ts_topic
    exp = _expected(base)
    queries = sorted({ts for (_, ts) in exp})
    r = java_tool("offsets-for-times", "--bootstrap", bootstrap, "--topic", topic,
                  "--partitions", "0,1,2", "--ts", ",".join(map(str, queries)))
    got = {(l["p"], l["query"]): (None if l["o"] is None else (l["o"], l["ts"])) for l in json_lines(r.stdout)}
    for key, want in exp.items():
        assert got[key] == want, f"offsetsForTimes(p{key[0]}, base{key[1] - base:+d}) = {got[key]}, want {want}"


def test_list_offsets_earliest_latest(ts_topic):
    bootstrap, topic, _ = ts_topic
    assert watermarks(bootstrap, topic, 3) == {0: (0, 20), 1: (0, 10), 2: (0, 0)}
    for spec, want in (("earliest", {0: 0, 1: 0, 2: 0}), ("latest", {0: 20, 1: 10, 2: 0})):
        r = java_tool("list-offsets", "--bootstrap", bootstrap, "--topic", topic, "--spec", spec)
        got = {l["p"]: l["o"] for l in json_lines(r.stdout)}
        assert got == want, f"ListOffsets {spec}: {got}, want {want}"


def test_list_offsets_max_timestamp(ts_topic):
    bootstrap, topic, base = ts_topic
    r = java_tool("list-offsets", "--bootstrap", bootstrap, "--topic", topic, "--spec", "max-timestamp")
    got = {l["p"]: (l["o"], l["ts"]) for l in json_lines(r.stdout)}
    assert got[0] == (19, base + 19000), got
    assert got[1] == (4, base + 100_000), got
    assert got[2] == (-1, -1), got


def test_list_offsets_admin_for_timestamp(ts_topic):
    bootstrap, topic, base = ts_topic
    r = java_tool("list-offsets", "--bootstrap", bootstrap, "--topic", topic, "--spec", f"ts:{base + 4500}")
    got = {l["p"]: (l["o"], l["ts"]) for l in json_lines(r.stdout)}
    assert got[0] == (5, base + 5000), got
    assert got[1] == (4, base + 100_000), got
    assert got[2][0] == -1, got
