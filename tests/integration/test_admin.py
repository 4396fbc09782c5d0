"""Topic administration through the `shardlog topic` CLI and confluent-kafka's AdminClient:
create, list, describe, delete, create_partitions, describe_configs,
incremental_alter_configs (retention.ms, max.message.bytes — and max.message.bytes enforced),
topics surviving restarts, DeleteRecords advancing the log start offset, Kafka's bound of
10,000 metadata records per CreateTopics / CreatePartitions request.
"""

from __future__ import annotations

import time

from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions,
                                   ResourceType)

from clients import (Rec, admin, admin_create_topic, cli_create_topic, compare, consume_confluent,
                     java_tool, json_lines, make_records, produce_confluent, shardlog_cli, wait_topic,
                     watermarks)
from conftest import skip_unless_shardlog


def _topics(bootstrap: str) -> dict:
    return admin(bootstrap).list_topics(timeout=30).topics


def _wait_gone(bootstrap: str, name: str, timeout_s: float = 30):
    deadline = time.monotonic() + timeout_s
    while name in _topics(bootstrap):
        assert time.monotonic() < deadline, f"topic {name} still listed {timeout_s} s after deletion"
        time.sleep(0.1)


def _configs(bootstrap: str, name: str) -> dict[str, str]:
    a = admin(bootstrap)
    res = ConfigResource(ResourceType.TOPIC, name)
    entries = a.describe_configs([res], request_timeout=30)[res].result(timeout=60)
    return {k: e.value for k, e in entries.items()}


def _partitions(bootstrap: str, name: str) -> int:
    return len(_topics(bootstrap)[name].partitions)


def test_cli_create_with_replica_assignment(bootstrap):
    """`shardlog topic create --replica-assignment` as kafka-topics.sh takes it: partitions
    by commas, replicas by colons; an unknown broker is INVALID_REPLICA_ASSIGNMENT; the
    option excludes --partitions (as kafka-topics.sh)."""
    skip_unless_shardlog("the `shardlog topic` CLI exists only in shardlog")
    a = admin(bootstrap)  # kept referenced until the result is in
    (node,) = [n.id for n in a.describe_cluster(request_timeout=30).result(timeout=30).nodes]
    b = ["--bootstrap", bootstrap]
    name = "cli-assigned"
    shardlog_cli("topic", "create", name, "--replica-assignment", f"{node},{node},{node}", *b)
    wait_topic(bootstrap, name, 3)
    parts = _topics(bootstrap)[name].partitions
    assert all(p.leader == node and list(p.replicas) == [node] for p in parts.values()), parts
    bad = shardlog_cli("topic", "create", "cli-assigned-bad", "--replica-assignment", f"{node},{node + 7}", *b, check=False)
    assert bad.returncode != 0 and "InvalidReplicaAssignment" in bad.stderr + bad.stdout, bad
    both = shardlog_cli("topic", "create", "cli-assigned-both", "--partitions", "2", "--replica-assignment", f"{node}", *b, check=False)
    assert both.returncode != 0 and "cannot be used with" in both.stderr, both.stderr


def test_cli_create_list_describe_delete(bootstrap):
    skip_unless_shardlog("the `shardlog topic` CLI exists only in shardlog")
    name = "cli-topic"
    b = ["--bootstrap", bootstrap]
    shardlog_cli("topic", "create", name, "--partitions", "3", "--config", "retention.ms=3600000",
                 "--config", "max.message.bytes=65536", *b)
    wait_topic(bootstrap, name, 3)
    cfg = _configs(bootstrap, name)
    assert cfg["retention.ms"] == "3600000" and cfg["max.message.bytes"] == "65536", cfg

    listed = shardlog_cli("topic", "list", *b).stdout
    assert name in listed.split(), f"`topic list` does not show {name}:\n{listed}"
    described = shardlog_cli("topic", "describe", name, *b).stdout
    assert name in described, f"`topic describe` output lacks the name:\n{described}"
    assert "retention.ms=3600000" in described and "max.message.bytes=65536" in described, described
    assert described.count("Partition: ") == 3, described

    again = shardlog_cli("topic", "create", name, "--partitions", "3", *b, check=False)
    assert again.returncode != 0, "creating an existing topic must fail"
    missing = shardlog_cli("topic", "describe", "no-such-topic", *b, check=False)
    assert missing.returncode != 0, "describing an unknown topic must fail"

    shardlog_cli("topic", "delete", name, *b)
    _wait_gone(bootstrap, name)
    # Each CLI call is a new connection, maybe to another shard, which drops the topic
    # from its metadata a moment later: read until `topic list` agrees.
    deadline = time.monotonic() + 30
    while name in shardlog_cli("topic", "list", *b).stdout.split():
        assert time.monotonic() < deadline, f"`topic list` still shows {name} 30 s after deletion"
        time.sleep(0.1)


