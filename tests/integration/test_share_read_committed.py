"""read_committed share groups (Kafka 4.4's group config `share.isolation.level`): a share
group reading read_committed gets the records of committed transactions only, below the
last stable offset; an aborted transaction's records are archived, never delivered; an
open transaction's records come once it commits. A read_uncommitted group (the default)
gets everything below the high watermark. Both targets."""

from __future__ import annotations

import uuid

import kafkawire as w
from confluent_kafka import Consumer, Producer, TopicPartition

from clients import admin_create_topic, kafka_tool
from conftest import wait_for
from test_share_groups import ACCEPT, acquired_offsets, configs_tool, joined, settle, share_broker, share_fetch

BOUND_S = 60


def transaction(p: Producer, topic: str, values: list[str], commit: bool | None):
    """One transaction of `values` to partition 0: committed, aborted, or left open (None)."""
    p.begin_transaction()
    for v in values:
        p.produce(topic, v.encode(), partition=0)
    p.flush(30)
    if commit is True:
        p.commit_transaction(30)
    elif commit is False:
        p.abort_transaction(30)


def offsets_by_value(bootstrap: str, topic: str, n: int) -> dict[str, int]:
    """The offset of each of the `n` data records (read_uncommitted; markers are not records)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "rc-" + uuid.uuid4().hex, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "isolation.level": "read_uncommitted"})
    c.assign([TopicPartition(topic, 0, 0)])
    out: dict[str, int] = {}
    try:
        def all_read():
            for m in c.consume(100, 1):
                if m.error() is None:
                    out[m.value().decode()] = m.offset()
            return len(out) >= n
        wait_for("every record read", all_read, BOUND_S)
    finally:
        c.close()
    return out


class Member:
    """A share group member fetching partition 0 and accepting everything it gets."""

    def __init__(self, bootstrap: str, group: str, topic: str):
        self.bs = bootstrap
        m, hb = joined(bootstrap, group, [topic])
        members = settle(bootstrap, group, {m: hb}, lambda a: all(a.values()))
        self.group, self.member = group, m
        self.tid = bytes.fromhex(next(iter(members[m]["assignment"])))
        self.sock = w.connect(bootstrap).__enter__()
        self.epoch = 0
        self.got: list[int] = []
        self.pending: list[tuple[int, int, list[int]]] = []

    def fetch(self) -> list[int]:
        err, res = share_fetch(self.bs, self.group, self.member, self.epoch, self.tid, [0],
                               acks={0: self.pending} if self.pending else None, max_wait_ms=300, sock=self.sock)
        self.epoch += 1
        assert err == 0 and res[0]["error"] == 0 and res[0]["ack_error"] == 0, res
        got = acquired_offsets(res[0])
        self.pending = [(f, l, [ACCEPT]) for f, l, _ in res[0]["acquired"]]
        self.got.extend(got)
        return got

    def fetch_until(self, what: str, done):
        wait_for(what, lambda: (self.fetch(), done(set(self.got)))[1], BOUND_S)

    def close(self):
        self.sock.close()


def test_read_committed_share_group_gets_committed_transactions_only(broker_factory, topic_name):
    b = share_broker(broker_factory)
    bs = b.bootstrap
    admin_create_topic(bs, topic_name, 1)
    committed_group, uncommitted_group = "rc-" + topic_name, "ru-" + topic_name
    for g, level in ((committed_group, "read_committed"), (uncommitted_group, "read_uncommitted")):
        configs_tool(bs, "--alter", "--entity-type", "groups", "--entity-name", g,
                     "--add-config", f"share.auto.offset.reset=earliest,share.isolation.level={level}")
    out = configs_tool(bs, "--describe", "--entity-type", "groups", "--entity-name", committed_group)
    assert "share.isolation.level=read_committed" in out, out
    bad = kafka_tool("org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", bs, "--alter", "--entity-type", "groups",
                     "--entity-name", committed_group, "--add-config", "share.isolation.level=READ_COMMITTED")
    assert bad.returncode != 0 and "String must be one of: read_committed, read_uncommitted" in bad.stdout + bad.stderr, bad.stdout + bad.stderr

    p = Producer({"bootstrap.servers": bs, "transactional.id": "rc-" + uuid.uuid4().hex, "linger.ms": 5})
    p.init_transactions(30)
    transaction(p, topic_name, [f"c{i}" for i in range(5)], True)
    transaction(p, topic_name, [f"a{i}" for i in range(5)], False)
    transaction(p, topic_name, [f"c{i}" for i in range(5, 10)], True)
    transaction(p, topic_name, [f"o{i}" for i in range(3)], None)  # left open
    at = offsets_by_value(bs, topic_name, 18)
    committed = {at[f"c{i}"] for i in range(10)}
    aborted = {at[f"a{i}"] for i in range(5)}
    still_open = {at[f"o{i}"] for i in range(3)}

    rc = Member(bs, committed_group, topic_name)
    ru = Member(bs, uncommitted_group, topic_name)
    try:
        rc.fetch_until("the committed records, read_committed", lambda got: committed <= got)
        ru.fetch_until("every record, read_uncommitted", lambda got: committed | aborted | still_open <= got)
        # Nothing more comes to the read_committed group while the transaction is open.
        for _ in range(3):
            rc.fetch()
        assert not set(rc.got) & aborted, f"aborted records delivered read_committed: {sorted(set(rc.got) & aborted)}"
        assert not set(rc.got) & still_open, f"an open transaction's records delivered read_committed: {sorted(set(rc.got) & still_open)}"
        assert len(rc.got) == len(set(rc.got)), rc.got
        # The open transaction commits: its records come; the aborted ones never do.
        p.commit_transaction(30)
        rc.fetch_until("the transaction committed last", lambda got: still_open <= got)
        assert not set(rc.got) & aborted, sorted(set(rc.got) & aborted)
        assert len(rc.got) == len(set(rc.got)), rc.got
    finally:
        rc.close()
        ru.close()
