"""Real Kafka clients driven by the integration tests, and record bookkeeping.

Producers return what their delivery reports said: a list of Produced(rec, partition,
offset). Consumers return {partition: [Consumed...]} in offset order. Consumers use
assign() to explicit partitions from the beginning (no consumer groups).
"""

from __future__ import annotations

import base64
import json
import os
import random
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import (OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer,
                             TopicPartition)
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import REPO, SHARDLOG_BIN, is_kafka, kafka_classpath

JAVA_JAR = Path(os.environ.get("SHARDLOG_JAVA_TOOL", REPO / "tests" / "java" / "target" / "clienttool.jar"))
# Safety nets only: no assertion is about how fast anything is.
CONSUME_TIMEOUT_S = 300
PRODUCE_TIMEOUT_S = 300


@dataclass(frozen=True)
class Rec:
    key: bytes | None
    value: bytes
    headers: tuple  # ((name: str, value: bytes), ...)
    ts: int | None  # CreateTime in ms, None = let the client choose


@dataclass(frozen=True)
class Produced:
    rec: Rec
    partition: int
    offset: int
    ts: int | None = None  # timestamp from the delivery report


@dataclass(frozen=True)
class Consumed:
    partition: int
    offset: int
    key: bytes | None
    value: bytes
    headers: tuple
    ts: int


def now_ms() -> int:
    return int(time.time() * 1000)


def make_records(n: int, seed: int, ascii_only: bool = False, base_ts: int | None = None,
                 with_ts: bool = True) -> list[Rec]:
    """n keyed records with headers; values partly compressible, sizes 20..600 bytes.

    Timestamps are distinct and recent (an hour ago + i ms): old timestamps would
    let time-based retention delete the data under the test's feet.
    """
    rnd = random.Random(seed)
    if base_ts is None:
        base_ts = now_ms() - 3_600_000
    words = [b"alpha", b"bravo", b"charlie", b"delta", b"echo", b"foxtrot", b"golf", b"hotel"]
    out = []
    for i in range(n):
        key = f"key-{rnd.randrange(2000)}".encode()
        body = b" ".join(rnd.choice(words) for _ in range(rnd.randrange(2, 80)))
        if ascii_only:
            value = f"v{seed}-{i}-".encode() + body
            headers = (("hidx", str(i).encode()),)
        else:
            value = f"v{seed}-{i}-".encode() + body + rnd.randbytes(rnd.randrange(0, 64))
            nh = i % 4  # 0..3 headers, including repeated names and an empty value
            hs = [("hidx", str(i).encode()), ("bin", rnd.randbytes(rnd.randrange(0, 20))),
                  ("hidx", b"")][:nh]
            headers = tuple(hs)
        out.append(Rec(key, value, headers, base_ts + i if with_ts else None))
    return out


def norm_headers(h) -> tuple:
    if not h:
        return ()
    return tuple((k if isinstance(k, str) else k.decode(), v if v is not None else b"") for k, v in h)


# -- comparison ---------------------------------------------------------------------------

def compare(produced: list[Produced], consumed: dict[int, list[Consumed]], check_ts: bool = True):
    """Per partition, in offset order: same offsets, keys, values, headers, timestamps."""
    by_part: dict[int, list[Produced]] = {}
    for p in produced:
        by_part.setdefault(p.partition, []).append(p)
    total = 0
    for part in sorted(set(by_part) | set(consumed)):
        exp = sorted(by_part.get(part, []), key=lambda p: p.offset)
        got = consumed.get(part, [])
        assert len(got) == len(exp), (
            f"partition {part}: consumed {len(got)} records, produced (acked) {len(exp)}")
        for e, g in zip(exp, got):
            where = f"partition {part} offset {e.offset}"
            assert g.offset == e.offset, f"{where}: consumed offset {g.offset}"
            assert g.key == e.rec.key, f"{where}: key {g.key!r} != {e.rec.key!r}"
            assert g.value == e.rec.value, f"{where}: value differs ({g.value[:40]!r}... vs {e.rec.value[:40]!r}...)"
            assert g.headers == norm_headers(e.rec.headers), f"{where}: headers {g.headers!r} != {e.rec.headers!r}"
            if check_ts and e.rec.ts is not None:
                assert g.ts == e.rec.ts, f"{where}: timestamp {g.ts} != {e.rec.ts}"
        total += len(got)
    return total


