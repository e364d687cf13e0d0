"""The Produce check reads every record (records/codec.py ``check_records``) and bounds decompression
(records/compression.py): what it accepts, ListOffsets and Fetch down-conversion can read; what a batch
decompresses to is bounded; a stored batch that cannot be read is an error for its partition, not a
closed connection."""

from __future__ import annotations

import random
import resource
import socket
import struct
import zlib

import cramjam
import pytest
from crc32c import crc32c

from odradek.broker.handlers import k00_produce
from odradek.protocol.codec import decode_response, encode_request
from odradek.records import compression, legacy
from odradek.records.batch import HEADER, HEADER_SIZE, InvalidRecordError, read_header
from odradek.records.codec import (
    Record,
    build_batch,
    check_records,
    decode_batch,
    decode_records,
    decode_varint,
    encode_varint,
    validate_produced,
)

CORRUPT_MESSAGE, MESSAGE_TOO_LARGE = 2, 10
CODECS = [0, 1, 2, 3, 4]


def varint(n: int) -> bytes:
    out = bytearray()
    encode_varint(n, out)
    return bytes(out)


def record(fields: bytes, length: int | None = None) -> bytes:
    """A record of raw ``fields`` (everything after the length prefix), with their length or ``length``."""
    return varint(len(fields) if length is None else length) + fields


def batch_of(body: bytes, count: int, codec: int = 0) -> bytes:
    """A v2 batch of ``count`` records whose (uncompressed) records are ``body``: header, length and CRC right."""
    payload = compression.compress(codec, body) if codec else body
    out = bytearray(HEADER_SIZE) + payload
    HEADER.pack_into(out, 0, 0, len(out) - 12, -1, 2, 0, codec, count - 1, 1000, 1000, -1, -1, -1, count)
    struct.pack_into(">I", out, 17, crc32c(memoryview(out)[21:]))
    return bytes(out)


def good(key: bytes = b"k", value: bytes = b"value") -> bytes:
    return record(b"\x00\x00\x00" + varint(len(key)) + key + varint(len(value)) + value + b"\x00")


# Records whose CRC is right but whose fields are not: each refused by decode_batch, so by Produce too.
DELTAS = b"\x00\x00\x00"  # attributes, timestamp delta, offset delta
V = DELTAS + varint(-1) + varint(1) + b"v"  # no key, value "v": what comes before the header count
BROKEN = {
    "key length -2": record(DELTAS + varint(-2) + varint(1) + b"v" + b"\x00"),
    "key past the record": record(DELTAS + varint(40) + b"kk" + varint(1) + b"v" + b"\x00"),
    "value length -5": record(DELTAS + varint(1) + b"k" + varint(-5) + b"\x00\x00"),
    "value past the record": record(DELTAS + varint(-1) + varint(30) + b"vvv" + b"\x00"),
    "negative header count": record(V + varint(-1)),
    "header count past the record": record(V + varint(1000) + b"\x00\x00"),
    "null header key": record(V + varint(1) + varint(-1) + varint(-1)),
    "header key past the record": record(V + varint(1) + varint(50) + b"h"),
    "header value length -2": record(V + varint(1) + varint(1) + b"h" + varint(-2)),
    "timestamp delta of 11 bytes": record(b"\x00" + b"\xff" * 10 + b"\x01\x00" + varint(-1) + varint(-1) + b"\x00"),
    "fields shorter than the length": record(V + b"\x00" + b"\x00"),
    "fields longer than the length": record(DELTAS + varint(-1) + varint(3) + b"vvv" + b"\x00", length=7),
    "length below 6": record(b"\x00\x00\x00\x01\x01", length=5),
}


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_record_with_broken_fields_is_refused_as_decode_refuses_it(case, codec):
    # alone, and in the middle of a batch whose other records are good
    for body, count in ((BROKEN[case], 1), (good() * 3 + BROKEN[case] + good() * 2, 6)):
        batch = batch_of(body, count, codec)
        with pytest.raises(InvalidRecordError) as refused:
            validate_produced(batch)
        assert refused.value.error_code == CORRUPT_MESSAGE
        checked = k00_produce._check_or_error(memoryview(bytearray(batch)), 9, 1048588)
        assert isinstance(checked, InvalidRecordError) and checked.error_code == CORRUPT_MESSAGE
        with pytest.raises(InvalidRecordError):
            decode_batch(batch)


