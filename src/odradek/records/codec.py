"""Magic v2 records: decode a batch into records, and build batches (including transaction markers).

The 61-byte batch header is handled by ``batch.py``; this module deals with what follows it. Each record::

    length          varint   bytes of the record after this field
    attributes      int8     unused (0)
    timestampDelta  varlong  relative to the batch baseTimestamp
    offsetDelta     varint   relative to the batch baseOffset
    keyLength       varint   -1 = null key
    key             bytes
    valueLength     varint   -1 = null value (tombstone)
    value           bytes
    headersCount    varint
    headers         { keyLength varint, key utf-8, valueLength varint (-1 = null), value }*

Varints are protobuf zig-zag (``(n << 1) ^ (n >> 63)``, 7 bits per byte, low group first); varint and
varlong share one encoding and differ only in range. When the batch codec is not 0, everything after
``recordsCount`` is a single compressed blob of those records.

The broker stores batches opaquely; this decoding is needed only for down-conversion, ListOffsets by
timestamp, and tests. Building is for broker-written batches (transaction markers, up-conversion).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from crc32c import crc32c

from . import compression as _codecs  # aliased: build_batch has a `compression` argument
from .batch import (
    CONTROL_BIT,
    CORRUPT_MESSAGE,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    BatchHeader,
    InvalidRecordError,
    read_header,
    validate_v2,
)

ABORT, COMMIT = 0, 1  # control record types of transaction markers
_CONTROL_KEY = struct.Struct(">hh")  # version, type
_MARKER_VALUE = struct.Struct(">hi")  # version, coordinator epoch
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def _int64(n: int) -> int:
    """``n`` wrapped into a signed 64-bit integer, as Java's long arithmetic does: timestamp deltas are
    longs, so a delta between timestamps a long apart, and the sum of it and the base, wrap around."""
    return (n - _INT64_MIN) % (1 << 64) + _INT64_MIN


class Record(NamedTuple):
    offset: int  # absolute
    timestamp: int  # absolute; the batch max timestamp for LogAppendTime batches
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


# ---------------------------------------------------------------------------------------------- varints

def encode_varint(value: int, out: bytearray) -> None:
    """Append ``value`` (a signed varint or varlong) zig-zag encoded to ``out``."""
    n = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def decode_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Read a zig-zag varint/varlong at ``pos``; return (value, next position)."""
    n = shift = 0
    while True:
        try:
            b = buf[pos]
        except IndexError:
            raise InvalidRecordError(CORRUPT_MESSAGE, "truncated varint") from None
        pos += 1
        n |= (b & 0x7F) << shift
        if not b & 0x80:
            return (n >> 1) ^ -(n & 1), pos
        shift += 7
        if shift > 63:
            raise InvalidRecordError(CORRUPT_MESSAGE, "varint longer than 10 bytes")


def varint_size(value: int) -> int:
    n = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    size = 1
    while n > 0x7F:
        n >>= 7
        size += 1
    return size


# -------------------------------------------------------------------------------------------- decoding

def _read_bytes(buf: bytes, pos: int) -> tuple[bytes | None, int]:
    length, pos = decode_varint(buf, pos)
    if length < 0:
        if length != -1:
            raise InvalidRecordError(CORRUPT_MESSAGE, f"invalid length {length}")
        return None, pos
    end = pos + length
    if end > len(buf):
        raise InvalidRecordError(CORRUPT_MESSAGE, "record field overruns the batch")
    return buf[pos:end], end


