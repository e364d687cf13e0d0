"""RecordBatch v2 headers: parse, validate and patch, without touching the records inside.

Byte layout of one batch (big-endian; the broker stores and serves it exactly as produced)::

    offset  size  field
     0      8     base_offset            assigned by the broker (patched in place)
     8      4     batch_length           bytes after this field, i.e. total size - 12
    12      4     partition_leader_epoch patched by the broker; outside the CRC
    16      1     magic                  2
    17      4     crc                    CRC-32C of bytes [21, end)
    21      2     attributes             bits 0-2 codec, 3 timestamp type, 4 transactional, 5 control
    23      4     last_offset_delta
    27      8     base_timestamp
    35      8     max_timestamp
    43      8     producer_id
    51      2     producer_epoch
    53      4     base_sequence
    57      4     records_count
    61      ...   records (one compressed blob when the codec is not 0)

This module reads only the header (and computes the CRC, in C); on the produce path codec.py's
``check_records`` then reads every record, as Kafka's LogValidator does, and stores the batch as produced.
"""

from __future__ import annotations

import struct
from typing import Iterator, NamedTuple

from crc32c import crc32c

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
# The prefix every batch and legacy message shares: offset int64, size int32.
LOG_OVERHEAD = 12
_MAGIC_OFFSET = 16
_CRC_OFFSET = 17
_ATTRIBUTES_OFFSET = 21
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_PREFIX = struct.Struct(">qi")

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20

NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1


class InvalidRecordError(Exception):
    """A batch that must be refused; ``error_code`` is the Kafka error code to answer with."""

    def __init__(self, error_code: int, message: str, record_indexes: list[int] | None = None) -> None:
        super().__init__(message)
        self.error_code = error_code
        # the records at fault, by index in their batch (KIP-467: the client fails those and may retry the rest)
        self.record_indexes = record_indexes or []


# Kafka error codes used here (kept local so records/ does not depend on protocol/).
CORRUPT_MESSAGE = 2
MESSAGE_TOO_LARGE = 10
INVALID_RECORD = 87
UNSUPPORTED_COMPRESSION_TYPE = 76


class BatchTooLarge(InvalidRecordError):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(MESSAGE_TOO_LARGE, f"batch of {size} bytes exceeds message.max.bytes {limit}")
        self.size = size
        self.limit = limit


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_BIT)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)


def read_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Parse the 61-byte v2 header at ``pos``; the caller has checked that it is there and magic is 2."""
    return BatchHeader._make(HEADER.unpack_from(buf, pos))


def read_prefix(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int, int]:
    """Return (base offset, total size, magic) of the batch or legacy message at ``pos``."""
    offset, length = _PREFIX.unpack_from(buf, pos)
    return offset, length + LOG_OVERHEAD, buf[pos + _MAGIC_OFFSET]


def crc_is_valid(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> bool:
    end = pos + header.size
    return crc32c(memoryview(buf)[pos + _ATTRIBUTES_OFFSET:end]) == header.crc


def validate_v2(buf: bytes | bytearray | memoryview, max_batch_bytes: int | None = None,
                compacted: bool = False) -> list[tuple[int, BatchHeader]]:
    """Check that ``buf`` is a whole sequence of well-formed v2 batches and return (position, header) for each.

    Raises InvalidRecordError with CORRUPT_MESSAGE for a broken frame or CRC and INVALID_RECORD for a header
    whose fields contradict each other. ``max_batch_bytes`` is ``message.max.bytes``; the caller maps a
    batch over it to MESSAGE_TOO_LARGE, so it is reported through ``BatchTooLarge``. ``compacted`` accepts
    batches the log cleaner rewrote (storage/cleaner.py): fewer records than the last offset delta spans,
    as a follower fetches them from a compacted leader.
    """
    view = memoryview(buf)
    total = len(view)
    pos = 0
    out: list[tuple[int, BatchHeader]] = []
    if total == 0:
        raise InvalidRecordError(CORRUPT_MESSAGE, "empty record set")
    while pos < total:
        if total - pos < HEADER_SIZE:
            raise InvalidRecordError(CORRUPT_MESSAGE, f"truncated batch header at byte {pos}")
        header = read_header(view, pos)
        if header.magic != 2:
            raise InvalidRecordError(CORRUPT_MESSAGE, f"mixed magic {header.magic} in a v2 record set")
        size = header.size
        if size < HEADER_SIZE or pos + size > total:
            raise InvalidRecordError(CORRUPT_MESSAGE, f"batch length {header.batch_length} does not fit the record set")
        if max_batch_bytes is not None and size > max_batch_bytes:
            raise BatchTooLarge(size, max_batch_bytes)
        if crc32c(view[pos + _ATTRIBUTES_OFFSET:pos + size]) != header.crc:
            raise InvalidRecordError(CORRUPT_MESSAGE, f"CRC mismatch in batch at byte {pos}")
        if header.records_count <= 0 or (header.last_offset_delta != header.records_count - 1 and not (
                compacted and header.last_offset_delta > header.records_count - 1)):
            raise InvalidRecordError(
                INVALID_RECORD,
                f"batch has {header.records_count} records but last offset delta {header.last_offset_delta}",
            )
        if header.compression > 4:
            raise InvalidRecordError(UNSUPPORTED_COMPRESSION_TYPE, f"unknown compression codec {header.compression}")
        out.append((pos, header))
        pos += size
    return out


def patch_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Write the broker-assigned base offset; it lies outside the CRC, so the batch stays valid."""
    _INT64.pack_into(buf, pos, base_offset)


def patch_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    _INT32.pack_into(buf, pos + 12, epoch)


def set_log_append_time(buf: bytearray | memoryview, pos: int, header: BatchHeader, timestamp_ms: int) -> None:
    """Stamp a batch with LogAppendTime: set the attribute bit and max timestamp, then recompute the CRC.

    Both fields are inside the CRC, so unlike the offset patch this costs a CRC pass over the batch.
    """
    struct.pack_into(">h", buf, pos + _ATTRIBUTES_OFFSET, header.attributes | TIMESTAMP_TYPE_BIT)
    _INT64.pack_into(buf, pos + 35, timestamp_ms)
    end = pos + header.size
    _UINT32.pack_into(buf, pos + _CRC_OFFSET, crc32c(memoryview(buf)[pos + _ATTRIBUTES_OFFSET:end]))


def iter_batches(buf: bytes | bytearray | memoryview, pos: int = 0) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) for each complete v2 batch; stop silently at a partial trailing batch.

    Used on data the broker already validated (the log); it does not check CRCs.
    """
    total = len(buf)
    while total - pos >= HEADER_SIZE:
        header = read_header(buf, pos)
        size = header.size
        if size < HEADER_SIZE or pos + size > total:
            return
        yield pos, header
        pos += size
