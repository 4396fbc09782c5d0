"""Share-partition state survives its broker (KIP-932, point 2 of issue 27): an
acknowledgement answered is written to the share coordinator (`__share_group_state`,
acks=all) first, so after kill -9 a member never gets an accepted record again, and
every record that was delivered but not acknowledged is delivered again:

1. one broker (the share coordinator is local), kill -9 and restart;
2. three brokers, RF 3 and min.insync.replicas 2: the group is chosen so that the
   share-partition's coordinator is another broker than the partition's leader (the
   leader's writes cross the inter-broker listener); the leader is killed and the new
   leader reads the state back.

3. the group itself (its epoch, members and assignments, kept in `__consumer_offsets`)
   survives kill -9: its members keep heartbeating into it at their epochs.

Both targets (Kafka 4.4 keeps the same promise)."""

from __future__ import annotations

import base64
import sys
from pathlib import Path

import kafkawire as w
from confluent_kafka.admin import AdminClient, NewTopic

import conftest
from admin_api import scrape
from clients import admin_create_topic
from conftest import is_kafka, wait_for
from test_features import describe as describe_features, features
from test_share_groups import (ACCEPT, UNKNOWN_MEMBER_ID, acquired_offsets, heartbeat, joined, produce, settle, share_ack, share_broker,
                               share_fetch, share_groups_tool)

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.history.clusters import SETTINGS, shardlog_flags, wait_brokers  # noqa: E402
from tests.history.txn_nemesis import find_coordinator, live_bootstraps  # noqa: E402

BOUND_S = 120  # a bound for any one wait; reaching it is a failure


def member_with_partition(bs: str, group: str, topic: str) -> tuple[str, bytes]:
    m, hb = joined(bs, group, [topic])
    members = settle(bs, group, {m: hb}, lambda a: all(a.values()))
    return m, bytes.fromhex(next(iter(members[m]["assignment"])))


