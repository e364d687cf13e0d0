"""The KAFKA07 listener's edge cases, with our own 0.7 client (client07.py) against a broker process."""

from __future__ import annotations

import random
import socket
import struct
import time

from confluent_kafka.admin import AdminClient, NewTopic

from odradek.legacy07 import codec
from odradek.records import compression
from tests.interop.helpers import wait_until
from tests.kafka07.client07 import Client07, next_offset, payloads
from tests.kafka07.conftest import Broker07

HOST = "127.0.0.1"


def _fetch_all(client: Client07, topic: str, partition: int, count: int, offset: int = 0
               ) -> list[codec.Message07]:
    """The messages from ``offset`` once ``count`` payloads are there (produce has no answer: we poll)."""
    def enough():
        error, messages = client.fetch(topic, partition, offset)
        assert error == 0
        return messages if len(payloads(messages)) >= count else None
    return wait_until(enough, timeout=10, message=f"{count} messages in {topic}-{partition}")


def _create_topic(broker: Broker07, name: str, partitions: int, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1, config=configs)])[name].result(10)


def test_produce_fetch_offsets(broker07: Broker07) -> None:
    with Client07(HOST, broker07.kafka07_port) as client:
        client.produce("basic", 0, [b"first", b"second"])
        messages = _fetch_all(client, "basic", 0, 2)
        assert payloads(messages) == [b"first", b"second"]
        end = next_offset(0, messages)
        assert end == 15 + 16
        assert client.fetch("basic", 0, 15)[1] == messages[1:]
        assert client.offsets("basic", 0, codec.LATEST_TIME) == (0, [end, 0])
        assert client.offsets("basic", 0, codec.LATEST_TIME, max_offsets=1) == (0, [end])
        assert client.offsets("basic", 0, codec.EARLIEST_TIME) == (0, [0])
        assert client.fetch("basic", 0, end) == (0, [])
        assert client.fetch("never-written", 0, 0) == (0, [])  # 0.7: an unknown topic is an empty set
        assert client.offsets("never-written", 0, codec.LATEST_TIME) == (0, [0])


def test_errors(broker07: Broker07) -> None:
    with Client07(HOST, broker07.kafka07_port) as client:
        client.produce("errors", 0, [b"0123456789"])
        messages = _fetch_all(client, "errors", 0, 1)
        end = next_offset(0, messages)
        assert client.fetch("errors", 0, 3)[0] == codec.ErrorCode07.OFFSET_OUT_OF_RANGE  # inside a message
        assert client.fetch("errors", 0, end + 20)[0] == codec.ErrorCode07.OFFSET_OUT_OF_RANGE
        assert client.fetch("errors", 0, 0, max_size=5)[0] == codec.ErrorCode07.INVALID_FETCH_SIZE
        assert client.fetch("errors", 0, 0, max_size=-1)[0] == codec.ErrorCode07.INVALID_FETCH_SIZE
        assert client.fetch("errors", 7, 0)[0] == codec.ErrorCode07.WRONG_PARTITION
        assert client.offsets("errors", 7, codec.LATEST_TIME)[0] == codec.ErrorCode07.WRONG_PARTITION


def test_multifetch_and_multiproduce_across_partitions(broker07: Broker07) -> None:
    _create_topic(broker07, "multi", 3)
    with Client07(HOST, broker07.kafka07_port) as client:
        sets = {p: b"".join(codec.encode_message(b"p%d-%d" % (p, i)) for i in range(p + 1)) for p in range(3)}
        client.send(codec.encode_multiproduce([("multi", p, sets[p]) for p in range(3)]))
        _fetch_all(client, "multi", 2, 3)
        client.send(codec.encode_multifetch([("multi", p, 0, 1000) for p in range(3)] + [("multi", 0, 5, 1000)]))
        error, body = client.response()
        assert error == 0
        parts = codec.decode_multifetch_body(body)
        assert [e for e, _ in parts] == [0, 0, 0, codec.ErrorCode07.OFFSET_OUT_OF_RANGE]
        for p in range(3):
            assert payloads(codec.decode_message_set(parts[p][1])) == [b"p%d-%d" % (p, i) for i in range(p + 1)]


def test_compressed_sets_round_trip(broker07: Broker07) -> None:
    with Client07(HOST, broker07.kafka07_port) as client:
        client.produce("compressed", 0, [b"g1", b"g2", b"g3"], compression=compression.GZIP)
        client.produce("compressed", 0, [b"s1", b"s2"], compression=compression.SNAPPY)
        client.produce("compressed", 0, [b"plain"])
        messages = _fetch_all(client, "compressed", 0, 6)
        assert [m.codec for m in messages] == [compression.GZIP, compression.SNAPPY, 0]
        assert payloads(messages) == [b"g1", b"g2", b"g3", b"s1", b"s2", b"plain"]
        # a wrapper is one message: the next one starts right after it
        after_gzip = next_offset(0, messages[:1])
        assert client.fetch("compressed", 0, after_gzip)[1] == messages[1:]
        assert client.fetch("compressed", 0, after_gzip - 1)[0] == codec.ErrorCode07.OFFSET_OUT_OF_RANGE


