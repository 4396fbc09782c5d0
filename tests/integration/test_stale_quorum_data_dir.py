"""Issue 26 (first finding): data dirs that hold an earlier cluster's metadata log, started
with other controller ports (as `scripts/cluster.sh start` on a directory left by a
failed start did). The log's membership names the old addresses, which nothing listens
on: the nodes used to wait 60 s for a leader and fail with a raft timeout that did not
say why. Now each node refuses at start, naming the quorum its log holds and the
controller_quorum_voters it was given.
"""

from __future__ import annotations

import re

import conftest
from cluster_harness import Cluster
from conftest import skip_unless_shardlog, wait_for


def test_a_data_dir_of_another_quorum_is_refused_at_start(tmp_path):
    skip_unless_shardlog("the cluster harness starts shardlog processes")
    first = Cluster(3, tmp_path / "cluster", log_dir=conftest.LOG_ROOT, name="test_stale_quorum_first-",
                    binary=conftest.SHARDLOG_BIN)
    first.start()
    try:
        first.wait_ready(timeout_s=60)
        first.wait_leader(timeout_s=60)
    finally:
        first.close()
    old_voters = first.voters

    again = Cluster(3, tmp_path / "cluster", log_dir=conftest.LOG_ROOT, name="test_stale_quorum_again-",
                    binary=conftest.SHARDLOG_BIN)
    assert again.voters != old_voters, "other controller ports"
    again.start()
    try:
        for nd in again.nodes:
            wait_for(f"node {nd.node_id} exits", lambda: not nd.alive(), 60)
            log = re.sub(r"\x1b\[[0-9;]*m", "", nd.log_since_start())
            assert f"holds the quorum {old_voters}" in log, nd.log_tail()
            assert f"controller_quorum_voters is {again.voters}" in log, nd.log_tail()
    finally:
        again.close()
