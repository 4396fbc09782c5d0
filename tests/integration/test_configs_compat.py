"""Configs as Kafka 4.1 serves them (issue 13, point 3): DescribeConfigs of brokers, topics
and groups (sources, synonyms, types, documentation) read by Kafka's own kafka-configs and
the Java AdminClient; IncrementalAlterConfigs and legacy AlterConfigs on brokers (dynamic
keys applied at run time and kept across a restart, read-only keys refused) and topics
(full-replacement semantics); group configs (KIP-848) used by the coordinator. Every test
also runs against Kafka 4.1 (SHARDLOG_TEST_TARGET=kafka).
"""

from __future__ import annotations

import os
import re
import time
import uuid

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, ResourceType

import kafkawire as w
from clients import admin, admin_create_topic, cli_create_topic, java_tool, json_lines, wait_topic
from conftest import default_flush, is_kafka, kafka_classpath
from test_admin_compat import _list_config_resources, kafka_tool
from test_groups_kip848 import NONE, heartbeat

INVALID_REQUEST, INVALID_CONFIG = "INVALID_REQUEST", "INVALID_CONFIG"


def broker_id(bootstrap: str) -> str:
    a = admin(bootstrap)  # kept alive until the future resolves
    return str(a.describe_cluster().result(timeout=30).nodes[0].id)


def describe(bootstrap: str, restype, name: str) -> dict:
    res = ConfigResource(restype, name)
    a = admin(bootstrap)
    (f,) = a.describe_configs([res]).values()
    return f.result(timeout=30)


def incremental(bootstrap: str, restype, name: str, ops: list[tuple[str, str | None, AlterConfigOpType]],
                validate_only: bool = False):
    entries = [ConfigEntry(k, v, incremental_operation=op) for k, v, op in ops]
    res = ConfigResource(restype, name, incremental_configs=entries)
    a = admin(bootstrap)
    (f,) = a.incremental_alter_configs([res], validate_only=validate_only).values()
    return f.result(timeout=30)


def legacy_alter(bootstrap: str, restype, name: str, configs: dict[str, str], validate_only: bool = False):
    res = ConfigResource(restype, name, set_config=configs)
    a = admin(bootstrap)
    (f,) = a.alter_configs([res], validate_only=validate_only).values()
    return f.result(timeout=30)


def eventually(fn, want, timeout_s: float = 60):
    """`fn()` until it returns `want` (Kafka applies broker config changes asynchronously;
    shardlog answers once this shard has them, other shards follow): the last value."""
    deadline = time.monotonic() + timeout_s
    while True:
        got = fn()
        if got == want or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


def error_name(fn) -> str:
    with pytest.raises(KafkaException) as e:
        fn()
    return e.value.args[0].name()


def kafka_configs(bootstrap: str, *args: str) -> str:
    """Kafka's own kafka-configs (ConfigCommand) against `bootstrap`; its stdout."""
    r = kafka_tool("org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", bootstrap, *args)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    return r.stdout


def config_lines(text: str) -> dict[str, tuple[str, str, str]]:
    """kafka-configs --describe lines: key -> (value, sensitive, synonyms)."""
    lines = re.findall(r"^  ([a-z0-9.]+)=(\S*) sensitive=(\w+) synonyms=\{(.*)\}$", text, re.M)
    return {k: (v, sens, syn) for k, v, sens, syn in lines}


def java_configs(bootstrap: str, type_: str, name: str, synonyms: bool, docs: bool) -> dict[str, dict]:
    out = java_tool("describe-configs", "--bootstrap", bootstrap, "--type", type_, "--name", name,
                    "--synonyms", str(synonyms).lower(), "--docs", str(docs).lower()).stdout
    return {c["name"]: c for c in json_lines(out)}


@pytest.fixture
def own_broker(broker_factory):
    """A broker of the test's own (broker configs are cluster-wide state), two shards."""
    return broker_factory(shards=2)


