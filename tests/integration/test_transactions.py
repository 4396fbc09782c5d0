"""Transactions (issue 23) through real clients: the acceptance tests of shardlog's
transaction coordinator, checked against Apache Kafka (SHARDLOG_TEST_TARGET=kafka).

Every test has its own topics, transactional ids and groups, and asserts outcomes only:
- transactional producers (confluent-kafka, Java, kafka-python) commit and abort; a
  read_committed consumer sees each committed record once, in offset order, and no aborted
  one; a read_uncommitted consumer sees the aborted ones too (they were acknowledged before
  the abort, so they are in the log); every transaction leaves one control record (marker)
  per partition it wrote to, right after its records, so offsets are not dense;
- on the wire: a read_uncommitted Fetch shows the markers (control batches, COMMIT or ABORT
  as the transaction ended); a read_committed Fetch carries the last stable offset (LSO) and
  the aborted transactions (producer id, first offset);
- zombie fencing: a second producer with the same transactional.id fences the first and
  aborts its open transaction; the zombie's next write never reaches the log;
- consume-transform-produce with offsets in the transaction (confluent-kafka and franz-go's
  GroupTransactSession), one transaction aborted midway and re-processed: the output holds
  every input exactly once; OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT
  while a transaction holds offsets, and a Java read_committed consumer started then gets
  the transaction's offset once it commits (and the old one after an abort);
- an abandoned transaction holds the LSO (read_committed consumers and ListOffsets stop at
  its first offset) until the coordinator aborts it at transaction.timeout.ms;
- ListOffsets(latest, read_committed) returns the LSO while a transaction is open
  (confluent-kafka's Admin and consumer, Java's Admin and consumer, a raw Fetch).
Waits are bounded generously (BOUND_S): reaching a bound is a failure; nothing asserts
that something was fast.
"""

from __future__ import annotations

import base64
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import (OFFSET_BEGINNING, Consumer, IsolationLevel, KafkaError, KafkaException,
                             Producer, TopicPartition)
from confluent_kafka.admin import OffsetSpec

import kafkawire as kw
from clients import (JAVA_JAR, admin, admin_create_topic, java_tool, json_lines, kafka_tool, make_records, shardlog_cli,
                     parse_record_lines, produce_confluent)
from conftest import REPO, is_kafka, skip_unless_shardlog, wait_for

BOUND_S = 120  # a bound for any one wait; reaching it is a failure, never a timing assertion
GO_EOS = Path(os.environ.get("SHARDLOG_GO_TXN_EOS", REPO / "tests" / "go" / "target" / "txneos"))
UNSTABLE_OFFSET_COMMIT = 88
READ_UNCOMMITTED, READ_COMMITTED = "read_uncommitted", "read_committed"


def _uid() -> str:
    return uuid.uuid4().hex[:8]


def _topic(bootstrap: str, prefix: str, partitions: int) -> str:
    name = f"txn-{prefix}-{_uid()}"
    admin_create_topic(bootstrap, name, partitions)
    return name


# -- a seeded plan of transactions ----------------------------------------------------------------

@dataclass
class PlannedTxn:
    idx: int
    commit: bool
    records: list[tuple[int, bytes, bytes]]  # (partition, key, value)


def plan_transactions(seed: int, n_txns: int, partitions: int, tag: str) -> list[PlannedTxn]:
    """n_txns transactions of 1..25 records each over `partitions` partitions; the RNG picks
    commit or abort (both appear at least twice) and each record's partition."""
    rnd = random.Random(seed)
    outcomes = [rnd.random() < 0.55 for _ in range(n_txns)]
    for want in (True, False):
        while outcomes.count(want) < 2:
            outcomes[rnd.randrange(n_txns)] = want
    plan = []
    for t, commit in enumerate(outcomes):
        recs = []
        for j in range(rnd.randint(1, 25)):
            recs.append((rnd.randrange(partitions), f"k{rnd.randrange(50)}".encode(),
                         f"{tag}-t{t}-r{j}-{'c' if commit else 'a'}".encode() + b"x" * rnd.randrange(0, 200)))
        plan.append(PlannedTxn(t, commit, recs))
    return plan


# -- confluent-kafka helpers ------------------------------------------------------------------------

