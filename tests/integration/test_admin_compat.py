"""Admin APIs operators reach for, answered as Apache Kafka 4.1 answers them (issue 13):
DescribeLogDirs / AlterReplicaLogDirs (kafka-log-dirs, Java Admin), DescribeTopicPartitions
(KIP-966 pagination, Java Admin), ListConfigResources, authorized operations (Metadata,
DescribeCluster, DescribeGroups / ConsumerGroupDescribe, DescribeTopicPartitions) and the
features that are off (ACLs, SCRAM credentials) answering as Kafka does when
they are off. Every test also passes against Kafka 4.1 (SHARDLOG_TEST_TARGET=kafka) except
the transaction ones, where Kafka has a coordinator and shardlog must fail fast instead.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicCollection, TopicPartition
from confluent_kafka import Consumer
from confluent_kafka.admin import AclBinding, AclBindingFilter, AclOperation, AclPermissionType, \
    ResourcePatternType, ResourceType

import kafkawire as w
from clients import admin, admin_create_topic, java_tool, json_lines, kafka_tool, segment_bytes, wait_topic
from conftest import is_kafka, skip_unless_shardlog

# AclOperation bit sets Kafka 4.1 answers without an authorizer (read off a real node).
TOPIC_OPS = 3576
GROUP_OPS = 3400
CLUSTER_OPS = 8096
NOT_REQUESTED = -2147483648

TOPIC_OP_NAMES = {"READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}
CLUSTER_OP_NAMES = {"CREATE", "ALTER", "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE"}
GROUP_OP_NAMES = {"READ", "DELETE", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}


def _names(bits: int) -> set[int]:
    return {i for i in range(32) if bits & (1 << i)}


def log_dir(broker) -> Path:
    return Path(broker.data_dir) / "logs" if is_kafka() else Path(broker.data_dir)


def produce(bootstrap: str, topic: str, partition: int, n: int, size: int = 1000):
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, os.urandom(size), key=str(i).encode(), partition=partition)
    assert p.flush(60) == 0


def commit_group(bootstrap: str, group: str, topic: str, timeout_s: float = 60):
    """Creates classic group `group` by committing an offset (retries while the coordinator loads)."""
    deadline = time.monotonic() + timeout_s
    while True:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
        try:
            c.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
            return
        except KafkaException as e:
            coordinator_moving = e.args[0].code() in (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE,
                                                      KafkaError.COORDINATOR_LOAD_IN_PROGRESS)
            assert (coordinator_moving or e.args[0].retriable()) and time.monotonic() < deadline, e
            time.sleep(0.5)
        finally:
            c.close()


# -- ApiVersions ---------------------------------------------------------------------------------

# Some of what a Kafka 4.4.0 broker advertises (the whole table: src/protocol/api_versions.rs).
KAFKA_44_RANGES = {1: (4, 18), 2: (1, 11), 18: (0, 5), 29: (1, 3), 30: (1, 3), 31: (1, 3), 34: (1, 2), 35: (1, 5), 42: (0, 3), 50: (0, 0),
                   60: (0, 2), 65: (0, 0), 66: (0, 2), 74: (0, 1), 75: (0, 0),
                   83: (0, 0), 84: (0, 0), 85: (0, 1), 86: (0, 0), 87: (0, 1)}


def test_api_versions_match_kafka(bootstrap):
    resp = w.roundtrip(bootstrap, w.api_versions_request(0, 1))
    _, err, apis = w.parse_api_versions_v0(resp)
    assert err == 0
    for key, rng in KAFKA_44_RANGES.items():
        assert apis.get(key) == rng, f"api {key}: {apis.get(key)} != Kafka 4.4's {rng}"


def api_versions_v5(bootstrap: str, cluster_id: str | None, node_id: int) -> tuple[int, int]:
    """ApiVersions v5 naming a cluster id and node id (KIP-1242): (error, APIs listed)."""
    body = (w.compact_string("shardlog-tests") + w.compact_string("1") + w.compact_nullable_string(cluster_id)
            + w.i32(node_id) + w.uvarint(0))
    with w.connect(bootstrap) as s:
        s.sendall(w.request(18, 5, 7, body, header_version=2))
        r = w.FlexReader(w.recv_frame(s))
    assert r.i32() == 7  # ApiVersions answers with response header v0, even flexible
    err = r.i16()
    return err, len(r.array(lambda: (r.i16(), r.i16(), r.i16(), r.tags())) or [])


def test_api_versions_v5_checks_the_node_the_client_names(bootstrap):
    """KIP-1242, as a Kafka 4.4 broker answers: naming neither is fine, naming this cluster
    and node is fine, naming only one is INVALID_REQUEST, naming another cluster or node is
    REBOOTSTRAP_REQUIRED; an error answer lists no APIs."""
    a = admin(bootstrap)  # kept referenced until the result is in
    d = a.describe_cluster(request_timeout=30).result(timeout=30)
    cluster, (node,) = d.cluster_id, [n.id for n in d.nodes]
    assert api_versions_v5(bootstrap, None, -1)[0] == 0
    err, apis = api_versions_v5(bootstrap, cluster, node)
    assert err == 0 and apis > 50
    assert api_versions_v5(bootstrap, cluster, -1) == (42, 0)
    assert api_versions_v5(bootstrap, None, node) == (42, 0)
    assert api_versions_v5(bootstrap, cluster, node + 7) == (129, 0)
    assert api_versions_v5(bootstrap, "another-cluster-id-0000", node) == (129, 0)


def list_offsets_v(bootstrap: str, version: int, topic: str, timestamp: int) -> tuple[int, int, int, int]:
    """ListOffsets (v6+) of partition 0 at `timestamp`: (error, timestamp, offset, leader epoch)."""
    part = w.i32(0) + w.i32(-1) + w.i64(timestamp) + w.uvarint(0)
    body = w.i32(-1) + w.i8(0) + w.compact_array([w.compact_string(topic) + w.compact_array([part]) + w.uvarint(0)])
    if version >= 10:
        body += w.i32(30000)
    r = w.flexible_roundtrip(bootstrap, 2, version, body)
    r.i32()
    ((_, ((_, err, ts, offset, epoch, _),), _),) = r.array(
        lambda: (r.compact_string(), r.array(lambda: (r.i32(), r.i16(), r.i64(), r.i64(), r.i32(), r.tags())), r.tags()))
    return err, ts, offset, epoch


def test_list_offsets_v11_earliest_pending_upload(broker, topic_name):
    """ListOffsets v11 (KIP-1023): the earliest offset pending upload to tiered storage (-6)
    of a topic without remote storage is no offset (-1, error 0), as Kafka 4.4 answers;
    v10 does not know -6 (UNSUPPORTED_VERSION); the other timestamps are unchanged."""
    bootstrap = broker.bootstrap
    admin_create_topic(bootstrap, topic_name, 1)
    wait_topic(bootstrap, topic_name, 1)
    produce(bootstrap, topic_name, 0, 10)
    assert list_offsets_v(bootstrap, 11, topic_name, -6) == (0, -1, -1, -1)
    assert list_offsets_v(bootstrap, 10, topic_name, -6)[0] == 35
    assert list_offsets_v(bootstrap, 11, topic_name, -2)[:3] == (0, -1, 0)
    assert list_offsets_v(bootstrap, 11, topic_name, -1)[:3] == (0, -1, 10)


# -- DescribeLogDirs / AlterReplicaLogDirs -------------------------------------------------------

def test_log_dirs_cli_reports_segment_bytes(broker, topic_name):
    bootstrap = broker.bootstrap
    admin_create_topic(bootstrap, topic_name, 2)
    wait_topic(bootstrap, topic_name, 2)
    produce(bootstrap, topic_name, 0, 200)
    r = kafka_tool("org.apache.kafka.tools.LogDirsCommand", "--bootstrap-server", bootstrap, "--describe",
                   "--topic-list", topic_name)
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads([l for l in r.stdout.splitlines() if l.startswith("{")][-1])
    (b,) = doc["brokers"]
    (d,) = b["logDirs"]
    assert d["error"] is None and d["logDir"] == str(log_dir(broker)), d
    parts = {p["partition"]: p for p in d["partitions"]}
    assert set(parts) == {f"{topic_name}-0", f"{topic_name}-1"}, parts
    on_disk = segment_bytes(log_dir(broker) / f"{topic_name}-0")
    assert on_disk >= 200 * 1000
    assert parts[f"{topic_name}-0"]["size"] == on_disk
    assert parts[f"{topic_name}-1"]["size"] == 0
    assert all(p["offsetLag"] == 0 and p["isFuture"] is False for p in parts.values())


def test_java_describe_log_dirs_file_system_bytes(broker, topic_name):
    bootstrap = broker.bootstrap
    admin_create_topic(bootstrap, topic_name, 1)
    wait_topic(bootstrap, topic_name, 1)
    produce(bootstrap, topic_name, 0, 50)
    (d,) = json_lines(java_tool("describe-log-dirs", "--bootstrap", bootstrap).stdout)
    assert d["error"] is None and d["dir"] == str(log_dir(broker))
    st = os.statvfs(log_dir(broker))
    assert d["total"] == st.f_blocks * st.f_frsize
    # Usable space moves with every write on this shared disk: same order, not equal.
    assert abs(d["usable"] - st.f_bavail * st.f_frsize) < 1 << 30, (d["usable"], st.f_bavail * st.f_frsize)
    rep = d["replicas"][f"{topic_name}-0"]
    assert rep["size"] == segment_bytes(log_dir(broker) / f"{topic_name}-0") and rep["lag"] == 0 and not rep["future"]


def test_alter_replica_log_dirs_one_log_dir(broker, topic_name):
    bootstrap = broker.bootstrap
    admin_create_topic(bootstrap, topic_name, 1)
    wait_topic(bootstrap, topic_name, 1)
    here = str(log_dir(broker))
    # Already there: nothing to move. A partition the broker does not host: unknown.
    assert w.alter_replica_log_dirs(bootstrap, here, topic_name, [0, 7]) == {0: 0, 7: 3}
    # A directory that is not a log dir of the broker: LOG_DIR_NOT_FOUND, whatever the partition.
    assert w.alter_replica_log_dirs(bootstrap, "/nonexistent/dir", topic_name, [0]) == {0: 57}
    assert w.alter_replica_log_dirs(bootstrap, "/nonexistent/dir", "no-such-topic", [0]) == {0: 57}


# -- DescribeTopicPartitions ---------------------------------------------------------------------

def _dtp(bootstrap: str, topics: list[str], limit: int, cursor: tuple[str, int] | None = None):
    body = w.compact_array([w.compact_string(t) + w.uvarint(0) for t in topics]) + w.i32(limit)
    body += w.i8(-1) if cursor is None else w.i8(1) + w.compact_string(cursor[0]) + w.i32(cursor[1]) + w.uvarint(0)
    r = w.flexible_roundtrip(bootstrap, 75, 0, body)
    assert r.i32() == 0  # throttle

    def partition():
        err, idx = r.i16(), r.i32()
        r.i32(), r.i32()  # leader, leader epoch
        r.array(r.i32), r.array(r.i32), r.array(r.i32), r.array(r.i32), r.array(r.i32)
        r.tags()
        assert err == 0
        return idx

    def topic():
        err, name = r.i16(), r.compact_string()
        r.uuid(), r.i8()
        parts = r.array(partition)
        ops = r.i32()
        r.tags()
        return {"error": err, "name": name, "partitions": parts, "ops": ops}

    topics_out = r.array(topic)
    nxt = None
    if r.i8() >= 0:
        nxt = (r.compact_string(), r.i32())
        r.tags()
    return topics_out, nxt


def test_describe_topic_partitions_cursor_pagination(bootstrap, topic_name):
    a, b = topic_name + "-a", topic_name + "-b"
    admin_create_topic(bootstrap, a, 3)
    admin_create_topic(bootstrap, b, 2)
    wait_topic(bootstrap, a, 3)
    wait_topic(bootstrap, b, 2)
    topics, nxt = _dtp(bootstrap, [b, a], 2)
    assert [(t["name"], t["partitions"]) for t in topics] == [(a, [0, 1])] and nxt == (a, 2)
    assert topics[0]["ops"] == TOPIC_OPS and topics[0]["error"] == 0
    topics, nxt = _dtp(bootstrap, [a, b], 2, nxt)
    assert [(t["name"], t["partitions"]) for t in topics] == [(a, [2]), (b, [0])] and nxt == (b, 1)
    topics, nxt = _dtp(bootstrap, [a, b], 2, nxt)
    assert [(t["name"], t["partitions"]) for t in topics] == [(b, [1])] and nxt is None
    # The limit reached exactly at a topic's end: the cursor names the next topic at 0.
    topics, nxt = _dtp(bootstrap, [a, b], 3)
    assert [(t["name"], t["partitions"]) for t in topics] == [(a, [0, 1, 2])] and nxt == (b, 0)
    # Unknown topics answer UNKNOWN_TOPIC_OR_PARTITION and take nothing from the limit.
    missing = topic_name + "-missing"
    topics, nxt = _dtp(bootstrap, [a, missing], 4)
    assert [(t["name"], t["error"], t["partitions"]) for t in topics] == [(a, 0, [0, 1, 2]), (missing, 3, [])]
    assert nxt is None and topics[1]["ops"] == TOPIC_OPS


def test_describe_topic_partitions_bad_cursor(bootstrap, topic_name):
    admin_create_topic(bootstrap, topic_name, 1)
    wait_topic(bootstrap, topic_name, 1)
    other = topic_name + "-other"
    # The cursor topic must be among the topics named; its partition must not be negative.
    for cursor in [(other, 0), (topic_name, -1)]:
        topics, nxt = _dtp(bootstrap, [topic_name], 10, cursor)
        assert [(t["name"], t["error"]) for t in topics] == [(topic_name, 42)] and nxt is None, cursor


def test_java_describe_topics_paginated_with_operations(bootstrap, topic_name):
    admin_create_topic(bootstrap, topic_name, 7)
    wait_topic(bootstrap, topic_name, 7)
    (d,) = json_lines(java_tool("describe-topics", "--bootstrap", bootstrap, "--topics", topic_name,
                                "--partition-limit", "2", "--include-ops", "true").stdout)
    assert [p["p"] for p in d["partitions"]] == list(range(7)), d
    assert all(p["leader"] == p["replicas"][0] == p["isr"][0] for p in d["partitions"])
    assert set(d["ops"]) == TOPIC_OP_NAMES and d["internal"] is False
    (d,) = json_lines(java_tool("describe-topics", "--bootstrap", bootstrap, "--topics", topic_name).stdout)
    assert len(d["partitions"]) == 7


# -- ListConfigResources -------------------------------------------------------------------------

def _list_config_resources(bootstrap: str, version: int, types: list[int]) -> tuple[int, set]:
    body = w.compact_array([w.i8(t) for t in types]) if version >= 1 else b""
    r = w.flexible_roundtrip(bootstrap, 74, version, body)
    assert r.i32() == 0
    err = r.i16()

    def res():
        name = r.compact_string()
        t = r.i8() if version >= 1 else 16
        r.tags()
        return (name, t)

    return err, set(r.array(res))


def test_list_config_resources(bootstrap, topic_name):
    admin_create_topic(bootstrap, topic_name, 1)
    wait_topic(bootstrap, topic_name, 1)
    node = str(next(iter(admin(bootstrap).list_topics(timeout=30).brokers)))
    assert _list_config_resources(bootstrap, 0, []) == (0, set())  # client metrics only: none
    err, res = _list_config_resources(bootstrap, 1, [])
    assert err == 0 and {(node, 4), (node, 8), (topic_name, 2)} <= res
    assert {t for _, t in res} <= {2, 4, 8}, res
    err, res = _list_config_resources(bootstrap, 1, [2])
    assert err == 0 and (topic_name, 2) in res and {t for _, t in res} == {2}
    assert _list_config_resources(bootstrap, 1, [32]) == (0, set())
    assert _list_config_resources(bootstrap, 1, [4]) == (0, {(node, 4)})
    for unsupported in ([1], [3], [2, 99]):
        assert _list_config_resources(bootstrap, 1, unsupported) == (35, set()), unsupported


# -- Authorized operations -----------------------------------------------------------------------

def test_confluent_authorized_operations(bootstrap, topic_name):
    admin_create_topic(bootstrap, topic_name, 1)
    wait_topic(bootstrap, topic_name, 1)
    group = topic_name + "-g"
    commit_group(bootstrap, group, topic_name)
    a = admin(bootstrap)
    names = lambda ops: {o.name for o in ops}
    c = a.describe_cluster(include_authorized_operations=True).result(timeout=60)
    assert names(c.authorized_operations) == CLUSTER_OP_NAMES
    assert a.describe_cluster().result(timeout=60).authorized_operations is None
    t = a.describe_topics(TopicCollection([topic_name]), include_authorized_operations=True)[topic_name].result(timeout=60)
    assert names(t.authorized_operations) == TOPIC_OP_NAMES
    t = a.describe_topics(TopicCollection([topic_name]))[topic_name].result(timeout=60)
    assert t.authorized_operations is None
    g = a.describe_consumer_groups([group], include_authorized_operations=True)[group].result(timeout=60)
    assert names(g.authorized_operations) == GROUP_OP_NAMES
    g = a.describe_consumer_groups([group])[group].result(timeout=60)
    assert g.authorized_operations is None


def test_java_describe_cluster_operations(bootstrap):
    (d,) = json_lines(java_tool("describe-cluster", "--bootstrap", bootstrap, "--include-ops", "true").stdout)
    assert set(d["ops"]) == CLUSTER_OP_NAMES and d["nodes"] == [d["controller"]]
    (d,) = json_lines(java_tool("describe-cluster", "--bootstrap", bootstrap).stdout)
    assert d["ops"] is None


def _describe_groups_ops(bootstrap: str, group: str, include: bool) -> tuple[int, int]:
    # DescribeGroups v5 (flexible): groups compact array, include_authorized_operations bool.
    body = w.compact_array([w.compact_string(group)]) + w.i8(1 if include else 0)
    r = w.flexible_roundtrip(bootstrap, 15, 5, body)
    r.i32()
    (g,) = r.array(lambda: _described_group(r))
    return g


def _described_group(r) -> tuple[int, int]:
    err = r.i16()
    r.compact_string(), r.compact_string(), r.compact_string(), r.compact_string()  # id, state, type, protocol
    # members: id, instance id, client id, client host, metadata, assignment
    r.array(lambda: (r.compact_string(), r.compact_string(), r.compact_string(), r.compact_string(),
                     r.compact_bytes(), r.compact_bytes(), r.tags()))
    ops = r.i32()
    r.tags()
    return err, ops


def test_describe_groups_operations_raw(bootstrap, topic_name):
    admin_create_topic(bootstrap, topic_name, 1)
    wait_topic(bootstrap, topic_name, 1)
    group = topic_name + "-g"
    commit_group(bootstrap, group, topic_name)
    assert _describe_groups_ops(bootstrap, group, True) == (0, GROUP_OPS)
    assert _describe_groups_ops(bootstrap, group, False) == (0, NOT_REQUESTED)


def _metadata_ops(bootstrap: str, version: int, topic: str, include: bool) -> tuple[int, int]:
    """Metadata v8-v10 (v9+ flexible): (topic ops, cluster ops)."""
    assert 9 <= version <= 10
    flag = w.i8(1 if include else 0)
    topic_id = bytes(16) if version >= 10 else b""  # v10 names topics by id and name
    body = w.compact_array([topic_id + w.compact_string(topic) + w.uvarint(0)]) + w.i8(0) + flag + flag
    r = w.flexible_roundtrip(bootstrap, 3, version, body)
    r.i32()  # throttle
    r.array(lambda: (r.i32(), r.compact_string(), r.i32(), r.compact_string(), r.tags()))
    r.compact_string(), r.i32()  # cluster id, controller
    topic_ops = []

    def part():
        r.i16(), r.i32(), r.i32(), r.i32(), r.array(r.i32), r.array(r.i32), r.array(r.i32)
        r.tags()

    def tpc():
        r.i16(), r.compact_string()
        if version >= 10:
            r.uuid()
        r.i8()
        r.array(part)
        topic_ops.append(r.i32())
        r.tags()

    r.array(tpc)
    return topic_ops[0], r.i32()


def test_metadata_operations_raw(bootstrap, topic_name):
    admin_create_topic(bootstrap, topic_name, 1)
    wait_topic(bootstrap, topic_name, 1)
    assert _metadata_ops(bootstrap, 10, topic_name, True) == (TOPIC_OPS, CLUSTER_OPS)
    assert _metadata_ops(bootstrap, 9, topic_name, False) == (NOT_REQUESTED, NOT_REQUESTED)
    # Unknown topics carry the topic operations too, as Kafka computes them per answered topic.
    assert _metadata_ops(bootstrap, 10, topic_name + "-missing", True)[0] == TOPIC_OPS


# -- Features that are off -----------------------------------------------------------------------

def test_acls_cli_and_admin_security_disabled(bootstrap):
    r = kafka_tool("org.apache.kafka.tools.AclCommand", "--bootstrap-server", bootstrap, "--list")
    assert r.returncode != 0
    assert "SecurityDisabledException: No Authorizer is configured on the broker" in r.stdout + r.stderr, r.stdout[-2000:]
    a = admin(bootstrap)
    flt = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                           AclPermissionType.ANY)
    # librdkafka drops DescribeAcls' top-level error and returns no bindings, against Kafka too.
    assert a.describe_acls(flt).result(timeout=60) == []
    binding = AclBinding(ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    with pytest.raises(KafkaException) as e:
        a.create_acls([binding])[binding].result(timeout=60)
    assert e.value.args[0].code() == KafkaError.SECURITY_DISABLED
    assert "No Authorizer is configured." in str(e.value)
    with pytest.raises(KafkaException) as e:
        a.delete_acls([flt])[flt].result(timeout=60)
    assert e.value.args[0].code() == KafkaError.SECURITY_DISABLED


def test_describe_user_scram_credentials_none_defined(bootstrap):
    a = admin(bootstrap)
    assert a.describe_user_scram_credentials().result(timeout=60) == {}
    futs = a.describe_user_scram_credentials(["alice"])
    with pytest.raises(KafkaException) as e:
        futs["alice"].result(timeout=60)
    assert e.value.args[0].code() == KafkaError.RESOURCE_NOT_FOUND
    assert "Attempt to describe a user credential that does not exist: alice" in str(e.value)


def test_transactions_cli_list_empty(bootstrap):
    r = kafka_tool("org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server", bootstrap, "list")
    assert r.returncode == 0, r.stderr[-2000:]
    lines = [l for l in r.stdout.splitlines() if l.strip()]
    assert lines == ["TransactionalId\tCoordinator\tProducerId\tTransactionState\t"], lines


def _list_transactions_v2(bootstrap: str, states: list[str], pattern: str | None) -> tuple[int, list, list]:
    body = (w.compact_array([w.compact_string(s) for s in states]) + w.compact_array([]) + w.i64(-1)
            + w.compact_nullable_string(pattern))
    r = w.flexible_roundtrip(bootstrap, 66, 2, body)
    r.i32()
    err = r.i16()
    unknown = r.array(r.compact_string)
    txns = r.array(lambda: (r.compact_string(), r.i64(), r.compact_string(), r.tags()))
    return err, unknown, txns


def test_list_transactions_filters(bootstrap):
    assert _list_transactions_v2(bootstrap, ["Ongoing", "Bogus"], "app-.*") == (0, ["Bogus"], [])
    assert _list_transactions_v2(bootstrap, [], "(") == (128, [], [])


def test_transactional_apis_raw(bootstrap):
    skip_unless_shardlog("an empty transactional id is checked against shardlog's answer only")
    # FindCoordinator v4, key type 1: the first lookup creates __transaction_state
    # (COORDINATOR_NOT_AVAILABLE meanwhile, retried as clients do), then this broker.
    body = w.i8(1) + w.compact_array([w.compact_string("compat-txn")])
    for _ in range(300):
        r = w.flexible_roundtrip(bootstrap, 10, 4, body)
        r.i32()
        (c,) = r.array(lambda: (r.compact_string(), r.i32(), r.compact_string(), r.i32(), r.i16(), r.compact_string(), r.tags()))
        if c[4] != 15:
            break
        time.sleep(0.1)
    assert c[4] == 0 and c[1] >= 0 and c[3] > 0, c
    # InitProducerId v4 with a transactional id: a producer id, epoch 0.
    body = w.compact_nullable_string("compat-txn") + w.i32(60000) + w.i64(-1) + w.i16(-1)
    for _ in range(300):
        r = w.flexible_roundtrip(bootstrap, 22, 4, body)
        r.i32()
        err, pid, epoch = r.i16(), r.i64(), r.i16()
        if err not in (14, 15, 51):  # load in progress, not available, concurrent: retried
            break
        time.sleep(0.1)
    assert (err, epoch) == (0, 0) and pid >= 0, (err, pid, epoch)
    # DescribeTransactions: the id is Empty with that producer; an empty id is invalid.
    r = w.flexible_roundtrip(bootstrap, 65, 0, w.compact_array([w.compact_string("compat-txn"), w.compact_string("")]))
    r.i32()
    states = r.array(lambda: (r.i16(), r.compact_string(), r.compact_string(), r.i32(), r.i64(), r.i64(), r.i16(),
                              r.array(lambda: (r.compact_string(), r.array(r.i32), r.tags())), r.tags()))
    assert [(s[0], s[1], s[2], s[5]) for s in states] == [(0, "compat-txn", "Empty", pid), (42, "", "", -1)], states
