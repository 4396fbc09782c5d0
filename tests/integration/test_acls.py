"""ACLs with Kafka's StandardAuthorizer semantics (issue 24, point 4): a broker with
`authorizer.class.name`, `super.users`, SASL/PLAIN users, ACLs created, listed and removed
with Kafka's own kafka-acls.sh and confluent-kafka's admin client, kept in the metadata
log (across a restart), and a denial matrix: what a principal without the ACL gets from
Metadata, Produce, Fetch, ListOffsets, CreateTopics, DeleteTopics, the group APIs, the
transactional APIs and the ACL APIs themselves; DENY beats ALLOW; prefixed ACLs; super
users. The same assertions run against Kafka 4.4 configured the same way.
"""
from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient, NewTopic,
                                   ResourcePatternType, ResourceType)

from clients import admin_create_topic, kafka_tool

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              # PLAINTEXT clients (and Kafka's own controller listener) are User:ANONYMOUS.
              "super.users": "User:admin;User:ANONYMOUS"}


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    """One broker for the module: PLAINTEXT (super user) and SASL_PLAINTEXT listeners."""
    from conftest import BrokerFactory
    f = BrokerFactory(tmp_path_factory, "acls")
    b = f(sasl_plain_users=USERS, settings=AUTHORIZER)
    yield b
    f.close()


def as_user(user: str) -> dict:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": USERS[user]}


_ADMINS: dict[tuple[str, str | None], AdminClient] = {}


def admin(b, user: str | None = None) -> AdminClient:
    """An admin client of `user` (None: PLAINTEXT, a super user), kept for the module: a
    handle dropped before its futures resolve fails them."""
    key = (b.bootstrap, user)
    if key not in _ADMINS:
        conf = {"bootstrap.servers": b.bootstrap} if user is None else {"bootstrap.servers": b.sasl_bootstrap, **as_user(user)}
        _ADMINS[key] = AdminClient(conf)
    return _ADMINS[key]


def allow(principal: str, op: AclOperation, rtype=ResourceType.TOPIC, name: str = "*",
          pattern=ResourcePatternType.LITERAL, permission=AclPermissionType.ALLOW) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, "*", op, permission)


def create_acls(b, bindings: list[AclBinding]) -> None:
    for f in admin(b).create_acls(bindings, request_timeout=30).values():
        f.result(timeout=60)


def delete_all_acls(b) -> None:
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY)
    for f in admin(b).delete_acls([everything], request_timeout=30).values():
        f.result(timeout=60)


def produce_error(b, user: str, topic: str, **extra) -> int | None:
    """Produces one record as `user`: None when acknowledged, else the error code."""
    return produce_error_with(b.sasl_bootstrap, topic, **as_user(user), **extra)


def produce_error_with(bootstrap: str, topic: str, **conf) -> int | None:
    p = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 20000, "enable.idempotence": False, **conf})
    out: list = []
    p.produce(topic, b"v", on_delivery=lambda err, msg: out.append(err))
    p.flush(30)
    assert out, "no delivery report"
    return None if out[0] is None else out[0].code()


def metadata_topics(b, user: str) -> set[str]:
    return {t for t in admin(b, user).list_topics(timeout=30).topics if not t.startswith("__")}


def topic_error(b, user: str, topic: str) -> int | None:
    t = admin(b, user).list_topics(topic=topic, timeout=30).topics[topic]
    return None if t.error is None else t.error.code()