def assert_dense(consumed: dict[int, list[Consumed]], start: dict[int, int] | None = None):
    for part, recs in consumed.items():
        first = (start or {}).get(part, 0)
        offs = [c.offset for c in recs]
        assert offs == list(range(first, first + len(offs))), f"partition {part}: offsets not dense"


# -- admin ----------------------------------------------------------------------------------

def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def admin_create_topic(bootstrap: str, name: str, partitions: int, config: dict | None = None):
    a = admin(bootstrap)  # keep the handle alive until the future resolves
    fs = a.create_topics([NewTopic(name, partitions, 1, config=config or {})],
                         operation_timeout=30, request_timeout=30)
    fs[name].result(timeout=60)
    wait_topic(bootstrap, name, partitions)


def commit_sync(consumer, offsets: list, timeout_s: float = 60) -> None:
    """A synchronous offset commit, retried while the group's coordinator is not ready: a
    Kafka broker creates and loads __consumer_offsets on the first use after it starts and
    answers NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS until then (librdkafka does not
    retry a synchronous commit on them)."""
    from confluent_kafka import KafkaError, KafkaException
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            consumer.commit(offsets=offsets, asynchronous=False)
            return
        except KafkaException as e:
            code = e.args[0].code()
            if code not in (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                            KafkaError.COORDINATOR_NOT_AVAILABLE) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def kafka_tool(cls: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Runs one of Kafka's own CLI tools (the class a kafka-*.sh script runs)."""
    cmd = ["java", "-Xmx256m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", kafka_classpath(), cls, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def segment_bytes(partition_dir: Path) -> int:
    """Bytes of a partition's `.log` segments on disk (what DescribeLogDirs reports)."""
    return sum(f.stat().st_size for f in partition_dir.glob("*.log"))


def wait_topic(bootstrap: str, name: str, partitions: int, timeout_s: float = 30):
    """Wait until metadata shows the topic with all partitions led (safety-net timeout)."""
    a = admin(bootstrap)
    deadline = time.monotonic() + timeout_s
    while True:
        md = a.list_topics(topic=name, timeout=10)
        t = md.topics.get(name)
        if t is not None and t.error is None and len(t.partitions) == partitions and all(
                p.leader >= 0 and p.error is None for p in t.partitions.values()):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"topic {name} not ready with {partitions} partitions: {t}")
        time.sleep(0.1)


def shardlog_cli(*args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
    cmd = [str(SHARDLOG_BIN), *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}")
    return r


def cli_create_topic(bootstrap: str, name: str, partitions: int, config: dict | None = None):
    """`shardlog topic create`; against Kafka (no shardlog CLI) the Java AdminClient stands in."""
    cfg = config or {}
    if is_kafka():
        args = ["create-topic", "--bootstrap", bootstrap, "--topic", name, "--partitions", str(partitions)]
        if cfg:
            args += ["--config", ",".join(f"{k}={v}" for k, v in cfg.items())]
        java_tool(*args)
    else:
        args = ["topic", "create", name, "--partitions", str(partitions)]
        for k, v in cfg.items():
            args += ["--config", f"{k}={v}"]
        shardlog_cli(*args, "--bootstrap", bootstrap)
    wait_topic(bootstrap, name, partitions)


def watermarks(bootstrap: str, topic: str, partitions: int) -> dict[int, tuple[int, int]]:
    c = confluent_consumer(bootstrap)
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30) for p in range(partitions)}
    finally:
        c.close()


# -- confluent-kafka (librdkafka) --------------------------------------------------------------

def confluent_consumer(bootstrap: str, **extra) -> Consumer:
    # confluent-kafka insists on a group.id even for assign(); nothing is committed.
    conf = {"bootstrap.servers": bootstrap, "group.id": "shardlog-tests-assign-only",
            "enable.auto.commit": False, "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest", "enable.partition.eof": False}
    conf.update(extra)
    return Consumer(conf)


