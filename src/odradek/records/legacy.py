"""Legacy MessageSets (magic 0 and 1), spoken by Produce v0-2 and Fetch v0-3; the log holds only v2.

A MessageSet is a bare concatenation (no count) of entries::

    offset      int64
    size        int32    bytes of the message that follows
    crc         uint32   CRC-32 (IEEE, zlib.crc32) of magic..end
    magic       int8     0 or 1
    attributes  int8     bits 0-2 codec (0 none, 1 gzip, 2 snappy, 3 lz4), bit 3 timestamp type (v1)
    timestamp   int64    v1 only
    key         int32 length (-1 = null) + bytes
    value       int32 length (-1 = null) + bytes

The first 17 bytes line up with a v2 batch header, so byte 16 is the magic of either format.

Compression wraps a whole inner MessageSet in the value of one "wrapper" message whose codec bits are set.
Inner offsets are absolute in v0 and relative (0..n-1, KIP-31) in v1, where the wrapper carries the
absolute offset of the last inner message; since the broker assigns offsets anyway we only keep the order.
For a v1 wrapper with the LogAppendTime bit, the wrapper timestamp applies to every inner message.
Magic-0 LZ4 blobs come from old Java clients with a broken frame header checksum, which we repair.
Wrappers are decompressed with a bound (compression.py): all of a produced set's wrappers together into at
most ``decompressed_limit`` of the set's size, each into at most that of its own value.
"""

from __future__ import annotations

import struct
import zlib

from . import compression as _codecs
from .batch import CORRUPT_MESSAGE, LOG_OVERHEAD, NO_TIMESTAMP, TIMESTAMP_TYPE_BIT, InvalidRecordError, iter_batches
from .codec import Record, build_batch, decode_batch

_PREFIX = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_MIN_SIZE = {0: 14, 1: 22}  # crc + magic + attributes [+ timestamp] + key length + value length


def detect_magic(buf: bytes | bytearray | memoryview) -> int:
    """Magic of the first entry (byte 16), valid for legacy messages and v2 batches alike."""
    if len(buf) < 17:
        raise InvalidRecordError(CORRUPT_MESSAGE, "record set too short to hold a magic byte")
    return buf[16]


def _read_len_bytes(buf, pos: int, end: int) -> tuple[bytes | None, int]:
    if end - pos < 4:
        raise InvalidRecordError(CORRUPT_MESSAGE, "truncated key/value length")
    (length,) = _INT32.unpack_from(buf, pos)
    pos += 4
    if length < 0:
        if length != -1:
            raise InvalidRecordError(CORRUPT_MESSAGE, f"invalid key/value length {length}")
        return None, pos
    if pos + length > end:
        raise InvalidRecordError(CORRUPT_MESSAGE, "key/value overruns its message")
    return bytes(buf[pos:pos + length]), pos + length


def _parse(buf, out: list, top: list, budget: list[int], max_batch_bytes: int | None,
           inner: bool = False, lat: int | None = None) -> None:
    """Append (key, value, timestamp) of every message in ``buf`` to ``out``; recurse into wrappers.

    ``top`` collects (codec, is LogAppendTime) of top-level messages; ``lat`` is the LogAppendTime of
    an enclosing v1 wrapper; ``budget`` holds the bytes wrappers may still decompress to (one cell, used up
    as they are). Strict: a truncated trailing entry, a bad CRC or a bad size is corrupt.
    """
    view = memoryview(buf)
    pos, total = 0, len(view)
    while pos < total:
        if total - pos < LOG_OVERHEAD + 6:
            raise InvalidRecordError(CORRUPT_MESSAGE, f"truncated message at byte {pos}")
        _, size, crc, magic, attrs = _PREFIX.unpack_from(view, pos)
        if magic not in (0, 1):
            raise InvalidRecordError(CORRUPT_MESSAGE, f"magic {magic} inside a legacy message set")
        start, end = pos + LOG_OVERHEAD, pos + LOG_OVERHEAD + size
        if size < _MIN_SIZE[magic] or end > total:
            raise InvalidRecordError(CORRUPT_MESSAGE, f"message size {size} at byte {pos} does not fit")
        if zlib.crc32(view[start + 4:end]) != crc:
            raise InvalidRecordError(CORRUPT_MESSAGE, f"CRC mismatch in message at byte {pos}")
        p = start + 6
        timestamp = NO_TIMESTAMP  # Kafka's value for v0 messages, which have no timestamp
        if magic == 1:
            (timestamp,) = _INT64.unpack_from(view, p)
            p += 8
        key, p = _read_len_bytes(view, p, end)
        value, p = _read_len_bytes(view, p, end)
        if p != end:
            raise InvalidRecordError(CORRUPT_MESSAGE, f"message at byte {pos} has {end - p} stray bytes")
        codec = attrs & 0x07
        if not inner:
            top.append((codec, bool(magic == 1 and attrs & TIMESTAMP_TYPE_BIT)))
        if codec:
            if inner:
                raise InvalidRecordError(CORRUPT_MESSAGE, "nested compressed message")
            if value is None:
                raise InvalidRecordError(CORRUPT_MESSAGE, "compressed wrapper message has a null value")
            limit = min(budget[0], _codecs.decompressed_limit(len(value), max_batch_bytes))
            data = _codecs.decompress(codec, value, limit=limit, fix_lz4_hc=(magic == 0))
            budget[0] -= len(data)
            before = len(out)
            _parse(data, out, top, budget, max_batch_bytes, True,
                   timestamp if magic == 1 and attrs & TIMESTAMP_TYPE_BIT else None)
            if len(out) == before:
                raise InvalidRecordError(CORRUPT_MESSAGE, "compressed wrapper message holds no messages")
        else:
            out.append((key, value, [], lat if lat is not None else timestamp))
        pos = end


