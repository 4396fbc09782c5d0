"""A leader whose fdatasync fails halts, and the rest of the ISR takes over
(src/storage/log_dir_failure.rs; docs/durability.md).

Found by the chaos runner (tests/history/chaos.py, seed 4, disk-full): a leader whose log
went offline kept its leadership, answered KAFKA_STORAGE_ERROR for good and shrank the
ISR to itself while two healthy followers waited, so its partitions took no writes until an
operator restarted it. Kafka halts a broker with no log dir left online; shardlog now halts
too. Here, on 3 real processes: the storage fault seam (`--storage-fault drop-unsynced`,
armed at run time through SHARDLOG_TEST_STORAGE_FAULTS_FILE) fails the leader's next
fdatasync; the leader's process exits with status 1; another ISR member leads; an
idempotent acks=all producer that kept writing through it has every record acknowledged,
and every acknowledged record is read back once, in order. The halted broker restarts,
recovers its log and rejoins the ISR. shardlog only (the fault is a shardlog test hook).
No timed assertions: every wait polls with a generous deadline.
"""

from __future__ import annotations

import threading
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import conftest
from clients import consume_confluent
from conftest import wait_for

DEADLINE_S = 90


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from cluster_harness import Cluster
    conftest.skip_unless_shardlog("the storage fault seam is a shardlog test hook")
    root = tmp_path_factory.mktemp("log-dir-failure")
    c = Cluster(3, root, log_dir=conftest.LOG_ROOT, name="test_log_dir_failure-", binary=conftest.SHARDLOG_BIN,
                extra_args=["--auto-leader-rebalance-enable", "false", "--storage-fault", "drop-unsynced"])
    for nd in c.nodes:
        fault_file = root / f"storage-faults-{nd.node_id}"
        fault_file.write_text("0 clear\n")
        nd.env["SHARDLOG_TEST_STORAGE_FAULTS_FILE"] = str(fault_file)
        nd.fault_file = fault_file
    yield from conftest.serve_cluster(c, 60)


def leader_and_isr(bootstrap: str, topic: str) -> tuple[int, list[int]] | None:
    t = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10).topics.get(topic)
    if t is None or t.error is not None or 0 not in t.partitions:
        return None
    p = t.partitions[0]
    return p.leader, sorted(p.isrs)


def test_a_leader_whose_fdatasync_fails_halts_and_the_isr_takes_over(cluster):
    topic = f"ldf-{uuid.uuid4().hex[:8]}"
    any_node = cluster.node(1)
    admin = AdminClient({"bootstrap.servers": any_node.bootstrap})  # alive until the result
    admin.create_topics([NewTopic(topic, 1, replication_factor=3, config={"min.insync.replicas": "2"})])[topic].result(30)
    wait_for("a leader with a full ISR", lambda: (s := leader_and_isr(any_node.bootstrap, topic)) is not None
             and s[0] > 0 and s[1] == [1, 2, 3], DEADLINE_S)
    leader = cluster.node(leader_and_isr(any_node.bootstrap, topic)[0])
    others = [nd for nd in cluster.nodes if nd is not leader]

    acked: list[tuple[int, bytes]] = []
    failed: list[str] = []

    def report(err, msg):
        if err is None:
            acked.append((msg.offset(), msg.value()))
        else:
            failed.append(str(err))

    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 2, "message.timeout.ms": 120_000})
    stop = threading.Event()
    sent = [0]

    def produce() -> None:
        while not stop.is_set():
            p.produce(topic, f"v{sent[0]}".encode(), partition=0, on_delivery=report)
            sent[0] += 1
            p.poll(0.005)

    writer = threading.Thread(target=produce, daemon=True)
    writer.start()
    wait_for("writes acknowledged before the fault", lambda: len(acked) >= 200, DEADLINE_S)

    # The leader's next fdatasync fails (and drops what it had not synced).
    with open(leader.fault_file, "a") as f:
        f.write("1 sync-eio 1\n")
    wait_for(f"leader {leader.node_id} halts", lambda: not leader.alive(), DEADLINE_S)
    assert leader.proc.wait(timeout=10) == 1, "a broker halted by a failed log exits with status 1"
    assert "halting the broker" in leader.log_since_start()
    wait_for("another ISR member leads", lambda: (s := leader_and_isr(others[0].bootstrap, topic)) is not None
             and s[0] in {nd.node_id for nd in others}, DEADLINE_S)
    before = len(acked)
    wait_for("writes acknowledged by the new leader", lambda: len(acked) >= before + 200, DEADLINE_S)

    stop.set()
    writer.join(timeout=30)
    assert p.flush(120) == 0, "every send got its delivery report"
    assert not failed, f"sends failed though two ISR members stayed up: {failed[:5]}"
    assert len(acked) == sent[0]

    # The halted broker recovers and rejoins the ISR.
    with open(leader.fault_file, "w") as f:
        f.write("2 clear\n")
    leader.start()
    cluster.wait_ready(timeout_s=DEADLINE_S, nodes=[leader])
    wait_for("the restarted broker back in the ISR",
             lambda: (s := leader_and_isr(others[0].bootstrap, topic)) is not None and s[1] == [1, 2, 3], DEADLINE_S)

    got = [(r.offset, r.value) for r in consume_confluent(others[0].bootstrap, topic, 1)[0]]
    values = [v for _, v in got]
    assert len(values) == len(set(values)), "a value was read twice"
    assert set(values) >= {v for _, v in acked}, "an acknowledged record is missing"
    assert [o for o, _ in got] == list(range(len(got))), "offsets are not dense"
    at = dict(got)
    moved = [(o, v) for o, v in acked if at.get(o) != v]
    assert not moved, f"acknowledged records not at their acknowledged offsets: {moved[:5]}"
