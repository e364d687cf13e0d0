"""Hostile and malformed input on raw sockets: the broker drops the offending connection and keeps serving."""

from __future__ import annotations

import random
import socket
import struct
import time
from pathlib import Path

import pytest

from .helpers import (
    API_VERSIONS,
    api_versions_request,
    bounded,
    connect,
    consume_messages,
    consumer_config,
    fetch_request_v4,
    frame,
    metadata_request_v1,
    parse_api_versions_v0,
    parse_metadata_response_v1,
    parse_produce_response_v3,
    produce_request_v3,
    read_frame,
    record_batch,
    request_header_v1,
    roundtrip,
    wait_closed,
)

UNSUPPORTED_VERSION = 35

# The contract's supported ranges: (api key, min, max).
CONTRACT_RANGES = {
    0: (0, 11),  # Produce
    1: (0, 17),  # Fetch
    2: (0, 9),  # ListOffsets
    3: (0, 12),  # Metadata
    18: (0, 4),  # ApiVersions
    19: (0, 7),  # CreateTopics
    20: (0, 6),  # DeleteTopics
}


def rss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def assert_serving(broker, topic: str) -> None:
    assert broker.is_running(), f"broker died: {broker.log_tail()}"
    roundtrip(broker.bootstrap, topic)


def send_quietly(sock: socket.socket, data: bytes) -> None:
    """Send, ignoring errors from a peer that already hung up."""
    try:
        sock.sendall(data)
    except (BrokenPipeError, ConnectionResetError):
        pass


def api_versions_ok(address: str) -> None:
    """A well-formed ApiVersions v0 exchange on a fresh connection."""
    with connect(address) as sock:
        sock.sendall(api_versions_request(correlation_id=4242))
        cid, err, ranges = parse_api_versions_v0(read_frame(sock))
        assert (cid, err) == (4242, 0)
        assert API_VERSIONS in ranges


@pytest.mark.timeout(60)
def test_random_bytes(broker, topic_name):
    rng = random.Random(20240611)
    for size in (1, 3, 4, 7, 64, 4096, 65536):
        for _ in range(3):
            with connect(broker.bootstrap) as sock:
                send_quietly(sock, rng.randbytes(size))
                # The broker either waits for more bytes or hangs up; either way we leave.
                wait_closed(sock, 0.2)
    api_versions_ok(broker.bootstrap)
    assert_serving(broker, topic_name)


@pytest.mark.timeout(60)
def test_random_bytes_after_valid_prefix(broker, topic_name):
    """A valid request followed by garbage: the first is answered, the connection then closes or waits."""
    rng = random.Random(7)
    for _ in range(5):
        with connect(broker.bootstrap) as sock:
            sock.sendall(api_versions_request(correlation_id=1) + struct.pack(">i", 40) + rng.randbytes(40))
            cid, err, _ = parse_api_versions_v0(read_frame(sock))
            assert (cid, err) == (1, 0)
            wait_closed(sock, 0.5)
    assert_serving(broker, topic_name)


@pytest.mark.timeout(60)
def test_truncated_frame_then_close(broker, topic_name):
    request = api_versions_request(correlation_id=9)
    for cut in (1, 2, 4, 6, len(request) - 1):
        with connect(broker.bootstrap) as sock:
            sock.sendall(request[:cut])
    with connect(broker.bootstrap) as sock:
        sock.sendall(struct.pack(">i", 100) + b"x" * 50)
        sock.shutdown(socket.SHUT_WR)
        assert wait_closed(sock, 5), "broker kept a half-closed connection with a truncated frame open"
    assert_serving(broker, topic_name)


@pytest.mark.timeout(60)
def test_huge_length_prefix(broker, topic_name):
    pid = broker.proc.pid
    before = rss_kib(pid)
    for _ in range(3):
        with connect(broker.bootstrap) as sock:
            send_quietly(sock, struct.pack(">i", 0x7FFFFFFF) + request_header_v1(API_VERSIONS, 0, 1))
            assert wait_closed(sock, 5), "2 GiB length prefix: connection not closed"
    after = rss_kib(pid)
    if before is not None and after is not None:
        assert after - before < 256 * 1024, f"RSS grew from {before} KiB to {after} KiB"
    assert_serving(broker, topic_name)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("length", [-1, -2147483648, -100])
