"""Hand-built Kafka protocol bytes for the bad-input tests: framing, request headers,
ApiVersions, Produce (v2, v3-v8) and RecordBatch v2 with CRC-32C (Castagnoli), records
built one by one (any offset delta, count or timestamp), gzip and zstd record sections,
all with the standard library only — so a test can send exactly the bytes it means,
including wrong ones.
"""

from __future__ import annotations

import socket
import struct

# -- CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) ----------------------------------
_CRC32C_TABLE = []
for _n in range(256):
    _c = _n
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _CRC32C_TABLE.append(_c)


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    t = _CRC32C_TABLE
    for b in data:
        crc = t[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283  # the standard check value

# -- primitives --------------------------------------------------------------------------------


def i8(v): return struct.pack(">b", v)
def i16(v): return struct.pack(">h", v)
def i32(v): return struct.pack(">i", v)
def u32(v): return struct.pack(">I", v)
def i64(v): return struct.pack(">q", v)


def string(s: str | None) -> bytes:
    if s is None:
        return i16(-1)
    b = s.encode()
    return i16(len(b)) + b


def uvarint(v: int) -> bytes:
    out = bytearray()
    while True:
        byte = v & 0x7F
        v >>= 7
        if v:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def varint(v: int) -> bytes:  # zigzag, 32 or 64 bit alike for our small values
    return uvarint((v << 1) ^ (v >> 63))


def compact_string(s: str) -> bytes:
    b = s.encode()
    return uvarint(len(b) + 1) + b


def varbytes(b: bytes | None) -> bytes:
    if b is None:
        return varint(-1)
    return varint(len(b)) + b


# -- framing ------------------------------------------------------------------------------------

def request(api_key: int, api_version: int, correlation_id: int, body: bytes,
            header_version: int = 1, client_id: str | None = "shardlog-tests") -> bytes:
    header = i16(api_key) + i16(api_version) + i32(correlation_id) + string(client_id)
    if header_version >= 2:
        header += uvarint(0)  # no tagged fields
    msg = header + body
    return i32(len(msg)) + msg


def connect(bootstrap: str, timeout_s: float = 10) -> socket.socket:
    host, port = bootstrap.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=timeout_s)
    s.settimeout(timeout_s)
    return s


