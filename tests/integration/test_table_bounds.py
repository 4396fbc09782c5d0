"""Issue 28, point 4: every table a client can grow has a configured bound, and a test
drives it there, on a broker of one shard:
- the partition's producer table (max_producer_ids_per_partition): a client can invent
  producer ids (idempotent batches need no InitProducerId on the partition leader); past
  the bound the least recently writing producers are forgotten early, as
  producer.id.expiration.ms would forget them, and the broker counts it;
- consumer groups (max_groups_per_shard) and transactional ids
  (max_transactional_ids_per_shard): one more is refused with COORDINATOR_NOT_AVAILABLE
  while the ones inside the bound keep working;
- connections (max_connections_per_shard): one more is closed on accept, the others
  are served.
"""

from __future__ import annotations

from admin_api import scrape
from clients import admin_create_topic, kafka_tool, now_ms
from conftest import skip_unless_shardlog, wait_for
from kafkawire import (Reader, api_versions_request, closed_or_reply, connect, i16, i32, parse_api_versions_v0,
                       parse_produce_v8, produce_v8_request, record_batch, request, roundtrip, string)

MAX_PRODUCERS = 100
INVENTED = 300
FIRST_PID = 5000


def idempotent_batch(pid: int) -> bytes:
    return record_batch([(None, b"from-%d" % pid, [])], now_ms(), producer_id=pid, producer_epoch=0, base_sequence=0)


def produce(sock, corr: int, topic: str, batch: bytes) -> dict:
    _, parts = parse_produce_v8(roundtrip(sock, produce_v8_request(corr, topic, 0, batch)))
    return parts[(topic, 0)]


def described_producers(bootstrap: str, topic: str) -> set[int]:
    """Producer ids DescribeProducers lists for partition 0 (Kafka's own tool)."""
    r = kafka_tool("org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server", bootstrap,
                   "describe-producers", "--topic", topic, "--partition", "0")
    assert r.returncode == 0, r.stderr[-2000:]
    lines = [l.split() for l in r.stdout.splitlines() if l.strip()]
    col = lines[0].index("ProducerId")
    return {int(row[col]) for row in lines[1:]}


def test_invented_producer_ids_stop_at_the_partition_bound(broker_factory, topic_name):
    skip_unless_shardlog("max_producer_ids_per_partition is shardlog's")
    b = broker_factory(shards=1, extra_args=["--max-producer-ids-per-partition", str(MAX_PRODUCERS)])
    admin_create_topic(b.bootstrap, topic_name, 1)
    sock = connect(b.bootstrap)
    try:
        offsets = {}
        for i, pid in enumerate(range(FIRST_PID, FIRST_PID + INVENTED)):
            r = produce(sock, i, topic_name, idempotent_batch(pid))
            assert r["error_code"] == 0, r
            offsets[pid] = r["base_offset"]
        assert sorted(offsets.values()) == list(range(INVENTED))

        kept = described_producers(b.bootstrap, topic_name)
        evicted = scrape(b.admin_url).total("shardlog_producer_ids_evicted_total")
        assert len(kept) <= MAX_PRODUCERS, len(kept)
        assert evicted == INVENTED - len(kept), (evicted, len(kept))
        # The most recent producers are the ones kept.
        assert kept == set(range(FIRST_PID + INVENTED - len(kept), FIRST_PID + INVENTED)), sorted(kept)

        # A kept producer's retry is still a duplicate: answered with its first offset.
        last = FIRST_PID + INVENTED - 1
        r = produce(sock, INVENTED, topic_name, idempotent_batch(last))
        assert (r["error_code"], r["base_offset"]) == (0, offsets[last]), r
        # A forgotten one is a new producer again (as after producer.id.expiration.ms): its
        # sequence 0 is appended anew.
        r = produce(sock, INVENTED + 1, topic_name, idempotent_batch(FIRST_PID))
        assert (r["error_code"], r["base_offset"]) == (0, INVENTED), r
    finally:
        sock.close()


JOIN_GROUP, INIT_PRODUCER_ID = 11, 22
NONE, COORDINATOR_NOT_AVAILABLE = 0, 15


def join_group_v2(bootstrap: str, group: str, member_id: str = "") -> tuple[int, str]:
    """A JoinGroup v2 of `group` (a new member unless `member_id`): (error code, member id)."""
    body = (string(group) + i32(10_000) + i32(10_000) + string(member_id) + string("consumer")
            + i32(1) + string("range") + i32(0))  # one protocol, empty metadata
    r = Reader(roundtrip(bootstrap, request(JOIN_GROUP, 2, 1, body)))
    r.i32()  # correlation id
    r.i32()  # throttle time
    error = r.i16()
    r.i32()  # generation
    r.string()  # protocol
    r.string()  # leader
    return error, r.string()


