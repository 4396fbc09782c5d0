"""Hostile bytes on the wire: the broker answers with an error or closes that one
connection, never crashes, and keeps serving everyone else.
"""

from __future__ import annotations

import random
import socket
import struct
from concurrent.futures import ThreadPoolExecutor

import pytest

from clients import (Rec, admin_create_topic, consume_confluent, produce_confluent, watermarks)
from kafkawire import (closed_or_reply, API_VERSIONS, api_versions_request, batch_crc, connect, i32, message_v1,
                       parse_api_versions_v0, parse_produce_v2, parse_produce_v8, produce_v2_request,
                       produce_v8_request, recv_frame, record_batch, request, roundtrip)

UNSUPPORTED_VERSION = 35
CORRUPT_MESSAGE = 2
# Safety net for "the broker answers or closes": no assertion about speed.
REPLY_TIMEOUT_S = 5


def _api_versions_ok(bootstrap_or_sock) -> dict:
    frame = api_versions_request(0, 4242)
    corr, err, apis = parse_api_versions_v0(roundtrip(bootstrap_or_sock, frame))
    assert corr == 4242 and err == 0, (corr, err)
    assert API_VERSIONS in apis
    return apis



def _produce_works(bootstrap: str, topic: str):
    [d] = produce_confluent(bootstrap, topic, [Rec(b"still", b"alive", (), None)], partition=0,
                            **{"message.timeout.ms": 30000})
    assert d.offset >= 0


@pytest.fixture
def wire_topic(bootstrap):
    name = "wire-" + str(random.randrange(1 << 30))
    admin_create_topic(bootstrap, name, 1)
    return name


@pytest.mark.parametrize("size", [0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 200 << 20])
def test_oversized_or_negative_frame_closes_only_that_connection(broker, size):
    bootstrap = broker.bootstrap
    with connect(bootstrap) as other:
        _api_versions_ok(other)
        with connect(bootstrap) as s:
            s.sendall(struct.pack(">I", size) + b"\x00\x12\x00\x00\x00\x00\x00\x01" + b"\x00" * 64)
            assert closed_or_reply(s, REPLY_TIMEOUT_S) == "closed", f"frame length {size:#x}: connection not closed"
        broker.assert_alive()
        _api_versions_ok(other)  # an existing connection is unaffected
    _api_versions_ok(bootstrap)  # and new ones are accepted


def test_api_versions_unknown_version_answers_v0_with_unsupported_version(broker):
    with connect(broker.bootstrap) as s:
        s.sendall(api_versions_request(99, 77))
        corr, err, apis = parse_api_versions_v0(recv_frame(s))
    assert corr == 77
    assert err == UNSUPPORTED_VERSION
    assert API_VERSIONS in apis and apis[API_VERSIONS][0] == 0 and apis[API_VERSIONS][1] >= 3, apis


def test_produce_v2_is_refused(broker, wire_topic):
    """Apache Kafka 4.1 advertises Produce 0-13 but refuses v0-2. It closes the connection
    (UnsupportedVersionException); an UNSUPPORTED_VERSION error response is accepted too."""
    with connect(broker.bootstrap) as s:
        s.sendall(produce_v2_request(5, wire_topic, 0, message_v1(b"k", b"v2-record", 1_700_000_000_000)))
        try:
            corr, errs = parse_produce_v2(recv_frame(s))
        except (ConnectionError, ConnectionResetError):
            corr, errs = None, None  # closed: what Kafka 4.1 does
    if errs is not None:
        assert corr == 5 and errs == {(wire_topic, 0): UNSUPPORTED_VERSION}, errs
    broker.assert_alive()
    assert watermarks(broker.bootstrap, wire_topic, 1)[0] == (0, 0), "a Produce v2 record was stored"
    _api_versions_ok(broker.bootstrap)


