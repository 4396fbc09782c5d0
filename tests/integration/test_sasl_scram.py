"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (issue 24, point 3): credentials created, listed
and deleted with Kafka's own kafka-configs.sh and with confluent-kafka's admin client,
stored salted in the metadata log (they survive a restart), and used by the Java client,
confluent-kafka, kcat and franz-go over SASL_PLAINTEXT and SASL_SSL. What a client gets
for a wrong password, an unknown user, and for AlterUserScramCredentials it may not make.
The same assertions run against Kafka 4.4 (`SHARDLOG_TEST_TARGET=kafka`).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialDeletion,
                                   UserScramCredentialUpsertion)

import kafkawire as w
import tls_material
from clients import (admin_create_topic, compare, consume_confluent, consume_java, kafka_tool, kcat_bin,
                     make_records, produce_confluent, produce_java)
from test_sasl import auth_error, ports

SCRAM = ["SCRAM-SHA-256", "SCRAM-SHA-512"]
REPO = Path(__file__).resolve().parents[2]
GO_CLIENT = Path(os.environ.get("SHARDLOG_GO_SASL_CLIENT", REPO / "tests" / "go" / "target" / "saslclient"))


@pytest.fixture(scope="module")
def tls(tmp_path_factory) -> tls_material.TlsMaterial:
    return tls_material.make(tmp_path_factory.mktemp("tls"))


def kafka_configs(bootstrap: str, *args: str) -> str:
    r = kafka_tool("org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", bootstrap, *args)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    return r.stdout


def add_user(bootstrap: str, user: str, password: str,
             mechanisms: tuple[str, ...] = ("SCRAM-SHA-256=[iterations=8192,password={p}]", "SCRAM-SHA-512=[password={p}]")) -> None:
    # One mechanism per call: Kafka refuses two alterations of one user in one request
    # (DUPLICATE_RESOURCE), which is what kafka-configs sends for two at once.
    for m in mechanisms:
        kafka_configs(bootstrap, "--alter", "--entity-type", "users", "--entity-name", user, "--add-config", m.format(p=password))


def scram(mechanism: str, user: str, password: str) -> dict:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": password}


def java_scram(mechanism: str, user: str, password: str, protocol: str = "SASL_PLAINTEXT") -> str:
    return (f"security.protocol={protocol},sasl.mechanism={mechanism},sasl.jaas.config="
            f"org.apache.kafka.common.security.scram.ScramLoginModule required username=\"{user}\" password=\"{password}\";")


def librdkafka_version(kcat: str) -> tuple[int, ...]:
    """The librdkafka a kcat binary links (`kcat -V`: "... librdkafka 2.0.2 builtin.features=...")."""
    out = subprocess.run([kcat, "-V"], capture_output=True, text=True, timeout=30).stdout
    m = re.search(r"librdkafka (?:version )?(\d+)\.(\d+)\.(\d+)", out)
    assert m, out
    return tuple(int(x) for x in m.groups())


