"""Legacy MessageSet up/down-conversion, against message sets written and read by kafka-python."""

from __future__ import annotations

import zlib

import pytest
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from odradek.records.batch import CORRUPT_MESSAGE, InvalidRecordError, read_header, set_log_append_time, validate_v2
from odradek.records.codec import build_batch, build_control_batch, decode_batch
from odradek.records.legacy import detect_magic, downconvert, upconvert

from test_records_codec import kp_codecs  # noqa: F401  (fixture)

NOW = 1_750_000_000_000
MESSAGES = [
    (b"k0", b"value zero"),
    (None, b"no key"),
    (b"k2", None),
    (b"", b"x" * 3000),
]


def legacy_set(magic: int, codec: int, messages=MESSAGES, base_ts=1_700_000_000_000, first_offset=0) -> bytes:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i, (k, v) in enumerate(messages):
        builder.append(first_offset + i, timestamp=base_ts + i if magic else None, key=k, value=v)
    return bytes(builder.build())


def expected_ts(magic: int, n: int = len(MESSAGES), base_ts=1_700_000_000_000) -> list[int]:
    return [base_ts + i if magic else -1 for i in range(n)]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [0, 1, 2, 3])
def test_upconvert_kafka_python_sets(kp_codecs, magic, codec):  # noqa: F811
    raw = legacy_set(magic, codec)
    assert detect_magic(raw) == magic
    out = upconvert(raw, now_ms=NOW)
    assert isinstance(out, bytearray)
    [(_, header)] = validate_v2(out)
    assert header.compression == codec and not header.is_log_append_time
    assert header.records_count == len(MESSAGES) and header.base_offset == 0
    _, records = decode_batch(out)
    assert [(r.key, r.value) for r in records] == MESSAGES
    assert [r.offset for r in records] == list(range(len(MESSAGES)))
    assert [r.timestamp for r in records] == expected_ts(magic)
    assert all(r.headers == [] for r in records)
    if magic == 0 and codec == 3:  # kafka-python writes old Kafka's broken LZ4 header checksum for v0
        from odradek.records.compression import decompress

        with pytest.raises(InvalidRecordError):
            decompress(3, raw[26:])  # wrapper value: after offset, size, crc, magic, attrs, null key, length


def test_upconvert_raw_snappy_wrapper(kp_codecs, monkeypatch):  # noqa: F811
    import kafka.record.legacy_records as lr

    monkeypatch.setattr(lr, "snappy_encode", lambda data: kp_codecs.snappy_encode(data, xerial_compatible=False))
    raw = legacy_set(1, 2)
    assert b"SNAPPY" not in raw
    _, records = decode_batch(upconvert(raw, now_ms=NOW))
    assert [(r.key, r.value) for r in records] == MESSAGES


def test_upconvert_several_messages_and_wrappers(kp_codecs):  # noqa: F811
    # A plain message set followed by two compressed wrappers: one batch, order kept.
    raw = legacy_set(1, 0, MESSAGES[:2]) + legacy_set(1, 1, MESSAGES[2:], base_ts=5) + legacy_set(1, 3, [(b"a", b"b")], base_ts=9)
    out = upconvert(raw, now_ms=NOW)
    [(_, header)] = validate_v2(out)
    assert header.compression == 1  # first compressed wrapper's codec
    _, records = decode_batch(out)
    assert [(r.key, r.value) for r in records] == MESSAGES + [(b"a", b"b")]
    assert [r.timestamp for r in records] == [1_700_000_000_000, 1_700_000_000_001, 5, 6, 9]


