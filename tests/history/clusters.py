"""3-node clusters for history runs: shardlog (tests/integration/cluster_harness.py) or
Apache Kafka (tests/integration/kafka_cluster.py), with the settings the replication
fault tests use, so that a killed broker is noticed within seconds."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient

REPO = Path(__file__).resolve().parents[2]
INTEGRATION = REPO / "tests" / "integration"
if str(INTEGRATION) not in sys.path:
    sys.path.insert(0, str(INTEGRATION))

# As Kafka keys; shardlog takes them as flags (`--replica-lag-time-max-ms 4000`).
# - replica.lag.time.max.ms: a follower that stops fetching leaves the ISR after 4 s;
# - broker.session.timeout.ms: a silent broker is fenced after 3 s (Kafka's default: 9 s);
# - auto.leader.rebalance.enable=false: leadership moves only when the nemesis moves it.
SETTINGS = {
    "replica.lag.time.max.ms": "4000",
    "broker.session.timeout.ms": "3000",
    "offsets.topic.replication.factor": "3",
    "auto.leader.rebalance.enable": "false",
}


def shardlog_flags(settings: dict[str, str]) -> list[str]:
    out = []
    for k, v in settings.items():
        out += ["--" + k.replace(".", "-"), v]
    return out


def kafka_classpath() -> str:
    out = subprocess.run([str(REPO / "scripts" / "kafka_local.sh"), "classpath"], check=True,
                         capture_output=True, text=True, timeout=900)
    return out.stdout.strip().splitlines()[-1]


def make_cluster(root: Path, target: str = "shardlog", n: int = 3, log_dir: Path | None = None,
                 name: str = "", binary: Path | None = None, hosts: list[str] | None = None,
                 prefixes: list[list[str]] | None = None, extra_args: list[str] | None = None):
    """An unstarted cluster of `n` combined nodes (node i on hosts[i-1], behind
    prefixes[i-1], when given; `extra_args`: more shardlog flags)."""
    if target == "kafka":
        from kafka_cluster import KafkaCluster
        return KafkaCluster(n, root, kafka_classpath(), props=dict(SETTINGS), log_dir=log_dir, name=name,
                            hosts=hosts, prefixes=prefixes)
    from cluster_harness import Cluster
    return Cluster(n, root, log_dir=log_dir, name=name, binary=binary, hosts=hosts, prefixes=prefixes,
                   extra_args=shardlog_flags(SETTINGS) + list(extra_args or []))


def wait_brokers(cluster, timeout_s: float = 120) -> None:
    """Until every node lists every broker (a topic with RF n needs them registered)."""
    want = {nd.node_id for nd in cluster.nodes if getattr(nd, "is_broker", True)}
    deadline = time.monotonic() + timeout_s
    for nd in cluster.nodes:
        while True:
            try:
                got = set(AdminClient({"bootstrap.servers": nd.bootstrap}).list_topics(timeout=10).brokers)
                if got == want:
                    break
            except Exception:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"node {nd.node_id} does not list brokers {sorted(want)} within {timeout_s} s")
            time.sleep(0.2)


def target() -> str:
    return os.environ.get("SHARDLOG_TEST_TARGET", "shardlog")
