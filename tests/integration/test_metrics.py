"""Issue 25: the HTTP admin listener (/metrics, /v1/status/live, /v1/status/ready) on a
live broker and a 3-node cluster, asserting values, not just names: bytes and messages
in grow by what the test produced, a group's lag is what it left unconsumed,
under-replicated partitions follow a stopped follower, the active-controller gauge moves
when the controller is killed, a deliberately slow task is counted as a stall, a node
is not ready until its controller has a quorum; every metric the Grafana dashboard
(docs/grafana/shardlog.json) queries is exposed; logs: JSON lines parse, a log file holds
no ANSI escape.

Scrapes are parsed with Prometheus's own OpenMetrics parser (admin_api.py).
No timed assertions: every wait polls with a generous deadline.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import threading

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

import conftest
from admin_api import get, ready, scrape
from conftest import skip_unless_shardlog, wait_for

# A follower that stops fetching leaves the ISR after this long (Kafka: 30 s).
LAG_MS = 3000


def create(bootstrap: str, name: str, partitions: int, rf: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the result is in
    admin.create_topics([NewTopic(name, partitions, rf)], operation_timeout=30)[name].result(timeout=60)


def produce(bootstrap: str, topic: str, values: list[bytes], **conf) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    errors: list[str] = []
    for v in values:
        p.produce(topic, v, on_delivery=lambda err, _m: err and errors.append(str(err)))
        p.poll(0)
    assert p.flush(60) == 0
    assert not errors, errors


def produce_round_robin(bootstrap: str, topic: str, partitions: int, count: int, value: bytes) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        p.produce(topic, value, partition=i % partitions)
    assert p.flush(60) == 0


def consume_all_and_commit(bootstrap: str, topic: str, group: str, count: int) -> None:
    """Reads `count` records as `group` and commits its positions on every partition."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([topic])
    read = 0
    while read < count:
        read += sum(1 for m in c.consume(num_messages=count - read, timeout=2) if m.error() is None)
    c.commit(asynchronous=False)
    c.close()


def test_a_scrape_counts_what_was_produced_consumed_and_left_unconsumed(broker_factory, topic_name):
    skip_unless_shardlog("the admin listener is shardlog's")
    b = broker_factory(shards=2)
    assert get(b.admin_url + "/v1/status/live")[0] == 200
    wait_for("the broker to be ready", lambda: ready(b.admin_url)[0], 30)
    assert get(b.admin_url + "/nowhere")[0] == 404
    create(b.bootstrap, topic_name, 3)
    before = scrape(b.admin_url)
    produce_round_robin(b.bootstrap, topic_name, 3, 600, b"x" * 100)
    after = scrape(b.admin_url)
    messages_in = after.total("shardlog_topic_messages_in_total", topic=topic_name) - before.total("shardlog_topic_messages_in_total", topic=topic_name)
    bytes_in = after.total("shardlog_topic_bytes_in_total", topic=topic_name) - before.total("shardlog_topic_bytes_in_total", topic=topic_name)
    assert messages_in == 600
    # Record batch bytes: the values plus per-record and per-batch framing (uncompressed).
    assert 600 * 100 <= bytes_in < 600 * 100 * 1.5, bytes_in
    # The broker-wide figures add the shards' up.
    assert after.total("shardlog_shard_bytes_in_total") == after.total("shardlog_topic_bytes_in_total")
    assert after.total("shardlog_requests_total", request="Produce") > before.total("shardlog_requests_total", request="Produce")
    assert after.total("shardlog_request_total_time_seconds_count", request="Produce") == after.total("shardlog_requests_total", request="Produce")
    assert after.total("shardlog_topic_produce_requests_total", topic=topic_name) >= 3
    assert after.total("shardlog_topic_failed_produce_requests_total", topic=topic_name) == 0
    assert after.total("shardlog_leader_count") >= 3 and after.total("shardlog_under_replicated_partitions") == 0
    assert after.total("shardlog_active_controller_count") == 1
    # Errors by API and Kafka's error name, from any response.
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    with pytest.raises(Exception):
        admin.create_topics([NewTopic(topic_name, 3, 1)], operation_timeout=30)[topic_name].result(timeout=60)
    assert scrape(b.admin_url).total("shardlog_errors_total", request="CreateTopics", error="TOPIC_ALREADY_EXISTS") == 1

    # A group reads all 600 and commits; 150 more arrive (50 per partition): its lag.
    group = f"g-{topic_name}"
    consume_all_and_commit(b.bootstrap, topic_name, group, 600)
    produce_round_robin(b.bootstrap, topic_name, 3, 150, b"w" * 100)
    m = wait_for("the group's lag in /metrics",
                 lambda: (s := scrape(b.admin_url)).has("shardlog_consumer_group_lag", group=group) and s)
    lag = {ls["partition"]: v for ls, v in m.labelled("shardlog_consumer_group_lag") if ls["group"] == group}
    committed = sum(v for ls, v in m.labelled("shardlog_consumer_group_committed_offset") if ls["group"] == group)
    assert committed == 600 and lag == {"0": 50, "1": 50, "2": 50}, (lag, committed)
    assert m.total("shardlog_topic_bytes_out_total", topic=topic_name) >= 600 * 100
    assert m.total("shardlog_topic_fetch_requests_total", topic=topic_name) >= 1


