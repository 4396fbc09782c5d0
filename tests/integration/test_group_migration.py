"""Online migration between the classic protocol and KIP-848 consumer groups
(group.consumer.migration.policy, Kafka 4.4), with real Java KafkaConsumers 4.4:

- a classic group with a member is upgraded when a `group.protocol=consumer` member joins;
  the classic member stays, keeps consuming and is rebalanced by the coordinator
  (JoinGroup / SyncGroup / Heartbeat inside the consumer group); a second classic member
  joins the consumer group directly; describe tells classic members (upgraded=false) from
  consumer ones (upgraded=true);
- when the consumer-protocol member leaves, the group turns back into a classic group and
  its classic members rebalance among themselves; so it does when a static classic member
  takes the group.instance.id of the last consumer-protocol member;
- a kill -9 of the broker while the group is mixed changes nothing: the same members keep
  their epochs and partitions;
- all along, records are produced; every record is processed, committed offsets never move
  backwards and end at the high watermarks;
- with the policy `disabled`, a classic member cannot join a consumer group
  (InconsistentGroupProtocolException) and a consumer-protocol member cannot upgrade a
  classic group (GroupIdNotFoundException), with Kafka's words.
"""

from __future__ import annotations

import time
import uuid

import pytest

import test_groups as tg  # helpers only
from admin_api import scrape
import test_groups_kip848 as k848  # helpers only
from clients import cli_create_topic, watermarks
from conftest import is_kafka, wait_for

PARTITIONS = 6
CLASSIC_PROPS = "session.timeout.ms=10000,heartbeat.interval.ms=500"


def broker(broker_factory, policy: str | None = None, session_s: int = k848.SESSION_TIMEOUT_S):
    args = [] if is_kafka() else [
        "--group-initial-rebalance-delay-ms", "0",
        "--group-consumer-session-timeout-ms", str(session_s * 1000),
        "--group-consumer-heartbeat-interval-ms", str(k848.HEARTBEAT_INTERVAL_MS),
    ] + (["--group-consumer-migration-policy", policy] if policy else [])
    return broker_factory(extra_args=args)


class Workers:
    """Java group-workers of one group, each with its output and log file."""

    def __init__(self, b, topic, group, tmp_path):
        self.b, self.topic, self.group, self.tmp = b, topic, group, tmp_path
        self.procs, self.outs, self.logs = {}, [], {}

    def start(self, name: str, protocol: str, extra: str = ""):
        out, log = self.tmp / f"{name}.txt", self.tmp / f"{name}.log"
        props = ",".join(p for p in (CLASSIC_PROPS if protocol == "classic" else "", extra) if p)
        self.procs[name] = k848.start_java_worker(self.b.bootstrap, self.topic, self.group, out, log,
                                                  props=props, protocol=protocol)
        self.outs.append(out)
        self.logs[name] = log

    def stop(self, name: str):
        k848.stop_workers([self.procs[name]])

    def stop_all(self):
        k848.stop_workers(list(self.procs.values()))

    def log(self, name: str) -> str:
        return self.logs[name].read_text(errors="replace")


def settled(b, group, members: int, kind: str) -> dict:
    """The group described once it is Stable with `members` members, each at the target
    epoch, all partitions owned once, and of type `kind`."""
    def check():
        d = k848.describe(b.bootstrap, group, wait_members=members, timeout_s=20)
        owned = k848.owned_partitions(d)
        return d if d["type"] == kind and owned == list(range(PARTITIONS)) else None
    return wait_for(f"group {group} {kind} with {members} members owning every partition once", check, 120)


def loaded(b, topic, group, tmp_path):
    """Topic `topic` created and produced to in the background, `group`'s commits watched;
    the producer, the watcher and the (no) workers."""
    cli_create_topic(b.bootstrap, topic, PARTITIONS)
    producer = tg.BackgroundProducer(b.bootstrap, topic)
    producer.start()
    watcher = tg.OffsetWatcher(b.bootstrap, group, topic, PARTITIONS)
    watcher.start()
    return producer, watcher, Workers(b, topic, group, tmp_path)