def test_acknowledgements_survive_kill9_and_the_rest_is_redelivered(broker_factory, topic_name):
    b = share_broker(broker_factory)
    bs = b.bootstrap
    admin_create_topic(bs, topic_name, 1)
    group = "sd-" + topic_name
    m, tid = member_with_partition(bs, group, topic_name)
    produced = 0
    with w.connect(bs) as s:
        assert share_fetch(bs, group, m, 0, tid, [0], sock=s)[0] == 0
        epoch = 1

        def gets_records():
            # The share-partition starts at the end of the log once initialized: records
            # are written until some are delivered.
            nonlocal epoch, produced
            produce(bs, topic_name, 0, 10)
            produced += 10
            r = share_fetch(bs, group, m, epoch, tid, [0], max_wait_ms=1000, sock=s)
            epoch += 1
            assert r[0] == 0, r
            return r if len(acquired_offsets(r[1][0])) >= 2 else None
        got = wait_for("records delivered", gets_records, 60)
        held = sorted(acquired_offsets(got[1][0]))
        accepted, unacknowledged = held[: len(held) // 2], held[len(held) // 2:]
        err, res = share_ack(bs, group, m, epoch, tid, {0: [(accepted[0], accepted[-1], [ACCEPT])]}, sock=s)
        assert (err, res[0]) == (0, 0), res
    if not is_kafka():
        # The leader's calls to the share coordinator, visible to an operator.
        metrics = scrape(b.admin_url)
        assert metrics.total("shardlog_share_state_loads_total") >= 1
        assert metrics.total("shardlog_share_state_writes_total") >= 1
        assert metrics.total("shardlog_share_state_write_failures_total") == 0
        assert metrics.total("shardlog_share_state_write_time_seconds_count") == metrics.total("shardlog_share_state_writes_total")

    b.restart(kill=True)

    # Everything from the first delivered offset on, but what was accepted, comes again
    # (each delivery accepted at once, so none repeats); nothing accepted comes back.
    want = set(range(held[0], produced)) - set(accepted)
    m2, tid2 = member_with_partition(b.bootstrap, group, topic_name)
    assert tid2 == tid
    seen: list[int] = []
    with w.connect(b.bootstrap) as s:
        epoch = 0

        def all_redelivered():
            nonlocal epoch
            r = share_fetch(b.bootstrap, group, m2, epoch, tid, [0], max_wait_ms=500, sock=s)
            epoch += 1
            assert r[0] == 0, r
            got = acquired_offsets(r[1][0])
            if got:
                seen.extend(got)
                err, res = share_ack(b.bootstrap, group, m2, epoch, tid, {0: [(o, o, [ACCEPT]) for o in got]}, sock=s)
                assert (err, res[0]) == (0, 0), res
                epoch += 1
            return want <= set(seen)
        wait_for(f"offsets {sorted(want)} delivered again", all_redelivered, 90)
    assert not set(seen) & set(accepted), f"accepted before kill -9, delivered again: {sorted(set(seen) & set(accepted))}"
    assert set(unacknowledged) <= set(seen)
    assert len(seen) == len(set(seen)), f"a record delivered twice after the restart: {seen}"


def test_the_group_survives_kill9_and_its_members_keep_their_epochs(broker_factory, topic_name):
    b = share_broker(broker_factory)
    admin_create_topic(b.bootstrap, topic_name, 2)
    group = "sg-durable-" + topic_name
    members = dict(joined(b.bootstrap, group, [topic_name]) for _ in range(2))
    settle(b.bootstrap, group, members, lambda a: all(a.values()))
    stays, leaves = list(members)
    assert heartbeat(b.bootstrap, group, leaves, -1)["error"] == 0
    del members[leaves]
    # The one left takes the group's new epoch and both partitions.
    settle(b.bootstrap, group, members, lambda a: sum(len(ps) for ps in a[stays].values()) == 2)
    epoch, assignment = members[stays]["epoch"], members[stays]["assignment"]

    b.restart(kill=True)

    # Retried while the restarted coordinator loads; then the member is known at its epoch
    # (a group kept only in memory answers GROUP_ID_NOT_FOUND here).
    def answered():
        hb = heartbeat(b.bootstrap, group, stays, epoch)
        return hb if hb["error"] not in (14, 15, 16) else None
    hb = wait_for("a heartbeat answer after the restart", answered, BOUND_S)
    assert (hb["error"], hb["epoch"]) == (0, epoch), hb
    assert hb["assignment"] in (None, assignment), hb
    gone = heartbeat(b.bootstrap, group, leaves, epoch)
    assert gone["error"] == UNKNOWN_MEMBER_ID, gone
    out = share_groups_tool(b.bootstrap, "--describe", "--members", "--group", group)
    assert stays in out and leaves not in out, out


def java_hash(text: str) -> int:
    """Java's String.hashCode (ASCII text)."""
    h = 0
    for ch in text:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def share_state_partition(group: str, topic_id: bytes, partition: int, partitions: int = 50) -> int:
    """The `__share_group_state` partition of a share-partition key (Kafka's
    Utils.abs("group:topicId:partition".hashCode()) % partitions)."""
    tid = base64.urlsafe_b64encode(topic_id).decode().rstrip("=")
    h = java_hash(f"{group}:{tid}:{partition}")
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def leader_of(bootstrap: str, topic: str, partition: int) -> int:
    t = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10).topics.get(topic)
    if t is None or t.error is not None or partition not in t.partitions:
        return -1
    return t.partitions[partition].leader


def collect_redelivered(bs: str, group: str, member: str, tid: bytes, want: set[int]) -> list[int]:
    """Share-fetches as `member` (accepting each delivery at once) until every offset of
    `want` came; the offsets delivered, in order."""
    seen: list[int] = []
    with w.connect(bs) as s:
        epoch = 0

        def all_redelivered():
            nonlocal epoch
            r = share_fetch(bs, group, member, epoch, tid, [0], max_wait_ms=500, sock=s)
            epoch += 1
            assert r[0] == 0, r
            got = acquired_offsets(r[1][0])
            if got:
                seen.extend(got)
                err, res = share_ack(bs, group, member, epoch, tid, {0: [(o, o, [ACCEPT]) for o in got]}, sock=s)
                assert (err, res[0]) == (0, 0), res
                epoch += 1
            return want <= set(seen)
        wait_for(f"offsets {sorted(want)} delivered again", all_redelivered, BOUND_S)
    return seen