def test_corrupt_crc_closes_the_connection_and_writes_nothing(broker07: Broker07) -> None:
    with Client07(HOST, broker07.kafka07_port) as client:
        client.produce("corrupt", 0, [b"good"])
        _fetch_all(client, "corrupt", 0, 1)
    good = codec.encode_message(b"fine")
    bad = codec.encode_message(b"evil")[:-1] + b"!"
    with Client07(HOST, broker07.kafka07_port) as client:
        client.send(codec.encode_produce("corrupt", 0, good + bad))
        assert client.is_closed_by_peer()
    with Client07(HOST, broker07.kafka07_port) as client:
        assert payloads(client.fetch("corrupt", 0, 0)[1]) == [b"good"]


def test_broken_frames_close_the_connection(broker07: Broker07) -> None:
    fetch = codec.encode_fetch("frames", 0, 0, 100)
    broken = [
        struct.pack(">i", 1) + b"\x00",  # too short for a request type
        struct.pack(">i", -5),  # negative length
        struct.pack(">i", 200 * 1024 * 1024),  # past socket.request.max.bytes
        struct.pack(">i", len(fetch) - 4 + 3) + fetch[4:] + b"xyz",  # longer than its request
        struct.pack(">ih", 2, 99),  # unknown request type
    ]
    for frame in broken:
        with Client07(HOST, broker07.kafka07_port) as client:
            client.send(frame)
            assert client.is_closed_by_peer(), frame
    rng = random.Random(7)
    for _ in range(40):  # garbage in frames of the right size, after a valid request type
        body = struct.pack(">h", rng.randrange(5)) + rng.randbytes(rng.randrange(40))
        with Client07(HOST, broker07.kafka07_port) as client:
            client.send(struct.pack(">i", len(body)) + body)
            client.sock.shutdown(socket.SHUT_WR)
            deadline = time.monotonic() + 10
            while client.sock.recv(65536) and time.monotonic() < deadline:
                pass  # an answer (a request that parsed): the broker then sees our end and closes
    assert "Traceback" not in broker07.process.log_tail(200_000)  # refused as bad input, never failed
    with Client07(HOST, broker07.kafka07_port) as client:  # the broker goes on
        assert client.fetch("frames", 0, 0) == (0, [])
    assert broker07.process.is_running()


def test_offsets_by_time(broker07_factory) -> None:
    broker = broker07_factory(**{"log.segment.bytes": "200"})
    with Client07(HOST, broker.kafka07_port) as client:
        client.produce("timed", 0, [b"x" * 90])  # a 100-byte message
        _fetch_all(client, "timed", 0, 1)
        for i in range(1, 4):
            client.produce("timed", 0, [b"x" * 90, b"y" * 90])  # 200 bytes: a batch fills a segment
            _fetch_all(client, "timed", 0, 1 + 2 * i)
        error, latest = client.offsets("timed", 0, codec.LATEST_TIME, max_offsets=100)
        assert error == 0 and latest == [700, 500, 300, 100, 0]  # the end, then each segment's start
        assert client.offsets("timed", 0, codec.EARLIEST_TIME, max_offsets=100) == (0, [0])
        assert client.offsets("timed", 0, 0) == (0, [])  # older than every segment
        now = int(time.time() * 1000) + 60_000
        assert client.offsets("timed", 0, now, max_offsets=100) == (0, latest)
        assert client.offsets("timed", 0, now, max_offsets=2) == (0, latest[:2])
        # a time between: the segments not newer than it (0.7 records carry no timestamp: their files' mtimes)
        mtimes = [f.stat().st_mtime_ns // 1_000_000
                  for f in sorted((broker.process.data_dir / "timed-0").glob("*.log"))]
        assert len(mtimes) == 4
        newest_not_after = max(i for i, t in enumerate(mtimes) if t <= mtimes[1])
        assert client.offsets("timed", 0, mtimes[1], max_offsets=100) == (0, latest[-1 - newest_not_after:])
        for start in latest:  # each is a message start or the end
            assert client.fetch("timed", 0, start)[0] == 0