def test_a_slow_task_is_counted_as_a_stall_under_its_name(broker_factory, monkeypatch):
    skip_unless_shardlog("the stall detector is shardlog's")
    monkeypatch.setenv("SHARDLOG_TEST_STALL_MS", "400")
    b = broker_factory(shards=2, extra_args=["--shard-stall-threshold-ms", "100"])
    task = "test stall (SHARDLOG_TEST_STALL_MS)"
    m = wait_for("the stall in /metrics", lambda: (s := scrape(b.admin_url)).total("shardlog_shard_stalls_total", task=task) >= 1 and s, 30)
    assert m.total("shardlog_shard_stalls_total", task=task, shard="0") == 1
    assert m.total("shardlog_shard_stall_duration_seconds_count", shard="0") >= 1
    assert m.total("shardlog_shard_stall_duration_seconds_sum", shard="0") >= 0.4
    assert any("reactor stall" in line and task in line for line in b.log_path.read_text().splitlines())


def test_io_uring_depth_counts_the_receives_of_idle_connections(broker_factory):
    """An idle connection keeps one receive in the kernel on its shard's main ring, so K
    more connections raise the in-kernel depth summed over shards by at least K."""
    skip_unless_shardlog("io_uring depth is shardlog's")
    b = broker_factory(shards=2)
    host, port = b.bootstrap.split(":")

    def steady_depth() -> float:
        # The least of a few scrapes: a transient file or network operation only adds.
        return min(scrape(b.admin_url).total("shardlog_shard_io_uring_in_kernel", ring="main") for _ in range(3))

    before = steady_depth()
    m = scrape(b.admin_url)
    for shard in ("0", "1"):
        for ring in ("main", "latency", "poll"):
            assert m.has("shardlog_shard_io_uring_queued", shard=shard, ring=ring)
            assert m.has("shardlog_shard_io_uring_in_kernel", shard=shard, ring=ring)
    conns = [socket.create_connection((host, int(port))) for _ in range(20)]
    try:
        wait_for("connections accepted", lambda: scrape(b.admin_url).total("shardlog_shard_connections") >= 20, 30)
        assert steady_depth() >= before + 20
    finally:
        for c in conns:
            c.close()


def test_compaction_progress_follows_the_cleaner(broker_factory, topic_name):
    """A compacted topic whose sealed segments were never cleaned is 100 % dirty and due
    for cleaning; once the cleaner ran, less is dirty and nothing is due."""
    skip_unless_shardlog("uses --log-cleaner-backoff-ms")
    b = broker_factory(shards=1, extra_args=["--log-cleaner-backoff-ms", "3600000"])
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    config = {"cleanup.policy": "compact", "segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.5"}
    admin.create_topics([NewTopic(topic_name, 1, 1, config=config)], operation_timeout=30)[topic_name].result(timeout=60)
    # Small batches, so the 4 KiB segments roll many times.
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0, "batch.num.messages": 5})
    for i in range(400):
        p.produce(topic_name, b"v" * 100, key=b"key-%d" % (i % 10))
    assert p.flush(60) == 0
    # Sealed segments count once their indexes are saved and their bytes synced.
    m = wait_for("sealed segments due for cleaning", lambda: (s := scrape(b.admin_url)).total("shardlog_log_cleaner_cleanable_partitions") == 1 and s, 60)
    assert m.total("shardlog_log_segments") >= 3
    assert m.total("shardlog_log_cleaner_max_dirty_percent") == 100, "nothing cleaned yet"
    assert m.total("shardlog_log_cleaner_uncleanable_partitions") == 0
    assert m.total("shardlog_log_cleaner_passes_total") == 0

    b.stop()
    b.extra_args = ["--log-cleaner-backoff-ms", "200"]
    b.start()
    m = wait_for("a cleaner pass", lambda: (s := scrape(b.admin_url)).total("shardlog_log_cleaner_passes_total") >= 1
                 and s.total("shardlog_log_cleaner_cleanable_partitions") == 0 and s, 60)
    assert m.total("shardlog_log_cleaner_max_dirty_percent") < 50
    assert m.total("shardlog_log_cleaner_bytes_written_total") < m.total("shardlog_log_cleaner_bytes_read_total")


