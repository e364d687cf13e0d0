"""Record sets written by the real Java client (kafka-clients 3.9.1, ``MemoryRecords.builder``).

These hex fixtures pin the exact bytes Java producers send: magic 0/1 MessageSets with each legacy codec
(magic-0 LZ4 with the broken frame header checksum, xerial-framed snappy) and v2 batches with all five
codecs. They were produced once, outside the test suite, by this generator (jars from pyflink/lib)::

    import java.nio.ByteBuffer;
    import org.apache.kafka.common.compress.Compression;
    import org.apache.kafka.common.record.*;
    import org.apache.kafka.common.header.internals.RecordHeader;
    import org.apache.kafka.common.header.Header;

    public class Gen {
        public static void main(String[] a) {
            CompressionType[] types = {CompressionType.NONE, CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4, CompressionType.ZSTD};
            for (byte magic = 0; magic <= 2; magic++) {
                for (CompressionType t : types) {
                    if (magic < 2 && t == CompressionType.ZSTD) continue;
                    ByteBuffer buf = ByteBuffer.allocate(1 << 16);
                    MemoryRecordsBuilder b = MemoryRecords.builder(buf, magic, Compression.of(t).build(), TimestampType.CREATE_TIME, 0L);
                    for (int i = 0; i < 3; i++) {
                        byte[] key = i == 1 ? null : ("key" + i).getBytes();
                        byte[] val = i == 2 ? null : ("value-" + i + "-" + "x".repeat(50 * i)).getBytes();
                        Header[] hs = magic == 2 && i == 0 ? new Header[]{new RecordHeader("h", "hv".getBytes())} : new Header[0];
                        b.append(1700000000000L + i, key, val, hs);
                    }
                    MemoryRecords recs = b.build();
                    ByteBuffer out = recs.buffer();
                    StringBuilder sb = new StringBuilder();
                    while (out.hasRemaining()) sb.append(String.format("%02x", out.get()));
                    System.out.println(magic + " " + t.id + " " + sb);
                }
            }
        }
    }

Each holds 3 records: (key0, "value-0-"), (null key, "value-1-" + 50 x), (key2, null value), timestamps
1700000000000 + i (none in magic 0), and one header h=hv on the first v2 record.
"""

from __future__ import annotations

import pytest

from odradek.records.batch import InvalidRecordError, validate_v2
from odradek.records.codec import decode_batch
from odradek.records.compression import decompress
from odradek.records.legacy import detect_magic, downconvert, upconvert

