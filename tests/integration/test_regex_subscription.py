"""KIP-848 regex subscriptions: the coordinator resolves a member's SubscribedTopicRegex
against the topics (RE2 syntax, whole-name match, internal topics matched like any other)
and re-resolves when topics are created or deleted, as Kafka 4.4 does. Driven by the Java
4.1 consumer's subscribe(SubscriptionPattern) and librdkafka's KIP-848 consumer with a
`^regex` subscription (librdkafka sends its regexes to the coordinator with
group.protocol=consumer). An invalid pattern is refused with INVALID_REGULAR_EXPRESSION.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
import uuid

from confluent_kafka import Consumer, Producer

from clients import JAVA_JAR, admin, admin_create_topic
from test_groups_kip848 import kip848_broker

WAIT_S = 90  # safety net for each step; a step normally takes a few heartbeats


class JavaPatternWorker:
    """The Java tool's `pattern-worker`, its JSON lines read on a thread."""

    def __init__(self, bootstrap: str, group: str, pattern: str):
        assert JAVA_JAR.exists(), f"{JAVA_JAR} missing: mvn -f tests/java/pom.xml package"
        self.proc = subprocess.Popen(
            ["java", "-Xmx256m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-jar", str(JAVA_JAR),
             "pattern-worker", "--bootstrap", bootstrap, "--group", group, "--pattern", pattern],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True)
        self.lines: queue.Queue[dict] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            if line.startswith("{"):
                self.lines.put(json.loads(line))

    def wait_for(self, what: str, pred) -> dict:
        """The first line satisfying `pred` (earlier lines are consumed)."""
        deadline = time.monotonic() + WAIT_S
        seen = []
        while time.monotonic() < deadline:
            try:
                d = self.lines.get(timeout=1)
            except queue.Empty:
                if self.proc.poll() is not None and self.lines.empty():
                    break
                continue
            seen.append(d)
            if pred(d):
                return d
        raise AssertionError(f"pattern-worker: no {what}; saw {seen[-10:]}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _delete_topic(bootstrap: str, name: str):
    a = admin(bootstrap)
    a.delete_topics([name], operation_timeout=30)[name].result(timeout=60)


def test_java_pattern_follows_created_and_deleted_topics(broker_factory):
    b = kip848_broker(broker_factory)
    prefix = f"rx-{uuid.uuid4().hex[:8]}-"
    admin_create_topic(b.bootstrap, prefix + "a", 2)
    admin_create_topic(b.bootstrap, "not-" + prefix + "x", 1)  # matches only as a substring
    w = JavaPatternWorker(b.bootstrap, "g-" + prefix, prefix + ".*")
    try:
        w.wait_for("assignment of a", lambda d: d.get("assignment") == [prefix + "a-0", prefix + "a-1"])
        admin_create_topic(b.bootstrap, prefix + "b", 1)
        w.wait_for("assignment of a and b",
                   lambda d: d.get("assignment") == [prefix + "a-0", prefix + "a-1", prefix + "b-0"])
        p = Producer({"bootstrap.servers": b.bootstrap})
        p.produce(prefix + "b", b"v", key=b"k")
        assert p.flush(30) == 0
        w.wait_for("the record of b", lambda d: d.get("record") == prefix + "b-0")
        _delete_topic(b.bootstrap, prefix + "a")
        w.wait_for("assignment of b only", lambda d: d.get("assignment") == [prefix + "b-0"])
    finally:
        w.stop()


def test_java_pattern_matches_internal_topics(broker_factory):
    """Kafka 4.4's coordinator resolves a regex against every topic: `.*` is assigned the
    partitions of __consumer_offsets too (created by the group's own FindCoordinator), and
    the member reads its records (the group's own commits are among them)."""
    b = kip848_broker(broker_factory)
    name = f"rxi-{uuid.uuid4().hex[:8]}"
    admin_create_topic(b.bootstrap, name, 1)
    w = JavaPatternWorker(b.bootstrap, "g-" + name, ".*")
    try:
        d = w.wait_for("__consumer_offsets in the assignment",
                       lambda d: any(tp.startswith("__consumer_offsets-") for tp in d.get("assignment", ())))
        assert name + "-0" in d["assignment"], d
    finally:
        w.stop()


def test_java_invalid_pattern_is_refused(broker_factory):
    b = kip848_broker(broker_factory)
    w = JavaPatternWorker(b.bootstrap, "g-bad-" + uuid.uuid4().hex[:8], "rx-(")
    try:
        d = w.wait_for("an error", lambda d: "error" in d)
        assert d["error"] == "InvalidRegularExpression", d
        assert "rx-(" in d["message"], d
        assert w.proc.wait(30) == 1
    finally:
        w.stop()


def test_librdkafka_kip848_regex(broker_factory):
    b = kip848_broker(broker_factory)
    prefix = f"rxl-{uuid.uuid4().hex[:8]}-"
    admin_create_topic(b.bootstrap, prefix + "a", 1)
    admin_create_topic(b.bootstrap, "other-" + prefix, 1)
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "g-" + prefix, "group.protocol": "consumer",
                  "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 1000})

    def wait_assignment(want: set[str]):
        deadline = time.monotonic() + WAIT_S
        got = set()
        while time.monotonic() < deadline:
            c.poll(0.2)
            got = {f"{tp.topic}-{tp.partition}" for tp in c.assignment()}
            if got == want:
                return
        raise AssertionError(f"librdkafka assignment {got}, want {want}")

    try:
        c.subscribe([f"^{prefix}.*"])
        wait_assignment({prefix + "a-0"})
        admin_create_topic(b.bootstrap, prefix + "b", 1)
        wait_assignment({prefix + "a-0", prefix + "b-0"})
        _delete_topic(b.bootstrap, prefix + "a")
        wait_assignment({prefix + "b-0"})
    finally:
        c.close()