def test_negative_length_prefix(broker, topic_name, length):
    with connect(broker.bootstrap) as sock:
        send_quietly(sock, struct.pack(">i", length) + b"\x00" * 16)
        assert wait_closed(sock, 5), f"length {length}: connection not closed"
    assert_serving(broker, topic_name)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("payload", [b"", b"\x00", b"\x00\x12\x00"], ids=["empty", "1-byte", "3-bytes"])
def test_frame_too_short_for_header(broker, topic_name, payload):
    with connect(broker.bootstrap) as sock:
        send_quietly(sock, frame(payload))
        assert wait_closed(sock, 5), "frame shorter than a request header: connection not closed"
    assert_serving(broker, topic_name)


@pytest.mark.timeout(60)
def test_client_id_longer_than_frame(broker, topic_name):
    with connect(broker.bootstrap) as sock:
        send_quietly(sock, frame(struct.pack(">hhih", API_VERSIONS, 0, 5, 30000) + b"abc"))
        assert wait_closed(sock, 5), "client_id overrunning the frame: connection not closed"
    assert_serving(broker, topic_name)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("api_key", [999, 32767, -5])
def test_unknown_api_key(broker, topic_name, api_key):
    with connect(broker.bootstrap) as sock:
        send_quietly(sock, frame(request_header_v1(api_key, 0, 77)))
        try:
            payload = read_frame(sock, timeout=5)
        except (EOFError, ConnectionResetError):
            payload = None  # closed: fine
        if payload is not None:
            (cid,) = struct.unpack_from(">i", payload)
            assert cid == 77, "an error response must carry the request's correlation id"
    assert_serving(broker, topic_name)


@pytest.mark.timeout(60)
def test_api_versions_unsupported_version(broker, topic_name):
    with connect(broker.bootstrap) as sock:
        sock.sendall(frame(request_header_v1(API_VERSIONS, 99, 31337)))
        payload = read_frame(sock)
        cid, err, ranges = parse_api_versions_v0(payload)
        assert cid == 31337
        assert err == UNSUPPORTED_VERSION
        # A v0 body: nothing after the array, which names ApiVersions' own range only (as Kafka's does)
        assert len(payload) == 4 + 2 + 4 + 6 * len(ranges)
        assert list(ranges) == [API_VERSIONS] and ranges[API_VERSIONS][0] == 0 and ranges[API_VERSIONS][1] >= 3
        # The connection stays usable for a supported version.
        sock.sendall(api_versions_request(correlation_id=31338))
        cid, err, _ = parse_api_versions_v0(read_frame(sock))
        assert (cid, err) == (31338, 0)
    assert_serving(broker, topic_name)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_each_version(broker, version):
    with connect(broker.bootstrap) as sock:
        sock.sendall(api_versions_request(correlation_id=100 + version, version=version))
        payload = read_frame(sock)
        # ApiVersions responses always use response header v0 (no tagged fields), even in v3+.
        cid, err = struct.unpack_from(">ih", payload)
        assert (cid, err) == (100 + version, 0)
        if version == 0:
            _, _, ranges = parse_api_versions_v0(payload)
            assert len(payload) == 10 + 6 * len(ranges)
            for key, (lo, hi) in CONTRACT_RANGES.items():
                assert key in ranges, f"api {key} missing from ApiVersions"
                assert ranges[key][0] <= lo and ranges[key][1] >= hi, f"api {key}: {ranges[key]} vs {(lo, hi)}"
            assert all(lo <= hi for lo, hi in ranges.values())