JAVA = {
    (0, 0): (
        "00000000000000000000001a9e940f930000000000046b6579300000000876616c75652d302d00000000000000010000"
        "0048c22ed6e10000ffffffff0000003a76616c75652d312d787878787878787878787878787878787878787878787878"
        "7878787878787878787878787878787878787878787878787878000000000000000200000012f12f6068000000000004"
        "6b657932ffffffff"
    ),
    (0, 1): (
        "00000000000000020000006339ec5c540001ffffffff000000551f8b08000000000000ff63608003a97953f82783592c"
        "d9a99506409aa32c31a73455d74017aa8211883d0ee95d7bc8c0f01f08803c2b880a43dd0a9201d44c262016faa89f90"
        "01b7d908643600f886d18498000000"
    ),
    (0, 2): (
        "00000000000000020000007eea2959430002ffffffff0000007082534e415050590000000001000000010000005c9801"
        "00001901101a9e940f93050f44046b6579300000000876616c75652d302d000901480100000048c22ed6e10000ffffff"
        "ff0000003a092208312d78c2010000000901580200000012f12f60680000000000046b657932ffffffff"
    ),
    (0, 3): (
        "00000000000000020000007aae55d1a20003ffffffff0000006c04224d1860401a5d00000016000100511a9e940f930f"
        "00f102046b6579300000000876616c75652d302d1600f20600000100000048c22ed6e10000ffffffff0000003a22003f"
        "312d7801001e005100c10000000200000012f12f60680e0090046b657932ffffffff00000000"
    ),
    (1, 0): (
        "000000000000000000000022bd7e2e9301000000018bcfe56800000000046b6579300000000876616c75652d302d0000"
        "0000000000010000005006b6580801000000018bcfe56801ffffffff0000003a76616c75652d312d7878787878787878"
        "787878787878787878787878787878787878787878787878787878787878787878787878787878787878000000000000"
        "00020000001a634ef62f01000000018bcfe56802000000046b657932ffffffff"
    ),
    (1, 1): (
        "000000000000000200000077a5fca01d01010000018bcfe56802ffffffff000000611f8b08000000000000ff63608003"
        "a5bd757a9319810cc6eef34f3340222cd9a99506409aa32c31a73455d74017aa12a428806d5b04075c35e37f200072ac"
        "202a0d752b480650b39980582ad9ef9b3edc6c26a84b8c407600008c1cf5abb0000000"
    ),
    (1, 2): (
        "0000000000000002000000925a702d5d01020000018bcfe56802ffffffff0000007c82534e4150505900000000010000"
        "000100000068b001000019013422bd7e2e9301000000018bcfe568011844046b6579300000000876616c75652d302d00"
        "09010125105006b658080109052e2001ffffffff0000003a092a08312d78c20100095b2400020000001a634ef62f155c"
        "3002000000046b657932ffffffff"
    ),
    (1, 3): (
        "00000000000000020000008e304e4a6401030000018bcfe56802ffffffff0000007804224d1860408269000000160001"
        "00e022bd7e2e9301000000018bcfe5681800f002046b6579300000000876616c75652d302d1500002100850000005006"
        "b658082e009201ffffffff0000003a2a003f312d7801001e015a00b50000020000001a634ef62f5c0000120090046b65"
        "7932ffffffff00000000"
    ),
    (2, 0): (
        "000000000000000000000096ffffffff0247a90af20000000000020000018bcfe568000000018bcfe56802ffffffffff"
        "ffffffffffffffffff000000032e000000086b6579301076616c75652d302d0202680468768001000202017476616c75"
        "652d312d7878787878787878787878787878787878787878787878787878787878787878787878787878787878787878"
        "7878787878780014000404086b6579320100"
    ),
    (2, 1): (
        "000000000000000000000075ffffffff020feebdac0001000000020000018bcfe568000000018bcfe56802ffffffffff"
        "ffffffffffffffffff000000031f8b08000000000000ffd3636060e0c84ead3410284bcc294dd535d06562ca60c9286b"
        "60646062622c81081aea56900c184418585840261b31320000f1d3b30a65000000"
    ),
    (2, 2): (
        "00000000000000000000007dffffffff02829576b80002000000020000018bcfe568000000018bcfe56802ffffffffff"
        "ffffffffffffffffff0000000382534e4150505900000000010000000100000038657c2e000000086b6579301076616c"
        "75652d302d0202680468768001000202017476051508312d78c201002c0014000404086b6579320100"
    ),
    (2, 3): (
        "000000000000000000000077ffffffff024f8c62660003000000020000018bcfe568000000018bcfe56802ffffffffff"
        "ffffffffffffffffff0000000304224d1860408237000000f2102e000000086b6579301076616c75652d302d02026804"
        "68768001000202017415003f312d7801001ec00014000404086b657932010000000000"
    ),
    (2, 4): (
        "000000000000000000000075ffffffff028511eaac0004000000020000018bcfe568000000018bcfe56802ffffffffff"
        "ffffffffffffffffff0000000328b52ffd0058c40100e4022e000000086b6579301076616c75652d302d020268046876"
        "80010002020174312d780014000404086b65793201000200e2e21887e904010000"
    ),
}

KEYS = [b"key0", None, b"key2"]
VALUES = [b"value-0-", b"value-1-" + b"x" * 50, None]


@pytest.mark.parametrize("magic,codec", sorted(JAVA))
def test_java_record_sets(magic, codec):
    raw = bytes.fromhex(JAVA[(magic, codec)])
    assert detect_magic(raw) == magic
    batch = upconvert(raw, now_ms=1) if magic < 2 else raw
    [(_, header)] = validate_v2(batch)
    assert header.compression == codec
    _, records = decode_batch(batch)
    assert [r.key for r in records] == KEYS
    assert [r.value for r in records] == VALUES
    assert [r.offset for r in records] == [0, 1, 2]
    assert [r.timestamp for r in records] == ([-1] * 3 if magic == 0 else [1_700_000_000_000 + i for i in range(3)])
    assert [r.headers for r in records] == ([[("h", b"hv")], [], []] if magic == 2 else [[], [], []])


def test_java_magic0_lz4_has_broken_header_checksum():
    raw = bytes.fromhex(JAVA[(0, 3)])
    wrapper_value = raw[26:]  # offset 8, size 4, crc 4, magic 1, attributes 1, null key 4, value length 4
    with pytest.raises(InvalidRecordError):
        decompress(3, wrapper_value)
    assert decompress(3, wrapper_value, fix_lz4_hc=True)


def test_java_snappy_is_xerial():
    assert b"\x82SNAPPY\x00" in bytes.fromhex(JAVA[(1, 2)])


@pytest.mark.parametrize("magic", [0, 1])
def test_java_v2_downconverts_to_java_legacy_bytes(magic):
    # Java's uncompressed legacy sets and our down-conversion of Java's v2 batch must agree byte for byte.
    ours = downconvert(bytes.fromhex(JAVA[(2, 0)]), magic)
    assert ours == bytes.fromhex(JAVA[(magic, 0)])
