"""Compression codecs and v2 record encode/decode, cross-checked against kafka-python's record code.

kafka-python here has only gzip built in; for snappy/lz4/zstd its framing code (xerial, LZ4 frames,
including its old-Kafka broken-HC writer) is fed by small cramjam shims installed with monkeypatch, so
the framing bytes are the client's, not ours.
"""

from __future__ import annotations

import io
import os
import struct

import cramjam
import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from odradek.records import compression as comp
from odradek.records.batch import CORRUPT_MESSAGE, UNSUPPORTED_COMPRESSION_TYPE, InvalidRecordError, validate_v2
from odradek.records.codec import (
    ABORT,
    COMMIT,
    Record,
    build_batch,
    build_control_batch,
    decode_batch,
    decode_varint,
    encode_varint,
    parse_control_key,
    record_timestamps,
    varint_size,
)

CODECS = [0, 1, 2, 3, 4]


# --------------------------------------------------------------------------- kafka-python codec shims

class _Snappy:
    compress = staticmethod(lambda data: bytes(cramjam.snappy.compress_raw(data)))
    decompress = staticmethod(lambda data: bytes(cramjam.snappy.decompress_raw(bytes(data))))


class _Xxh32:
    def __init__(self, data: bytes) -> None:
        self.value = comp.xxh32_short(bytes(data))

    def digest(self) -> bytes:
        return struct.pack(">I", self.value)


class _Xxhash:
    xxh32 = _Xxh32


class _ZstdReader:
    def __init__(self, fileobj) -> None:
        self.data = bytes(cramjam.zstd.decompress(fileobj.read()))

    def __enter__(self):
        return io.BytesIO(self.data)

    def __exit__(self, *exc) -> None:
        pass


class _Zstd:
    class ZstdCompressor:
        def compress(self, data):
            return bytes(cramjam.zstd.compress(data))

    class ZstdDecompressor:
        def stream_reader(self, fileobj, read_across_frames=True):
            return _ZstdReader(fileobj)


def _lz4_encode(data):  # cramjam's default frame: linked blocks + content checksum (not our writer's flags)
    return bytes(cramjam.lz4.compress(bytes(data)))


def _lz4_decode(data):
    return bytes(cramjam.lz4.decompress(bytes(data)))


@pytest.fixture
def kp_codecs(monkeypatch):
    """Make kafka-python's snappy/lz4/zstd paths work, backed by cramjam primitives."""
    import kafka.codec as kc
    import kafka.record.default_records as dr
    import kafka.record.legacy_records as lr

    monkeypatch.setattr(kc, "snappy", _Snappy)
    monkeypatch.setattr(kc, "zstd", _Zstd)
    monkeypatch.setattr(kc, "xxhash", _Xxhash)
    monkeypatch.setattr(kc, "lz4", object())  # has_lz4() checks this
    for mod in (kc, dr, lr):
        monkeypatch.setattr(mod, "lz4_encode", _lz4_encode)
        monkeypatch.setattr(mod, "lz4_decode", _lz4_decode)
    return kc


# ------------------------------------------------------------------------------------------ compression