def init_producer_id_v0(bootstrap: str, transactional_id: str) -> int:
    r = Reader(roundtrip(bootstrap, request(INIT_PRODUCER_ID, 0, 1, string(transactional_id) + i32(60_000))))
    r.i32()  # correlation id
    r.i32()  # throttle time
    return r.i16()


def test_one_group_more_than_the_shard_holds_is_refused(broker_factory):
    skip_unless_shardlog("max_groups_per_shard is shardlog's")
    b = broker_factory(shards=1, extra_args=["--max-groups-per-shard", "5", "--group-initial-rebalance-delay-ms", "0"])
    joined = [join_group_v2(b.bootstrap, f"bounded-{i}") for i in range(5)]
    assert [error for error, _ in joined] == [NONE] * 5
    assert join_group_v2(b.bootstrap, "bounded-5")[0] == COORDINATOR_NOT_AVAILABLE
    # Its sole member rejoins (a new member would wait for the old one's session to end).
    assert join_group_v2(b.bootstrap, "bounded-0", joined[0][1])[0] == NONE, "a group inside the bound still works"


def test_one_transactional_id_more_than_the_shard_holds_is_refused(broker_factory):
    skip_unless_shardlog("max_transactional_ids_per_shard is shardlog's")
    # One transaction state partition: once it is loaded (the first id initialized), a
    # refusal can only be the bound.
    b = broker_factory(shards=1, extra_args=["--max-transactional-ids-per-shard", "5",
                                             "--transaction-state-log-num-partitions", "1"])
    wait_for("the transaction coordinator loaded", lambda: init_producer_id_v0(b.bootstrap, "bounded-0") == NONE)
    assert [init_producer_id_v0(b.bootstrap, f"bounded-{i}") for i in range(1, 5)] == [NONE] * 4
    assert init_producer_id_v0(b.bootstrap, "bounded-5") == COORDINATOR_NOT_AVAILABLE
    assert init_producer_id_v0(b.bootstrap, "bounded-0") == NONE, "an id inside the bound still initializes"


def test_one_connection_more_than_the_shard_holds_is_closed(broker_factory):
    skip_unless_shardlog("max_connections_per_shard is shardlog's")
    b = broker_factory(shards=1, extra_args=["--max-connections-per-shard", "5"])
    socks = [connect(b.bootstrap) for _ in range(5)]
    try:
        for i, s in enumerate(socks):
            corr, err, _ = parse_api_versions_v0(roundtrip(s, api_versions_request(0, i)))
            assert (corr, err) == (i, 0)
        extra = connect(b.bootstrap)
        try:
            extra.sendall(api_versions_request(0, 99))
            assert closed_or_reply(extra, 30) == "closed"
        finally:
            extra.close()
        corr, err, _ = parse_api_versions_v0(roundtrip(socks[0], api_versions_request(0, 100)))
        assert (corr, err) == (100, 0), "the connections inside the bound are still served"
    finally:
        for s in socks:
            s.close()


def test_partitions_beyond_the_shard_bound_are_not_opened_also_after_a_restart(broker_factory, topic_name):
    """max_partitions_per_shard: a topic with more partitions than a one-shard broker may
    open gets exactly the room left (the rest is logged and not opened, and the broker
    says it is not ready: it cannot serve all it leads); a clean restart, which opens its
    replicas many at a time, keeps the same bound."""
    skip_unless_shardlog("max_partitions_per_shard is shardlog's")
    limit = 12
    # One partition for each internal topic, so the bound is the topic's to reach.
    b = broker_factory(shards=1, extra_args=["--max-partitions-per-shard", str(limit), "--offsets-topic-num-partitions", "1",
                                             "--transaction-state-log-num-partitions", "1"])

    def open_now() -> int:
        try:
            return int(scrape(b.admin_url).total("shardlog_shard_partitions"))
        except Exception:
            return -1  # not answering yet

    before = open_now()
    assert 0 < before < limit, before
    admin_create_topic(b.bootstrap, topic_name, 3 * limit)
    wait_for(f"{limit} replicas open", lambda: open_now() == limit)
    b.stop()
    b.start(wait=False)
    wait_for(f"{limit} replicas open after the restart", lambda: open_now() == limit)
    log = b.log_path.read_text(errors="replace")
    assert log.count("partition limit per shard reached") >= 2, "said at creation and again at the restart"
    assert log.count("===== start #") == 2
