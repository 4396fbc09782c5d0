#!/usr/bin/env python3
"""CreateTopics -> serving, and idle CPU, of a local 3-node cluster (issue 11, Measure).

CreateTopics -> serving: each round creates a topic of --partitions partitions through
node 1 (confluent-kafka AdminClient) and then offers one record to every partition on
every node, over raw Produce v8 on open connections, until each partition's leader
acknowledges it (error 0). One sample is the time from sending CreateTopics until the
last partition is acknowledged: the quorum commit, the apply on every broker, the shard
that owns each replica opening its log. Also printed: the CreateTopics answer alone.

Idle CPU: with the topics in place and no clients, each node's user+system CPU time
over --idle-s seconds (/proc/<pid>/stat), as a share of one core: heartbeats, raft
heartbeats, shard timers.

Usage: benches/cluster_metadata.py [--rounds 30] [--partitions 6] [--idle-s 20]
       [--bin target/release/shardlog] [--controllers 0]
Prints one line per round, then p50 / p99 / max in ms, then CPU per node.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "integration"))
from cluster_harness import Cluster  # noqa: E402
from controller_failover import percentile  # noqa: E402
from kafkawire import connect, parse_produce_v8, produce_v8_request, record_batch, roundtrip  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime


def serve_all(socks: dict, topic: str, partitions: int, batch: bytes, deadline_s: float = 60) -> None:
    """Offers a record to every partition on every broker until each is acknowledged."""
    pending = set(range(partitions))
    end = time.monotonic() + deadline_s
    corr = 0
    while pending:
        if time.monotonic() > end:
            raise TimeoutError(f"partitions never served: {sorted(pending)}")
        for p in sorted(pending):
            for s in socks.values():
                corr += 1
                _, out = parse_produce_v8(roundtrip(s, produce_v8_request(corr, topic, p, batch)))
                if out[(topic, p)]["error_code"] == 0:
                    pending.discard(p)
                    break
        if pending:
            time.sleep(0.002)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--idle-s", type=float, default=20)
    ap.add_argument("--controllers", type=int, default=0, help="controller-only nodes; 0 = 3 combined nodes")
    ap.add_argument("--bin", type=Path, default=Path(os.environ.get("SHARDLOG_BIN", REPO / "target" / "release" / "shardlog")))
    a = ap.parse_args()
    serving: list[float] = []
    answered: list[float] = []
    with tempfile.TemporaryDirectory(prefix="cluster-metadata-") as root:
        if a.controllers:
            c = Cluster(root=Path(root), binary=a.bin, controllers=a.controllers, brokers=3)
        else:
            c = Cluster(3, Path(root), binary=a.bin)
        try:
            c.start()
            c.wait_ready(timeout_s=60)
            admin = AdminClient({"bootstrap.servers": c.bootstrap})
            socks = {nd.node_id: connect(nd.bootstrap) for nd in c.brokers}
            batch = record_batch([(None, b"x", [])], base_ts=int(time.time() * 1000))
            for i in range(a.rounds):
                topic = f"serve-{uuid.uuid4().hex[:8]}"
                t0 = time.monotonic()
                admin.create_topics([NewTopic(topic, a.partitions, 1)], operation_timeout=30)[topic].result(timeout=60)
                t1 = time.monotonic()
                serve_all(socks, topic, a.partitions, batch)
                t2 = time.monotonic()
                answered.append((t1 - t0) * 1000)
                serving.append((t2 - t0) * 1000)
                print(f"round {i + 1}: CreateTopics answered {answered[-1]:.1f} ms, every partition serving {serving[-1]:.1f} ms", flush=True)
            for s in socks.values():
                s.close()
            print(f"CreateTopics answered: p50 {percentile(answered, 50):.1f} ms, p99 {percentile(answered, 99):.1f} ms")
            print(f"CreateTopics -> every partition serving ({a.partitions} partitions, {len(c.brokers)} brokers): "
                  f"p50 {percentile(serving, 50):.1f} ms, p99 {percentile(serving, 99):.1f} ms, max {max(serving):.1f} ms")
            time.sleep(5)
            pids = {nd.node_id: nd.pid() for nd in c.nodes}
            before = {n: cpu_seconds(p) for n, p in pids.items() if p}
            time.sleep(a.idle_s)
            after = {n: cpu_seconds(p) for n, p in pids.items() if p}
            for n in sorted(before):
                nd = c.node(n)
                print(f"idle CPU node {n} ({nd.roles}): {100 * (after[n] - before[n]) / a.idle_s:.2f}% of one core "
                      f"over {a.idle_s:.0f} s")
        finally:
            c.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
