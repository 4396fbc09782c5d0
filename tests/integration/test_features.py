"""Feature versions (KIP-584) as Kafka 4.4 keeps them: `kafka-features.sh describe`
lists every feature Kafka 4.4 defines with its supported range and finalized level;
`upgrade` / `downgrade` change finalized levels through the controller with Kafka's
rules and words, all or none; levels survive a restart; group.version 0 turns KIP-848
consumer groups off (UNSUPPORTED_VERSION), as on Kafka 4.4. Both targets.

What differs by design: shardlog supports only the levels it implements, so where Kafka
finalizes higher levels shardlog would report its own (none today: share.version 2,
KIP-1191's dead-letter queue, is finalized on both). streams.version 1 (KIP-1071) is finalized in a new
cluster on both. eligible.leader.replicas.version 1 (KIP-966) and kraft.version 1
(KIP-853 voter changes) are supported and finalized in a new cluster, as Kafka 4.4
formats one (`--standalone`).
"""

from __future__ import annotations

import re

import kafkawire as w
from clients import kafka_tool
from conftest import is_kafka, wait_for
from test_groups import find_group_coordinator

FEATURES = ["eligible.leader.replicas.version", "group.version", "kraft.version", "metadata.version",
            "share.version", "streams.version", "transaction.version"]
LINE = re.compile(r"Feature: (\S+)\s+SupportedMinVersion: (\S+)\s+SupportedMaxVersion: (\S+)\s+"
                  r"FinalizedVersionLevel: (\S+)\s+Epoch: (\d+)")


def features(bootstrap: str, *args: str):
    r = kafka_tool("org.apache.kafka.tools.FeatureCommand", "--bootstrap-server", bootstrap, *args)
    return r.returncode, r.stdout + r.stderr


def describe(bootstrap: str) -> dict[str, tuple[str, str, str, int]]:
    """{feature: (supported min, supported max, finalized level, epoch)} as kafka-features.sh prints it."""
    rc, out = features(bootstrap, "describe")
    assert rc == 0, out
    return {m[1]: (m[2], m[3], m[4], int(m[5])) for m in LINE.finditer(out)}


def heartbeat_error(bootstrap: str, group: str) -> int:
    """A new member's first ConsumerGroupHeartbeat v0 (KIP-848): its error code."""
    body = (w.compact_string(group) + w.compact_string("") + w.i32(0) + w.uvarint(0) + w.uvarint(0) + w.i32(30000)
            + w.compact_array([w.compact_string("some-topic")]) + w.uvarint(0) + w.compact_array([]))
    # FindCoordinator first (Kafka creates __consumer_offsets on the first one); the
    # coordinator may still be loading: retriable errors are "not yet".
    with w.connect(bootstrap) as s:
        wait_for("the group coordinator", lambda: find_group_coordinator(s, group) == 0)

    def answered():
        r = w.flexible_roundtrip(bootstrap, 68, 0, body)
        r.i32()
        err = r.i16()
        return (err,) if err not in (14, 15, 16) else None  # COORDINATOR_LOAD_IN_PROGRESS / NOT_AVAILABLE / NOT_COORDINATOR
    return wait_for("a heartbeat answer", answered, 60)[0]


def test_describe_lists_every_kafka_4_4_feature(bootstrap):
    d = describe(bootstrap)
    assert sorted(d) == FEATURES, d
    assert d["metadata.version"][:3] == ("3.3-IV3", "4.4-IV2", "4.4-IV2")
    assert d["transaction.version"][:3] == ("0", "2", "2")
    assert d["group.version"][:3] == ("0", "1", "1")
    assert d["eligible.leader.replicas.version"][:3] == ("0", "1", "1")
    assert d["kraft.version"][:3] == ("0", "1", "1")
    assert d["streams.version"][:3] == ("0", "1", "1")
    assert d["share.version"][:3] == ("0", "2", "2")
    for name, (lo, hi, level, _) in d.items():
        if name != "metadata.version":
            assert int(lo) <= int(level) <= int(hi), (name, d[name])


