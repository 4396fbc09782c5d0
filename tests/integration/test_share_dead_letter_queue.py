"""Share groups' dead-letter queue (KIP-1191, share.version 2) with the Java
KafkaShareConsumer 4.4, both targets: a group whose `errors.deadletterqueue.topic.name` is
set sends every record a member rejects, and every record delivered
share.delivery.count.limit times, to that topic before archiving it; with
`errors.deadletterqueue.copy.record.enable` the original value goes too. Each dead letter
carries Kafka's `__dlq.errors.*` headers. A queue that cannot take them (the topic has not
opted in with errors.deadletterqueue.group.enable) still lets the records be archived, and
stays empty. The group config refuses an internal name.

The consumers are `test_share_consumer_java.py`'s explicit workers: a record's value picks
its fate (r...7 rejected, r...5 released every time, the rest accepted)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from admin_api import scrape
from clients import admin_create_topic, kafka_tool
from conftest import is_kafka, wait_for
from test_share_consumer_java import (BOUND_S, LIMIT, Producing, ShareWorker, rule, run_to_the_end, set_group_configs, wait_assigned,
                                      wait_members)
from test_share_groups import configs_tool, share_broker

AUTO_CREATE = {"errors.deadletterqueue.auto.create.topics.enable": "true"}


def set_dead_letter_queue(bootstrap: str, group: str, topic: str, copy: bool):
    configs_tool(bootstrap, "--alter", "--entity-type", "groups", "--entity-name", group, "--add-config",
                 f"errors.deadletterqueue.topic.name={topic},errors.deadletterqueue.copy.record.enable={str(copy).lower()}")


def read_all(bootstrap: str, topic: str, expected: int, quiet_s: float = 5.0) -> list:
    """Every record of `topic`'s partition 0 once `expected` have come and nothing more for `quiet_s`."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{topic}", "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    out = []
    try:
        parts = [TopicPartition(topic, p, 0) for p in range(partitions_of(bootstrap, topic))]
        c.assign(parts)
        deadline, last = time.monotonic() + BOUND_S, time.monotonic()
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                out.append(m)
                last = time.monotonic()
            elif len(out) >= expected and time.monotonic() - last > quiet_s:
                break
        return out
    finally:
        c.close()


def partitions_of(bootstrap: str, topic: str) -> int:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=30)
    return len(md.topics[topic].partitions)


def headers(m) -> dict[str, str]:
    return {k: v.decode() for k, v in (m.headers() or [])}


def topic_config(bootstrap: str, topic: str, key: str) -> str:
    a = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return a.describe_configs([res])[res].result(30)[key].value


def run_workload(b, topic: str, group: str, records: int):
    events, lock = [], threading.Lock()
    workers = [ShareWorker(b.bootstrap, group, topic, "explicit", f"w{i}", events, lock) for i in range(2)]
    wait_members(b.bootstrap, group, 2)
    wait_assigned(b.bootstrap, group, topic, 2)
    produced = Producing(b.bootstrap, topic)
    produced.send(records, rate=100)
    judge = run_to_the_end(workers, events, lock, produced, True)
    problems = judge.problems(produced.value_at)
    assert not problems, "\n".join(problems[:30])
    return produced, judge


