"""Tiered storage (issue 30) on a 3-node cluster against a real S3-compatible server
(SeaweedFS):
- RF 3, the leader is killed (-9) while it uploads; the new leader continues where the
  finished uploads stopped (the remote segment records are in the metadata quorum,
  fenced by leader epoch), the killed leader's unfinished upload is cleaned up, and a
  consumer from offset 0 gets every acknowledged record exactly once, in order, the
  history from the object store;
- a replica added on another broker (Kafka's reassignment tool) starts from the tiered
  offset (OFFSET_MOVED_TO_TIERED_STORAGE): its local log begins where the remote log
  ends, it copies no history, and once it leads it knows the producers and serves the
  whole log, history from the object store;
- OffsetForLeaderEpoch answers epochs whose records are all remote (from the leader's
  epoch cache, and from the cache a new replica rebuilt from the remote log);
- a topic deleted while its only replica is down loses its objects when that replica
  returns (its partition directory is stray at start-up);
- a broker lost for good is replaced by a new node id (the reassignment tool moves its
  replica there): the replacement starts at the tiered offset, and leads and serves the
  whole log.
"""

from __future__ import annotations

import struct
import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

import conftest
from clients import Rec, consume_confluent, produce_confluent
from conftest import LOG_ROOT, wait_for
from object_store import ObjectStore
from kafkawire import connect
from test_leader_election import elect
from test_offset_for_leader_epoch import ask as offset_for_leader_epoch
from test_reassignment import reassign_tool
from test_table_bounds import described_producers, idempotent_batch, produce
from test_tiered_storage import SEGMENT_BYTES, list_offsets_flex, remote_logs

DEADLINE_S = 120


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    conftest.skip_unless_shardlog("tiered storage against SeaweedFS")
    s = ObjectStore(tmp_path_factory.mktemp("cluster-store"), LOG_ROOT / f"weed-cluster-{uuid.uuid4().hex[:6]}.log").start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, store):
    args = store.broker_args("cluster/", {"remote.log.manager.task.interval.ms": "200", "log.retention.check.interval.ms": "500",
                                  "auto.leader.rebalance.enable": "false"})
    yield from conftest.running_cluster(tmp_path_factory, "tiered", extra_args=args)


def leader_of(node, topic: str) -> int | None:
    t = AdminClient({"bootstrap.servers": node.bootstrap}).list_topics(topic, timeout=10).topics.get(topic)
    if t is None or t.error is not None or 0 not in t.partitions:
        return None
    return t.partitions[0].leader


def epoch_before_latest_ends_at(node, topic: str) -> tuple[int, int, int]:
    """OffsetForLeaderEpoch (consumer side) for the epoch below the partition's current
    one: (error, epoch, end offset). The current epoch is the one whose answer ends at
    the log end."""
    end = list_offsets_flex(node.bootstrap, topic, -1)[1]
    answers = {e: offset_for_leader_epoch(node.bootstrap, [(topic, 0, -1, e)])[(topic, 0)] for e in range(0, 16)}
    latest = max(e for e, a in answers.items() if a == (0, e, end))
    assert latest > 0, answers
    return answers[latest - 1]


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
    # No upload in flight (one caught by the pause below would hang until its timeout,
    # holding back the one this test waits for).
    def uploads_idle() -> bool:
        log = victim.log_since_start()
        return log.count("uploading a segment to remote storage") == log.count("segment copied to remote storage")
    wait_for("the uploads so far finished", lambda: uploads_idle() and (time.sleep(1) or uploads_idle()), DEADLINE_S)
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
             lambda: (lambda r: r[0] == 0 and r[1] >= 10_000)(list_offsets_flex(cluster.node(new).bootstrap, topic, -5)), DEADLINE_S)
    # OffsetForLeaderEpoch over the remote part: the dead leader's epoch ended where the
    # new one began (8000), though the new leader's local log starts past that offset.
    new_node = cluster.node(new)
    wait_for("the old epoch's records remote only", lambda: list_offsets_flex(new_node.bootstrap, topic, -4)[1] > 8000, DEADLINE_S)
    error, epoch, end = epoch_before_latest_ends_at(new_node, topic)
    assert (error, end) == (0, 8000) and epoch >= 0, (error, epoch, end)
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


def replicas_and_isr(node, topic: str) -> tuple[list[int], list[int]]:
    t = AdminClient({"bootstrap.servers": node.bootstrap}).list_topics(topic, timeout=10).topics.get(topic)
    if t is None or t.error is not None or 0 not in t.partitions:
        return [], []
    return list(t.partitions[0].replicas), list(t.partitions[0].isrs)


