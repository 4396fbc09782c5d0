"""Issue 12, section 9: replication under real faults, on 3 real broker processes
(tests/integration/cluster_harness.py; with SHARDLOG_TEST_TARGET=kafka the same tests run
on 3 Apache Kafka 4.1 nodes, kafka_cluster.py, which is how the tests themselves are
checked). Every topic: replication factor 3, min.insync.replicas=2, acks=all.

- kill -9 of a partition leader every 10 s (5 times), restarted each time, while an
  idempotent confluent-kafka producer writes >= 200k records: every acknowledged record is
  read back exactly once at the offset it was acknowledged with, offsets contiguous, no
  duplicates; prints attempted / acknowledged / lost / duplicated and the longest
  unavailability. Counts and kills come from the environment (scripts/replication_soak.sh soaks);
- SIGSTOP of a leader for 15 s (past the broker session timeout) with a raw acks=-1 Produce
  sent to it while stopped: the answer after SIGCONT is an error, never success; a new
  leader took writes meanwhile; the old leader rejoins the ISR and, leader again (preferred
  election), serves exactly the acknowledged records — its divergent tail is gone;
- the leader cut off by a network namespace (veth pair, as test_cluster_netns.py; skipped
  with the reason where the machine does not allow it): a new leader is elected, a write
  sent to the cut-off leader is never acknowledged, every write acknowledged before the
  cut survives, and after healing the old leader truncates and rejoins;
- kill -9 of the broker hosting a group's coordinator while a group of 2 (classic and
  KIP-848 protocols) consumes: every record processed, the committed offsets the new
  coordinator answers are never behind the last commit acknowledged before the kill, and
  a new member resumes exactly at the committed offsets;
- one flipped byte in a follower's sealed segment while it is down: detected at restart,
  truncated, refetched from the leader (the corrupted bytes are in no segment once it is
  back in the ISR), and, made leader, it serves every record unchanged.

The accounting (lost / duplicated / gaps / unavailability) lives in replication_check.py
and is unit-tested at the top of this file on synthetic data.
No timed assertions: every wait polls with a generous deadline; times are printed only.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import (ConsumerGroupTopicPartitions, Consumer, ElectionType, KafkaError, KafkaException,
                             Producer, TopicPartition)
from confluent_kafka.admin import AdminClient, NewTopic

import conftest
from conftest import wait_for
from kafkawire import connect, parse_produce_v8, produce_v8_request, record_batch, recv_frame
from replication_check import check_log, longest_ack_gap, percentile, unavailability_after_kills

HERE = Path(__file__).resolve().parent
DEADLINE_S = 120  # a bound for every wait, never an assertion about speed

# Broker settings for every cluster here, as Kafka keys; shardlog gets them as flags
# (`--replica-lag-time-max-ms 4000`, ...), Kafka in server.properties.
# - replica.lag.time.max.ms: a follower that stops fetching leaves the ISR after 4 s
#   (Kafka: 30 s), so a dead follower does not hold acks=all up for long;
# - broker.session.timeout.ms: a silent broker is fenced after 3 s (shardlog's default,
#   Kafka's is 9 s): the SIGSTOP below (15 s) outlasts it;
# - offsets.topic.replication.factor: __consumer_offsets on all 3 brokers (also the
#   default, min(3, brokers), made explicit);
# - auto.leader.rebalance.enable=false: leadership moves only when a test moves it.
SETTINGS = {
    "replica.lag.time.max.ms": "4000",
    "broker.session.timeout.ms": "3000",
    "offsets.topic.replication.factor": "3",
    "auto.leader.rebalance.enable": "false",
}
# Kafka only: the recovery-point checkpoint is written every 60 s by default; a larger
# interval keeps every segment of a test's young log above the recovery point, so
# Kafka's restart verifies them (shardlog verifies sealed segments after any unclean
# shutdown).
KAFKA_ONLY = {"log.flush.offset.checkpoint.interval.ms": "3600000"}

TOPIC_CONFIG = {"min.insync.replicas": "2"}

# Test 1, raised by scripts/replication_soak.sh: records written (at least; the producer keeps
# going at the same pace until the last kill), leader kills, seconds between kills.
CHAOS_RECORDS = int(os.environ.get("SHARDLOG_CHAOS_RECORDS", "200000"))
CHAOS_KILLS = int(os.environ.get("SHARDLOG_CHAOS_KILLS", "5"))
CHAOS_INTERVAL_S = float(os.environ.get("SHARDLOG_CHAOS_INTERVAL_S", "10"))
# How long a restarted broker may take to be back in every ISR before the next kill
# goes ahead anyway (a bound on the wait, not a check).
CHAOS_REJOIN_WAIT_S = float(os.environ.get("SHARDLOG_CHAOS_REJOIN_WAIT_S", "60"))
CHAOS_PARTITIONS = 6
# Test 2: how long the leader stays stopped.
SIGSTOP_S = float(os.environ.get("SHARDLOG_SIGSTOP_S", "15"))
# Test 4: records the group consumes.
GROUP_RECORDS = int(os.environ.get("SHARDLOG_GROUP_RECORDS", "30000"))

# Produce error codes (Kafka's Errors.java).
NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT = 6, 7
NOT_ENOUGH_REPLICAS, NOT_ENOUGH_REPLICAS_AFTER_APPEND = 19, 20
# What a deposed leader may answer an acks=all write with: it is not the leader (any
# more), or the replicas never confirmed the write. Never 0.
DEPOSED_LEADER_ANSWERS = {NOT_LEADER_OR_FOLLOWER: "NOT_LEADER_OR_FOLLOWER", REQUEST_TIMED_OUT: "REQUEST_TIMED_OUT",
                          NOT_ENOUGH_REPLICAS: "NOT_ENOUGH_REPLICAS",
                          NOT_ENOUGH_REPLICAS_AFTER_APPEND: "NOT_ENOUGH_REPLICAS_AFTER_APPEND"}


# == the accounting, on synthetic data ===================================================

def test_checker_counts_nothing_wrong_in_a_clean_log():
    log = {0: [(0, "a"), (1, "b")], 1: [(0, "c")]}
    acked = [(0, 0, "a"), (0, 1, "b"), (1, 0, "c")]
    r = check_log(["a", "b", "c", "d"], acked, log)
    assert r.ok, r.details()
    assert (r.attempted, r.acknowledged, r.in_log, len(r.lost), len(r.duplicated)) == (4, 3, 3, 0, 0)


def test_checker_finds_lost_moved_duplicated_gaps_and_double_acks():
    log = {0: [(0, "a"), (1, "b"), (2, "b"), (4, "x")],  # b twice, offset 3 missing, x never sent
           1: [(0, "c"), (1, "d")]}
    acked = [(0, 0, "a"),
             (0, 3, "e"),   # lost: not in the log at all
             (1, 0, "d"),   # lost at its offset, though present elsewhere (moved)
             (1, 1, "d"),
             (1, 1, "f")]   # a second record acknowledged at 1/1 (and lost)
    r = check_log(["a", "b", "c", "d", "e", "f"], acked, log)
    assert not r.ok
    assert r.lost == [(0, 3, "e"), (1, 0, "d"), (1, 1, "f")]
    assert r.moved == 1
    assert r.duplicated == ["b"]
    assert r.gaps == ["partition 0: offset 4 where 3 was expected"]
    assert r.double_acked == [(1, 1)]
    assert r.unknown == 1
    assert "lost=3" in r.summary() and "duplicated=1" in r.summary()


def test_checker_offsets_must_start_at_the_log_start():
    assert check_log(1, [], {0: [(1, "a")]}).gaps == ["partition 0: offset 1 where 0 was expected"]
    assert check_log(1, [], {0: [(1, "a")]}, log_start={0: 1}).ok
    # Only the count of attempts known: unknown values are not judged.
    assert check_log(0, [], {0: [(0, "zz")]}).ok


def test_checker_unavailability():
    acks = {0: [1.0, 2.0, 9.0, 9.5], 1: [1.5, 3.0, 3.5], 2: []}
    assert longest_ack_gap(acks) == (7.0, 0)
    assert longest_ack_gap({0: [5.0]}) == (0.0, None)
    # Kill at 2.5: partition 1 acks again at 3.0, partition 0 only at 9.0.
    assert unavailability_after_kills([2.5], acks, [0, 1]) == [6.5]
    assert unavailability_after_kills([2.5, 9.2], acks, [0, 1]) == [6.5, None]  # partition 1 silent after 9.2
    assert unavailability_after_kills([0.0], acks, [0, 1, 2]) == [None]  # partition 2 never acknowledged
    assert percentile([3.0, 1.0, None, 2.0], 50) == 2.0
    assert percentile([3.0, 1.0, 2.0], 99) == 3.0
    assert percentile([None], 50) is None


# == clusters ============================================================================

def shardlog_flags(settings: dict[str, str]) -> list[str]:
    """Kafka key → shardlog flag: `replica.lag.time.max.ms` → `--replica-lag-time-max-ms`."""
    out = []
    for k, v in settings.items():
        out += ["--" + k.replace(".", "-"), v]
    return out


def start_cluster(tmp_path_factory, name: str, **kw):
    """A started 3-node cluster whose brokers have all registered (a topic with 3
    replicas needs them), for a fixture to yield from; closed after."""
    if conftest.is_kafka():
        gen = conftest.running_kafka_cluster(tmp_path_factory, name, {**SETTINGS, **KAFKA_ONLY}, **kw)
    else:
        gen = conftest.running_cluster(tmp_path_factory, name, extra_args=shardlog_flags(SETTINGS), **kw)
    c = next(gen)
    try:
        for nd in c.nodes:
            wait_for(f"node {nd.node_id} lists all 3 brokers",
                     lambda nd=nd: set(admin(nd).list_topics(timeout=10).brokers) == {1, 2, 3})
        yield c
    finally:
        gen.close()  # stops the nodes (the inner generator's finally)


@pytest.fixture
def cluster(tmp_path_factory):
    """A fresh 3-node cluster per test: every test here kills, stops or cuts off nodes."""
    yield from start_cluster(tmp_path_factory, "repl-faults")


def active_controller_id(cluster) -> int | None:
    """The quorum leader's node id (shardlog logs it; None on Kafka, or unknown)."""
    got = cluster.active_controller()
    return None if got is None else got[0]