@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("size", [0, 1, 1000, 200_000])
def test_compression_round_trip(codec, size):
    data = (os.urandom(64) + b"kafka " * 50) * (size // 364) + b"z" * (size % 364)
    assert comp.decompress(codec, comp.compress(codec, data)) == data
    assert comp.decompress(codec, bytearray(comp.compress(codec, data))) == data


def test_snappy_writes_xerial_and_reads_both():
    data = b"hello snappy " * 10_000  # > one 32 KiB xerial block
    blob = comp.compress(2, data)
    assert blob.startswith(b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01")
    assert comp.decompress(2, blob) == data
    assert comp.decompress(2, bytes(cramjam.snappy.compress_raw(data))) == data


def test_snappy_interop_with_kafka_python(kp_codecs):
    data = b"interop " * 9000
    for xerial in (True, False):
        assert comp.decompress(2, kp_codecs.snappy_encode(data, xerial_compatible=xerial)) == data
    assert kp_codecs.snappy_decode(comp.compress(2, data)) == data


def test_lz4_frame_flags_and_broken_header_checksum():
    data = b"lz4 data " * 20_000
    blob = comp.compress(3, data)
    assert blob[:4] == b"\x04\x22\x4d\x18" and blob[4] & 0x20  # block independence flag
    assert blob[6] == (comp.xxh32_short(blob[4:6]) >> 8) & 0xFF  # HC agrees with cramjam's own frames
    broken = bytearray(blob)
    broken[6] = (comp.xxh32_short(bytes(blob[0:6])) >> 8) & 0xFF  # old Kafka hashed the magic too
    with pytest.raises(InvalidRecordError):
        comp.decompress(3, bytes(broken))
    assert comp.decompress(3, bytes(broken), fix_lz4_hc=True) == data


def test_xxh32_known_vectors():
    assert comp.xxh32_short(b"") == 0x02CC5D05
    assert comp.xxh32_short(b"a") == 0x550D7456
    assert comp.xxh32_short(b"abc") == 0x32D153FF


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
@pytest.mark.parametrize("garbage", [b"", b"\x05\x00", b"not compressed at all", b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\x7f\xff\xff\xff"])
def test_decompress_garbage_is_corrupt(codec, garbage):
    with pytest.raises(InvalidRecordError) as exc:
        comp.decompress(codec, garbage)
    assert exc.value.error_code == CORRUPT_MESSAGE


def test_unknown_codec():
    for fn in (comp.compress, comp.decompress):
        with pytest.raises(InvalidRecordError) as exc:
            fn(5, b"x")
        assert exc.value.error_code == UNSUPPORTED_COMPRESSION_TYPE


# --------------------------------------------------------------------------------------------- varints

@pytest.mark.parametrize("value", [0, 1, -1, 63, -64, 64, 300, -300, 2**31 - 1, -(2**31), 2**63 - 1, -(2**63)])
def test_varint_round_trip(value):
    out = bytearray()
    encode_varint(value, out)
    assert len(out) == varint_size(value)
    assert decode_varint(out, 0) == (value, len(out))


def test_varint_known_bytes_and_truncation():
    out = bytearray()
    for v in (0, -1, 1, -2, 150):
        encode_varint(v, out)
    assert bytes(out) == b"\x00\x01\x02\x03\xac\x02"
    with pytest.raises(InvalidRecordError):
        decode_varint(b"\xac", 0)


# ------------------------------------------------------------------------------------- build / decode

SAMPLE = [
    (b"k1", b"v1", [("h", b"x"), ("null", None)], 1_700_000_000_000),
    (None, b"no key", [], 1_700_000_000_005),
    (b"tombstone", None, [], 1_699_999_999_990),  # earlier than the first: negative delta
    (b"", b"", [("\u00e9", b"")], 1_700_000_000_001),
]


@pytest.mark.parametrize("codec", CODECS)
def test_build_then_validate_and_decode(codec):
    raw = build_batch(SAMPLE, base_offset=42, compression=codec, producer_id=7, producer_epoch=3, base_sequence=11)
    [(pos, header)] = validate_v2(raw)
    assert (pos, header.base_offset, header.records_count, header.last_offset_delta) == (0, 42, 4, 3)
    assert header.compression == codec
    assert header.base_timestamp == 1_700_000_000_000 and header.max_timestamp == 1_700_000_000_005
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 3, 11)
    assert header.partition_leader_epoch == -1 and not header.is_control and not header.is_transactional
    h2, records = decode_batch(raw)
    assert h2 == header
    assert records == [Record(42 + i, ts, k, v, hs) for i, (k, v, hs, ts) in enumerate(SAMPLE)]
    assert record_timestamps(raw) == [(42 + i, r[3]) for i, r in enumerate(SAMPLE)]


@pytest.mark.parametrize("codec", CODECS)
def test_build_batch_readable_by_kafka_python(kp_codecs, codec):
    raw = build_batch(SAMPLE, base_offset=5, compression=codec, transactional=True, producer_id=1, producer_epoch=0)
    batch = MemoryRecords(raw).next_batch()
    assert batch.validate_crc() and batch.is_transactional and batch.compression_type == codec
    got = [(r.offset, r.timestamp, r.key, r.value, [(k, v) for k, v in r.headers]) for r in batch]
    assert got == [(5 + i, ts, k, v, hs) for i, (k, v, hs, ts) in enumerate(SAMPLE)]


@pytest.mark.parametrize("codec", CODECS)
def test_decode_kafka_python_batches(kp_codecs, codec):
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=codec, is_transactional=False, producer_id=99, producer_epoch=1,
        base_sequence=0, batch_size=1 << 20,
    )
    values = [os.urandom(10) * (i + 1) for i in range(50)]
    for i, v in enumerate(values):
        builder.append(i, timestamp=1_600_000_000_000 + i * 3, key=b"key%d" % i if i % 2 else None, value=v,
                       headers=[("idx", str(i).encode())])
    raw = bytes(builder.build())
    [(_, header)] = validate_v2(raw)
    assert header.compression == codec and header.producer_id == 99
    _, records = decode_batch(raw)
    assert [r.value for r in records] == values
    assert [r.key for r in records] == [b"key%d" % i if i % 2 else None for i in range(50)]
    assert [r.offset for r in records] == list(range(50))
    assert [r.timestamp for r in records] == [1_600_000_000_000 + i * 3 for i in range(50)]
    assert records[7].headers == [("idx", b"7")]


def test_log_append_time_timestamps():
    raw = bytearray(build_batch(SAMPLE, timestamp_type=0))
    from odradek.records.batch import read_header, set_log_append_time

    set_log_append_time(raw, 0, read_header(raw), 1_800_000_000_000)
    validate_v2(raw)
    assert record_timestamps(raw) == [(i, 1_800_000_000_000) for i in range(4)]
    assert all(r.timestamp == 1_800_000_000_000 for r in decode_batch(raw)[1])


def test_concatenated_batches_decode_at_position():
    a = build_batch(SAMPLE[:2], base_offset=0)
    b = build_batch(SAMPLE[2:], base_offset=2, compression=4)
    both = a + b
    assert [p for p, _ in validate_v2(both)] == [0, len(a)]
    assert [r.offset for r in decode_batch(both, len(a))[1]] == [2, 3]


@pytest.mark.parametrize("marker", [ABORT, COMMIT])
def test_control_batch(marker):
    raw = build_control_batch(marker, producer_id=1234, producer_epoch=5, coordinator_epoch=17,
                              timestamp=1_700_000_000_000, base_offset=77)
    [(_, header)] = validate_v2(raw)
    assert header.is_control and header.is_transactional and header.records_count == 1
    assert (header.producer_id, header.producer_epoch, header.base_offset) == (1234, 5, 77)
    _, [record] = decode_batch(raw)
    assert parse_control_key(record.key) == (0, marker)
    assert struct.unpack(">hi", record.value) == (0, 17)
    kp = MemoryRecords(raw).next_batch()
    assert kp.is_control_batch
    [ctrl] = list(kp)
    assert (ctrl.type, ctrl.version, ctrl.commit) == (marker, 0, marker == COMMIT)


def test_decode_rejects_corruption():
    raw = build_batch(SAMPLE)
    with pytest.raises(InvalidRecordError):
        decode_batch(raw[:-3])  # frame shorter than its length field
    bad = bytearray(raw)
    bad[61] = 0x7F  # first record's length varint: way past the batch
    with pytest.raises(InvalidRecordError) as exc:
        decode_batch(bad)
    assert exc.value.error_code == CORRUPT_MESSAGE
    bad = bytearray(raw)
    bad[30] ^= 0xFF
    with pytest.raises(InvalidRecordError) as exc:
        validate_v2(bad)
    assert exc.value.error_code == CORRUPT_MESSAGE