def recv_exact(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def closed_or_reply(s: socket.socket, timeout_s: float) -> str:
    """'closed' if the peer closed/reset, 'reply' if a frame came, 'silent' at the safety net."""
    s.settimeout(timeout_s)
    try:
        data = s.recv(4)
    except (ConnectionResetError, BrokenPipeError):
        return "closed"
    except socket.timeout:
        return "silent"
    return "reply" if data else "closed"


def recv_frame(s: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", recv_exact(s, 4))
    assert 0 <= size < 64 << 20, f"response frame size {size}"
    return recv_exact(s, size)


def roundtrip(bootstrap_or_sock, frame: bytes) -> bytes:
    if isinstance(bootstrap_or_sock, socket.socket):
        bootstrap_or_sock.sendall(frame)
        return recv_frame(bootstrap_or_sock)
    with connect(bootstrap_or_sock) as s:
        s.sendall(frame)
        return recv_frame(s)


class Reader:
    def __init__(self, b: bytes):
        self.b, self.i = b, 0

    def take(self, fmt: str):
        (v,) = struct.unpack_from(fmt, self.b, self.i)
        self.i += struct.calcsize(fmt)
        return v

    def i16(self): return self.take(">h")
    def i32(self): return self.take(">i")
    def i64(self): return self.take(">q")

    def string(self):
        n = self.i16()
        if n < 0:
            return None
        s = self.b[self.i:self.i + n].decode()
        self.i += n
        return s


# -- ApiVersions ------------------------------------------------------------------------------------

API_VERSIONS = 18
PRODUCE = 0


def api_versions_request(version: int, correlation_id: int) -> bytes:
    if version >= 3:
        body = compact_string("shardlog-tests") + compact_string("1.0") + uvarint(0)
        return request(API_VERSIONS, version, correlation_id, body, header_version=2)
    return request(API_VERSIONS, version, correlation_id, b"", header_version=1)


def answers_api_versions(s: socket.socket) -> bool:
    """Whether the broker answers an ApiVersions on `s` (False: it closed the connection)."""
    try:
        s.sendall(api_versions_request(0, 3))
        recv_frame(s)
        return True
    except (ConnectionError, OSError):
        return False


def parse_api_versions_v0(resp: bytes) -> tuple[int, int, dict[int, tuple[int, int]]]:
    """(correlation id, error code, {api_key: (min, max)}) from a v0-format response."""
    r = Reader(resp)
    corr = r.i32()
    err = r.i16()
    n = r.i32()
    assert 0 <= n < 1000, f"api count {n}"
    apis = {}
    for _ in range(n):
        k, lo, hi = r.i16(), r.i16(), r.i16()
        apis[k] = (lo, hi)
    return corr, err, apis


# -- RecordBatch v2 ---------------------------------------------------------------------------------

def record(offset_delta: int, key: bytes | None, value: bytes | None,
           headers: list[tuple[str, bytes]] = (), ts_delta: int = 0) -> bytes:
    """One DefaultRecord (length-prefixed) as it sits in a records section."""
    rec = i8(0) + varint(ts_delta) + varint(offset_delta) + varbytes(key) + varbytes(value) + varint(len(headers))
    for hk, hv in headers:
        rec += varint(len(hk.encode())) + hk.encode() + varbytes(hv)
    return varint(len(rec)) + rec


def batch(section: bytes, count: int, last_offset_delta: int, base_ts: int, max_ts: int | None = None,
          producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
          attributes: int = 0, crc_override: int | None = None) -> bytes:
    """A RecordBatch v2 around a records section as given (compressed or not: the codec
    goes in `attributes`), header fields as given, CRC-32C computed unless overridden."""
    after_crc = (i16(attributes) + i32(last_offset_delta) + i64(base_ts)
                 + i64(base_ts if max_ts is None else max_ts)
                 + i64(producer_id) + i16(producer_epoch) + i32(base_sequence) + i32(count)
                 + bytes(section))
    crc = crc32c(after_crc) if crc_override is None else crc_override
    after_len = i32(-1) + i8(2) + u32(crc) + after_crc  # partition leader epoch, magic, crc
    return i64(0) + i32(len(after_len)) + after_len


def record_batch(records: list[tuple[bytes | None, bytes, list[tuple[str, bytes]]]], base_ts: int,
                 producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
                 attributes: int = 0, crc_override: int | None = None) -> bytes:
    section = b"".join(record(i, k, v, hs) for i, (k, v, hs) in enumerate(records))
    return batch(section, len(records), len(records) - 1, base_ts, producer_id=producer_id,
                 producer_epoch=producer_epoch, base_sequence=base_sequence, attributes=attributes,
                 crc_override=crc_override)


# Codec ids in a batch's attributes (bits 0-2).
GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4


def gzip_compress(data: bytes) -> bytes:
    import zlib
    c = zlib.compressobj(6, zlib.DEFLATED, 31)  # wbits 31: gzip container, as Kafka's GZIPOutputStream
    return c.compress(data) + c.flush()


def zstd_stored_frame(data: bytes) -> bytes:
    """A valid zstd frame holding `data` in raw (stored) blocks: no zstd library needed,
    and any zstd decoder must accept it (RFC 8878: magic, frame header with a 128 KiB
    window, then blocks of type Raw, the last one flagged)."""
    out = bytearray(u32_le(0xFD2FB528))
    out += bytes([0x00, 0x38])  # frame header descriptor (nothing optional), window 2^17
    block_max = 128 * 1024
    chunks = [data[i:i + block_max] for i in range(0, len(data), block_max)] or [b""]
    for n, chunk in enumerate(chunks):
        last = 1 if n == len(chunks) - 1 else 0
        header = last | (0 << 1) | (len(chunk) << 3)  # block type 0 = Raw
        out += header.to_bytes(3, "little") + chunk
    return bytes(out)


def u32_le(v): return struct.pack("<I", v)


def batch_crc(batch: bytes) -> int:
    return struct.unpack_from(">I", batch, 8 + 4 + 4 + 1)[0]


# -- Produce -------------------------------------------------------------------------------------------

def produce_request(version: int, correlation_id: int, topic: str, partition: int, records: bytes,
                    acks: int = -1, timeout_ms: int = 30000, client_id: str | None = "shardlog-tests") -> bytes:
    """Produce v3-v8 (the non-flexible versions with a transactional id): one partition."""
    assert 3 <= version <= 8, version
    body = (string(None) + i16(acks) + i32(timeout_ms) + i32(1) + string(topic) + i32(1)
            + i32(partition) + i32(len(records)) + records)
    return request(PRODUCE, version, correlation_id, body, header_version=1, client_id=client_id)


def produce_v8_request(correlation_id: int, topic: str, partition: int, records: bytes,
                       acks: int = -1, timeout_ms: int = 30000) -> bytes:
    return produce_request(8, correlation_id, topic, partition, records, acks, timeout_ms)


def parse_produce(version: int, resp: bytes) -> tuple[int, dict[tuple[str, int], dict]]:
    """A Produce v3-v8 response: (correlation id, {(topic, partition): fields})."""
    r = Reader(resp)
    corr = r.i32()
    out = {}
    for _ in range(r.i32()):
        name = r.string()
        for _ in range(r.i32()):
            idx = r.i32()
            d = {"error_code": r.i16(), "base_offset": r.i64(), "log_append_time_ms": r.i64()}
            if version >= 5:
                d["log_start_offset"] = r.i64()
            if version >= 8:
                errs = []
                for _ in range(r.i32()):
                    errs.append((r.i32(), r.string()))
                d["record_errors"] = errs
                d["error_message"] = r.string()
            out[(name, idx)] = d
    return corr, out


def parse_produce_v8(resp: bytes) -> tuple[int, dict[tuple[str, int], dict]]:
    return parse_produce(8, resp)


def produce_v2_request(correlation_id: int, topic: str, partition: int, message_set: bytes) -> bytes:
    body = (i16(-1) + i32(30000) + i32(1) + string(topic) + i32(1) + i32(partition)
            + i32(len(message_set)) + message_set)
    return request(PRODUCE, 2, correlation_id, body, header_version=1)


def parse_produce_v2(resp: bytes) -> tuple[int, dict[tuple[str, int], int]]:
    r = Reader(resp)
    corr = r.i32()
    out = {}
    for _ in range(r.i32()):
        name = r.string()
        for _ in range(r.i32()):
            idx = r.i32()
            err = r.i16()
            r.i64()
            r.i64()
            out[(name, idx)] = err
    return corr, out


def message_v1(key: bytes | None, value: bytes, ts: int) -> bytes:
    """A legacy MessageSet entry (magic 1), as a Produce v2 request carries."""
    import zlib
    body = i8(1) + i8(0) + i64(ts) + (i32(-1) if key is None else i32(len(key)) + key) + i32(len(value)) + value
    msg = u32(zlib.crc32(body) & 0xFFFFFFFF) + body
    return i64(0) + i32(len(msg)) + msg


# -- Fetch ---------------------------------------------------------------------------------------------

FETCH = 1


def fetch_v4_request(correlation_id: int, topic: str, partitions: list[tuple[int, int, int]],
                     max_bytes: int, min_bytes: int = 1, max_wait_ms: int = 0) -> bytes:
    """Fetch v4 (no sessions, plain arrays) for `partitions` = [(partition, fetch_offset,
    partition_max_bytes)] of one topic, in that order."""
    body = (i32(-1) + i32(max_wait_ms) + i32(min_bytes) + i32(max_bytes) + i8(0)
            + i32(1) + string(topic) + i32(len(partitions)))
    for p, offset, pmax in partitions:
        body += i32(p) + i64(offset) + i32(pmax)
    return request(FETCH, 4, correlation_id, body, header_version=1)


def parse_fetch_v4(resp: bytes) -> tuple[int, list[dict]]:
    """(correlation id, partitions in response order: {topic, partition, error_code,
    high_watermark, records})."""
    r = Reader(resp)
    corr = r.i32()
    r.i32()  # throttle_time_ms
    out = []
    for _ in range(r.i32()):
        name = r.string()
        for _ in range(r.i32()):
            d = {"topic": name, "partition": r.i32(), "error_code": r.i16(),
                 "high_watermark": r.i64(), "last_stable_offset": r.i64()}
            n_aborted = r.i32()
            for _ in range(max(n_aborted, 0)):
                r.i64()
                r.i64()
            size = r.i32()
            d["records"] = b"" if size < 0 else r.b[r.i:r.i + size]
            r.i += max(size, 0)
            out.append(d)
    return corr, out


def batches_in(records: bytes) -> list[tuple[int, int, int]]:
    """(base_offset, last_offset, size in bytes) of each whole RecordBatch in `records`."""
    out, i = [], 0
    while i + 12 <= len(records):
        base, length = struct.unpack_from(">qi", records, i)
        if i + 12 + length > len(records):
            break
        (last_delta,) = struct.unpack_from(">i", records, i + 23)
        out.append((base, base + last_delta, 12 + length))
        i += 12 + length
    return out


# -- flexible (compact) encoding, for the admin-API compatibility tests ------------------------

def compact_nullable_string(s: str | None) -> bytes:
    return uvarint(0) if s is None else compact_string(s)


def varbytes_compact(b: bytes) -> bytes:
    return uvarint(len(b) + 1) + b


def compact_array(items: list[bytes]) -> bytes:
    return uvarint(len(items) + 1) + b"".join(items)


class FlexReader(Reader):
    """Reads flexible-version fields (compact strings and arrays, tagged fields skipped)."""

    def i8(self): return self.take(">b")

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            byte = self.b[self.i]
            self.i += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7

    def compact_string(self) -> str | None:
        n = self.uvarint() - 1
        if n < 0:
            return None
        s = self.b[self.i:self.i + n].decode()
        self.i += n
        return s

    def compact_bytes(self) -> bytes | None:
        n = self.uvarint() - 1
        if n < 0:
            return None
        b = self.b[self.i:self.i + n]
        self.i += n
        return b

    def array(self, item) -> list | None:
        n = self.uvarint() - 1
        return None if n < 0 else [item() for _ in range(n)]

    def uuid(self) -> bytes:
        u = self.b[self.i:self.i + 16]
        self.i += 16
        return u

    def tagged(self, read_tag) -> None:
        """A tagged-field section: `read_tag(tag)` reads the fields it knows; the reader
        then moves past each field whatever was read."""
        for _ in range(self.uvarint()):
            tag, size = self.uvarint(), self.uvarint()
            end = self.i + size
            read_tag(tag)
            self.i = end

    def tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.i += self.uvarint()


def flexible_roundtrip(bootstrap: str, api_key: int, version: int, body: bytes, correlation_id: int = 1) -> FlexReader:
    """Sends a flexible-version request (header v2); returns a reader past the response header v1."""
    resp = roundtrip(bootstrap, request(api_key, version, correlation_id, body + uvarint(0), header_version=2))
    r = FlexReader(resp)
    assert r.i32() == correlation_id
    r.tags()
    return r


def alter_replica_log_dirs(bootstrap: str, path: str, topic: str, partitions: list[int]) -> dict[int, int]:
    """AlterReplicaLogDirs v1 moving `partitions` of `topic` to `path`: {partition: error code}."""
    body = (i32(1) + string(path) + i32(1) + string(topic) + i32(len(partitions))
            + b"".join(i32(p) for p in partitions))
    r = Reader(roundtrip(bootstrap, request(34, 1, 5, body)))
    assert r.i32() == 5 and r.i32() == 0  # correlation id, throttle
    out = {}
    for _ in range(r.i32()):
        assert r.string() == topic
        for _ in range(r.i32()):
            p = r.i32()
            out[p] = r.i16()
    return out
