"""Request memory is bounded (issue 9, point 2): a frame's bytes are committed as they
arrive, not when its length is announced; all connections of a shard together hold at most
`queued_max_request_bytes` of requests (a connection that would exceed it stops reading
until memory is released); array counts cannot make the decoder reserve more than the
frame. Meanwhile a normal client is served. Memory is read from /proc/<pid>/status.
"""

from __future__ import annotations

import random
import socket
import struct
import threading
import time

import pytest

from clients import Rec, admin_create_topic, consume_confluent, produce_confluent
from conftest import skip_unless_shardlog, wait_for
from kafkawire import (closed_or_reply, API_VERSIONS, api_versions_request, connect, i16, i32, parse_api_versions_v0,
                       recv_frame, roundtrip, string, uvarint)

MIB = 1 << 20
# Safety net for waits on the broker: no assertion about speed.
WAIT_S = 60


def status_kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"{field} not in /proc/{pid}/status")


def rss_mib(broker) -> float:
    return status_kib(broker.proc.pid, "VmRSS") / 1024


def hwm_mib(broker) -> float:
    return status_kib(broker.proc.pid, "VmHWM") / 1024


def api_versions_ok(bootstrap_or_sock) -> None:
    corr, err, apis = parse_api_versions_v0(roundtrip(bootstrap_or_sock, api_versions_request(0, 4242)))
    assert corr == 4242 and err == 0 and API_VERSIONS in apis, (corr, err)


def normal_client_is_served(bootstrap: str) -> None:
    """A real client creates a topic, produces and consumes it back."""
    topic = "limits-" + str(random.randrange(1 << 30))
    admin_create_topic(bootstrap, topic, 1)
    recs = [Rec(f"k{i}".encode(), f"v{i}".encode() * 10, (), None) for i in range(20)]
    produced = produce_confluent(bootstrap, topic, recs, partition=0, **{"message.timeout.ms": 60000})
    assert [p.offset for p in produced] == list(range(20))
    consumed = consume_confluent(bootstrap, topic, 1)
    assert [c.value for c in consumed[0]] == [r.value for r in recs]



def test_silent_connections_announcing_huge_frames_cost_no_memory(broker_factory):
    """(a) 60 connections each announce a ~100 MiB frame and send only its 16-byte start.

    Committing the announced length (the old zero-filled resize) would cost 60 x 100 MiB
    = 6 GiB (kept at 60 so a regression cannot exhaust the machine's memory); reserving it in the 512 MiB pool alone would still commit 4 x 100 MiB. With
    bytes committed as they arrive, each connection holds one 64 KiB read buffer (3.75 MiB
    in all), so the broker's peak RSS stays below 300 MiB: its own baseline (a debug build
    idles well below 150 MiB) plus those buffers plus the normal client's traffic.
    """
    skip_unless_shardlog("broker RSS and a single shard")
    broker = broker_factory(shards=1)
    frame_len = 100 * MIB - 4
    header = i16(18) + i16(0) + i32(1) + string("silent")  # an ApiVersions v0 header
    socks = []
    try:
        for _ in range(60):
            s = connect(broker.bootstrap)
            s.sendall(struct.pack(">i", frame_len) + header)
            socks.append(s)
        # A real client's whole create/produce/consume round runs while they wait (the
        # shard reads their announcements meanwhile).
        normal_client_is_served(broker.bootstrap)
        api_versions_ok(broker.bootstrap)
        broker.assert_alive()
        peak = hwm_mib(broker)
        print(f"60 silent 100 MiB announcements: VmRSS {rss_mib(broker):.1f} MiB, VmHWM {peak:.1f} MiB")
        assert peak < 300, f"broker peak RSS {peak:.0f} MiB with 60 silent connections"
        # The silent connections are still open and waiting, not refused.
        for s in socks[:5]:
            s.settimeout(0.01)
            with pytest.raises(socket.timeout):
                s.recv(1)
    finally:
        for s in socks:
            s.close()
    api_versions_ok(broker.bootstrap)