# == client helpers ======================================================================

def admin(nodes) -> AdminClient:
    nodes = nodes if isinstance(nodes, (list, tuple)) else [nodes]
    return AdminClient({"bootstrap.servers": ",".join(nd.bootstrap for nd in nodes)})


def bootstrap_of(nodes) -> str:
    return ",".join(nd.bootstrap for nd in nodes)


def create_topic(via, name: str, partitions: int | None = None, assignment: list[list[int]] | None = None,
                 config: dict[str, str] | None = None) -> None:
    a = admin(via)  # kept referenced until the future is done
    cfg = {**TOPIC_CONFIG, **(config or {})}
    if assignment is not None:
        t = NewTopic(name, len(assignment), replica_assignment=assignment, config=cfg)
    else:
        t = NewTopic(name, partitions, 3, config=cfg)
    a.create_topics([t], operation_timeout=30)[name].result(timeout=60)


def partition_state(via, topic: str) -> dict[int, tuple[int, list[int], list[int]]] | None:
    """partition → (leader, replicas, sorted ISR) as `via`'s Metadata says; None if unknown."""
    md = admin(via).list_topics(topic, timeout=10)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        return None
    return {p.id: (p.leader, list(p.replicas), sorted(p.isrs)) for p in t.partitions.values()}


def fully_in_sync(via, topic: str, partitions: int) -> dict | None:
    """The state when every partition has a leader and all 3 replicas in its ISR."""
    s = partition_state(via, topic)
    if s is None or len(s) != partitions:
        return None
    ok = all(leader >= 0 and len(isr) == 3 for leader, _, isr in s.values())
    return s if ok else None