def test_a_new_partition_leader_redelivers_exactly_the_unacknowledged(tmp_path_factory, topic_name):
    if is_kafka():
        gen = conftest.running_kafka_cluster(tmp_path_factory, "share-failover", dict(SETTINGS))
    else:
        gen = conftest.running_cluster(tmp_path_factory, "share-failover",
                                       extra_args=shardlog_flags(SETTINGS))
    cluster = next(gen)
    try:
        wait_brokers(cluster)
        node_bs = {nd.node_id: nd.bootstrap for nd in cluster.nodes}
        bs = ",".join(node_bs.values())
        a = AdminClient({"bootstrap.servers": bs})
        a.create_topics([NewTopic(topic_name, 1, 3, config={"min.insync.replicas": "2"})], operation_timeout=30)[topic_name].result(BOUND_S)
        leader = wait_for("a leader", lambda: (l := leader_of(bs, topic_name, 0)) >= 0 and l, BOUND_S)

        # A group whose share-partition coordinator is not the partition's leader.
        for attempt in range(20):
            group = f"sdf{attempt}-{topic_name}"
            coordinator = wait_for("the group coordinator", lambda: find_coordinator(list(node_bs.values()), group, 0), BOUND_S)
            m, tid = member_with_partition(node_bs[coordinator], group, topic_name)
            state_partition = share_state_partition(group, tid, 0)
            state_leader = wait_for("__share_group_state", lambda: (l := leader_of(bs, "__share_group_state", state_partition)) >= 0 and l, BOUND_S)
            if state_leader != leader:
                break
        else:
            raise AssertionError("no group of 20 has its share coordinator away from the partition leader")

        produced = 0
        with w.connect(node_bs[leader]) as s:
            epoch = 0
            assert share_fetch(node_bs[leader], group, m, epoch, tid, [0], sock=s)[0] == 0
            epoch = 1

            def gets_records():
                nonlocal epoch, produced
                produce(bs, topic_name, 0, 10)
                produced += 10
                r = share_fetch(node_bs[leader], group, m, epoch, tid, [0], max_wait_ms=1000, sock=s)
                epoch += 1
                assert r[0] == 0, r
                return r if len(acquired_offsets(r[1][0])) >= 2 else None
            got = wait_for("records delivered", gets_records, BOUND_S)
            held = sorted(acquired_offsets(got[1][0]))
            accepted, unacknowledged = held[: len(held) // 2], held[len(held) // 2:]
            err, res = share_ack(node_bs[leader], group, m, epoch, tid, {0: [(accepted[0], accepted[-1], [ACCEPT])]}, sock=s)
            assert (err, res[0]) == (0, 0), res

        next(nd for nd in cluster.nodes if nd.node_id == leader).kill9()
        survivors = ",".join(live_bootstraps(cluster, but=leader))
        new_leader = wait_for("a new leader", lambda: (l := leader_of(survivors, topic_name, 0)) >= 0 and l != leader and l, BOUND_S)
        coordinator = wait_for("a group coordinator", lambda: find_coordinator(live_bootstraps(cluster, but=leader), group, 0), BOUND_S)
        m2, tid2 = member_with_partition(node_bs[coordinator], group, topic_name)
        assert tid2 == tid
        want = set(range(held[0], produced)) - set(accepted)
        seen = collect_redelivered(node_bs[new_leader], group, m2, tid, want)
        assert not set(seen) & set(accepted), f"accepted before the kill, delivered again: {sorted(set(seen) & set(accepted))}"
        assert set(unacknowledged) <= set(seen)
        assert len(seen) == len(set(seen)), f"a record delivered twice by the new leader: {seen}"
    finally:
        gen.close()
