"""Share groups (KIP-932), the membership part built so far: ShareGroupHeartbeat and
ShareGroupDescribe as Kafka 4.4 answers them, ListGroups with type share, and
`kafka-share-groups.sh --list / --describe --members / --describe --state`. Both targets.

shardlog serves share groups only with share.version >= 1 finalized, which needs
`--unstable-feature-versions-enable true` while share groups are being built (fetching
and acknowledging records come next); Kafka 4.4 finalizes share.version 2 by default.
"""

from __future__ import annotations

import re
import uuid

import kafkawire as w
from clients import admin_create_topic, kafka_tool
from conftest import is_kafka, wait_for
from test_features import describe as describe_features, features
from test_groups import find_group_coordinator

GROUP_ID_NOT_FOUND, UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, UNSUPPORTED_VERSION = 69, 25, 110, 35


def share_broker(broker_factory):
    """A broker serving share groups (shardlog: share.version 1 turned on)."""
    b = broker_factory(extra_args=[] if is_kafka() else ["--unstable-feature-versions-enable", "true"])
    if not is_kafka():
        rc, out = features(b.bootstrap, "upgrade", "--feature", "share.version=1")
        assert "share.version was upgraded to 1." in out, out
        wait_for("share.version 1", lambda: describe_features(b.bootstrap)["share.version"][2] == "1", 30)
    return b


def heartbeat(bootstrap: str, group: str, member: str, epoch: int, topics: list[str] | None = None) -> dict:
    """One ShareGroupHeartbeat v1: {error, message, member, epoch, assignment: {topic id: [partitions]} or None}."""
    body = (w.compact_string(group) + w.compact_string(member) + w.i32(epoch) + w.uvarint(0)
            + (w.compact_array([w.compact_string(t) for t in topics]) if topics is not None else w.uvarint(0)))
    r = w.flexible_roundtrip(bootstrap, 76, 1, body)
    r.i32()
    out = {"error": r.i16(), "message": r.compact_string(), "member": r.compact_string(), "epoch": r.i32()}
    r.i32()  # heartbeat interval
    if r.i8() < 0:
        out["assignment"] = None
    else:
        parts = r.array(lambda: (r.uuid(), r.array(r.i32), r.tags()))
        r.tags()
        out["assignment"] = {bytes(t).hex(): sorted(ps) for t, ps, _ in parts}
    return out


def joined(bootstrap: str, group: str, topics: list[str]) -> tuple[str, dict]:
    """A new member of `group` (after FindCoordinator, which creates __consumer_offsets)."""
    with w.connect(bootstrap) as s:
        wait_for("the group coordinator", lambda: find_group_coordinator(s, group) == 0)
    member = str(uuid.uuid4())
    hb = wait_for("a join answer", lambda: h if (h := heartbeat(bootstrap, group, member, 0, topics))["error"] not in (14, 15, 16) else None)
    assert hb["error"] == 0, hb
    return member, hb


def settle(bootstrap: str, group: str, members: dict[str, dict], want) -> dict[str, dict]:
    """Heartbeats every member until `want(assignments)` holds (Kafka assigns asynchronously)."""
    def all_settled():
        for m, last in members.items():
            hb = heartbeat(bootstrap, group, m, last["epoch"])
            assert hb["error"] == 0, hb
            if hb["assignment"] is not None:
                last["assignment"] = hb["assignment"]
            last["epoch"] = hb["epoch"]
        return want({m: last["assignment"] or {} for m, last in members.items()})
    wait_for("the assignment", all_settled, 60)
    return members


