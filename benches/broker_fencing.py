#!/usr/bin/env python3
"""Broker fencing time of a local 3-node combined cluster (issue 11, Measure).

Each round: kill -9 a broker that is not the active controller (so this measures fencing,
not quorum failover), then poll Metadata on a survivor every 20 ms until the killed broker
is gone from it; the time from the kill to that answer is one sample (the leader
fences a broker 100 ms after its heartbeat connection closed — before: after its missed
heartbeats for `broker_session_timeout_ms` —, then the commit and the apply on the
survivor). 20 kills: p50 124 ms, p99 454 ms (before: ~3 s;
benches/results/broker_fencing/). The killed node is restarted and waited for (it re-registers and
is listed again) before the next round. Kafka fences after its 9 s session timeout.

Usage: benches/broker_fencing.py [--kills 20] [--bin target/release/shardlog]
       [--session-timeout-ms 3000]
Prints one line per kill and then p50 / p99 / max in ms.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "integration"))
from cluster_harness import Cluster  # noqa: E402
from controller_failover import percentile  # noqa: E402


def brokers_seen(bootstrap: str) -> set[int] | None:
    """The brokers the node's own Metadata lists. A fresh client each time: a long-lived
    one sends Metadata to any broker it knows, the killed one included, and its retries
    would be measured too."""
    try:
        return set(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=5).brokers)
    except Exception:
        return None


def wait_brokers(bootstrap: str, ok, deadline_s: float = 60) -> None:
    end = time.monotonic() + deadline_s
    while not ((seen := brokers_seen(bootstrap)) is not None and ok(seen)):
        if time.monotonic() > end:
            raise TimeoutError(f"brokers seen: {seen}")
        time.sleep(0.02)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--bin", type=Path, default=Path(os.environ.get("SHARDLOG_BIN", REPO / "target" / "release" / "shardlog")))
    ap.add_argument("--session-timeout-ms", type=int, default=None, help="default: the broker's")
    ap.add_argument("--log-dir", type=Path, default=None, help="keep the nodes' logs here")
    a = ap.parse_args()
    extra = [] if a.session_timeout_ms is None else ["--broker-session-timeout-ms", str(a.session_timeout_ms)]
    samples: list[float] = []
    with tempfile.TemporaryDirectory(prefix="fencing-") as root:
        c = Cluster(3, Path(root), binary=a.bin, extra_args=extra, log_dir=a.log_dir)
        try:
            c.start()
            c.wait_ready()
            for i in range(a.kills):
                leader, _ = c.wait_leader(timeout_s=60)
                victim = next(nd for nd in reversed(c.nodes) if nd.node_id != leader)
                survivor = next(nd for nd in c.nodes if nd.node_id not in (victim.node_id,))
                wait_brokers(survivor.bootstrap, lambda seen: seen == {1, 2, 3})
                t0 = time.monotonic()
                victim.kill9()
                wait_brokers(survivor.bootstrap, lambda seen: victim.node_id not in seen)
                ms = (time.monotonic() - t0) * 1000
                samples.append(ms)
                print(f"kill {i + 1}: broker {victim.node_id} fenced in Metadata of node {survivor.node_id} after {ms:.0f} ms", flush=True)
                victim.start()
                c.wait_ready(nodes=[victim])
        finally:
            c.close()
    print(f"broker fencing over {len(samples)} kills: p50 {percentile(samples, 50):.0f} ms, "
          f"p99 {percentile(samples, 99):.0f} ms, max {max(samples):.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