def decode_records(header: BatchHeader, body: bytes) -> list[Record]:
    """Decode ``header.records_count`` records from the (already decompressed) bytes after the header."""
    out: list[Record] = []
    pos = 0
    lat = header.max_timestamp if header.is_log_append_time else None
    for _ in range(header.records_count):
        length, pos = decode_varint(body, pos)
        end = pos + length
        if length < 6 or end > len(body):  # attributes + 5 one-byte varints at least
            raise InvalidRecordError(CORRUPT_MESSAGE, f"record length {length} does not fit the batch")
        pos += 1  # attributes
        ts_delta, pos = decode_varint(body, pos)
        off_delta, pos = decode_varint(body, pos)
        key, pos = _read_bytes(body, pos)
        value, pos = _read_bytes(body, pos)
        count, pos = decode_varint(body, pos)
        if count < 0:
            raise InvalidRecordError(CORRUPT_MESSAGE, f"negative header count {count}")
        headers: list[tuple[str, bytes | None]] = []
        for _ in range(count):
            hkey, pos = _read_bytes(body, pos)
            if hkey is None:
                raise InvalidRecordError(CORRUPT_MESSAGE, "null header key")
            hval, pos = _read_bytes(body, pos)
            try:
                headers.append((hkey.decode("utf-8"), hval))
            except UnicodeDecodeError:
                raise InvalidRecordError(CORRUPT_MESSAGE, "header key is not UTF-8") from None
        if pos != end:
            raise InvalidRecordError(CORRUPT_MESSAGE, f"record length {length} disagrees with its fields")
        timestamp = lat if lat is not None else header.base_timestamp + ts_delta
        offset = header.base_offset + off_delta
        if not (_INT64_MIN <= timestamp <= _INT64_MAX and _INT64_MIN <= offset <= _INT64_MAX):
            timestamp, offset = _int64(timestamp), _int64(offset)  # a producer may write any delta
        out.append(Record(offset, timestamp, key, value, headers))
    if pos != len(body):
        raise InvalidRecordError(CORRUPT_MESSAGE, f"{len(body) - pos} stray bytes after the last record")
    return out


