"""Client quotas and connection limits (issue 24, point 5), as Kafka 4.4 defines them:
quotas for users, client ids, users with client ids, their defaults and IPs set, listed
and deleted with Kafka's own kafka-configs.sh (AlterClientQuotas / DescribeClientQuotas),
kept in the metadata log across a restart; what AlterClientQuotas answers for a wrong
alteration; a producer over `producer_byte_rate` and a consumer over
`consumer_byte_rate` told to back off (throttle_time_ms) and held near their quota while
a client without one is not; CreateTopics over `controller_mutation_rate` refused with
THROTTLING_QUOTA_EXCEEDED; connections over `max.connections.per.ip.overrides` closed.
The same assertions run against Kafka 4.4 (`SHARDLOG_TEST_TARGET=kafka`).

Rates are checked as upper bounds a throttled client cannot pass however slow the machine
is, and against an unthrottled client on the same broker; no assertion on how fast.
"""
from __future__ import annotations

import os
import socket
import struct
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

import kafkawire as w
from clients import admin_create_topic, kafka_tool
from conftest import wait_for

# Short quota windows (3 samples of 1 s) so a test sees throttling within seconds.
WINDOW_SETTINGS = {"quota.window.num": "3", "quota.window.size.seconds": "1"}
# The burst a client gets before its rate counts: Kafka measures a rate over at least
# (samples - 1) windows, so up to two windows' worth passes before the first throttle.
BURST_WINDOWS = 3


def kafka_configs(bootstrap: str, *args: str, check: bool = True):
    r = kafka_tool("org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", bootstrap, *args)
    if check:
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    return r


def describe(bootstrap: str, *entity: str) -> list[str]:
    out = kafka_configs(bootstrap, "--describe", *entity).stdout
    return sorted(line.strip() for line in out.splitlines() if line.startswith("Quota configs"))


# -- AlterClientQuotas v1 on the wire (flexible) ------------------------------------------

def alter_client_quotas(bootstrap: str, entries: list[tuple[list[tuple[str, str | None]], list[tuple[str, float, bool]]]],
                        validate_only: bool = False) -> list[tuple[int, str | None]]:
    """AlterClientQuotas v1: `entries` = [(entity [(type, name)], ops [(key, value, remove)])];
    returns (error code, message) per entry, in order."""
    body = w.compact_array([
        w.compact_array([w.compact_string(t) + w.compact_nullable_string(n) + w.uvarint(0) for t, n in entity])
        + w.compact_array([w.compact_string(k) + struct.pack(">d", v) + w.i8(1 if rm else 0) + w.uvarint(0)
                           for k, v, rm in ops])
        + w.uvarint(0)
        for entity, ops in entries]) + w.i8(1 if validate_only else 0)
    r = w.flexible_roundtrip(bootstrap, 49, 1, body)
    r.i32()  # throttle
    out = []

    def entry():
        code, msg = r.i16(), r.compact_string()
        r.array(lambda: (r.compact_string(), r.compact_string(), r.tags()))
        r.tags()
        out.append((code, msg))
    r.array(entry)
    return out


# -- CreateTopics v7 on the wire, with a client id of our choosing ------------------------

def create_topics(bootstrap_or_sock, client_id: str, topics: list[tuple[str, int]]) -> tuple[int, dict[str, tuple[int, str | None]]]:
    """CreateTopics v7 (strict mutation quota): (throttle_time_ms, {topic: (error, message)})."""
    body = (w.compact_array([w.compact_string(name) + w.i32(partitions) + w.i16(1)
                             + w.compact_array([]) + w.compact_array([]) + w.uvarint(0)
                             for name, partitions in topics])
            + w.i32(30_000) + w.i8(0) + w.uvarint(0))
    resp = w.roundtrip(bootstrap_or_sock, w.request(19, 7, 7, body, header_version=2, client_id=client_id))
    r = w.FlexReader(resp)
    assert r.i32() == 7
    r.tags()
    throttle = r.i32()
    out = {}

    def topic():
        name = r.compact_string()
        r.uuid()
        code, msg = r.i16(), r.compact_string()
        r.i32(), r.i16()  # partitions, replication factor
        r.array(lambda: (r.compact_string(), r.compact_string(), r.i8(), r.i8(), r.i8(), r.tags()))
        r.tags()
        out[name] = (code, msg)
    r.array(topic)
    return throttle, out