def test_a_corrupt_index_is_counted_and_rebuilt(broker_factory, topic_name):
    """A sealed segment's index and time index damaged while the broker was down: the
    restart logs and counts each (storage_unreadable_files_total), rebuilds them from the
    log, and every record still reads."""
    skip_unless_shardlog("damages shardlog's index files")
    b = broker_factory(shards=1)
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic_name, 1, 1, config={"segment.bytes": "4096"})], operation_timeout=30)[topic_name].result(timeout=60)
    values = [b"record-%04d-" % i + b"x" * 100 for i in range(200)]
    produce(b.bootstrap, topic_name, values, **{"batch.num.messages": 5})
    b.stop()
    part = b.data_dir / f"{topic_name}-0"
    damaged = sorted(part.glob("*.index"))[:2] + sorted(part.glob("*.timeindex"))[:1]
    assert len(damaged) == 3, sorted(p.name for p in part.iterdir())
    for f in damaged:
        data = bytearray(f.read_bytes())
        data[14] ^= 0xFF  # the first payload byte (after the 14-byte header): its CRC no longer matches
        f.write_bytes(bytes(data))
    b.start()
    m = scrape(b.admin_url)
    assert m.total("shardlog_storage_unreadable_files_total", file="index") == 2
    assert m.total("shardlog_storage_unreadable_files_total", file="time_index") == 1
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": f"g-{topic_name}", "auto.offset.reset": "earliest"})
    c.subscribe([topic_name])
    got: list[bytes] = []
    try:
        wait_for("every record read back", lambda: got.extend(
            msg.value() for msg in c.consume(100, 1) if msg.error() is None) or len(got) >= len(values), 60)
    finally:
        c.close()
    assert got == values


def test_json_log_lines_parse_and_a_log_file_has_no_ansi_escape(broker_factory):
    skip_unless_shardlog("log_format is shardlog's")
    plain = broker_factory()
    assert "\x1b[" not in plain.log_path.read_text(), "a log written to a file holds no colour codes"
    js = broker_factory(extra_args=["--log-format", "json"])
    js.stop()
    lines = [ln for ln in js.log_path.read_text().splitlines() if ln.strip() and not ln.startswith("=====")]
    assert len(lines) > 5
    for ln in lines:
        doc = json.loads(ln)
        assert {"timestamp", "level", "target", "fields"} <= doc.keys(), ln
    assert any(json.loads(ln)["fields"].get("message", "").startswith("shardlog node") for ln in lines)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from conftest.running_cluster(tmp_path_factory, "metrics",
                                        extra_args=["--replica-lag-time-max-ms", str(LAG_MS)])


def cluster_total(cluster, name: str, **labels) -> float:
    return sum(scrape(nd.admin_url).total(name, **labels) for nd in cluster.nodes if nd.alive())


def test_under_replicated_partitions_follow_a_stopped_follower(cluster, topic_name):
    n1 = cluster.nodes[0]
    create(n1.bootstrap, topic_name, 3, rf=3)
    wait_for("every partition fully replicated", lambda: cluster_total(cluster, "shardlog_under_replicated_partitions") == 0)
    victim = cluster.nodes[2]
    victim.proc.send_signal(signal.SIGSTOP)
    try:
        produce(n1.bootstrap, topic_name, [b"x"] * 100, acks="1")
        urp = wait_for("under-replicated partitions while a follower is stopped",
                       lambda: (v := sum(scrape(nd.admin_url).total("shardlog_under_replicated_partitions")
                                         for nd in cluster.nodes if nd is not victim)) > 0 and v)
        assert urp >= 1
        assert sum(scrape(nd.admin_url).total("shardlog_isr_shrinks_total") for nd in cluster.nodes if nd is not victim) >= 1
    finally:
        victim.proc.send_signal(signal.SIGCONT)
    wait_for("no under-replicated partition once the follower caught up",
             lambda: cluster_total(cluster, "shardlog_under_replicated_partitions") == 0, 90)
    assert cluster_total(cluster, "shardlog_isr_expands_total") >= 1


