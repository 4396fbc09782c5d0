"""A producer under load for tests that change the cluster while it writes
(test_quorum_membership.py, test_cluster_decommission.py): idempotent, acks=all,
sequence-number values round-robin over a topic's partitions, on its own thread until
finished; then `check` reads every partition back and judges the history with
replication_check.check_log (lost, duplicated, double-acknowledged records)."""

from __future__ import annotations

import threading
import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition

from replication_check import LogCheck, check_log


class AckedLoad:
    def __init__(self, bootstrap: str, topic: str, partitions: int):
        self.topic, self.partitions = topic, partitions
        self.acked: list[tuple[int, int, bytes]] = []
        self.errors: list[str] = []
        self.sent = 0
        self._stop = threading.Event()
        self._p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                            "linger.ms": 5, "message.timeout.ms": 300000})
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "AckedLoad":
        self.thread.start()
        return self

    def _report(self, err, msg):
        if err is None:
            self.acked.append((msg.partition(), msg.offset(), msg.value()))
        else:
            self.errors.append(str(err))

    def _run(self):
        while not self._stop.is_set():
            try:
                self._p.produce(self.topic, value=b"%010d" % self.sent, partition=self.sent % self.partitions,
                                on_delivery=self._report)
                self.sent += 1
            except BufferError:
                pass
            self._p.poll(0.01)
        self._p.flush(300)

    def finish(self) -> None:
        """Stops writing and waits for every answer (message.timeout.ms bounds it)."""
        self._stop.set()
        self.thread.join(320)
        assert not self.thread.is_alive(), "the producer finished"

    def check(self, bootstrap: str, deadline_s: float = 120) -> LogCheck:
        """Reads every partition up to its highest acknowledged offset and checks the log
        against what was acknowledged."""
        ends: dict[int, int] = {}
        for part, off, _ in self.acked:
            ends[part] = max(ends.get(part, 0), off + 1)
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"rd-{uuid.uuid4().hex[:8]}",
                      "enable.auto.commit": False, "check.crcs": True, "auto.offset.reset": "error"})
        try:
            c.assign([TopicPartition(self.topic, p, 0) for p in range(self.partitions)])
            got: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(self.partitions)}
            pending = {p for p in range(self.partitions) if ends.get(p, 0) > 0}
            deadline = time.monotonic() + deadline_s
            while pending:
                assert time.monotonic() < deadline, f"partitions {sorted(pending)} not read up to {ends}"
                for m in c.consume(num_messages=10_000, timeout=1.0):
                    assert not m.error(), m.error()
                    got[m.partition()].append((m.offset(), m.value()))
                    if m.offset() + 1 >= ends[m.partition()]:
                        pending.discard(m.partition())
        finally:
            c.close()
        return check_log([b"%010d" % i for i in range(self.sent)], self.acked, got)