def test_a_new_replica_starts_from_the_tiered_offset_without_copying_history(cluster, store, tmp_path):
    topic = f"tiered-join-{uuid.uuid4().hex[:6]}"
    first, second, newcomer = sorted(n.node_id for n in cluster.brokers)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[first, second]], config={
        "remote.storage.enable": "true", "segment.bytes": str(SEGMENT_BYTES), "local.retention.bytes": str(2 * SEGMENT_BYTES),
        "min.insync.replicas": "1"})], operation_timeout=30)[topic].result(timeout=60)
    leader = cluster.node(wait_for("a leader", lambda: (lambda l: l if l in (first, second) else None)(leader_of(cluster.brokers[0], topic)),
                                   DEADLINE_S))
    # An idempotent producer whose one batch (offset 0) ends up in remote storage only.
    pid = 7_000_001
    sock = connect(leader.bootstrap)
    try:
        r = produce(sock, 1, topic, idempotent_batch(pid))
    finally:
        sock.close()
    assert r["error_code"] == 0 and r["base_offset"] == 0, r
    values = [b"%06d-" % i + bytes([97 + i % 26]) * 1000 for i in range(8000)]
    assert len(produce_confluent(leader.bootstrap, topic, [Rec(None, v, (), None) for v in values], partition=0, **{"batch.size": 65536})) == 8000
    wait_for("history uploaded and deleted locally",
             lambda: (lambda r: r[0] == 0 and r[1] > 4000)(list_offsets_flex(leader.bootstrap, topic, -4)), DEADLINE_S)
    tiered_end = list_offsets_flex(leader.bootstrap, topic, -5)[1] + 1
    assert tiered_end > 4000

    moved = reassign_tool(cluster.bootstrap, tmp_path, [(topic, 0, [newcomer, first])], "--execute")
    assert moved.returncode == 0, moved.stderr[-2000:]
    wait_for("the newcomer in sync and the move done",
             lambda: replicas_and_isr(cluster.brokers[0], topic)[0] == [newcomer, first] and newcomer in replicas_and_isr(cluster.brokers[0], topic)[1],
             DEADLINE_S)
    joined = cluster.node(newcomer)
    assert "restarting the replica at the remote log's end" in joined.log_since_start()
    local = sorted(int(f.stem) for f in joined.data_dir.rglob("*.log") if f.parent.name == f"{topic}-0")
    assert local and local[0] >= tiered_end, f"the newcomer's log starts at {local[:1]}, below the tiered offset {tiered_end}: it copied history"

    # The newcomer leads (its peer killed): the producer it never saw a batch of is known
    # (the remote producer snapshot), and the whole log is served, history remote.
    current = leader_of(joined, topic)
    victim = cluster.node(current) if current not in (None, -1, newcomer) else None
    if victim is not None:
        victim.kill9()
    try:
        wait_for("the newcomer leads", lambda: leader_of(joined, topic) == newcomer, DEADLINE_S)
        assert list_offsets_flex(joined.bootstrap, topic, -2) == (0, 0)
        assert list_offsets_flex(joined.bootstrap, topic, -4) == (0, local[0])
        assert pid in described_producers(joined.bootstrap, topic)
        # Its leader epochs came from the remote log: the epoch before its own ends at the
        # log end it took over (the history's epochs answered from the rebuilt cache).
        error, epoch, end = epoch_before_latest_ends_at(joined, topic)
        assert (error, end) == (0, len(values) + 1) and epoch >= 0, (error, epoch, end)
        got = consume_confluent(joined.bootstrap, topic, 1, **{"max.partition.fetch.bytes": 200_000})[0]
        assert [c.offset for c in got] == list(range(len(values) + 1))
        assert [c.value for c in got[1:]] == values
        assert got[0].value == b"from-%d" % pid
    finally:
        if victim is not None:
            victim.start()
            cluster.wait_ready(timeout_s=DEADLINE_S, nodes=[victim])


def test_a_topic_deleted_while_its_replica_was_down_loses_its_objects_when_the_replica_returns(cluster, store):
    """Every replica deletes a deleted topic's objects when it applies the deletion; with
    its only replica down then, nobody can. The replica finds the partition stray at its
    next start (the topic is gone) and deletes the objects under that topic id."""
    topic = f"tiered-gone-{uuid.uuid4().hex[:6]}"
    holder = cluster.node(max(n.node_id for n in cluster.brokers))
    survivor = next(n for n in cluster.brokers if n.node_id != holder.node_id)
    admin = AdminClient({"bootstrap.servers": survivor.bootstrap})
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[holder.node_id]], config={
        "remote.storage.enable": "true", "segment.bytes": str(SEGMENT_BYTES), "local.retention.bytes": str(2 * SEGMENT_BYTES)})],
        operation_timeout=30)[topic].result(timeout=60)
    wait_for("the holder leads", lambda: leader_of(holder, topic) == holder.node_id, DEADLINE_S)
    values = [b"%06d-" % i + bytes([97 + i % 26]) * 1000 for i in range(4000)]
    assert len(produce_confluent(holder.bootstrap, topic, [Rec(None, v, (), None) for v in values], partition=0,
                                 **{"batch.size": 65536})) == 4000
    wait_for("segments uploaded", lambda: len(remote_logs(store, "cluster/", topic)) >= 2, DEADLINE_S)
    holder.kill9()
    try:
        admin.delete_topics([topic], operation_timeout=30)[topic].result(timeout=60)
        wait_for("the topic gone from the metadata",
                 lambda: topic not in AdminClient({"bootstrap.servers": survivor.bootstrap}).list_topics(timeout=10).topics, DEADLINE_S)
        # No running broker held a replica: the objects are still there.
        time.sleep(2)
        assert store.keys(f"cluster/{topic}-"), "objects deleted with no replica up: the check below proves nothing"
    finally:
        holder.start()
        cluster.wait_ready(timeout_s=DEADLINE_S, nodes=[holder])
    wait_for("the returning replica deletes the objects", lambda: not store.keys(f"cluster/{topic}-"), DEADLINE_S)
    assert "topic deleted while this broker was down: its remote objects deleted" in holder.log_since_start()