def consume_error(b, user: str, topic: str, group: str, **extra) -> int | None:
    """Subscribes as `user` in `group`; the first error the consumer reports, or None once
    a record arrives."""
    c = Consumer({"bootstrap.servers": b.sasl_bootstrap, **as_user(user), "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, **extra})
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error() is not None:
                if m.error().code() == KafkaError._PARTITION_EOF:
                    continue
                return m.error().code()
            return None
        pytest.fail("neither a record nor an error within 30 s")
    finally:
        c.close()


def test_kafka_acls_tool_adds_lists_and_removes(secured):
    b = secured
    topic = "acl-tool-" + uuid.uuid4().hex[:6]
    r = kafka_tool("org.apache.kafka.tools.AclCommand", "--bootstrap-server", b.bootstrap, "--add", "--allow-principal", "User:alice",
                   "--operation", "Read", "--operation", "Describe", "--topic", topic)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    r = kafka_tool("org.apache.kafka.tools.AclCommand", "--bootstrap-server", b.bootstrap, "--list", "--topic", topic)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "User:alice" in r.stdout and "READ" in r.stdout and "DESCRIBE" in r.stdout, r.stdout
    assert f"name={topic}" in r.stdout and "patternType=LITERAL" in r.stdout, r.stdout
    r = kafka_tool("org.apache.kafka.tools.AclCommand", "--bootstrap-server", b.bootstrap, "--remove", "--force", "--allow-principal", "User:alice",
                   "--operation", "Read", "--topic", topic)
    assert r.returncode == 0, r.stderr[-2000:]
    left = admin(b).describe_acls(AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, None, None, AclOperation.ANY,
                                                   AclPermissionType.ANY), request_timeout=30).result(timeout=60)
    assert [(a.principal, a.operation) for a in left] == [("User:alice", AclOperation.DESCRIBE)]
    delete_all_acls(b)


def test_denial_matrix_produce_fetch_metadata(secured):
    b = secured
    delete_all_acls(b)
    for t in ("open", "secret", "logs-app", "logx"):
        admin_create_topic(b.bootstrap, t, 1)
    create_acls(b, [
        allow("User:alice", AclOperation.WRITE, name="open"),
        allow("User:alice", AclOperation.READ, name="open"),
        allow("User:alice", AclOperation.WRITE, name="logs-", pattern=ResourcePatternType.PREFIXED),
        allow("User:alice", AclOperation.READ, ResourceType.GROUP, "alice-group"),
    ])
    # Metadata: every topic the principal may describe (READ and WRITE imply DESCRIBE),
    # nothing else; a named one it may not is TOPIC_AUTHORIZATION_FAILED, existing or not.
    assert metadata_topics(b, "alice") == {"open", "logs-app"}
    assert metadata_topics(b, "bob") == set()
    assert topic_error(b, "alice", "secret") == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert topic_error(b, "alice", "no-such-topic") == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # Produce: WRITE on the topic, literal or prefixed.
    assert produce_error(b, "alice", "open") is None
    assert produce_error(b, "alice", "logs-app") is None
    assert produce_error(b, "alice", "secret") == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert produce_error(b, "alice", "logx") == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert produce_error(b, "bob", "open") == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # The super user may do everything.
    assert produce_error(b, "admin", "secret") is None
    assert metadata_topics(b, "admin") >= {"open", "secret", "logs-app", "logx"}
    # Consuming: READ on the group, then READ on the topic.
    assert consume_error(b, "alice", "open", "alice-group") is None
    assert consume_error(b, "alice", "open", "other-group") == KafkaError.GROUP_AUTHORIZATION_FAILED
    create_acls(b, [allow("User:alice", AclOperation.READ, ResourceType.GROUP, "g-", ResourcePatternType.PREFIXED)])
    assert consume_error(b, "alice", "logs-app", "g-1") == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # ListOffsets on a topic it may not describe.
    c = Consumer({"bootstrap.servers": b.sasl_bootstrap, **as_user("alice"), "group.id": "g-2"})
    with pytest.raises(KafkaException) as e:
        c.get_watermark_offsets(TopicPartition("secret", 0), timeout=15)
    c.close()
    assert e.value.args[0].code() in (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError._UNKNOWN_PARTITION), e.value
    delete_all_acls(b)


def test_deny_beats_allow_and_topic_admin_needs_its_acls(secured):
    b = secured
    delete_all_acls(b)
    admin_create_topic(b.bootstrap, "mixed", 1)
    create_acls(b, [
        allow("User:*", AclOperation.ALL, name="mixed"),
        allow("User:alice", AclOperation.WRITE, name="mixed", permission=AclPermissionType.DENY),
    ])
    assert produce_error(b, "bob", "mixed") is None
    assert produce_error(b, "alice", "mixed") == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # A DENY of WRITE does not deny DESCRIBE.
    assert topic_error(b, "alice", "mixed") is None
    # CreateTopics: CREATE on the cluster or the topic; DeleteTopics: DELETE on the topic.
    fs = admin(b, "bob").create_topics([NewTopic("bob-new", 1, 1)], request_timeout=30)
    with pytest.raises(KafkaException) as e:
        fs["bob-new"].result(timeout=60)
    assert e.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    create_acls(b, [allow("User:bob", AclOperation.CREATE, name="bob-", pattern=ResourcePatternType.PREFIXED)])
    admin(b, "bob").create_topics([NewTopic("bob-new", 1, 1)], request_timeout=30)["bob-new"].result(timeout=60)
    with pytest.raises(KafkaException) as e:
        admin(b, "bob").delete_topics(["bob-new"], request_timeout=30)["bob-new"].result(timeout=60)
    assert e.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # The mixed topic allows ALL to everyone, DELETE included: bob may delete it.
    admin(b, "bob").delete_topics(["mixed"], request_timeout=30)["mixed"].result(timeout=60)
    delete_all_acls(b)


def test_acl_and_cluster_apis_need_cluster_acls_and_transactions_their_id(secured, tmp_path):
    b = secured
    delete_all_acls(b)
    # The ACL APIs: DESCRIBE / ALTER on the cluster. (kafka-acls.sh as alice: librdkafka's
    # describe_acls drops DescribeAcls' top-level error and reports no ACLs.)
    props = tmp_path / "alice.properties"
    props.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config="
                     "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"alice\" password=\"alice-secret\";\n")
    r = kafka_tool("org.apache.kafka.tools.AclCommand", "--bootstrap-server", b.sasl_bootstrap, "--command-config", str(props), "--list")
    assert r.returncode != 0 and "ClusterAuthorizationException" in r.stdout + r.stderr, r.stdout[-2000:] + r.stderr[-2000:]
    fs = admin(b, "alice").create_acls([allow("User:alice", AclOperation.ALL)], request_timeout=30)
    with pytest.raises(KafkaException) as e:
        list(fs.values())[0].result(timeout=60)
    assert e.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    create_acls(b, [allow("User:alice", AclOperation.DESCRIBE, ResourceType.BROKER, "kafka-cluster")])
    listed = admin(b, "alice").describe_acls(AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                                             AclPermissionType.ANY), request_timeout=30).result(timeout=60)
    assert [(a.restype, a.name, a.operation) for a in listed] == [(ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE)]
    # Transactions: WRITE on the transactional id.
    admin_create_topic(b.bootstrap, "txn-target", 1)
    create_acls(b, [allow("User:alice", AclOperation.WRITE, name="txn-target")])
    p = Producer({"bootstrap.servers": b.sasl_bootstrap, **as_user("alice"), "transactional.id": "alice-txn"})
    with pytest.raises(KafkaException) as e:
        p.init_transactions(30)
    assert e.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    create_acls(b, [allow("User:alice", AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, "alice-txn")])
    p = Producer({"bootstrap.servers": b.sasl_bootstrap, **as_user("alice"), "transactional.id": "alice-txn"})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("txn-target", b"in a transaction")
    p.commit_transaction(30)
    delete_all_acls(b)