THROTTLING_QUOTA_EXCEEDED = 89
INVALID_REQUEST = 42


# -- the tests ----------------------------------------------------------------------------

def test_kafka_configs_sets_lists_and_deletes_quotas_which_survive_a_restart(broker_factory):
    b = broker_factory()
    bs = b.bootstrap
    kafka_configs(bs, "--alter", "--entity-type", "users", "--entity-name", "alice",
                  "--add-config", "producer_byte_rate=1024,consumer_byte_rate=2048")
    kafka_configs(bs, "--alter", "--entity-type", "clients", "--entity-name", "app-1",
                  "--add-config", "request_percentage=50.5")
    kafka_configs(bs, "--alter", "--entity-type", "users", "--entity-name", "alice",
                  "--entity-type", "clients", "--entity-name", "app-1", "--add-config", "producer_byte_rate=4096")
    kafka_configs(bs, "--alter", "--entity-type", "users", "--entity-default",
                  "--add-config", "controller_mutation_rate=10")
    kafka_configs(bs, "--alter", "--entity-type", "ips", "--entity-name", "127.0.0.2",
                  "--add-config", "connection_creation_rate=5")
    kafka_configs(bs, "--alter", "--entity-type", "ips", "--entity-default",
                  "--add-config", "connection_creation_rate=100")

    expected = {
        ("--entity-type", "users", "--entity-name", "alice"): [
            "Quota configs for user-principal 'alice' are consumer_byte_rate=2048.0, producer_byte_rate=1024.0"],
        ("--entity-type", "clients", "--entity-name", "app-1"): [
            "Quota configs for client-id 'app-1' are request_percentage=50.5"],
        ("--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients", "--entity-name", "app-1"): [
            "Quota configs for user-principal 'alice', client-id 'app-1' are producer_byte_rate=4096.0"],
        ("--entity-type", "users", "--entity-default"): [
            "Quota configs for the default user-principal are controller_mutation_rate=10.0"],
        ("--entity-type", "ips", "--entity-name", "127.0.0.2"): [
            "Quota configs for ip '127.0.0.2' are connection_creation_rate=5.0"],
        ("--entity-type", "ips", "--entity-default"): [
            "Quota configs for the default ip are connection_creation_rate=100.0"],
    }

    def all_described():
        return all(describe(bs, *entity) == lines for entity, lines in expected.items())
    wait_for("every quota described as set", all_described, 60)
    # Every user (named and default), as `--entity-type users` lists them.
    assert describe(bs, "--entity-type", "users") == sorted(
        expected[("--entity-type", "users", "--entity-name", "alice")]
        + expected[("--entity-type", "users", "--entity-default")])

    b.restart()
    for entity, lines in expected.items():
        assert describe(bs, *entity) == lines, entity

    kafka_configs(bs, "--alter", "--entity-type", "users", "--entity-name", "alice",
                  "--delete-config", "consumer_byte_rate")
    kafka_configs(bs, "--alter", "--entity-type", "clients", "--entity-name", "app-1",
                  "--delete-config", "request_percentage")
    wait_for("consumer_byte_rate of alice deleted", lambda: describe(bs, "--entity-type", "users", "--entity-name", "alice")
             == ["Quota configs for user-principal 'alice' are producer_byte_rate=1024.0"], 60)
    wait_for("app-1 has no quota left", lambda: describe(bs, "--entity-type", "clients", "--entity-name", "app-1") == [], 60)