def franz(bootstrap: str, topic: str, mechanism: str, user: str, password: str, ca: Path | None = None) -> dict:
    if not GO_CLIENT.exists():
        pytest.fail(f"{GO_CLIENT} missing: scripts/test.sh builds it (cd tests/go && go build -o target/saslclient ./saslclient)")
    cmd = [str(GO_CLIENT), "-bootstrap", bootstrap, "-topic", topic, "-mechanism", mechanism,
           "-user", user, "-password", password, "-records", "200"]
    if ca:
        cmd += ["-ca", str(ca)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    return json.loads(r.stdout.strip().splitlines()[-1]) if r.stdout.strip() else {"error": r.stderr[-2000:]}


def test_kafka_configs_manages_scram_users_and_every_client_authenticates(broker_factory, tmp_path):
    b = broker_factory(sasl_mechanisms=SCRAM)
    add_user(b.bootstrap, "alice", "alice-secret")
    add_user(b.bootstrap, "bob", "bob-secret", ("SCRAM-SHA-512=[iterations=4096,password={p}]",))
    described = kafka_configs(b.bootstrap, "--describe", "--entity-type", "users", "--entity-name", "alice")
    assert "SCRAM-SHA-256=iterations=8192" in described and "SCRAM-SHA-512=iterations=4096" in described, described
    # Never a salt, key or password in what is described.
    assert "secret" not in described and "salt" not in described.lower(), described
    everyone = kafka_configs(b.bootstrap, "--describe", "--entity-type", "users")
    assert "'alice'" in everyone and "'bob'" in everyone, everyone

    topic = "scram-clients"
    admin_create_topic(b.bootstrap, topic, 2)
    assert ports(b.sasl_bootstrap, **scram("SCRAM-SHA-512", "alice", "alice-secret")) == {b.sasl_port}
    produced = produce_confluent(b.sasl_bootstrap, topic, make_records(1500, seed=41), **scram("SCRAM-SHA-256", "alice", "alice-secret"))
    compare(produced, consume_confluent(b.sasl_bootstrap, topic, 2, **scram("SCRAM-SHA-512", "bob", "bob-secret")))
    java = java_scram("SCRAM-SHA-512", "bob", "bob-secret")
    more = produce_java(b.sasl_bootstrap, topic, make_records(300, seed=42), tmp_path, extra_props=java)
    compare(produced + more, consume_java(b.sasl_bootstrap, topic, 2, extra_props=java_scram("SCRAM-SHA-256", "alice", "alice-secret")))
    r = subprocess.run([kcat_bin(), "-L", "-b", b.sasl_bootstrap, "-t", topic, "-m", "10", "-X", "security.protocol=SASL_PLAINTEXT",
                        "-X", "sasl.mechanisms=SCRAM-SHA-512", "-X", "sasl.username=alice", "-X", "sasl.password=alice-secret"],
                       capture_output=True, text=True, timeout=60)
    if librdkafka_version(kcat_bin()) >= (2, 6, 1):
        assert r.returncode == 0 and f'topic "{topic}" with 2 partitions' in r.stdout, (r.stdout, r.stderr)
    else:
        # librdkafka before 2.6.1 puts the client nonce twice in its final message
        # (librdkafka#4895); Kafka 4.x checks the nonce strictly (RFC 5802, CVE-2024-56128)
        # and refuses it, and so does shardlog. Debian 12's kcat links 2.0.2.
        assert r.returncode != 0 and "invalid credentials with SASL mechanism SCRAM-SHA-512" in r.stderr, (r.stdout, r.stderr)
    admin_create_topic(b.bootstrap, "scram-franz", 1)
    assert franz(b.sasl_bootstrap, "scram-franz", "SCRAM-SHA-512", "bob", "bob-secret") == {"produced": 200, "consumed": 200, "match": True}


def test_credentials_survive_a_restart_and_deleted_ones_stop_working(broker_factory):
    b = broker_factory(sasl_mechanisms=SCRAM)
    add_user(b.bootstrap, "carol", "carol-secret")
    b.restart()
    assert ports(b.sasl_bootstrap, **scram("SCRAM-SHA-256", "carol", "carol-secret")) == {b.sasl_port}
    kafka_configs(b.bootstrap, "--alter", "--entity-type", "users", "--entity-name", "carol", "--delete-config", "SCRAM-SHA-256")
    # The SHA-512 credential stays; the SHA-256 one is gone for new connections.
    assert ports(b.sasl_bootstrap, **scram("SCRAM-SHA-512", "carol", "carol-secret")) == {b.sasl_port}
    assert "Authentication failed" in auth_error(b.sasl_bootstrap, **scram("SCRAM-SHA-256", "carol", "carol-secret"))
    described = kafka_configs(b.bootstrap, "--describe", "--entity-type", "users", "--entity-name", "carol")
    assert "SCRAM-SHA-512=iterations=4096" in described and "SCRAM-SHA-256" not in described, described
    # A new password replaces the old one.
    add_user(b.bootstrap, "carol", "new-secret", ("SCRAM-SHA-512=[password={p}]",))
    assert "Authentication failed" in auth_error(b.sasl_bootstrap, **scram("SCRAM-SHA-512", "carol", "carol-secret"))
    assert ports(b.sasl_bootstrap, **scram("SCRAM-SHA-512", "carol", "new-secret")) == {b.sasl_port}


def test_wrong_password_and_unknown_user_fail_alike(broker_factory):
    b = broker_factory(sasl_mechanisms=SCRAM)
    add_user(b.bootstrap, "alice", "alice-secret")
    for m in SCRAM:
        wrong = auth_error(b.sasl_bootstrap, **scram(m, "alice", "not-her-password"))
        unknown = auth_error(b.sasl_bootstrap, **scram(m, "mallory", "alice-secret"))
        assert "Authentication failed" in wrong and m in wrong, wrong
        assert wrong.replace("alice", "?") == unknown.replace("mallory", "?"), (wrong, unknown)
    # A mechanism the listener does not offer.
    b2 = broker_factory(sasl_mechanisms=["SCRAM-SHA-512"])
    add_user(b2.bootstrap, "alice", "alice-secret")
    assert "Unsupported SASL mechanism" in first_error(b2.sasl_bootstrap, **scram("SCRAM-SHA-256", "alice", "alice-secret"))


def first_error(bootstrap: str, **conf) -> str:
    """The first error librdkafka reports for a client that cannot connect."""
    errors: list[str] = []
    p = Producer({"bootstrap.servers": bootstrap, "log_level": 0, "error_cb": lambda e: errors.append(e.str()), **conf})
    deadline = time.monotonic() + 30
    while not errors and time.monotonic() < deadline:
        p.poll(0.2)
    assert errors
    return errors[0]


def alter_raw(bootstrap: str, deletions: list[tuple[str, int]], upsertions: list[tuple[str, int, int]]) -> dict[str, int]:
    """AlterUserScramCredentials v0 on the wire (librdkafka refuses bad iterations and
    duplicates itself, before the broker could): user -> error code. Upsertions are
    (user, mechanism type, iterations) with a made-up salt and salted password."""
    body = w.compact_array([w.compact_string(n) + w.i8(m) + w.uvarint(0) for n, m in deletions])
    body += w.compact_array([w.compact_string(n) + w.i8(m) + w.i32(it) + w.varbytes_compact(b"salt" * 4) + w.varbytes_compact(b"k" * 64)
                             + w.uvarint(0) for n, m, it in upsertions])
    r = w.flexible_roundtrip(bootstrap, 51, 0, body)
    r.i32()  # throttle_time_ms

    def result():
        user, code, _ = r.compact_string(), r.i16(), r.compact_string()
        r.tags()
        return user, code
    return dict(r.array(result))


SHA256, SHA512 = 1, 2


def test_alter_user_scram_credentials_refuses_what_kafka_refuses(broker_factory):
    b = broker_factory(sasl_mechanisms=SCRAM)
    got = alter_raw(b.bootstrap,
                    # Kafka checks deletions first: a deletion of nothing is refused, and the
                    # same user's upsertion in the request is skipped.
                    deletions=[("nobody", SHA256)],
                    upsertions=[("few", SHA512, 4095), ("many", SHA512, 16385), ("twice", SHA512, 4096), ("twice", SHA256, 4096),
                                ("nobody", SHA512, 4096), ("", SHA512, 4096), ("odd", 3, 4096), ("dave", SHA256, 16384)])
    assert got == {
        "few": KafkaError.UNACCEPTABLE_CREDENTIAL,
        "many": KafkaError.UNACCEPTABLE_CREDENTIAL,
        "twice": KafkaError.DUPLICATE_RESOURCE,
        "nobody": KafkaError.RESOURCE_NOT_FOUND,
        "": KafkaError.UNACCEPTABLE_CREDENTIAL,
        "odd": KafkaError.UNSUPPORTED_SASL_MECHANISM,
        "dave": 0,
    }
    # Only dave's credential was written, with its iterations (confluent-kafka's describe).
    a = AdminClient({"bootstrap.servers": b.bootstrap})
    described = a.describe_user_scram_credentials(request_timeout=30).result(timeout=60)
    assert {u: [(i.mechanism, i.iterations) for i in d.scram_credential_infos] for u, d in described.items()} == {
        "dave": [(ScramMechanism.SCRAM_SHA_256, 16384)]}
    fs = a.describe_user_scram_credentials(["dave", "nobody"], request_timeout=30)
    assert fs["dave"].result(timeout=60).scram_credential_infos[0].iterations == 16384
    with pytest.raises(KafkaException) as e:
        fs["nobody"].result(timeout=60)
    assert e.value.args[0].code() == KafkaError.RESOURCE_NOT_FOUND
    # confluent-kafka's alter: a real password for erin, then she authenticates.
    fs = a.alter_user_scram_credentials([UserScramCredentialUpsertion("erin", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"erin-pw")],
                                        request_timeout=30)
    fs["erin"].result(timeout=60)
    assert ports(b.sasl_bootstrap, **scram("SCRAM-SHA-512", "erin", "erin-pw")) == {b.sasl_port}
    # And deletes her credential: she no longer can.
    a.alter_user_scram_credentials([UserScramCredentialDeletion("erin", ScramMechanism.SCRAM_SHA_512)], request_timeout=30)["erin"].result(timeout=60)
    assert "Authentication failed" in auth_error(b.sasl_bootstrap, **scram("SCRAM-SHA-512", "erin", "erin-pw"))


def test_scram_over_sasl_ssl_with_java_librdkafka_and_franz_go(broker_factory, tls):
    ssl = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(tls.broker_pem),
           "ssl.truststore.type": "PEM", "ssl.truststore.location": str(tls.ca_pem)}
    b = broker_factory(ssl=ssl, sasl_mechanisms=["SCRAM-SHA-512"])
    add_user(b.bootstrap, "erin", "erin-secret", ("SCRAM-SHA-512=[password={p}]",))
    conf = {**scram("SCRAM-SHA-512", "erin", "erin-secret"), "security.protocol": "SASL_SSL", "ssl.ca.location": str(tls.ca_pem)}
    assert ports(b.sasl_ssl_bootstrap, **conf) == {b.sasl_ssl_port}
    topic = "scram-ssl"
    admin_create_topic(b.bootstrap, topic, 1)
    produced = produce_confluent(b.sasl_ssl_bootstrap, topic, make_records(500, seed=43), **conf)
    java = java_scram("SCRAM-SHA-512", "erin", "erin-secret", "SASL_SSL") + f",ssl.truststore.type=PEM,ssl.truststore.location={tls.ca_pem}"
    compare(produced, consume_java(b.sasl_ssl_bootstrap, topic, 1, extra_props=java))
    admin_create_topic(b.bootstrap, "scram-ssl-franz", 1)
    got = franz(b.sasl_ssl_bootstrap, "scram-ssl-franz", "SCRAM-SHA-512", "erin", "erin-secret", ca=tls.ca_pem)
    assert got == {"produced": 200, "consumed": 200, "match": True}
