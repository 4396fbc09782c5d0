"""SASL/OAUTHBEARER (issue 24, point 3): JWTs signed by a key the test makes, validated by
the broker against a JWKS file (`sasl.oauthbearer.jwks.endpoint.url`) with the expected
issuer and audience; confluent-kafka (oauth_cb), the Java client (a token file, Kafka's
OAuthBearerLoginCallbackHandler) and franz-go authenticate with a good token and produce and
consume; expired, badly signed, unsigned, wrong-audience, wrong-issuer and subject-less
tokens are refused with what Kafka answers. The same assertions run against Kafka 4.4
(`SHARDLOG_TEST_TARGET=kafka`, with Kafka's OAuthBearerValidatorCallbackHandler).
"""
from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from clients import (admin_create_topic, compare, consume_confluent, consume_java, make_records, produce_confluent,
                     produce_java)
from confluent_kafka.admin import AdminClient
from test_sasl import auth_error
from test_sasl_scram import GO_CLIENT

ISSUER = "https://issuer.shardlog.test"
AUDIENCE = "shardlog-brokers"


class Keys:
    def __init__(self, directory: Path):
        self.signing = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        jwk = json.loads(RSAAlgorithm.to_jwk(self.signing.public_key()))
        jwk.update({"kid": "k1", "use": "sig", "alg": "RS256"})
        self.jwks = directory / "jwks.json"
        self.jwks.write_text(json.dumps({"keys": [jwk]}))

    def token(self, sub: str | None = "alice", lifetime_s: int = 3600, aud: str = AUDIENCE, iss: str = ISSUER,
              key=None, alg: str = "RS256", iat: bool = True) -> str:
        now = int(time.time())
        claims = {"iss": iss, "aud": aud, "exp": now + lifetime_s, "scope": "kafka"}
        if iat:
            claims["iat"] = now - 5
        if sub is not None:
            claims["sub"] = sub
        if alg == "none":
            return jwt.encode(claims, None, algorithm="none")
        return jwt.encode(claims, key or self.signing, algorithm=alg, headers={"kid": "k1"})


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> Keys:
    return Keys(tmp_path_factory.mktemp("oauth"))


@pytest.fixture(scope="module")
def oauth_broker(tmp_path_factory, request, keys):
    from conftest import BrokerFactory
    f = BrokerFactory(tmp_path_factory, request.module.__name__)
    b = f(sasl_mechanisms=["OAUTHBEARER"], settings={
        "sasl.oauthbearer.jwks.endpoint.url": keys.jwks.as_uri(),
        "sasl.oauthbearer.expected.audience": AUDIENCE,
        "sasl.oauthbearer.expected.issuer": ISSUER,
    })
    yield b
    f.close()


def confluent_oauth(token: str) -> dict:
    # confluent-kafka asks oauth_cb for a token (and its expiry) before it authenticates.
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
            "oauth_cb": lambda _config: (token, time.time() + 3600)}


def test_confluent_java_and_franz_go_authenticate_with_a_signed_token(oauth_broker, keys, topic_name, tmp_path):
    bs = oauth_broker.sasl_bootstrap
    token = keys.token()
    admin_create_topic(oauth_broker.bootstrap, topic_name, 1)

    recs = make_records(40, seed=31)
    produced = produce_confluent(bs, topic_name, recs, **confluent_oauth(token))
    compare(produced, consume_confluent(bs, topic_name, 1, **confluent_oauth(token)))

    token_file = tmp_path / "token.jwt"
    token_file.write_text(token)
    props = ("security.protocol=SASL_PLAINTEXT,sasl.mechanism=OAUTHBEARER,"
             "sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler,"
             f"sasl.oauthbearer.token.endpoint.url={token_file.as_uri()},"
             "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;")
    # Kafka's clients read a token URL only when this system property allows it.
    os.environ["JAVA_TOOL_OPTIONS"] = f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={token_file.as_uri()}"
    try:
        java_topic = topic_name + "-java"
        admin_create_topic(oauth_broker.bootstrap, java_topic, 1)
        java_recs = make_records(30, seed=32)
        produced = produce_java(bs, java_topic, java_recs, tmp_path, extra_props=props)
        compare(produced, consume_java(bs, java_topic, 1, extra_props=props))
    finally:
        del os.environ["JAVA_TOOL_OPTIONS"]

    go_topic = topic_name + "-go"
    admin_create_topic(oauth_broker.bootstrap, go_topic, 1)
    r = subprocess.run([str(GO_CLIENT), "-bootstrap", bs, "-topic", go_topic, "-mechanism", "OAUTHBEARER",
                        "-password", token, "-records", "50"], capture_output=True, text=True, timeout=120)
    assert json.loads(r.stdout.strip().splitlines()[-1]) == {"produced": 50, "consumed": 50, "match": True}, r.stdout + r.stderr