def txn_producer(bootstrap: str, txn_id: str, **extra) -> Producer:
    conf = {"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5}
    conf.update(extra)
    p = Producer(conf)
    p.init_transactions(BOUND_S)
    return p


def produce_plan_confluent(bootstrap: str, topic: str, txn_id: str,
                           plan: list[PlannedTxn]) -> dict[tuple[int, int], tuple[int, int]]:
    """Runs the plan with one transactional producer: {(txn, record index): (partition,
    offset)} from the delivery reports. An aborted transaction is flushed first, so its
    records are acknowledged (in the log) when the abort marker is written."""
    p = txn_producer(bootstrap, txn_id)
    acked: dict[tuple[int, int], tuple[int, int]] = {}
    errors = []

    def report(t, j):
        def cb(err, msg):
            if err is not None:
                errors.append(((t, j), err))
            else:
                acked[(t, j)] = (msg.partition(), msg.offset())
        return cb

    for txn in plan:
        p.begin_transaction()
        for j, (part, key, value) in enumerate(txn.records):
            p.produce(topic, key=key, value=value, partition=part, on_delivery=report(txn.idx, j))
            p.poll(0)
        assert p.flush(BOUND_S) == 0, f"transaction {txn.idx}: records not delivered"
        if txn.commit:
            p.commit_transaction(BOUND_S)
        else:
            p.abort_transaction(BOUND_S)
    p.flush(BOUND_S)
    assert not errors, f"delivery errors: {errors[:5]}"
    want = sum(len(t.records) for t in plan)
    assert len(acked) == want, f"{len(acked)} delivery reports for {want} records"
    return acked


def consume_all(bootstrap: str, topic: str, partitions: int,
                isolation: str) -> dict[int, list[tuple[int, bytes | None, bytes]]]:
    """confluent-kafka consumer (assign, no commits) from the beginning to the
    end of every partition: the high watermark for read_uncommitted, the last stable offset
    for read_committed (librdkafka's partition EOF). {partition: [(offset, key, value)]}."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"txn-reader-{_uid()}",
                  "enable.auto.commit": False, "enable.auto.offset.store": False,
                  "auto.offset.reset": "earliest", "enable.partition.eof": True,
                  "isolation.level": isolation})
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        out: dict[int, list] = {p: [] for p in range(partitions)}
        eof: set[int] = set()
        deadline = time.monotonic() + BOUND_S
        while len(eof) < partitions:
            assert time.monotonic() < deadline, f"{isolation} consumer: no end of partitions {set(range(partitions)) - eof}"
            for m in c.consume(num_messages=1000, timeout=0.5):
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        eof.add(m.partition())
                        continue
                    raise KafkaException(m.error())
                out[m.partition()].append((m.offset(), m.key(), m.value()))
        return out
    finally:
        c.close()


def list_offsets(bootstrap: str, topic: str, partitions: int, isolation: str) -> dict[int, int]:
    """Admin ListOffsets(latest) with the isolation level: the high watermark, or the LSO."""
    level = IsolationLevel.READ_COMMITTED if isolation == READ_COMMITTED else IsolationLevel.READ_UNCOMMITTED
    a = admin(bootstrap)
    fs = a.list_offsets({TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)},
                        isolation_level=level, request_timeout=60)
    return {tp.partition: f.result(timeout=BOUND_S).offset for tp, f in fs.items()}


def wait_stable(bootstrap: str, topic: str, partitions: int, what: str = "") -> dict[int, int]:
    """Waits until no transaction is pending on the topic (LSO = high watermark on every
    partition) and returns the high watermarks. EndTxn answers once the coordinator has
    decided; the markers reach the partitions after that (Kafka writes them asynchronously),
    so a just-committed transaction becomes visible a little later."""
    def stable():
        hw = list_offsets(bootstrap, topic, partitions, READ_UNCOMMITTED)
        lso = list_offsets(bootstrap, topic, partitions, READ_COMMITTED)
        return hw if hw == lso else None
    return wait_for(f"markers written on {topic} (LSO = high watermark){what}", stable, BOUND_S)


def group_committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets (OffsetFetch; librdkafka's read_committed default sends
    require_stable)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=BOUND_S)
        return {tp.partition: tp.offset for tp in got}
    finally:
        c.close()


# -- checks shared by the producer tests -------------------------------------------------------------

def check_plan_outcome(bootstrap: str, topic: str, partitions: int, plan: list[PlannedTxn],
                       acked: dict[tuple[int, int], tuple[int, int]], committed_view, uncommitted_view):
    """Compares what read_committed / read_uncommitted consumers returned ({partition:
    [(offset, key, value)]}) with the plan and the delivery reports, and checks the
    offsets the markers took."""
    want_c: dict[int, list] = {p: [] for p in range(partitions)}
    want_all: dict[int, list] = {p: [] for p in range(partitions)}
    data_offsets: dict[int, set] = {p: set() for p in range(partitions)}
    for t in plan:
        for j, (part, key, value) in enumerate(t.records):
            a_part, off = acked[(t.idx, j)]
            assert a_part == part, f"txn {t.idx} record {j}: acknowledged on partition {a_part}, sent to {part}"
            want_all[part].append((off, key, value))
            data_offsets[part].add(off)
            if t.commit:
                want_c[part].append((off, key, value))
    for part in range(partitions):
        offs = [o for o, _, _ in want_all[part]]
        assert offs == sorted(offs) and len(set(offs)) == len(offs), \
            f"partition {part}: acknowledged offsets not increasing in produce order: {offs}"
        got = committed_view[part]
        aborted = {v for t in plan if not t.commit for _, _, v in t.records}
        assert [v for _, _, v in got] == [v for _, _, v in want_c[part]], (
            f"partition {part}: read_committed saw {len(got)} records, {len(want_c[part])} committed; "
            f"aborted ones seen: {[v[:24] for _, _, v in got if v in aborted][:5]}")
        assert got == want_c[part], f"partition {part}: read_committed offsets/keys differ from the delivery reports"
        assert uncommitted_view[part] == want_all[part], (
            f"partition {part}: read_uncommitted saw {len(uncommitted_view[part])} records, "
            f"{len(want_all[part])} were acknowledged (committed and aborted)")

    # Markers: one control record per (transaction, partition it wrote to), right after the
    # transaction's records on that partition and before the next transaction's.
    hw = list_offsets(bootstrap, topic, partitions, READ_UNCOMMITTED)
    lso = list_offsets(bootstrap, topic, partitions, READ_COMMITTED)
    for part in range(partitions):
        touching = [t for t in plan if any(p == part for p, _, _ in t.records)]
        n_data = len(data_offsets[part])
        assert hw[part] > n_data, f"partition {part}: high watermark {hw[part]} with {n_data} data records: no markers"
        assert hw[part] == n_data + len(touching), (
            f"partition {part}: high watermark {hw[part]}, expected {n_data} data records + "
            f"{len(touching)} markers (one per transaction that wrote to it)")
        assert lso[part] == hw[part], f"partition {part}: LSO {lso[part]} != high watermark {hw[part]} with no open transaction"
        gaps = sorted(set(range(hw[part])) - data_offsets[part])
        bounds = []
        for k, t in enumerate(touching):
            last = max(acked[(t.idx, j)][1] for j, (p, _, _) in enumerate(t.records) if p == part)
            nxt = touching[k + 1] if k + 1 < len(touching) else None
            first_next = hw[part] if nxt is None else min(
                acked[(nxt.idx, j)][1] for j, (p, _, _) in enumerate(nxt.records) if p == part)
            bounds.append((last, first_next))
        assert len(gaps) == len(bounds) and all(lo < g < hi for g, (lo, hi) in zip(gaps, bounds)), (
            f"partition {part}: offsets without data {gaps}; each transaction's marker belongs "
            f"between its last record and the next transaction's first: {bounds}")


# -- raw protocol: Fetch v4 with an isolation level, OffsetFetch v7 with require_stable -----------

def fetch_v4(bootstrap: str, topic: str, partition: int, offset: int, isolation: int) -> dict:
    """Fetch v4 of one partition (isolation 0: read_uncommitted, 1: read_committed):
    {error_code, high_watermark, last_stable_offset, aborted: [(producer_id, first_offset)],
    records}."""
    body = (kw.i32(-1) + kw.i32(0) + kw.i32(1) + kw.i32(16 << 20) + kw.i8(isolation)
            + kw.i32(1) + kw.string(topic) + kw.i32(1) + kw.i32(partition) + kw.i64(offset) + kw.i32(16 << 20))
    r = kw.Reader(kw.roundtrip(bootstrap, kw.request(kw.FETCH, 4, 7, body, header_version=1)))
    assert r.i32() == 7
    r.i32()  # throttle
    (n_topics,) = (r.i32(),)
    assert n_topics == 1
    assert r.string() == topic
    assert r.i32() == 1
    d = {"partition": r.i32(), "error_code": r.i16(), "high_watermark": r.i64(), "last_stable_offset": r.i64()}
    n = r.i32()
    d["aborted"] = [(r.i64(), r.i64()) for _ in range(max(n, 0))]
    d["aborted_null"] = n < 0
    size = r.i32()
    d["records"] = b"" if size < 0 else r.b[r.i:r.i + size]
    return d


@dataclass
class Batch:
    base: int
    last: int
    producer_id: int
    transactional: bool
    control: bool
    control_type: int | None = None  # 0 ABORT, 1 COMMIT


def parse_batches(records: bytes) -> list[Batch]:
    out, i = [], 0
    while i + 61 <= len(records):
        base, length = struct.unpack_from(">qi", records, i)
        if i + 12 + length > len(records):
            break  # a partial batch at the end of a fetch
        (attrs,) = struct.unpack_from(">h", records, i + 21)
        (last_delta,) = struct.unpack_from(">i", records, i + 23)
        (pid,) = struct.unpack_from(">q", records, i + 43)
        b = Batch(base, base + last_delta, pid, bool(attrs & 0x10), bool(attrs & 0x20))
        if b.control:
            assert attrs & 0x07 == 0, "a control batch is never compressed"
            r = kw.FlexReader(records[i + 61:i + 12 + length])
            _zigzag(r)  # record length
            r.i8()  # attributes
            _zigzag(r), _zigzag(r)  # timestamp delta, offset delta
            klen = _zigzag(r)
            key = r.b[r.i:r.i + klen]
            _version, ctype = struct.unpack(">hh", key[:4])
            b.control_type = ctype
        out.append(b)
        i += 12 + length
    return out


def _zigzag(r: kw.FlexReader) -> int:
    v = r.uvarint()
    return (v >> 1) ^ -(v & 1)


def offset_fetch_v7(bootstrap: str, group: str, topic: str, partitions: list[int],
                    require_stable: bool) -> dict[int, tuple[int, int]]:
    """OffsetFetch v7 for one topic: {partition: (committed_offset, error_code)}."""
    body = (kw.compact_string(group)
            + kw.compact_array([kw.compact_string(topic) + kw.compact_array([kw.i32(p) for p in partitions]) + kw.uvarint(0)])
            + kw.i8(1 if require_stable else 0))
    r = kw.flexible_roundtrip(bootstrap, 9, 7, body)
    r.i32()  # throttle

    def part():
        d = (r.i32(), r.i64(), r.i32(), r.compact_string(), r.i16())
        r.tags()
        return d

    def topic_entry():
        name = r.compact_string()
        parts = r.array(part)
        r.tags()
        return name, parts

    topics = r.array(topic_entry)
    err = r.i16()
    assert err == 0, f"OffsetFetch v7 error {err}"
    out = {}
    for name, parts in topics:
        assert name == topic
        for p, off, _epoch, _meta, code in parts:
            out[p] = (off, code)
    return out


# == 1. confluent-kafka: committed and aborted transactions over 3 partitions ======================

def test_confluent_commit_and_abort_read_committed(bootstrap):
    topic = _topic(bootstrap, "confluent", 3)
    plan = plan_transactions(seed=2301, n_txns=14, partitions=3, tag="cf")
    acked = produce_plan_confluent(bootstrap, topic, f"txn-cf-{_uid()}", plan)
    wait_stable(bootstrap, topic, 3)
    committed_view = consume_all(bootstrap, topic, 3, READ_COMMITTED)
    uncommitted_view = consume_all(bootstrap, topic, 3, READ_UNCOMMITTED)
    check_plan_outcome(bootstrap, topic, 3, plan, acked, committed_view, uncommitted_view)


def test_markers_and_aborted_list_on_the_wire(bootstrap):
    """The same kind of history seen in raw Fetch v4 responses: read_uncommitted returns the
    markers as control batches (transactional, COMMIT or ABORT as each transaction ended)
    between the transactions' data batches; read_committed returns LSO = high watermark and,
    per aborted transaction, (producer id, first offset of its records on the partition)."""
    topic = _topic(bootstrap, "wire", 2)
    plan = plan_transactions(seed=77, n_txns=8, partitions=2, tag="wire")
    acked = produce_plan_confluent(bootstrap, topic, f"txn-wire-{_uid()}", plan)
    wait_stable(bootstrap, topic, 2)
    for part in range(2):
        raw = fetch_v4(bootstrap, topic, part, 0, isolation=0)
        assert raw["error_code"] == 0, raw
        batches = parse_batches(raw["records"])
        assert batches and batches[-1].last == raw["high_watermark"] - 1, \
            f"partition {part}: the fetch did not return the whole log: {batches[-1:]} hw {raw['high_watermark']}"
        data = [b for b in batches if not b.control]
        markers = [b for b in batches if b.control]
        assert data and all(b.transactional for b in data), f"partition {part}: data batches not transactional"
        pids = {b.producer_id for b in batches}
        assert len(pids) == 1 and -1 not in pids, f"partition {part}: producer ids {pids}"
        (pid,) = pids
        assert all(b.transactional and b.base == b.last for b in markers), \
            f"partition {part}: a marker is a transactional control batch of one record: {markers}"
        touching = [t for t in plan if any(p == part for p, _, _ in t.records)]
        # Walk the batches in offset order: each transaction's data, then its marker.
        expect = []
        for t in touching:
            offs = sorted(acked[(t.idx, j)][1] for j, (p, _, _) in enumerate(t.records) if p == part)
            expect.append(("data", offs[0], offs[-1]))
            expect.append(("marker", 1 if t.commit else 0))
        seen = []
        for b in batches:
            if b.control:
                seen.append(("marker", b.control_type))
            elif seen and seen[-1][0] == "data":
                seen[-1] = ("data", seen[-1][1], b.last)
            else:
                seen.append(("data", b.base, b.last))
        assert seen == expect, f"partition {part}: batches {seen}, expected {expect} (COMMIT=1, ABORT=0)"

        rc = fetch_v4(bootstrap, topic, part, 0, isolation=1)
        assert rc["error_code"] == 0, rc
        assert rc["last_stable_offset"] == rc["high_watermark"] == raw["high_watermark"], rc
        want_aborted = sorted((pid, min(acked[(t.idx, j)][1] for j, (p, _, _) in enumerate(t.records) if p == part))
                              for t in touching if not t.commit)
        assert sorted(rc["aborted"]) == want_aborted, \
            f"partition {part}: aborted transactions {rc['aborted']}, expected {want_aborted}"


# == 2. Java kafka-clients ===============================================================================

def _java_consume(bootstrap: str, topic: str, partitions: int, isolation: str) -> dict[int, list]:
    r = java_tool("consume", "--bootstrap", bootstrap, "--topic", topic, "--isolation", isolation,
                  "--partitions", ",".join(str(p) for p in range(partitions)), "--timeout-ms", str(BOUND_S * 1000))
    got, n = parse_record_lines(r.stdout)
    assert sum(len(v) for v in got.values()) == n
    return {p: [(c.offset, c.key, c.value) for c in got.get(p, [])] for p in range(partitions)}


def test_java_commit_and_abort_read_committed(bootstrap, tmp_path):
    topic = _topic(bootstrap, "java", 3)
    plan = plan_transactions(seed=4242, n_txns=12, partitions=3, tag="java")
    inp = tmp_path / "txns.tsv"
    with open(inp, "w") as f:
        for t in plan:
            f.write("begin\n")
            for part, key, value in t.records:
                # ClientTool's record line: partition offset ts key value headers
                f.write(f"{part}\t0\t-1\t{base64.b64encode(key).decode()}\t{base64.b64encode(value).decode()}\t\n")
            f.write("commit\n" if t.commit else "abort\n")
    r = java_tool("txn-produce", "--bootstrap", bootstrap, "--topic", topic, "--txn-id", f"txn-java-{_uid()}",
                  "--input", str(inp), timeout=BOUND_S + 120)
    lines = json_lines(r.stdout)
    assert lines[-1] == {"done": True, "acked": sum(len(t.records) for t in plan), "failed": 0}, lines[-3:]
    ends = [(l["txn"], l["end"]) for l in lines if "end" in l]
    assert ends == [(t.idx, "commit" if t.commit else "abort") for t in plan], ends
    # Record lines are numbered across the file; map them back to (txn, index in txn).
    index = [(t.idx, j) for t in plan for j in range(len(t.records))]
    acked = {index[l["i"]]: (l["p"], l["o"]) for l in lines if "o" in l}
    wait_stable(bootstrap, topic, 3)
    committed_view = _java_consume(bootstrap, topic, 3, READ_COMMITTED)
    uncommitted_view = _java_consume(bootstrap, topic, 3, READ_UNCOMMITTED)
    check_plan_outcome(bootstrap, topic, 3, plan, acked, committed_view, uncommitted_view)
    # Another client's read_committed view of the same log agrees.
    assert consume_all(bootstrap, topic, 3, READ_COMMITTED) == committed_view


# == 3. kafka-python ======================================================================================

def test_kafka_python_commit_and_abort(bootstrap):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTP

    topic = _topic(bootstrap, "kpy", 2)
    p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"txn-kpy-{_uid()}",
                      max_block_ms=BOUND_S * 1000, request_timeout_ms=60_000)
    outcomes = [("commit", 6), ("abort", 5), ("commit", 4), ("abort", 3), ("commit", 5)]
    acked: dict[bytes, tuple[int, int]] = {}
    try:
        p.init_transactions()
        for t, (end, n) in enumerate(outcomes):
            p.begin_transaction()
            futs = [(v, p.send(topic, key=b"k", value=v, partition=i % 2))
                    for i in range(n) for v in [f"kpy-t{t}-r{i}-{end}".encode()]]
            p.flush(timeout=BOUND_S)
            for v, f in futs:
                md = f.get(timeout=BOUND_S)
                acked[v] = (md.partition, md.offset)
            if end == "commit":
                p.commit_transaction()
            else:
                p.abort_transaction()
    finally:
        p.close(timeout=30)
    wait_stable(bootstrap, topic, 2)
    committed = {v for v in acked if v.endswith(b"commit")}
    aborted = set(acked) - committed

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      isolation_level="read_committed", auto_offset_reset="earliest")
    try:
        tps = [KTP(topic, 0), KTP(topic, 1)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        end = c.end_offsets(tps)
        seen: list[tuple[int, int, bytes]] = []
        deadline = time.monotonic() + BOUND_S
        while any(c.position(tp) < end[tp] for tp in tps):
            assert time.monotonic() < deadline, f"kafka-python read_committed: positions {[c.position(tp) for tp in tps]} < {end}"
            for tp, msgs in c.poll(timeout_ms=500).items():
                seen += [(m.partition, m.offset, m.value) for m in msgs]
    finally:
        c.close()
    values = [v for _, _, v in seen]
    assert sorted(values) == sorted(committed), (
        f"kafka-python read_committed: {len(values)} records, {len(committed)} committed; "
        f"aborted seen: {sorted(set(values) & aborted)[:5]}")
    assert all(acked[v] == (p_, o) for p_, o, v in seen), "offsets differ from the producer's acknowledgements"
    for part in (0, 1):
        offs = [o for p_, o, _ in seen if p_ == part]
        assert offs == sorted(offs), f"partition {part}: not in offset order"
    # librdkafka's read_committed view agrees; its read_uncommitted view has the aborted ones.
    assert {v for recs in consume_all(bootstrap, topic, 2, READ_COMMITTED).values() for _, _, v in recs} == committed
    assert {v for recs in consume_all(bootstrap, topic, 2, READ_UNCOMMITTED).values() for _, _, v in recs} == set(acked)


# == 4. zombie fencing ====================================================================================

def test_confluent_zombie_fencing(bootstrap):
    topic = _topic(bootstrap, "fence", 1)
    txn_id = f"txn-fence-{_uid()}"
    a = txn_producer(bootstrap, txn_id)
    a_acked: dict[bytes, int] = {}
    a.begin_transaction()
    for i in range(3):
        a.produce(topic, value=f"a-{i}".encode(), partition=0,
                  on_delivery=lambda err, m: a_acked.__setitem__(m.value(), m.offset()) if err is None else None)
    assert a.flush(BOUND_S) == 0 and len(a_acked) == 3, "the first producer's records were not acknowledged"

    b = txn_producer(bootstrap, txn_id)  # fences a; a's open transaction is aborted
    b_acked: dict[bytes, int] = {}
    b.begin_transaction()
    for i in range(3):
        b.produce(topic, value=f"b-{i}".encode(), partition=0,
                  on_delivery=lambda err, m: b_acked.__setitem__(m.value(), m.offset()) if err is None else None)
    b.flush(BOUND_S)
    b.commit_transaction(BOUND_S)
    assert len(b_acked) == 3

    # The zombie's next transactional step fails fatally with the fencing error. (librdkafka
    # raises it from produce(), flush() or commit_transaction(), whichever meets it first.)
    with pytest.raises(KafkaException) as exc:
        a.produce(topic, value=b"a-late", partition=0)
        a.flush(BOUND_S)
        a.commit_transaction(BOUND_S)
    err = exc.value.args[0]
    assert err.fatal() and err.code() == KafkaError._FENCED, f"expected a fatal _FENCED error, got {err!r}"
    wait_stable(bootstrap, topic, 1)

    rc = consume_all(bootstrap, topic, 1, READ_COMMITTED)[0]
    assert [v for _, _, v in rc] == [b"b-0", b"b-1", b"b-2"], rc
    assert [o for o, _, _ in rc] == [b_acked[v] for _, _, v in rc]
    ru = consume_all(bootstrap, topic, 1, READ_UNCOMMITTED)[0]
    assert [v for _, _, v in ru] == [b"a-0", b"a-1", b"a-2", b"b-0", b"b-1", b"b-2"], \
        f"read_uncommitted: {ru} (the zombie's a-late must never reach the log)"
    assert max(a_acked.values()) < min(b_acked.values())
    # a's records, the abort marker B's InitProducerId caused, b's records, b's commit marker.
    assert list_offsets(bootstrap, topic, 1, READ_UNCOMMITTED) == {0: 8}


def test_java_zombie_fencing(bootstrap):
    topic = _topic(bootstrap, "jfence", 1)
    r = java_tool("txn-fence", "--bootstrap", bootstrap, "--topic", topic, "--txn-id", f"txn-jfence-{_uid()}",
                  timeout=BOUND_S + 120)
    steps = {l["step"]: l for l in json_lines(r.stdout)}
    assert set(steps) == {"a-sent", "b-init", "b-committed", "a-after-fence", "a-abort"}, r.stdout + r.stderr[-3000:]
    # The zombie's next write (a Produce with its old epoch: INVALID_PRODUCER_EPOCH) or its
    # EndTxn (PRODUCER_FENCED) fails; aborting then reports the fencing.
    assert steps["a-after-fence"].get("error") in ("InvalidProducerEpochException", "ProducerFencedException"), steps
    assert steps["a-abort"].get("error") == "ProducerFencedException", steps
    assert wait_stable(bootstrap, topic, 1) == {0: 8}  # 3 + abort marker + 3 + commit marker
    rc = _java_consume(bootstrap, topic, 1, READ_COMMITTED)[0]
    assert [v for _, _, v in rc] == [b"b-0", b"b-1", b"b-2"], rc
    assert [o for o, _, _ in rc] == steps["b-committed"]["offsets"]
    ru = _java_consume(bootstrap, topic, 1, READ_UNCOMMITTED)[0]
    assert [v for _, _, v in ru] == [b"a-0", b"a-1", b"a-2", b"b-0", b"b-1", b"b-2"], ru
    assert [o for o, _, _ in ru][:3] == steps["a-sent"]["offsets"]


# == 5. consume-transform-produce with offsets in the transaction ==========================================

def test_confluent_consume_transform_produce_exactly_once(bootstrap):
    n, parts, abort_at = 300, 3, 2
    src = _topic(bootstrap, "ctp-in", parts)
    dst = _topic(bootstrap, "ctp-out", parts)
    group = f"txn-ctp-{_uid()}"
    inputs = make_records(n, seed=99, ascii_only=True)
    produce_confluent(bootstrap, src, inputs)
    src_end = list_offsets(bootstrap, src, parts, READ_UNCOMMITTED)
    src_view = consume_all(bootstrap, src, parts, READ_UNCOMMITTED)
    assert sum(len(v) for v in src_view.values()) == n

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "isolation.level": READ_COMMITTED, "auto.offset.reset": "earliest"})
    p = txn_producer(bootstrap, f"txn-ctp-{_uid()}")
    committed_pos: dict[int, int] = {}
    txns, aborted_records = 0, 0
    try:
        c.subscribe([src])
        deadline = time.monotonic() + BOUND_S * 2
        while any(committed_pos.get(q, 0) < src_end[q] for q in range(parts)):
            assert time.monotonic() < deadline, f"not all input processed: committed {committed_pos}, end {src_end}"
            msgs = c.consume(num_messages=40, timeout=1)
            if not msgs:
                continue
            for m in msgs:
                if m.error():
                    raise KafkaException(m.error())
            p.begin_transaction()
            for m in msgs:
                p.produce(dst, key=m.key(), value=b"out:" + m.value(), partition=m.partition())
            # Offsets to commit: past the records just read (partitions not read yet: none).
            positions = [tp for tp in c.position(c.assignment()) if tp.offset >= 0]
            p.send_offsets_to_transaction(positions, c.consumer_group_metadata(), BOUND_S)
            if txns == abort_at:
                assert p.flush(BOUND_S) == 0
                p.abort_transaction(BOUND_S)
                aborted_records = len(msgs)
                # The offsets sent in the aborted transaction are not the group's.
                now = {tp.partition: tp.offset for tp in c.committed(c.assignment(), timeout=BOUND_S)}
                assert all(now[q] == committed_pos.get(q, -1001) for q in now), \
                    f"after the abort the group's offsets are {now}, before it {committed_pos}"
                # Rewind to the committed offsets and process those records again.
                for tp in c.assignment():
                    c.seek(TopicPartition(src, tp.partition, committed_pos.get(tp.partition, OFFSET_BEGINNING)))
            else:
                p.commit_transaction(BOUND_S)
                committed_pos.update({tp.partition: tp.offset for tp in positions if tp.offset >= 0})
            txns += 1
    finally:
        c.close()
    assert txns > abort_at + 1 and aborted_records > 0
    wait_stable(bootstrap, dst, parts)

    out_rc = consume_all(bootstrap, dst, parts, READ_COMMITTED)
    for q in range(parts):
        want = [b"out:" + v for _, _, v in src_view[q]]
        got = [v for _, _, v in out_rc[q]]
        assert got == want, (f"output partition {q}: {len(got)} records for {len(want)} inputs "
                             f"(duplicates: {len(got) - len(set(got))})")
    out_ru = consume_all(bootstrap, dst, parts, READ_UNCOMMITTED)
    assert sum(len(v) for v in out_ru.values()) == n + aborted_records, \
        "read_uncommitted output should hold the aborted transaction's records too"
    assert group_committed(bootstrap, group, src, parts) == src_end


def test_require_stable_offset_fetch_waits_for_the_transaction(bootstrap):
    """TxnOffsetCommit offsets are pending until the transaction ends: OffsetFetch with
    require_stable answers UNSTABLE_OFFSET_COMMIT meanwhile (without it: the last stable
    offset); a Java read_committed consumer asking for its committed offset then retries
    and gets the transaction's offset after the commit; an aborted transaction's offsets are
    dropped."""
    src = _topic(bootstrap, "stable-in", 1)
    dst = _topic(bootstrap, "stable-out", 1)
    group = f"txn-stable-{_uid()}"
    produce_confluent(bootstrap, src, make_records(20, seed=5, ascii_only=True))
    gc = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        gc.commit(offsets=[TopicPartition(src, 0, 2)], asynchronous=False)
        meta = gc.consumer_group_metadata()
    finally:
        gc.close()
    assert offset_fetch_v7(bootstrap, group, src, [0], require_stable=True) == {0: (2, 0)}

    def stable_at(offset):
        # The commit or abort marker reaches __consumer_offsets after EndTxn has answered;
        # meanwhile require_stable still gets UNSTABLE_OFFSET_COMMIT.
        def fetched():
            r = offset_fetch_v7(bootstrap, group, src, [0], require_stable=True)
            return r if r[0][1] != UNSTABLE_OFFSET_COMMIT else None
        got = wait_for("the group's offset to be stable after the transaction ended", fetched, BOUND_S)
        assert got == {0: (offset, 0)}, got

    p = txn_producer(bootstrap, f"txn-stable-{_uid()}")
    p.begin_transaction()
    p.produce(dst, value=b"x", partition=0)
    p.send_offsets_to_transaction([TopicPartition(src, 0, 7)], meta, BOUND_S)
    assert p.flush(BOUND_S) == 0

    assert offset_fetch_v7(bootstrap, group, src, [0], require_stable=True)[0][1] == UNSTABLE_OFFSET_COMMIT
    assert offset_fetch_v7(bootstrap, group, src, [0], require_stable=False) == {0: (2, 0)}

    assert JAVA_JAR.exists(), f"{JAVA_JAR} missing: scripts/test.sh builds it"
    java = subprocess.Popen(
        ["java", "-Xmx256m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-jar", str(JAVA_JAR), "committed",
         "--bootstrap", bootstrap, "--group", group, "--topic", src, "--partitions", "0",
         "--isolation", READ_COMMITTED, "--timeout-ms", str(BOUND_S * 1000)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    err_lines: list[str] = []
    reader = threading.Thread(target=lambda: err_lines.extend(java.stderr), daemon=True)
    reader.start()
    try:
        # The Java consumer has met UNSTABLE_OFFSET_COMMIT (its coordinator logs each one at
        # INFO) before the transaction ends.
        def saw_unstable():
            if any("still have unstable offsets" in l for l in err_lines):
                return True
            assert java.poll() is None, f"Java exited early: {java.stdout.read()} {''.join(err_lines)[-3000:]}"
            return False
        wait_for("the Java read_committed consumer to be told UNSTABLE_OFFSET_COMMIT", saw_unstable, BOUND_S)
        p.commit_transaction(BOUND_S)
        java.wait(timeout=BOUND_S + 30)
        out = java.stdout.read()
    finally:
        if java.poll() is None:
            java.kill()
            java.wait()
    reader.join(timeout=30)
    assert java.returncode == 0, out + "".join(err_lines)[-3000:]
    assert json_lines(out) == [{"p": 0, "committed": 7}], out
    stable_at(7)

    # An aborted transaction's offsets never become the group's.
    p.begin_transaction()
    p.produce(dst, value=b"y", partition=0)
    p.send_offsets_to_transaction([TopicPartition(src, 0, 15)], meta, BOUND_S)
    assert p.flush(BOUND_S) == 0
    assert offset_fetch_v7(bootstrap, group, src, [0], require_stable=True)[0][1] == UNSTABLE_OFFSET_COMMIT
    p.abort_transaction(BOUND_S)
    stable_at(7)
    assert group_committed(bootstrap, group, src, 1) == {0: 7}


# == 6. an abandoned transaction holds the LSO until it times out ==========================================

ABANDON = r"""
import json, sys
from confluent_kafka import Producer
bootstrap, topic, txn_id, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "transaction.timeout.ms": 30000})
p.init_transactions(120)
p.begin_transaction()
offs = []
for i in range(n):
    p.produce(topic, value=f"abandoned-{i}".encode(), partition=0,
              on_delivery=lambda err, m: offs.append(m.offset() if err is None else str(err)))