def test_upconvert_log_append_time_wrapper(kp_codecs):  # noqa: F811
    raw = bytearray(legacy_set(1, 1))
    raw[17] |= 0x08  # LogAppendTime on the wrapper; fix its CRC
    raw[12:16] = zlib.crc32(raw[16:]).to_bytes(4, "big")
    out = upconvert(bytes(raw), now_ms=NOW)
    header, records = decode_batch(out)
    assert header.is_log_append_time and header.max_timestamp == NOW
    assert all(r.timestamp == NOW for r in records)


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [0, 1])
def test_upconvert_rejects_bad_crc_and_truncation(magic, codec):
    raw = legacy_set(magic, codec)
    bad = bytearray(raw)
    bad[-1] ^= 0x01
    with pytest.raises(InvalidRecordError) as exc:
        upconvert(bytes(bad), now_ms=NOW)
    assert exc.value.error_code == CORRUPT_MESSAGE
    for cut in (1, 5, len(raw) - 13):
        with pytest.raises(InvalidRecordError) as exc:
            upconvert(raw[:-cut], now_ms=NOW)
        assert exc.value.error_code == CORRUPT_MESSAGE
    with pytest.raises(InvalidRecordError):
        upconvert(b"", now_ms=NOW)


def test_upconvert_rejects_corrupt_inner_message():
    inner = bytearray(legacy_set(1, 0))
    inner[-1] ^= 0x01  # inner CRC now wrong
    import cramjam

    value = bytes(cramjam.gzip.compress(bytes(inner)))
    body = bytes([1, 1]) + (0).to_bytes(8, "big") + b"\xff\xff\xff\xff" + len(value).to_bytes(4, "big") + value
    msg = (3).to_bytes(8, "big") + (len(body) + 4).to_bytes(4, "big") + zlib.crc32(body).to_bytes(4, "big") + body
    with pytest.raises(InvalidRecordError) as exc:
        upconvert(msg, now_ms=NOW)
    assert exc.value.error_code == CORRUPT_MESSAGE


def _parse_legacy(raw: bytes):
    records = MemoryRecords(raw)
    out = []
    while (batch := records.next_batch()) is not None:
        assert batch.magic in (0, 1)
        for r in batch:
            assert r.validate_crc()
            out.append((batch.magic, r.offset, r.timestamp, r.timestamp_type, r.key, r.value))
    return out


@pytest.mark.parametrize("magic", [0, 1])
def test_downconvert_readable_by_kafka_python(kp_codecs, magic):  # noqa: F811
    records = [(k, v, [("h", b"dropped")], 1_700_000_000_000 + i) for i, (k, v) in enumerate(MESSAGES)]
    log = (
        build_batch(records[:2], base_offset=100, compression=2)
        + build_control_batch(1, 9, 0, 0, 1_700_000_000_000, base_offset=102)
        + build_batch(records[2:], base_offset=103, compression=3)
    )
    out = downconvert(log + build_batch(records, base_offset=105)[:50], magic)  # partial tail dropped
    got = _parse_legacy(out)
    offsets = [100, 101, 103, 104]
    ts = [r[3] for r in records] if magic else [None] * 4
    ts_type = 0 if magic else None
    assert got == [(magic, o, t, ts_type, k, v) for o, t, (k, v) in zip(offsets, ts, MESSAGES)]
    assert detect_magic(out) == magic
    assert [r[1] for r in _parse_legacy(downconvert(log, magic, first_offset=101))] == [101, 103, 104]
    assert downconvert(log, magic, first_offset=200) == b""


def test_downconvert_log_append_time():
    raw = bytearray(build_batch([(b"k", b"v", [], 5), (None, b"w", [], 6)], base_offset=10))
    set_log_append_time(raw, 0, read_header(raw), NOW)
    got = _parse_legacy(downconvert(bytes(raw), 1))
    assert [(g[1], g[2], g[3]) for g in got] == [(10, NOW, 1), (11, NOW, 1)]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [0, 1, 2, 3])
def test_round_trip_up_then_down(kp_codecs, magic, codec):  # noqa: F811
    out = upconvert(legacy_set(magic, codec), now_ms=NOW)
    from odradek.records.batch import patch_base_offset

    patch_base_offset(out, 0, 1000)
    got = _parse_legacy(downconvert(bytes(out), magic))
    assert [(g[1], g[4], g[5]) for g in got] == [(1000 + i, k, v) for i, (k, v) in enumerate(MESSAGES)]
    if magic:
        assert [g[2] for g in got] == expected_ts(1)
