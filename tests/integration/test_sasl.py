"""SASL/PLAIN listeners (issue 24, point 3, first mechanism): SASL_PLAINTEXT and SASL_SSL
beside PLAINTEXT, users from Kafka's PlainLoginModule JAAS options, real clients
(confluent-kafka, the Java client, kcat, kafka-python) authenticating, and what a client
gets for a wrong password, an unknown user or mechanism, requests before authentication,
and SASL requests on a listener without SASL. The same assertions run against Kafka 4.4.
"""
from __future__ import annotations

import re
import socket
import struct
import subprocess
import time

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient

import kafkawire as w
import tls_material
from clients import (admin_create_topic, compare, consume_confluent, consume_java, kcat_bin, make_records,
                     produce_confluent, produce_java)
from conftest import skip_unless_shardlog

USERS = {"alice": "alice-secret", "bob": "bob-secret"}


@pytest.fixture(scope="module")
def tls(tmp_path_factory) -> tls_material.TlsMaterial:
    return tls_material.make(tmp_path_factory.mktemp("tls"))


def plain(user: str = "alice", password: str | None = None) -> dict:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": user, "sasl.password": USERS.get(user, "x") if password is None else password}


def ports(bootstrap: str, **conf) -> set[int]:
    md = AdminClient({"bootstrap.servers": bootstrap, **conf}).list_topics(timeout=30)
    return {b.port for b in md.brokers.values()}


def auth_error(bootstrap: str, **conf) -> str:
    """The authentication error a client that cannot authenticate is told (librdkafka's
    error callback, served by poll), without the timing librdkafka appends."""
    errors: list[str] = []
    p = Producer({"bootstrap.servers": bootstrap, "log_level": 0, "error_cb": lambda e: errors.append(e.str()), **conf})
    auth: list[str] = []
    deadline = time.monotonic() + 30
    while not auth and time.monotonic() < deadline:
        p.poll(0.2)
        auth = [re.sub(r" \(after \d+ms in state \w+\)", "", e) for e in errors if "uthentication" in e]
    assert auth, errors
    return auth[0]


def test_plain_users_produce_and_consume_over_sasl_plaintext(broker_factory, tmp_path):
    b = broker_factory(sasl_plain_users=USERS)
    assert ports(b.sasl_bootstrap, **plain()) == {b.sasl_port}
    topic = "sasl-plain"
    admin_create_topic(b.bootstrap, topic, 2)
    produced = produce_confluent(b.sasl_bootstrap, topic, make_records(2000, seed=31), **plain("alice"))
    compare(produced, consume_confluent(b.sasl_bootstrap, topic, 2, **plain("bob")))
    java = ("security.protocol=SASL_PLAINTEXT,sasl.mechanism=PLAIN,sasl.jaas.config="
            "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"bob\" password=\"bob-secret\";")
    more = produce_java(b.sasl_bootstrap, topic, make_records(300, seed=32), tmp_path, extra_props=java)
    compare(produced + more, consume_java(b.sasl_bootstrap, topic, 2, extra_props=java))
    # kcat (librdkafka 2.0.2, SaslHandshake v1 + SaslAuthenticate).
    conf = ["-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=PLAIN",
            "-X", "sasl.username=alice", "-X", f"sasl.password={USERS['alice']}"]
    r = subprocess.run([kcat_bin(), "-L", "-b", b.sasl_bootstrap, "-t", topic, *conf],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and f'topic "{topic}" with 2 partitions' in r.stdout, (r.stdout, r.stderr)


def test_kafka_python_over_sasl_plain(broker_factory):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    b = broker_factory(sasl_plain_users=USERS)
    topic = "sasl-kafka-python"
    admin_create_topic(b.bootstrap, topic, 1)
    conf = {"bootstrap_servers": b.sasl_bootstrap, "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
            "sasl_plain_username": "alice", "sasl_plain_password": USERS["alice"]}
    p = KafkaProducer(**conf)
    for i in range(50):
        p.send(topic, f"v{i}".encode(), partition=0)
    p.flush(30)
    p.close()
    c = KafkaConsumer(**conf, consumer_timeout_ms=10_000, auto_offset_reset="earliest")
    c.assign([TopicPartition(topic, 0)])
    got = [m.value for m in c]
    c.close()
    assert got == [f"v{i}".encode() for i in range(50)]


def test_sasl_ssl_with_the_java_client_and_librdkafka(broker_factory, tls):
    ssl = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(tls.broker_pem),
           "ssl.truststore.type": "PEM", "ssl.truststore.location": str(tls.ca_pem)}
    b = broker_factory(ssl=ssl, sasl_plain_users=USERS)
    conf = {**plain("alice"), "security.protocol": "SASL_SSL", "ssl.ca.location": str(tls.ca_pem)}
    assert ports(b.sasl_ssl_bootstrap, **conf) == {b.sasl_ssl_port}
    topic = "sasl-ssl"
    admin_create_topic(b.bootstrap, topic, 1)
    produced = produce_confluent(b.sasl_ssl_bootstrap, topic, make_records(500, seed=33), **conf)
    java = (f"security.protocol=SASL_SSL,ssl.truststore.type=PEM,ssl.truststore.location={tls.ca_pem},"
            "sasl.mechanism=PLAIN,sasl.jaas.config="
            "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"alice\" password=\"alice-secret\";")
    compare(produced, consume_java(b.sasl_ssl_bootstrap, topic, 1, extra_props=java))


