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
"""

from __future__ import annotations

import struct

import cramjam

from .batch import CORRUPT_MESSAGE, UNSUPPORTED_COMPRESSION_TYPE, InvalidRecordError

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024  # xerial's default block size
_INT32 = struct.Struct(">i")
_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_ZSTD_LEVEL = 3


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


def decompress(codec: int, data: bytes | bytearray | memoryview, *, fix_lz4_hc: bool = False) -> bytes:
    """Decompress a blob written with ``codec``; garbage raises ``InvalidRecordError(CORRUPT_MESSAGE)``.

    ``fix_lz4_hc`` is for magic-0 messages whose LZ4 frame header checksum is the old broken one.
    """
    if codec == NONE:
        return bytes(data)
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
