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

_HIGH_BITS = bytes(b & 0x80 for b in range(256))  # bytes.translate table: keep only a byte's continuation bit


def check_records(body: bytes | bytearray | memoryview, count: int) -> None:
    """Check that ``body`` (a batch's records, decompressed) is exactly ``count`` well-formed records.

    The one definition of a valid record: the Produce check runs it on every batch (as Kafka's LogValidator
    walks every record on append), and ``decode_records`` runs it before reading, so whatever Produce accepts
    can be decoded for ListOffsets and Fetch down-conversion. A record is well-formed when its length is at
    least 6 and fits the body, its varints are at most 10 bytes, key and value lengths are -1 (null) or fit,
    its header count is not negative, each header key length is not negative and each header value length
    is -1 or fits, and those fields end exactly where its length says. Attributes, timestamp and offset deltas
    may hold any value; header keys any bytes (Kafka decodes them as UTF-8 with replacement).

    Runs of records of one shape are crossed without a Python step per record. When a record is walked and
    found valid with the same stride as the one before, it becomes a template (``_shape``): each of its bytes
    is structure (length prefix, key and value lengths, header count and header lengths: must be equal), a
    byte of its timestamp or offset delta (only its continuation bit must be equal: same width) or content
    (attributes, keys, values: free). The next ``k`` records are then compared with it as strided byte
    columns in C (``_same_shape``); each record up to the first that differs in any column has the
    template's fields at the same places, so is valid by the walk's own rules, and the walk resumes at the
    one that differs. ``k`` doubles while runs hold and after a break starts from twice what held. A
    producer's batch of fixed-size values (every client's common case) costs a copy of the body and a
    handful of C passes per run.
    """
    data = body if type(body) is bytes else bytes(body)  # slices of bytes are far cheaper than of views
    end = len(data)
    p = n = 0
    prev_stride = stride = -1
    shape = None  # of the last record walked, when it had the stride of the one before
    run = 16
    decode = decode_varint
    try:
        while n < count:
            if shape is not None:
                k = min(run, count - n, (end - p) // stride)
                if k > 1:
                    same = _same_shape(data, shape, p, stride, k)
                    p += same * stride
                    n += same
                    if same == k:
                        run = k * 2
                        continue
                    run = max(4, same * 2)
                shape = None  # the next record has another shape: walk it
            start = p
            # Varints of one and two bytes are read inline: nearly every field of a record is one of them.
            # The first byte's low bit is the zig-zag sign, so a length with it clear is not negative.
            b = data[p]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                p += 1
            elif data[p + 1] < 0x80:
                v = (b & 0x7F) | (data[p + 1] << 7)
                length = (v >> 1) ^ -(v & 1)
                p += 2
            else:
                length, p = decode(data, p)
            stop = p + length
            if length < 6 or stop > end:  # attributes + four one-byte varints + header count at least
                raise InvalidRecordError(CORRUPT_MESSAGE, f"record {n} has length {length}: does not fit the batch")
            if data[p + 1] | data[p + 2] < 0x80:  # attributes, one-byte timestamp and offset deltas
                p += 3
            else:
                p += 1
                if data[p] < 0x80:  # timestamp delta
                    p += 1
                elif data[p + 1] < 0x80:
                    p += 2
                else:
                    p = decode(data, p)[1]
                if data[p] < 0x80:  # offset delta
                    p += 1
                elif data[p + 1] < 0x80:
                    p += 2
                else:
                    p = decode(data, p)[1]
            b = data[p]  # key length (the same code as the value's, unrolled)
            if not b & 1:
                if b < 0x80:
                    p += 1 + (b >> 1)
                elif data[p + 1] < 0x80:
                    p += 2 + (((b & 0x7F) | (data[p + 1] << 7)) >> 1)
                else:
                    p = _past_bytes(data, p, n)
            elif b == 1:  # null
                p += 1
            else:
                p = _past_bytes(data, p, n)
            b = data[p]  # value length
            if not b & 1:
                if b < 0x80:
                    p += 1 + (b >> 1)
                elif data[p + 1] < 0x80:
                    p += 2 + (((b & 0x7F) | (data[p + 1] << 7)) >> 1)
                else:
                    p = _past_bytes(data, p, n)
            elif b == 1:
                p += 1
            else:
                p = _past_bytes(data, p, n)
            b = data[p]  # header count
            if b == 0:
                p += 1
            else:
                if b < 0x80:
                    headers = (b >> 1) ^ -(b & 1)
                    p += 1
                else:
                    headers, p = decode(data, p)
                if headers < 0 or headers > (stop - p) // 2:  # a header takes two bytes at least
                    raise InvalidRecordError(CORRUPT_MESSAGE, f"record {n} has a header count of {headers}")
                for _ in range(headers):
                    b = data[p]  # key length: not null
                    if b < 0x80 and not b & 1:
                        p += 1 + (b >> 1)
                    else:
                        size, p = decode(data, p)
                        if size < 0:
                            raise InvalidRecordError(CORRUPT_MESSAGE, f"record {n} has a header key length of {size}")
                        p += size
                    b = data[p]  # value length
                    if b < 0x80 and not b & 1:
                        p += 1 + (b >> 1)
                    elif b == 1:
                        p += 1
                    else:
                        p = _past_bytes(data, p, n)
            if p != stop:
                raise InvalidRecordError(CORRUPT_MESSAGE, f"record {n}: length {length} disagrees with its fields")
            n += 1
            stride = stop - start
            if stride == prev_stride and count - n >= 4:  # below that, walking is cheaper
                shape = _shape(data, start)
            prev_stride = stride
    except IndexError:
        raise InvalidRecordError(CORRUPT_MESSAGE, f"record {n} overruns the batch") from None
    if p != end:
        raise InvalidRecordError(CORRUPT_MESSAGE, f"{end - p} stray bytes after the last of {count} records")


def _past_bytes(data: bytes, p: int, n: int) -> int:
    """Past the length-prefixed key, value or header value at ``p`` of record ``n``: -1 is null, less is
    invalid."""
    size, p = decode_varint(data, p)
    if size < -1:
        raise InvalidRecordError(CORRUPT_MESSAGE, f"record {n} has a field of length {size}")
    return p + size if size > 0 else p


def _shape(data: bytes, start: int) -> tuple[list[tuple[int, bytes]], list[tuple[int, bytes]]]:
    """The shape of the valid record at ``start``, for ``_same_shape``: (offset in the record, byte) of each
    byte of structure, and (offset, continuation bit) of each byte of its timestamp and offset deltas.
    (Plain loops: on the produce path, where a comprehension's frame costs more than its work.)"""
    exact: list[tuple[int, bytes]] = []
    varint: list[tuple[int, bytes]] = []
    p = start
    while True:  # length
        b = data[p]
        exact.append((p - start, data[p:p + 1]))
        p += 1
        if b < 0x80:
            break
    p += 1  # attributes
    for _ in (0, 1):  # timestamp and offset deltas: only their widths
        while True:
            b = data[p]
            varint.append((p - start, b"\x80" if b & 0x80 else b"\x00"))
            p += 1
            if b < 0x80:
                break
    i, fields = 0, 3  # key length, value length, header count, then a key and a value length per header
    while i < fields:
        q = p
        while True:
            b = data[p]
            exact.append((p - start, data[p:p + 1]))
            p += 1
            if b < 0x80:
                break
        size = (b >> 1) ^ -(b & 1) if p - q == 1 else decode_varint(data, q)[0]
        if i == 2:
            fields += 2 * size
        elif size > 0:
            p += size
        i += 1
    return exact, varint


def _same_shape(data: bytes, shape: tuple[list[tuple[int, bytes]], list[tuple[int, bytes]]], p: int, stride: int,
                k: int) -> int:
    """How many of the ``k`` records from ``p``, ``stride`` bytes apart, have ``shape`` one after the other
    (``_shape`` of a valid record of that stride, ``check_records``): one strided slice per byte of structure,
    the records up to the first that differs in any of them."""
    exact, varint = shape
    stop = p + k * stride  # data[p + j:stop:stride] is byte j of each of the k records
    for j, b in exact:
        rest = data[p + j:stop:stride].lstrip(b)  # from the first record that differs
        if rest:
            k -= len(rest)
            if not k:
                return 0
            stop = p + k * stride
    for j, bit in varint:
        rest = data[p + j:stop:stride].translate(_HIGH_BITS).lstrip(bit)
        if rest:
            k -= len(rest)
            if not k:
                return 0
            stop = p + k * stride
    return k


def _field(data: bytes, pos: int) -> tuple[bytes | None, int]:
    """A length-prefixed field of a record ``check_records`` has passed: -1 is null."""
    b = data[pos]
    if b < 0x80:
        if b & 1:
            return None, pos + 1
        size, pos = b >> 1, pos + 1
    else:
        size, pos = decode_varint(data, pos)
        if size < 0:
            return None, pos
    return data[pos:pos + size], pos + size


def decode_records(header: BatchHeader, body: bytes | bytearray | memoryview) -> list[Record]:
    """Decode ``header.records_count`` records from the (already decompressed) bytes after the header.

    ``check_records`` decides whether they are valid (InvalidRecordError otherwise); reading them after it
    needs no checks of its own. Header keys are decoded as UTF-8 with replacement, as Kafka's Java reader
    does, so no key is a reason to refuse a batch.
    """
    data = body if type(body) is bytes else bytes(body)
    check_records(data, header.records_count)
    out: list[Record] = []
    pos = 0
    lat = header.max_timestamp if header.is_log_append_time else None
    for _ in range(header.records_count):
        pos = decode_varint(data, pos)[1] + 1  # length, attributes
        ts_delta, pos = decode_varint(data, pos)
        off_delta, pos = decode_varint(data, pos)
        key, pos = _field(data, pos)
        value, pos = _field(data, pos)
        count, pos = decode_varint(data, pos)
        headers: list[tuple[str, bytes | None]] = []
        for _ in range(count):
            hkey, pos = _field(data, pos)
            hval, pos = _field(data, pos)
            headers.append((hkey.decode("utf-8", "replace"), hval))
        timestamp = lat if lat is not None else header.base_timestamp + ts_delta
        offset = header.base_offset + off_delta
        if not (_INT64_MIN <= timestamp <= _INT64_MAX and _INT64_MIN <= offset <= _INT64_MAX):
            timestamp, offset = _int64(timestamp), _int64(offset)  # a producer may write any delta
        out.append(Record(offset, timestamp, key, value, headers))
    return out


def check_record_framing(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader,
                         limit: int | None = None) -> int:
    """Check every record of the batch at ``pos`` (``check_records``), as Kafka's validator does; return the
    size of its records, decompressed.

    A CRC only proves the producer's bytes arrived intact; this proves they are records, so no consumer is
    ever served a batch it cannot parse. A compressed body is decompressed first into at most ``limit`` bytes
    (``compression.decompressed_limit`` of its size when None; MESSAGE_TOO_LARGE past it).
    """
    body = memoryview(buf)[pos + HEADER_SIZE:pos + header.size]
    if header.compression:
        if limit is None:
            limit = _codecs.decompressed_limit(len(body))
        body = _codecs.decompress(header.compression, body, limit=limit)
    check_records(body, header.records_count)
    return len(body)


def validate_produced(buf: bytes | bytearray | memoryview, max_batch_bytes: int | None = None, *,
                      decompressed_budget: int | None = None) -> list[tuple[int, BatchHeader]]:
    """Everything a produced record set must pass: ``validate_v2`` (headers, CRCs, sizes), then every record
    of every batch (``check_record_framing``).

    Compressed batches may decompress to ``compression.decompressed_limit`` of their own size each, and all of
    them to ``decompressed_limit`` of the record set's size together, so that many small batches are not many
    floors' worth (one Produce request can carry thousands). A ``decompressed_budget`` given instead bounds
    them alone (the batch up-converted from a legacy set: ``legacy.upconverted_budget``).
    """
    batches = validate_v2(buf, max_batch_bytes)
    own = decompressed_budget is None
    budget = _codecs.decompressed_limit(len(buf), max_batch_bytes) if own else decompressed_budget
    for pos, header in batches:
        if header.compression:
            limit = budget
            if own:
                limit = min(limit, _codecs.decompressed_limit(header.size - HEADER_SIZE, max_batch_bytes))
            budget -= check_record_framing(buf, pos, header, limit)
        else:
            check_record_framing(buf, pos, header)
    return batches


def has_keyless_record(buf: bytes | bytearray | memoryview, batches: list[tuple[int, BatchHeader]]) -> bool:
    """Whether a record of the (checked) batches has a null key: a compacted topic refuses it (INVALID_RECORD)."""
    return bool(keyless_record_indexes(buf, batches))


def keyless_record_indexes(buf: bytes | bytearray | memoryview, batches: list[tuple[int, BatchHeader]]) -> list[int]:
    """The indexes, within their batch, of the null-key records of the first (checked) batch that has any; []
    when none has. A compacted topic refuses them and names each (KIP-467 record errors; Kafka's LogValidator
    stops at the first batch with errors).

    Reads each record's length, attributes, two deltas and key length, then jumps to the next record, so it
    costs a few varint reads per record (plus the decompression of compressed batches)."""
    for pos, header in batches:
        body = memoryview(buf)[pos + HEADER_SIZE:pos + header.size]
        if header.compression:
            limit = _codecs.decompressed_limit(len(body), _codecs.READ_FLOOR_BYTES)
            body = memoryview(_codecs.decompress(header.compression, body, limit=limit))
        p = 0
        keyless = []
        for index in range(header.records_count):
            length, p = decode_varint(body, p)
            end = p + length
            p = decode_varint(body, p + 1)[1]  # attributes, timestamp delta
            p = decode_varint(body, p)[1]  # offset delta
            key_length, _ = decode_varint(body, p)
            if key_length < 0:
                keyless.append(index)
            p = end
        if keyless:
            return keyless
    return []


def decode_batch(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[BatchHeader, list[Record]]:
    """Decode the v2 batch at ``pos``: header plus records with absolute offsets and timestamps.

    Decompresses as needed, into at most ``decompressed_limit`` of the batch with a floor of 64 MiB: stored
    batches passed the Produce check with their topic's max.message.bytes as the floor, so this reads any of
    them written with a max.message.bytes up to 64 MiB, and bounds what a bad old batch can cost.
    Does not check the CRC (``validate_v2`` does that on the way in).
    """
    if len(buf) - pos < HEADER_SIZE or buf[pos + 16] != 2:
        raise InvalidRecordError(CORRUPT_MESSAGE, "not a complete v2 batch header")
    header = read_header(buf, pos)
    end = pos + header.size
    if header.size < HEADER_SIZE or end > len(buf):
        raise InvalidRecordError(CORRUPT_MESSAGE, f"batch length {header.batch_length} does not fit the buffer")
    body = memoryview(buf)[pos + HEADER_SIZE:end]
    if header.compression:
        limit = _codecs.decompressed_limit(len(body), _codecs.READ_FLOOR_BYTES)
        body = _codecs.decompress(header.compression, body, limit=limit)
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



def recompress(buf: bytes | bytearray | memoryview, batches: list[tuple[int, BatchHeader]], codec: int) -> bytearray:
    """The record set with every batch not already in ``codec`` rebuilt in it, as Kafka does for a topic whose
    compression.type names a codec: records, timestamps, timestamp type and producer fields (id, epoch, base
    sequence, transactional) kept, offset deltas renumbered 0..n-1 (produced batches have them so already).
    Batches already in ``codec`` are kept byte for byte."""
    out = bytearray()
    for pos, header in batches:
        if header.compression == codec or header.is_control:
            out += buf[pos:pos + header.size]
            continue
        _, records = decode_batch(buf, pos)
        out += build_batch([(r.key, r.value, r.headers, r.timestamp) for r in records], compression=codec,
                           producer_id=header.producer_id, producer_epoch=header.producer_epoch,
                           base_sequence=header.base_sequence, transactional=header.is_transactional,
                           partition_leader_epoch=header.partition_leader_epoch,
                           timestamp_type=1 if header.is_log_append_time else 0)
    return out


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