def test_config_partition_and_group_admin_apis_are_checked(secured):
    b = secured
    delete_all_acls(b)
    admin_create_topic(b.bootstrap, "admin-t", 1)
    from confluent_kafka.admin import ConfigResource
    from confluent_kafka.admin import ResourceType as ConfigType

    def config_error(user: str, resource: ConfigResource) -> int | None:
        try:
            list(admin(b, user).describe_configs([resource], request_timeout=30).values())[0].result(timeout=60)
            return None
        except KafkaException as e:
            return e.args[0].code()

    topic = ConfigResource(ConfigType.TOPIC, "admin-t")
    assert config_error("alice", topic) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert config_error("alice", ConfigResource(ConfigType.BROKER, "1")) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # ALTER_CONFIGS implies DESCRIBE_CONFIGS.
    create_acls(b, [allow("User:alice", AclOperation.ALTER_CONFIGS, name="admin-t")])
    assert config_error("alice", topic) is None
    # CreatePartitions needs ALTER on the topic.
    from confluent_kafka.admin import NewPartitions
    with pytest.raises(KafkaException) as e:
        admin(b, "alice").create_partitions([NewPartitions("admin-t", 2)], request_timeout=30)["admin-t"].result(timeout=60)
    assert e.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # ListGroups: without DESCRIBE on the cluster, only the groups the principal may describe.
    create_acls(b, [allow("User:alice", AclOperation.DESCRIBE, ResourceType.GROUP, "visible-", ResourcePatternType.PREFIXED)])
    for g in ("visible-group", "hidden-group"):
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": g})
        c.commit(offsets=[TopicPartition("admin-t", 0, 0)], asynchronous=False)
        c.close()
    listed = {g.group_id for g in admin(b, "alice").list_consumer_groups(request_timeout=30).result(timeout=60).valid}
    assert "visible-group" in listed and "hidden-group" not in listed, listed
    everything = {g.group_id for g in admin(b).list_consumer_groups(request_timeout=30).result(timeout=60).valid}
    assert {"visible-group", "hidden-group"} <= everything
    delete_all_acls(b)