def wait_in_sync(via, topic: str, partitions: int, deadline_s: float = DEADLINE_S) -> dict:
    return wait_for(f"{topic}: every partition led with an ISR of 3 (as node {via.node_id} says)",
                    lambda: fully_in_sync(via, topic, partitions), deadline_s=deadline_s)


def wait_leader(via, topic: str, partition: int, want=None, not_id: int | None = None,
                deadline_s: float = DEADLINE_S) -> int:
    """Waits until `via` names a live leader for the partition (`want` if given, anything
    but `not_id` otherwise); returns it."""
    def check():
        s = partition_state(via, topic)
        if s is None or partition not in s:
            return None
        leader = s[partition][0]
        if leader < 0 or leader == not_id or (want is not None and leader != want):
            return None
        return leader
    return wait_for(f"{topic}-{partition}: leader {want if want is not None else f'other than {not_id}'} "
                    f"(as node {via.node_id} says)", check, deadline_s=deadline_s)


def poll_until(check, bound_s: float) -> bool:
    """Like wait_for, but a bound, not a failure: True if `check` held within `bound_s`."""
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        try:
            if check():
                return True
        except Exception:
            pass
        time.sleep(0.2)
    return False


def producer(nodes, **conf) -> Producer:
    return Producer({"bootstrap.servers": bootstrap_of(nodes), "acks": "all", "enable.idempotence": True,
                     "linger.ms": 5, "message.timeout.ms": 120000, **conf})


def produce_acked(nodes, topic: str, values: list[bytes], partition: int | None = None,
                  conf: dict | None = None) -> list[tuple[int, int, bytes]]:
    """Writes `values` (acks=all, idempotent; `conf`: more producer settings) and requires
    every one acknowledged: (partition, offset, value) of each, in acknowledgement order."""
    acked: list[tuple[int, int, bytes]] = []
    errors: list[str] = []

    def report(err, msg):
        if err is None:
            acked.append((msg.partition(), msg.offset(), msg.value()))
        else:
            errors.append(f"{msg.value()[:20]!r}: {err}")

    p = producer(nodes, **(conf or {}))
    for v in values:
        while True:
            try:
                if partition is None:
                    p.produce(topic, value=v, on_delivery=report)
                else:
                    p.produce(topic, value=v, partition=partition, on_delivery=report)
                break
            except BufferError:
                p.poll(0.1)
        p.poll(0)
    assert p.flush(180) == 0, "every record was answered"
    assert errors == [], f"acks=all writes with 2+ replicas in sync: {errors[:5]}"
    assert len(acked) == len(values)
    return acked


def acked_ends(acked) -> dict[int, int]:
    """partition → 1 + the highest offset acknowledged there."""
    out: dict[int, int] = {}
    for part, off, _ in acked:
        out[part] = max(out.get(part, 0), off + 1)
    return out