# -- describe ------------------------------------------------------------------------------------

# Keys every Kafka 4.1 broker reports that shardlog also reports (a subset: the rest of Kafka's
# list has no shardlog equivalent, see src/cluster/config_defs.rs).
BROKER_KEYS = ["advertised.listeners", "auto.create.topics.enable", "broker.id", "log.flush.interval.messages",
               "log.message.timestamp.type", "log.retention.bytes", "log.segment.bytes", "message.max.bytes",
               "node.id", "num.partitions", "offsets.topic.num.partitions", "socket.request.max.bytes",
               "group.consumer.session.timeout.ms", "group.consumer.heartbeat.interval.ms"]


def test_kafka_configs_describe_broker_all(broker):
    node = broker_id(broker.bootstrap)
    out = kafka_configs(broker.bootstrap, "--describe", "--entity-type", "brokers", "--entity-name", node, "--all")
    got = config_lines(out)
    missing = [k for k in BROKER_KEYS if k not in got]
    assert not missing, f"missing {missing} in:\n{out[-3000:]}"
    assert got["advertised.listeners"][0] == f"PLAINTEXT://{broker.bootstrap}"
    assert got["node.id"][0] == node and got["broker.id"][0] == node
    assert got["log.segment.bytes"][0] == "1073741824"
    assert "DEFAULT_CONFIG:log.segment.bytes=1073741824" in got["log.segment.bytes"][2]
    assert got["message.max.bytes"][0] == "1048588"
    assert all(got[k][1] == "false" for k in BROKER_KEYS)


def test_java_describe_broker_synonyms_types_docs(broker):
    node = broker_id(broker.bootstrap)
    full = java_configs(broker.bootstrap, "broker", node, synonyms=True, docs=True)
    seg = full["log.segment.bytes"]
    assert (seg["type"], seg["source"], seg["read_only"]) == ("INT", "DEFAULT_CONFIG", False)
    assert seg["doc"], seg
    assert seg["synonyms"][-1] == {"name": "log.segment.bytes", "value": "1073741824", "source": "DEFAULT_CONFIG"}
    assert full["log.retention.bytes"]["type"] == "LONG"
    assert full["auto.create.topics.enable"]["type"] == "BOOLEAN"
    assert full["advertised.listeners"]["type"] == "LIST"  # Kafka 4.4 (4.1: STRING)
    assert full["offsets.topic.num.partitions"]["read_only"] is True
    # Without the flags: no synonyms, no documentation (the type is always sent).
    bare = java_configs(broker.bootstrap, "broker", node, synonyms=False, docs=False)
    assert bare["log.segment.bytes"]["synonyms"] == [] and bare["log.segment.bytes"]["doc"] is None
    assert bare["log.segment.bytes"]["type"] == "INT"


def test_java_describe_topic_types(bootstrap, topic_name):
    admin_create_topic(bootstrap, topic_name, 1, {"retention.ms": "123456"})
    wait_topic(bootstrap, topic_name, 1)
    c = java_configs(bootstrap, "topic", topic_name, synonyms=True, docs=True)
    types = {k: c[k]["type"] for k in ["retention.ms", "segment.bytes", "cleanup.policy", "min.cleanable.dirty.ratio",
                                        "compression.type", "preallocate", "message.timestamp.type"]}
    assert types == {"retention.ms": "LONG", "segment.bytes": "INT", "cleanup.policy": "LIST",
                     "min.cleanable.dirty.ratio": "DOUBLE", "compression.type": "STRING", "preallocate": "BOOLEAN",
                     "message.timestamp.type": "STRING"}
    r = c["retention.ms"]
    assert (r["value"], r["source"]) == ("123456", "DYNAMIC_TOPIC_CONFIG")
    assert r["synonyms"][0] == {"name": "retention.ms", "value": "123456", "source": "DYNAMIC_TOPIC_CONFIG"}
    s = c["segment.bytes"]
    assert s["source"] == "DEFAULT_CONFIG" and s["synonyms"][0]["name"] == "log.segment.bytes", s


