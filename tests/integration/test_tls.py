"""TLS listeners (issue 24, points 1 and 2): a PLAINTEXT and an SSL listener side by side,
Kafka's ssl.* settings (PEM with an encrypted key, PKCS12), mutual TLS, and what a client
that speaks no TLS, or the wrong TLS, gets.

Real clients over TLS: confluent-kafka (librdkafka), the Java client (kafka-clients 4.4)
and kcat. The data path is checked whole: records produced over TLS come back over TLS with
their CRCs checked (`check.crcs`), including reads past the batch cache, which a plaintext
connection sends with `sendfile` and a TLS connection reads and encrypts.
"""
from __future__ import annotations

import socket
import struct
import subprocess
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

import tls_material
from clients import (admin_create_topic, compare, consume_confluent, consume_java, kcat_bin, make_records,
                     produce_confluent, produce_java)
from conftest import is_kafka, skip_unless_shardlog, wait_for

PASSWORD = tls_material.PASSWORD


@pytest.fixture(scope="module")
def tls(tmp_path_factory) -> tls_material.TlsMaterial:
    return tls_material.make(tmp_path_factory.mktemp("tls"))


def pem_keystore(m: tls_material.TlsMaterial, client_auth: str = "none") -> dict[str, str]:
    """Kafka's settings for a PEM key store (unencrypted key) and a PEM trust store."""
    return {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(m.broker_pem),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(m.ca_pem), "ssl.client.auth": client_auth}


def encrypted_pem_keystore(m: tls_material.TlsMaterial) -> dict[str, str]:
    """A PEM key store whose PKCS#8 key is encrypted with PBES2 (what `openssl pkcs8 -topk8`
    writes): Kafka 4.4 on Java 17 cannot open it (no PBES2 SecretKeyFactory), shardlog can."""
    return {**pem_keystore(m), "ssl.keystore.location": str(m.broker_pem_encrypted), "ssl.key.password": PASSWORD}


def p12_keystore(m: tls_material.TlsMaterial, client_auth: str = "none") -> dict[str, str]:
    return {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(m.broker_p12),
            "ssl.keystore.password": PASSWORD, "ssl.key.password": PASSWORD,
            "ssl.truststore.type": "PKCS12", "ssl.truststore.location": str(m.ca_p12),
            "ssl.truststore.password": PASSWORD, "ssl.client.auth": client_auth}


def librdkafka_ssl(m: tls_material.TlsMaterial, cert: bool = False) -> dict:
    conf = {"security.protocol": "SSL", "ssl.ca.location": str(m.ca_pem)}
    if cert:
        conf.update({"ssl.certificate.location": str(m.client_cert), "ssl.key.location": str(m.client_key)})
    return conf


def java_ssl(m: tls_material.TlsMaterial, cert: bool = False) -> str:
    props = ["security.protocol=SSL", "ssl.truststore.type=PEM", f"ssl.truststore.location={m.ca_pem}"]
    if cert:
        props += ["ssl.keystore.type=PKCS12", f"ssl.keystore.location={m.client_p12}",
                  f"ssl.keystore.password={PASSWORD}", f"ssl.key.password={PASSWORD}"]
    return ",".join(props)


def advertised_ports(bootstrap: str, **conf) -> set[int]:
    md = AdminClient({"bootstrap.servers": bootstrap, **conf}).list_topics(timeout=30)
    return {b.port for b in md.brokers.values()}