def read_partitions(nodes, topic: str, partitions: list[int], acked=(), deadline_s: float = 300) -> dict[int, list[tuple[int, bytes]]]:
    """Every record of each partition from offset 0 up to its high watermark:
    partition → [(offset, value)] in the order read. The high watermark is first awaited
    up to the highest acknowledged offset (a new leader's may trail briefly; one that never
    gets there has lost records). CRCs are checked (a corrupted batch is an error, not a
    value)."""
    c = Consumer({"bootstrap.servers": bootstrap_of(nodes), "group.id": f"rd-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "check.crcs": True, "auto.offset.reset": "error"})
    try:
        ends = acked_ends(acked)
        high = {}
        for p in partitions:
            seen = [None]

            def reached(p=p):
                seen[0] = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                return seen[0] >= ends.get(p, 0)
            if not poll_until(reached, DEADLINE_S):
                pytest.fail(f"{topic}-{p}: the high watermark stays at {seen[0]}, below {ends.get(p, 0)}, the end of "
                            f"the acknowledged records: they are lost, or never replicated again")
            high[p] = seen[0]
        c.assign([TopicPartition(topic, p, 0) for p in partitions])
        got: dict[int, list[tuple[int, bytes]]] = {p: [] for p in partitions}
        pending = {p for p in partitions if high[p] > 0}
        deadline = time.monotonic() + deadline_s
        while pending:
            assert time.monotonic() < deadline, f"{topic}: partitions {sorted(pending)} not read up to {high}"
            for m in c.consume(num_messages=10_000, timeout=1.0):
                if m.error():
                    raise KafkaException(m.error())
                part = m.partition()
                got[part].append((m.offset(), m.value()))
                if m.offset() + 1 >= high[part]:
                    pending.discard(part)
        return got
    finally:
        c.close()


def read_one(nodes, topic: str, partition: int, offset: int) -> bytes:
    """The value of the record at `offset` (waits until it is below the high watermark)."""
    c = Consumer({"bootstrap.servers": bootstrap_of(nodes), "group.id": f"rd-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "check.crcs": True, "auto.offset.reset": "error"})
    try:
        c.assign([TopicPartition(topic, partition, offset)])

        def read():
            for m in c.consume(num_messages=1, timeout=1.0):
                if m.error():
                    raise KafkaException(m.error())
                assert m.offset() == offset, f"{topic}-{partition}: asked for {offset}, got {m.offset()}"
                return [m.value()]
            return None
        return wait_for(f"{topic}-{partition} offset {offset} readable", read)[0]
    finally:
        c.close()


def elect_preferred(cluster, topic: str, partition: int, want: int) -> None:
    """Moves leadership to the preferred replica `want` (AdminClient ElectLeaders
    PREFERRED), retrying until every live node's view agrees."""
    live = [nd for nd in cluster.nodes if nd.alive()]

    def moved():
        a = admin(live)
        got = a.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, partition)]).result(timeout=60)
        for _, err in got.items():
            if err is not None and err.code() != KafkaError.ELECTION_NOT_NEEDED:
                return None  # e.g. PREFERRED_LEADER_NOT_AVAILABLE while it catches up
        return partition_state(live[0], topic)[partition][0] == want
    wait_for(f"{topic}-{partition}: preferred leader {want} elected", moved)
    for nd in live:
        wait_leader(nd, topic, partition, want=want)


# == 1. kill -9 of a leader every 10 s ===================================================

class AckLog:
    """What the producer's delivery reports said (called on the producer's thread)."""

    def __init__(self, partitions: int):
        self.acked: list[tuple[int, int, int]] = []  # (partition, offset, sequence number)
        self.ack_times: dict[int, list[float]] = {p: [] for p in range(partitions)}
        self.errors: Counter = Counter()
        self.fatal: str | None = None
        self.attempted = 0

    def report(self, err, msg):
        if err is None:
            self.acked.append((msg.partition(), msg.offset(), seq_of(msg.value())))
            self.ack_times[msg.partition()].append(time.monotonic())
        else:
            self.errors[err.name()] += 1
            if err.fatal():
                self.fatal = str(err)


def chaos_value(seq: int) -> bytes:
    return b"%010d-" % seq + b"r" * 21  # 32 bytes, the sequence number first


def seq_of(value: bytes) -> int:
    return int(value[:10])


def produce_paced(p: Producer, topic: str, log: AckLog, min_records: int, rate: float,
                  keep_going: threading.Event, abort: threading.Event, done: threading.Event) -> None:
    """Writes sequence numbers 0.. round-robin over the partitions at `rate` records/s
    (catching up after a stall), until `min_records` are written and `keep_going` is
    clear; then waits for every answer. Runs on its own thread; `abort` (the test failed)
    stops it at once."""
    try:
        seq = 0
        t0 = time.monotonic()
        cap = 20 * max(min_records, 1)  # only if kills take far longer than planned
        while (seq < min_records or keep_going.is_set()) and seq < cap and log.fatal is None \
                and not abort.is_set():
            due = t0 + seq / rate
            now = time.monotonic()
            if due > now:
                p.poll(min(due - now, 0.05))
                continue
            try:
                p.produce(topic, value=chaos_value(seq), partition=seq % CHAOS_PARTITIONS, on_delivery=log.report)
            except BufferError:  # the local queue is full (a partition waits for its leader)
                p.poll(0.05)
                continue
            seq += 1
            log.attempted = seq
            if seq % 256 == 0:
                p.poll(0)
        if not abort.is_set():
            p.flush(400)  # message.timeout.ms is 300 s: every record is answered by then
    finally:
        done.set()


def test_kill9_leader_every_10s_loses_nothing(cluster):
    nodes = cluster.nodes
    topic = f"chaos-{uuid.uuid4().hex[:8]}"
    create_topic(nodes[0], topic, CHAOS_PARTITIONS)
    wait_in_sync(nodes[0], topic, CHAOS_PARTITIONS)

    log = AckLog(CHAOS_PARTITIONS)
    p = producer(nodes, **{"linger.ms": 20, "message.timeout.ms": 300000})
    keep_going, abort, done = threading.Event(), threading.Event(), threading.Event()
    keep_going.set()
    rate = CHAOS_RECORDS / max(CHAOS_KILLS * CHAOS_INTERVAL_S, 1.0)
    worker = threading.Thread(target=produce_paced, name="chaos-producer",
                              args=(p, topic, log, CHAOS_RECORDS, rate, keep_going, abort, done), daemon=True)
    worker.start()

    kill_times: list[float] = []
    victims: list[int] = []
    rejoin_s: list[float | None] = []
    next_kill = time.monotonic() + CHAOS_INTERVAL_S
    try:
        for k in range(CHAOS_KILLS):
            while time.monotonic() < next_kill:
                time.sleep(0.1)
                assert log.fatal is None, f"the idempotent producer hit a fatal error: {log.fatal}"
            part = k % CHAOS_PARTITIONS
            leader = wait_leader(nodes[(k + 1) % 3], topic, part)
            victim = cluster.node(leader)
            victims.append(leader)
            kill_times.append(time.monotonic())
            victim.kill9()
            next_kill = kill_times[-1] + CHAOS_INTERVAL_S
            other = next(nd for nd in nodes if nd is not victim)
            # Restarted once the cluster has noticed (its partition led elsewhere), so the
            # ISR seen below is the rejoined one, not a view from before the kill.
            wait_leader(other, topic, part, not_id=leader)
            victim.start()
            cluster.wait_ready(timeout_s=DEADLINE_S, nodes=[victim])
            back = poll_until(lambda: fully_in_sync(other, topic, CHAOS_PARTITIONS), CHAOS_REJOIN_WAIT_S)
            rejoin_s.append(time.monotonic() - kill_times[-1] if back else None)
    except BaseException:
        abort.set()
        raise
    finally:
        keep_going.clear()
    assert done.wait(900 + CHAOS_RECORDS / 500), "the producer finished: every record answered"
    worker.join(60)
    assert log.fatal is None, f"the idempotent producer hit a fatal error: {log.fatal}"
    assert len(p) == 0, f"{len(p)} records never answered"

    # What was acknowledged is there, once, where it was acknowledged (read from the
    # leaders, whatever the ISRs look like by now).
    got = read_partitions(nodes, topic, list(range(CHAOS_PARTITIONS)), acked=log.acked)
    in_log = {part: [(off, seq_of(v)) for off, v in records] for part, records in got.items()}
    res = check_log(range(log.attempted), log.acked, in_log)

    gap, gap_part = longest_ack_gap(log.ack_times)
    after_kill = unavailability_after_kills(kill_times, log.ack_times, range(CHAOS_PARTITIONS))
    fmt = lambda v: "never" if v is None else f"{v:.2f} s"
    print(f"\nchaos: {CHAOS_KILLS} leader kills (brokers {victims}) every {CHAOS_INTERVAL_S:g} s, "
          f"{CHAOS_PARTITIONS} partitions, RF=3, min.insync.replicas=2, acks=all, idempotent")
    print(f"chaos: {res.summary()}")
    print(f"chaos: not acknowledged (delivery errors): {dict(log.errors) or 'none'}")
    print(f"chaos: longest gap between two acknowledgements of one partition: {gap:.2f} s (partition {gap_part})")
    print(f"chaos: from each kill until every partition acknowledged again: {[fmt(v) for v in after_kill]} "
          f"(p50 {fmt(percentile(after_kill, 50))}, max {fmt(percentile(after_kill, 100))})")
    print(f"chaos: from each kill until the restarted broker was in every ISR again: {[fmt(v) for v in rejoin_s]}")
    assert res.acknowledged > 0
    assert res.ok, res.details()

    # Liveness after the chaos: every broker back in every ISR, and every partition takes
    # an acks=all write again, which reads back where it was acknowledged.
    wait_in_sync(nodes[0], topic, CHAOS_PARTITIONS, deadline_s=180)
    for part in range(CHAOS_PARTITIONS):
        [(_, off, value)] = produce_acked(nodes, topic, [chaos_value(log.attempted + part)], partition=part)
        assert off == len(in_log[part]), f"partition {part}: the next write lands right after what was read"
        assert read_one(nodes, topic, part, off) == value


# == 2. SIGSTOP of a leader ==============================================================

def send_produce(sock, topic: str, partition: int, value: bytes, timeout_ms: int) -> None:
    batch = record_batch([(None, value, [])], base_ts=int(time.time() * 1000))
    sock.sendall(produce_v8_request(17, topic, partition, batch, acks=-1, timeout_ms=timeout_ms))


def produce_answer(sock, topic: str, partition: int) -> int:
    _, out = parse_produce_v8(recv_frame(sock))
    return out[(topic, partition)]["error_code"]


def assert_log_is_exactly(records: dict[int, list[tuple[int, bytes]]], acked: list[tuple[int, int, bytes]],
                          never: bytes) -> None:
    values = [v for recs in records.values() for _, v in recs]
    assert never not in values, f"the write the deposed leader never acknowledged is in the log: {never!r}"
    res = check_log([v for _, _, v in acked], acked, records)
    assert res.ok, res.details()
    assert res.in_log == len(acked), f"exactly the acknowledged records: {res.summary()}"


def test_sigstop_leader_never_acknowledges_after_losing_leadership(cluster):
    nodes = cluster.nodes
    active = active_controller_id(cluster)
    # The stopped leader is not the quorum leader (the quorum would move first, the
    # partition second: slower, and another test's subject).
    old_id = next(nd.node_id for nd in reversed(nodes) if nd.node_id != active)
    old = cluster.node(old_id)
    others = [nd for nd in nodes if nd is not old]
    topic = f"sigstop-{uuid.uuid4().hex[:8]}"
    create_topic(nodes[0], topic, assignment=[[old_id, *(nd.node_id for nd in others)]])
    wait_leader(others[0], topic, 0, want=old_id)
    wait_in_sync(others[0], topic, 1)
    acked = produce_acked(nodes, topic, [b"before-%d" % i for i in range(500)], partition=0)
    wait_in_sync(others[0], topic, 1)

    never = b"written-while-stopped"
    sock = connect(old.bootstrap, timeout_s=DEADLINE_S)  # connected while it runs; the kernel buffers the rest
    try:
        old.pause()
        stopped_at = time.monotonic()
        try:
            send_produce(sock, topic, 0, never, timeout_ms=30000)
            new_id = wait_leader(others[0], topic, 0, not_id=old_id)
            assert new_id in {nd.node_id for nd in others}
            # The new leader takes acks=all writes (its ISR: itself and the other follower).
            acked += produce_acked(others, topic, [b"during-%d" % i for i in range(500)], partition=0)
            while time.monotonic() < stopped_at + SIGSTOP_S:
                time.sleep(0.1)
            assert old.alive(), "a stopped process is still there"
        finally:
            old.resume()
        code = produce_answer(sock, topic, 0)
    finally:
        sock.close()
    print(f"\nsigstop: the deposed leader answered the write sent while it was stopped with error code {code} "
          f"({DEPOSED_LEADER_ANSWERS.get(code, 'unexpected')})")
    assert code != 0, "a deposed leader acknowledged a write"
    assert code in DEPOSED_LEADER_ANSWERS, f"error code {code}: expected one of {DEPOSED_LEADER_ANSWERS}"

    # It follows the new leader, truncates its divergent tail and rejoins the ISR.
    wait_in_sync(others[0], topic, 1)
    acked += produce_acked(nodes, topic, [b"after-%d" % i for i in range(100)], partition=0)
    elect_preferred(cluster, topic, 0, want=old_id)
    assert_log_is_exactly(read_partitions([old], topic, [0], acked=acked), acked, never)


# == 3. the leader cut off by a network namespace ========================================

NS_PRODUCE = """
import sys, time
sys.path.insert(0, sys.argv[1])
from kafkawire import connect, parse_produce_v8, produce_v8_request, record_batch, recv_frame
bootstrap, topic, value, timeout_ms = sys.argv[2], sys.argv[3], sys.argv[4].encode(), int(sys.argv[5])
s = connect(bootstrap, timeout_s=120)
b = record_batch([(None, value, [])], base_ts=int(time.time() * 1000))
s.sendall(produce_v8_request(23, topic, 0, b, acks=-1, timeout_ms=timeout_ms))
_, out = parse_produce_v8(recv_frame(s))
print(out[(topic, 0)]["error_code"])
"""


@pytest.fixture
def netns_link():
    import test_cluster_netns as netns  # its Link and skip rule: one place knows veth pairs
    netns.skip_unless_netns()
    lk = netns.Link()
    try:
        lk.create()
        yield lk
    finally:
        lk.remove()


@pytest.fixture
def netns_cluster(tmp_path_factory, netns_link):
    """Nodes 1 and 2 in the root namespace, node 3 behind the veth pair."""
    lk = netns_link
    yield from start_cluster(tmp_path_factory, "repl-netns", hosts=[lk.root_ip, lk.root_ip, lk.ns_ip],
                             prefixes=[None, None, lk.prefix()])


def test_leader_cut_off_by_network_namespace(netns_cluster, netns_link):
    cluster, link = netns_cluster, netns_link
    cut_off = cluster.node(3)
    survivors = [cluster.node(1), cluster.node(2)]
    topic = f"netns-{uuid.uuid4().hex[:8]}"
    create_topic(survivors[0], topic, assignment=[[3, 1, 2]])
    wait_leader(survivors[0], topic, 0, want=3)
    wait_in_sync(survivors[0], topic, 1)
    acked = produce_acked(cluster.nodes, topic, [b"before-%d" % i for i in range(500)], partition=0)
    wait_in_sync(survivors[0], topic, 1)

    link.cut()
    never = "written-while-cut-off"
    # A client inside the namespace still reaches node 3, which still thinks it leads.
    ns_client = subprocess.Popen([*link.prefix(), sys.executable, "-c", NS_PRODUCE, str(HERE), cut_off.bootstrap,
                                  topic, never, "10000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        new_id = wait_leader(survivors[0], topic, 0, not_id=3)
        assert new_id in (1, 2)
        assert cut_off.alive(), "the cut-off node keeps running"
        acked += produce_acked(survivors, topic, [b"during-%d" % i for i in range(500)], partition=0)
        out, err = ns_client.communicate(timeout=180)
    finally:
        if ns_client.poll() is None:
            ns_client.kill()
            ns_client.wait()
    assert ns_client.returncode == 0, f"the client in the namespace failed: {err[-2000:]}"
    code = int(out.strip().splitlines()[-1])
    print(f"\nnetns: the cut-off leader answered the write sent to it with error code {code} "
          f"({DEPOSED_LEADER_ANSWERS.get(code, 'unexpected')})")
    assert code != 0, "a leader cut off from the cluster acknowledged an acks=all write"
    assert code in DEPOSED_LEADER_ANSWERS, f"error code {code}: expected one of {DEPOSED_LEADER_ANSWERS}"

    link.heal()
    # Back: it follows the new leader, truncates what it appended while cut off, rejoins.
    wait_in_sync(survivors[0], topic, 1, deadline_s=180)
    acked += produce_acked(cluster.nodes, topic, [b"after-%d" % i for i in range(100)], partition=0)
    elect_preferred(cluster, topic, 0, want=3)
    assert_log_is_exactly(read_partitions([cut_off], topic, [0], acked=acked), acked, never.encode())


# == 4. the coordinator's broker killed during group consumption ========================

class Group:
    """Two consumers of one group on their own threads: what they processed and every
    commit the coordinator acknowledged, with when."""

    def __init__(self, bootstrap: str, group: str, topic: str, protocol: str):
        self.bootstrap, self.group, self.topic, self.protocol = bootstrap, group, topic, protocol
        self.processed: Counter = Counter()
        self.commits: list[tuple[float, dict[int, int]]] = []  # (acknowledged at, {partition: offset})
        self.commit_errors: Counter = Counter()
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.run, name=f"group-{i}", daemon=True) for i in range(2)]

    def config(self) -> dict:
        conf = {"bootstrap.servers": self.bootstrap, "group.id": self.group, "enable.auto.commit": False,
                "auto.offset.reset": "earliest", "group.protocol": self.protocol}
        if self.protocol == "classic":
            conf.update({"session.timeout.ms": 10000, "heartbeat.interval.ms": 1000})
        return conf

    def commit(self, c: Consumer) -> bool:
        try:
            done = c.commit(asynchronous=False)
        except KafkaException as e:
            if e.args[0].code() != KafkaError._NO_OFFSET:  # nothing new to commit
                with self.lock:
                    self.commit_errors[e.args[0].name()] += 1
            return False
        at = time.monotonic()
        with self.lock:
            self.commits.append((at, {tp.partition: tp.offset for tp in done or [] if tp.error is None and tp.offset >= 0}))
        return True

    def run(self) -> None:
        try:
            c = Consumer(self.config())
            c.subscribe([self.topic])
            last_commit = time.monotonic()
            while not self.stop.is_set():
                msgs = c.consume(num_messages=100, timeout=0.5)
                got = [m.value() for m in msgs if m.error() is None]
                if got:
                    with self.lock:
                        self.processed.update(got)
                    time.sleep(0.05)  # a consumer that does some work: consumption spans the kill
                # After each batch, and every second while idle (a commit refused during
                # the failover is made good by the next).
                if got or time.monotonic() - last_commit > 1.0:
                    self.commit(c)
                    last_commit = time.monotonic()
            c.close()
        except Exception as e:  # reported by the test
            self.errors.append(repr(e))

    def count(self) -> int:
        with self.lock:
            return len(self.processed)

    def all_processed(self, values: list[bytes]) -> bool:
        with self.lock:
            return all(self.processed[v] > 0 for v in values)

    def committed_before(self, t: float) -> dict[int, int]:
        out: dict[int, int] = {}
        with self.lock:
            for at, offsets in self.commits:
                if at < t:
                    for p, off in offsets.items():
                        out[p] = max(out.get(p, -1), off)
        return out


def group_offsets(nodes, group: str, topic: str) -> dict[int, int]:
    """The group's committed offsets as the coordinator answers them (OffsetFetch)."""
    a = admin(nodes)
    res = a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(timeout=30)
    return {tp.partition: tp.offset for tp in res.topic_partitions if tp.topic == topic and tp.offset >= 0}


def java_string_hash(s: str) -> int:
    h = 0
    for unit in s.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def coordinator_of(nodes, group: str) -> int | None:
    """The broker coordinating `group` as DescribeGroups reports it; where the client
    cannot say, the leader of the group's __consumer_offsets partition (Kafka's
    abs(groupId.hashCode()) % partitions), which is what FindCoordinator answers."""
    a = admin(nodes)
    try:
        desc = a.describe_consumer_groups([group])[group].result(timeout=30)
        if desc.coordinator is not None and desc.coordinator.id >= 0:
            return desc.coordinator.id
    except KafkaException:
        pass
    state = partition_state(nodes[0], "__consumer_offsets")
    if not state:
        return None
    h = java_string_hash(group)
    # Kafka's Utils.abs: Math.abs, with -2**31 as 0 (not the sign-bit mask).
    leader = state[(0 if h == -(1 << 31) else abs(h)) % len(state)][0]
    return leader if leader >= 0 else None


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_coordinator_broker_killed_during_group_consumption(cluster, protocol):
    nodes = cluster.nodes
    topic = f"group-{protocol}-{uuid.uuid4().hex[:8]}"
    parts = 6
    create_topic(nodes[0], topic, parts)
    wait_in_sync(nodes[0], topic, parts)
    values = [b"g-%07d" % i for i in range(GROUP_RECORDS)]
    acked = produce_acked(nodes, topic, values)
    end = acked_ends(acked)

    group = f"g-{protocol}-{uuid.uuid4().hex[:8]}"
    g = Group(cluster.bootstrap, group, topic, protocol)
    for t in g.threads:
        t.start()
    try:
        coordinator = wait_for("the group's coordinator", lambda: coordinator_of(nodes, group))
        wait_for("a third of the records processed", lambda: g.count() >= GROUP_RECORDS // 3)
        # __consumer_offsets is replicated: its partitions have 3 replicas, all in sync.
        offsets_state = wait_for("__consumer_offsets fully in sync",
                                 lambda: (s := partition_state(nodes[0], "__consumer_offsets"))
                                 and all(len(isr) == 3 for _, _, isr in s.values()) and s)
        assert all(len(replicas) == 3 for _, replicas, _ in offsets_state.values()), offsets_state
        victim = cluster.node(coordinator)
        survivors = [nd for nd in nodes if nd is not victim]
        kill_at = time.monotonic()
        victim.kill9()
        at_kill = g.count()
        before = g.committed_before(kill_at)
        assert before, "the group committed before the kill"
        # The consumers' pace (50 ms of work per 100 records) makes consumption take
        # several seconds; the kill comes at a third.
        assert at_kill < GROUP_RECORDS, "the coordinator's broker was killed during consumption"

        # The first answer after the kill comes from the new coordinator: nothing the old
        # one acknowledged is missing or older.
        after = wait_for("the group's offsets answered by a new coordinator",
                         lambda: [group_offsets(survivors, group, topic)])[0]
        behind = {p: (before[p], after.get(p)) for p in before if after.get(p, -1) < before[p]}
        assert not behind, f"committed offsets went back after the coordinator's broker died: {behind}"

        # Every record processed, and the group's commits reach the end of every partition.
        wait_for("every record processed", lambda: g.all_processed(values), deadline_s=300)
        wait_for("the group committed the end of every partition",
                 lambda: group_offsets(survivors, group, topic) == end)
    finally:
        g.stop.set()
        for t in g.threads:
            t.join(DEADLINE_S + 30)
    assert g.errors == [], g.errors
    reprocessed = sum(n - 1 for n in g.processed.values() if n > 1)
    commits_after = sum(1 for at, _ in g.commits if at > kill_at)
    print(f"\ngroup ({protocol}): coordinator on broker {coordinator} killed after {at_kill} of {GROUP_RECORDS} "
          f"records processed (last commits before it: {sum(before.values())} records); {reprocessed} processed "
          f"twice (at-least-once); {commits_after} commits acknowledged after the kill, "
          f"refused meanwhile: {dict(g.commit_errors) or 'none'}")

    victim.start()
    cluster.wait_ready(timeout_s=DEADLINE_S, nodes=[victim])
    committed = wait_for("the group's offsets with every broker back", lambda: [group_offsets(nodes, group, topic)])[0]
    assert committed == end, f"the group's commits are kept: {committed} vs log ends {end}"

    # A new member resumes exactly at the committed offsets.
    more = produce_acked(nodes, topic, [b"more-%03d" % i for i in range(60)])
    want = {v for _, _, v in more}
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "group.protocol": protocol})
    c.subscribe([topic])
    first: dict[int, int] = {}
    seen: set[bytes] = set()
    try:
        def all_new_read():
            for m in c.consume(num_messages=1000, timeout=1.0):
                if m.error() is None:
                    first.setdefault(m.partition(), m.offset())
                    seen.add(m.value())
            return want <= seen
        wait_for("the new member reads the new records", all_new_read)
    finally:
        c.close()
    assert seen == want, f"the new member re-read old records: {sorted(seen - want)[:5]}"
    # A partition the group never committed (no records before) starts at the log start, 0.
    assert all(first[p] == committed.get(p, 0) for p in first), f"resumed at {first}, committed {committed}"