def check_record_framing(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> None:
    """Check that exactly ``records_count`` records tile the batch body, as Kafka's validator does.

    Only the length prefix of each record is read, never its fields. A CRC only proves the producer's
    bytes arrived intact; this proves they are records at all, so no consumer is ever served a batch it
    cannot parse.

    Runs of records of one size (fixed-width payloads; the offset delta widens the record by a byte at
    record 64 and 8192) are crossed without a Python step per record: when a record has the same stride as
    the one before, the next ``k`` prefixes are compared as strided byte columns in C; if all equal this
    record's prefix, the ``k`` records tile their span. ``k`` doubles while runs hold and halves when one
    breaks, so mixed sizes cost one integer comparison per record over the plain walk.
    """
    body: bytes | memoryview = memoryview(buf)[pos + HEADER_SIZE:pos + header.size]
    if header.compression:
        body = memoryview(_codecs.decompress(header.compression, body))
    end = len(body)
    count = header.records_count
    p = n = 0
    prev_stride = -1
    run = 16
    try:
        while p < end and n < count:
            b = body[p]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                q = p + 1
            else:
                b2 = body[p + 1]
                if b2 < 0x80:  # two-byte prefix: records of 64 B to 8 KiB
                    v = (b & 0x7F) | (b2 << 7)
                    length = (v >> 1) ^ -(v & 1)
                    q = p + 2
                else:
                    length, q = decode_varint(body, p)
            if length < 6:  # attributes + four one-byte varints + header count at least
                raise InvalidRecordError(CORRUPT_MESSAGE, f"record {n} has impossible length {length}")
            stride = q - p + length
            if stride == prev_stride:
                k = min(run, count - n, (end - p) // stride)
                if k > 1:
                    stop = p + k * stride
                    if all(body[j:stop:stride].tobytes() == bytes((body[j],)) * k for j in range(p, q)):
                        p = stop
                        n += k
                        run = k * 2
                        continue
                    run = max(2, run // 2)
            prev_stride = stride
            p += stride
            n += 1
    except IndexError:
        raise InvalidRecordError(CORRUPT_MESSAGE, "truncated varint") from None
    if n != count or p != end:
        raise InvalidRecordError(
            CORRUPT_MESSAGE, f"batch declares {count} records but its body holds {n} ({p} of {end} bytes)")


def validate_produced(buf: bytes | bytearray | memoryview, max_batch_bytes: int | None = None) -> list[tuple[int, BatchHeader]]:
    """Everything a produced record set must pass: ``validate_v2`` (headers, CRCs, sizes) and record framing."""
    batches = validate_v2(buf, max_batch_bytes)
    for pos, header in batches:
        check_record_framing(buf, pos, header)
    return batches


def decode_batch(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[BatchHeader, list[Record]]:
    """Decode the v2 batch at ``pos``: header plus records with absolute offsets and timestamps.

    Decompresses as needed. Does not check the CRC (``validate_v2`` does that on the way in).
    """
    if len(buf) - pos < HEADER_SIZE or buf[pos + 16] != 2:
        raise InvalidRecordError(CORRUPT_MESSAGE, "not a complete v2 batch header")
    header = read_header(buf, pos)
    end = pos + header.size
    if header.size < HEADER_SIZE or end > len(buf):
        raise InvalidRecordError(CORRUPT_MESSAGE, f"batch length {header.batch_length} does not fit the buffer")
    body = _codecs.decompress(header.compression, memoryview(buf)[pos + HEADER_SIZE:end])
    return header, decode_records(header, body)


def record_timestamps(batch: bytes | bytearray | memoryview, pos: int = 0) -> list[tuple[int, int]]:
    """(offset, timestamp) of every record of the batch at ``pos``, for ListOffsets by timestamp.

    A LogAppendTime batch stamps every record with its max timestamp (handled in ``decode_records``).
    """
    _, records = decode_batch(batch, pos)
    return [(r.offset, r.timestamp) for r in records]


# -------------------------------------------------------------------------------------------- building

def _append_bytes(out: bytearray, data: bytes | bytearray | None) -> None:
    if data is None:
        out.append(0x01)  # zig-zag(-1)
    else:
        encode_varint(len(data), out)
        out += data


def encode_record(out: bytearray, offset_delta: int, timestamp_delta: int, key, value, headers) -> None:
    body = bytearray(b"\x00")  # attributes
    encode_varint(timestamp_delta, body)
    encode_varint(offset_delta, body)
    _append_bytes(body, key)
    _append_bytes(body, value)
    encode_varint(len(headers), body)
    for hkey, hval in headers:
        _append_bytes(body, hkey.encode("utf-8") if isinstance(hkey, str) else hkey)
        _append_bytes(body, hval)
    encode_varint(len(body), out)
    out += body


def build_batch(
    records: list[tuple],
    *,
    base_offset: int = 0,
    compression: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    control: bool = False,
    partition_leader_epoch: int = -1,
    timestamp_type: int = 0,
) -> bytes:
    """Build one v2 batch from ``(key, value, headers, timestamp)`` tuples (timestamp may be -1/None).

    baseTimestamp is the first record's timestamp and maxTimestamp the largest (Java client behaviour);
    offset deltas run 0..n-1. With ``timestamp_type=1`` (LogAppendTime) maxTimestamp still comes from the
    records, so pass the append time as each record's timestamp (or use ``batch.set_log_append_time``).
    """
    if not records:
        raise ValueError("a batch needs at least one record")
    stamps = [NO_TIMESTAMP if r[3] is None else r[3] for r in records]
    base_ts = stamps[0]
    body = bytearray()
    for delta, ((key, value, headers, _), ts) in enumerate(zip(records, stamps)):
        encode_record(body, delta, _int64(ts - base_ts), key, value, headers or ())
    payload = _codecs.compress(compression, body) if compression else bytes(body)
    attributes = (compression & 0x07) | (TIMESTAMP_TYPE_BIT if timestamp_type else 0)
    attributes |= (TRANSACTIONAL_BIT if transactional else 0) | (CONTROL_BIT if control else 0)
    batch = bytearray(HEADER_SIZE)
    batch += payload
    HEADER.pack_into(
        batch, 0, base_offset, len(batch) - LOG_OVERHEAD, partition_leader_epoch, 2, 0, attributes,
        len(records) - 1, base_ts, max(stamps), producer_id, producer_epoch, base_sequence, len(records),
    )
    struct.pack_into(">I", batch, 17, crc32c(memoryview(batch)[21:]))
    return bytes(batch)



def build_control_batch(
    marker_type: int,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp: int,
    base_offset: int = 0,
) -> bytes:
    """An end-transaction marker: a transactional control batch holding one record whose key is
    ``version int16 = 0, type int16`` (0 ABORT, 1 COMMIT) and value ``version int16 = 0, coordinatorEpoch int32``.
    """
    key = _CONTROL_KEY.pack(0, marker_type)
    value = _MARKER_VALUE.pack(0, coordinator_epoch)
    return build_batch(
        [(key, value, [], timestamp)], base_offset=base_offset, producer_id=producer_id,
        producer_epoch=producer_epoch, transactional=True, control=True,
    )


def parse_control_key(key: bytes) -> tuple[int, int]:
    """(version, type) of a control record key; unknown types must be ignored by the caller."""
    if key is None or len(key) < 4:
        raise InvalidRecordError(CORRUPT_MESSAGE, "control record key too short")
    return _CONTROL_KEY.unpack_from(key)