# -- broker alters -------------------------------------------------------------------------------

def produce_sizes(bootstrap: str, topic: str, partitions: int, size: int) -> list[str | None]:
    """Produces one `size`-byte record to each partition; the error names (None = ok)."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "message.max.bytes": 10_000_000,
                  "retries": 0})
    errors: list[str | None] = []
    for part in range(partitions):
        p.produce(topic, os.urandom(size), partition=part,
                  on_delivery=lambda err, msg: errors.append(err.name() if err else None))
    assert p.flush(30) == 0
    return errors


def test_incremental_alter_broker_applies_on_every_shard_and_survives_restart(own_broker, topic_name):
    b = own_broker
    node = broker_id(b.bootstrap)
    cli_create_topic(b.bootstrap, topic_name, 4)
    wait_topic(b.bootstrap, topic_name, 4)
    assert produce_sizes(b.bootstrap, topic_name, 4, 20_000) == [None] * 4
    # Cluster-wide default (kafka-configs --entity-default): every partition, on both shards,
    # now refuses large batches.
    kafka_configs(b.bootstrap, "--alter", "--entity-type", "brokers", "--entity-default",
                  "--add-config", "message.max.bytes=10000")
    too_large = ["MSG_SIZE_TOO_LARGE"] * 4
    sizes = lambda: produce_sizes(b.bootstrap, topic_name, 4, 20_000)  # noqa: E731
    assert eventually(sizes, too_large) == too_large
    # This broker's own value beats the default.
    incremental(b.bootstrap, ResourceType.BROKER, node, [("message.max.bytes", "50000", AlterConfigOpType.SET),
                                                         ("log.retention.ms", "7200000", AlterConfigOpType.SET)])
    assert eventually(sizes, [None] * 4) == [None] * 4
    value = lambda k: describe(b.bootstrap, ResourceType.BROKER, node)[k].value  # noqa: E731
    assert eventually(lambda: value("log.retention.ms"), "7200000") == "7200000"
    c = describe(b.bootstrap, ResourceType.BROKER, node)
    m = c["message.max.bytes"]
    assert (m.value, m.source) == ("50000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    d = config_lines(kafka_configs(b.bootstrap, "--describe", "--entity-type", "brokers", "--entity-default"))
    assert d["message.max.bytes"] == ("10000", "false", "DYNAMIC_DEFAULT_BROKER_CONFIG:message.max.bytes=10000"), d
    full = java_configs(b.bootstrap, "broker", node, synonyms=True, docs=False)["message.max.bytes"]
    assert [(s["source"], s["value"]) for s in full["synonyms"]] == [
        ("DYNAMIC_BROKER_CONFIG", "50000"), ("DYNAMIC_DEFAULT_BROKER_CONFIG", "10000"), ("DEFAULT_CONFIG", "1048588")]
    # The topic's defaults follow (retention.ms not set on the topic).
    t = describe(b.bootstrap, ResourceType.TOPIC, topic_name)
    assert (t["retention.ms"].value, t["retention.ms"].source) == ("7200000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    # Kept across a restart (metadata log / snapshot).
    b.restart()
    c = describe(b.bootstrap, ResourceType.BROKER, node)
    assert (c["message.max.bytes"].value, c["log.retention.ms"].value) == ("50000", "7200000")
    d = config_lines(kafka_configs(b.bootstrap, "--describe", "--entity-type", "brokers", "--entity-default"))
    assert d["message.max.bytes"][0] == "10000"
    # DELETE goes back to the next source.
    incremental(b.bootstrap, ResourceType.BROKER, node, [("message.max.bytes", None, AlterConfigOpType.DELETE)])
    assert eventually(sizes, too_large) == too_large
    kafka_configs(b.bootstrap, "--alter", "--entity-type", "brokers", "--entity-default",
                  "--delete-config", "message.max.bytes")
    assert eventually(sizes, [None] * 4) == [None] * 4
    source = lambda: describe(b.bootstrap, ResourceType.BROKER, node)["message.max.bytes"].source  # noqa: E731
    assert eventually(source, ConfigSource.DEFAULT_CONFIG.value) == ConfigSource.DEFAULT_CONFIG.value


def test_broker_alter_errors(bootstrap):
    node = broker_id(bootstrap)
    # Read-only keys: INVALID_REQUEST, as Kafka's DynamicBrokerConfig.
    assert error_name(lambda: incremental(bootstrap, ResourceType.BROKER, node, [
        ("offsets.topic.num.partitions", "3", AlterConfigOpType.SET)])) == INVALID_REQUEST
    # A bad value of a dynamic key.
    assert error_name(lambda: incremental(bootstrap, ResourceType.BROKER, node, [
        ("log.retention.ms", "abc", AlterConfigOpType.SET)])) in (INVALID_CONFIG, INVALID_REQUEST)
    # validate_only changes nothing.
    incremental(bootstrap, ResourceType.BROKER, node, [("log.retention.bytes", "77000", AlterConfigOpType.SET)],
                validate_only=True)
    assert describe(bootstrap, ResourceType.BROKER, node)["log.retention.bytes"].source == \
        ConfigSource.DEFAULT_CONFIG.value
    if not is_kafka() and default_flush() != "never":
        # flush = always (shardlog's default) syncs every write: log.flush.interval.messages
        # is reported as 1 and cannot change (Kafka has no such mode).
        f = describe(bootstrap, ResourceType.BROKER, node)["log.flush.interval.messages"]
        assert (f.value, f.is_read_only) == ("1", True)
        assert error_name(lambda: incremental(bootstrap, ResourceType.BROKER, node, [
            ("log.flush.interval.messages", "10", AlterConfigOpType.SET)])) == INVALID_REQUEST
    elif not is_kafka():
        # flush = never: Kafka's default (no fsync by message count), as Kafka reports it.
        f = describe(bootstrap, ResourceType.BROKER, node)["log.flush.interval.messages"]
        assert (f.value, f.is_read_only) == (str(2**63 - 1), False)


def test_legacy_alter_configs_broker_replaces_the_set(own_broker):
    b = own_broker
    node = broker_id(b.bootstrap)
    legacy_alter(b.bootstrap, ResourceType.BROKER, node, {"log.retention.ms": "3600000",
                                                          "log.retention.bytes": "1000000"})
    pair = lambda: tuple(describe(b.bootstrap, ResourceType.BROKER, node)[k].value  # noqa: E731
                         for k in ("log.retention.ms", "log.retention.bytes"))
    assert eventually(pair, ("3600000", "1000000")) == ("3600000", "1000000")
    # Full replacement: what is not named goes back to its default.
    legacy_alter(b.bootstrap, ResourceType.BROKER, node, {"log.retention.bytes": "2000000"})
    # (Each describe may reach another shard, which applies the change a moment later:
    # read until every field shows it, as a Kafka client reading a broker's cache would.)
    def replaced():
        c = describe(b.bootstrap, ResourceType.BROKER, node)
        return (c["log.retention.ms"].source != ConfigSource.DYNAMIC_BROKER_CONFIG.value,
                c["log.retention.bytes"].value, c["log.retention.bytes"].source)
    expected = (True, "2000000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert eventually(replaced, expected) == expected
    assert error_name(lambda: legacy_alter(b.bootstrap, ResourceType.BROKER, node, {"node.id": "5"})) == INVALID_REQUEST
    legacy_alter(b.bootstrap, ResourceType.BROKER, node, {})


# -- topic legacy alter --------------------------------------------------------------------------

def test_legacy_alter_configs_topic_full_replacement(bootstrap, topic_name):
    admin_create_topic(bootstrap, topic_name, 1, {"retention.ms": "86400000", "segment.bytes": "1048576"})
    wait_topic(bootstrap, topic_name, 1)
    # validate_only: checked, not applied.
    legacy_alter(bootstrap, ResourceType.TOPIC, topic_name, {"cleanup.policy": "compact"}, validate_only=True)
    assert describe(bootstrap, ResourceType.TOPIC, topic_name)["retention.ms"].value == "86400000"
    legacy_alter(bootstrap, ResourceType.TOPIC, topic_name, {"cleanup.policy": "compact"})
    c = describe(bootstrap, ResourceType.TOPIC, topic_name)
    assert (c["cleanup.policy"].value, c["cleanup.policy"].source) == ("compact", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    # Keys not named are back to their defaults.
    assert c["retention.ms"].value == "604800000" and c["retention.ms"].source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert c["segment.bytes"].value == "1073741824"
    assert error_name(lambda: legacy_alter(bootstrap, ResourceType.TOPIC, topic_name,
                                           {"retention.ms": "abc"})) == INVALID_CONFIG


# -- groups --------------------------------------------------------------------------------------

def test_group_configs_describe_alter_and_heartbeat_interval(bootstrap, topic_name):
    group = f"cfg-{uuid.uuid4().hex[:8]}"
    c = describe(bootstrap, ResourceType.GROUP, group)
    assert (c["consumer.session.timeout.ms"].value, c["consumer.session.timeout.ms"].source) == \
        ("45000", ConfigSource.DEFAULT_CONFIG.value)
    assert c["consumer.heartbeat.interval.ms"].value == "5000"
    incremental(bootstrap, ResourceType.GROUP, group, [("consumer.session.timeout.ms", "50000", AlterConfigOpType.SET),
                                                       ("consumer.heartbeat.interval.ms", "6000", AlterConfigOpType.SET)])
    c = describe(bootstrap, ResourceType.GROUP, group)
    assert (c["consumer.session.timeout.ms"].value, c["consumer.session.timeout.ms"].source) == \
        ("50000", ConfigSource.GROUP_CONFIG.value)
    # ListConfigResources v1 now names the group (a resource with dynamic configs).
    assert (group, 32) in _list_config_resources(bootstrap, 1, [32])[1]
    # Kafka's bounds (group.consumer.min/max.*).
    assert error_name(lambda: incremental(bootstrap, ResourceType.GROUP, group, [
        ("consumer.session.timeout.ms", "1000", AlterConfigOpType.SET)])) == INVALID_CONFIG
    assert error_name(lambda: incremental(bootstrap, ResourceType.GROUP, group, [
        ("consumer.heartbeat.interval.ms", "16000", AlterConfigOpType.SET)])) == INVALID_CONFIG
    # The coordinator tells this group's members the group's heartbeat interval.
    cli_create_topic(bootstrap, topic_name, 1)
    wait_topic(bootstrap, topic_name, 1)
    assert join_interval(bootstrap, group, topic_name) == 6000
    incremental(bootstrap, ResourceType.GROUP, group, [("consumer.heartbeat.interval.ms", None, AlterConfigOpType.DELETE)])
    assert join_interval(bootstrap, f"{group}-other", topic_name) == 5000


def join_interval(bootstrap: str, group: str, topic: str) -> int:
    """Joins KIP-848 group `group`: the heartbeat interval the coordinator answers (retried
    while Kafka's offsets topic is still being created: COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR)."""
    # A FindCoordinator makes Kafka create its offsets topic (shardlog has it from start-up).
    a = admin(bootstrap)
    try:
        a.describe_consumer_groups([group])[group].result(timeout=60)
    except KafkaException:
        pass
    deadline = time.monotonic() + 60
    while True:
        with w.connect(bootstrap) as s:
            j = heartbeat(s, 0, group, "", 0, topics=[topic], owned=[])
        if j["error"] not in (14, 15, 16) or time.monotonic() > deadline:
            assert j["error"] == NONE, j
            return j["interval"]
        time.sleep(0.5)