@pytest.mark.parametrize("case", ["expired", "stranger_key", "unsigned", "wrong_audience", "wrong_issuer",
                                  "no_subject", "no_issued_at", "garbage"])
def test_bad_tokens_are_refused(oauth_broker, keys, case):
    token = {
        "expired": lambda: keys.token(lifetime_s=-3600),
        "stranger_key": lambda: keys.token(key=keys.stranger),
        "unsigned": lambda: keys.token(alg="none"),
        "wrong_audience": lambda: keys.token(aud="someone-else"),
        "wrong_issuer": lambda: keys.token(iss="https://evil.test"),
        "no_subject": lambda: keys.token(sub=None),
        "no_issued_at": lambda: keys.token(iat=False),
        "garbage": lambda: "not.a.jwt",
    }[case]()
    error = auth_error(oauth_broker.sasl_bootstrap, **confluent_oauth(token))
    print(case, error)
    # librdkafka names the broker first.
    assert error.endswith(': SASL authentication error: {"status":"invalid_token"}'), error


def test_a_jwks_over_https_is_fetched_and_a_rotated_key_picked_up(tmp_path_factory, request, tmp_path):
    """`sasl.oauthbearer.jwks.endpoint.url=https://...`: the broker fetches the JWKS from
    an identity provider (here a local https server with the test CA), and when the
    provider rotates to a new key, a token signed by it authenticates without a restart
    (a token naming an unknown key id makes the broker fetch the JWKS again, as Kafka's
    RefreshingHttpsJwks does), while the retired key's tokens are refused."""
    import http.server
    import ssl
    import threading
    import tls_material
    from conftest import BrokerFactory, is_kafka, wait_for
    tls = tls_material.make(tmp_path / "tls")
    site = tmp_path / "site"
    site.mkdir()
    old, new = Keys(site), rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (site / "jwks.json").write_text(old.jwks.read_text())

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(site), **kwargs)

        def log_message(self, *args):
            pass
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(tls.broker_cert), str(tls.broker_key))
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"https://127.0.0.1:{server.server_address[1]}/jwks.json"
    # Trust for the provider's certificate: the process's trust roots.
    trust = (f"-Djavax.net.ssl.trustStore={tls.ca_p12} -Djavax.net.ssl.trustStorePassword={tls_material.PASSWORD} "
             "-Djavax.net.ssl.trustStoreType=PKCS12") if is_kafka() else None
    saved = {k: os.environ.get(k) for k in ("SSL_CERT_FILE", "JAVA_TOOL_OPTIONS")}
    if trust:
        os.environ["JAVA_TOOL_OPTIONS"] = trust
    else:
        os.environ["SSL_CERT_FILE"] = str(tls.ca_pem)
    f = BrokerFactory(tmp_path_factory, request.node.name)
    try:
        b = f(sasl_mechanisms=["OAUTHBEARER"], settings={
            "sasl.oauthbearer.jwks.endpoint.url": url,
            "sasl.oauthbearer.expected.audience": AUDIENCE,
            "sasl.oauthbearer.expected.issuer": ISSUER,
        })
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        admin_create_topic(b.bootstrap, "jwks-https", 1)
        produce_confluent(b.sasl_bootstrap, "jwks-https", make_records(5, seed=71), **confluent_oauth(old.token()))
        # The provider rotates: only the new key (k2) is published now.
        jwk = json.loads(RSAAlgorithm.to_jwk(new.public_key()))
        jwk.update({"kid": "k2", "use": "sig", "alg": "RS256"})
        (site / "jwks.json").write_text(json.dumps({"keys": [jwk]}))
        now = int(time.time())
        claims = {"iss": ISSUER, "aud": AUDIENCE, "exp": now + 3600, "iat": now - 5, "sub": "alice"}
        rotated = jwt.encode(claims, new, algorithm="RS256", headers={"kid": "k2"})

        def authenticates(token: str) -> bool:
            md = AdminClient({"bootstrap.servers": b.sasl_bootstrap, **confluent_oauth(token)}).list_topics(timeout=5)
            return bool(md.brokers)
        wait_for("a token signed by the rotated key authenticates", lambda: authenticates(rotated), deadline_s=90)
        # The retired key is gone with the old JWKS.
        assert auth_error(b.sasl_bootstrap, **confluent_oauth(old.token())) is not None
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        f.close()
        server.shutdown()