# == 5. a corrupted sealed segment on a follower =========================================

def segment_value(i: int) -> bytes:
    """~1 KiB, unique prefix; the filler varies with i so every 40-byte window is unique."""
    head = b"rec-%06d-" % i
    return head + bytes(97 + (i * 7 + j * 3) % 26 for j in range(1000 - len(head)))


def partition_dir(node, topic: str, partition: int) -> Path:
    dirs = [d for d in node.data_dir.rglob(f"{topic}-{partition}") if d.is_dir()]
    assert len(dirs) == 1, f"one directory for {topic}-{partition} under {node.data_dir}: {dirs}"
    return dirs[0]


def segment_files(d: Path) -> list[Path]:
    """The `<20-digit base offset>.log` files, by base offset."""
    return sorted((f for f in d.iterdir() if f.suffix == ".log" and len(f.stem) == 20 and f.stem.isdigit()),
                  key=lambda f: int(f.stem))


def flip_a_record_byte(seg: Path) -> bytes:
    """Flips one byte inside a record's value in the middle of `seg` (covered by its
    batch's CRC-32C, so only a CRC check finds it). Returns the corrupted 40-byte window,
    unique to this file, to look for later."""
    data = bytearray(seg.read_bytes())
    at = data.find(b"rec-", len(data) // 2)
    assert at >= 0, f"no record value in the second half of {seg}"
    pos = at + 20  # in the filler, past the unique prefix
    data[pos] ^= 0x20  # a lowercase letter becomes uppercase
    with open(seg, "r+b") as f:
        f.seek(pos)
        f.write(bytes([data[pos]]))
        f.flush()
        os.fsync(f.fileno())
    return bytes(data[at:at + 40])


def kill_until_out_of_isr(cluster, node, via, topic: str) -> None:
    """kill -9 `node` and wait until it is out of the partition's ISR (fenced, or shrunk
    by the leader) and the partition is led. Then a later wait for an ISR of 3 sees it
    rejoin, not a view from before the kill."""
    node.kill9()
    wait_for(f"broker {node.node_id} out of the ISR of {topic}-0",
             lambda: (s := partition_state(via, topic)) and node.node_id not in s[0][2] and s[0][0] >= 0)


def test_corrupted_follower_segment_is_refetched(cluster):
    nodes = cluster.nodes
    active = active_controller_id(cluster)
    victim_id = next(nd.node_id for nd in reversed(nodes) if nd.node_id != active)
    victim = cluster.node(victim_id)
    other = next(nd for nd in nodes if nd is not victim)
    topic = f"corrupt-{uuid.uuid4().hex[:8]}"
    # The victim is the preferred replica (first), so a preferred election makes it the
    # leader at the end; it starts as a follower: leadership moves off it by a kill first.
    # 1 MiB segments (Kafka 4's minimum segment.bytes), ~5 MiB of records.
    create_topic(nodes[0], topic, assignment=[[victim_id, *(nd.node_id for nd in nodes if nd is not victim)]],
                 config={"segment.bytes": str(1 << 20)})
    wait_leader(other, topic, 0, want=victim_id)
    wait_in_sync(other, topic, 1)
    kill_until_out_of_isr(cluster, victim, other, topic)
    victim.start()
    cluster.wait_ready(timeout_s=DEADLINE_S, nodes=[victim])
    wait_in_sync(other, topic, 1)
    assert partition_state(other, topic)[0][0] != victim_id, "the victim is a follower"

    values = [segment_value(i) for i in range(5000)]
    # 64 KiB batches: ~16 per segment, so the flipped byte sits in a batch mid-segment
    # (1 MB batches, librdkafka's default, are test_batches_near_the_fetch_size_replicate's).
    acked = produce_acked(nodes, topic, values, partition=0, conf={"batch.size": 65536})
    wait_in_sync(other, topic, 1)  # the victim has every record

    kill_until_out_of_isr(cluster, victim, other, topic)
    d = partition_dir(victim, topic, 0)
    segs = segment_files(d)
    assert len(segs) >= 3, f"several segments rolled on the follower: {[s.name for s in segs]}"
    target = segs[-2]  # the newest sealed segment
    window = flip_a_record_byte(target)
    victim.start()
    cluster.wait_ready(timeout_s=DEADLINE_S, nodes=[victim])

    # Detected at restart, truncated, refetched: back in the ISR with no copy of the bad bytes.
    wait_in_sync(other, topic, 1, deadline_s=180)
    holding = [f.name for f in segment_files(partition_dir(victim, topic, 0)) if window in f.read_bytes()]
    mentions = [line for line in victim.log_since_start().splitlines() if target.stem in line or target.name in line]
    print(f"\ncorrupt: flipped a byte in {target.name} of broker {victim_id}; its log since the restart says:\n  "
          + ("\n  ".join(mentions[:5]) or "(nothing naming the file)"))
    assert holding == [], f"the corrupted bytes are still in the follower's segments {holding} (flipped in {target.name})"

    # Leader again (preferred election): it serves every record unchanged.
    elect_preferred(cluster, topic, 0, want=victim_id)
    got = read_partitions([victim], topic, [0], acked=acked)
    res = check_log(values, acked, got)
    assert res.ok, res.details()
    assert [v for _, v in got[0]] == values


# == batches as large as a replica fetch =================================================

def test_batches_near_the_fetch_size_replicate(cluster):
    """librdkafka's default batch.size (1,000,000 bytes) makes record batches close to
    replica.fetch.max.bytes (1 MiB). Kafka returns the first batch of the first partition
    with data whatever its size (KIP-74), so a follower that follows many partitions of
    the leader (here 30 more, of another topic) still gets every large batch: every
    acks=all write completes, and the log reads back whole."""
    nodes = cluster.nodes
    topic = f"bigbatch-{uuid.uuid4().hex[:8]}"
    filler = f"filler-{uuid.uuid4().hex[:8]}"
    create_topic(nodes[0], filler, 30)
    create_topic(nodes[0], topic, 1)
    wait_in_sync(nodes[0], filler, 30)
    wait_in_sync(nodes[0], topic, 1)
    values = [segment_value(i) for i in range(5000)]  # ~5 MB in ~1 MB batches
    acked = produce_acked(nodes, topic, values, partition=0, conf={"batch.size": 1_000_000, "linger.ms": 50})
    wait_in_sync(nodes[0], topic, 1)
    got = read_partitions(nodes, topic, [0], acked=acked)
    res = check_log(values, acked, got)
    assert res.ok, res.details()