def test_wrong_password_and_unknown_user_fail_alike(broker_factory):
    b = broker_factory(sasl_plain_users=USERS)
    wrong = auth_error(b.sasl_bootstrap, **plain("alice", "not-her-password"))
    unknown = auth_error(b.sasl_bootstrap, **plain("mallory", "alice-secret"))
    assert "Authentication failed" in wrong, wrong
    # Nothing tells a missing user from a wrong password.
    assert wrong.replace("alice", "?") == unknown.replace("mallory", "?"), (wrong, unknown)
    # A client with no SASL at all on the SASL port is cut off, never served.
    with pytest.raises(KafkaException):
        AdminClient({"bootstrap.servers": b.sasl_bootstrap}).list_topics(timeout=8)
    assert ports(b.sasl_bootstrap, **plain("bob")) == {b.sasl_port}


def handshake_v1(mechanism: str) -> bytes:
    return w.request(17, 1, 1, struct.pack(">h", len(mechanism)) + mechanism.encode())


def parse_handshake(resp: bytes) -> tuple[int, list[str]]:
    r = w.Reader(resp)
    assert r.i32() == 1
    err = r.i16()
    mechanisms = [r.string() for _ in range(r.i32())]
    return err, mechanisms


def test_the_sasl_exchange_on_the_wire(broker_factory):
    b = broker_factory(sasl_plain_users=USERS)
    # An unknown mechanism: UNSUPPORTED_SASL_MECHANISM with the enabled ones, then closed.
    with w.connect(b.sasl_bootstrap) as s:
        s.sendall(handshake_v1("SCRAM-SHA-512"))
        assert parse_handshake(w.recv_frame(s)) == (33, ["PLAIN"])
        assert w.closed_or_reply(s, 10) == "closed"
    # A request other than ApiVersions/SASL before authentication: closed, no answer.
    with w.connect(b.sasl_bootstrap) as s:
        s.sendall(w.request(3, 0, 1, struct.pack(">i", 0)))  # Metadata v0, all topics
        assert w.closed_or_reply(s, 10) == "closed"
    # ApiVersions is answered before authentication.
    with w.connect(b.sasl_bootstrap) as s:
        s.sendall(w.api_versions_request(0, 1))
        _, err, versions = w.parse_api_versions_v0(w.recv_frame(s))
        assert err == 0 and versions[17] == (0, 1) and versions[36][0] == 0
    # SaslHandshake on a listener without SASL: ILLEGAL_SASL_STATE.
    with w.connect(b.bootstrap) as s:
        s.sendall(handshake_v1("PLAIN"))
        err, _ = parse_handshake(w.recv_frame(s))
        assert err == 34


def test_a_silent_client_is_cut_off_before_authenticating(broker_factory):
    skip_unless_shardlog("Kafka waits connections.max.idle.ms (10 min)")
    b = broker_factory(sasl_plain_users=USERS, extra_args=["--ssl-handshake-timeout-ms", "1000"])
    with socket.create_connection(("127.0.0.1", b.sasl_port), timeout=60) as s:
        assert s.recv(1) == b""
    assert ports(b.sasl_bootstrap, **plain()) == {b.sasl_port}


@pytest.mark.parametrize("args,needle", [
    (["--sasl-enabled-mechanisms", "GSSAPI"], "GSSAPI is Kafka's default"),
    (["--sasl-enabled-mechanisms", "PLAIN", "--sasl-jaas-config", "bogus"], "sasl_jaas_config"),
])
def test_sasl_settings_shardlog_cannot_serve_stop_the_broker(broker_factory, args, needle):
    skip_unless_shardlog("shardlog's start-up message")
    b = broker_factory(start=False)
    cmd = b._shardlog_cmd() + ["--listeners", f"PLAINTEXT://{b.bootstrap},SASL_PLAINTEXT://127.0.0.1:{b.port + 1}", *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert needle in r.stdout + r.stderr, (r.stdout + r.stderr)[-2000:]