@pytest.mark.timeout(60)
def test_frame_over_socket_request_max_bytes(broker_factory, topic_name):
    b = broker_factory({"socket.request.max.bytes": "1000000"})
    with connect(b.bootstrap) as sock:
        send_quietly(sock, struct.pack(">i", 2_000_000) + request_header_v1(API_VERSIONS, 0, 1) + b"\x00" * 1000)
        assert wait_closed(sock, 5), "frame over socket.request.max.bytes: connection not closed"
    # Just under the limit is accepted as a frame (the body is an ApiVersions request with trailing bytes
    # a lenient parser may ignore or a strict one may refuse); either way the broker keeps serving.
    api_versions_ok(b.bootstrap)
    assert_serving(b, topic_name)


@pytest.mark.timeout(60)
def test_pipelined_requests(broker, topic_name):
    n = 50
    with connect(broker.bootstrap) as sock:
        sock.sendall(b"".join(api_versions_request(correlation_id=1000 + i * 7) for i in range(n)))
        cids = []
        for _ in range(n):
            cid, err, ranges = parse_api_versions_v0(read_frame(sock))
            assert err == 0 and API_VERSIONS in ranges
            cids.append(cid)
        assert cids == [1000 + i * 7 for i in range(n)]
    assert_serving(broker, topic_name)


@pytest.mark.timeout(60)
def test_pipelined_mixed_versions(broker):
    versions = [0, 3, 1, 4, 2] * 6
    with connect(broker.bootstrap) as sock:
        sock.sendall(b"".join(api_versions_request(correlation_id=i, version=v) for i, v in enumerate(versions)))
        for i in range(len(versions)):
            cid, err = struct.unpack_from(">ih", read_frame(sock))
            assert (cid, err) == (i, 0)


@pytest.mark.timeout(60)
def test_request_one_byte_at_a_time(broker):
    request = api_versions_request(correlation_id=55)
    with connect(broker.bootstrap) as sock:
        for i in range(len(request)):
            sock.sendall(request[i : i + 1])
            time.sleep(0.005)
        cid, err, _ = parse_api_versions_v0(read_frame(sock))
        assert (cid, err) == (55, 0)


@pytest.mark.timeout(60)
def test_many_idle_connections(broker, topic_name):
    socks = []
    try:
        for _ in bounded(200, 15):
            socks.append(connect(broker.bootstrap))
        for s in socks[::2]:
            s.sendall(struct.pack(">i", 64) + b"\x00" * 10)  # a partial frame, never finished
        assert_serving(broker, topic_name)
    finally:
        for s in socks:
            s.close()
    assert_serving(broker, topic_name)


@pytest.mark.timeout(60)
def test_abrupt_reset_mid_response(broker, topic_name):
    """Clients that reset the connection (SO_LINGER 0) right after sending requests."""
    for _ in range(10):
        sock = connect(broker.bootstrap)
        sock.sendall(b"".join(api_versions_request(correlation_id=i) for i in range(20)))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
    assert_serving(broker, topic_name)


@pytest.mark.timeout(60)
def test_responses_readable_after_half_close(broker):
    """A client that sends a request then shuts down its write side still gets the answer."""
    with connect(broker.bootstrap) as sock:
        sock.sendall(api_versions_request(correlation_id=8))
        sock.shutdown(socket.SHUT_WR)
        try:
            payload = read_frame(sock, timeout=5)
        except EOFError:
            pytest.xfail("broker closed a half-closed connection before answering (allowed)")
        cid, err, _ = parse_api_versions_v0(payload)
        assert (cid, err) == (8, 0)


# ---------------------------------------------------------------------------------------------------
# Malformed record batches inside well-formed Produce requests
# ---------------------------------------------------------------------------------------------------

CORRUPT_MESSAGE = 2
INVALID_TOPIC_EXCEPTION = 17
INVALID_REQUEST = 42
UNSUPPORTED_COMPRESSION_TYPE = 76
INVALID_RECORD = 87
REFUSED = {CORRUPT_MESSAGE, INVALID_REQUEST, UNSUPPORTED_COMPRESSION_TYPE, INVALID_RECORD}


