"""A Kafka Streams 4.4 application with group.protocol=streams (KIP-1071) against the
broker: the word count (tests/java StreamsWordCount, Kafka's WordCountDemo), two
instances; `kafka-streams-groups.sh --list / --describe --state / --members` see the
group, its two members and their tasks. Its output is complete (the last count of each word is its number of
occurrences); when one instance stops its tasks move to the other, which keeps counting;
restarted, it rejoins, and when the other is killed (kill -9, its session times out)
it takes every task over. Both targets (each finalizes streams.version 1 in a new cluster).
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
import uuid
from collections import Counter

from confluent_kafka import Consumer, Producer

from clients import JAVA_JAR, admin_create_topic, kafka_tool
from conftest import is_kafka, wait_for

BOUND_S = 180


class WordCount:
    def __init__(self, bootstrap: str, app: str, source: str, sink: str, state_dir: str):
        self.proc = subprocess.Popen(
            ["java", "-Xmx384m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", str(JAVA_JAR), "shardlog.tests.StreamsWordCount",
             "--bootstrap", bootstrap, "--app-id", app, "--input", source, "--output", sink, "--state-dir", state_dir],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        self.states: list[str] = []
        self.errors: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._err, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            if line.startswith("{"):
                d = json.loads(line)
                if "state" in d:
                    self.states.append(d["state"])

    def _err(self):
        for line in self.proc.stderr:
            self.errors.append(line.rstrip())

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def streams_groups_tool(bootstrap: str, *args: str) -> str:
    r = kafka_tool("org.apache.kafka.tools.streams.StreamsGroupCommand", "--bootstrap-server", bootstrap, *args)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def latest_counts(bootstrap: str, sink: str, until) -> dict[str, int]:
    """Reads the output topic from the start until `until(counts)` holds; the last count of each word."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "wc-reader-" + uuid.uuid4().hex, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([sink])
    counts: dict[str, int] = {}
    try:
        def done():
            for m in c.consume(500, 1):
                if m.error() is None:
                    counts[m.key().decode()] = int.from_bytes(m.value(), "big", signed=True)
            return until(counts)
        wait_for("the counts", done, BOUND_S)
    finally:
        c.close()
    return counts


def test_word_count_with_the_streams_protocol(broker_factory, tmp_path):
    b = broker_factory()
    bs = b.bootstrap
    # Streams groups are on in a new cluster (streams.version 1, as Kafka 4.4 formats one).
    r = kafka_tool("org.apache.kafka.tools.FeatureCommand", "--bootstrap-server", bs, "describe")
    assert re.search(r"Feature: streams.version\s+SupportedMinVersion: 0\s+SupportedMaxVersion: 1\s+FinalizedVersionLevel: 1\b", r.stdout), r.stdout + r.stderr
    tag = uuid.uuid4().hex[:6]
    app, source, sink = f"wordcount-{tag}", f"lines-{tag}", f"counts-{tag}"
    admin_create_topic(bs, source, 2)
    admin_create_topic(bs, sink, 2)
    words = ["apple", "banana", "cherry", "date", "elder", "fig"]
    want: Counter = Counter()
    p = Producer({"bootstrap.servers": bs, "acks": "all"})

    def send(n: int, start: int):
        for i in range(start, start + n):
            line = " ".join(words[(i + j) % len(words)] for j in range(3))
            want.update(line.split())
            p.produce(source, line.encode(), key=str(i).encode())
        assert p.flush(30) == 0

    apps = [WordCount(bs, app, source, sink, str(tmp_path / f"state-{i}")) for i in range(2)]
    try:
        wait_for("both instances running", lambda: all(a.states and a.states[-1] == "RUNNING" for a in apps) or any(a.proc.poll() is not None for a in apps), BOUND_S)
        assert all(a.proc.poll() is None for a in apps), [a.errors[-20:] for a in apps]
        send(300, 0)
        counts = latest_counts(bs, sink, lambda c: c == dict(want))
        assert counts == dict(want)
        # kafka-streams-groups.sh sees the group, its two members and their tasks.
        assert app in streams_groups_tool(bs, "--list").split()
        wait_for("a stable group of two", lambda: re.search(r"Stable\s+2\b", streams_groups_tool(bs, "--describe", "--group", app, "--state")), BOUND_S)
        members = streams_groups_tool(bs, "--describe", "--group", app, "--members")
        assert members.count("ACTIVE:") == 2, members
        # One instance stops (leaves the group): the other takes its tasks and keeps counting.
        apps[0].stop()
        send(300, 300)
        counts = latest_counts(bs, sink, lambda c: c == dict(want))
        assert counts == dict(want)
        assert apps[1].proc.poll() is None
        # It comes back; then the other is killed (kill -9: no leave, its session times out)
        # and the restarted one takes every task over and keeps counting.
        apps[0] = WordCount(bs, app, source, sink, str(tmp_path / "state-0b"))
        wait_for("the restarted instance running", lambda: apps[0].states[-1:] == ["RUNNING"] or apps[0].proc.poll() is not None, BOUND_S)
        send(300, 600)
        counts = latest_counts(bs, sink, lambda c: c == dict(want))
        apps[1].proc.kill()
        apps[1].proc.wait()
        send(300, 900)
        counts = latest_counts(bs, sink, lambda c: c == dict(want))
        assert counts == dict(want)
        assert apps[0].proc.poll() is None, apps[0].errors[-20:]
    finally:
        for a in apps:
            a.stop()