def test_ssl_and_plaintext_listeners_serve_the_same_log(broker_factory, tls, tmp_path):
    # flush = never and a small batch cache: most reads are file slices, which the
    # plaintext listener sends with sendfile and the SSL listener reads and encrypts.
    extra = [] if is_kafka() else ["--batch-cache-bytes-per-partition", "65536"]
    b = broker_factory(ssl=pem_keystore(tls), flush="never", extra_args=extra)
    # Each listener advertises itself: a client on SSL is sent to the SSL port.
    assert advertised_ports(b.ssl_bootstrap, **librdkafka_ssl(tls)) == {b.ssl_port}
    assert advertised_ports(b.bootstrap) == {b.port}
    topic = "tls-roundtrip"
    admin_create_topic(b.bootstrap, topic, 2)
    recs = make_records(6000, seed=24)
    produced = produce_confluent(b.ssl_bootstrap, topic, recs, compression="none", **librdkafka_ssl(tls))
    # Read back over TLS (librdkafka checks each batch's CRC) and over plaintext: the same.
    over_tls = consume_confluent(b.ssl_bootstrap, topic, 2, **librdkafka_ssl(tls), **{"check.crcs": True})
    compare(produced, over_tls)
    compare(produced, consume_confluent(b.bootstrap, topic, 2, **{"check.crcs": True}))
    # The Java client over TLS, both ways.
    more = make_records(500, seed=25)
    produced_java = produce_java(b.ssl_bootstrap, topic, more, tmp_path, extra_props=java_ssl(tls))
    got = consume_java(b.ssl_bootstrap, topic, 2, extra_props=java_ssl(tls))
    assert sum(len(v) for v in got.values()) == len(produced) + len(produced_java)
    compare(produced + produced_java, got)


