"""Per-listener settings (issue 24, point 1): Kafka's `listener.name.<listener>.<key>`
over the broker's own, here `sasl.enabled.mechanisms`: the SASL_PLAINTEXT listener offers
SCRAM-SHA-512 only, the SASL_SSL one PLAIN and SCRAM-SHA-512 (the broker's setting). The
same assertions run against Kafka 4.4 (`SHARDLOG_TEST_TARGET=kafka`).
"""
from __future__ import annotations

import kafkawire as w
from test_sasl import USERS, plain, ports, tls  # noqa: F401  (tls: the module's fixture)

UNSUPPORTED_SASL_MECHANISM = 33


def handshake(bootstrap: str, mechanism: str) -> tuple[int, list[str]]:
    """SaslHandshake v1 on a fresh plaintext connection: (error code, mechanisms offered)."""
    r = w.Reader(w.roundtrip(bootstrap, w.request(17, 1, 1, w.string(mechanism))))
    assert r.i32() == 1
    code = r.i16()
    return code, sorted(r.string() for _ in range(r.i32()))


def test_a_listener_offers_its_own_mechanisms(broker_factory, tls):  # noqa: F811
    ssl = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(tls.broker_pem),
           "ssl.truststore.type": "PEM", "ssl.truststore.location": str(tls.ca_pem)}
    b = broker_factory(ssl=ssl, sasl_plain_users=USERS, sasl_mechanisms=["PLAIN", "SCRAM-SHA-512"],
                       settings={"listener.name.sasl_plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-512"})
    assert handshake(b.sasl_bootstrap, "PLAIN") == (UNSUPPORTED_SASL_MECHANISM, ["SCRAM-SHA-512"])
    assert handshake(b.sasl_bootstrap, "SCRAM-SHA-512") == (0, ["SCRAM-SHA-512"])
    # The SASL_SSL listener keeps the broker's mechanisms: PLAIN authenticates there.
    conf = {**plain("alice"), "security.protocol": "SASL_SSL", "ssl.ca.location": str(tls.ca_pem)}
    assert ports(b.sasl_ssl_bootstrap, **conf) == {b.sasl_ssl_port}


def test_kafkas_controller_listener_settings_are_taken(broker_factory):
    """A Kafka server.properties' listeners, with a CONTROLLER listener named by
    controller.listener.names: clients are told only the PLAINTEXT endpoint, the quorum
    runs on the controller's (Kafka's own harness form; shardlog only, as Kafka is
    started so by every test)."""
    from conftest import skip_unless_shardlog
    from cluster_harness import free_port
    skip_unless_shardlog("checks shardlog's translation of Kafka's listener settings")
    b = broker_factory(start=False)
    c = free_port()
    b.extra_args = ["--listeners", f"PLAINTEXT://{b.bootstrap},CONTROLLER://127.0.0.1:{c}",
                    "--listener-security-protocol-map", "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                    "--controller-listener-names", "CONTROLLER", "--controller-quorum-voters", f"1@127.0.0.1:{c}"]
    b.start()
    assert ports(b.bootstrap) == {b.port}
    # The quorum listens on the controller's port.
    w.connect(f"127.0.0.1:{c}").close()
