"""SASL re-authentication (KIP-368, `connections.max.reauth.ms`; issue 24, point 3): the
session lifetime a client is told, a connection closed when it sends a request after its
session ended, re-authentication on the same connection (the same principal and
mechanism, else refused with Kafka's words), and confluent-kafka producing across several
sessions without a failure. The same assertions run against Kafka 4.4
(`SHARDLOG_TEST_TARGET=kafka`).
"""
from __future__ import annotations

import socket
import time

import pytest
from confluent_kafka import Producer

import kafkawire as w
from clients import admin_create_topic

REAUTH_MS = 3000
USERS = {"alice": "alice-secret", "bob": "bob-secret"}
SASL_AUTHENTICATION_FAILED = 58


@pytest.fixture(scope="module")
def reauth_broker(tmp_path_factory, request):
    from conftest import BrokerFactory
    f = BrokerFactory(tmp_path_factory, request.module.__name__)
    b = f(sasl_plain_users=USERS, sasl_mechanisms=["PLAIN", "SCRAM-SHA-512"],
          settings={"connections.max.reauth.ms": str(REAUTH_MS)})
    yield b
    f.close()


def handshake(s: socket.socket, mechanism: str) -> int:
    r = w.Reader(w.roundtrip(s, w.request(17, 1, 1, w.string(mechanism))))
    assert r.i32() == 1
    return r.i16()


def authenticate(s: socket.socket, user: str, password: str) -> tuple[int, str | None, int]:
    """SaslAuthenticate v2 with a PLAIN token: (error code, message, session_lifetime_ms)."""
    token = b"\0" + user.encode() + b"\0" + password.encode()
    r = w.FlexReader(w.roundtrip(s, w.request(36, 2, 2, w.varbytes_compact(token) + w.uvarint(0), header_version=2)))
    assert r.i32() == 2
    r.tags()
    code, message = r.i16(), r.compact_string()
    r.compact_bytes()
    return code, message, r.i64()


def plain_session(bootstrap: str, user: str = "alice") -> tuple[socket.socket, int]:
    s = w.connect(bootstrap)
    assert handshake(s, "PLAIN") == 0
    code, message, lifetime = authenticate(s, user, USERS[user])
    assert code == 0, message
    return s, lifetime


def test_a_session_ends_unless_the_client_reauthenticates(reauth_broker):
    s, lifetime = plain_session(reauth_broker.sasl_bootstrap)
    assert 0 < lifetime <= REAUTH_MS, lifetime
    assert w.answers_api_versions(s)
    time.sleep(lifetime / 1000 + 0.5)
    assert not w.answers_api_versions(s), "a request after the session ended was served"
    s.close()

    # Re-authenticating in time starts a new session on the same connection.
    s, lifetime = plain_session(reauth_broker.sasl_bootstrap)
    for _ in range(2):
        time.sleep(lifetime / 2000)
        assert handshake(s, "PLAIN") == 0
        code, message, lifetime = authenticate(s, "alice", USERS["alice"])
        assert code == 0 and 0 < lifetime <= REAUTH_MS, (code, message, lifetime)
        assert w.answers_api_versions(s)
    s.close()


def test_reauthentication_keeps_the_principal_and_mechanism(reauth_broker):
    s, _ = plain_session(reauth_broker.sasl_bootstrap)
    assert handshake(s, "PLAIN") == 0
    code, message, _ = authenticate(s, "bob", USERS["bob"])
    assert (code, message) == (SASL_AUTHENTICATION_FAILED,
                               "Cannot change principals during re-authentication from User.alice: User.bob")
    assert not w.answers_api_versions(s)
    s.close()

    # Another mechanism: Kafka answers the handshake, then closes the connection.
    s, _ = plain_session(reauth_broker.sasl_bootstrap)
    assert handshake(s, "SCRAM-SHA-512") == 0
    assert not w.answers_api_versions(s)
    s.close()


def test_a_producer_keeps_producing_across_sessions(reauth_broker, topic_name):
    admin_create_topic(reauth_broker.bootstrap, topic_name, 1)
    errors: list[str] = []
    delivered = [0]

    def on_delivery(err, _msg):
        if err is None:
            delivered[0] += 1
        else:
            errors.append(str(err))

    p = Producer({"bootstrap.servers": reauth_broker.sasl_bootstrap, "security.protocol": "SASL_PLAINTEXT",
                  "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": USERS["alice"],
                  "linger.ms": 5, "error_cb": lambda e: errors.append(e.str())})
    sent = 0
    end = time.monotonic() + 3 * REAUTH_MS / 1000
    while time.monotonic() < end:
        p.produce(topic_name, b"v%d" % sent, on_delivery=on_delivery)
        sent += 1
        p.poll(0.05)
    assert p.flush(60) == 0
    assert errors == [] and delivered[0] == sent, (errors[:5], delivered[0], sent)