def test_wrong_alterations_get_kafkas_errors(broker_factory):
    bs = broker_factory().bootstrap
    cases = [
        # (entity, ops); Kafka 4.4's answers below, in the same order
        ([], [("producer_byte_rate", 1.0, False)]),
        ([("topics", "x")], [("producer_byte_rate", 1.0, False)]),
        ([("user", "a"), ("user", "b")], [("producer_byte_rate", 1.0, False)]),
        ([("user", "a")], [("connection_creation_rate", 1.0, False)]),
        ([("ip", "127.0.0.1")], [("producer_byte_rate", 1.0, False)]),
        ([("ip", "not an address")], [("connection_creation_rate", 1.0, False)]),
        ([("ip", "127.0.0.1"), ("user", "a")], [("connection_creation_rate", 1.0, False)]),
        ([("user", "a")], [("no_such_quota", 1.0, False)]),
        ([("user", "a")], [("producer_byte_rate", 0.0, False)]),
        ([("user", "a")], [("producer_byte_rate", -5.0, False)]),
        ([("user", "a")], [("producer_byte_rate", 1.5, False)]),
        ([("client-id", "c")], [("request_percentage", 1.5, False)]),
        ([("user", "a")], [("producer_byte_rate", 1.0, False), ("producer_byte_rate", 2.0, False)]),
    ]
    # One request per case: Kafka answers a request's entries in no particular order.
    got = [alter_client_quotas(bs, [case], validate_only=True)[0] for case in cases]
    # Nothing was stored by a validate-only request, and a valid entry passes it.
    assert alter_client_quotas(bs, [([("user", "a")], [("producer_byte_rate", 1.0, False)])], validate_only=True) == [(0, None)]
    assert describe(bs, "--entity-type", "users", "--entity-name", "a") == []
    expected = [
        (INVALID_REQUEST, "Invalid empty client quota entity"),
        (INVALID_REQUEST, "Unhandled client quota entity type: topics"),
        (0, None),  # a type given twice: the last name counts
        (INVALID_REQUEST, "Invalid configuration key connection_creation_rate"),
        (INVALID_REQUEST, "Invalid configuration key producer_byte_rate"),
        (INVALID_REQUEST, "not an address is not a valid IP or resolvable host."),
        (INVALID_REQUEST, "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"),
        (INVALID_REQUEST, "Invalid configuration key no_such_quota"),
        (INVALID_REQUEST, "Quota producer_byte_rate must be greater than 0"),
        (INVALID_REQUEST, "Quota producer_byte_rate must be greater than 0"),
        (INVALID_REQUEST, "producer_byte_rate cannot be a fractional value."),
        (0, None),  # request_percentage is a double
        (INVALID_REQUEST, "Ignoring duplicate entity ClientQuotaEntity(entries={user=a})"),
    ]
    assert got == expected


def produced_in(bootstrap: str, topic: str, client_id: str, seconds: float) -> tuple[int, list[float]]:
    """Bytes a producer with `client_id` had acknowledged after producing as fast as it
    could for `seconds`, and the throttle times the broker told it."""
    throttles: list[float] = []
    acked = [0]

    def on_delivery(err, msg):
        if err is None:
            acked[0] += len(msg.value())

    p = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "acks": "1", "linger.ms": 5,
                  "batch.size": 16384, "queue.buffering.max.kbytes": 256, "compression.type": "none",
                  "throttle_cb": lambda ev: throttles.append(ev.throttle_time)})
    value = os.urandom(1000)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            p.produce(topic, value, partition=0, on_delivery=on_delivery)
        except BufferError:
            p.poll(0.01)
        p.poll(0)
    done = acked[0]
    p.purge()
    p.flush(30)
    return done, throttles