def test_a_lost_broker_is_replaced_by_a_new_node_that_copies_no_history(cluster, store, tmp_path):
    """A broker lost for good (kill -9, its disk gone) is replaced by a new node id, and
    Kafka's reassignment tool moves the lost broker's replica to it: the replacement
    starts at the tiered offset, joins the ISR, and holds no history locally. Last in this
    module: the lost broker never comes back."""
    from cluster_harness import Node, free_port
    topic = f"tiered-replace-{uuid.uuid4().hex[:6]}"
    ids = sorted(n.node_id for n in cluster.brokers)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[ids], config={
        "remote.storage.enable": "true", "segment.bytes": str(SEGMENT_BYTES), "local.retention.bytes": str(2 * SEGMENT_BYTES),
        "min.insync.replicas": "2"})], operation_timeout=30)[topic].result(timeout=60)
    leader = cluster.node(wait_for("a leader", lambda: (lambda l: l if l in ids else None)(leader_of(cluster.brokers[0], topic)),
                                   DEADLINE_S))
    values = [b"%06d-" % i + bytes([97 + i % 26]) * 1000 for i in range(8000)]
    assert len(produce_confluent(leader.bootstrap, topic, [Rec(None, v, (), None) for v in values], partition=0,
                                 **{"batch.size": 65536})) == 8000
    wait_for("history uploaded and deleted locally",
             lambda: (lambda r: r[0] == 0 and r[1] > 4000)(list_offsets_flex(leader.bootstrap, topic, -4)), DEADLINE_S)
    tiered_end = list_offsets_flex(leader.bootstrap, topic, -5)[1] + 1

    lost = cluster.node(next(i for i in ids if i != leader.node_id))
    lost.kill9()
    # Dead, then fenced (broker.session.timeout.ms): gone from Metadata, as Kafka's is, so
    # Kafka's tools no longer ask it anything (the reassignment tool describes the log dirs
    # of every listed broker holding a replica).
    wait_for("the lost broker fenced",
             lambda: lost.node_id not in AdminClient({"bootstrap.servers": leader.bootstrap}).list_topics(timeout=10).brokers, DEADLINE_S)
    # With an admin listener: ready means registered and unfenced, not only listening.
    replacement = Node(cluster, max(n.node_id for n in cluster.nodes) + 1, free_port(), free_port(), admin_port=free_port(), roles="broker")
    cluster.nodes.append(replacement)
    conftest._LIVE.append(replacement)
    replacement.start()
    cluster.wait_ready(timeout_s=DEADLINE_S, nodes=[replacement])
    wait_for("the replacement registered",
             lambda: replacement.node_id in AdminClient({"bootstrap.servers": leader.bootstrap}).list_topics(timeout=10).brokers, DEADLINE_S)
    # The replacement first: once in sync, it is the preferred leader.
    target = [replacement.node_id] + [i for i in ids if i != lost.node_id]
    moved = reassign_tool(leader.bootstrap, tmp_path, [(topic, 0, target)], "--execute")
    assert moved.returncode == 0, moved.stderr[-2000:]
    wait_for("the replacement in sync and the lost broker's replica gone",
             lambda: (lambda ri: ri[0] == target and replacement.node_id in ri[1])(replicas_and_isr(leader, topic)), DEADLINE_S)
    assert "restarting the replica at the remote log's end" in replacement.log_since_start()
    local = sorted(int(f.stem) for f in replacement.data_dir.rglob("*.log") if f.parent.name == f"{topic}-0")
    assert local and local[0] >= tiered_end, f"the replacement's log starts at {local[:1]}, below the tiered offset {tiered_end}"
    # It leads (Kafka's leader-election tool, preferred) and serves the whole log: the
    # history from the object store, the rest from what it fetched.
    elected = elect(leader.bootstrap, "PREFERRED", "--topic", topic, "--partition", "0")
    assert elected.returncode == 0, elected.stdout[-2000:] + elected.stderr[-2000:]
    wait_for("the replacement leads", lambda: leader_of(replacement, topic) == replacement.node_id, DEADLINE_S)
    more = [b"after-%d" % i for i in range(100)]
    assert len(produce_confluent(replacement.bootstrap, topic, [Rec(None, v, (), None) for v in more], partition=0)) == 100
    got = consume_confluent(replacement.bootstrap, topic, 1, **{"max.partition.fetch.bytes": 200_000})[0]
    assert [c.offset for c in got] == list(range(8100))
    assert [c.value for c in got] == values + more