def test_bad_crc_is_corrupt_message_and_not_stored(broker, wire_topic):
    bootstrap = broker.bootstrap
    recs = [(b"key", b"value-good", [("h", b"1")])]
    good = record_batch(recs, 1_700_000_000_000)
    with connect(bootstrap) as s:
        s.sendall(produce_v8_request(1, wire_topic, 0, good))
        corr, res = parse_produce_v8(recv_frame(s))
        assert corr == 1 and res[(wire_topic, 0)]["error_code"] == 0, res
        assert res[(wire_topic, 0)]["base_offset"] == 0

        # Wrong CRC field, then right CRC field over a flipped payload byte.
        bad_crc = record_batch(recs, 1_700_000_000_001, crc_override=batch_crc(good) ^ 0x5A5A)
        flipped = bytearray(record_batch([(b"key", b"value-bad!", [])], 1_700_000_000_002))
        flipped[-3] ^= 0xFF
        for corr_id, batch in ((2, bad_crc), (3, bytes(flipped))):
            s.sendall(produce_v8_request(corr_id, wire_topic, 0, batch))
            corr, res = parse_produce_v8(recv_frame(s))
            assert corr == corr_id
            assert res[(wire_topic, 0)]["error_code"] == CORRUPT_MESSAGE, res

        # The connection is still usable after the errors.
        s.sendall(produce_v8_request(4, wire_topic, 0, record_batch(recs, 1_700_000_000_003)))
        corr, res = parse_produce_v8(recv_frame(s))
        assert corr == 4 and res[(wire_topic, 0)]["error_code"] == 0 and res[(wire_topic, 0)]["base_offset"] == 1

    assert watermarks(bootstrap, wire_topic, 1)[0] == (0, 2), "a corrupt batch was stored"
    consumed = consume_confluent(bootstrap, wire_topic, 1)[0]
    assert [(c.offset, c.value) for c in consumed] == [(0, b"value-good"), (1, b"value-good")]


def _garbage_case(bootstrap: str, api_key: int, version: int, body: bytes, header_version: int) -> str:
    try:
        with connect(bootstrap) as s:
            s.sendall(request(api_key, version, 1000 + api_key, body, header_version=header_version))
            s.settimeout(REPLY_TIMEOUT_S)
            try:
                frame = recv_frame(s)
            except socket.timeout:
                return "silent"
            except ConnectionError:
                return "closed"
            # A reply must be a whole frame carrying our correlation id.
            (corr,) = struct.unpack_from(">i", frame, 0)
            assert corr == 1000 + api_key, f"api key {api_key} v{version}: reply with correlation id {corr}"
            return "reply"
    except (ConnectionResetError, BrokenPipeError):
        return "closed"


def test_garbage_bodies_for_every_api_key(broker, wire_topic):
    bootstrap = broker.bootstrap
    rnd = random.Random(20240607)
    cases = []
    for api_key in list(range(0, 100)) + [-1, 1000, 32767]:
        for _ in range(3):
            version = rnd.choice([0, 1, rnd.randrange(0, 20), 32767])
            body = rnd.randbytes(rnd.choice([0, 1, 3, 17, 100, 1000]))
            # Sometimes a header whose flexible-version tag section is garbage too.
            cases.append((api_key, version, body, rnd.choice([1, 2])))
    # Plus frames that are garbage from the first byte (random header included).
    raw = [rnd.randbytes(rnd.randrange(1, 300)) for _ in range(30)]

    with ThreadPoolExecutor(max_workers=16) as pool:
        outcomes = list(pool.map(lambda c: _garbage_case(bootstrap, *c), cases))

        def raw_case(payload):
            try:
                with connect(bootstrap) as s:
                    s.sendall(i32(len(payload)) + payload)
                    return closed_or_reply(s, REPLY_TIMEOUT_S)
            except (ConnectionResetError, BrokenPipeError):
                return "closed"
        outcomes += list(pool.map(raw_case, raw))

    counts = {k: outcomes.count(k) for k in ("closed", "reply", "silent")}
    print(f"garbage requests: {counts}")
    broker.assert_alive()
    _api_versions_ok(bootstrap)
    _produce_works(bootstrap, wire_topic)


def test_truncated_frame_then_close(broker, wire_topic):
    """A frame that promises more bytes than it sends, then the client goes away."""
    for _ in range(20):
        with connect(broker.bootstrap) as s:
            s.sendall(i32(1000) + b"\x00\x00\x00\x08\x00\x00\x00\x01")
    broker.assert_alive()
    _api_versions_ok(broker.bootstrap)
    _produce_works(broker.bootstrap, wire_topic)
