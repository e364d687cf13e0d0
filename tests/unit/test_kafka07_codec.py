"""The Kafka 0.7 codec (legacy07/codec.py) and byte positions (legacy07/positions.py), without processes."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest

from odradek.legacy07 import codec
from odradek.legacy07.positions import (
    INDEX_INTERVAL,
    FetchTooSmall,
    PositionIndex,
    PositionIndexes,
    PositionOutOfRange,
    batch_messages,
)
from odradek.records import compression
from odradek.records.codec import build_batch, validate_produced
from odradek.storage.config import LogConfig
from odradek.storage.log import PartitionLog

TS = 1_700_000_000_000


# -- codec ---------------------------------------------------------------------------------------------------

def test_message_layout_magic_1_and_0() -> None:
    m1 = codec.encode_message(b"abc")
    assert m1 == struct.pack(">ibbI", 9, 1, 0, zlib.crc32(b"abc")) + b"abc"
    assert len(m1) == codec.message_size(3)
    m0 = codec.encode_message(b"abc", magic=0)
    assert m0 == struct.pack(">ibI", 8, 0, zlib.crc32(b"abc")) + b"abc"
    assert len(m0) == codec.message_size(3, magic=0)
    assert codec.decode_message_set(m1 + m0) == [codec.Message07(1, 0, b"abc"), codec.Message07(0, 0, b"abc")]


@pytest.mark.parametrize("codec_id", [compression.GZIP, compression.SNAPPY])
def test_compressed_wrapper_round_trip(codec_id: int) -> None:
    wrapper = codec.encode_compressed([b"one", b"two"], codec_id)
    (message,) = codec.decode_message_set(wrapper)
    assert message.codec == codec_id
    inner = codec.decode_message_set(compression.decompress(codec_id, message.payload))
    assert [m.payload for m in inner] == [b"one", b"two"]
    assert codec.encode_compressed([b"one", b"two"], codec_id) == wrapper  # deterministic: positions rely on it


def test_bad_messages_are_invalid() -> None:
    good = codec.encode_message(b"payload")
    corrupt = good[:-1] + b"X"
    with pytest.raises(codec.InvalidMessage, match="CRC"):
        codec.decode_message_set(corrupt)
    with pytest.raises(codec.InvalidMessage):
        codec.decode_message_set(good[:-2])  # truncated
    assert codec.decode_message_set(good + good[:-2], partial_tail=True) == [codec.Message07(1, 0, b"payload")]
    bad_magic = good[:4] + b"\x07" + good[5:]
    with pytest.raises(codec.InvalidMessage, match="magic"):
        codec.decode_message_set(bad_magic)
    with pytest.raises(codec.InvalidMessage, match="length"):
        codec.decode_message_set(struct.pack(">i", 2) + b"\x00\x00")


def test_requests_round_trip() -> None:
    assert codec.decode_request(codec.encode_produce("t", 2, b"MSGS")[4:]) == codec.ProduceRequest("t", 2, b"MSGS")
    assert codec.decode_request(codec.encode_fetch("t", 1, 1 << 40, 300)[4:]) == codec.FetchRequest(
        "t", 1, 1 << 40, 300)
    assert codec.decode_request(codec.encode_offsets("t", 0, -2, 5)[4:]) == codec.OffsetsRequest("t", 0, -2, 5)
    request = codec.decode_request(codec.encode_multifetch([("a", 0, 0, 10), ("b", 1, 9, 20)])[4:])
    assert request == codec.MultiFetchRequest([codec.FetchRequest("a", 0, 0, 10), codec.FetchRequest("b", 1, 9, 20)])
    request = codec.decode_request(codec.encode_multiproduce([("a", 0, b"x"), ("b", 3, b"yz")])[4:])
    assert request == codec.MultiProduceRequest([codec.ProduceRequest("a", 0, b"x"),
                                                 codec.ProduceRequest("b", 3, b"yz")])


def test_request_frame_layout() -> None:
    """FETCH: length, type 1, topic (int16 length + bytes), partition int32, offset int64, max size int32."""
    assert codec.encode_fetch("ab", 3, 7, 100) == struct.pack(">ihh2siqi", 22, 1, 2, b"ab", 3, 7, 100)


@pytest.mark.parametrize("frame", [
    b"",  # no request type
    struct.pack(">h", 9),  # unknown type
    codec.encode_fetch("t", 0, 0, 10)[4:-1],  # truncated
    codec.encode_fetch("t", 0, 0, 10)[4:] + b"junk",  # stray bytes
    struct.pack(">hh", 2, -1),  # negative count
    struct.pack(">hh", 1, 2) + b"\xff\xfe",  # topic not ASCII
])
def test_malformed_requests(frame: bytes) -> None:
    with pytest.raises(codec.MalformedRequest):
        codec.decode_request(frame)


def test_responses_round_trip() -> None:
    frame = codec.encode_fetch_response(0, b"MSGS")
    assert frame == struct.pack(">ih", 6, 0) + b"MSGS"
    assert codec.decode_response(frame[4:]) == (0, b"MSGS")
    error, body = codec.decode_response(codec.encode_offsets_response(0, [30, 0])[4:])
    assert codec.decode_offsets_body(body) == [30, 0]
    error, body = codec.decode_response(codec.encode_multifetch_response([(0, b"ab"), (1, b"")])[4:])
    assert codec.decode_multifetch_body(body) == [(0, b"ab"), (1, b"")]


# -- positions -----------------------------------------------------------------------------------------------

def _open(path: Path, **config) -> PartitionLog:
    return PartitionLog.open(path, LogConfig(**config), clock=lambda: TS)


def _append(plog: PartitionLog, values: list[bytes], codec_id: int = 0, key: bytes | None = None) -> None:
    buf = bytearray(build_batch([(key, v, [], TS) for v in values], compression=codec_id))
    plog.append(buf, validate_produced(buf))
    plog.update_high_watermark(plog.log_end_offset)


def test_batch_messages_per_codec() -> None:
    plain = build_batch([(b"key", b"v1", [("h", b"x")], TS), (None, b"v22", [], TS)])
    _, messages = batch_messages(plain)
    assert messages == [codec.encode_message(b"v1"), codec.encode_message(b"v22")]  # key and headers dropped
    gzip = build_batch([(None, b"a", [], TS), (None, b"b", [], TS)], compression=compression.GZIP)
    _, messages = batch_messages(gzip)
    assert messages == [codec.encode_compressed([b"a", b"b"], compression.GZIP)]
    _, messages = batch_messages(gzip, magic=0)  # magic 0 has no codec: the records one by one
    assert messages == [codec.encode_message(b"a", magic=0), codec.encode_message(b"b", magic=0)]
    lz4 = build_batch([(None, b"a", [], TS)], compression=compression.LZ4)  # 0.7 cannot read lz4: plain
    assert batch_messages(lz4)[1] == [codec.encode_message(b"a")]


def test_positions_reads_and_errors(tmp_path: Path) -> None:
    plog = _open(tmp_path / "t-0")
    _append(plog, [b"aa", b"bbb"])
    _append(plog, [b"c1", b"c2"], compression.SNAPPY)
    index = PositionIndex(plog)
    wrapper = codec.encode_compressed([b"c1", b"c2"], compression.SNAPPY)
    assert index.read(0, 1000) == codec.encode_message(b"aa") + codec.encode_message(b"bbb") + wrapper
    assert index.read(12, 1000) == codec.encode_message(b"bbb") + wrapper
    assert index.read(25, 1000) == wrapper
    assert index.end_position == 25 + len(wrapper)
    assert index.read(index.end_position, 1000) == b""
    for bad in (1, 13, 26, index.end_position + 1, -1):
        with pytest.raises(PositionOutOfRange):
            index.read(bad, 1000)
    with pytest.raises(FetchTooSmall):
        index.read(0, 11)
    assert index.read(0, 12) == codec.encode_message(b"aa")  # whole messages only
    assert [p for p, _ in index.segment_starts()] == [0]


def test_positions_of_magic_0_are_their_own(tmp_path: Path) -> None:
    plog = _open(tmp_path / "t-0")
    _append(plog, [b"aa", b"bbb"])
    index = PositionIndex(plog, magic=0)
    assert index.read(0, 100) == codec.encode_message(b"aa", magic=0) + codec.encode_message(b"bbb", magic=0)
    assert index.end_position == 11 + 12


def test_sparse_index_finds_positions_far_in(tmp_path: Path) -> None:
    plog = _open(tmp_path / "t-0", segment_bytes=8192)
    value = b"x" * 90  # 100-byte messages
    for _ in range(200):
        _append(plog, [value])
    index = PositionIndex(plog)
    index.catch_up()
    assert index.end_position == 200 * 100
    assert len(index._positions) >= 200 * 100 // INDEX_INTERVAL
    assert index.read(150 * 100, 250) == codec.encode_message(value) * 2
    with pytest.raises(PositionOutOfRange):
        index.read(150 * 100 + 50, 250)
    starts = [p for p, _ in index.segment_starts()]
    assert len(starts) == plog.segment_count and starts == sorted(starts) and starts[0] == 0


def test_positions_survive_the_log_start_moving_and_a_reopen(tmp_path: Path) -> None:
    indexes = PositionIndexes({1})
    indexes.install()
    try:
        plog = _open(tmp_path / "t-0", segment_bytes=1024)
        for i in range(60):
            _append(plog, [b"record-%03d" % i])  # 20-byte messages
        assert plog.segment_count > 2
        before = {i * 20: codec.encode_message(b"record-%03d" % i) for i in range(60)}
        second = plog.segment_base_offsets[1]
        indexes.of(plog)  # a 0.7 client asked about the partition, but read nothing of it
        untouched = _open(tmp_path / "u-0", segment_bytes=1024)
        for i in range(60):
            _append(untouched, [b"record-%03d" % i])
        # the hook alone records where the new start lies, for the partitions 0.7 clients use only
        plog.delete_records_before(second)
        untouched.delete_records_before(second)
        assert not (tmp_path / "u-0" / "kafka07.positions").exists()
        untouched.close()
        assert plog.log_start_offset == second
        index = indexes.of(plog)
        assert index.start_position == second * 20
        for position in (second * 20, 40 * 20, 59 * 20):
            assert index.read(position, 20) == before[position]
        with pytest.raises(PositionOutOfRange):
            index.read(0, 20)
        plog.close()
        reopened = _open(tmp_path / "t-0", segment_bytes=1024)
        again = PositionIndex(reopened)
        assert again.start_position == second * 20
        assert again.read(40 * 20, 20) == before[40 * 20]
        _append(reopened, [b"later"])
        assert again.read(60 * 20, 100) == codec.encode_message(b"later")
        reopened.close()
    finally:
        indexes.uninstall()