def test_trickled_large_frames_wait_for_the_pool_and_small_clients_are_served(broker_factory):
    """(b) 40 connections each send a 16 MiB ApiVersions frame (padding after the body is
    ignored, as Kafka does) except its last byte. The pool is 64 MiB; frames above 64 KiB may
    use 7/8 of it (56 MiB), so exactly 3 frames are admitted and read; the other 37
    connections are not read (back-pressure), and their senders block. Meanwhile a normal
    client is served from the part of the pool kept for small requests, and RSS stays
    within baseline + pool + overhead instead of 40 x 16 MiB. Then the last bytes go out:
    every connection is answered in turn, as memory is released.
    """
    skip_unless_shardlog("a shardlog flag, broker RSS and a single shard")
    frame_bytes = 16 * MIB
    broker = broker_factory(shards=1, extra_args=[
        "--socket-request-max-bytes", str(frame_bytes),
        "--queued-max-request-bytes", str(64 * MIB)])
    api_versions_ok(broker.bootstrap)
    baseline = rss_mib(broker)
    n = 40
    admitted_max = (64 * MIB - 64 * MIB // 8) // frame_bytes  # 3
    body_len = frame_bytes - 4
    frame = struct.pack(">i", body_len) + i16(API_VERSIONS) + i16(0) + i32(0) + string("trickle")
    frame += b"\0" * (frame_bytes - len(frame))
    sent_but_last = threading.Semaphore(0)
    finish = threading.Event()
    answers: list[tuple[int, int] | str] = [None] * n  # type: ignore[list-item]
    socks = [connect(broker.bootstrap, timeout_s=WAIT_S * 3) for _ in range(n)]

    def client(i: int) -> None:
        s = socks[i]
        try:
            s.sendall(frame[:-1])
            sent_but_last.release()
            finish.wait()
            s.sendall(frame[-1:])
            corr, err, _ = parse_api_versions_v0(recv_frame(s))
            answers[i] = (corr, err)
        except Exception as e:  # noqa: BLE001 - reported by the assertion below
            answers[i] = f"{type(e).__name__}: {e}"
            sent_but_last.release()

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    try:
        # The admitted frames arrive completely (all but their last byte).
        for _ in range(admitted_max):
            assert sent_but_last.acquire(timeout=WAIT_S), "an admitted frame was not read"
        # A normal client while the large part of the pool is full.
        normal_client_is_served(broker.bootstrap)
        rss = rss_mib(broker)
        fully_sent = admitted_max + sum(1 for _ in iter(lambda: sent_but_last.acquire(blocking=False), False))
        print(f"pool full: {fully_sent} of {n} frames read; VmRSS {rss:.1f} MiB (baseline {baseline:.1f})")
        assert fully_sent == admitted_max, (
            f"{fully_sent} frames of 16 MiB were read while the pool holds {admitted_max}: no back-pressure")
        # Pool (64 MiB) + 64 KiB read buffers + the client's traffic; unbounded it would
        # be 40 x 16 MiB = 640 MiB.
        assert rss < baseline + 64 + 48, f"RSS {rss:.0f} MiB, baseline {baseline:.0f} MiB"
        assert all(a is None for a in answers), f"a connection failed while waiting: {answers}"
    finally:
        finish.set()
    for t in threads:
        t.join(WAIT_S * 3)
    assert answers == [(0, 0)] * n, f"not every waiting connection was served: {answers}"
    for s in socks:
        s.close()
    broker.assert_alive()
    print(f"after: VmRSS {rss_mib(broker):.1f} MiB, VmHWM {hwm_mib(broker):.1f} MiB")


def _metadata_v4_huge_count(count: int) -> bytes:
    # Metadata v4: topics array (count) then allow_auto_topic_creation; a few bytes follow.
    body = i32(count) + string("t") + b"\x01"
    msg = i16(3) + i16(4) + i32(11) + string("huge") + body
    return i32(len(msg)) + msg


def _metadata_v12_huge_count(count: int) -> bytes:
    # Metadata v12 (flexible): compact topics array, header v2.
    body = uvarint(count + 1) + b"\x00" * 17 + b"\x00"
    msg = i16(3) + i16(12) + i32(12) + string("huge") + uvarint(0) + body
    return i32(len(msg)) + msg


def _produce_v3_huge_count(count: int) -> bytes:
    body = i16(-1) + i16(1) + i32(1000) + i32(count) + string("t") + i32(0)
    msg = i16(0) + i16(3) + i32(13) + string("huge") + body
    return i32(len(msg)) + msg


def assert_each_connection_closed(broker, frame: bytes, connections: int, why: str) -> None:
    """Sends `frame` on `connections` connections at once; the broker closes each."""
    socks = []
    try:
        for _ in range(connections):
            s = connect(broker.bootstrap)
            s.sendall(frame)
            socks.append(s)
        for s in socks:
            assert closed_or_reply(s, WAIT_S) == "closed", why
    finally:
        for s in socks:
            s.close()


@pytest.mark.parametrize("frame", [
    pytest.param(_metadata_v4_huge_count(50_000_000), id="metadata-v4"),
    pytest.param(_metadata_v12_huge_count(50_000_000), id="metadata-v12-compact"),
    pytest.param(_produce_v3_huge_count(50_000_000), id="produce-v3"),
])
def test_huge_array_counts_close_the_connection_without_allocating(broker, frame):
    """(c) An array count of 50,000,000 with a few bytes after it: reserving it would be
    50 M x the element's size (GiBs); the codec refuses the count against the bytes left.
    A few such connections at once: each is closed, RSS stays bounded, others are served."""
    skip_unless_shardlog("broker RSS")
    assert_each_connection_closed(broker, frame, 20, "a request with an impossible array count was not refused")
    broker.assert_alive()
    api_versions_ok(broker.bootstrap)
    peak = hwm_mib(broker)
    print(f"huge array counts: VmHWM {peak:.1f} MiB")
    assert peak < 300, f"broker peak RSS {peak:.0f} MiB"


def _metadata_v4_empty_names(count: int) -> bytes:
    # Metadata v4 whose `count` topic names are all empty (2 bytes each on the wire, a
    # ~70-byte struct each once decoded): the count fits the bytes left.
    body = i32(count) + i16(0) * count + b"\x01"
    msg = i16(3) + i16(4) + i32(14) + string("amplify") + body
    return i32(len(msg)) + msg


def test_a_frame_that_would_decode_to_many_times_its_size_is_refused(broker_factory):
    """(issue 28) 25,000,000 empty topic names in a 50 MiB Metadata frame: every count fits
    the bytes left, but decoded it would take ~1.8 GiB (it took the broker to 2.5 GiB of
    RSS). The decode budget (8 x the frame + 1 MiB) refuses it before the topics are built:
    the connection is closed, the broker's peak RSS grows by the frames it read, RSS
    returns near its baseline, and other clients are served."""
    skip_unless_shardlog("broker RSS")
    broker = broker_factory()  # its own process: VmHWM is this test's peak
    frame = _metadata_v4_empty_names(25_000_000)
    api_versions_ok(broker.bootstrap)
    baseline = rss_mib(broker)
    assert_each_connection_closed(broker, frame, 2, "a frame over its decode budget was not refused")
    broker.assert_alive()
    api_versions_ok(broker.bootstrap)
    peak, after = hwm_mib(broker), rss_mib(broker)
    print(f"amplifying frames: VmRSS {baseline:.1f} -> {after:.1f} MiB, VmHWM {peak:.1f} MiB")
    assert peak < baseline + 2 * len(frame) / MIB + 64, f"peak RSS {peak:.0f} MiB from a baseline of {baseline:.0f} MiB"
    assert after < baseline + 32, f"RSS {after:.0f} MiB after the frames were refused (baseline {baseline:.0f} MiB)"


def _metadata_v4_named(count: int) -> bytes:
    # Metadata v4 asking for `count` topics with 20-character names (none exists).
    body = i32(count) + b"".join(i16(20) + b"%020d" % i for i in range(count)) + b"\x00"
    msg = i16(3) + i16(4) + i32(15) + string("large") + body
    return i32(len(msg)) + msg


def test_memory_returns_after_a_burst_of_large_requests(broker_factory):
    """(issue 28) Three 8 MiB Metadata requests of 400,000 topic names each, at once on two
    shards: the broker answers each (an UNKNOWN_TOPIC entry per name) and its RSS, which
    the decoded requests and their answers raise by tens of MiB, comes back within 10 %
    of its baseline (the shards give free pages back after a large request)."""
    skip_unless_shardlog("broker RSS")
    broker = broker_factory(shards=2)
    frame = _metadata_v4_named(400_000)
    api_versions_ok(broker.bootstrap)
    baseline = rss_mib(broker)
    socks = [connect(broker.bootstrap) for _ in range(3)]
    try:
        for s in socks:
            s.sendall(frame)
        answers = [recv_frame(s) for s in socks]
    finally:
        for s in socks:
            s.close()
    for a in answers:
        assert len(a) > 400_000 * 24, f"an answer of {len(a)} bytes names every topic"
    peak = hwm_mib(broker)
    after = wait_for("RSS back within 10 % of its baseline", lambda: (r := rss_mib(broker)) <= baseline * 1.1 and r, WAIT_S)
    print(f"large requests: VmRSS {baseline:.1f} -> {after:.1f} MiB, VmHWM {peak:.1f} MiB")
    broker.assert_alive()