def drained(b, topic, producer, watcher) -> dict[int, int]:
    """Stops the producer; once the group's commits reach the high watermarks, those."""
    producer.stop()
    hw = {p: high for p, (low, high) in watermarks(b.bootstrap, topic, PARTITIONS).items()}
    assert sum(hw.values()) == producer.count > 0
    wait_for("committed offsets at the high watermarks", lambda: watcher.last == hw, 60)
    return hw


def shutdown(producer, w, watcher):
    producer.stopping.set()
    w.stop_all()
    watcher.stop.set()
    watcher.join(10)


def verify(w, watcher, hw: dict[int, int]):
    """No worker failed a poll, commits never moved backwards, every record was processed."""
    for name in w.procs:
        assert "poll failed" not in w.log(name), (name, w.log(name)[-2000:])
    assert not watcher.backwards, f"committed offsets moved backwards: {watcher.backwards}"
    seen = tg.read_processed(w.outs)
    missing = [(p, o) for p in range(PARTITIONS) for o in range(hw[p]) if (p, o) not in seen]
    assert not missing, f"{len(missing)} records never processed, e.g. {missing[:5]}"


def test_classic_members_upgrade_share_and_downgrade_a_group(broker_factory, tmp_path):
    b = broker(broker_factory)
    topic, group = "migrate-6", f"mig-{uuid.uuid4().hex[:8]}"
    producer, watcher, w = loaded(b, topic, group, tmp_path)
    try:
        # A classic group of one member.
        w.start("c1", "classic")
        d = settled(b, group, 1, "Classic")
        assert len(d["members"]) == 1, d

        # A consumer-protocol member joins: the group is upgraded, c1 stays and shares.
        w.start("c2", "consumer")
        d = settled(b, group, 2, "Consumer")
        kinds = sorted((m["client_id"].split("-")[0], m["upgraded"]) for m in d["members"])
        assert [u for _, u in kinds].count(False) == 1 and [u for _, u in kinds].count(True) == 1, d
        assert all(m["assignment"] for m in d["members"]), f"both members consume: {d}"
        # c1 was rebalanced in place: it revoked and was assigned again, never failed.
        assert "poll failed" not in w.log("c1"), w.log("c1")[-2000:]

        # A second classic member joins the consumer group directly.
        w.start("c3", "classic")
        d = settled(b, group, 3, "Consumer")
        assert sorted(m["upgraded"] for m in d["members"]) == [False, False, True], d
        assert sorted(len(m["assignment"]) for m in d["members"]) == [2, 2, 2], d
        if not is_kafka():
            assert scrape(b.admin_url).total("shardlog_group_protocol_conversions_total", direction="upgrade") == 1
        time.sleep(2)

        # kill -9 the broker: the mixed group comes back from __consumer_offsets, its
        # classic members included (their ClassicMemberMetadata), and the same members keep
        # their epochs and partitions.
        before = k848.members_view(d)
        b.restart(kill=True)
        d = settled(b, group, 3, "Consumer")
        assert k848.members_view(d) == before, (before, d)
        assert sorted(m["upgraded"] for m in d["members"]) == [False, False, True], d
        epoch = d["group_epoch"]
        time.sleep(2)

        # The consumer-protocol member leaves: the group is classic again, c1 and c3 share it.
        w.stop("c2")
        d = settled(b, group, 2, "Classic")
        assert sorted(len(m["assignment"]) for m in d["members"]) == [3, 3], d
        assert epoch > 0
        time.sleep(2)

        hw = drained(b, topic, producer, watcher)
    finally:
        shutdown(producer, w, watcher)
    verify(w, watcher, hw)
    assert tg.committed(b.bootstrap, group, topic, PARTITIONS) == hw
    if not is_kafka():
        # Counted since the restart: the downgrade.
        assert scrape(b.admin_url).total("shardlog_group_protocol_conversions_total", direction="downgrade") == 1


