"""Delegation tokens (issue 24, point 6): created, described, renewed and expired with
Kafka's own kafka-delegation-tokens.sh (DelegationTokenCommand) over SASL/SCRAM, used by
the Java client through SCRAM with `tokenauth=true` (as Spark and Flink hand them to their
workers), and refused where Kafka refuses them: over PLAINTEXT, from a session a token
authenticated, by a principal that neither owns nor renews the token, with an HMAC that
names no token, after the token expired, and on a broker without
`delegation.token.secret.key`. The same assertions run against Kafka 4.4
(`SHARDLOG_TEST_TARGET=kafka`).
"""
from __future__ import annotations

import re
from pathlib import Path

from clients import admin_create_topic, compare, consume_java, kafka_tool, make_records, produce_java
from test_sasl_scram import add_user, java_scram

SECRET = {"delegation.token.secret.key": "delegation-token-secret"}
TOKEN_ROW = re.compile(r"^(\S+)\s+(\S+)\s+User:(\S+)\s+", re.M)


def command_config(d: Path, user: str, password: str) -> Path:
    p = d / f"{user}.properties"
    p.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
                 "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                 f'username="{user}" password="{password}";\n')
    return p


def tokens(bootstrap: str, config: Path, *args: str):
    """Runs kafka-delegation-tokens.sh; (exit code, stdout + stderr)."""
    r = kafka_tool("org.apache.kafka.tools.DelegationTokenCommand", "--bootstrap-server", bootstrap,
                   "--command-config", str(config), *args)
    return r.returncode, r.stdout + r.stderr


def created(out: str) -> tuple[str, str]:
    """(token id, HMAC) of the token a --create printed."""
    rows = [m for m in TOKEN_ROW.finditer(out) if m.group(1) != "TOKENID"]
    assert rows, out
    return rows[0].group(1), rows[0].group(2)


