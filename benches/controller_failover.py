#!/usr/bin/env python3
"""Controller failover time of a local 3-node combined cluster (issue 11, Measure).

Each round: kill -9 the active controller (the quorum leader), then send CreateTopics
through a survivor until one succeeds; the time from the kill to that success is one
sample (election + forwarding + commit + apply on the survivor). The killed node is then
restarted and waited for (it rejoins as a follower) before the next round.

With `--controllers 3 --brokers 2`: the split layout (3 controller-only voters, 2
broker-only observers); the CreateTopics goes through a broker (never killed).

Usage: benches/controller_failover.py [--kills 20] [--bin target/release/shardlog] [--controllers 3 --brokers 2]
Prints one line per kill and then p50 / p99 / max in ms. Apache Kafka 4.1 on 3 local
nodes: 2.25 s median, up to 3.8 s (issue 11's figures).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "integration"))
from cluster_harness import Cluster  # noqa: E402


def create_until_ok(bootstrap: str, name: str, deadline_s: float = 60) -> None:
    a = AdminClient({"bootstrap.servers": bootstrap})
    end = time.monotonic() + deadline_s
    while True:
        fut = a.create_topics([NewTopic(name, 1, 1)], request_timeout=30)[name]
        try:
            fut.result(timeout=60)
            return
        except Exception as e:
            err = e.args[0] if e.args else e
            if hasattr(err, "name") and err.name() == "TOPIC_ALREADY_EXISTS":
                return
            if time.monotonic() > end:
                raise
            time.sleep(0.01)


def percentile(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(p / 100 * len(s) + 0.5) - 1))]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--controllers", type=int, default=0, help="controller-only nodes; 0 = 3 combined nodes")
    ap.add_argument("--brokers", type=int, default=2, help="broker-only nodes (with --controllers)")
    ap.add_argument("--bin", type=Path, default=Path(os.environ.get("SHARDLOG_BIN", REPO / "target" / "release" / "shardlog")))
    a = ap.parse_args()
    samples: list[float] = []
    with tempfile.TemporaryDirectory(prefix="failover-") as root:
        if a.controllers:
            c = Cluster(a.brokers, Path(root), binary=a.bin, controllers=a.controllers)
        else:
            c = Cluster(3, Path(root), binary=a.bin)
        try:
            c.start()
            c.wait_ready()
            for i in range(a.kills):
                leader, term = c.wait_leader(timeout_s=60)
                survivor = next(nd for nd in c.brokers if nd.node_id != leader)
                create_until_ok(survivor.bootstrap, f"warm-{i}")  # connections open, quorum healthy
                victim = c.node(leader)
                t0 = time.monotonic()
                victim.kill9()
                create_until_ok(survivor.bootstrap, f"after-kill-{i}")
                ms = (time.monotonic() - t0) * 1000
                samples.append(ms)
                print(f"kill {i + 1}: node {leader} (term {term}) -> committed through node {survivor.node_id} in {ms:.0f} ms", flush=True)
                victim.start()
                c.wait_ready(nodes=[victim])
        finally:
            c.close()
    print(f"controller failover over {len(samples)} kills: p50 {percentile(samples, 50):.0f} ms, "
          f"p99 {percentile(samples, 99):.0f} ms, max {max(samples):.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
