"""Tiered storage (issue 30) on a 3-node cluster, RF 3, against a real S3-compatible server
(SeaweedFS): the leader is killed (-9) while it uploads; the new leader continues where
the finished uploads stopped (the remote segment records are in the metadata quorum,
fenced by leader epoch), the killed leader's unfinished upload is cleaned up, and a
consumer from offset 0 gets every acknowledged record exactly once, in order, the history
from the object store.
"""

from __future__ import annotations

import struct
import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

import conftest
from clients import Rec, consume_confluent, produce_confluent
from conftest import LOG_ROOT, wait_for
from object_store import ObjectStore
from test_tiered_storage import SEGMENT_BYTES, list_offsets_v9, remote_logs

DEADLINE_S = 120


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    conftest.skip_unless_shardlog("tiered storage against SeaweedFS")
    s = ObjectStore(tmp_path_factory.mktemp("cluster-store"), LOG_ROOT / f"weed-cluster-{uuid.uuid4().hex[:6]}.log").start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, store):
    args = []
    for k, v in {**store.broker_settings("cluster/"), "remote.log.manager.task.interval.ms": "200",
                 "log.retention.check.interval.ms": "500", "auto.leader.rebalance.enable": "false"}.items():
        args += ["--" + k.replace(".", "-"), v]
    yield from conftest.running_cluster(tmp_path_factory, "tiered", extra_args=args)


def leader_of(node, topic: str) -> int | None:
    t = AdminClient({"bootstrap.servers": node.bootstrap}).list_topics(topic, timeout=10).topics.get(topic)
    if t is None or t.error is not None or 0 not in t.partitions:
        return None
    return t.partitions[0].leader


def test_a_leader_killed_while_uploading_leaves_no_gap_and_no_duplicate(cluster, store):
    topic = f"tiered-kill-{uuid.uuid4().hex[:6]}"
    nodes = cluster.brokers
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3, config={
        "remote.storage.enable": "true", "segment.bytes": str(SEGMENT_BYTES), "local.retention.bytes": str(2 * SEGMENT_BYTES),
        "min.insync.replicas": "2"})], operation_timeout=30)[topic].result(timeout=60)
    values = [b"%06d-" % i + bytes([97 + i % 26]) * 1000 for i in range(12_000)]
    first = produce_confluent(cluster.bootstrap, topic, [Rec(None, v, (), None) for v in values[:6000]], partition=0, **{"batch.size": 65536})
    assert len(first) == 6000
    wait_for("some segments uploaded", lambda: len(remote_logs(store, "cluster/", topic)) >= 2, DEADLINE_S)
    old = leader_of(nodes[0], topic)
    victim = cluster.node(old)
    # More data, and the leader killed in the middle of uploading it: the store hangs
    # (SIGSTOP), the upload has begun (CopySegmentStarted is committed), kill -9.
    store.pause()
    try:
        uploading = victim.log_since_start().count("uploading a segment to remote storage")
        produce_confluent(victim.bootstrap, topic, [Rec(None, v, (), None) for v in values[6000:8000]], partition=0, **{"batch.size": 65536})
        wait_for("an upload begun", lambda: victim.log_since_start().count("uploading a segment to remote storage") > uploading, DEADLINE_S)
        victim.kill9()
    finally:
        store.resume()
    survivor = next(n for n in nodes if n.node_id != old)
    new = wait_for("a new leader", lambda: (lambda l: l if l not in (None, -1, old) else None)(leader_of(survivor, topic)), DEADLINE_S)
    rest = produce_confluent(cluster.node(new).bootstrap, topic, [Rec(None, v, (), None) for v in values[8000:]], partition=0,
                             **{"batch.size": 65536})
    assert len(rest) == 4000
    # The new leader uploads through its own sealed segments, and its local log starts
    # past what the dead leader had uploaded.
    wait_for("the new leader uploads the rest",
             lambda: (lambda r: r[0] == 0 and r[1] >= 10_000)(list_offsets_v9(cluster.node(new).bootstrap, topic, -5)), DEADLINE_S)
    victim.start()
    cluster.wait_ready(timeout_s=DEADLINE_S, nodes=[victim])
    # Every object in the bucket is a whole segment whose .indexes exist: the dead
    # leader's unfinished upload, if any, was deleted by the new leader.
    def objects_whole() -> bool:
        keys = store.keys(f"cluster/{topic}-")
        logs = [k[:-4] for k in keys if k.endswith(".log")]
        return bool(logs) and all(k + ".indexes" in keys for k in logs) and len(keys) == 2 * len(logs)
    wait_for("only whole segments in the bucket", objects_whole, DEADLINE_S)
    # The dead leader's unfinished upload was found and deleted by the new leader.
    wait_for("the unfinished upload deleted", lambda: "remote segment deleted" in cluster.node(new).log_since_start(), DEADLINE_S)
    for key in [k for k in store.keys(f"cluster/{topic}-") if k.endswith(".log")]:
        data, pos = store.get(key), 0
        while pos < len(data):
            _, length = struct.unpack_from(">qi", data, pos)
            assert pos + 12 + length <= len(data), f"{key}: a batch cut at {pos}"
            pos += 12 + length
    # What a consumer sees: every acknowledged record once, in order, from offset 0.
    got = consume_confluent(cluster.node(new).bootstrap, topic, 1, **{"max.partition.fetch.bytes": 200_000})[0]
    assert [c.offset for c in got] == list(range(len(values)))
    assert [c.value for c in got] == values
