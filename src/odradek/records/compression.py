"""Batch compression codecs (Kafka attribute bits 0-2), built on ``cramjam``.

Codec ids: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd. What goes on the wire for each, and why:

* gzip — an RFC 1952 stream (possibly several concatenated members; cramjam reads them all).
* snappy — two framings exist in Kafka traffic. The Java client (xerial ``SnappyOutputStream``) writes::

      b"\\x82SNAPPY\\x00"  int32 version  int32 compat     (16-byte header; version/compat are not checked
      { int32 block_len, raw snappy block }*                because some producers write them little-endian)

  while librdkafka and others may write one raw snappy block. We detect the xerial magic on read and
  accept both; we always write xerial, which every client (Java, librdkafka, kafka-python) can read.
* lz4 — the standard LZ4 *frame* format (magic ``04 22 4D 18``, FLG, BD, [content size], HC, blocks,
  end mark). We write independent blocks because the Java reader decodes each block on its own.
  Magic-0 MessageSets from old Java clients carry a *wrong* header checksum (HC): it was computed over the
  magic number too instead of over the frame descriptor only. ``decompress(3, data, fix_lz4_hc=True)``
  recomputes the HC before decoding (only the descriptor is hashed, so the small xxh32 below suffices).
* zstd — one or more zstd frames; we write level 3 (Kafka's default level).

Any decoding failure becomes ``InvalidRecordError(CORRUPT_MESSAGE)``; an unknown codec id becomes
``UNSUPPORTED_COMPRESSION_TYPE``.

Decompression bombs: zstd packs runs of zeros about 32,000:1, so a 16 KiB batch can hold 500 MB of records.
Whatever the broker decompresses (produced batches, legacy wrappers, stored batches read back) is given a
``limit`` (``decompressed_limit``): the output is written into a buffer of that size and decoding stops as
soon as it would pass it, so the work and memory are bounded by the limit, not by what the blob declares.
Past it the batch is refused with MESSAGE_TOO_LARGE (for which a Java producer splits the batch and retries).
The buffer is a per-thread scratch mmap of 2 MiB, reused (on the 2-core VM a fresh page's fault cost about as
much as decompressing into it; only pages written are resident, so at most 2 MiB per thread that checks
compressed batches), then for larger outputs an mmap of ``limit`` bytes of its own; the result is copied out,
so no caller holds the scratch.
"""

from __future__ import annotations

import mmap
import struct
import threading

import cramjam