def upconvert(buf: bytes | bytearray | memoryview, *, now_ms: int,
              max_batch_bytes: int | None = None) -> bytearray:
    """Turn a produced legacy MessageSet into ONE v2 batch (base offset 0, for the broker to assign).

    Records keep their order with offset deltas 0..n-1; timestamps are the v1 message timestamps, or -1
    (NO_TIMESTAMP) for v0, as in Kafka. Codec choice: the batch is re-compressed with the codec of the
    first compressed wrapper (Kafka's ``compression.type=producer`` keeps the producer's codec), else
    left uncompressed. If a v1 message claims LogAppendTime the batch becomes a LogAppendTime batch
    stamped ``now_ms`` (the broker's clock, not the client's). Raises InvalidRecordError(CORRUPT_MESSAGE)
    on any CRC, size or decompression problem, including a truncated trailing message, and
    MESSAGE_TOO_LARGE when wrappers decompress past their bound (``max_batch_bytes``: the topic's
    max.message.bytes, the floor of ``compression.decompressed_limit``).
    """
    records: list[tuple] = []
    top: list[tuple[int, bool]] = []
    _parse(buf, records, top, [_codecs.decompressed_limit(len(buf), max_batch_bytes)], max_batch_bytes)
    if not records:
        raise InvalidRecordError(CORRUPT_MESSAGE, "empty message set")
    codec = next((c for c, _ in top if c), 0)
    log_append_time = any(lat for _, lat in top)
    if log_append_time:
        records = [(k, v, h, now_ms) for k, v, h, _ in records]
    return bytearray(build_batch(records, compression=codec, timestamp_type=int(log_append_time)))


def upconverted_budget(size: int, max_batch_bytes: int | None = None) -> int:
    """What the v2 batch ``upconvert`` makes of a legacy set of ``size`` bytes may decompress to, for
    ``validate_produced``: its records come from the set's uncompressed messages (at most ``size`` bytes) and
    from what its wrappers decompressed to (at most ``decompressed_limit(size)``), and a v2 record takes at
    most 32 bytes besides its key and value where a legacy message takes at least 26, so twice that is room
    enough. The batch's own compression ratio, which our compressor chose, does not matter.
    """
    return 2 * (_codecs.decompressed_limit(size, max_batch_bytes) + size)


def _encode_message(out: bytearray, magic: int, record: Record, log_append_time: bool) -> None:
    start = len(out)
    out += bytes(LOG_OVERHEAD + 4)  # offset, size, crc: filled in below
    out.append(magic)
    out.append(TIMESTAMP_TYPE_BIT if magic == 1 and log_append_time else 0)
    if magic == 1:
        out += _INT64.pack(record.timestamp)
    for field in (record.key, record.value):
        if field is None:
            out += b"\xff\xff\xff\xff"
        else:
            out += _INT32.pack(len(field))
            out += field
    struct.pack_into(">qi", out, start, record.offset, len(out) - start - LOG_OVERHEAD)
    struct.pack_into(">I", out, start + LOG_OVERHEAD, zlib.crc32(memoryview(out)[start + LOG_OVERHEAD + 4:]))


def downconvert(v2_batches: bytes | bytearray | memoryview, magic: int, first_offset: int = -1) -> bytes:
    """Turn stored v2 batches into an UNCOMPRESSED legacy MessageSet of ``magic`` (0 or 1) for Fetch v0-3.

    One message per record with its absolute offset; control batches are skipped, a trailing partial
    batch is dropped, records below ``first_offset`` are skipped, headers are lost (no place for them).
    v1 messages carry the record timestamp (the batch max timestamp for LogAppendTime batches) and the
    timestamp type bit. Uncompressed output keeps this simple and lets old clients seek inside it.
    A batch that cannot be decoded (bad old data) ends the output there, the batches before it served; when it
    is the first to serve, InvalidRecordError is raised.
    """
    if magic not in (0, 1):
        raise ValueError(f"cannot down-convert to magic {magic}")
    out = bytearray()
    for pos, header in iter_batches(v2_batches):
        if header.is_control or header.last_offset < first_offset:
            continue
        try:
            _, records = decode_batch(v2_batches, pos)
        except InvalidRecordError:
            if out:
                break  # the consumer's next fetch starts at this batch, and is refused
            raise
        for record in records:
            if record.offset >= first_offset:
                _encode_message(out, magic, record, header.is_log_append_time)
    return bytes(out)