def raw_produce(address: str, topic: str, records: bytes, correlation_id: int = 1) -> tuple[int, int]:
    """Send one Produce v3 on a fresh connection; (error_code, base_offset), or None if the broker hung up."""
    with connect(address) as sock:
        sock.sendall(produce_request_v3(correlation_id, topic, 0, records))
        try:
            cid, parts = parse_produce_response_v3(read_frame(sock, timeout=15))
        except (EOFError, ConnectionResetError):
            return None  # type: ignore[return-value]
        assert cid == correlation_id
        assert [(t, p) for t, p, _, _ in parts] == [(topic, 0)]
        return parts[0][2], parts[0][3]


def all_values(address: str, topic: str) -> list:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(consumer_config(address))
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)
    finally:
        consumer.close()
    assert low == 0
    got = consume_messages(address, topic, high, extra_wait=0.3, config={"check.crcs": True})
    assert [m.offset() for m in got] == list(range(high))
    return [m.value() for m in got]


def _bad_batches() -> dict[str, bytes]:
    rng = random.Random(99)
    good = record_batch([b"x", b"y"])
    return {
        "bad-crc": record_batch([b"x", b"y"], fix_crc=False),
        "length-past-end": good[:8] + struct.pack(">i", len(good) - 12 + 100) + good[12:],
        "length-too-small": good[:8] + struct.pack(">i", 10) + good[12:],
        "truncated-batch": good[:-3],
        "header-only-fragment": good[:30],
        "magic-1-garbage": record_batch([b"x"], magic=1),
        "magic-7": record_batch([b"x"], magic=7),
        "gzip-junk": record_batch([b"x"], attributes=1, records_blob=rng.randbytes(64)),
        "snappy-junk": record_batch([b"x"], attributes=2, records_blob=rng.randbytes(64)),
        "lz4-junk": record_batch([b"x"], attributes=3, records_blob=rng.randbytes(64)),
        "zstd-junk": record_batch([b"x"], attributes=4, records_blob=rng.randbytes(64)),
        "codec-7": record_batch([b"x"], attributes=7),
        "count-more-than-records": record_batch([b"x", b"y"], record_count=5),
        "records-junk": record_batch([b"x"], records_blob=rng.randbytes(40)),
        "zero-records": record_batch([], record_count=0),
    }


BAD_BATCHES = _bad_batches()


@pytest.mark.timeout(60)
def test_raw_produce_valid_batch(broker, topic_name):
    roundtrip(broker.bootstrap, topic_name)  # creates the topic: offsets 0-2
    assert raw_produce(broker.bootstrap, topic_name, record_batch([b"raw-a", b"raw-b", None])) == (0, 3)
    values = all_values(broker.bootstrap, topic_name)
    assert values[3:] == [b"raw-a", b"raw-b", None]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", sorted(BAD_BATCHES))
def test_raw_produce_malformed_batch(broker, topic_name, kind):
    roundtrip(broker.bootstrap, topic_name)
    result = raw_produce(broker.bootstrap, topic_name, BAD_BATCHES[kind])
    assert result is None or result[0] in REFUSED, f"{kind}: broker accepted a malformed batch: {result}"
    # Nothing of it was stored: the partition reads back cleanly, and the next produce goes right after.
    assert len(all_values(broker.bootstrap, topic_name)) == 3
    assert raw_produce(broker.bootstrap, topic_name, record_batch([b"after"])) == (0, 3)
    assert all_values(broker.bootstrap, topic_name)[3:] == [b"after"]
    assert_serving(broker, topic_name)