def token_props(token_id: str, hmac: str) -> str:
    """The Java client's settings for a token: SCRAM with tokenauth (no commas inside)."""
    return ("security.protocol=SASL_PLAINTEXT,sasl.mechanism=SCRAM-SHA-512,sasl.jaas.config="
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{token_id}" password="{hmac}" tokenauth="true";')


def test_a_token_is_created_described_renewed_used_and_expired(broker_factory, tmp_path):
    b = broker_factory(sasl_mechanisms=["SCRAM-SHA-512"], settings=dict(SECRET))
    add_user(b.bootstrap, "alice", "alice-secret", ("SCRAM-SHA-512=[password={p}]",))
    add_user(b.bootstrap, "bob", "bob-secret", ("SCRAM-SHA-512=[password={p}]",))
    alice, bob = command_config(tmp_path, "alice", "alice-secret"), command_config(tmp_path, "bob", "bob-secret")

    rc, out = tokens(b.sasl_bootstrap, alice, "--create", "--max-life-time-period", "-1", "--renewer-principal", "User:bob")
    assert rc == 0, out
    token_id, hmac = created(out)
    # The renewer sees it when asking for alice's tokens, and so does alice.
    rc, out = tokens(b.sasl_bootstrap, bob, "--describe", "--owner-principal", "User:alice")
    assert rc == 0 and token_id in out and hmac in out and "User:bob" in out, out
    rc, out = tokens(b.sasl_bootstrap, alice, "--describe", "--owner-principal", "User:alice")
    assert rc == 0 and token_id in out, out
    # Kafka's quirk, kept: the tool's "current user" describe sends an empty owner list,
    # which asks for no token at all.
    rc, out = tokens(b.sasl_bootstrap, alice, "--describe")
    assert rc == 0 and "Total number of tokens : 0" in out, out
    # The renewer renews it.
    rc, out = tokens(b.sasl_bootstrap, bob, "--renew", "--renew-time-period", "-1", "--hmac", hmac)
    assert rc == 0 and "Completed renew operation" in out, out

    # A worker given only the token: the Java client over SCRAM with tokenauth, as alice.
    topic = "token-clients"
    admin_create_topic(b.bootstrap, topic, 1)
    produced = produce_java(b.sasl_bootstrap, topic, make_records(200, seed=61), tmp_path, extra_props=token_props(token_id, hmac))
    compare(produced, consume_java(b.sasl_bootstrap, topic, 1, extra_props=token_props(token_id, hmac)))

    # The owner expires it now: the token no longer authenticates.
    rc, out = tokens(b.sasl_bootstrap, alice, "--expire", "--expiry-time-period", "-1", "--hmac", hmac)
    assert rc == 0 and "Completed expire operation" in out, out
    rc, out = tokens(b.sasl_bootstrap, alice, "--describe", "--owner-principal", "User:alice")
    assert rc == 0 and "Total number of tokens : 0" in out, out
    refused = consume_java_refused(b.sasl_bootstrap, topic, token_props(token_id, hmac))
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in refused, refused


def consume_java_refused(bootstrap: str, topic: str, props: str) -> str:
    """The Java consumer's output when authentication fails (it must)."""
    from clients import java_tool
    r = java_tool("consume", "--bootstrap", bootstrap, "--topic", topic, "--partitions", "0", "--timeout-ms", "20000",
                  "--prop", props, check=False, timeout=120)
    assert r.returncode != 0, r.stdout[-2000:]
    return r.stdout + r.stderr


def test_token_requests_are_refused_where_kafka_refuses_them(broker_factory, tmp_path):
    b = broker_factory(sasl_mechanisms=["SCRAM-SHA-512"], settings=dict(SECRET))
    add_user(b.bootstrap, "alice", "alice-secret", ("SCRAM-SHA-512=[password={p}]",))
    add_user(b.bootstrap, "mallory", "mallory-secret", ("SCRAM-SHA-512=[password={p}]",))
    alice, mallory = command_config(tmp_path, "alice", "alice-secret"), command_config(tmp_path, "mallory", "mallory-secret")
    rc, out = tokens(b.sasl_bootstrap, alice, "--create", "--max-life-time-period", "-1")
    assert rc == 0, out
    token_id, hmac = created(out)

    # Not over PLAINTEXT (a token must come from an authenticated principal): error 64,
    # DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, which the Java client raises as this.
    not_allowed = "UnsupportedByAuthenticationException"
    plain = tmp_path / "plain.properties"
    plain.write_text("security.protocol=PLAINTEXT\n")
    rc, out = tokens(b.bootstrap, plain, "--create", "--max-life-time-period", "-1")
    assert not_allowed in out, out
    # Not from a session a token authenticated.
    token_cfg = tmp_path / "token.properties"
    token_cfg.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
                         "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                         f'username="{token_id}" password="{hmac}" tokenauth="true";\n')
    rc, out = tokens(b.sasl_bootstrap, token_cfg, "--create", "--max-life-time-period", "-1")
    assert not_allowed in out, out
    # Only the owner and renewers renew; an HMAC of no token is not found.
    rc, out = tokens(b.sasl_bootstrap, mallory, "--renew", "--renew-time-period", "-1", "--hmac", hmac)
    assert "DelegationTokenOwnerMismatchException" in out, out
    rc, out = tokens(b.sasl_bootstrap, alice, "--renew", "--renew-time-period", "-1", "--hmac", "AAAA" + hmac[4:])
    assert "DelegationTokenNotFoundException" in out, out
    # Expiring with period 0 ends it: renewing it afterwards is refused as expired.
    rc, out = tokens(b.sasl_bootstrap, alice, "--expire", "--expiry-time-period", "0", "--hmac", hmac)
    assert rc == 0, out
    rc, out = tokens(b.sasl_bootstrap, alice, "--renew", "--renew-time-period", "-1", "--hmac", hmac)
    assert "DelegationTokenExpiredException" in out, out


def test_a_broker_without_a_secret_has_delegation_tokens_disabled(broker_factory, tmp_path):
    b = broker_factory(sasl_mechanisms=["SCRAM-SHA-512"])
    add_user(b.bootstrap, "alice", "alice-secret", ("SCRAM-SHA-512=[password={p}]",))
    rc, out = tokens(b.sasl_bootstrap, command_config(tmp_path, "alice", "alice-secret"), "--create", "--max-life-time-period", "-1")
    assert "DelegationTokenDisabledException" in out, out


def test_who_may_see_a_token_follows_the_acls(broker_factory, tmp_path):
    """With the StandardAuthorizer a principal sees the tokens it owns or renews, and
    others' only with DESCRIBE on the token or DESCRIBE_TOKENS on their owner (KIP-373),
    granted with kafka-acls.sh."""
    settings = {**SECRET, "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                "super.users": "User:ANONYMOUS"}  # the PLAINTEXT listener sets the test up
    b = broker_factory(sasl_mechanisms=["SCRAM-SHA-512"], settings=settings)
    for user in ("alice", "mallory", "carol"):
        add_user(b.bootstrap, user, f"{user}-secret", ("SCRAM-SHA-512=[password={p}]",))
    alice = command_config(tmp_path, "alice", "alice-secret")
    mallory = command_config(tmp_path, "mallory", "mallory-secret")
    carol = command_config(tmp_path, "carol", "carol-secret")
    rc, out = tokens(b.sasl_bootstrap, alice, "--create", "--max-life-time-period", "-1")
    assert rc == 0, out
    token_id, _ = created(out)

    def sees(config: Path) -> bool:
        rc, out = tokens(b.sasl_bootstrap, config, "--describe", "--owner-principal", "User:alice")
        assert rc == 0, out
        return token_id in out

    assert sees(alice) and not sees(mallory) and not sees(carol)

    def acl(*args: str) -> None:
        r = kafka_tool("org.apache.kafka.tools.AclCommand", "--bootstrap-server", b.bootstrap, "--add", *args)
        assert r.returncode == 0, r.stdout + r.stderr
    acl("--allow-principal", "User:mallory", "--operation", "Describe", "--delegation-token", token_id)
    acl("--allow-principal", "User:carol", "--operation", "DescribeTokens", "--user-principal", "User:alice")
    assert sees(mallory) and sees(carol)
