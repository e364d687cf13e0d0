"""check_record_framing / validate_produced: record sets whose CRC is right but whose records are not."""

import struct

import pytest
from crc32c import crc32c

from odradek.records.batch import InvalidRecordError, read_header
from odradek.records.codec import build_batch, check_record_framing, validate_produced


def rebuild(batch: bytes, *, count: int | None = None, body: bytes | None = None) -> bytes:
    """Change records_count and/or the body of a batch, then fix length and CRC so only framing is wrong."""
    header = bytearray(batch[:61])
    body = batch[61:] if body is None else body
    if count is not None:
        struct.pack_into(">i", header, 57, count)
        struct.pack_into(">i", header, 23, count - 1)
    struct.pack_into(">i", header, 8, 61 + len(body) - 12)
    data = bytearray(header + body)
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    return bytes(data)


RECORDS = [(b"k%d" % i, b"v" * (i * 40), [("h", b"x")], 1000 + i) for i in range(5)]


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_well_formed_batches_pass(codec):
    batch = build_batch(RECORDS, compression=codec)
    assert [h.records_count for _, h in validate_produced(batch + batch)] == [5, 5]


def test_more_records_declared_than_present():
    with pytest.raises(InvalidRecordError) as info:
        validate_produced(rebuild(build_batch(RECORDS), count=6))
    assert info.value.error_code == 2


def test_fewer_records_declared_than_present():
    with pytest.raises(InvalidRecordError):
        validate_produced(rebuild(build_batch(RECORDS), count=4))


def test_junk_body_is_refused():
    with pytest.raises(InvalidRecordError):
        validate_produced(rebuild(build_batch(RECORDS[:1]), body=bytes(range(200, 240))))


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_junk_compressed_body_is_refused(codec):
    batch = rebuild(build_batch(RECORDS[:1], compression=codec), body=b"\x07" * 50)
    with pytest.raises(InvalidRecordError):
        check_record_framing(batch, 0, read_header(batch))


@pytest.mark.parametrize("value_size", [10, 100, 1000, 20_000])
@pytest.mark.parametrize("codec", [0, 3])
def test_records_of_one_size_pass(value_size, codec):
    # one, two and three byte length prefixes, all taking the same-size shortcut
    records = [(None, bytes([i]) * value_size, [], 1000) for i in range(50)]
    batch = build_batch(records, compression=codec)
    assert [h.records_count for _, h in validate_produced(batch)] == [50]


def test_records_of_mixed_sizes_pass():
    records = [(None, b"v" * (60 + (i * 37) % 9000), [], 1000 + i) for i in range(200)]
    assert [h.records_count for _, h in validate_produced(build_batch(records))] == [200]


def test_same_total_size_but_junk_inside_is_refused():
    # the first record's stride times the count fills the body, but the later prefixes are not lengths
    first = build_batch([(None, b"a" * 100, [], 1000)])[61:]
    body = first + bytes([0xFF]) * len(first)
    with pytest.raises(InvalidRecordError):
        validate_produced(rebuild(build_batch([(None, b"a" * 100, [], 1000)] * 2), body=body))


def test_two_records_of_different_sizes_with_an_even_split_pass():
    # 2 records whose average size is a whole stride still need the walk, which accepts them
    records = [(None, b"a" * 90, [], 1000), (None, b"b" * 110, [], 1000)]
    assert [h.records_count for _, h in validate_produced(build_batch(records))] == [2]


def test_truncated_two_byte_prefix_is_refused():
    body = build_batch([(None, b"a" * 100, [], 1000)])[61:] + bytes([0xD0])
    with pytest.raises(InvalidRecordError):
        validate_produced(rebuild(build_batch([(None, b"a" * 100, [], 1000)] * 2), body=body))