@pytest.mark.timeout(60)
def test_raw_produce_good_then_bad_batch_in_one_request(broker, topic_name):
    """Two batches in one records field, the second corrupt: the whole partition write is refused."""
    roundtrip(broker.bootstrap, topic_name)
    records = record_batch([b"ok"]) + record_batch([b"bad"], fix_crc=False)
    result = raw_produce(broker.bootstrap, topic_name, records)
    assert result is None or result[0] in REFUSED, result
    assert len(all_values(broker.bootstrap, topic_name)) == 3


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", ["bad name!", "x" * 300, "..", "a/b"])
def test_metadata_invalid_topic_name(broker, name):
    with connect(broker.bootstrap) as sock:
        sock.sendall(metadata_request_v1(5, [name]))
        cid, topics = parse_metadata_response_v1(read_frame(sock))
        assert cid == 5
        assert topics.get(name, (None,))[0] == INVALID_TOPIC_EXCEPTION, topics
        sock.sendall(metadata_request_v1(6, None))
        _, everything = parse_metadata_response_v1(read_frame(sock))
        assert name not in everything, "an invalid topic name was auto-created"


@pytest.mark.timeout(60)
def test_raw_produce_acks0_malformed(broker, topic_name):
    """acks=0 gets no response; a refused acks=0 produce may close the connection. Either way: serving."""
    roundtrip(broker.bootstrap, topic_name)
    with connect(broker.bootstrap) as sock:
        send_quietly(sock, produce_request_v3(1, topic_name, 0, record_batch([b"x"], fix_crc=False), acks=0))
        send_quietly(sock, api_versions_request(correlation_id=2))
        try:
            payload = read_frame(sock, timeout=5)
        except (EOFError, ConnectionResetError):
            payload = None
        if payload is not None:
            # No response for the acks=0 produce: the next answer is the ApiVersions one.
            assert struct.unpack_from(">i", payload)[0] == 2
    assert len(all_values(broker.bootstrap, topic_name)) == 3
    assert_serving(broker, topic_name)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "body",
    [
        struct.pack(">i", 0x7FFFFFFF),  # Metadata: 2^31-1 topics, none present
        struct.pack(">ih", 1, 0x7FFF) + b"abc",  # one topic whose name overruns the frame
        struct.pack(">i", -2),  # negative array length other than null (-1)
    ],
    ids=["huge-array", "string-overrun", "negative-array"],
)
def test_metadata_lying_lengths(broker, topic_name, body):
    pid = broker.proc.pid
    before = rss_kib(pid)
    with connect(broker.bootstrap) as sock:
        send_quietly(sock, frame(request_header_v1(3, 1, 12) + body))
        try:
            payload = read_frame(sock, timeout=5)
        except (EOFError, ConnectionResetError):
            payload = None
        if payload is not None:
            assert struct.unpack_from(">i", payload)[0] == 12
    after = rss_kib(pid)
    if before is not None and after is not None:
        assert after - before < 256 * 1024, f"RSS grew from {before} KiB to {after} KiB"
    assert_serving(broker, topic_name)


@pytest.mark.timeout(60)
def test_produce_records_length_overrun(broker, topic_name):
    roundtrip(broker.bootstrap, topic_name)
    t = topic_name.encode()
    body = struct.pack(">hhi", -1, -1, 5000) + struct.pack(">ih", 1, len(t)) + t + struct.pack(">iii", 1, 0, 0x7FFFFFF0)
    with connect(broker.bootstrap) as sock:
        send_quietly(sock, frame(request_header_v1(0, 3, 13) + body + b"\x00" * 100))
        try:
            payload = read_frame(sock, timeout=5)
        except (EOFError, ConnectionResetError):
            payload = None
        if payload is not None:
            cid, parts = parse_produce_response_v3(payload)
            assert cid == 13 and all(err != 0 for _, _, err, _ in parts), parts
    assert len(all_values(broker.bootstrap, topic_name)) == 3
    assert_serving(broker, topic_name)