def test_admin_client_topic_lifecycle_and_configs(bootstrap):
    name = "admin-topic"
    admin_create_topic(bootstrap, name, 2, config={"retention.ms": "86400000"})
    assert name in _topics(bootstrap)
    cfg = _configs(bootstrap, name)
    assert cfg["retention.ms"] == "86400000", cfg
    assert "max.message.bytes" in cfg and "cleanup.policy" in cfg, cfg

    # Creating it again answers TOPIC_ALREADY_EXISTS.
    from confluent_kafka.admin import NewTopic
    a = admin(bootstrap)
    try:
        a.create_topics([NewTopic(name, 2, 1)], request_timeout=30)[name].result(timeout=60)
        raise AssertionError("second CreateTopics succeeded")
    except KafkaException as e:
        assert e.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS, e

    # CreatePartitions 2 -> 4; the new partitions take records.
    a.create_partitions([NewPartitions(name, 4)], request_timeout=30)[name].result(timeout=60)
    wait_topic(bootstrap, name, 4)
    [d] = produce_confluent(bootstrap, name, [Rec(b"k", b"to-p3", (), None)], partition=3)
    assert (d.partition, d.offset) == (3, 0)

    # IncrementalAlterConfigs: retention.ms and max.message.bytes.
    res = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
        ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("max.message.bytes", "4096", incremental_operation=AlterConfigOpType.SET)])
    a.incremental_alter_configs([res], request_timeout=30)[res].result(timeout=60)
    cfg = _configs(bootstrap, name)
    assert cfg["retention.ms"] == "7200000" and cfg["max.message.bytes"] == "4096", cfg

    # max.message.bytes is enforced: a 1 KiB record fits, a 16 KiB batch gets MESSAGE_TOO_LARGE.
    errors = {}

    def dr(err, msg):
        errors[msg.value()[:5]] = err

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "retries": 0,
                  "enable.idempotence": False, "compression.type": "none", "message.timeout.ms": 30000})
    p.produce(name, value=b"small" + b"s" * 1000, partition=0, on_delivery=dr)
    p.flush(60)
    p.produce(name, value=b"large" + b"l" * 16384, partition=0, on_delivery=dr)
    p.flush(60)
    assert errors[b"small"] is None, errors
    assert errors[b"large"] is not None and errors[b"large"].code() == KafkaError.MSG_SIZE_TOO_LARGE, errors
    assert watermarks(bootstrap, name, 1)[0] == (0, 1), "the rejected record must not be stored"

    a.delete_topics([name], operation_timeout=30, request_timeout=30)[name].result(timeout=60)
    _wait_gone(bootstrap, name)


def _policy_violation(fut):
    try:
        fut.result(timeout=60)
    except KafkaException as e:
        return e.args[0]
    raise AssertionError("the request over Kafka's record bound succeeded")


