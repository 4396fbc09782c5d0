"""The recorder: a workload of real confluent-kafka clients against any Kafka-compatible
broker, every operation written to a history (format: history.py).

    python3 -m tests.history.workload --bootstrap 127.0.0.1:9092 --out history.jsonl \
        [--duration 30] [--partitions 6] [--producers 3] [--consumers 2] [--group-consumers 2] \
        [--txn-producers 2 --rc-consumers 1] [--acks all|1] [--seed 1] [--check]

Processes (one thread each):
  p<i>  producer: unique values "p<i>-<seq>" to seeded-random partitions at --rate per
        second; acks=all + idempotent (default) or acks=1 (not idempotent). Every send is
        recorded with its delivery report (ok: partition, offset; fail: error) or, if no
        report came by the end, as unknown ("info").
  t<i>  transactional producer (transactional.id): transactions of 1..--txn-max sends
        ("t<i>-<seq>"), each committed or aborted at random (--abort-ratio); recorded as
        a txn op with its outcome (committed / aborted / unknown).
  c<i>  consumer with all partitions assigned, read_uncommitted, from the log start; every
        --reassign-every seconds it starts a new session (a new consumer) at a seeded-random
        earlier offset, so old data is read again.
  r<i>  the same with isolation.level=read_committed.
  g<i>  consumer-group member (one group, subscribe, eager range assignment): commits the
        offsets it read every --commit-every seconds and on revoke (sync, recorded), and
        starts each assignment at the committed offsets it fetched (recorded).
After the run (producers stopped and flushed, consumers given --tail seconds), a final
drain reads every partition from its log start to its end (read_uncommitted, and also
read_committed when transactions ran), so "lost" has a precise meaning.
`--check` runs the checker on the history at the end (exit code: the checker's).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
import traceback
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .history import HistoryWriter

RU, RC = "read_uncommitted", "read_committed"
# Delivery errors after which the write may or may not be in the log: recorded as unknown.
UNKNOWN_OUTCOME = {KafkaError._MSG_TIMED_OUT, KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT,
                   KafkaError._PURGE_INFLIGHT}


@dataclass
class Config:
    topic: str = ""
    partitions: int = 6
    replication: int = 1
    min_insync: int | None = None
    create_topic: bool = True
    duration_s: float = 30.0
    seed: int = 0
    producers: int = 3
    rate: float = 100.0  # sends per second, per producer
    acks: str = "all"  # "all" (idempotent) or "1" (not idempotent)
    message_timeout_ms: int = 60000
    consumers: int = 2
    rc_consumers: int = 0
    reassign_every_s: float = 10.0  # 0: one session per consumer
    group_consumers: int = 0
    group: str = ""
    commit_every_s: float = 1.0
    txn_producers: int = 0
    txn_max: int = 5
    abort_ratio: float = 0.3
    transaction_timeout_ms: int = 10000
    tail_s: float = 3.0  # consumers keep reading after the producers stopped
    drain_wait_s: float = 90.0  # bound on waiting for the high watermarks to reach every ack
    compacted: bool = False  # cleanup.policy=compact, small segments, an eager cleaner
    topic_config: dict = field(default_factory=dict)  # more configs of the created topic
    keys: int = 0  # > 0: each plain send carries one of this many keys (a compacted topic needs keys)
    extra_producer: dict = field(default_factory=dict)
    extra_consumer: dict = field(default_factory=dict)


def _value(msg) -> str:
    v = msg.value()
    return "" if v is None else v.decode("utf-8", "backslashreplace")


def _err(e) -> tuple[str, int | None]:
    if isinstance(e, KafkaException) and e.args and isinstance(e.args[0], KafkaError):
        e = e.args[0]
    if isinstance(e, KafkaError):
        return e.name(), e.code()
    return repr(e), None


class Workload:
    """Start, let it run (a nemesis may act meanwhile), stop, drain, close."""

    def __init__(self, bootstrap: str, cfg: Config, history: Path | str | None):
        if not cfg.topic:
            cfg.topic = f"history-{uuid.uuid4().hex[:8]}"
        if not cfg.group:
            cfg.group = f"history-group-{uuid.uuid4().hex[:8]}"
        if cfg.acks not in ("all", "1", "-1"):
            raise ValueError("acks: all or 1")
        self.bootstrap = bootstrap
        self.cfg = cfg
        self.h = HistoryWriter(history)
        self.rng = random.Random(cfg.seed)
        self.stop_producing = threading.Event()
        self.stop_consuming = threading.Event()
        self.threads: list[threading.Thread] = []
        self.errors: list[str] = []  # crashed worker threads (a bug in the workload or client)
        self._acked_end: dict[int, int] = {}
        self._acked_lock = threading.Lock()

    # -- setup ------------------------------------------------------------------------
    def create_topic(self, deadline_s: float = 60) -> None:
        cfg = self.cfg
        conf = {}
        if cfg.min_insync is not None:
            conf["min.insync.replicas"] = str(cfg.min_insync)
        if cfg.compacted:
            # Segments roll every few seconds and the cleaner takes any dirty ratio, so
            # compaction runs (and removes superseded records) during the run.
            conf.update({"cleanup.policy": "compact", "segment.ms": "3000", "min.cleanable.dirty.ratio": "0.01"})
        conf.update(cfg.topic_config)
        a = AdminClient({"bootstrap.servers": self.bootstrap})
        fut = a.create_topics([NewTopic(cfg.topic, cfg.partitions, cfg.replication, config=conf)],
                              operation_timeout=30)[cfg.topic]
        fut.result(timeout=60)
        deadline = time.monotonic() + deadline_s
        while True:
            try:
                t = a.list_topics(cfg.topic, timeout=10).topics.get(cfg.topic)
                if t is not None and t.error is None and len(t.partitions) == cfg.partitions \
                        and all(p.leader >= 0 for p in t.partitions.values()):
                    return
            except KafkaException:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"topic {cfg.topic}: not every partition has a leader within {deadline_s} s")
            time.sleep(0.2)

    def _thread(self, name: str, fn: Callable, *args) -> None:
        def body():
            try:
                fn(*args)
            except Exception:
                self.errors.append(f"{name}: {traceback.format_exc()}")
                self.h.add(name, "crash", "info", error=traceback.format_exc(limit=3))
        t = threading.Thread(target=body, name=f"history-{name}", daemon=True)
        self.threads.append(t)
        t.start()

    def start(self) -> "Workload":
        cfg = self.cfg
        self.h.add("meta", "meta", topic=cfg.topic, partitions=cfg.partitions, bootstrap=self.bootstrap,
                   started_at=time.time(), config=asdict(cfg))
        if cfg.create_topic:
            self.create_topic()
        self.producer_threads = []
        for i in range(cfg.producers):
            self._thread(f"p{i}", self._produce, i, random.Random(self.rng.random()))
        for i in range(cfg.txn_producers):
            self._thread(f"t{i}", self._produce_txn, i, random.Random(self.rng.random()))
        self.n_producers = len(self.threads)
        for i in range(cfg.consumers):
            self._thread(f"c{i}", self._consume_assigned, f"c{i}", RU, random.Random(self.rng.random()))
        for i in range(cfg.rc_consumers):
            self._thread(f"r{i}", self._consume_assigned, f"r{i}", RC, random.Random(self.rng.random()))
        for i in range(cfg.group_consumers):
            self._thread(f"g{i}", self._consume_group, f"g{i}")
        return self

    # -- producers --------------------------------------------------------------------
    def _producer_conf(self, proc: str) -> dict:
        cfg = self.cfg
        idem = cfg.acks in ("all", "-1")
        return {"bootstrap.servers": self.bootstrap, "client.id": f"history-{proc}",
                "acks": "all" if idem else "1", "enable.idempotence": idem, "linger.ms": 5,
                "message.timeout.ms": cfg.message_timeout_ms, "log_level": 4, **cfg.extra_producer}

    def _note_ack(self, part: int, off: int) -> None:
        with self._acked_lock:
            if off + 1 > self._acked_end.get(part, 0):
                self._acked_end[part] = off + 1

    def _reporter(self, proc: str, pending: dict, txn_of: dict | None = None):
        def report(err, msg):
            v = _value(msg)
            t0 = pending.pop(v, (None, None))[1]
            extra = {}
            if txn_of is not None and v in txn_of:
                extra["txn"] = txn_of.pop(v)
            key = msg.key()
            if key is not None:
                extra["key"] = key.decode("utf-8", "backslashreplace")
            if err is None:
                self._note_ack(msg.partition(), msg.offset())
                self.h.add(proc, "send", "ok", value=v, partition=msg.partition(), offset=msg.offset(), t0=t0, **extra)
            else:  # a timeout says nothing about the write: unknown ("info"); others "fail"
                self.h.add(proc, "send", "info" if err.code() in UNKNOWN_OUTCOME else "fail", value=v,
                           partition=msg.partition(), error=err.name(), code=err.code(), t0=t0, **extra)
        return report

    def _produce(self, i: int, rng: random.Random) -> None:
        cfg, proc = self.cfg, f"p{i}"
        p = Producer(self._producer_conf(proc))
        pending: dict[str, tuple[int, float]] = {}
        report = self._reporter(proc, pending)
        seq = 0
        t_base = time.monotonic()
        while not self.stop_producing.is_set():
            now = time.monotonic()
            due = t_base + seq / cfg.rate
            if due > now:
                p.poll(min(due - now, 0.05))
                continue
            if now - due > 1.0:  # fell behind (a stall): do not burst more than 1 s worth
                t_base += now - due - 1.0
            v = f"p{i}-{seq}"
            part = rng.randrange(cfg.partitions)
            key = f"k{rng.randrange(cfg.keys)}".encode() if cfg.keys else None
            pending[v] = (part, self.h.now())
            try:
                p.produce(cfg.topic, value=v.encode(), key=key, partition=part, on_delivery=report)
            except BufferError:  # local queue full: not sent, not recorded, tried again
                del pending[v]
                p.poll(0.05)
                continue
            except KafkaException as e:
                del pending[v]
                name, code = _err(e)
                self.h.add(proc, "send", "fail", value=v, partition=part, error=name, code=code, t0=self.h.now())
            seq += 1
            p.poll(0)
        p.flush(cfg.message_timeout_ms / 1000 + 30)
        for v, (part, t0) in list(pending.items()):
            self.h.add(proc, "send", "info", value=v, partition=part, t0=t0, error="no delivery report")

    def _produce_txn(self, i: int, rng: random.Random) -> None:
        cfg, proc = self.cfg, f"t{i}"
        pending: dict[str, tuple[int, float]] = {}
        txn_of: dict[str, str] = {}
        report = self._reporter(proc, pending, txn_of)
        conf = {**self._producer_conf(proc), "acks": "all", "enable.idempotence": True,
                "transactional.id": f"history-{cfg.topic}-{proc}",
                "transaction.timeout.ms": cfg.transaction_timeout_ms,
                "message.timeout.ms": min(cfg.message_timeout_ms, cfg.transaction_timeout_ms)}
        p = None
        seq = n = 0
        while not self.stop_producing.is_set():
            if p is None:
                p = Producer(conf)
                try:
                    p.init_transactions(60)
                except KafkaException as e:
                    self.h.add(proc, "init", "fail", error=_err(e)[0])
                    p = None
                    time.sleep(1)
                    continue
            txn = f"{proc}-{n}"
            n += 1
            t_begin = self.h.now()
            decision = "abort" if rng.random() < cfg.abort_ratio else "commit"
            self.h.add(proc, "txn-begin", txn=txn, t=t_begin)
            try:
                p.begin_transaction()
                for _ in range(rng.randint(1, cfg.txn_max)):
                    v = f"t{i}-{seq}"
                    seq += 1
                    part = rng.randrange(cfg.partitions)
                    pending[v] = (part, self.h.now())
                    txn_of[v] = txn
                    while True:
                        try:
                            p.produce(cfg.topic, value=v.encode(), partition=part, on_delivery=report)
                            break
                        except BufferError:
                            p.poll(0.05)
                    p.poll(0)
                    time.sleep(1.0 / cfg.rate)
            except KafkaException as e:  # the transaction is broken: abort it if we can
                self.h.add(proc, "txn-error", "info", txn=txn, error=_err(e)[0])
                decision = "abort"
            # Every send answered before the end (an abort would purge unsent records; an
            # abort of a transaction none of whose records reached the broker gets
            # INVALID_TXN_STATE, a fatal error, from Kafka 4.1 with librdkafka 2.16).
            try:
                p.flush(cfg.transaction_timeout_ms / 1000)
            except KafkaException:
                pass
            t0 = self.h.now()
            outcome, error = self._end_txn(p, decision)
            self.h.add(proc, "txn", "ok" if outcome != "unknown" else "fail", txn=txn, decision=decision,
                       outcome=outcome, t_begin=t_begin, t0=t0, **({"error": error} if error else {}))
            if outcome == "unknown":  # a fatal error: a new producer (fences the old one)
                try:
                    p.flush(10)
                except KafkaException:
                    pass
                p = None
            for v in [v for v, t in txn_of.items() if t == txn]:  # no delivery report at all
                txn_of.pop(v)
                part, tv = pending.pop(v, (None, None))
                self.h.add(proc, "send", "info", value=v, partition=part, t0=tv, txn=txn, error="no delivery report")
        if p is not None:
            try:
                p.flush(30)
            except KafkaException:
                pass

    @staticmethod
    def _end_txn(p: Producer, decision: str) -> tuple[str, str | None]:
        """Commits or aborts; (outcome, first error). A commit that needs an abort is
        aborted; retriable errors are retried; anything else leaves the outcome unknown."""
        first = None
        for _ in range(5):
            try:
                if decision == "commit":
                    p.commit_transaction(60)
                    return "committed", first
                p.abort_transaction(60)
                return "aborted", first
            except KafkaException as e:
                err = e.args[0]
                first = first or err.name()
                if err.txn_requires_abort():
                    decision = "abort"
                    continue
                if err.retriable():
                    continue
                return "unknown", first
        return "unknown", first

    # -- consumers ----------------------------------------------------------------------
    def _consumer_conf(self, proc: str, isolation: str, group: str | None = None) -> dict:
        return {"bootstrap.servers": self.bootstrap, "client.id": f"history-{proc}",
                "group.id": group or f"history-{proc}-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False, "auto.offset.reset": "earliest",
                "isolation.level": isolation, "check.crcs": True, "log_level": 4,
                **self.cfg.extra_consumer}

    def _record_msgs(self, proc: str, session, msgs, last: dict[int, int] | None = None) -> None:
        ok = []
        for m in msgs:
            e = m.error()
            if e is not None:
                if e.code() != KafkaError._PARTITION_EOF:
                    self.h.add(proc, "poll", "fail", session=session, error=e.name(), code=e.code())
                continue
            ok.append([m.partition(), m.offset(), _value(m)])
            if last is not None:
                last[m.partition()] = m.offset()
        if ok:
            self.h.add(proc, "poll", "ok", session=session, msgs=ok)

    def _low_watermarks(self, c: Consumer, proc: str, bound_s: float = 15) -> dict[int, int | None]:
        """partition → log start offset; None where it stays unknown for `bound_s` (a
        partition without a leader just now). Failures are recorded (informational)."""
        out: dict[int, int | None] = {}
        deadline = time.monotonic() + bound_s
        for p in range(self.cfg.partitions):
            out[p] = None
            errors: list[str] = []
            while out[p] is None and not self.stop_consuming.is_set():
                try:
                    out[p] = c.get_watermark_offsets(TopicPartition(self.cfg.topic, p), timeout=5)[0]
                except KafkaException as e:
                    if not errors or errors[-1] != _err(e)[0]:
                        errors.append(_err(e)[0])
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.2)
            if errors:
                self.h.add(proc, "watermarks", "ok" if out[p] is not None else "fail", partition=p, errors=errors)
        return out

    def _consume_assigned(self, proc: str, isolation: str, rng: random.Random) -> None:
        cfg = self.cfg
        session = 0
        last: dict[int, int] = {}
        while not self.stop_consuming.is_set():
            c = Consumer(self._consumer_conf(proc, isolation))
            try:
                session += 1
                low = self._low_watermarks(c, proc)
                start: dict[int, int | None] = {}
                tps = []
                for p in range(cfg.partitions):
                    if low[p] is None:  # log start unknown just now (a leader moving)
                        if p in last:  # on from where the previous session stopped
                            start[p] = last[p] + 1
                            tps.append(TopicPartition(cfg.topic, p, start[p]))
                        else:  # from the beginning, wherever that is: not judged
                            start[p] = None
                            tps.append(TopicPartition(cfg.topic, p, OFFSET_BEGINNING))
                        continue
                    hi = last.get(p, low[p] - 1) + 1
                    start[p] = low[p] if session == 1 or hi <= low[p] else rng.randint(low[p], hi)
                    tps.append(TopicPartition(cfg.topic, p, start[p]))
                self.h.add(proc, "assign", session=session, isolation=isolation, start=start)
                c.assign(tps)
                until = time.monotonic() + cfg.reassign_every_s if cfg.reassign_every_s > 0 else float("inf")
                while not self.stop_consuming.is_set() and time.monotonic() < until:
                    self._record_msgs(proc, session, c.consume(num_messages=1000, timeout=0.5), last)
            finally:
                c.close()

    def _consume_group(self, proc: str) -> None:
        cfg = self.cfg
        conf = {**self._consumer_conf(proc, RU, group=cfg.group), "partition.assignment.strategy": "range",
                "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000}
        c = Consumer(conf)
        state = {"session": 0, "read": {}, "committed": {}, "active": False}

        def commit(consumer) -> None:
            offsets = {p: o + 1 for p, o in state["read"].items() if state["committed"].get(p) != o + 1}
            if not offsets:
                return
            t0 = self.h.now()
            try:
                res = consumer.commit(offsets=[TopicPartition(cfg.topic, p, o) for p, o in offsets.items()],
                                      asynchronous=False)
                errs = [f"{tp.partition}: {tp.error}" for tp in (res or []) if tp.error is not None]
                if errs:
                    self.h.add(proc, "commit", "fail", t0=t0, group=cfg.group, offsets=offsets,
                               session=state["session"], error="; ".join(errs))
                    return
                self.h.add(proc, "commit", "ok", t0=t0, group=cfg.group, offsets=offsets, session=state["session"])
                state["committed"].update(offsets)
            except KafkaException as e:
                self.h.add(proc, "commit", "fail", t0=t0, group=cfg.group, offsets=offsets,
                           session=state["session"], error=_err(e)[0])

        def on_assign(consumer, partitions):
            state["session"] += 1
            state["read"], state["committed"] = {}, {}
            start: dict[int, int | None] = {}
            t0 = self.h.now()
            try:
                got = consumer.committed(partitions, timeout=30)
                fetched = {tp.partition: tp.offset for tp in got if tp.error is None and tp.offset >= 0}
                # -1: no committed offset (a commit that completed before would make it an anomaly)
                self.h.add(proc, "committed", "ok", t0=t0, group=cfg.group,
                           offsets={tp.partition: max(tp.offset, -1) for tp in got if tp.error is None})
                unknown = {tp.partition for tp in got if tp.error is not None}
            except KafkaException as e:
                self.h.add(proc, "committed", "fail", t0=t0, group=cfg.group, error=_err(e)[0])
                fetched, unknown = {}, {tp.partition for tp in partitions}
            tps = []
            for tp in partitions:
                p = tp.partition
                if p in fetched:
                    start[p] = fetched[p]
                elif p not in unknown:  # no committed offset: auto.offset.reset=earliest
                    try:
                        start[p] = consumer.get_watermark_offsets(TopicPartition(cfg.topic, p), timeout=10)[0]
                    except KafkaException:
                        start[p] = None
                else:
                    start[p] = None
                tps.append(TopicPartition(cfg.topic, p, start[p] if start[p] is not None else OFFSET_BEGINNING))
            self.h.add(proc, "assign", session=state["session"], isolation=RU, start=start, group=cfg.group)
            state["committed"] = {p: o for p, o in fetched.items()}
            consumer.assign(tps)
            state["active"] = True

        def on_revoke(consumer, partitions):
            if state["active"]:
                commit(consumer)
                self.h.add(proc, "revoke", session=state["session"])
            state["active"] = False
            consumer.unassign()

        def on_lost(consumer, partitions):
            if state["active"]:
                self.h.add(proc, "revoke", session=state["session"], lost=True)
            state["active"] = False
            consumer.unassign()

        c.subscribe([cfg.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
        try:
            next_commit = time.monotonic() + cfg.commit_every_s
            while not self.stop_consuming.is_set():
                msgs = c.consume(num_messages=1000, timeout=0.5)
                if state["active"]:
                    self._record_msgs(proc, state["session"], msgs, state["read"])
                if time.monotonic() >= next_commit and state["active"]:
                    commit(c)
                    next_commit = time.monotonic() + cfg.commit_every_s
        finally:
            c.close()  # revokes: the last commit

    # -- end of the run -------------------------------------------------------------------
    def stop(self) -> None:
        """Stops the producers (every send answered or marked unknown), lets the consumers
        read the tail, stops them."""
        self.stop_producing.set()
        bound = self.cfg.message_timeout_ms / 1000 + 120
        for t in self.threads[:self.n_producers]:
            t.join(bound)
        deadline = time.monotonic() + self.cfg.tail_s
        while time.monotonic() < deadline:
            time.sleep(0.1)
        self.stop_consuming.set()
        for t in self.threads[self.n_producers:]:
            t.join(120)
        stuck = [t.name for t in self.threads if t.is_alive()]
        if stuck:
            self.errors.append(f"threads still running after stop: {stuck}")

    def drain(self) -> None:
        """Reads every partition from its log start to its end: read_uncommitted, and
        read_committed too when transactions ran. First waits (bounded) until each high
        watermark covers every acknowledged offset: a new leader's may trail briefly."""
        self._drain("drain", RU)
        if self.cfg.txn_producers or self.cfg.rc_consumers:
            self._drain("drain-rc", RC)

    def _drain(self, proc: str, isolation: str) -> None:
        cfg = self.cfg
        c = Consumer({**self._consumer_conf(proc, isolation), "enable.partition.eof": True})
        try:
            high: dict[int, int] = {}
            low: dict[int, int] = {}
            deadline = time.monotonic() + cfg.drain_wait_s
            for p in range(cfg.partitions):
                want = self._acked_end.get(p, 0)
                while True:
                    try:
                        low[p], high[p] = c.get_watermark_offsets(TopicPartition(cfg.topic, p), timeout=10)
                        if high[p] >= want:
                            break
                    except KafkaException:
                        pass
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.2)
            known = [p for p in range(cfg.partitions) if p in low]
            self.h.add(proc, "assign", session=0, isolation=isolation, start={p: low[p] for p in known})
            c.assign([TopicPartition(cfg.topic, p, low[p]) for p in known])
            eof: dict[int, int] = {}
            pending = {p for p in known}
            read_deadline = time.monotonic() + max(cfg.drain_wait_s, 120)
            last: dict[int, int] = {}
            while pending and time.monotonic() < read_deadline:
                msgs = c.consume(num_messages=5000, timeout=1.0)
                self._record_msgs(proc, 0, msgs, last)
                for m in msgs:
                    e = m.error()
                    # The end is where the broker says it is: the partition's EOF event.
                    if e is not None and e.code() == KafkaError._PARTITION_EOF:
                        eof[m.partition()] = max(eof.get(m.partition(), 0), m.offset())
                        if m.offset() >= high[m.partition()]:
                            pending.discard(m.partition())
            for p in range(cfg.partitions):
                if p in eof:
                    # Read from the log start up to the end the broker reported (the high
                    # watermark, or the last stable offset under read_committed).
                    self.h.add(proc, "drain", partition=p, isolation=isolation, start=low[p], end=eof[p],
                               complete=True, high=high.get(p))
                else:
                    self.h.add(proc, "drain", "info", partition=p, isolation=isolation, start=low.get(p),
                               end=last.get(p, -1) + 1, complete=False, high=high.get(p))
        finally:
            c.close()

    def close(self) -> None:
        self.h.close()