def test_group_lag_covers_partitions_led_by_other_brokers(cluster, topic_name):
    n1 = cluster.nodes[0]
    create(n1.bootstrap, topic_name, 6, rf=1)
    produce_round_robin(n1.bootstrap, topic_name, 6, 600, b"z" * 50)
    group = f"g-{topic_name}"
    consume_all_and_commit(n1.bootstrap, topic_name, group, 600)
    produce_round_robin(n1.bootstrap, topic_name, 6, 240, b"z" * 50)

    def lag_series():
        series = [(ls, v) for nd in cluster.nodes for ls, v in scrape(nd.admin_url).labelled("shardlog_consumer_group_lag")
                  if ls["group"] == group]
        return len(series) == 6 and series

    series = wait_for("a lag series for each of the 6 partitions (on the group's coordinator)", lag_series)
    assert sorted(v for _, v in series) == [40] * 6, series
    leaders = {p.leader for p in AdminClient({"bootstrap.servers": n1.bootstrap}).list_topics(topic_name, timeout=10).topics[topic_name].partitions.values()}
    assert len(leaders) > 1, "the partitions are led by more than one broker, so some lag came from another leader"


def test_the_active_controller_gauge_moves_when_the_controller_is_killed(cluster):
    def active():
        owners = [nd for nd in cluster.nodes if nd.alive() and scrape(nd.admin_url).total("shardlog_active_controller_count") == 1]
        return owners[0] if len(owners) == 1 else None

    first = wait_for("one active controller", active)
    leader_seen = {scrape(nd.admin_url).total("shardlog_raft_current_leader") for nd in cluster.nodes}
    assert leader_seen == {first.node_id}, leader_seen
    first.kill9()
    try:
        second = wait_for("another node's controller active", lambda: (a := active()) is not None and a is not first and a)
        assert scrape(second.admin_url).total("shardlog_raft_current_epoch") > 0
    finally:
        first.start()
        cluster.wait_ready(timeout_s=60)


def test_a_node_is_not_ready_until_its_controller_has_a_quorum(cluster):
    for nd in cluster.nodes:
        nd.kill9()
    try:
        lone = cluster.nodes[0]
        lone.start()
        wait_for("the admin listener of a node without quorum", lambda: get(lone.admin_url + "/v1/status/live")[0] == 200)
        for _ in range(5):
            is_ready, why = ready(lone.admin_url)
            assert not is_ready and why, why
        cluster.nodes[1].start()
        wait_for("ready once two voters form a quorum", lambda: ready(lone.admin_url)[0], 90)
    finally:
        for nd in cluster.nodes:
            if not nd.alive():
                nd.start()
        cluster.wait_ready(timeout_s=90)


def test_every_metric_the_grafana_dashboard_queries_is_exposed(broker):
    skip_unless_shardlog("the dashboard is shardlog's")
    dashboard = json.loads((conftest.REPO / "docs" / "grafana" / "shardlog.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    exprs.append(dashboard["templating"]["list"][0]["query"])
    queried = {m for e in exprs for m in re.findall(r"\bshardlog_[a-z0-9_]+", e)}
    assert len(queried) > 30, queried
    text = scrape(broker.admin_url).text
    declared = set(re.findall(r"^# TYPE (\S+) (\w+)$", text, re.M))
    families = {name for name, _ in declared}
    for m in sorted(queried):
        # A gauge's name may end in _count (active_broker_count); a histogram's samples add
        # _bucket/_sum/_count to its family's name, a counter's _total.
        family = m if m in families else re.sub(r"_(bucket|sum|count|total)$", "", m)
        assert family in families, f"the dashboard queries {m}, which /metrics does not expose"
        kind = dict(declared)[family]
        if m.endswith("_total"):
            assert kind == "counter", (m, kind)
        if m.endswith("_bucket"):
            assert kind == "histogram", (m, kind)


def test_shardlog_top_shows_the_shards_under_load(broker_factory, topic_name):
    skip_unless_shardlog("shardlog top reads shardlog's /metrics")
    b = broker_factory(shards=2)
    create(b.bootstrap, topic_name, 4)
    stop = threading.Event()

    def load():
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
        while not stop.is_set():
            for _ in range(200):
                p.produce(topic_name, b"y" * 1000)
            p.poll(0.05)
        p.flush(30)

    t = threading.Thread(target=load, daemon=True)
    t.start()
    try:
        out = subprocess.run([str(conftest.SHARDLOG_BIN), "top", "--admin", f"127.0.0.1:{b.admin_port}",
                              "--interval", "1", "--iterations", "3"], capture_output=True, text=True, timeout=60)
    finally:
        stop.set()
        t.join(60)
    assert out.returncode == 0, out.stderr
    rows = [ln.split() for ln in out.stdout.splitlines() if ln.startswith(f"http://127.0.0.1:{b.admin_port}")]
    assert {r[1] for r in rows} == {"0", "1"}, out.stdout
    # node shard req/s MB/s-in MB/s-out produce-p99 fetch-p99 stalls conns
    assert any(float(r[2]) > 0 and float(r[3]) > 0 and r[5] != "-" for r in rows), out.stdout
    assert "cluster: under-replicated 0, offline 0, active controller http://127.0.0.1:" in out.stdout, out.stdout
