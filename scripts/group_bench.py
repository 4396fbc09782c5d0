#!/usr/bin/env python3
"""Consumer-group figures for a running broker (shardlog or Apache Kafka):

- rebalance after a join: 3 consumers (confluent-kafka, range, eager) over 12 partitions
  are Stable; a 4th subscribes; seconds from its subscribe() call until the coordinator
  reports the group Stable with 4 members (DescribeGroups polled every 20 ms);
- rebalance after a kill: one of 4 consumers is killed with SIGKILL; seconds until the
  group is Stable with 3 members (bounded below by session.timeout.ms);
- offset commits per second on one coordinator: CONNS connections each keeping DEPTH
  OffsetCommit v8 requests in flight for one group (so one __consumer_offsets partition,
  one shard), one partition per request.

Consumers use session.timeout.ms=6000 and heartbeat.interval.ms=500 (members learn of a
rebalance from a heartbeat, so the interval bounds join latency). Prints p50/p99/max over
--runs runs and one JSON line. Not part of CI; timings are for reading, not asserting.

usage: scripts/group_bench.py --bootstrap HOST:PORT [--runs 20] [--commit-seconds 10]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "integration"))
import kafkawire  # noqa: E402  (the tests' raw-protocol helpers)

SESSION_MS = 6000


def worker(bootstrap: str, topic: str, group: str) -> None:
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "session.timeout.ms": SESSION_MS,
                  "heartbeat.interval.ms": 500, "partition.assignment.strategy": "range",
                  "enable.auto.commit": False})
    print(f"subscribe {time.time():.6f}", flush=True)
    c.subscribe([topic])
    while True:
        c.poll(0.1)


def spawn(bootstrap, topic, group) -> tuple[subprocess.Popen, float]:
    p = subprocess.Popen([sys.executable, __file__, "--worker", bootstrap, topic, group],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    line = p.stdout.readline().split()
    return p, float(line[1])


def wait_stable(a, group, members, timeout_s=60) -> float:
    """time.time() when the group is first seen Stable with `members` members."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        try:
            d = a.describe_consumer_groups([group], request_timeout=5)[group].result(timeout=5)
            if str(d.state).endswith("STABLE") and len(d.members) == members:
                return time.time()
        except Exception:
            pass
        time.sleep(0.02)
    raise RuntimeError(f"{group} not Stable with {members} members in {timeout_s} s")


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q / 100 * len(xs) + 0.5) - 1))]


def rebalances(bootstrap: str, runs: int) -> tuple[list[float], list[float]]:
    from confluent_kafka.admin import AdminClient, NewTopic
    a = AdminClient({"bootstrap.servers": bootstrap})
    topic = f"groupbench-{uuid.uuid4().hex[:6]}"
    a.create_topics([NewTopic(topic, 12, 1)])[topic].result(timeout=30)
    join_s, kill_s = [], []
    for run in range(runs):
        group = f"gb-{uuid.uuid4().hex[:8]}"
        procs = [spawn(bootstrap, topic, group)[0] for _ in range(3)]
        try:
            wait_stable(a, group, 3)
            p4, t_sub = spawn(bootstrap, topic, group)
            procs.append(p4)
            join_s.append(wait_stable(a, group, 4) - t_sub)
            time.sleep(1)  # let every member settle into the new generation
            victim = procs.pop(0)
            t_kill = time.time()
            os.killpg(victim.pid, signal.SIGKILL)
            victim.wait()
            kill_s.append(wait_stable(a, group, 3) - t_kill)
            print(f"run {run + 1}/{runs}: join {join_s[-1]:.3f} s, kill {kill_s[-1]:.3f} s", file=sys.stderr, flush=True)
        finally:
            for p in procs:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    return join_s, kill_s


# -- offset commits (raw OffsetCommit v8, flexible) ----------------------------------------------

def cstr(s: str | None) -> bytes:
    return b"\x00" if s is None else kafkawire.compact_string(s)


def commit_request(corr: int, group: str, topic: str, partition: int, offset: int) -> bytes:
    header = struct.pack(">hhi", 8, 8, corr) + struct.pack(">h", 5) + b"bench" + b"\x00"
    body = (cstr(group) + struct.pack(">i", -1) + cstr("") + cstr(None)
            + kafkawire.uvarint(2) + cstr(topic) + kafkawire.uvarint(2) + struct.pack(">iqi", partition, offset, -1) + cstr(None) + b"\x00"
            + b"\x00" + b"\x00")
    msg = header + body
    return struct.pack(">i", len(msg)) + msg


def find_coordinator(bootstrap: str, group: str) -> tuple[str, int]:
    # The coordinator of a single-broker cluster is the broker itself.
    host, port = bootstrap.rsplit(":", 1)
    return host, int(port)


def commits(bootstrap: str, seconds: float, conns: int = 4, depth: int = 64) -> float:
    from confluent_kafka.admin import AdminClient, NewTopic
    a = AdminClient({"bootstrap.servers": bootstrap})
    topic = f"commitbench-{uuid.uuid4().hex[:6]}"
    a.create_topics([NewTopic(topic, 12, 1)])[topic].result(timeout=30)
    time.sleep(1)
    group = f"cb-{uuid.uuid4().hex[:8]}"
    host, port = find_coordinator(bootstrap, group)
    done = [0] * conns
    errors = [0] * conns
    stop = time.monotonic() + seconds

    def run(i):
        s = socket.create_connection((host, port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        f = s.makefile("rb")
        corr, inflight = 0, 0
        while True:
            now = time.monotonic()
            while inflight < depth and now < stop:
                corr += 1
                s.sendall(commit_request(corr, group, topic, corr % 12, corr))
                inflight += 1
            if inflight == 0:
                break
            n = struct.unpack(">i", f.read(4))[0]
            resp = f.read(n)
            # header: corr i32 + tagged; body: throttle i32, topics...; the partition error
            # is the i16 before the final three tagged-field bytes.
            if struct.unpack(">h", resp[-5:-3])[0] != 0:
                errors[i] += 1
            inflight -= 1
            done[i] += 1
        s.close()

    ts = [threading.Thread(target=run, args=(i,)) for i in range(conns)]
    t0 = time.monotonic()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    elapsed = time.monotonic() - t0
    if sum(errors):
        raise RuntimeError(f"{sum(errors)} commits failed")
    return sum(done) / elapsed


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(*sys.argv[2:5])
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--commit-seconds", type=float, default=10)
    args = ap.parse_args()
    rate = commits(args.bootstrap, args.commit_seconds)
    print(f"offset commits: {rate:,.0f}/s (4 connections x 64 in flight, one group)", flush=True)
    join_s, kill_s = rebalances(args.bootstrap, args.runs)
    for name, xs in (("join", join_s), ("kill", kill_s)):
        print(f"rebalance after {name}: p50 {statistics.median(xs):.3f} s, p99 {pct(xs, 99):.3f} s, max {max(xs):.3f} s over {len(xs)} runs")
    print(json.dumps({"commits_per_s": round(rate), "join_p50_s": statistics.median(join_s), "join_p99_s": pct(join_s, 99),
                      "kill_p50_s": statistics.median(kill_s), "kill_p99_s": pct(kill_s, 99), "runs": len(join_s)}))


if __name__ == "__main__":
    main()
