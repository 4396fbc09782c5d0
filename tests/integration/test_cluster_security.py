"""Issue 24, point 7: an authenticated cluster. Three real nodes whose controller listener
(raft, registrations, heartbeats, forwarded requests) and inter-broker listener (replica
fetches, transaction markers) are SSL with client certificates required: each node shows
the node certificate (O=shardlog,CN=shardlog-node, a super user) and checks its peers'. A
node whose certificate no trusted CA signed cannot join the quorum; one the right CA
signed for a principal that may not act for the cluster (CN=intruder) is refused. A
second cluster's brokers authenticate to each other with SCRAM-SHA-512 over SASL_SSL,
with a credential created through the running quorum.

The test's clients use each node's PLAINTEXT listener (User:ANONYMOUS is a super user
there, so the authorizer stays out of the clients' way): what is under test is the
nodes' own listeners. Both targets, configured alike (SHARDLOG_TEST_TARGET=kafka: Kafka
4.4 nodes with the same listeners and stores, PKCS12 key stores). Real clients:
confluent-kafka, Kafka's GetOffsetShell. No timed assertions: waits poll with generous
deadlines.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import conftest
import tls_material
from cluster_harness import Cluster, Node, free_port
from conftest import is_kafka, wait_for

NODE_PRINCIPAL = tls_material.NODE_PRINCIPAL
REPO = Path(__file__).resolve().parents[2]
SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
              'username="broker" password="broker-secret";')


def settings(nd: Node, internal_port: int, keystore_pem: Path, tls: tls_material.TlsMaterial,
             internal: str) -> dict[str, str]:
    """One node's settings, Kafka's keys: a PLAINTEXT client listener, an `internal`
    inter-broker listener (SSL, or SASL_SSL with SCRAM-SHA-512 as User:broker), an SSL
    controller listener; the SSL listeners demand a certificate from the CA."""
    s = {
        "listener.security.protocol.map": f"PLAINTEXT:PLAINTEXT,INTERNAL:{internal},CONTROLLER:SSL",
        "inter.broker.listener.name": "INTERNAL",
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(tls.ca_pem),
        "ssl.client.auth": "required",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": f"{NODE_PRINCIPAL};User:broker;User:ANONYMOUS",
        "allow.everyone.if.no.acl.found": "false",
    }
    if internal == "SASL_SSL":
        s.update({"sasl.enabled.mechanisms": "SCRAM-SHA-512", "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
                  "listener.name.internal.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
                  "listener.name.internal.ssl.client.auth": "none"})
    clients = f"PLAINTEXT://{nd.bootstrap},INTERNAL://127.0.0.1:{internal_port}"
    if is_kafka():
        # Kafka reads PKCS12 (or PEM with an encrypted key); the same certificate.
        p12 = keystore_pem.parent / keystore_pem.name.replace("-keystore.pem", ".p12")
        s.update({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(p12),
                  "ssl.keystore.password": tls_material.PASSWORD,
                  "listeners": clients + (f",CONTROLLER://{nd.controller_listener}" if nd.is_controller else ""),
                  "advertised.listeners": clients})
    else:
        s.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(keystore_pem), "listeners": clients})
    return s


def configure(nd: Node, keystore_pem: Path, tls, internal: str) -> None:
    s = settings(nd, free_port(), keystore_pem, tls, internal)
    if is_kafka():
        nd.node_props = s
        return
    args = []
    for k, v in s.items():
        if k.startswith("listener.name."):
            args += ["--listener-setting", f"{k}={v}"]
        else:
            args += ["--" + k.replace(".", "-"), v]
    nd.extra_args = args


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    return tls_material.make(tmp_path_factory.mktemp("cluster-tls"))


def secured_cluster(tmp_path_factory, tls, name: str, internal: str):
    root = tmp_path_factory.mktemp(name)
    if is_kafka():
        from kafka_cluster import KafkaCluster
        c = KafkaCluster(3, root, conftest.kafka_classpath(), props={"replica.lag.time.max.ms": "4000"},
                         log_dir=conftest.LOG_ROOT, name=f"kafka_cluster_security_{name}-")
    else:
        c = Cluster(3, root, log_dir=conftest.LOG_ROOT, name=f"test_cluster_security_{name}-",
                    binary=conftest.SHARDLOG_BIN, extra_args=["--replica-lag-time-max-ms", "4000"])
    for nd in c.nodes:
        configure(nd, tls.node_pem, tls, internal)
    yield from conftest.serve_cluster(c, 240 if is_kafka() else 90)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, tls):
    yield from secured_cluster(tmp_path_factory, tls, "mtls", "SSL")


def create_topic(node, t: NewTopic) -> None:
    create_topic_with({"bootstrap.servers": node.bootstrap}, t)


def create_topic_with(conf: dict, t: NewTopic) -> None:
    admin = AdminClient(conf)  # kept until the answer came
    admin.create_topics([t], operation_timeout=30)[t.topic].result(timeout=60)


def isr_of(node, topic: str) -> dict[int, list[int]]:
    md = AdminClient({"bootstrap.servers": node.bootstrap}).list_topics(topic, timeout=10)
    t = md.topics[topic]
    assert t.error is None, t.error
    return {p.id: sorted(p.isrs) for p in t.partitions.values()}


def test_a_cluster_over_mutual_tls_replicates_every_acknowledged_record(cluster):
    replicate_and_read_back(cluster, "secured-replication")
    if not is_kafka():
        # Each follower connected to its leaders on the INTERNAL listener.
        for nd in cluster.nodes:
            connected = [line for line in nd.log_since_start().splitlines() if "replica fetcher connected" in line]
            assert connected and all("INTERNAL" in line for line in connected), nd.log_tail()


def replicate_and_read_back(cluster, topic: str) -> None:
    """300 records acknowledged with min.insync.replicas = 3 (so both followers fetched
    each over the INTERNAL listener), then read back whole from another node."""
    node = cluster.nodes[0]
    create_topic(node, NewTopic(topic, 3, 3, config={"min.insync.replicas": "3"}))
    acked, errors = [], []
    p = Producer({"bootstrap.servers": node.bootstrap, "acks": "all", "enable.idempotence": True,
                  "message.timeout.ms": 90000})
    for i in range(300):
        p.produce(topic, value=f"v{i}".encode(), key=str(i).encode(),
                  on_delivery=lambda err, msg: (errors if err else acked).append(err or msg.value()))
        p.poll(0)
    assert p.flush(120) == 0
    assert errors == [] and len(acked) == 300
    assert wait_for("every replica in every ISR", lambda: all(r == [1, 2, 3] for r in isr_of(node, topic).values()))
    c = Consumer({"bootstrap.servers": cluster.nodes[2].bootstrap, "group.id": f"read-{topic}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest", "enable.partition.eof": True})
    c.assign([TopicPartition(topic, q, 0) for q in range(3)])
    got, eof = [], set()

    def drained():
        m = c.poll(1.0)
        if m is not None:
            if m.error() is None:
                got.append(m.value())
            elif m.error().code() == -191:  # _PARTITION_EOF
                eof.add(m.partition())
        return len(eof) == 3 and len(got) >= 300
    wait_for("every record read back", drained, deadline_s=90)
    c.close()
    assert sorted(got) == sorted(acked)


def add_node(cluster: Cluster, node_id: int, keystore_pem: Path, tls) -> Node:
    """A broker-only node asking the running quorum to let it in with `keystore_pem`."""
    if is_kafka():
        from kafka_cluster import KafkaNode
        nd = KafkaNode(cluster, node_id, free_port(), free_port(), roles="broker")
    else:
        nd = Node(cluster, node_id, free_port(), free_port(), roles="broker")
    configure(nd, keystore_pem, tls, "SSL")
    cluster.nodes.append(nd)
    conftest._LIVE.append(nd)
    nd.start()
    return nd


def registered_brokers(node) -> set[int]:
    return set(AdminClient({"bootstrap.servers": node.bootstrap}).list_topics(timeout=10).brokers)


# How each target says it refused the node: (whose log, what it says).
REFUSALS = {
    ("shardlog", "untrusted CA"): ("voters", "peer refused"),
    ("shardlog", "not a super user"): ("voters", "User:O=shardlog,CN=intruder may not act for the cluster"),
    ("kafka", "untrusted CA"): ("voters", "SSL handshake failed"),
    ("kafka", "not a super user"): ("node", "ClusterAuthorizationException"),  # its raft Fetch: error 31
}


@pytest.mark.parametrize("who,keystore_attr", [("untrusted CA", "rogue_node_pem"), ("not a super user", "intruder_node_pem")])
def test_a_node_the_quorum_cannot_authenticate_never_joins(cluster, tls, who, keystore_attr):
    node_id = 10 + len(cluster.nodes)
    assert registered_brokers(cluster.nodes[0]) == {1, 2, 3}
    intruder = add_node(cluster, node_id, getattr(tls, keystore_attr), tls)
    whose, says = REFUSALS[("kafka" if is_kafka() else "shardlog", who)]
    try:
        logs = (lambda: [nd.log_since_start() for nd in cluster.nodes[:3]]) if whose == "voters" else \
            (lambda: [intruder.log_since_start()])
        wait_for(f"the refusal of the node ({who}): {says!r}", lambda: any(says in text for text in logs()), deadline_s=120)
        # It never got in: not registered, not a broker clients are told of.
        assert registered_brokers(cluster.nodes[0]) == {1, 2, 3}
    finally:
        intruder.kill9()
    # The quorum is unharmed: it still takes writes.
    create_topic(cluster.nodes[1], NewTopic(f"after-intruder-{node_id}", 1, 3))


def test_brokers_authenticate_to_each_other_with_scram_once_the_credential_exists(tmp_path_factory, tls):
    """SASL_SSL between brokers with SCRAM-SHA-512: until User:broker's credential is in
    the metadata log the followers' authentication fails (and they say so); once it is
    created (through the running quorum, as `kafka-configs.sh --entity-type users` does)
    they authenticate, and acks=all with min.insync.replicas = 3 succeeds."""
    from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
    for cluster in secured_cluster(tmp_path_factory, tls, "scram", "SASL_SSL"):
        node = cluster.nodes[0]
        create_topic(node, NewTopic("before-credential", 1, 3))
        # Followers of that partition try the leader and are refused, in Kafka's words.
        wait_for("a follower refused for want of a credential",
                 lambda: any("invalid credentials with SASL mechanism SCRAM-SHA-512" in nd.log_since_start()
                             for nd in cluster.nodes), deadline_s=120)
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        up = UserScramCredentialUpsertion("broker", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"broker-secret")
        admin.alter_user_scram_credentials([up], request_timeout=30)["broker"].result(timeout=60)
        replicate_and_read_back(cluster, "scram-replication")
        assert wait_for("the first topic's followers caught up too",
                        lambda: isr_of(node, "before-credential")[0] == [1, 2, 3], deadline_s=120)


def test_cluster_sh_starts_a_secured_cluster(tmp_path):
    """`scripts/cluster.sh start 3 --secure`: every listener SSL with client certificates;
    the client settings it writes work for librdkafka and for Kafka's own tools (Java), and
    a client without a certificate is refused."""
    from clients import kafka_tool
    conftest.skip_unless_shardlog("scripts/cluster.sh starts shardlog processes")
    d = tmp_path / "cluster"
    env = {**os.environ, "SHARDLOG_CLUSTER_DIR": str(d), "SHARDLOG_BIN": str(conftest.SHARDLOG_BIN)}
    script = str(REPO / "scripts" / "cluster.sh")
    base = free_port()
    r = subprocess.run([script, "start", "3", "--secure", "--base-port", str(base)], env=env,
                       capture_output=True, text=True, timeout=240)
    try:
        assert r.returncode == 0, r.stderr
        bootstrap = r.stdout.strip()
        ssl = dict(line.split("=", 1) for line in (d / "librdkafka.properties").read_text().splitlines() if line)
        create_topic_with({"bootstrap.servers": bootstrap, **ssl}, NewTopic("over-ssl", 1, 3))
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all", **ssl})
        for i in range(20):
            p.produce("over-ssl", value=f"r{i}".encode())
        assert p.flush(60) == 0
        # Kafka's own tool with the Java settings file.
        out = kafka_tool("org.apache.kafka.tools.GetOffsetShell", "--bootstrap-server", bootstrap,
                         "--command-config", str(d / "client.properties"), "--topic", "over-ssl")
        assert out.returncode == 0 and "over-ssl:0:20" in out.stdout, out.stdout + out.stderr
        # No certificate: the handshake fails, nothing is listed.
        anonymous = AdminClient({"bootstrap.servers": bootstrap, "security.protocol": "SSL",
                                 "ssl.ca.location": ssl["ssl.ca.location"]})
        with pytest.raises(Exception):
            anonymous.list_topics(timeout=5)
    finally:
        stop = subprocess.run([script, "stop"], env=env, capture_output=True, text=True, timeout=120)
        assert stop.returncode == 0, stop.stderr