def test_a_request_over_kafkas_10000_metadata_records_is_refused_whole(bootstrap):
    # Kafka's controller writes a TopicRecord and a PartitionRecord per partition and
    # refuses an operation over 10,000 records (MAX_RECORDS_PER_USER_OP) with
    # POLICY_VIOLATION for every topic of the request; nothing is created.
    from confluent_kafka.admin import NewTopic
    a = admin(bootstrap)
    fs = a.create_topics([NewTopic("records-big", 10_000, 1)], request_timeout=60)
    err = _policy_violation(fs["records-big"])
    assert err.code() == KafkaError.POLICY_VIOLATION, err
    assert "excessively large batch" in err.str(), err
    # The bound is over the whole request: two topics of 5,000 partitions (10,002 records),
    # and a small topic in the same request is refused with them.
    fs = a.create_topics([NewTopic("records-half-a", 5_000, 1), NewTopic("records-half-b", 5_000, 1),
                          NewTopic("records-small", 1, 1)], request_timeout=60)
    for name in ("records-half-a", "records-half-b", "records-small"):
        assert _policy_violation(fs[name]).code() == KafkaError.POLICY_VIOLATION, name
    topics = _topics(bootstrap)
    assert not {"records-big", "records-half-a", "records-half-b", "records-small"} & set(topics), topics

    # CreatePartitions: a PartitionRecord per new partition; 1 -> 10,002 is 10,001 records.
    admin_create_topic(bootstrap, "records-grow", 1)
    fs = a.create_partitions([NewPartitions("records-grow", 10_002)], request_timeout=60)
    assert _policy_violation(fs["records-grow"]).code() == KafkaError.POLICY_VIOLATION
    assert _partitions(bootstrap, "records-grow") == 1
    # A request under the bound still works.
    a.create_partitions([NewPartitions("records-grow", 3)], request_timeout=30)["records-grow"].result(timeout=60)
    wait_topic(bootstrap, "records-grow", 3)


def test_topics_survive_restart(broker_factory):
    b = broker_factory()
    name = "durable-topic"
    cli_create_topic(b.bootstrap, name, 3, config={"retention.ms": "3600000"})
    admin_create_topic(b.bootstrap, "durable-topic-2", 5)
    recs = make_records(500, seed=77)
    produced = produce_confluent(b.bootstrap, name, recs)

    for kill in (False, True):  # a clean stop, then kill -9
        b.restart(kill=kill)
        wait_topic(b.bootstrap, name, 3)
        wait_topic(b.bootstrap, "durable-topic-2", 5)
        assert _configs(b.bootstrap, name)["retention.ms"] == "3600000"
        assert compare(produced, consume_confluent(b.bootstrap, name, 3)) == 500


def test_delete_records_advances_log_start(bootstrap):
    name = "delete-records"
    admin_create_topic(bootstrap, name, 2)
    for part in (0, 1):
        produce_confluent(bootstrap, name, make_records(100, seed=part), partition=part)

    a = admin(bootstrap)
    fs = a.delete_records([TopicPartition(name, 0, 40)], request_timeout=30, operation_timeout=30)
    [(tp, f)] = list(fs.items())
    assert f.result(timeout=60).low_watermark == 40
    assert watermarks(bootstrap, name, 2)[0] == (40, 100)

    r = java_tool("delete-records", "--bootstrap", bootstrap, "--topic", name, "--partition", "1", "--offset", "25")
    assert json_lines(r.stdout) == [{"p": 1, "low_watermark": 25}]
    r = java_tool("list-offsets", "--bootstrap", bootstrap, "--topic", name, "--spec", "earliest")
    assert {l["p"]: l["o"] for l in json_lines(r.stdout)} == {0: 40, 1: 25}

    consumed = consume_confluent(bootstrap, name, 2)
    assert [c.offset for c in consumed[0]] == list(range(40, 100))
    assert [c.offset for c in consumed[1]] == list(range(25, 100))

    # Beyond the high watermark: OFFSET_OUT_OF_RANGE.
    fs = a.delete_records([TopicPartition(name, 0, 500)], request_timeout=30, operation_timeout=30)
    try:
        list(fs.values())[0].result(timeout=60)
        raise AssertionError("DeleteRecords beyond the high watermark succeeded")
    except KafkaException as e:
        assert e.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE, e