def test_a_static_classic_member_taking_the_last_consumer_members_place_downgrades(broker_factory, tmp_path):
    """A static consumer-protocol member is rolled back to the classic protocol under the
    same group.instance.id: its classic JoinGroup turns the group classic at once (Kafka
    4.4's static-replacement downgrade), with no partition lost or read twice meanwhile."""
    # Kafka's default consumer session (45 s): the stopped static member must still hold its
    # place when the classic one takes it (else its expiry downgrades the group first).
    b = broker(broker_factory, session_s=45)
    topic, group = "migrate-static-6", f"mig-s-{uuid.uuid4().hex[:8]}"
    producer, watcher, w = loaded(b, topic, group, tmp_path)
    static = "group.instance.id=inst-s"
    try:
        w.start("c1", "classic")
        settled(b, group, 1, "Classic")
        # The static member joins with the consumer protocol: an upgrade.
        w.start("s", "consumer", extra=static)
        d = settled(b, group, 2, "Consumer")
        assert sorted(m["upgraded"] for m in d["members"]) == [False, True], d
        time.sleep(2)
        # It stops (a static member's leave keeps its place) and comes back as a classic
        # member with the same instance id: the group is classic again, both consume.
        w.stop("s")
        w.start("s2", "classic", extra=static)
        d = settled(b, group, 2, "Classic")
        assert sorted(len(m["assignment"]) for m in d["members"]) == [3, 3], d
        if not is_kafka():
            # By the replacement (the stopped member was never fenced), not an expiry.
            log = b.log_path.read_text(errors="replace")
            assert "consumer group member fenced" not in log, log[-3000:]
            assert "consumer group downgraded to a classic group" in log, log[-3000:]
        time.sleep(2)

        hw = drained(b, topic, producer, watcher)
    finally:
        shutdown(producer, w, watcher)
    verify(w, watcher, hw)
    if not is_kafka():
        m = scrape(b.admin_url)
        assert m.total("shardlog_group_protocol_conversions_total", direction="upgrade") == 1
        assert m.total("shardlog_group_protocol_conversions_total", direction="downgrade") == 1


@pytest.mark.skipif(is_kafka(), reason="sets a broker setting the Kafka target is not started with")
def test_disabled_policy_refuses_both_conversions(broker_factory, tmp_path):
    b = broker(broker_factory, policy="disabled")
    topic = "migrate-off"
    cli_create_topic(b.bootstrap, topic, PARTITIONS)
    w = Workers(b, topic, f"off-{uuid.uuid4().hex[:8]}", tmp_path)
    v = Workers(b, topic, f"off-{uuid.uuid4().hex[:8]}", tmp_path)
    try:
        # A consumer group with a member: a classic member is refused.
        w.start("consumer", "consumer")
        settled(b, w.group, 1, "Consumer")
        w.start("classic", "classic")
        wait_for("the classic member refused", lambda: "InconsistentGroupProtocolException" in w.log("classic"), 60)
        assert w.procs["classic"].wait(30) != 0
        # A classic group with a member: a consumer-protocol member is refused.
        v.start("classic2", "classic")
        settled(b, v.group, 1, "Classic")
        v.start("consumer2", "consumer")
        wait_for("the consumer member refused", lambda: "GroupIdNotFoundException" in v.log("consumer2"), 60)
        assert "online upgrade is disabled" in v.log("consumer2"), v.log("consumer2")[-2000:]
        # Both groups are as they were.
        assert len(settled(b, w.group, 1, "Consumer")["members"]) == 1
        assert len(settled(b, v.group, 1, "Classic")["members"]) == 1
        assert scrape(b.admin_url).total("shardlog_group_protocol_conversions_total") == 0
    finally:
        w.stop_all()
        v.stop_all()