@pytest.mark.parametrize("codec", CODECS)
def test_records_of_every_kind_pass_and_decode(codec):
    records = [(None, None, [], 1000), (b"", b"", [], 1001), (b"k" * 70, b"v" * 9000, [("h", b"x"), ("n", None)], 5),
               (b"k", None, [("\u00e9t\u00e9", b"")], 1 << 40)]
    batch = build_batch(records, compression=codec)
    assert [h.records_count for _, h in validate_produced(batch)] == [4]
    _, decoded = decode_batch(batch)
    assert [(r.key, r.value, r.headers) for r in decoded] == [(k, v, h) for k, v, h, _ in records]


def test_a_header_key_that_is_not_utf8_is_accepted_and_read_as_java_reads_it():
    body = record(V + varint(1) + varint(2) + b"\xff\xfe" + varint(-1))
    batch = batch_of(body, 1)
    validate_produced(batch)
    assert decode_batch(batch)[1][0].headers == [("\ufffd\ufffd", None)]


def test_stray_bytes_after_the_last_record_are_refused():
    with pytest.raises(InvalidRecordError):
        validate_produced(batch_of(good() * 2 + b"\x00", 2))


# ------------------------------------------------------------------- runs of one shape (the C shortcut)

def _reference(body: bytes, count: int) -> list[tuple]:
    """A plain reading of ``count`` records, as decode_records read them before check_records existed:
    the slow walker ``check_records`` (and its shortcut over runs) must agree with."""
    pos, out = 0, []

    def field(pos):
        size, pos = decode_varint(body, pos)
        if size < -1 or pos + max(size, 0) > len(body):
            raise InvalidRecordError(CORRUPT_MESSAGE, "bad field")
        return (None, pos) if size < 0 else (body[pos:pos + size], pos + size)

    for _ in range(count):
        length, pos = decode_varint(body, pos)
        end = pos + length
        if length < 6 or end > len(body):
            raise InvalidRecordError(CORRUPT_MESSAGE, "bad length")
        ts, pos = decode_varint(body, pos + 1)
        off, pos = decode_varint(body, pos)
        key, pos = field(pos)
        value, pos = field(pos)
        n, pos = decode_varint(body, pos)
        if n < 0:
            raise InvalidRecordError(CORRUPT_MESSAGE, "bad header count")
        headers = []
        for _ in range(n):
            hkey, pos = field(pos)
            if hkey is None:
                raise InvalidRecordError(CORRUPT_MESSAGE, "null header key")
            hval, pos = field(pos)
            headers.append((hkey.decode("utf-8", "replace"), hval))
        if pos != end:
            raise InvalidRecordError(CORRUPT_MESSAGE, "fields disagree with the length")
        out.append((off, key, value, headers))
    if pos != len(body):
        raise InvalidRecordError(CORRUPT_MESSAGE, "stray bytes")
    return out


def _verdict(fn, *args):
    try:
        return fn(*args)
    except InvalidRecordError:
        return "refused"


SHAPES = [
    lambda i: (None, b"v" * 100, []),
    lambda i: (b"key-%04d" % i, b"v" * 1000, []),
    lambda i: (None, b"v" * 20, [("trace", b"abc"), ("n", None)]),
    lambda i: (b"k" * 70, b"v" * 200, [("h" * 70, b"x" * 3)]),
]