def test_mutual_tls_principal_is_the_certificate_subject_or_what_the_rules_make_of_it(broker_factory, tmp_path_factory):
    import tls_material
    tls = tls_material.make(tmp_path_factory.mktemp("tls"))
    ssl = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(tls.broker_pem), "ssl.truststore.type": "PEM",
           "ssl.truststore.location": str(tls.ca_pem), "ssl.client.auth": "required"}
    client = {"security.protocol": "SSL", "ssl.ca.location": str(tls.ca_pem), "ssl.certificate.location": str(tls.client_cert),
              "ssl.key.location": str(tls.client_key)}
    # Kafka's DEFAULT: the subject as Java prints it (RFC 2253: the last RDN first); the
    # certificate's subject is written CN=shardlog-client/OU=tests/O=shardlog.
    b = broker_factory(ssl=ssl, settings=AUTHORIZER)
    admin_create_topic(b.bootstrap, "cert-t", 1)
    assert produce_error_with(b.ssl_bootstrap, "cert-t", **client) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    create_acls(b, [allow("User:O=shardlog,OU=tests,CN=shardlog-client", AclOperation.WRITE, name="cert-t")])
    assert produce_error_with(b.ssl_bootstrap, "cert-t", **client) is None
    # A mapping rule: the CN alone, upper-cased.
    b2 = broker_factory(ssl=ssl, settings={**AUTHORIZER, "ssl.principal.mapping.rules": "RULE:^.*CN=([^,]+)$/$1/U,DEFAULT"})
    admin_create_topic(b2.bootstrap, "cert-t", 1)
    create_acls(b2, [allow("User:SHARDLOG-CLIENT", AclOperation.WRITE, name="cert-t")])
    assert produce_error_with(b2.ssl_bootstrap, "cert-t", **client) is None


def test_acls_survive_a_restart(broker_factory):
    b = broker_factory(sasl_plain_users=USERS, settings=AUTHORIZER)
    admin_create_topic(b.bootstrap, "kept", 1)
    create_acls(b, [allow("User:alice", AclOperation.WRITE, name="kept")])
    b.restart()
    assert produce_error(b, "alice", "kept") is None
    assert produce_error(b, "bob", "kept") == KafkaError.TOPIC_AUTHORIZATION_FAILED
    listed = admin(b).describe_acls(AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                                     AclPermissionType.ANY), request_timeout=30).result(timeout=60)
    assert [(a.principal, a.name, a.operation) for a in listed] == [("User:alice", "kept", AclOperation.WRITE)]


def test_kip848_heartbeat_needs_describe_on_the_subscribed_topics(secured):
    b = secured
    delete_all_acls(b)
    topic, group = "kip848-" + uuid.uuid4().hex[:6], "kip848-group-" + uuid.uuid4().hex[:6]
    admin_create_topic(b.bootstrap, topic, 1)
    assert produce_error_with(b.bootstrap, topic) is None
    kip848 = {"group.protocol": "consumer"}
    create_acls(b, [allow("User:bob", AclOperation.READ, ResourceType.GROUP, group)])
    # The group may be read, the subscribed topic not described: the heartbeat is refused.
    assert consume_error(b, "bob", topic, group, **kip848) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    create_acls(b, [allow("User:bob", AclOperation.READ, name=topic)])
    assert consume_error(b, "bob", topic, group, **kip848) is None
    delete_all_acls(b)