def produce_confluent(bootstrap: str, topic: str, recs: list[Rec], compression: str = "none",
                      partition: int | None = None, **extra) -> list[Produced]:
    conf = {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
            "compression.type": compression, "linger.ms": 5,
            "queue.buffering.max.messages": 200_000, "message.timeout.ms": 120_000}
    conf.update(extra)
    p = Producer(conf)
    results: list[Produced | None] = [None] * len(recs)
    errors = []

    def cb(i):
        def on_delivery(err, msg):
            if err is not None:
                errors.append((i, err))
            else:
                results[i] = Produced(recs[i], msg.partition(), msg.offset(), msg.timestamp()[1])
        return on_delivery

    for i, r in enumerate(recs):
        kw = {"key": r.key, "value": r.value, "headers": list(r.headers) or None, "on_delivery": cb(i)}
        if r.ts is not None:
            kw["timestamp"] = r.ts
        if partition is not None:
            kw["partition"] = partition
        while True:
            try:
                p.produce(topic, **kw)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    remaining = p.flush(PRODUCE_TIMEOUT_S)
    assert remaining == 0, f"confluent-kafka: {remaining} records not delivered"
    assert not errors, f"confluent-kafka delivery errors (first 5): {errors[:5]}"
    return results  # type: ignore[return-value]


def consume_confluent(bootstrap: str, topic: str, partitions: int, **extra) -> dict[int, list[Consumed]]:
    c = confluent_consumer(bootstrap, **extra)
    try:
        high = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(partitions)}
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        out: dict[int, list[Consumed]] = {p: [] for p in range(partitions)}
        pending = {p for p in range(partitions) if high[p] > 0}
        last = {p: -1 for p in range(partitions)}
        deadline = time.monotonic() + CONSUME_TIMEOUT_S
        while pending:
            assert time.monotonic() < deadline, f"confluent-kafka consume: partitions {pending} not read to {high}"
            for m in c.consume(num_messages=10_000, timeout=0.5):
                if m.error():
                    raise KafkaException(m.error())
                part = m.partition()
                out[part].append(Consumed(part, m.offset(), m.key(), m.value() or b"",
                                          norm_headers(m.headers()), m.timestamp()[1]))
                last[part] = m.offset()
                if last[part] + 1 >= high[part]:
                    pending.discard(part)
            # A partition that ends in control records (transaction markers) is read when
            # the consumer's position passed them: no message marks that end.
            for tp in c.position([TopicPartition(topic, p) for p in pending]) if pending else []:
                if tp.offset >= high[tp.partition]:
                    pending.discard(tp.partition)
        return out
    finally:
        c.close()


# -- kafka-python --------------------------------------------------------------------------------

def produce_kafka_python(bootstrap: str, topic: str, recs: list[Rec]) -> list[Produced]:
    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5,
                      batch_size=64 * 1024, request_timeout_ms=60_000)
    try:
        futs = []
        for r in recs:
            futs.append(p.send(topic, key=r.key, value=r.value, headers=list(r.headers),
                               timestamp_ms=r.ts))
        p.flush(timeout=PRODUCE_TIMEOUT_S)
        out = []
        for r, f in zip(recs, futs):
            md = f.get(timeout=60)
            out.append(Produced(r, md.partition, md.offset, md.timestamp))
        return out
    finally:
        p.close(timeout=30)