def test_kcat_over_ssl_with_a_pkcs12_key_store(broker_factory, tls):
    b = broker_factory(ssl=p12_keystore(tls))
    topic = "tls-kcat"
    admin_create_topic(b.bootstrap, topic, 1)
    conf = ["-X", "security.protocol=SSL", "-X", f"ssl.ca.location={tls.ca_pem}"]
    lines = "".join(f"k{i}:value-{i}\n" for i in range(200))
    r = subprocess.run([kcat_bin(), "-P", "-b", b.ssl_bootstrap, "-t", topic, "-K:", "-p", "0", *conf],
                       input=lines, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([kcat_bin(), "-C", "-b", b.ssl_bootstrap, "-t", topic, "-p", "0", "-o", "beginning", "-e",
                        "-f", "%k:%s\n", *conf], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout == lines


def test_mutual_tls_admits_certified_clients_only(broker_factory, tls, tmp_path):
    b = broker_factory(ssl=p12_keystore(tls, client_auth="required"))
    topic = "tls-mutual"
    admin_create_topic(b.bootstrap, topic, 1)
    # With a certificate the CA signed: served (librdkafka and Java).
    produced = produce_confluent(b.ssl_bootstrap, topic, make_records(300, seed=7), **librdkafka_ssl(tls, cert=True))
    compare(produced, consume_confluent(b.ssl_bootstrap, topic, 1, **librdkafka_ssl(tls, cert=True)))
    got = consume_java(b.ssl_bootstrap, topic, 1, extra_props=java_ssl(tls, cert=True))
    compare(produced, got)
    # Without a certificate, or with one another CA signed: the handshake fails.
    for conf in (librdkafka_ssl(tls),
                 {**librdkafka_ssl(tls), "ssl.certificate.location": str(tls.stranger_cert),
                  "ssl.key.location": str(tls.stranger_key)}):
        with pytest.raises(KafkaException):
            AdminClient({"bootstrap.servers": b.ssl_bootstrap, **conf}).list_topics(timeout=8)
    # A client that does not trust the broker's CA refuses the broker.
    with pytest.raises(KafkaException):
        AdminClient({"bootstrap.servers": b.ssl_bootstrap, "security.protocol": "SSL",
                     "ssl.ca.location": str(tls.other_ca_pem)}).list_topics(timeout=8)
    # The broker kept serving throughout.
    assert advertised_ports(b.ssl_bootstrap, **librdkafka_ssl(tls, cert=True)) == {b.ssl_port}


def api_versions_request() -> bytes:
    body = struct.pack(">hhih", 18, 0, 1, -1)  # ApiVersions v0, correlation id 1, null client id
    return struct.pack(">i", len(body)) + body


def test_plaintext_sent_to_the_ssl_port_is_refused_and_others_are_served(broker_factory, tls):
    b = broker_factory(ssl=pem_keystore(tls))
    # A Kafka request where a ClientHello belongs: the connection closes (an alert at most).
    with socket.create_connection(("127.0.0.1", b.ssl_port), timeout=30) as s:
        s.sendall(api_versions_request())
        got = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
        # A TLS alert record (content type 21) or nothing: never a Kafka response.
        assert got == b"" or got[0] == 21, got[:16]
    # The plaintext port still answers the same request.
    with socket.create_connection(("127.0.0.1", b.port), timeout=30) as s:
        s.sendall(api_versions_request())
        size = struct.unpack(">i", s.recv(4))[0]
        assert size > 0
    assert advertised_ports(b.ssl_bootstrap, **librdkafka_ssl(tls)) == {b.ssl_port}


def test_a_stalled_handshake_is_closed_and_does_not_block_others(broker_factory, tls):
    skip_unless_shardlog("Kafka closes a silent connection after connections.max.idle.ms (10 min)")
    b = broker_factory(ssl={**pem_keystore(tls), "ssl.handshake.timeout.ms": "1000"})
    stalled = [socket.create_connection(("127.0.0.1", b.ssl_port), timeout=60) for _ in range(50)]
    try:
        # Others are served while 50 connections sit mid-handshake.
        assert advertised_ports(b.ssl_bootstrap, **librdkafka_ssl(tls)) == {b.ssl_port}
        # Each stalled connection is closed by the broker (recv sees the end of stream).
        for s in stalled:
            assert s.recv(1) == b""
    finally:
        for s in stalled:
            s.close()
    wait_for("the handshake-failure log line",
             lambda: "TLS handshake failed" in b.log_path.read_text(errors="replace"), 30)


def test_an_encrypted_pem_key_is_opened_with_the_key_password(broker_factory, tls):
    skip_unless_shardlog("Kafka 4.4 on Java 17 cannot decrypt a PBES2 key (NoSuchAlgorithmException)")
    b = broker_factory(ssl=encrypted_pem_keystore(tls))
    topic = "tls-encrypted-key"
    admin_create_topic(b.bootstrap, topic, 1)
    produced = produce_confluent(b.ssl_bootstrap, topic, make_records(100, seed=3), **librdkafka_ssl(tls))
    compare(produced, consume_confluent(b.ssl_bootstrap, topic, 1, **librdkafka_ssl(tls)))


@pytest.mark.parametrize("setting,value,needle", [
    ("ssl.keystore.type", "JKS", "JKS (Kafka's default) cannot be read"),
    ("ssl.key.password", "wrong-password", "cannot decrypt the private key"),
    ("ssl.enabled.protocols", "TLSv1.1", "TLSv1.1 is not offered"),
    ("ssl.client.auth", "sometimes", "must be none, requested or required"),
])
def test_bad_tls_settings_stop_the_broker_with_the_key_named(broker_factory, tls, setting, value, needle):
    skip_unless_shardlog("shardlog's start-up message")
    b = broker_factory(ssl={**encrypted_pem_keystore(tls), setting: value}, start=False)
    cmd = b._shardlog_cmd()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    out = r.stdout + r.stderr
    assert needle in out, out[-2000:]
    assert setting.replace(".", "_") in out, out[-2000:]


def served_certificate(port: int, ca: str) -> bytes:
    """The certificate (DER) a new TLS connection to `port` is shown."""
    import ssl
    ctx = ssl.create_default_context(cafile=ca)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        with ctx.wrap_socket(s, server_hostname="127.0.0.1") as tls_socket:
            return tls_socket.getpeercert(binary_form=True)


def test_a_listeners_key_store_is_replaced_without_a_restart(broker_factory, tls, tmp_path):
    """Kafka's dynamic per-broker `listener.name.ssl.ssl.keystore.location`, altered with
    kafka-configs.sh: new connections get the new certificate, clients go on working, a
    store that cannot serve TLS is refused (and the old one stays), and the cluster-wide
    default is refused (per-broker only)."""
    from clients import kafka_tool
    b = broker_factory(ssl=pem_keystore(tls))
    first = served_certificate(b.ssl_port, str(tls.ca_pem))

    def p12(name: str, subject: str) -> tuple[Path, Path]:
        """A certificate for the same names from the same CA, as a PKCS12 store."""
        key, cert = tls_material._signed(tls.dir, name, subject, tls.dir / "ca.key", tls.ca_pem,
                                         "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
        store = tmp_path / f"{name}.p12"
        tls_material._openssl("pkcs12", "-export", "-inkey", str(key), "-in", str(cert), "-certfile", str(tls.ca_pem),
                              "-name", "broker", "-out", str(store), "-passout", f"pass:{PASSWORD}", cwd=tls.dir)
        return store, cert

    renewed, cert = p12("renewed", "/CN=localhost/O=shardlog")  # a renewal: the same subject
    other, _ = p12("other-identity", "/CN=localhost/O=someone-else")

    def alter(entity: list[str], *configs: str):
        return kafka_tool("org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", b.bootstrap, "--alter",
                          "--entity-type", "brokers", *entity, "--add-config", ",".join(configs))

    # A store that cannot be opened: refused, nothing changes.
    r = alter(["--entity-name", "1"], f"listener.name.ssl.ssl.keystore.location={tmp_path / 'missing.p12'}",
              "listener.name.ssl.ssl.keystore.type=PKCS12", f"listener.name.ssl.ssl.keystore.password={PASSWORD}",
              f"listener.name.ssl.ssl.key.password={PASSWORD}")
    out = r.stdout + r.stderr
    assert r.returncode != 0 and "InvalidRequestException" in out and "Validation of dynamic config update of SSLFactory failed" in out, out
    assert served_certificate(b.ssl_port, str(tls.ca_pem)) == first
    # Per broker only.
    r = alter(["--entity-default"], f"listener.name.ssl.ssl.keystore.location={renewed}")
    assert r.returncode != 0, r.stdout + r.stderr
    # Another identity is not a renewal: Kafka keeps the subject (ssl.allow.dn.changes).
    r = alter(["--entity-name", "1"], f"listener.name.ssl.ssl.keystore.location={other}",
              "listener.name.ssl.ssl.keystore.type=PKCS12", f"listener.name.ssl.ssl.keystore.password={PASSWORD}",
              f"listener.name.ssl.ssl.key.password={PASSWORD}")
    assert r.returncode != 0 and "Keystore DistinguishedName does not match" in r.stdout + r.stderr, r.stdout + r.stderr
    # The renewed store: new connections see it.
    r = alter(["--entity-name", "1"], f"listener.name.ssl.ssl.keystore.location={renewed}",
              "listener.name.ssl.ssl.keystore.type=PKCS12", f"listener.name.ssl.ssl.keystore.password={PASSWORD}",
              f"listener.name.ssl.ssl.key.password={PASSWORD}")
    assert r.returncode == 0, r.stdout + r.stderr
    assert wait_for("the renewed certificate on new connections",
                    lambda: served_certificate(b.ssl_port, str(tls.ca_pem)) == cert_der(cert))
    topic = "after-key-store-change"
    admin_create_topic(b.bootstrap, topic, 1)
    produced = produce_confluent(b.ssl_bootstrap, topic, make_records(100, seed=91), **librdkafka_ssl(tls))
    compare(produced, consume_confluent(b.ssl_bootstrap, topic, 1, **librdkafka_ssl(tls)))


def cert_der(pem_path) -> bytes:
    import ssl
    return ssl.PEM_cert_to_DER_cert(open(pem_path).read())
