"""Issue 26: `default.replication.factor` as Kafka's (default 1, the broker setting
`default_replication_factor`): the replicas of an auto-created topic and of a CreateTopics
with replication factor -1; `shardlog topic create --replication-factor N` asks for N.
On 3 combined nodes started with 3: an auto-created topic, a CreateTopics of -1
and a `shardlog topic create` without a factor get 3 replicas, `--replication-factor 2`
gets 2, and DescribeConfigs reports the setting. On one broker, a default of 3 makes a
CreateTopics of -1 fail as Kafka's does (INVALID_REPLICATION_FACTOR).
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

import conftest
from clients import shardlog_cli
from conftest import wait_for


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from conftest.running_cluster(tmp_path_factory, "default-rf", extra_args=["--default-replication-factor", "3"])


def replicas(bootstrap: str, topic: str) -> list[int] | None:
    """Replica counts of `topic`'s partitions (None until it exists everywhere it is asked)."""
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    t = md.topics.get(topic)
    if t is None or t.error is not None or not t.partitions:
        return None
    return [len(p.replicas) for p in t.partitions.values()]


def test_topics_without_a_factor_get_the_default(cluster):
    bootstrap = cluster.bootstrap
    name = lambda what: f"rf-{what}-{uuid.uuid4().hex[:8]}"  # noqa: E731

    auto = name("auto")
    p = Producer({"bootstrap.servers": bootstrap, "allow.auto.create.topics": True})
    p.produce(auto, b"x")
    assert p.flush(60) == 0
    assert wait_for("the auto-created topic", lambda: replicas(bootstrap, auto)) == [3]

    requested = name("minus-one")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(requested, 2)], operation_timeout=30)[requested].result(timeout=60)
    assert wait_for("the created topic", lambda: replicas(bootstrap, requested)) == [3, 3]

    cli_default, cli_two = name("cli"), name("cli-two")
    one = cluster.nodes[0].bootstrap  # the CLI takes one broker
    shardlog_cli("topic", "create", cli_default, "--partitions", "1", "--bootstrap", one)
    shardlog_cli("topic", "create", cli_two, "--partitions", "1", "--replication-factor", "2", "--bootstrap", one)
    assert wait_for("the CLI's topic", lambda: replicas(bootstrap, cli_default)) == [3]
    assert wait_for("the CLI's topic of 2", lambda: replicas(bootstrap, cli_two)) == [2]

    broker = ConfigResource(ConfigResource.Type.BROKER, str(cluster.nodes[0].node_id))
    configs = admin.describe_configs([broker])[broker].result(timeout=30)
    assert configs["default.replication.factor"].value == "3"


def test_a_default_above_the_brokers_is_refused_as_kafka_refuses_it(broker_factory, topic_name):
    b = broker_factory(settings={"default.replication.factor": "3"})
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    with pytest.raises(Exception) as e:
        admin.create_topics([NewTopic(topic_name, 1)], operation_timeout=30)[topic_name].result(timeout=60)
    assert "INVALID_REPLICATION_FACTOR" in str(e.value) or "replication factor" in str(e.value).lower(), str(e.value)
