"""Issue 26 points 5 and 7: `scripts/cluster.sh`. A 3-broker cluster creates topics with 3
replicas by default (the script's choice); stopped and started again with the same layout
it keeps its data; started on that directory with other ports it refuses at once, naming
the earlier cluster's data and how to remove it, where the nodes used to wait 60 s for a
quorum at the old addresses; `--fresh` removes the old data and starts. shardlog only.
"""

from __future__ import annotations

import os
import socket
import subprocess
import uuid
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

import conftest
from cluster_harness import free_port
from conftest import wait_for

REPO = Path(__file__).resolve().parents[2]
SCRIPT = str(REPO / "scripts" / "cluster.sh")


def test_cluster_sh_replicates_by_default_restarts_and_refuses_another_clusters_data(tmp_path):
    conftest.skip_unless_shardlog("scripts/cluster.sh starts shardlog processes")
    d = tmp_path / "cluster"
    env = {**os.environ, "SHARDLOG_CLUSTER_DIR": str(d), "SHARDLOG_BIN": str(conftest.SHARDLOG_BIN)}

    def sh(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
        return subprocess.run([SCRIPT, *args], env=env, capture_output=True, text=True, timeout=timeout)

    base = free_port()
    r = sh("start", "3", "--base-port", str(base))
    try:
        assert r.returncode == 0, r.stderr
        bootstrap = r.stdout.strip()
        topic = f"script-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, 1)], operation_timeout=30)[topic].result(timeout=60)
        md = admin.list_topics(topic, timeout=10).topics[topic]
        assert len(md.partitions[0].replicas) == 3, "a 3-broker script cluster replicates by default"
    finally:
        assert sh("stop", timeout=120).returncode == 0

    # The same layout: the cluster comes back with its data.
    r = sh("start", "3", "--base-port", str(base))
    try:
        assert r.returncode == 0, r.stderr
        admin = AdminClient({"bootstrap.servers": r.stdout.strip()})
        wait_for("the topic is still there", lambda: topic in admin.list_topics(timeout=10).topics, 60)
    finally:
        assert sh("stop", timeout=120).returncode == 0

    # Other ports on the same directory: refused at once, saying what is there and what to do.
    other = free_port()
    r = sh("start", "3", "--base-port", str(other), timeout=60)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"{d} holds the data of another cluster (node-1, node-2, node-3" in r.stderr, r.stderr
    assert f"base_port {base}" in r.stderr and f"rm -rf {d}" in r.stderr and "--fresh" in r.stderr, r.stderr
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", other)) != 0, "nothing was started"

    # --fresh: the old data goes, the new cluster starts empty.
    r = sh("start", "3", "--base-port", str(other), "--fresh")
    try:
        assert r.returncode == 0, r.stderr
        assert "removed the earlier cluster's data" in r.stderr, r.stderr
        admin = AdminClient({"bootstrap.servers": r.stdout.strip()})
        assert topic not in admin.list_topics(timeout=10).topics
    finally:
        assert sh("stop", timeout=120).returncode == 0
