#!/usr/bin/env python3
"""Failover unavailability of a replicated topic on a local 3-node cluster (issue 12,
Measure): RF=3, min.insync.replicas=2, 6 partitions, one acks=all idempotent producer
writing continuously (confluent-kafka, a record every millisecond or so, round robin over
the partitions).

Each round: kill -9 the broker leading partition 0 (never the active controller's node,
so this measures a partition failover, not a quorum one: when that node leads every
partition, a preferred-leader election first moves some away, untimed), then wait until
EVERY partition has acknowledged a record sent after the kill; the time from the kill to
the last of those first acknowledgements is one sample. The killed broker is restarted and
waited for until it is back in every ISR before the next round. Apache Kafka 4.1 on 3 local
nodes takes ~13.4 s at the median (its 9 s session timeout); issue 12's target is p99 <= 2 s.

Where the time goes after a kill -9 (release build, default settings): the quorum leader
sees the broker's heartbeat connection close at once and fences it 100 ms later
(`controller/liveness.rs`; before: `broker_session_timeout_ms`, 3 s); the fencing elects
new leaders from the ISR and shrinks the ISRs of the partitions it followed (until then
acks=all writes to every partition wait for it, and so do the Metadata answers queued
behind them on the producer's connections); the producer learns the new leaders from its
Metadata retries and the followers start fetching from them. Measured over 20 kills: p50
129 / p99 961 ms, p50 129 / p99 359 ms and p50 127 / p99 772 ms (three runs), p50 149 /
p99 980 ms with --client-defaults, p50 144 / p99 631 ms with a 1 s session timeout (no
longer on this path) (`benches/results/replication_failover/`; before: p50 2.9 s, p99 3.4
s). The tail (300 ms - 1 s, a few kills in 20) is librdkafka's: a fenced broker leaves the
Metadata broker list in the same answer that moves its partitions, and decommissioning it
sends those partitions back to librdkafka's internal broker until its 1 s topic scan asks
again. Two broker-side quanta that used to add 1 s were found here: a new replica fetcher
slept `replica_fetch_backoff_ms` before its first fetch (glommio polls a spawned task at
once, before its partitions were set), and a follower whose first fetch reached the new
leader before it applied its election backed off 1 s.

Also reported: records acknowledged, and (checked at the end by reading every partition)
lost or duplicated acknowledged records — both must be 0.

Usage: benches/replication_failover.py [--kills 20] [--bin target/release/shardlog]
       [--session-timeout-ms N] [--log-dir DIR] [--client-defaults]
Prints one line per kill, then p50 / p99 / max in ms.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, ElectionType, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "integration"))
from cluster_harness import Cluster  # noqa: E402
from controller_failover import percentile  # noqa: E402

TOPIC = "failover"
PARTITIONS = 6


def state(bootstrap: str) -> dict[int, tuple[int, list[int]]] | None:
    try:
        md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(TOPIC, timeout=5)
        t = md.topics[TOPIC]
        if t.error is not None:
            return None
        return {p.id: (p.leader, sorted(p.isrs)) for p in t.partitions.values()}
    except Exception:
        return None


def wait(what: str, check, deadline_s: float = 120):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        r = check()
        if r:
            return r
        time.sleep(0.05)
    raise TimeoutError(what)


class Load:
    """An acks=all idempotent producer in a thread; records each ack's (partition, offset,
    value), and, once `mark` is set, when each partition first acknowledged a record
    numbered `mark` or later (values count up: record `mark` is produced after it is set)."""

    def __init__(self, bootstrap: str, client_defaults: bool = False):
        # retry.backoff.ms and topic.metadata.refresh.interval.ms shorten the client's own
        # reaction; --client-defaults leaves librdkafka's defaults (100 ms, 5 min).
        tuned = {} if client_defaults else {"retry.backoff.ms": 20, "topic.metadata.refresh.interval.ms": 1000}
        self.p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                           "linger.ms": 1, "message.timeout.ms": 120000, **tuned})
        self.acked: list[tuple[int, int, bytes]] = []
        self.mark: int | None = None
        self.first_after: dict[int, float] = {}
        self.sent = 0
        self.stop = False
        self.t = threading.Thread(target=self.run, daemon=True)

    def report(self, err, msg):
        if err is None:
            self.acked.append((msg.partition(), msg.offset(), msg.value()))
            if self.mark is not None and int(msg.value()) >= self.mark:
                self.first_after.setdefault(msg.partition(), time.monotonic())

    def run(self):
        while not self.stop:
            v = f"{self.sent}".encode()
            try:
                self.p.produce(TOPIC, value=v, partition=self.sent % PARTITIONS, on_delivery=self.report)
                self.sent += 1
            except BufferError:
                pass
            self.p.poll(0.001)
        self.p.flush(120)


def read_all(bootstrap: str) -> dict[int, list[tuple[int, bytes]]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "failover-check", "enable.auto.commit": False,
                  "enable.partition.eof": True})
    c.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    got: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
    eof: set[int] = set()
    end = time.monotonic() + 300
    while len(eof) < PARTITIONS and time.monotonic() < end:
        for m in c.consume(num_messages=10000, timeout=1.0):
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    eof.add(m.partition())
                continue
            got[m.partition()].append((m.offset(), m.value()))
            eof.discard(m.partition())
    c.close()
    return got


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--bin", type=Path, default=Path(os.environ.get("SHARDLOG_BIN", REPO / "target" / "release" / "shardlog")))
    ap.add_argument("--session-timeout-ms", type=int, default=None, help="default: the broker's")
    ap.add_argument("--log-dir", type=Path, default=None, help="keep the nodes' logs here")
    ap.add_argument("--client-defaults", action="store_true",
                    help="the producer keeps librdkafka's retry.backoff.ms and topic.metadata.refresh.interval.ms")
    a = ap.parse_args()
    extra = [] if a.session_timeout_ms is None else ["--broker-session-timeout-ms", str(a.session_timeout_ms)]
    samples: list[float] = []
    with tempfile.TemporaryDirectory(prefix="failover-") as root:
        c = Cluster(3, Path(root), binary=a.bin, extra_args=extra, log_dir=a.log_dir)
        c.start()
        c.wait_ready(60)
        try:
            admin = AdminClient({"bootstrap.servers": c.bootstrap})
            admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(60)
            wait("topic in sync", lambda: (s := state(c.bootstrap)) and all(len(i) == 3 for _, i in s.values()))
            load = Load(c.bootstrap, a.client_defaults)
            load.t.start()
            time.sleep(3)
            for k in range(a.kills):
                controller = c.active_controller()
                s = wait("leaders", lambda: state(c.bootstrap))
                if controller is not None and all(l == controller[0] for l, _ in s.values()):
                    # The restarted brokers came back as followers, so the active
                    # controller's node may lead everything: move leaders back to the
                    # preferred replicas first (not timed), so that a partition failover is
                    # measured rather than a quorum one.
                    print(f"before kill {k + 1}: node {controller[0]} runs the quorum and leads every partition; "
                          "preferred-leader election", flush=True)
                    moved = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
                    try:
                        moved.result(30)
                    except Exception as e:  # per-partition ELECTION_NOT_NEEDED and the like
                        print(f"  {e}", flush=True)
                    s = wait("a leader off the controller's node", lambda: (st := state(c.bootstrap)) and
                             any(l != controller[0] for l, _ in st.values()) and st)
                    # The producer follows the moved leaders before the kill (not timed).
                    load.first_after = {}
                    load.mark = load.sent + 1
                    wait("every partition acknowledges on its new leader", lambda: len(load.first_after) == PARTITIONS)
                    time.sleep(1)
                victim_id = s[0][0]
                if controller is not None and victim_id == controller[0]:
                    # Partition 0's leader runs the quorum: take another partition's.
                    victim_id = next((l for l, _ in s.values() if l != controller[0]), victim_id)
                victim = c.node(victim_id)
                survivor = next(nd for nd in c.nodes if nd is not victim)
                killed_at = time.monotonic()
                # Records from sent + 1 on are produced after killed_at (the producer thread
                # counts `sent` up after each produce() call): only their acks count.
                load.first_after = {}
                load.mark = load.sent + 1
                victim.kill9()
                wait("every partition acknowledges again",
                     lambda: len(load.first_after) == PARTITIONS, deadline_s=180)
                ms = (max(load.first_after.values()) - killed_at) * 1000
                load.mark = None
                samples.append(ms)
                print(f"kill {k + 1}: broker {victim_id}: every partition acknowledging again after {ms:.0f} ms", flush=True)
                victim.start()
                c.wait_ready(60, nodes=[victim])
                wait("back in every ISR", lambda: (st := state(survivor.bootstrap)) and
                     all(victim_id in i for _, i in st.values()), deadline_s=180)
            load.stop = True
            load.t.join(180)
            got = read_all(c.bootstrap)
            where = {(p, o): v for p, records in got.items() for o, v in records}
            values = [v for records in got.values() for _, v in records]
            lost = sum(1 for p, o, v in load.acked if where.get((p, o)) != v)
            dup = len(values) - len(set(values))
            print(f"sent {load.sent}, acknowledged {len(load.acked)}, lost {lost}, duplicated {dup}")
        finally:
            c.close()
    s = sorted(samples)
    print(f"failover unavailability over {len(s)} kills: p50 {percentile(s, 50):.0f} ms, "
          f"p99 {percentile(s, 99):.0f} ms, max {s[-1]:.0f} ms")
    return 0 if lost == 0 and dup == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
