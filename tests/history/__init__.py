"""A Jepsen-style history recorder and checker for any Kafka-compatible broker (issue 28).

- `workload.py`: producers and consumers (real confluent-kafka clients) that record every
  send with its outcome, every poll, every commit and every transaction as JSON lines,
  then a final drain that reads every partition from its start to its end;
  `python3 -m tests.history.workload --bootstrap HOST:PORT --out history.jsonl`.
- `check.py`: judges a whole history (lost writes, duplicates, inconsistent offsets,
  non-monotonic or skipping reads, aborted/uncommitted reads under read_committed,
  group offsets moving backwards); `python3 -m tests.history.check history.jsonl`.
- `chaos.py`: the chaos runner: a cluster built for the chosen nemeses, the workload under
  a seeded schedule of faults, the checker; `python3 -m tests.history.chaos --seed N
  --duration S --nemesis all`. `scripts/chaos.sh` runs campaigns of it.
- `nemeses/`: the faults (process, network, disk, membership), one file per kind;
  `netns.py`: the namespaces and bridge the network nemeses cut.
- `txn_nemesis.py`: the transaction coordinator's broker killed (test_txn_failover.py).

The op format is documented in `history.py`. Run the modules from the repository root.
"""
