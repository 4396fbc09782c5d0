"""A Jepsen-style history recorder and checker for any Kafka-compatible broker (issue 28).

- `workload.py`: producers and consumers (real confluent-kafka clients) that record every
  send with its outcome, every poll, every commit and every transaction as JSON lines,
  then a final drain that reads every partition from its start to its end;
  `python3 -m tests.history.workload --bootstrap HOST:PORT --out history.jsonl`.
- `check.py`: judges a whole history (lost writes, duplicates, inconsistent offsets,
  non-monotonic or skipping reads, aborted/uncommitted reads under read_committed,
  group offsets moving backwards); `python3 -m tests.history.check history.jsonl`.
- `nemesis.py`: faults the workload runs under (kill -9 of a partition leader, restarted).
- `campaign.py`: a cluster (tests/integration/cluster_harness.py), a workload under a
  nemesis, the checker; what `scripts/history.sh` runs.

The op format is documented in `history.py`. Run the modules from the repository root.
"""