def run(bootstrap: str, cfg: Config, history: Path | str | None,
        during: Callable[[Workload], None] | None = None,
        before_drain: Callable[[Workload], None] | None = None) -> Workload:
    """The whole run: start, `during(workload)` (default: sleep cfg.duration_s; a nemesis
    sleeps the rest itself), stop, `before_drain(workload)`, drain. Returns the closed
    workload (`.h.ops`)."""
    w = Workload(bootstrap, cfg, history)
    try:
        w.start()
        if during is None:
            time.sleep(cfg.duration_s)
        else:
            during(w)
        w.stop()
        if before_drain is not None:
            before_drain(w)
        w.drain()
    finally:
        w.stop_producing.set()
        w.stop_consuming.set()
        w.close()
    return w


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, Config]:
    ap = argparse.ArgumentParser(prog="python3 -m tests.history.workload", description=__doc__.split("\n")[0])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--out", required=True, help="the history file (JSON lines)")
    ap.add_argument("--check", action="store_true", help="run the checker on the history afterwards")
    ap.add_argument("--topic", default="")
    ap.add_argument("--no-create-topic", action="store_true", help="the topic exists already")
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--replication", type=int, default=1)
    ap.add_argument("--min-insync", type=int, default=None)
    ap.add_argument("--duration", type=float, default=30.0, help="seconds of load")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--producers", type=int, default=3)
    ap.add_argument("--rate", type=float, default=100.0, help="sends per second per producer")
    ap.add_argument("--acks", choices=["all", "1"], default="all")
    ap.add_argument("--consumers", type=int, default=2)
    ap.add_argument("--rc-consumers", type=int, default=0)
    ap.add_argument("--reassign-every", type=float, default=10.0)
    ap.add_argument("--group-consumers", type=int, default=0)
    ap.add_argument("--commit-every", type=float, default=1.0)
    ap.add_argument("--txn-producers", type=int, default=0)
    ap.add_argument("--txn-max", type=int, default=5)
    ap.add_argument("--abort-ratio", type=float, default=0.3)
    ap.add_argument("--message-timeout-ms", type=int, default=60000)
    ap.add_argument("--compacted", action="store_true", help="a compacted topic (sends carry keys: --keys)")
    ap.add_argument("--keys", type=int, default=0, help="keys per send (default: 50 with --compacted, else none)")
    a = ap.parse_args(argv)
    cfg = Config(topic=a.topic, partitions=a.partitions, replication=a.replication, min_insync=a.min_insync,
                 create_topic=not a.no_create_topic, duration_s=a.duration, seed=a.seed,
                 producers=a.producers, rate=a.rate, acks=a.acks, consumers=a.consumers,
                 rc_consumers=a.rc_consumers, reassign_every_s=a.reassign_every,
                 group_consumers=a.group_consumers, commit_every_s=a.commit_every,
                 txn_producers=a.txn_producers, txn_max=a.txn_max, abort_ratio=a.abort_ratio,
                 message_timeout_ms=a.message_timeout_ms, compacted=a.compacted,
                 keys=a.keys or (50 if a.compacted else 0))
    return a, cfg


def main(argv: list[str] | None = None) -> int:
    a, cfg = parse_args(argv)
    w = run(a.bootstrap, cfg, a.out)
    print(f"workload: topic {cfg.topic}, {len(w.h.ops)} ops written to {a.out}", file=sys.stderr)
    for e in w.errors:
        print(f"workload: {e}", file=sys.stderr)
    if a.check:
        from .check import main as check_main
        rc = check_main([a.out])
        return rc or (3 if w.errors else 0)
    return 3 if w.errors else 0


if __name__ == "__main__":
    sys.exit(main())