@pytest.mark.timeout(90)
def test_slow_reader_does_not_stall_others(broker, topic_name):
    """A client pipelines big fetches and never reads the responses; other clients are still served."""
    from confluent_kafka import Producer

    from .helpers import flush_fully, producer_config

    producer = Producer(producer_config(broker.bootstrap, **{"linger.ms": 20}))
    chunk = random.Random(3).randbytes(100_000)
    for _ in range(20):
        producer.produce(topic_name, value=chunk, partition=0)
    flush_fully(producer)
    hog = connect(broker.bootstrap)
    try:
        hog.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        # 160 fetches of ~2 MB each: ~320 MB of responses if the broker queued them all.
        requests = b"".join(fetch_request_v4(i, topic_name, 0, 0, max_bytes=2_000_000) for i in range(160))
        before = rss_kib(broker.proc.pid)
        hog.settimeout(10)
        try:
            hog.sendall(requests)
        except (socket.timeout, BrokenPipeError, ConnectionResetError):
            pass  # the broker may stop reading from us: that is fine
        for _ in range(3):
            assert_serving(broker, topic_name + "-other")
        after = rss_kib(broker.proc.pid)
        if before is not None and after is not None:
            # Kafka reads the next request of a connection only once the previous response is sent.
            assert after - before < 128 * 1024, f"unread responses buffered: RSS {before} KiB -> {after} KiB"
    finally:
        hog.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        hog.close()
    assert_serving(broker, topic_name)


def _pipelined_produces(topic: str, sizes: list[int], seed: int) -> tuple[bytes, list[list[bytes]]]:
    """Produce v3 requests (correlation ids 0..), each with values of 1000 bytes filling about ``size`` bytes,
    in batches under max.message.bytes; also each request's values."""
    rng = random.Random(seed)
    requests, batches = [], []
    for cid, size in enumerate(sizes):
        values = [rng.randbytes(1000) for _ in range(max(1, size // 1000))]
        batches.append(values)
        records = b"".join(record_batch(values[i:i + 500]) for i in range(0, len(values), 500))
        requests.append(produce_request_v3(cid, topic, 0, records))
    return b"".join(requests), batches


@pytest.mark.timeout(90)
def test_large_and_small_frames_in_odd_chunks(broker, topic_name):
    """Frames above and below the size that gets a buffer of its own, pipelined and cut at random points
    (in a size prefix, right after it, one byte short of a frame's end): every request is answered in order
    and every record is stored as sent."""
    roundtrip(broker.bootstrap, topic_name)  # offsets 0-2
    sizes = [200, 20_000, 300_000, 1_000, 70_000, 5_000_000, 500, 16_000, 17_000, 2_000]
    data, batches = _pipelined_produces(topic_name, sizes, seed=5)
    rng = random.Random(6)
    with connect(broker.bootstrap) as sock:
        pos = 0
        for _ in bounded(100_000, 30):
            if pos >= len(data):
                break
            step = rng.choice([1, 3, 4, 5, 4093, 16_384, 65_536, 70_001, 1_000_000])
            sock.sendall(data[pos:pos + step])
            pos += step
        assert pos >= len(data), "the request stream was not sent within the time bound"
        offsets = []
        for cid in range(len(sizes)):
            got_cid, parts = parse_produce_response_v3(read_frame(sock, timeout=15))
            assert got_cid == cid
            assert parts[0][2] == 0, parts
            offsets.append(parts[0][3])
    expected_offsets, next_offset = [], 3
    for values in batches:
        expected_offsets.append(next_offset)
        next_offset += len(values)
    assert offsets == expected_offsets
    assert all_values(broker.bootstrap, topic_name)[3:] == [v for values in batches for v in values]


@pytest.mark.timeout(60)
def test_announced_huge_frames_cost_what_was_sent(broker, topic_name):
    """Connections that announce frames of nearly socket.request.max.bytes (100 MiB) and send a little of
    each do not make the broker hold the announced sizes."""
    before = rss_kib(broker.proc.pid)
    socks = []
    try:
        for _ in range(8):
            sock = connect(broker.bootstrap)
            socks.append(sock)
            sock.sendall(struct.pack(">i", 100_000_000) + request_header_v1(0, 3, 1) + b"\x00" * 100_000)
        time.sleep(0.5)
        assert_serving(broker, topic_name)
        after = rss_kib(broker.proc.pid)
        if before is not None and after is not None:
            assert after - before < 200 * 1024, f"announced sizes held: RSS {before} KiB -> {after} KiB"
    finally:
        for sock in socks:
            sock.close()
    assert_serving(broker, topic_name)