def test_a_producer_over_its_byte_rate_is_throttled_and_held_near_it(broker_factory, topic_name):
    b = broker_factory(settings=WINDOW_SETTINGS)
    bs = b.bootstrap
    admin_create_topic(bs, topic_name, 1)
    quota = 64 * 1024
    kafka_configs(bs, "--alter", "--entity-type", "clients", "--entity-name", "slow-producer",
                  "--add-config", f"producer_byte_rate={quota}")
    wait_for("the quota is in force", lambda: describe(bs, "--entity-type", "clients", "--entity-name", "slow-producer"))
    seconds = 6
    slow, slow_throttles = produced_in(bs, topic_name, "slow-producer", seconds)
    fast, fast_throttles = produced_in(bs, topic_name, "fast-producer", seconds)
    print(f"slow {slow} B ({slow / seconds:.0f} B/s, {len(slow_throttles)} throttles), fast {fast} B")
    assert slow_throttles and max(slow_throttles) > 0, "the throttled producer was never told to back off"
    assert not fast_throttles, fast_throttles
    # Request overhead counts against the quota too, so the values acknowledged are less.
    assert slow <= quota * (seconds + BURST_WINDOWS) + 5 * 16384, slow
    assert fast >= 2 * slow, (fast, slow)


def test_a_consumer_over_its_byte_rate_is_throttled_and_held_near_it(broker_factory, topic_name):
    b = broker_factory(settings=WINDOW_SETTINGS)
    bs = b.bootstrap
    admin_create_topic(bs, topic_name, 1)
    quota = 64 * 1024
    seconds = 6
    fill = 2 * quota * (seconds + BURST_WINDOWS)
    # Batches of at most 16 KiB: a fetch response larger than the quota allows at once is
    # never sent (Kafka answers it empty), so the consumer reads the topic a batch a time.
    p = Producer({"bootstrap.servers": bs, "acks": "1", "linger.ms": 5, "batch.size": 16384, "compression.type": "none"})
    value = os.urandom(1000)
    for _ in range(fill // len(value) + 1):
        while True:
            try:
                p.produce(topic_name, value, partition=0)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(60) == 0
    kafka_configs(bs, "--alter", "--entity-type", "clients", "--entity-name", "slow-consumer",
                  "--add-config", f"consumer_byte_rate={quota}")
    wait_for("the quota is in force", lambda: describe(bs, "--entity-type", "clients", "--entity-name", "slow-consumer"))

    def consumed_in(client_id: str) -> tuple[int, list[float]]:
        throttles: list[float] = []
        c = Consumer({"bootstrap.servers": bs, "group.id": client_id, "client.id": client_id,
                      "enable.auto.commit": False, "max.partition.fetch.bytes": 16384, "fetch.max.bytes": 16384, "message.max.bytes": 16384,
                      "queued.max.messages.kbytes": 64, "throttle_cb": lambda ev: throttles.append(ev.throttle_time)})
        c.assign([TopicPartition(topic_name, 0, 0)])
        got = 0
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            m = c.poll(0.1)
            if m is not None and m.error() is None:
                got += len(m.value())
        c.close()
        return got, throttles

    slow, slow_throttles = consumed_in("slow-consumer")
    fast, fast_throttles = consumed_in("fast-consumer")
    print(f"slow {slow} B ({slow / seconds:.0f} B/s, {len(slow_throttles)} throttles), fast {fast} B")
    assert slow_throttles and max(slow_throttles) > 0, "the throttled consumer was never told to back off"
    assert not fast_throttles, fast_throttles
    # What the consumer had prefetched counts: its queue (64 KiB) and a fetch in flight.
    assert slow > 0, "the throttled consumer read nothing"
    assert slow <= quota * (seconds + BURST_WINDOWS) + 64 * 1024 + 16384, slow
    assert fast >= 2 * slow, (fast, slow)


def test_topic_creation_over_the_mutation_rate_is_refused(broker_factory, topic_name):
    bs = broker_factory().bootstrap
    # 1 partition a second: a bucket of 11 (controller.quota.window.num 11 × 1 s).
    kafka_configs(bs, "--alter", "--entity-type", "clients", "--entity-name", "mutator",
                  "--add-config", "controller_mutation_rate=1")
    wait_for("the quota is in force", lambda: describe(bs, "--entity-type", "clients", "--entity-name", "mutator"))
    a, b, c, d = (f"{topic_name}-{x}" for x in "abcd")
    # One connection, as an admin client keeps (shardlog meters quotas per shard, and a
    # broker's connections are spread over its shards).
    mutator = w.connect(bs, timeout_s=60)
    # A full bucket takes a request larger than itself (11 - 20 = -9 tokens)...
    assert create_topics(mutator, "mutator", [(a, 20)]) == (0, {a: (0, None)})
    # ...and the next (within the 9 s the bucket takes to refill) is refused, told to
    # wait for the deficit (at most 9 s at 1/s).
    throttle, second = create_topics(mutator, "mutator", [(b, 1), (c, 1)])
    assert second == {b: (THROTTLING_QUOTA_EXCEEDED, None), c: (THROTTLING_QUOTA_EXCEEDED, None)}
    assert 0 < throttle <= 9000, throttle
    # Another client id is not held back.
    assert create_topics(bs, "someone-else", [(d, 20)]) == (0, {d: (0, None)})
    # Once the bucket has refilled, the client may create again.
    wait_for("the mutator may create again", lambda: create_topics(mutator, "mutator", [(b, 1)]) == (0, {b: (0, None)}), 60)
    mutator.close()


def connect_from(source_ip: str, bootstrap: str) -> socket.socket:
    host, port = bootstrap.rsplit(":", 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((source_ip, 0))
    s.settimeout(10)
    s.connect((host, int(port)))
    return s


def test_connections_over_the_per_ip_limit_are_closed(broker_factory):
    # 127.0.0.2 may hold 3 connections; everyone else (the tools, the broker's own) 1000.
    b = broker_factory(settings={"max.connections.per.ip": "1000", "max.connections.per.ip.overrides": "127.0.0.2:3"})
    bs = b.bootstrap
    held = [connect_from("127.0.0.2", bs) for _ in range(3)]
    assert all(w.answers_api_versions(s) for s in held)
    extra = connect_from("127.0.0.2", bs)
    assert not w.answers_api_versions(extra), "a fourth connection from 127.0.0.2 was served"
    extra.close()
    # Another address is not limited by 127.0.0.2's override.
    others = [connect_from("127.0.0.3", bs) for _ in range(5)]
    assert all(w.answers_api_versions(s) for s in others)
    # A slot freed is a slot to take again.
    held.pop().close()
    wait_for("a connection from 127.0.0.2 is served again", lambda: w.answers_api_versions(connect_from("127.0.0.2", bs)), 30)
    for s in held + others:
        s.close()


def test_connections_over_an_ips_creation_rate_are_refused(broker_factory):
    b = broker_factory(settings=WINDOW_SETTINGS)
    bs = b.bootstrap
    kafka_configs(bs, "--alter", "--entity-type", "ips", "--entity-name", "127.0.0.4",
                  "--add-config", "connection_creation_rate=2")
    wait_for("the quota is in force", lambda: describe(bs, "--entity-type", "ips", "--entity-name", "127.0.0.4"))

    def served_from(source_ip: str) -> bool:
        s = connect_from(source_ip, bs)
        try:
            return w.answers_api_versions(s)
        finally:
            s.close()
    # 2 a second, measured over at least 2 s (3 windows of 1 s): four pass at once
    # however slow the machine; connecting faster than that is refused before long.
    served = [served_from("127.0.0.4") for _ in range(4)]
    assert served == [True] * 4
    for _ in range(20):
        if not served_from("127.0.0.4"):
            break
    else:
        pytest.fail("24 connections from 127.0.0.4 served at 2 a second")
    # Another address is not held back by 127.0.0.4's rate.
    assert all(served_from("127.0.0.5") for _ in range(6))