def share_groups_tool(bootstrap: str, *args: str) -> str:
    r = kafka_tool("org.apache.kafka.tools.consumer.group.ShareGroupCommand", "--bootstrap-server", bootstrap, *args)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_members_share_partitions_and_the_tools_see_them(broker_factory, topic_name):
    b = share_broker(broker_factory)
    admin_create_topic(b.bootstrap, topic_name, 3)
    group = "sg-" + topic_name
    members = {}
    for _ in range(4):
        m, hb = joined(b.bootstrap, group, [topic_name])
        members[m] = hb

    def every_partition_read_by_someone(assignments):
        parts = [p for a in assignments.values() for ps in a.values() for p in ps]
        return sorted(set(parts)) == [0, 1, 2] and all(a for a in assignments.values())
    settle(b.bootstrap, group, members, every_partition_read_by_someone)

    assert group in share_groups_tool(b.bootstrap, "--list").split()
    out = share_groups_tool(b.bootstrap, "--describe", "--members", "--group", group)
    assert sum(1 for m in members if m in out) == 4, out
    state = share_groups_tool(b.bootstrap, "--describe", "--state", "--group", group)
    assert re.search(rf"{re.escape(group)}\s+\S+\s+\(\d+\)\s+Stable\s+4", state), state

    # Kafka's epoch checks and words.
    m, last = next(iter(members.items()))
    hb = heartbeat(b.bootstrap, group, m, last["epoch"] + 5)
    assert hb["error"] == FENCED_MEMBER_EPOCH, hb
    assert hb["message"].startswith(f"The share group member has a greater member epoch ({last['epoch'] + 5})"), hb
    hb = heartbeat(b.bootstrap, group, "not-a-member", 1)
    assert (hb["error"], hb["message"]) == (UNKNOWN_MEMBER_ID, f"Member not-a-member is not a member of group {group}."), hb
    # Leaving: epoch -1, and the group has one member fewer.
    hb = heartbeat(b.bootstrap, group, m, -1)
    assert (hb["error"], hb["epoch"]) == (0, -1), hb
    def three_members():
        out = share_groups_tool(b.bootstrap, "--describe", "--state", "--group", group)
        return re.search(r"Stable\s+3\b", out) is not None
    wait_for("3 members", three_members, 30)


def test_a_group_id_has_one_type(broker_factory, topic_name):
    b = share_broker(broker_factory)
    group = "sg-type-" + topic_name
    joined(b.bootstrap, group, [topic_name])
    # A KIP-848 heartbeat for the share group's id.
    body = (w.compact_string(group) + w.compact_string(str(uuid.uuid4())) + w.i32(0) + w.uvarint(0) + w.uvarint(0) + w.i32(30000)
            + w.compact_array([w.compact_string(topic_name)]) + w.uvarint(0) + w.compact_array([]))
    r = w.flexible_roundtrip(b.bootstrap, 68, 0, body)
    r.i32()
    assert (r.i16(), r.compact_string()) == (GROUP_ID_NOT_FOUND, f"Group {group} is not a consumer group.")
    # ShareGroupDescribe of a group that does not exist.
    missing = "sg-missing-" + topic_name
    body = w.compact_array([w.compact_string(missing)]) + w.i8(0)
    r = w.flexible_roundtrip(b.bootstrap, 77, 1, body)
    r.i32()
    ((err, msg, gid, members),) = r.array(lambda: (r.i16(), r.compact_string(), r.compact_string(), r.compact_string(), r.i32(), r.i32(),
                                                   r.compact_string(), r.array(lambda: None), r.i32(), r.tags())[:3] + ((),))
    assert (err, msg, gid) == (GROUP_ID_NOT_FOUND, f"Group {missing} not found.", missing)


def test_share_version_0_turns_share_groups_off(broker_factory, topic_name):
    if is_kafka():
        b = broker_factory()
        rc, out = features(b.bootstrap, "downgrade", "--feature", "share.version=0")
        assert "share.version was downgraded to 0." in out, out
    else:
        b = broker_factory()  # share.version stays 0 without the unstable levels
        rc, out = features(b.bootstrap, "upgrade", "--feature", "share.version=1")
        assert re.search(r"Local controller \d+ only supports versions 0-0", out), out
    group = "sg-off-" + topic_name
    with w.connect(b.bootstrap) as s:
        wait_for("the group coordinator", lambda: find_group_coordinator(s, group) == 0)
    assert heartbeat(b.bootstrap, group, str(uuid.uuid4()), 0, [topic_name])["error"] == UNSUPPORTED_VERSION