@pytest.mark.parametrize("shape", range(len(SHAPES)))
def test_the_shortcut_over_runs_agrees_with_a_plain_walk_on_mutated_batches(shape):
    rng = random.Random(shape)
    records = [(*SHAPES[shape](i), 1_700_000_000_000 + i // 20) for i in range(300)]  # offset delta widens at 64
    body = build_batch(records)[HEADER_SIZE:]
    header = read_header(build_batch(records))
    assert _verdict(_reference, body, 300) != "refused"
    starts, pos = [], 0
    while pos < len(body):
        starts.append(pos)
        length, pos = decode_varint(body, pos)
        pos += length
    refused = 0
    for _ in range(250):
        mutated = bytearray(body)
        for _ in range(rng.choice((1, 1, 2, 3))):  # mostly structure (the first bytes, the last) of later records
            start = starts[rng.randrange(100, 300)]
            at = rng.choice((start + rng.randrange(16), start - 1, start - rng.randrange(1, 30),
                             rng.randrange(len(mutated))))
            mutated[at] = rng.choice((0x00, 0x01, 0x02, 0x03, 0x7F, 0x80, 0xFF, rng.randrange(256)))
        mutated = bytes(mutated)
        expected = _verdict(_reference, mutated, 300)
        got = _verdict(check_records, mutated, 300)
        assert (got == "refused") == (expected == "refused"), (expected if expected == "refused" else "accepted")
        if expected != "refused":
            decoded = decode_records(header, mutated)
            assert [(r.offset, r.key, r.value, r.headers) for r in decoded] == expected
        refused += expected == "refused"
    assert 25 < refused < 225  # both outcomes were exercised


def test_a_broken_record_deep_in_a_run_is_refused():
    records = [(b"key-%04d" % i, b"v" * 100, [], 1000) for i in range(500)]
    body = build_batch(records)[HEADER_SIZE:]
    pos = 0
    for _ in range(333):
        length, pos = decode_varint(body, pos)
        pos += length
    ts = decode_varint(body, pos)[1] + 1
    key = decode_varint(body, decode_varint(body, ts)[1])[1]
    value = key + 1 + 8
    end = decode_varint(body, value)[1] + 100
    for at, byte in ((ts, 0x80), (key, 0x0E), (key, 0x03), (value, 0x02), (end, 0x02)):
        mutated = bytearray(body)  # a 2-byte timestamp delta; key length 7, -2; value length 1; one header
        mutated[at] = byte
        with pytest.raises(InvalidRecordError):
            check_records(bytes(mutated), 500)
        assert _verdict(_reference, bytes(mutated), 500) == "refused"
    check_records(body, 500)


# ------------------------------------------------------------------------------------ decompression bombs

def _zeros_batch(size: int, codec: int) -> bytes:
    """A batch of one record whose value is ``size`` zero bytes, compressed with ``codec`` (streamed, so that
    building a bomb does not take its size in memory)."""
    fields = b"\x00\x00\x00" + varint(-1) + varint(size)
    head = record(fields, length=len(fields) + size + 1)[:-len(fields)] + fields
    if codec != 4:
        return batch_of(head + bytes(size) + b"\x00", 1, codec)
    c = cramjam.zstd.Compressor(level=3)
    c.compress(head)
    chunk = bytes(1 << 22)
    left = size
    while left:
        c.compress(chunk[:min(left, len(chunk))])
        left -= min(left, len(chunk))
    c.compress(b"\x00")
    blob = bytes(c.finish())
    out = bytearray(HEADER_SIZE) + blob
    HEADER.pack_into(out, 0, 0, len(out) - 12, -1, 2, 0, 4, 0, 1000, 1000, -1, -1, -1, 1)
    struct.pack_into(">I", out, 17, crc32c(memoryview(out)[21:]))
    return bytes(out)


def test_a_zstd_bomb_is_refused_without_being_decompressed():
    bomb = _zeros_batch(256 << 20, 4)  # 256 MB of zeros in a few KiB
    assert len(bomb) < 16 << 10
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    checked = k00_produce._check_or_error(memoryview(bytearray(bomb)), 9, 1048588)
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert isinstance(checked, InvalidRecordError) and checked.error_code == MESSAGE_TOO_LARGE
    assert grown_kib < 32 << 10  # was the whole 256 MB (twice)
    with pytest.raises(InvalidRecordError):
        decode_batch(bomb)  # read back, as old data on disk, it is bounded too (64 MiB)


@pytest.mark.parametrize("codec", [1, 3, 4])
def test_past_the_bound_is_message_too_large_and_within_it_passes(codec):
    batch = _zeros_batch(2 << 20, codec)  # far more than 64:1, so the floor (max.message.bytes) decides
    with pytest.raises(InvalidRecordError) as refused:
        validate_produced(batch, 1048588)
    assert refused.value.error_code == MESSAGE_TOO_LARGE
    validate_produced(batch, 3 << 20)  # a topic with a larger max.message.bytes takes it
    assert len(decode_batch(batch)[1][0].value) == 2 << 20


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_decompress_stops_at_its_limit(codec):
    blob = compression.compress(codec, bytes(range(256)) * 4000)
    assert compression.decompress(codec, blob, limit=1024000) == bytes(range(256)) * 4000
    for limit in (1023999, 1000, 0):
        with pytest.raises(InvalidRecordError) as refused:
            compression.decompress(codec, blob, limit=limit)
        assert refused.value.error_code == MESSAGE_TOO_LARGE
    with pytest.raises(InvalidRecordError) as refused:
        compression.decompress(codec, blob[:len(blob) // 2] + b"junk", limit=1 << 20)
    assert refused.value.error_code == CORRUPT_MESSAGE


def test_decompression_past_the_scratch_buffer_uses_its_own_buffer():
    data = bytes(range(256)) * 20000  # 5 MB: more than the 2 MiB scratch
    assert compression.decompress(4, compression.compress(4, data), limit=len(data)) == data
    with pytest.raises(InvalidRecordError):
        compression.decompress(4, compression.compress(4, data), limit=len(data) - 1)


def test_many_small_bombs_in_one_record_set_share_one_bound():
    one = _zeros_batch(900_000, 4)  # each alone is under max.message.bytes, so accepted
    validate_produced(one, 1048588)
    with pytest.raises(InvalidRecordError) as refused:
        validate_produced(one * 3, 1048588)
    assert refused.value.error_code == MESSAGE_TOO_LARGE


@pytest.mark.parametrize("codec", CODECS)
def test_highly_compressible_real_batches_pass(codec):
    # librdkafka's batch.size bounds a batch's uncompressed bytes by 1,000,000: anything up to it passes
    records = [(None, b"odradek " * 120, [], 1000 + i) for i in range(1000)]
    batch = build_batch(records, compression=codec)
    assert [h.records_count for _, h in validate_produced(batch, 1048588)] == [1000]


def _legacy_set(magic: int, values: list[bytes], codec: int) -> bytes:
    inner = bytearray()
    for i, value in enumerate(values):
        legacy._encode_message(inner, magic, Record(i, 1000 + i, None, value, []), False)
    wrapper = bytearray()
    legacy._encode_message(wrapper, magic, Record(len(values) - 1, 1000, None, compression.compress(codec, inner), []),
                           False)
    wrapper[17] |= codec
    struct.pack_into(">I", wrapper, 12, zlib.crc32(memoryview(wrapper)[16:]))
    return bytes(wrapper)


def test_a_legacy_wrapper_bomb_is_refused():
    bomb = _legacy_set(1, [bytes(8 << 20)], 1)  # gzip: about 1000:1
    checked = k00_produce._check_or_error(bomb, 2, 1048588)
    assert isinstance(checked, InvalidRecordError) and checked.error_code == MESSAGE_TOO_LARGE


@pytest.mark.parametrize("codec", [1, 2, 3])
def test_compressible_legacy_sets_are_up_converted(codec):
    message_set = _legacy_set(1, [b"odradek " * 1000] * 100, codec)
    checked = k00_produce._check_or_error(message_set, 2, 1048588)
    assert not isinstance(checked, InvalidRecordError), checked
    buf, [(pos, header)] = checked
    assert header.compression == codec and len(decode_batch(buf, pos)[1]) == 100


# -------------------------------------------------------------------------- reading bad old data back

def test_down_conversion_serves_the_batches_before_one_it_cannot_read():
    first = build_batch([(b"k", b"first", [], 1000)], base_offset=0)
    bad = bytearray(batch_of(BROKEN["key length -2"], 1))
    struct.pack_into(">q", bad, 0, 1)
    out = legacy.downconvert(first + bytes(bad), 1)
    assert out.count(b"first") == 1 and len(out) < 100
    with pytest.raises(InvalidRecordError):
        legacy.downconvert(bytes(bad), 1)


# ------------------------------------------------------------------------------------------ end to end

def _call(sock: socket.socket, api_key: int, version: int, body: dict, correlation_id: int = 1) -> dict:
    sock.sendall(encode_request(api_key, version, correlation_id, "validation-test", body))
    size = struct.unpack(">i", _recv(sock, 4))[0]
    got, response = decode_response(api_key, version, _recv(sock, size))
    assert got == correlation_id
    return response


def _recv(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        out += chunk
    return bytes(out)


def _produce(sock: socket.socket, topic: str, records: bytes, correlation_id: int = 1) -> int:
    response = _call(sock, 0, 3, {"acks": 1, "timeout_ms": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": records}]}]}, correlation_id)
    return response["responses"][0]["partition_responses"][0]["error_code"]


@pytest.mark.timeout(90)
def test_a_broker_refuses_a_corrupt_record_and_survives_bad_stored_data(broker_factory):
    b = broker_factory()
    host, port = b.bootstrap.rsplit(":", 1)
    topic = "validation"
    with socket.create_connection((host, int(port)), timeout=20) as sock:
        created = _call(sock, 19, 4, {"topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1,
                                                  "assignments": [], "configs": []}], "timeout_ms": 10000})
        assert created["topics"][0]["error_code"] == 0
        for i, case in enumerate(["key length -2", "negative header count", "header key past the record"]):
            assert _produce(sock, topic, batch_of(good() + BROKEN[case], 2), 10 + i) == CORRUPT_MESSAGE
        assert _produce(sock, topic, build_batch([(b"key", b"value", [], 1000)]), 20) == 0  # same connection
        assert _produce(sock, topic, _zeros_batch(64 << 20, 4), 21) == MESSAGE_TOO_LARGE
    # Bad data on disk (say from before this check): one record's key length made -2, the CRC made right.
    b.stop()
    segment = b.data_dir / f"{topic}-0" / "00000000000000000000.log"
    data = bytearray(segment.read_bytes())
    header = read_header(data, 0)
    key_length = HEADER_SIZE + 1 + 3  # record length, attributes, timestamp and offset deltas
    assert data[key_length] == varint(3)[0]
    data[key_length] = varint(-2)[0]
    struct.pack_into(">I", data, 17, crc32c(memoryview(data)[21:header.size]))
    segment.write_bytes(bytes(data))
    b.start()
    host, port = b.bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=20) as sock:
        listed = _call(sock, 2, 1, {"replica_id": -1, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "timestamp": 0}]}]}, 30)
        assert listed["topics"][0]["partitions"][0]["error_code"] == CORRUPT_MESSAGE
        fetched = _call(sock, 1, 3, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                                     "topics": [{"topic": topic, "partitions": [
                                         {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]}, 31)
        assert fetched["responses"][0]["partitions"][0]["error_code"] == CORRUPT_MESSAGE
        assert _call(sock, 18, 0, {}, 32)["error_code"] == 0  # the connection is still served
    assert b.is_running()
