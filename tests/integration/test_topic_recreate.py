"""A topic re-created under the name of a deleted one starts empty, even when the deleted
topic's partition directory survived on disk.

The directory of a partition is named `<topic>-<partition>`; only the topic id (in the
directory's `partition.metadata`, Kafka's file) tells two topics of one name apart. The
files of a deleted topic can outlive it: the broker may be killed between the committed
DeleteTopics and the removal of its files, and in a cluster a broker may be down while a
topic is deleted. This test puts such a directory back by hand (saved before the delete,
restored after), which is what the broker finds on disk in both cases. It is removed at
the next start (stray partitions, as Kafka's KRaft brokers do).
"""
from __future__ import annotations

import shutil
import subprocess
import time

from clients import Rec, admin, admin_create_topic, consume_confluent, produce_confluent, watermarks
from conftest import SHARDLOG_BIN, skip_unless_shardlog

META = "partition.metadata"


def _delete(bootstrap: str, topic: str) -> None:
    a = admin(bootstrap)
    a.delete_topics([topic], operation_timeout=30)[topic].result(timeout=60)
    deadline = time.monotonic() + 60
    while topic in a.list_topics(timeout=30).topics:
        assert time.monotonic() < deadline, f"{topic} still listed after DeleteTopics"
        time.sleep(0.2)


def test_recreated_topic_does_not_serve_a_deleted_topics_leftover_directory(broker_factory, tmp_path):
    skip_unless_shardlog("puts partition files back into the broker's data dir")
    b = broker_factory(shards=1)
    topic = "recreated"
    part_dir = b.data_dir / f"{topic}-0"
    admin_create_topic(b.bootstrap, topic, 1)
    produce_confluent(b.bootstrap, topic, [Rec(b"k", b"old-%d" % i, (), None) for i in range(5)])
    assert watermarks(b.bootstrap, topic, 1)[0] == (0, 5)
    old_meta = (part_dir / META).read_text()
    assert old_meta.startswith("version: 0\ntopic_id: "), old_meta

    b.stop()
    saved = tmp_path / "saved"
    shutil.copytree(part_dir, saved)
    b.start()
    _delete(b.bootstrap, topic)
    b.stop()
    assert not part_dir.exists(), "DeleteTopics removed the directory"
    shutil.copytree(saved, part_dir)  # the leftover: as if the delete had not reached the files

    b.start()
    # The metadata no longer has the topic: the directory is stray and goes at start-up,
    # before any shard could open it (server/stray_partitions.rs). Had it survived (the
    # open-time check, partition_metadata.rs), its other topic id would still keep it out.
    assert "removing a stray partition directory" in b.log_path.read_text(errors="replace")
    assert not part_dir.exists(), "the stray directory was removed at start-up"
    admin_create_topic(b.bootstrap, topic, 1)
    assert watermarks(b.bootstrap, topic, 1)[0] == (0, 0), "the new topic starts empty"
    new_meta = (part_dir / META).read_text()
    assert new_meta != old_meta, "the directory now belongs to the new topic id"
    produce_confluent(b.bootstrap, topic, [Rec(b"k", b"new", (), None)])
    got = consume_confluent(b.bootstrap, topic, 1)[0]
    assert [(m.offset, m.value) for m in got] == [(0, b"new")]

    # A restart keeps the new topic's data: its own directory is never taken for stray.
    b.stop()
    b.start()
    assert watermarks(b.bootstrap, topic, 1)[0] == (0, 1)


def test_lost_metadata_stops_the_broker_instead_of_removing_its_data(broker_factory):
    """meta.properties (Kafka's): with its controller dir wiped, a broker would start a new
    cluster whose metadata has none of its topics, and every partition directory would
    look stray. It refuses to start instead, as Kafka does, and the data stays."""
    skip_unless_shardlog("wipes the broker's metadata directory")
    b = broker_factory(shards=1)
    admin_create_topic(b.bootstrap, "kept", 1)
    produce_confluent(b.bootstrap, "kept", [Rec(b"k", b"v", (), None)])
    b.stop()
    assert (b.data_dir / "meta.properties").read_text().count("cluster.id=") == 1
    shutil.rmtree(b.data_dir / "controller")
    r = subprocess.run([str(SHARDLOG_BIN), "serve", "--listen", b.bootstrap, "--admin-listener", "", "--data-dir", str(b.data_dir)],
                       capture_output=True, text=True, timeout=120)
    out = r.stdout + r.stderr
    assert r.returncode != 0, out[-3000:]
    assert "Invalid cluster.id in: " in out, out[-3000:]
    assert (b.data_dir / "kept-0").is_dir(), "the partition's data is still there"
