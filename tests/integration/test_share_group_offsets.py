"""The share-group offset admin APIs (KIP-932; issue 27, point 2) through Kafka's own
`kafka-share-groups.sh` (a 4.4 Admin client): --reset-offsets (AlterShareGroupOffsets),
--describe (DescribeShareGroupOffsets with the lag: log end - start offset - records
already done with), --delete-offsets (DeleteShareGroupOffsets) and --delete
(DeleteGroups, which deletes the group's share state first), with the records a member
gets after each step; and the group coordinator's refusals on the wire (a group with
members: NON_EMPTY_GROUP; a group of another type: GROUP_ID_NOT_FOUND). Both targets."""

from __future__ import annotations

import kafkawire as w
from confluent_kafka import Consumer, TopicPartition

from clients import admin_create_topic
from conftest import wait_for
from test_share_groups import (ACCEPT, acquired_offsets, heartbeat, joined, produce, settle, share_broker, share_fetch, share_groups_tool)

NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND = 68, 69


def offsets_table(bootstrap: str, group: str) -> dict[int, tuple[str, str]]:
    """`kafka-share-groups.sh --describe`: partition → (start offset, lag) as printed."""
    out = share_groups_tool(bootstrap, "--describe", "--group", group)
    rows = [line.split() for line in out.splitlines()]
    return {int(r[2]): (r[3], r[4]) for r in rows if len(r) == 5 and r[0] == group}


def alter_on_the_wire(bootstrap: str, group: str, topic: str, partition: int, start: int) -> int:
    """AlterShareGroupOffsets v0 of one partition: the top-level error code."""
    part = w.i32(partition) + w.i64(start) + w.uvarint(0)
    body = w.compact_string(group) + w.compact_array([w.compact_string(topic) + w.compact_array([part]) + w.uvarint(0)]) + w.uvarint(0)
    r = w.flexible_roundtrip(bootstrap, 91, 0, body)
    r.i32()
    return r.i16()


def member_reads(bootstrap: str, group: str, topic: str, partition: int, acks: list[tuple[int, int]]) -> list[int]:
    """A new member joins, is assigned the topic, reads `partition` once (what it is given
    within a few fetches), accepts the `acks` ranges, then closes its session (its
    connection) and leaves. The offsets it was given."""
    m, hb = joined(bootstrap, group, [topic])
    members = settle(bootstrap, group, {m: hb}, lambda a: sum(len(ps) for ps in a[m].values()) == 2)
    tid = bytes.fromhex(next(iter(members[m]["assignment"])))
    got: list[int] = []
    with w.connect(bootstrap) as s:
        epoch = 0

        def given():
            nonlocal epoch
            err, res = share_fetch(bootstrap, group, m, epoch, tid, [partition], max_wait_ms=500, sock=s)
            epoch += 1
            assert err == 0 and res[partition]["error"] == 0, res
            got.extend(acquired_offsets(res[partition]))
            return got
        wait_for("records given", given, 60)
        if acks:
            err, res = share_fetch(bootstrap, group, m, epoch, tid, [partition], acks={partition: [(f, l, [ACCEPT]) for f, l in acks]}, sock=s)
            assert (err, res[partition]["ack_error"]) == (0, 0), res
    # The connection's close ended the share session (its records released); now the group membership.
    assert heartbeat(bootstrap, group, m, -1)["error"] == 0
    return sorted(got)


def test_the_tool_resets_describes_and_deletes_share_group_offsets(broker_factory, topic_name):
    b = share_broker(broker_factory)
    bs = b.bootstrap
    admin_create_topic(bs, topic_name, 2)
    for p in (0, 1):
        produce(bs, topic_name, p, 10)
    group = "sgo-" + topic_name

    # A member joins (the partitions are initialized at the log end: share.auto.offset.reset
    # latest) and leaves: the group is empty, so its offsets can be reset.
    m, hb = joined(bs, group, [topic_name])
    settle(bs, group, {m: hb}, lambda a: sum(len(ps) for ps in a[m].values()) == 2)
    assert alter_on_the_wire(bs, group, topic_name, 0, 0) == NON_EMPTY_GROUP, "a group with members is not reset"
    assert heartbeat(bs, group, m, -1)["error"] == 0

    out = share_groups_tool(bs, "--reset-offsets", "--to-earliest", "--group", group, "--topic", topic_name, "--execute")
    assert topic_name in out, out
    assert offsets_table(bs, group) == {0: ("0", "10"), 1: ("0", "10")}

    # From 0: 0..4 and 7 accepted, the rest released (the session closed): the start moves
    # to 5; of the 5 records left, 7 is done with, so the lag is 10 - 5 - 1.
    assert member_reads(bs, group, topic_name, 0, [(0, 4), (7, 7)]) == list(range(10))
    wait_for("the lag after the acknowledgements", lambda: offsets_table(bs, group) == {0: ("5", "4"), 1: ("0", "10")}, 30)

    share_groups_tool(bs, "--reset-offsets", "--to-offset", "8", "--group", group, "--topic", topic_name, "--execute")
    assert offsets_table(bs, group) == {0: ("8", "2"), 1: ("8", "2")}
    # The partition's leader serves the reset state: only 8 and 9 come.
    assert member_reads(bs, group, topic_name, 0, []) == [8, 9]

    out = share_groups_tool(bs, "--delete-offsets", "--group", group, "--topic", topic_name)
    assert topic_name in out, out
    assert offsets_table(bs, group) == {}
    assert "has no offset information" in share_groups_tool(bs, "--describe", "--group", group)

    out = share_groups_tool(bs, "--delete", "--group", group)
    assert group in out, out
    assert group not in share_groups_tool(bs, "--list").split()


def test_offsets_of_a_group_of_another_type_are_not_altered(broker_factory, topic_name):
    b = share_broker(broker_factory)
    admin_create_topic(b.bootstrap, topic_name, 1)
    group = "classic-" + topic_name
    # A classic group with a committed offset (a consumer that assigns, not subscribes).
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic_name, 0)])

        def committed():
            # Per-partition errors come back in the result, not as an exception.
            done = c.commit(offsets=[TopicPartition(topic_name, 0, 3)], asynchronous=False)
            return all(tp.error is None for tp in done)
        wait_for("the offset committed", committed, 30)
    finally:
        c.close()
    assert alter_on_the_wire(b.bootstrap, group, topic_name, 0, 0) == GROUP_ID_NOT_FOUND
