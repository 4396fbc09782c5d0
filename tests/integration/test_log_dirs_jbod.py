"""Several log dirs (JBOD, Kafka's log.dirs; issue 13 point 1): a broker started with two log
dirs spreads partitions over both (a new partition goes to the dir with the fewest), reports
every dir with its partitions and real sizes through Kafka's own `kafka-log-dirs --describe`
and the Java AdminClient, finds every partition again after a restart, removes a deleted
topic's partitions from whichever dir holds them, and answers AlterReplicaLogDirs per dir.
Passes against Kafka 4.1 too (SHARDLOG_TEST_TARGET=kafka), except where noted: Kafka moves a
replica to another log dir, shardlog answers KAFKA_STORAGE_ERROR (docs/kafka-apis.md).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

import kafkawire as w
from clients import (admin_create_topic, consume_confluent, java_tool, json_lines, kafka_tool, make_records,
                     produce_confluent, segment_bytes, wait_topic)
from conftest import SHARDLOG_BIN, is_kafka, skip_unless_shardlog, wait_for

TOPICS = {"jbod-a": 6, "jbod-b": 3}
RECORDS_PER_TOPIC = 300

KAFKA_STORAGE_ERROR, LOG_DIR_NOT_FOUND = 56, 57


def _two_dir_broker(broker_factory, tmp_path):
    dirs = [tmp_path / "disk1" / "logs", tmp_path / "disk2" / "logs"]
    return broker_factory(log_dirs=dirs), dirs


def _describe_log_dirs(bootstrap: str) -> dict[str, dict[str, int]]:
    """kafka-log-dirs --describe: {log dir: {"<topic>-<p>": size}} for the test's topics."""
    r = kafka_tool("org.apache.kafka.tools.LogDirsCommand", "--bootstrap-server", bootstrap, "--describe",
                   "--topic-list", ",".join(TOPICS))
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads([l for l in r.stdout.splitlines() if l.startswith("{")][-1])
    (b,) = doc["brokers"]
    out = {}
    for d in b["logDirs"]:
        assert d["error"] is None, d
        assert all(p["offsetLag"] == 0 and p["isFuture"] is False for p in d["partitions"]), d
        out[d["logDir"]] = {p["partition"]: p["size"] for p in d["partitions"]}
    return out


def _produce_all(bootstrap: str) -> dict[str, list[bytes]]:
    sent = {}
    for i, (topic, _) in enumerate(TOPICS.items()):
        recs = make_records(RECORDS_PER_TOPIC, seed=40 + i)
        produce_confluent(bootstrap, topic, recs)
        sent[topic] = sorted(r.value for r in recs)
    return sent


def _consume_all(bootstrap: str) -> dict[str, list[bytes]]:
    got = {}
    for topic, n in TOPICS.items():
        wait_topic(bootstrap, topic, n)
        deadline = time.monotonic() + 60  # safety net: leaders settle after a restart (Kafka)
        while True:
            try:
                by_partition = consume_confluent(bootstrap, topic, n)
                break
            except KafkaException as e:
                assert e.args[0].retriable() and time.monotonic() < deadline, e
                time.sleep(0.5)
        got[topic] = sorted(c.value for cs in by_partition.values() for c in cs)
    return got


def test_partitions_spread_over_two_log_dirs_and_survive_restart(broker_factory, tmp_path):
    b, dirs = _two_dir_broker(broker_factory, tmp_path)
    for topic, n in TOPICS.items():
        admin_create_topic(b.bootstrap, topic, n)
    sent = _produce_all(b.bootstrap)

    described = _describe_log_dirs(b.bootstrap)
    assert set(described) == {str(d) for d in dirs}, described
    every = {f"{t}-{p}" for t, n in TOPICS.items() for p in range(n)}
    placed = [set(parts) for parts in described.values()]
    assert placed[0].isdisjoint(placed[1]) and placed[0] | placed[1] == every, described
    # Fewest-partitions placement from two empty dirs: neither dir is left out of a topic.
    for topic in TOPICS:
        for parts in placed:
            assert any(p.startswith(topic + "-") for p in parts), (topic, described)
    for d, parts in described.items():
        for name, size in parts.items():
            assert (Path(d) / name).is_dir(), f"{name} reported in {d} but not there"
            assert size == segment_bytes(Path(d) / name) and size > 0, (d, name, size)

    # The Java AdminClient sees the same two dirs with their file system's bytes.
    java = {d["dir"]: d for d in json_lines(java_tool("describe-log-dirs", "--bootstrap", b.bootstrap).stdout)}
    assert set(java) == {str(d) for d in dirs}, java
    for d, info in java.items():
        assert info["error"] is None and info["total"] > 0 and 0 <= info["usable"] <= info["total"], info
        mine = {k: v["size"] for k, v in info["replicas"].items() if k.rsplit("-", 1)[0] in TOPICS}
        assert mine == described[d], (d, mine, described[d])

    b.restart()
    assert _consume_all(b.bootstrap) == sent
    assert {d: set(p) for d, p in _describe_log_dirs(b.bootstrap).items()} == \
        {d: set(p) for d, p in described.items()}, "a partition changed dir across the restart"


