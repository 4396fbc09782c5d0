"""The Java KafkaShareConsumer 4.4 (KIP-932) against the broker, as issue 27 asks: several
consumers share one partition; every record is delivered, an accepted or rejected record
is never delivered again once its acknowledgement was answered, released and
lock-expired records are delivered again, the delivery-count limit archives a record
released every time; with kill -9 of the partition's leader and then of the share
coordinator's broker on a 3-node cluster, nothing is lost and nothing acknowledged comes
back. Explicit acknowledgement (`share.acknowledgement.mode=explicit`, each record's
fate chosen by its value, `ShareWorker.java`) and implicit. Both targets.

The judge reads what the consumers report: each delivery (offset, value, delivery count)
and each acknowledgement the broker answered (or did not: an error or no answer is an
unknown outcome and proves nothing either way)."""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from collections import defaultdict

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import conftest
from admin_api import scrape
from clients import JAVA_JAR, admin_create_topic
from conftest import is_kafka, wait_for
from test_groups import topic_id_of
from test_share_durability import leader_of, share_state_partition
from test_share_groups import configs_tool, share_broker, share_groups_tool

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.history.clusters import SETTINGS, shardlog_flags, wait_brokers  # noqa: E402

LIMIT = 3  # share.delivery.count.limit of the tests' groups (Kafka's minimum is 2)
LOCK_MS = 15_000  # share.record.lock.duration.ms (the group config's minimum)
BOUND_S = 240  # a bound for any one wait; reaching it is a failure