def test_positions_stable_across_restart_and_retention(broker07_factory) -> None:
    broker = broker07_factory(**{"log.segment.bytes": "300", "log.retention.check.interval.ms": "100"})
    with Client07(HOST, broker.kafka07_port) as client:
        for i in range(12):
            client.produce("stable", 0, [b"message-%02d" % i])  # 20-byte messages
        messages = _fetch_all(client, "stable", 0, 12)
        positions = {next_offset(0, messages[:i]): m.payload for i, m in enumerate(messages)}
        assert sorted(positions) == [20 * i for i in range(12)]
    broker.process.restart()
    with Client07(HOST, broker.kafka07_port) as client:
        for position, payload in positions.items():
            assert payloads(client.fetch("stable", 0, position, max_size=20)[1]) == [payload]
    # retention deletes the first segment: the positions of what is left stay
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    resource = ConfigResource("topic", "stable", incremental_configs=[
        ConfigEntry("retention.bytes", "400", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(10)
    with Client07(HOST, broker.kafka07_port) as client:
        earliest = wait_until(lambda: (lambda e: e[1][0] if e[1][0] > 0 else None)(
            client.offsets("stable", 0, codec.EARLIEST_TIME)), timeout=15, message="retention")
        assert earliest in positions
        assert client.fetch("stable", 0, 0)[0] == codec.ErrorCode07.OFFSET_OUT_OF_RANGE
        for position, payload in positions.items():
            if position >= earliest:
                assert payloads(client.fetch("stable", 0, position, max_size=20)[1]) == [payload]
    broker.process.restart()
    with Client07(HOST, broker.kafka07_port) as client:
        assert client.offsets("stable", 0, codec.EARLIEST_TIME) == (0, [earliest])
        assert payloads(client.fetch("stable", 0, 220, max_size=20)[1]) == [positions[220]]
        client.produce("stable", 0, [b"message-12"])
        assert payloads(_fetch_all(client, "stable", 0, 1, offset=240)) == [b"message-12"]


def test_idle_connections_are_closed(broker07_factory) -> None:
    """connections.max.idle.ms holds on the 0.7 listener too: a connection that sends nothing, or stops inside
    a frame, is closed; one that keeps asking is served."""
    from tests.interop.helpers import wait_closed

    broker = broker07_factory(**{"connections.max.idle.ms": "1500"})
    silent = socket.create_connection(("127.0.0.1", broker.kafka07_port), timeout=10)
    stalled = socket.create_connection(("127.0.0.1", broker.kafka07_port), timeout=10)
    stalled.sendall(struct.pack(">i", 1000) + b"\x00\x01")  # a frame announced, two bytes of it sent
    client = Client07("127.0.0.1", broker.kafka07_port)
    try:
        deadline = time.monotonic() + 4.0  # over twice the idle time, asking every 0.3 s
        while time.monotonic() < deadline:
            assert client.offsets("idle07", 0, -1, 1) is not None
            time.sleep(0.3)
        assert wait_closed(silent, timeout=10), "an idle 0.7 connection stayed open"
        assert wait_closed(stalled, timeout=10), "a 0.7 connection stalled inside a frame stayed open"
        assert client.offsets("idle07", 0, -1, 1) is not None  # the active one is still served
    finally:
        client.close()
        silent.close()
        stalled.close()


def test_large_frames_take_the_request_memory_budget(broker07_factory) -> None:
    """Connections that announce large 0.7 frames and send part of them hold at most queued.max.request.bytes
    between them (plus what each stream buffers), not what they sent; a small request is served meanwhile."""
    from tests.security.test_request_memory import rss_bytes

    mb = 1 << 20
    broker = broker07_factory(**{"queued.max.request.bytes": str(4 * mb), "socket.request.max.bytes": str(64 * mb)})
    pid = broker.process.proc.pid
    client = Client07("127.0.0.1", broker.kafka07_port)
    hostile: list[socket.socket] = []
    try:
        assert client.offsets("budget07", 0, -1, 1) is not None
        before = rss_bytes(pid)
        for _ in range(60):
            sock = socket.create_connection(("127.0.0.1", broker.kafka07_port), timeout=10)
            sock.setblocking(False)
            hostile.append(sock)
            try:
                sock.send(struct.pack(">i", 50 * mb) + bytes(2 * mb))  # as much as the kernel takes
            except BlockingIOError:
                pass
        assert client.offsets("budget07", 0, -1, 1) is not None  # small requests need no budget
        grown = rss_bytes(pid) - before
        # without the budget they held 64 MiB here, with it 17 MiB (its 4 MiB, each stream's buffer, the chunks)
        assert grown < 40 * mb, f"RSS grew by {grown / mb:.0f} MiB"
    finally:
        client.close()
        for sock in hostile:
            sock.close()