def test_upgrade_and_downgrade_follow_kafka_rules(bootstrap):
    before = describe(bootstrap)
    # A downgrade needs the downgrade command; metadata.version is never downgraded.
    rc, out = features(bootstrap, "upgrade", "--feature", "transaction.version=1")
    assert "Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade." in out, out
    rc, out = features(bootstrap, "downgrade", "--feature", "metadata.version=30")
    assert "Unsupported metadata.version downgrade from 33 to 30. Refusing to perform the requested downgrade because it might delete metadata information." in out, out
    rc, out = features(bootstrap, "downgrade", "--unsafe", "--feature", "metadata.version=30")
    assert "Unsafe metadata downgrade is not supported in this version." in out, out
    # Beyond what the controller supports, or a feature it does not know.
    rc, out = features(bootstrap, "upgrade", "--feature", "transaction.version=3")
    assert re.search(r"Invalid update version 3 for feature transaction.version. Local controller \d+ only supports versions 0-2", out), out
    rc, out = features(bootstrap, "upgrade", "--feature", "bogus.version=1")
    assert re.search(r"Invalid update version 1 for feature bogus.version. Local controller \d+ does not support this feature.", out), out
    # All or none: a good update next to a bad one is not applied.
    rc, out = features(bootstrap, "downgrade", "--feature", "transaction.version=1", "--feature", "metadata.version=30")
    assert "2 out of 2 operation(s) failed." in out, out
    # A dry run changes nothing.
    rc, out = features(bootstrap, "downgrade", "--feature", "transaction.version=1", "--dry-run")
    assert "transaction.version can be downgraded to 1." in out, out
    after = describe(bootstrap)
    assert {k: v[:3] for k, v in after.items()} == {k: v[:3] for k, v in before.items()}
    # A real downgrade and upgrade; the epoch moves forward.
    try:
        rc, out = features(bootstrap, "downgrade", "--feature", "transaction.version=1")
        assert "transaction.version was downgraded to 1." in out, out
        d = wait_for("the new level described", lambda: (x := describe(bootstrap))["transaction.version"][2] == "1" and x, 30)
        assert d["transaction.version"][3] > before["transaction.version"][3]
    finally:
        rc, out = features(bootstrap, "upgrade", "--feature", "transaction.version=2")
        assert "transaction.version was upgraded to 2." in out, out
    wait_for("transaction.version 2 again", lambda: describe(bootstrap)["transaction.version"][2] == "2", 30)


def test_group_version_0_turns_consumer_groups_off(bootstrap, topic_name):
    assert heartbeat_error(bootstrap, f"{topic_name}-on") == 0
    try:
        rc, out = features(bootstrap, "downgrade", "--feature", "group.version=0")
        assert "group.version was downgraded to 0." in out, out
        wait_for("group.version 0 described", lambda: describe(bootstrap)["group.version"][2] == "0", 30)
        assert heartbeat_error(bootstrap, f"{topic_name}-off") == 35  # UNSUPPORTED_VERSION
        # Kafka cannot downgrade to a newer version.
        rc, out = features(bootstrap, "downgrade", "--feature", "group.version=1")
        assert "Can't downgrade to a newer version." in out, out
    finally:
        rc, out = features(bootstrap, "upgrade", "--feature", "group.version=1")
        assert "group.version was upgraded to 1." in out, out
    wait_for("group.version 1 described", lambda: describe(bootstrap)["group.version"][2] == "1", 30)
    assert heartbeat_error(bootstrap, f"{topic_name}-again") == 0


def test_finalized_levels_survive_a_restart(broker):
    if is_kafka():
        # The Kafka target's node keeps its levels too; the restart harness is shardlog's.
        import pytest
        pytest.skip("restart is exercised on shardlog (the metadata log and its snapshot)")
    bootstrap = broker.bootstrap
    try:
        rc, out = features(bootstrap, "downgrade", "--feature", "transaction.version=1")
        assert "transaction.version was downgraded to 1." in out, out
        broker.restart(kill=True)
        assert describe(broker.bootstrap)["transaction.version"][2] == "1"
    finally:
        features(broker.bootstrap, "upgrade", "--feature", "transaction.version=2")
    assert wait_for("transaction.version 2 again", lambda: describe(broker.bootstrap)["transaction.version"][2] == "2", 30)