from .batch import CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, UNSUPPORTED_COMPRESSION_TYPE, InvalidRecordError

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
# A topic's (or the broker's) compression.type: the codec its batches are stored in; "producer": as sent.
COMPRESSION_TYPES = {"uncompressed": NONE, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024  # xerial's default block size
_INT32 = struct.Struct(">i")
_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_ZSTD_LEVEL = 3

MAX_RATIO = 64
DEFAULT_MAX_MESSAGE_BYTES = 1048588  # Kafka's message.max.bytes
READ_FLOOR_BYTES = 64 << 20  # the floor for stored batches read back (codec.decode_batch)
_MAX_OUTPUT = (1 << 31) - 1  # a batch's records are at most an int32 of bytes, in Kafka's own readers too
_SCRATCH_BYTES = 2 << 20
_INTO = {GZIP: cramjam.gzip.decompress_into, LZ4: cramjam.lz4.decompress_into, ZSTD: cramjam.zstd.decompress_into}
# Rust's io::Write::write_all, which cramjam's *_into functions use, fails with this once the buffer is full.
_OUTPUT_FULL = "failed to write whole buffer"
_local = threading.local()


def decompressed_limit(compressed_size: int, max_batch_bytes: int | None = None) -> int:
    """The most bytes that ``compressed_size`` bytes of a batch may decompress to: the larger of
    ``MAX_RATIO`` (64) times the compressed size and ``max_batch_bytes`` (the topic's max.message.bytes;
    Kafka's default when None).

    Kafka has no such bound (its validator streams records out of the decompressor, spending time, not
    memory); we decompress whole, so we need one. 64:1 is above what real data reaches (JSON logs rarely pass
    50:1 even with zstd), and the floor of max.message.bytes admits any batch whose records would be accepted
    uncompressed, whatever its ratio: librdkafka bounds a batch's uncompressed size by batch.size (1,000,000,
    under the default 1,048,588), so even repetitive test data passes. A Java producer sizes batches by an
    estimated ratio and may overshoot on data that compresses extremely well; it gets MESSAGE_TOO_LARGE and
    splits the batch. A 16 KiB zstd bomb may thus take 1 MiB, not 500 MB.
    """
    floor = DEFAULT_MAX_MESSAGE_BYTES if max_batch_bytes is None else max_batch_bytes
    return min(max(MAX_RATIO * compressed_size, floor), _MAX_OUTPUT)


def compress(codec: int, data: bytes | bytearray | memoryview) -> bytes:
    """Compress ``data`` with Kafka codec ``codec`` (see the module docstring for the framings)."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == SNAPPY:
        view = memoryview(data)
        out = bytearray(_XERIAL_HEADER)
        for start in range(0, len(view), _XERIAL_BLOCK):
            block = cramjam.snappy.compress_raw(bytes(view[start:start + _XERIAL_BLOCK]))
            out += _INT32.pack(len(block))
            out += block
        return bytes(out)
    if codec == LZ4:
        c = cramjam.lz4.Compressor(block_linked=False)
        c.compress(bytes(data))
        return bytes(c.finish())
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data, level=_ZSTD_LEVEL))
    raise InvalidRecordError(UNSUPPORTED_COMPRESSION_TYPE, f"unknown compression codec {codec}")


def decompress(codec: int, data: bytes | bytearray | memoryview, *, limit: int | None = None,
               fix_lz4_hc: bool = False) -> bytes:
    """Decompress a blob written with ``codec``; garbage raises ``InvalidRecordError(CORRUPT_MESSAGE)``.

    With ``limit``, into at most that many bytes (see the module docstring): more raises
    ``InvalidRecordError(MESSAGE_TOO_LARGE)`` once the limit is reached. Without, whole: only for data the
    broker made itself. ``fix_lz4_hc`` is for magic-0 messages whose LZ4 frame header checksum is the old
    broken one.
    """
    if codec == NONE:
        return bytes(data)
    if limit is not None:
        if codec not in _INTO and codec != SNAPPY:
            raise InvalidRecordError(UNSUPPORTED_COMPRESSION_TYPE, f"unknown compression codec {codec}")
        blob = _lz4_fix_header_checksum(data) if codec == LZ4 and fix_lz4_hc else data
        return _decompress_bounded(codec, blob, min(limit, _MAX_OUTPUT))
    try:
        if codec == GZIP:
            return bytes(cramjam.gzip.decompress(bytes(data)))
        if codec == SNAPPY:
            return _snappy_decompress(bytes(data))
        if codec == LZ4:
            blob = _lz4_fix_header_checksum(data) if fix_lz4_hc else bytes(data)
            return bytes(cramjam.lz4.decompress(blob))
        if codec == ZSTD:
            return bytes(cramjam.zstd.decompress(bytes(data)))
    except InvalidRecordError:
        raise
    except Exception as exc:  # cramjam.DecompressionError, struct.error, ValueError, ...
        raise InvalidRecordError(CORRUPT_MESSAGE, f"{CODEC_NAMES[codec]} decompression failed: {exc}") from None
    raise InvalidRecordError(UNSUPPORTED_COMPRESSION_TYPE, f"unknown compression codec {codec}")


def _decompress_bounded(codec: int, blob: bytes | bytearray | memoryview, limit: int) -> bytes:
    """Into this thread's scratch buffer, or when that is too small (and ``limit`` is not) a buffer of
    ``limit`` bytes: MESSAGE_TOO_LARGE past ``limit``."""
    scratch = getattr(_local, "scratch", None)
    if scratch is None:
        scratch = _local.scratch = memoryview(mmap.mmap(-1, _SCRATCH_BYTES))
    try:
        return scratch[:_decompress_into(codec, blob, scratch[:limit])].tobytes()
    except _OutputFull:
        if limit <= _SCRATCH_BYTES:
            raise _too_large(codec, limit) from None
    try:
        out = memoryview(mmap.mmap(-1, limit))
    except (OSError, ValueError, OverflowError, MemoryError):
        raise InvalidRecordError(MESSAGE_TOO_LARGE, f"no room for {limit} bytes of decompressed records") from None
    try:
        return out[:_decompress_into(codec, blob, out)].tobytes()
    except _OutputFull:
        raise _too_large(codec, limit) from None


class _OutputFull(Exception):
    """The output buffer of ``_decompress_into`` is too small."""


def _too_large(codec: int, limit: int) -> InvalidRecordError:
    return InvalidRecordError(MESSAGE_TOO_LARGE, f"{CODEC_NAMES[codec]} records decompress to more than {limit} bytes")


def _decompress_into(codec: int, blob: bytes | bytearray | memoryview, out: memoryview) -> int:
    """Decompress into ``out`` and return the size written; ``_OutputFull`` when it does not fit, after at
    most ``len(out)`` bytes of output."""
    try:
        if codec == SNAPPY:
            return _snappy_into(blob, out)
        return _INTO[codec](blob, out)
    except (InvalidRecordError, _OutputFull):
        raise
    except Exception as exc:  # cramjam.DecompressionError, struct.error, ValueError, ...
        if _OUTPUT_FULL in str(exc):
            raise _OutputFull() from None
        raise InvalidRecordError(CORRUPT_MESSAGE, f"{CODEC_NAMES[codec]} decompression failed: {exc}") from None


def _snappy_into(data: bytes | bytearray | memoryview, out: memoryview) -> int:
    """Snappy (xerial or one raw block) into ``out``: each raw block's declared length (its first varint)
    is checked against the room left before the block is decoded."""
    view = memoryview(data)
    blocks = [view]
    if view[:len(XERIAL_MAGIC)] == XERIAL_MAGIC:
        if len(view) < 16:
            raise InvalidRecordError(CORRUPT_MESSAGE, "truncated xerial snappy header")
        blocks = []
        pos, end = 16, len(view)
        while pos < end:
            if end - pos < 4:
                raise InvalidRecordError(CORRUPT_MESSAGE, "truncated xerial snappy block length")
            (size,) = _INT32.unpack_from(view, pos)
            pos += 4
            if size < 0 or pos + size > end:
                raise InvalidRecordError(CORRUPT_MESSAGE, f"xerial snappy block of {size} bytes overruns the blob")
            blocks.append(view[pos:pos + size])
            pos += size
    written = 0
    for block in blocks:
        size = cramjam.snappy.decompress_raw_len(block)
        if size > len(out) - written:
            raise _OutputFull()
        written += cramjam.snappy.decompress_raw_into(block, out[written:written + size])
    return written


def _snappy_decompress(data: bytes) -> bytes:
    if not data.startswith(XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    if len(data) < 16:
        raise InvalidRecordError(CORRUPT_MESSAGE, "truncated xerial snappy header")
    out = bytearray()
    pos, end = 16, len(data)
    while pos < end:
        if end - pos < 4:
            raise InvalidRecordError(CORRUPT_MESSAGE, "truncated xerial snappy block length")
        (size,) = _INT32.unpack_from(data, pos)
        pos += 4
        if size < 0 or pos + size > end:
            raise InvalidRecordError(CORRUPT_MESSAGE, f"xerial snappy block of {size} bytes overruns the blob")
        out += cramjam.snappy.decompress_raw(data[pos:pos + size])
        pos += size
    return bytes(out)


def _lz4_fix_header_checksum(data: bytes | bytearray | memoryview) -> bytes:
    """Rewrite the HC byte of an LZ4 frame as ``(xxh32(descriptor) >> 8) & 0xFF``.

    Frame start: magic(4) FLG(1) BD(1) [content size(8) if FLG bit 3] [dict id(4) if FLG bit 0] HC(1).
    Correct frames are left unchanged by this, so it is safe to apply to any frame.
    """
    blob = bytearray(data)
    if len(blob) < 7 or blob[:4] != _LZ4_MAGIC:
        raise InvalidRecordError(CORRUPT_MESSAGE, "not an LZ4 frame")
    flg = blob[4]
    hc_pos = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    if len(blob) <= hc_pos:
        raise InvalidRecordError(CORRUPT_MESSAGE, "truncated LZ4 frame header")
    blob[hc_pos] = (xxh32_short(bytes(blob[4:hc_pos])) >> 8) & 0xFF
    return bytes(blob)


_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32_short(data: bytes, seed: int = 0) -> int:
    """XXH32 of an input shorter than 16 bytes (the only case needed: an LZ4 frame descriptor is <= 14)."""
    if len(data) >= 16:
        raise ValueError("xxh32_short handles inputs shorter than 16 bytes only")
    h = (seed + _P5 + len(data)) & _M32
    i = 0
    while i + 4 <= len(data):
        (lane,) = struct.unpack_from("<I", data, i)
        h = (_rotl((h + lane * _P3) & _M32, 17) * _P4) & _M32
        i += 4
    for b in data[i:]:
        h = (_rotl((h + b * _P5) & _M32, 11) * _P1) & _M32
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h