def test_rejected_and_exhausted_records_reach_the_dead_letter_queue(broker_factory, topic_name):
    """Auto-created queue, originals copied: one dead letter per rejected record and per
    record released up to the limit, with Kafka's headers and the original value; none for
    accepted records."""
    b = share_broker(broker_factory, AUTO_CREATE)
    group, dlq = f"sdlq-{topic_name}", f"dlq.{topic_name}"
    admin_create_topic(b.bootstrap, topic_name, 1)
    set_group_configs(b.bootstrap, group)
    set_dead_letter_queue(b.bootstrap, group, dlq, copy=True)
    produced, judge = run_workload(b, topic_name, group, 100)

    # Dead letters: the rejected (r..7) and the released-every-time (r..5) records whose
    # final acknowledgement was answered (an unknown outcome proves nothing).
    rejected = {o for o, v in produced.value_at.items() if rule(v) == 7 and judge.finals.get(o)}
    exhausted = {o for o, v in produced.value_at.items() if rule(v) == 5 and judge.finals.get(o)}
    assert rejected and exhausted, judge.summary()
    wait_for(f"{dlq} created", lambda: partitions_of(b.bootstrap, dlq) > 0, 60)
    letters = read_all(b.bootstrap, dlq, len(rejected | exhausted))
    by_offset = {}
    for m in letters:
        h = headers(m)
        assert (h["__dlq.errors.topic"], h["__dlq.errors.partition"], h["__dlq.errors.group"]) == (topic_name, "0", group), h
        offset = int(h["__dlq.errors.offset"])
        assert offset not in by_offset, f"offset {offset} dead-lettered twice on a clean run"
        by_offset[offset] = (h, m.value().decode() if m.value() is not None else None)
    missing = sorted((rejected | exhausted) - set(by_offset))
    assert not missing, f"no dead letter for {missing[:20]}"
    unexpected = sorted(o for o in by_offset if rule(produced.value_at.get(o, "r0")) not in (5, 7))
    assert not unexpected, f"dead letters for records not rejected nor exhausted: {unexpected[:20]}"
    for o, (h, value) in by_offset.items():
        assert value == produced.value_at[o], f"offset {o}: the copy is {value!r}, produced {produced.value_at[o]!r}"
        if o in rejected:
            assert h["__dlq.errors.message"] == "Offset rejected by client.", h
            assert h["__dlq.errors.delivery.count"] == "1", h
        if o in exhausted:
            assert h["__dlq.errors.message"] == "Offset delivery count exceeded the threshold.", h
            assert h["__dlq.errors.delivery.count"] == str(LIMIT), h
    # The created queue opted in, as Kafka creates it.
    assert topic_config(b.bootstrap, dlq, "errors.deadletterqueue.group.enable") == "true"
    if not is_kafka():
        metrics = scrape(b.admin_url)
        # Counted per group, as Kafka's dead-letter meters.
        assert metrics.total("shardlog_share_dead_letter_records_total", group=group, result="written") >= len(by_offset)


def test_a_queue_that_has_not_opted_in_stays_empty_and_records_are_archived(broker_factory, topic_name):
    """The group names an existing topic without errors.deadletterqueue.group.enable: the
    rejected and exhausted records are archived all the same (never delivered again, the
    judge checks) and nothing is written there. Without copy, a queue that did opt in gets
    headers only. The two groups run at once (each waits out a lock duration of quiet)."""
    b = share_broker(broker_factory)
    group, dlq = f"sdlq-off-{topic_name}", f"dlq.off-{topic_name}"
    topic2, group2, dlq2 = f"{topic_name}-2", f"sdlq-on-{topic_name}", f"dlq.on-{topic_name}"
    for t in (topic_name, dlq, topic2, dlq2):
        admin_create_topic(b.bootstrap, t, 1)
    configs_tool(b.bootstrap, "--alter", "--entity-type", "topics", "--entity-name", dlq2, "--add-config", "errors.deadletterqueue.group.enable=true")
    for g, q in ((group, dlq), (group2, dlq2)):
        set_group_configs(b.bootstrap, g)
        set_dead_letter_queue(b.bootstrap, g, q, copy=False)
    with ThreadPoolExecutor(2) as pool:
        off, on = pool.submit(run_workload, b, topic_name, group, 40), pool.submit(run_workload, b, topic2, group2, 20)
        (produced, judge), (produced2, judge2) = off.result(), on.result()

    assert any(rule(v) == 7 and judge.finals.get(o) for o, v in produced.value_at.items())
    assert read_all(b.bootstrap, dlq, 0, quiet_s=3) == [], "a topic that did not opt in got dead letters"
    if not is_kafka():
        metrics = scrape(b.admin_url)
        # Per group: the group whose queue did not opt in wrote nothing.
        assert metrics.total("shardlog_share_dead_letter_records_total", group=group, result="not_written") > 0
        assert metrics.total("shardlog_share_dead_letter_records_total", group=group, result="written") == 0

    # The queue that opted in, without copy: headers only.
    expected = {o for o, v in produced2.value_at.items() if rule(v) in (5, 7) and judge2.finals.get(o)}
    letters = read_all(b.bootstrap, dlq2, len(expected))
    assert {int(headers(m)["__dlq.errors.offset"]) for m in letters} == expected
    assert all(m.value() is None and m.key() is None for m in letters), "copy.record.enable=false: headers only"


def test_the_group_config_refuses_an_internal_name(broker_factory):
    b = share_broker(broker_factory)
    r = kafka_tool("org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", b.bootstrap, "--alter", "--entity-type", "groups",
                   "--entity-name", "g-internal", "--add-config", "errors.deadletterqueue.topic.name=__dlq")
    assert r.returncode != 0 and "DLQ topic name must not start with '__'" in r.stdout + r.stderr, r.stdout + r.stderr
