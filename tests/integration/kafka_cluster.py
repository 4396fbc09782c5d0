"""N Apache Kafka 4.1 nodes (KRaft, combined broker+controller, a static quorum) laid out
like cluster_harness.Cluster, so a cluster test can run against real Kafka to check the
test itself (SHARDLOG_TEST_TARGET=kafka; jars from scripts/kafka_local.sh).

Same Node interface as the shardlog harness (start, kill9, pause, resume, stop, alive,
data_dir, bootstrap, log_since_start); only the command line and the readiness line
differ. Node i: client listener host:P_i, controller listener host:C_i, log.dirs
<data_dir>/logs, `server.properties` written once per data dir and formatted with one
cluster id for all nodes. `props` are extra server.properties lines (Kafka's keys).
The active controller is not read from Kafka's logs: `active_controller()` answers None.
"""

from __future__ import annotations

import base64
import subprocess
import uuid
from pathlib import Path

from cluster_harness import Cluster, Node

# Broker settings every Kafka test cluster gets: a 3-node cluster where the internal
# topics are replicated, groups start without the 3 s initial delay, and a dead broker is
# fenced as fast as shardlog's default (broker.session.timeout.ms 3000; Kafka: 9000).
BASE_PROPS = {
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "group.initial.rebalance.delay.ms": "0",
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "num.partitions": "1",
}


class KafkaNode(Node):
    """`node_props`: this node's own server.properties lines, over the cluster's. A
    broker-only node (roles "broker") has no controller listener."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.node_props: dict[str, str] = {}

    def properties(self) -> str:
        props = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": self.cluster.voters,
            "listeners": f"PLAINTEXT://{self.bootstrap},CONTROLLER://{self.controller_listener}",
            "advertised.listeners": f"PLAINTEXT://{self.bootstrap}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(self.data_dir / "logs"),
            **BASE_PROPS,
            **self.cluster.props,
        }
        if not self.is_controller:
            props["process.roles"] = "broker"
            props["listeners"] = f"PLAINTEXT://{self.bootstrap}"
            props["listener.security.protocol.map"] = "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
        props.update(self.node_props)
        return "".join(f"{k}={v}\n" for k, v in props.items())

    def command(self) -> list[str]:
        props = self.data_dir / "server.properties"
        cp = self.cluster.classpath
        if not props.exists():
            self.data_dir.mkdir(parents=True, exist_ok=True)
            props.write_text(self.properties())
        if not (self.data_dir / "logs" / "meta.properties").exists():
            subprocess.run(["java", "-cp", cp, "kafka.tools.StorageTool", "format",
                            "-t", self.cluster.cluster_id, "-c", str(props)],
                           check=True, capture_output=True, timeout=180)
        return [*self.prefix, "java", *self.cluster.jvm_opts, "-cp", cp, "kafka.Kafka", str(props)]

    def ready(self) -> bool:
        return "Kafka Server started" in self.log_since_start()


# Test clusters run small JVMs (three of them share two cores with the tests); the
# benchmark passes the JVM defaults it gives a single Kafka node instead.
TEST_JVM_OPTS = ["-Xmx512m", "-XX:+UseSerialGC"]


class KafkaCluster(Cluster):
    """`Cluster(n, root, ...)` of Kafka nodes; `props` = extra server.properties;
    `jvm_opts` = the options of each node's JVM."""

    def __init__(self, n: int, root: Path, classpath: str, props: dict[str, str] | None = None,
                 log_dir: Path | None = None, name: str = "",
                 hosts: list[str] | None = None, prefixes: list[list[str] | None] | None = None,
                 jvm_opts: list[str] | None = None):
        super().__init__(n, root, log_dir=log_dir, name=name, hosts=hosts, prefixes=prefixes,
                         binary=Path("java"))
        self.classpath = classpath
        self.jvm_opts = list(TEST_JVM_OPTS if jvm_opts is None else jvm_opts)
        self.props = dict(props or {})
        self.cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        self.nodes = [KafkaNode(self, nd.node_id, nd.port, nd.controller_port, host=nd.host, prefix=nd.prefix)
                      for nd in self.nodes]

    def start(self) -> "KafkaCluster":
        for nd in self.nodes:
            nd.start()
        return self

    def active_controller(self):
        return None
