"""Share-partition state survives its broker (KIP-932 point 2 of issue 27): an
acknowledgement answered is written to the share coordinator (`__share_group_state`,
acks=all) first, so after kill -9 a member never gets an accepted record again, and
every record that was delivered but not acknowledged is delivered again. Both targets
(Kafka 4.4 keeps the same promise)."""

from __future__ import annotations

import kafkawire as w

from clients import admin_create_topic
from conftest import wait_for
from test_share_groups import ACCEPT, acquired_offsets, joined, produce, settle, share_ack, share_broker, share_fetch


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