class ShareWorker:
    """The Java tool's `share-worker`, its JSON lines read on a thread into `events`."""

    def __init__(self, bootstrap: str, group: str, topic: str, mode: str, name: str, events: list, lock: threading.Lock):
        assert JAVA_JAR.exists(), f"{JAVA_JAR} missing: mvn -f tests/java/pom.xml package"
        self.name, self.events, self.lock = name, events, lock
        self.proc = subprocess.Popen(
            ["java", "-Xmx256m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-jar", str(JAVA_JAR),
             "share-worker", "--bootstrap", bootstrap, "--group", group, "--topic", topic, "--mode", mode],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            if line.startswith("{"):
                with self.lock:
                    self.events.append((time.monotonic(), self.name, json.loads(line)))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def rule(value: str) -> int:
    return int(value[1:]) % 10


class Judge:
    """Reads the workers' events: deliveries by offset, and the acknowledgements the broker
    took. A final acknowledgement is ACCEPT, REJECT, or a RELEASE at the delivery-count limit
    (the record is archived)."""

    def __init__(self, events: list, lock: threading.Lock, explicit: bool):
        with lock:
            evs = list(events)
        self.deliveries: dict[int, list[tuple[float, str, str, int]]] = defaultdict(list)
        self.finals: dict[int, list[tuple[float, str, str, int]]] = defaultdict(list)
        self.released: dict[int, list[int]] = defaultdict(list)
        self.failed: dict[int, float] = {}
        self.errors = []
        self.last_event = 0.0
        for t, who, e in evs:
            self.last_event = max(self.last_event, t)
            if "d" in e:
                self.deliveries[e["d"]].append((t, who, e["v"], e["n"]))
            elif "acked" in e:
                for offset, kind, n in e["acked"]:
                    if kind in "AR" or n >= LIMIT:
                        self.finals[offset].append((t, who, kind, n))
                    else:
                        self.released[offset].append(n)
            elif "ackfail" in e:
                for offset in e["ackfail"]:
                    self.failed[offset] = t
            elif "error" in e:
                self.errors.append((who, e))
        self.explicit = explicit

    def settled(self, offsets: set[int], quiet_s: float) -> bool:
        """Every offset has a final acknowledgement taken or an unknown outcome last, and
        nothing happened for `quiet_s` (longer than a lock: a record whose release was lost
        comes back by then)."""
        done = all(self.finals.get(o) or o in self.failed for o in offsets)
        return done and time.monotonic() - self.last_event > quiet_s

    def summary(self) -> str:
        redelivered = sum(1 for ds in self.deliveries.values() if len(ds) > 1)
        return (f"{len(self.deliveries)} offsets delivered ({sum(len(d) for d in self.deliveries.values())} deliveries, "
                f"{redelivered} more than once), {len(self.finals)} finally acknowledged, {len(self.failed)} with an unknown "
                f"acknowledgement, by {sorted({w for ds in self.deliveries.values() for _, w, _, _ in ds})}")

    def problems(self, value_at: dict[int, str]) -> list[str]:
        out = [f"consumer error: {e}" for e in self.errors]
        for offset, value in sorted(value_at.items()):
            ds = self.deliveries.get(offset, [])
            if not ds:
                out.append(f"lost: offset {offset} ({value}) never delivered")
                continue
            if any(v != value for _, _, v, _ in ds):
                out.append(f"offset {offset}: delivered values {sorted({v for _, _, v, _ in ds})}, produced {value}")
            finals = self.finals.get(offset, [])
            if len(finals) > 1:
                out.append(f"offset {offset} ({value}): acknowledged finally twice {finals}: delivered again after its acknowledgement was answered")
            if finals:
                n_final = finals[0][3]
                later = [d for d in ds if d[3] > n_final]
                if later:
                    out.append(f"offset {offset} ({value}): delivered with counts {[d[3] for d in later]} after its final acknowledgement at {n_final}")
            counts = [n for _, _, _, n in ds]
            if max(counts) > LIMIT:
                out.append(f"offset {offset} ({value}): delivery count {max(counts)} above share.delivery.count.limit {LIMIT}")
            if not self.explicit:
                continue
            r = rule(value)
            if r == 3 and self.released.get(offset) and max(counts) < 2:
                out.append(f"offset {offset} ({value}): released at its first delivery, never delivered again")
            if r == 5 and offset not in self.failed and max(counts) != LIMIT:
                out.append(f"offset {offset} ({value}): released every time, delivered {max(counts)} times, not up to the limit {LIMIT}")
            kinds = {k for _, _, k, _ in finals}
            want = {7: {"R"}, 5: {"L"}}.get(r, {"A"})
            if finals and not kinds <= want:
                out.append(f"offset {offset} ({value}): final acknowledgements {kinds}, its rule is {want}")
        return out


class Producing:
    """Records r0, r1, ... (idempotent, acks=all) to partition 0, `rate` a second, from a
    thread; `value_at` maps each acknowledged offset to its value."""

    def __init__(self, bootstrap: str, topic: str):
        self.p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
        self.topic, self.next, self.value_at, self.failures = topic, 0, {}, []

    def _report(self, err, msg):
        if err is not None:
            self.failures.append(str(err))
        else:
            self.value_at[msg.offset()] = msg.value().decode()

    def send(self, n: int, rate: float = 200.0):
        for _ in range(n):
            self.p.produce(self.topic, f"r{self.next}".encode(), partition=0, on_delivery=self._report)
            self.next += 1
            self.p.poll(0)
            time.sleep(1 / rate)
        assert self.p.flush(BOUND_S) == 0
        assert not self.failures, self.failures[:5]


def set_group_configs(bootstrap: str, group: str):
    configs_tool(bootstrap, "--alter", "--entity-type", "groups", "--entity-name", group, "--add-config",
                 f"share.auto.offset.reset=earliest,share.delivery.count.limit={LIMIT},share.record.lock.duration.ms={LOCK_MS}")


def run_to_the_end(workers, events, lock, produced: Producing, explicit: bool) -> Judge:
    offsets = set(produced.value_at)

    def settled():
        j = Judge(events, lock, explicit)
        assert not j.errors, j.errors
        return j.settled(offsets, LOCK_MS / 1000 + 5) and j
    try:
        return wait_for("every record delivered and acknowledged, then quiet", settled, BOUND_S)
    finally:
        for wk in workers:
            wk.stop()


def wait_members(bootstrap: str, group: str, n: int):
    """Until `group` is Stable with `n` members (kafka-share-groups.sh --describe --state)."""
    def stable():
        out = share_groups_tool(bootstrap, "--describe", "--state", "--group", group)
        return re.search(rf"Stable\s+{n}\b", out) is not None
    wait_for(f"{n} members in {group}", stable, BOUND_S)


def wait_assigned(bootstrap: str, group: str, topic: str, n: int):
    """Until each of the `n` members of `group` holds `topic`'s partition
    (kafka-share-groups.sh --describe --members): a member that joins before the
    share-partition's state is initialized learns its assignment at a later heartbeat
    (seconds on), and one that starts fetching after a trickle ends could not take part."""
    def assigned():
        out = share_groups_tool(bootstrap, "--describe", "--members", "--group", group)
        rows = [line for line in out.splitlines() if line.startswith(group + " ")]
        return len(rows) == n and all(f"{topic}:" in row for row in rows) and out

    wait_for(f"{n} members of {group} holding {topic}", assigned, BOUND_S)


def dead_letters(bootstrap: str, topic: str, expected: int) -> dict[int, str]:
    """{source offset: copied value} of the dead letters in `topic`, read until `expected`
    distinct offsets came (or the bound) and a few quiet seconds passed."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{topic}", "enable.auto.commit": False})
    out: dict[int, str] = {}
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        deadline, last = time.monotonic() + BOUND_S, time.monotonic()
        while time.monotonic() < deadline and not (len(out) >= expected and time.monotonic() - last > 5):
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                h = {k: v.decode() for k, v in (m.headers() or [])}
                out[int(h["__dlq.errors.offset"])] = m.value().decode() if m.value() is not None else None
                last = time.monotonic()
        return out
    finally:
        c.close()


def delivered_count(events, lock) -> int:
    with lock:
        return len({e["d"] for _, _, e in events if "d" in e})


def test_java_share_consumers_explicit_and_implicit(broker_factory, topic_name):
    """One broker: three explicit consumers on one partition, then two implicit ones on
    another topic; the judge finds nothing on either."""
    b = share_broker(broker_factory)
    for mode in ("explicit", "implicit"):
        topic, group = f"{topic_name}-{mode}", f"sj-{mode}-{topic_name}"
        admin_create_topic(b.bootstrap, topic, 1)
        set_group_configs(b.bootstrap, group)
        events, lock = [], threading.Lock()
        workers = [ShareWorker(b.bootstrap, group, topic, mode, f"{mode}{i}", events, lock) for i in range(3 if mode == "explicit" else 2)]
        wait_members(b.bootstrap, group, len(workers))
        wait_assigned(b.bootstrap, group, topic, len(workers))
        produced = Producing(b.bootstrap, topic)
        produced.send(300, rate=100)
        judge = run_to_the_end(workers, events, lock, produced, mode == "explicit")
        print(mode, judge.summary())
        problems = judge.problems(produced.value_at)
        assert not problems, "\n".join(problems[:30])
        if mode == "explicit":
            # Several consumers took part (one partition is shared, not owned; the records
            # each releases go to the others). Implicit consumers need not: Kafka 4.4 may
            # hand a trickle of records to whichever fetch waits first, every time.
            assert len({who for ds in judge.deliveries.values() for _, who, _, _ in ds}) >= 2, "one consumer got every record"

            rejected = [o for o, v in produced.value_at.items() if rule(v) == 7]
            assert all(judge.finals.get(o) for o in rejected), "every rejected record's REJECT was answered"
            assert any(max(n for *_, n in judge.deliveries[o]) == LIMIT for o, v in produced.value_at.items() if rule(v) == 5)
            if not is_kafka():
                # Visible to an operator: every delivery was an acquisition, and the
                # consumers waiting through the trickle were woken in turn.
                metrics = scrape(b.admin_url)
                deliveries = sum(len(ds) for ds in judge.deliveries.values())
                assert metrics.total("shardlog_share_records_acquired_total") >= deliveries
                assert metrics.total("shardlog_share_fetch_wakeups_total", by="turn") > 0


def test_java_share_consumers_across_kill9_of_leader_and_share_coordinator(tmp_path_factory, topic_name):
    """Three nodes, RF 3, min.insync.replicas 2, three explicit consumers while records keep
    coming: kill -9 the partition's leader (restarted), then the broker leading the
    share-partition's `__share_group_state` partition (restarted). Nothing is lost, no
    record is delivered again after its final acknowledgement was answered, and each
    acknowledgement type keeps its meaning across both. The group has a dead-letter queue
    (KIP-1191) led by another broker than the partition at first: every record whose
    REJECT, or last RELEASE, was answered has its dead letter there (at least once: one
    may be written twice across a kill, as in Kafka)."""
    if is_kafka():
        gen = conftest.running_kafka_cluster(tmp_path_factory, "share-java-kill", dict(SETTINGS))
    else:
        gen = conftest.running_cluster(tmp_path_factory, "share-java-kill", extra_args=shardlog_flags(SETTINGS))
    cluster = next(gen)
    workers = []
    try:
        wait_brokers(cluster)
        node = {nd.node_id: nd for nd in cluster.nodes}
        bs = ",".join(nd.bootstrap for nd in cluster.nodes)
        a = AdminClient({"bootstrap.servers": bs})
        a.create_topics([NewTopic(topic_name, 1, 3, config={"min.insync.replicas": "2"})], operation_timeout=30)[topic_name].result(BOUND_S)
        leader = wait_for("a leader", lambda: (l := leader_of(bs, topic_name, 0)) >= 0 and l, BOUND_S)
        tid = topic_id_of(bs, topic_name)
        group = f"sjk-{topic_name}"
        set_group_configs(bs, group)
        dlq = f"dlq.{topic_name}"
        others = [n for n in sorted(node) if n != leader]
        a.create_topics([NewTopic(dlq, 1, replica_assignment=[[others[0], others[1], leader]], config={"errors.deadletterqueue.group.enable": "true"})],
                        operation_timeout=30)[dlq].result(BOUND_S)
        configs_tool(bs, "--alter", "--entity-type", "groups", "--entity-name", group, "--add-config",
                     f"errors.deadletterqueue.topic.name={dlq},errors.deadletterqueue.copy.record.enable=true")
        events, lock = [], threading.Lock()
        workers = [ShareWorker(bs, group, topic_name, "explicit", f"w{i}", events, lock) for i in range(3)]
        wait_members(bs, group, 3)
        wait_assigned(bs, group, topic_name, 3)
        produced = Producing(bs, topic_name)
        produced.send(200)
        wait_for("deliveries", lambda: delivered_count(events, lock) >= 100, BOUND_S)

        node[leader].kill9()
        produced.send(200)
        wait_for("a new leader", lambda: (l := leader_of(bs, topic_name, 0)) >= 0 and l != leader and l, BOUND_S)
        node[leader].start()
        produced.send(200)
        wait_for("deliveries after the leader's kill", lambda: delivered_count(events, lock) >= 400, BOUND_S)

        # The share coordinator of the share-partition: the leader of its state partition
        # (the state topic exists once the group initialized the share-partition).
        state = share_state_partition(group, tid, 0)
        coordinator = wait_for("__share_group_state's leader", lambda: (l := leader_of(bs, "__share_group_state", state)) >= 0 and l, BOUND_S)
        wait_brokers(cluster)
        node[coordinator].kill9()
        produced.send(200)
        node[coordinator].start()
        produced.send(200)
        judge = run_to_the_end(workers, events, lock, produced, True)
        print(judge.summary())
        problems = judge.problems(produced.value_at)
        assert not problems, "\n".join(problems[:30])
        assert len(produced.value_at) == 1000
        dead = {o for o, v in produced.value_at.items() if rule(v) in (5, 7) and any(k in "RL" for _, _, k, _ in judge.finals.get(o, []))}
        letters = dead_letters(bs, dlq, len(dead))
        missing = sorted(dead - set(letters))
        assert not missing, f"no dead letter for {len(missing)} records whose final acknowledgement was answered: {missing[:20]}"
        wrong = sorted(o for o, v in letters.items() if v != produced.value_at.get(o))
        assert not wrong, f"dead letters whose copy is not the record: {wrong[:20]}"
    finally:
        for wk in workers:
            wk.stop()
        gen.close()
