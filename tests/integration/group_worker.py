"""A confluent-kafka group consumer run as its own process by test_groups.py (so the test
can kill -9 it). Appends "partition offset" per processed record to --out, commits
synchronously every few records and on revocation.

usage: group_worker.py BOOTSTRAP TOPIC GROUP OUT_FILE
"""

import sys
import time

from confluent_kafka import Consumer, KafkaException

bootstrap, topic, group, out_path = sys.argv[1:5]
c = Consumer({
    "bootstrap.servers": bootstrap,
    "group.id": group,
    "auto.offset.reset": "earliest",
    "enable.auto.commit": False,
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 500,
    "partition.assignment.strategy": "range",
})
out = open(out_path, "a", buffering=1)
pending = 0


def commit():
    global pending
    if pending:
        try:
            c.commit(asynchronous=False)
        except KafkaException as e:  # e.g. a rebalance raced the commit: records get redone
            print(f"commit failed: {e}", file=sys.stderr, flush=True)
        pending = 0


def on_revoke(consumer, partitions):
    commit()


c.subscribe([topic], on_revoke=on_revoke)
while True:
    m = c.poll(0.2)
    if m is None:
        commit()
        continue
    if m.error():
        continue
    out.write(f"{m.partition()} {m.offset()}\n")
    pending += 1
    time.sleep(0.001)  # some work per record
    if pending >= 20:
        commit()