def test_alter_replica_log_dirs_with_two_dirs(broker_factory, tmp_path):
    b, dirs = _two_dir_broker(broker_factory, tmp_path)
    admin_create_topic(b.bootstrap, "jbod-alter", 2)
    produce_confluent(b.bootstrap, "jbod-alter", make_records(20, seed=7))
    where = {}
    for d in dirs:
        for p in (0, 1):
            if (d / f"jbod-alter-{p}").is_dir():
                where[p] = d
    assert set(where) == {0, 1}, where
    other = {p: next(d for d in dirs if d != where[p]) for p in where}
    assert w.alter_replica_log_dirs(b.bootstrap, str(where[0]), "jbod-alter", [0]) == {0: 0}
    assert w.alter_replica_log_dirs(b.bootstrap, str(tmp_path / "not-a-log-dir"), "jbod-alter", [0]) == {0: LOG_DIR_NOT_FOUND}
    moved = w.alter_replica_log_dirs(b.bootstrap, str(other[1]), "jbod-alter", [1])
    if is_kafka():
        assert moved == {1: 0}  # Kafka copies the replica into a future log there, then swaps
    else:
        assert moved == {1: KAFKA_STORAGE_ERROR}  # shardlog does not move replicas between dirs
        assert (where[1] / "jbod-alter-1").is_dir() and not (other[1] / "jbod-alter-1").exists()


def test_delete_topic_removes_partitions_from_every_log_dir(broker_factory, tmp_path):
    b, dirs = _two_dir_broker(broker_factory, tmp_path)
    admin_create_topic(b.bootstrap, "jbod-doomed", 4)
    produce_confluent(b.bootstrap, "jbod-doomed", make_records(40, seed=9))
    held = [[p for p in range(4) if (d / f"jbod-doomed-{p}").is_dir()] for d in dirs]
    assert all(held) and sorted(held[0] + held[1]) == [0, 1, 2, 3], held
    a = AdminClient({"bootstrap.servers": b.bootstrap})
    a.delete_topics(["jbod-doomed"], operation_timeout=30)["jbod-doomed"].result(timeout=60)
    deadline = time.monotonic() + 60  # safety net: the directories go when the deletion is applied
    while any((d / f"jbod-doomed-{p}").exists() for d in dirs for p in range(4)):
        assert time.monotonic() < deadline, [sorted(x.name for x in d.iterdir()) for d in dirs]
        time.sleep(0.2)
    # The name is free again, in whichever dir has fewer partitions now.
    admin_create_topic(b.bootstrap, "jbod-doomed", 1)


def test_same_partition_in_two_log_dirs_stops_startup(broker_factory, tmp_path):
    skip_unless_shardlog("Kafka's own start-up check is the model; its process and message differ")
    b, dirs = _two_dir_broker(broker_factory, tmp_path)
    admin_create_topic(b.bootstrap, "jbod-twice", 1)
    # Metadata names the leader before its shard has opened the partition's directory.
    wait_for("the partition's directory", lambda: any((d / "jbod-twice-0").is_dir() for d in dirs), 30)
    b.stop()
    src = next(d for d in dirs if (d / "jbod-twice-0").is_dir())
    dst = next(d for d in dirs if d != src)
    shutil.copytree(src / "jbod-twice-0", dst / "jbod-twice-0")
    r = subprocess.run([str(SHARDLOG_BIN), "serve", "--listen", b.bootstrap, "--admin-listener", "",
                        "--log-dirs", ",".join(str(d) for d in dirs)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    out = r.stdout + r.stderr
    assert "jbod-twice-0 has a directory in two log dirs" in out, out[-3000:]
    assert str(dirs[0]) in out and str(dirs[1]) in out, out[-3000:]