assert p.flush(120) == 0
print(json.dumps({"offsets": offs}), flush=True)
sys.stdin.read()  # killed here, the transaction open
"""


def test_abandoned_transaction_blocks_read_committed_until_timeout(bootstrap):
    topic = _topic(bootstrap, "abandon", 1)
    good = txn_producer(bootstrap, f"txn-good-{_uid()}")

    def commit(values):
        good.begin_transaction()
        for v in values:
            good.produce(topic, value=v, partition=0)
        good.commit_transaction(BOUND_S)

    before = [f"before-{i}".encode() for i in range(5)]
    after = [f"after-{i}".encode() for i in range(5)]
    commit(before)
    assert wait_stable(bootstrap, topic, 1) == {0: 6}  # 5 records and the commit marker
    # A producer with transaction.timeout.ms = 30 s writes 4 records and is killed. (The
    # checks of the stuck LSO below must run before that: they take a few seconds.)
    proc = subprocess.Popen([sys.executable, "-c", ABANDON, bootstrap, topic, f"txn-abandon-{_uid()}", "4"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line, f"abandoning producer failed: {proc.stderr.read()[-3000:]}"
        abandoned = json.loads(line)["offsets"]
    finally:
        proc.kill()
        proc.wait()
    assert abandoned == [6, 7, 8, 9], abandoned  # after 5 records and their commit marker
    commit(after)

    # Until the coordinator aborts it, the open transaction holds the LSO at its first
    # offset: committed data after it is not served to read_committed consumers.
    # (The high watermark reaches 16 once the commit marker of `after` is written.)
    wait_for("the high watermark to pass the commit marker of the `after` records",
             lambda: list_offsets(bootstrap, topic, 1, READ_UNCOMMITTED)[0] >= 16, BOUND_S)
    assert list_offsets(bootstrap, topic, 1, READ_UNCOMMITTED) == {0: 16}  # + the 4 abandoned
    assert list_offsets(bootstrap, topic, 1, READ_COMMITTED) == {0: 6}
    stuck = consume_all(bootstrap, topic, 1, READ_COMMITTED)[0]
    assert [v for _, _, v in stuck] == before, stuck
    raw = fetch_v4(bootstrap, topic, 0, 0, isolation=1)
    assert raw["last_stable_offset"] == 6 and raw["high_watermark"] == 16, raw
    assert all(b.last < 6 for b in parse_batches(raw["records"])), "read_committed Fetch returned data past the LSO"
    # A read_committed consumer that stays: it stops at the LSO now, and goes on later.
    live = Consumer({"bootstrap.servers": bootstrap, "group.id": f"txn-live-{_uid()}", "enable.auto.commit": False,
                     "auto.offset.reset": "earliest", "enable.partition.eof": True, "isolation.level": READ_COMMITTED})
    live_seen: list[tuple[int, bytes]] = []

    def poll_live() -> bool:
        """Reads what is there; True if the consumer reported the end of the partition."""
        eof = False
        for m in live.consume(num_messages=1000, timeout=0.5):
            if m.error():
                if m.error().code() != KafkaError._PARTITION_EOF:
                    raise KafkaException(m.error())
                eof = True
            else:
                live_seen.append((m.offset(), m.value()))
        return eof

    # The coordinator aborts it after transaction.timeout.ms: an abort marker is written and
    # the LSO reaches the high watermark.
    def aborted():
        o = {i: list_offsets(bootstrap, topic, 1, i)[0] for i in (READ_UNCOMMITTED, READ_COMMITTED)}
        return o if o[READ_COMMITTED] == o[READ_UNCOMMITTED] else None
    try:
        live.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        wait_for("the live read_committed consumer to reach the LSO", poll_live, BOUND_S)
        assert live_seen == [(i, v) for i, v in enumerate(before)], live_seen
        lso = wait_for("the abandoned transaction to be aborted (LSO = high watermark)", aborted, BOUND_S)
        assert lso[READ_COMMITTED] == 17, f"expected one abort marker after offset 15: {lso}"
        wait_for("the live read_committed consumer to read on to the new LSO",
                 lambda: poll_live() and len(live_seen) >= len(before) + len(after), BOUND_S)
        assert live_seen == [(i, v) for i, v in enumerate(before)] + [(10 + i, v) for i, v in enumerate(after)], \
            f"the live read_committed consumer read {live_seen}"
    finally:
        live.close()
    rc = consume_all(bootstrap, topic, 1, READ_COMMITTED)[0]
    assert [v for _, _, v in rc] == before + after, rc
    ru = consume_all(bootstrap, topic, 1, READ_UNCOMMITTED)[0]
    assert [v for _, _, v in ru] == before + [f"abandoned-{i}".encode() for i in range(4)] + after
    raw = fetch_v4(bootstrap, topic, 0, 0, isolation=0)
    last = parse_batches(raw["records"])[-1]
    assert last.control and last.control_type == 0 and last.base == 16, last
    good.flush(BOUND_S)


# == 7. ListOffsets(read_committed) is the LSO ===============================================================

def test_list_offsets_read_committed_is_the_lso(bootstrap):
    topic = _topic(bootstrap, "lso", 2)
    first = txn_producer(bootstrap, f"txn-lso1-{_uid()}")
    first.begin_transaction()
    for i in range(3):
        for part in (0, 1):
            first.produce(topic, value=f"c-{i}".encode(), partition=part)
    first.commit_transaction(BOUND_S)
    assert wait_stable(bootstrap, topic, 2) == {0: 4, 1: 4}  # offsets 0-2 and a marker at 3

    open_ = txn_producer(bootstrap, f"txn-lso2-{_uid()}")
    open_.begin_transaction()
    for i in range(2):
        open_.produce(topic, value=f"o-{i}".encode(), partition=0)
    assert open_.flush(BOUND_S) == 0  # offsets 4, 5 on partition 0, transaction open

    assert list_offsets(bootstrap, topic, 2, READ_UNCOMMITTED) == {0: 6, 1: 4}
    assert list_offsets(bootstrap, topic, 2, READ_COMMITTED) == {0: 4, 1: 4}
    java_admin = json_lines(java_tool("list-offsets", "--bootstrap", bootstrap, "--topic", topic, "--spec", "latest",
                                      "--isolation", READ_COMMITTED).stdout)
    assert {d["p"]: d["o"] for d in java_admin} == {0: 4, 1: 4}, java_admin
    java_admin_ru = json_lines(java_tool("list-offsets", "--bootstrap", bootstrap, "--topic", topic, "--spec", "latest").stdout)
    assert {d["p"]: d["o"] for d in java_admin_ru} == {0: 6, 1: 4}, java_admin_ru
    java_end = json_lines(java_tool("end-offsets", "--bootstrap", bootstrap, "--topic", topic, "--partitions", "0,1",
                                    "--isolation", READ_COMMITTED).stdout)
    assert {d["p"]: d["o"] for d in java_end} == {0: 4, 1: 4}, java_end
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"txn-wm-{_uid()}", "isolation.level": READ_COMMITTED})
    try:  # librdkafka's query_watermark_offsets asks with the consumer's isolation level
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=60) == (0, 4)
    finally:
        c.close()
    raw = fetch_v4(bootstrap, topic, 0, 0, isolation=1)
    assert (raw["high_watermark"], raw["last_stable_offset"]) == (6, 4), raw
    assert raw["aborted"] == [] and not raw["aborted_null"], raw

    open_.commit_transaction(BOUND_S)
    assert wait_stable(bootstrap, topic, 2) == {0: 7, 1: 4}
    assert list_offsets(bootstrap, topic, 2, READ_COMMITTED) == {0: 7, 1: 4}
    rc = consume_all(bootstrap, topic, 2, READ_COMMITTED)
    assert [v for _, _, v in rc[0]] == [b"c-0", b"c-1", b"c-2", b"o-0", b"o-1"]


# == 8. franz-go GroupTransactSession ========================================================================

def test_franz_go_group_transact_session_exactly_once(bootstrap):
    if not GO_EOS.exists():
        if shutil.which("go") is None:
            pytest.skip("Go is not installed: the franz-go tool (tests/go) cannot be built")
        pytest.fail(f"{GO_EOS} missing: scripts/test.sh builds it (cd tests/go && go build -o target/txneos ./txneos)")
    n, parts = 240, 3
    src = _topic(bootstrap, "eos-in", parts)
    dst = _topic(bootstrap, "eos-out", parts)
    group = f"txn-eos-{_uid()}"
    produce_confluent(bootstrap, src, make_records(n, seed=31, ascii_only=True))
    src_end = list_offsets(bootstrap, src, parts, READ_UNCOMMITTED)
    src_view = consume_all(bootstrap, src, parts, READ_UNCOMMITTED)
    r = subprocess.run([str(GO_EOS), "-bootstrap", bootstrap, "-group", group, "-in", src, "-out", dst,
                        "-txn-id", f"txn-eos-{_uid()}", "-count", str(n), "-abort-txn", "1", "-batch", "40",
                        "-bound", f"{BOUND_S * 2}s"], capture_output=True, text=True, timeout=BOUND_S * 2 + 60)
    lines = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
    assert r.returncode == 0 and lines and lines[-1].get("done"), (lines[-5:], r.stderr[-3000:])
    assert lines[-1]["committed_records"] == n, lines[-1]
    aborted = [l for l in lines if l.get("end") == "abort"]
    assert len(aborted) == 1 and aborted[0]["records"] > 0, lines
    wait_stable(bootstrap, dst, parts)

    out_rc = consume_all(bootstrap, dst, parts, READ_COMMITTED)
    for q in range(parts):
        want = [b"out:" + v for _, _, v in src_view[q]]
        got = [v for _, _, v in out_rc[q]]
        assert got == want, (f"output partition {q}: {len(got)} records for {len(want)} inputs "
                             f"(duplicates: {len(got) - len(set(got))})")
    out_ru = consume_all(bootstrap, dst, parts, READ_UNCOMMITTED)
    assert sum(len(v) for v in out_ru.values()) == n + aborted[0]["records"]
    assert group_committed(bootstrap, group, src, parts) == src_end


def test_kafka_transactions_cli_describe_producers_and_abort(bootstrap):
    """Kafka's operator tool against an open transaction: `describe-producers` shows the
    producer with its transaction's start offset (DescribeProducers), `describe` the
    transaction Ongoing on its coordinator, and `abort` (DescribeProducers, then
    WriteTxnMarkers to the partition leader) ends it on the partition: the LSO moves past
    it and read_committed never delivers its records, while committed data stays."""
    topic = _topic(bootstrap, "cli", 1)
    txn_id = f"txn-cli-{_uid()}"
    p = txn_producer(bootstrap, txn_id)
    p.begin_transaction()
    p.produce(topic, value=b"kept", partition=0)
    p.commit_transaction(BOUND_S)
    wait_stable(bootstrap, topic, 1)  # offset 0 the record, 1 its commit marker
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, value=f"stuck-{i}".encode(), partition=0)
    assert p.flush(BOUND_S) == 0
    assert list_offsets(bootstrap, topic, 1, READ_COMMITTED) == {0: 2}
    tool = "org.apache.kafka.tools.TransactionsCommand"
    r = kafka_tool(tool, "--bootstrap-server", bootstrap, "describe-producers", "--topic", topic, "--partition", "0")
    assert r.returncode == 0, r.stderr[-2000:]
    rows = [l.split() for l in r.stdout.splitlines()[1:] if l.strip()]
    header = r.stdout.splitlines()[0].split()
    assert "CurrentTransactionStartOffset" in header, r.stdout
    start_col = header.index("CurrentTransactionStartOffset")
    assert [row[start_col] for row in rows] == ["2"], r.stdout
    r = kafka_tool(tool, "--bootstrap-server", bootstrap, "describe", "--transactional-id", txn_id)
    assert r.returncode == 0 and "Ongoing" in r.stdout and topic in r.stdout, (r.stdout, r.stderr[-2000:])
    # find-hanging (DescribeProducers on the partition, then the coordinator's view of each
    # open transaction): this one is live on its coordinator, so nothing hangs.
    r = kafka_tool(tool, "--bootstrap-server", bootstrap, "find-hanging", "--topic", topic, "--max-transaction-timeout", "0")
    assert r.returncode == 0, (r.stdout, r.stderr[-2000:])
    assert not [l for l in r.stdout.splitlines() if topic in l], r.stdout
    r = kafka_tool(tool, "--bootstrap-server", bootstrap, "abort", "--topic", topic, "--partition", "0", "--start-offset", "2")
    assert r.returncode == 0, (r.stdout, r.stderr[-2000:])
    # The abort marker is at 5: the LSO reaches the high watermark, the records never show.
    assert wait_stable(bootstrap, topic, 1) == {0: 6}
    assert [v for _, _, v in consume_all(bootstrap, topic, 1, READ_COMMITTED)[0]] == [b"kept"]
    r = kafka_tool(tool, "--bootstrap-server", bootstrap, "describe-producers", "--topic", topic, "--partition", "0")
    rows = [l.split() for l in r.stdout.splitlines()[1:] if l.strip()]
    assert [row[start_col] for row in rows] == ["None"], r.stdout


def test_shardlog_txn_cli_lists_and_aborts_an_open_transaction(bootstrap):
    """`shardlog txn list|producers|abort`: the open transaction is listed Ongoing by its
    coordinator, its producer shows the start offset on the partition, and aborting it there
    releases the LSO without delivering its records."""
    skip_unless_shardlog("shardlog's own CLI")
    topic = _topic(bootstrap, "own-cli", 2)
    txn_id = f"txn-own-cli-{_uid()}"
    p = txn_producer(bootstrap, txn_id)
    p.begin_transaction()
    for i in range(2):
        p.produce(topic, value=f"open-{i}".encode(), partition=1)
    assert p.flush(BOUND_S) == 0
    listed = shardlog_cli("txn", "list", "--bootstrap", bootstrap).stdout
    assert any(txn_id in l and "Ongoing" in l for l in listed.splitlines()), listed
    rows = [l.split() for l in shardlog_cli("txn", "producers", topic, "--bootstrap", bootstrap).stdout.splitlines()[1:]]
    assert [(r[0], r[4]) for r in rows if r[4] != "-"] == [("1", "0")], rows
    bad = shardlog_cli("txn", "abort", topic, "--partition", "1", "--start-offset", "7", "--bootstrap", bootstrap, check=False)
    assert bad.returncode != 0 and "no transaction starts at offset 7" in bad.stderr, bad.stderr
    shardlog_cli("txn", "abort", topic, "--partition", "1", "--start-offset", "0", "--bootstrap", bootstrap)
    assert wait_stable(bootstrap, topic, 2) == {0: 0, 1: 3}
    assert consume_all(bootstrap, topic, 2, READ_COMMITTED) == {0: [], 1: []}