def consume_kafka_python(bootstrap: str, topic: str, partitions: int) -> dict[int, list[Consumed]]:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      auto_offset_reset="earliest", max_poll_records=5000)
    try:
        tps = [KTP(topic, p) for p in range(partitions)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        end = c.end_offsets(tps)
        out: dict[int, list[Consumed]] = {p: [] for p in range(partitions)}
        deadline = time.monotonic() + CONSUME_TIMEOUT_S
        while any(c.position(tp) < end[tp] for tp in tps):
            assert time.monotonic() < deadline, "kafka-python consume did not reach the end offsets"
            for tp, msgs in c.poll(timeout_ms=500).items():
                for m in msgs:
                    out[tp.partition].append(Consumed(tp.partition, m.offset, m.key, m.value or b"",
                                                      norm_headers(m.headers), m.timestamp))
        return out
    finally:
        c.close()


# -- Java kafka-clients (tests/java ClientTool) -------------------------------------------------

def java_tool(*args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess:
    assert JAVA_JAR.exists(), f"{JAVA_JAR} missing: scripts/test.sh builds it (mvn -f tests/java/pom.xml package)"
    cmd = ["java", "-Xmx512m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-jar", str(JAVA_JAR), *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"java ClientTool {args[0]} exited {r.returncode}\nstdout (tail):\n"
                             f"{r.stdout[-3000:]}\nstderr (tail):\n{r.stderr[-5000:]}")
    return r


def json_lines(text: str) -> list[dict]:
    return [json.loads(l) for l in text.splitlines() if l.startswith("{")]


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode()


def write_java_input(path: Path, recs: list[Rec], partition: int | None = None):
    with open(path, "w") as f:
        for r in recs:
            hs = ";".join(f"{k}={_b64(v)}" for k, v in r.headers)
            key = "-" if r.key is None else _b64(r.key)
            f.write(f"{-1 if partition is None else partition}\t0\t{r.ts if r.ts is not None else -1}\t"
                    f"{key}\t{_b64(r.value)}\t{hs}\n")


def produce_java(bootstrap: str, topic: str, recs: list[Rec], workdir: Path, compression: str = "none",
                 extra_props: str = "") -> list[Produced]:
    inp = workdir / f"java-in-{topic}-{compression}.tsv"
    write_java_input(inp, recs)
    args = ["produce", "--bootstrap", bootstrap, "--topic", topic, "--input", str(inp),
            "--compression", compression]
    if extra_props:
        args += ["--prop", extra_props]
    r = java_tool(*args)
    lines = json_lines(r.stdout)
    done = [l for l in lines if l.get("done")]
    assert done and done[0]["failed"] == 0, f"Java producer reported failures: {[l for l in lines if 'error' in l][:5]}"
    out: list[Produced | None] = [None] * len(recs)
    for l in lines:
        if "i" in l:
            out[l["i"]] = Produced(recs[l["i"]], l["p"], l["o"], l["ts"])
    assert all(x is not None for x in out), "Java producer: some records have no delivery report"
    return out  # type: ignore[return-value]


def parse_record_lines(text: str) -> tuple[dict[int, list[Consumed]], int]:
    out: dict[int, list[Consumed]] = {}
    done = None
    for line in text.splitlines():
        if line.startswith("#done"):
            done = int(line.split("\t")[1])
            continue
        f = line.split("\t")
        part, off, ts = int(f[0]), int(f[1]), int(f[2])
        key = None if f[3] == "-" else base64.b64decode(f[3])
        hs = ()
        if f[5]:
            hs = tuple((h.split("=", 1)[0], base64.b64decode(h.split("=", 1)[1])) for h in f[5].split(";"))
        out.setdefault(part, []).append(Consumed(part, off, key, base64.b64decode(f[4]), hs, ts))
    assert done is not None, "Java consumer did not finish"
    return out, done


def consume_java(bootstrap: str, topic: str, partitions: int, extra_props: str = "") -> dict[int, list[Consumed]]:
    args = ["consume", "--bootstrap", bootstrap, "--topic", topic,
            "--partitions", ",".join(str(p) for p in range(partitions)),
            "--timeout-ms", str(CONSUME_TIMEOUT_S * 1000)]
    if extra_props:
        args += ["--prop", extra_props]
    r = java_tool(*args)
    out, n = parse_record_lines(r.stdout)
    assert sum(len(v) for v in out.values()) == n
    for p in range(partitions):
        out.setdefault(p, [])
    return out


# -- kcat (Debian, librdkafka 2.0.2) ---------------------------------------------------------------

def kcat_bin() -> str:
    b = shutil.which("kcat") or shutil.which("kafkacat")
    assert b, "kcat not installed (scripts/test.sh installs the Debian package)"
    return b
