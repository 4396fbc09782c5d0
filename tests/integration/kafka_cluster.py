"""N Apache Kafka 4.4 nodes (KRaft: combined broker+controller, or `controllers=C`
controller-only nodes and N broker-only ones) laid out like cluster_harness.Cluster, so a
cluster test can run against real Kafka to check the test itself (SHARDLOG_TEST_TARGET=kafka;
jars from scripts/kafka_local.sh).

The quorum is static (`controller.quorum.voters`) unless `dynamic_quorum=True` (KIP-853):
then every node finds the controllers through `controller.quorum.bootstrap.servers`, the
initial controllers are formatted with `--initial-controllers` (each with its directory id,
made here), and `add_node` starts a controller formatted with `--no-initial-controllers`
that follows as an observer until `kafka-metadata-quorum.sh add-controller`.

Same Node interface as the shardlog harness (start, kill9, pause, resume, stop, alive,
data_dir, bootstrap, log_since_start); only the command line and the readiness line
differ. Node i: client listener host:P_i, controller listener host:C_i, log.dirs
<data_dir>/logs (`metadata_dir`), `server.properties` written at each start, the data dir
formatted once with one cluster id for all nodes. `props` are extra server.properties lines (Kafka's keys).
The active controller is not read from Kafka's logs: `active_controller()` answers None.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from cluster_harness import Cluster, Node, kafka_uuid

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
    broker-only node (roles "broker") has no controller listener; a controller-only one
    ("controller") no client listener."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.node_props: dict[str, str] = {}
        # Kafka's Uuid text: the directory id `--initial-controllers` gives this controller.
        self.directory_id = kafka_uuid()

    @property
    def metadata_dir(self) -> Path:
        """Where meta.properties (node id, directory.id) is: the one log dir."""
        return self.data_dir / "logs"

    def quorum_props(self) -> dict[str, str]:
        if not self.cluster.dynamic_quorum:
            return {"controller.quorum.voters": self.cluster.voters}
        contacts = self.bootstrap_servers or ",".join(c.controller_listener for c in self.cluster.initial_controllers)
        return {"controller.quorum.bootstrap.servers": contacts}

    def properties(self) -> str:
        props = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            **self.quorum_props(),
            "listeners": f"PLAINTEXT://{self.bootstrap},CONTROLLER://{self.controller_listener}",
            "advertised.listeners": f"PLAINTEXT://{self.bootstrap}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(self.metadata_dir),
            **BASE_PROPS,
            **self.cluster.props,
        }
        if not self.is_controller:
            props["process.roles"] = "broker"
            props["listeners"] = f"PLAINTEXT://{self.bootstrap}"
        elif not self.is_broker:
            props["process.roles"] = "controller"
            props["listeners"] = f"CONTROLLER://{self.controller_listener}"
            props["listener.security.protocol.map"] = "CONTROLLER:PLAINTEXT"
            for k in ("advertised.listeners", "inter.broker.listener.name"):
                del props[k]
        props.update(self.node_props)
        return "".join(f"{k}={v}\n" for k, v in props.items())

    def format_args(self) -> list[str]:
        """How `kafka-storage format` makes this node's quorum role (dynamic quorum only)."""
        if not (self.cluster.dynamic_quorum and self.is_controller):
            return []
        if self in self.cluster.initial_controllers:
            return ["--initial-controllers", ",".join(f"{c.node_id}@{c.controller_listener}:{c.directory_id}"
                                                      for c in self.cluster.initial_controllers)]
        return ["--no-initial-controllers"]

    def command(self) -> list[str]:
        props = self.data_dir / "server.properties"
        cp = self.cluster.classpath
        self.data_dir.mkdir(parents=True, exist_ok=True)
        props.write_text(self.properties())
        if not (self.metadata_dir / "meta.properties").exists():
            subprocess.run(["java", "-cp", cp, "kafka.tools.StorageTool", "format",
                            "-t", self.cluster.cluster_id, "-c", str(props), *self.format_args()],
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
                 jvm_opts: list[str] | None = None, controllers: int = 0, dynamic_quorum: bool = False):
        super().__init__(n, root, log_dir=log_dir, name=name, hosts=hosts, prefixes=prefixes,
                         binary=Path("java"), controllers=controllers)
        self.classpath = classpath
        self.jvm_opts = list(TEST_JVM_OPTS if jvm_opts is None else jvm_opts)
        self.props = dict(props or {})
        self.dynamic_quorum = dynamic_quorum
        self.cluster_id = kafka_uuid()
        self.nodes = [KafkaNode(self, nd.node_id, nd.port, nd.controller_port, roles=nd.roles, host=nd.host, prefix=nd.prefix)
                      for nd in self.nodes]
        self.initial_controllers = [nd for nd in self.nodes if nd.is_controller]

    def add_node(self, node_id: int, roles: str = "controller", join_through: list[Node] | None = None) -> KafkaNode:
        """As `Cluster.add_node`: a controller formatted with `--no-initial-controllers`,
        joining through `join_through`'s controller listeners (dynamic quorum only)."""
        assert self.dynamic_quorum, "a node joins a running quorum only in a dynamic quorum"
        added = super().add_node(node_id, roles=roles, join_through=join_through)
        nd = KafkaNode(self, added.node_id, added.port, added.controller_port, roles=roles, host=added.host)
        nd.bootstrap_servers = added.bootstrap_servers
        self.nodes[self.nodes.index(added)] = nd
        return nd

    def start(self) -> "KafkaCluster":
        for nd in self.nodes:
            nd.start()
        return self

    def active_controller(self):
        return None
