"""Small shared helpers for the interop tests: bounded waits, confluent-kafka produce/consume, raw frames.

Everything here is bounded in iterations and in wall-clock time so that a misbehaving broker makes a
test fail, never hang. Client libraries are imported lazily so a module that drives one client does
not need the others installed.
"""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import time
from typing import Any, Callable, Iterable, Iterator, TypeVar

T = TypeVar("T")

# ---------------------------------------------------------------------------------------------------
# Bounded waiting
# ---------------------------------------------------------------------------------------------------


def bounded(max_iterations: int, max_seconds: float) -> Iterator[int]:
    """Yield 0, 1, 2, ... until either `max_iterations` or `max_seconds` is exhausted."""
    deadline = time.monotonic() + max_seconds
    for i in range(max_iterations):
        if time.monotonic() >= deadline:
            return
        yield i


def wait_until(
    predicate: Callable[[], T],
    timeout: float = 10.0,
    interval: float = 0.05,
    message: str = "condition",
) -> T:
    """Call `predicate` until it returns a truthy value (returned) or `timeout` passes (AssertionError).

    Exceptions raised by `predicate` count as "not yet"; the last one is reported on timeout.
    """
    deadline = time.monotonic() + timeout
    last_exc: BaseException | None = None
    while True:
        try:
            value = predicate()
            if value:
                return value
        except Exception as exc:  # noqa: BLE001 - retried until the deadline
            last_exc = exc
        if time.monotonic() >= deadline:
            detail = f" (last error: {last_exc!r})" if last_exc is not None else ""
            raise AssertionError(f"timed out after {timeout}s waiting for {message}{detail}")
        time.sleep(interval)


# ---------------------------------------------------------------------------------------------------
# confluent-kafka
# ---------------------------------------------------------------------------------------------------

# The plain path: producers without idempotence, consumers by assign() that never commit. Groups,
# idempotence and transactions have their own suites (test_groups_*, test_idempotence, test_transactions).
PRODUCER_DEFAULTS: dict[str, Any] = {
    "enable.idempotence": False,
    "broker.address.family": "v4",
    "message.timeout.ms": 30000,
    "socket.timeout.ms": 10000,
    "linger.ms": 5,
}

CONSUMER_DEFAULTS: dict[str, Any] = {
    "group.id": "odradek-interop",  # required by confluent-kafka; no group API is ever used
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "auto.offset.reset": "earliest",
    "broker.address.family": "v4",
    "socket.timeout.ms": 10000,
    "enable.partition.eof": False,
}


def producer_config(bootstrap: str, **overrides: Any) -> dict[str, Any]:
    cfg = dict(PRODUCER_DEFAULTS)
    cfg["bootstrap.servers"] = bootstrap
    cfg.update(overrides)
    return cfg


def consumer_config(bootstrap: str, **overrides: Any) -> dict[str, Any]:
    cfg = dict(CONSUMER_DEFAULTS)
    cfg["bootstrap.servers"] = bootstrap
    cfg.update(overrides)
    return cfg


def flush_fully(producer: Any, timeout: float = 30.0) -> None:
    """Flush until nothing is queued or in flight; AssertionError if `timeout` passes first."""
    deadline = time.monotonic() + timeout
    while True:
        remaining = producer.flush(max(0.0, min(1.0, deadline - time.monotonic())))
        if remaining == 0:
            return
        if time.monotonic() >= deadline:
            raise AssertionError(f"{remaining} message(s) still undelivered after {timeout}s")


def produce_messages(
    bootstrap: str,
    topic: str,
    messages: Iterable[dict[str, Any]],
    timeout: float = 30.0,
    config: dict[str, Any] | None = None,
) -> list[tuple[Any, Any]]:
    """Produce each message (kwargs for `Producer.produce`, without topic) and wait for all reports.

    Returns the delivery reports `(err, msg)` in produce order.
    """
    from confluent_kafka import Producer

    producer = Producer(producer_config(bootstrap, **(config or {})))
    reports: list[tuple[Any, Any] | None] = []

    def make_cb(i: int) -> Callable[[Any, Any], None]:
        def cb(err: Any, msg: Any) -> None:
            reports[i] = (err, msg)

        return cb

    for i, kwargs in enumerate(messages):
        reports.append(None)
        for _ in bounded(1000, timeout):
            try:
                producer.produce(topic, on_delivery=make_cb(i), **kwargs)
                break
            except BufferError:
                producer.poll(0.1)
        else:
            raise AssertionError("producer queue stayed full")
        producer.poll(0)
    flush_fully(producer, timeout)
    missing = [i for i, r in enumerate(reports) if r is None]
    assert not missing, f"no delivery report for messages {missing[:10]}"
    return reports  # type: ignore[return-value]


def assert_delivered(reports: list[tuple[Any, Any]]) -> list[Any]:
    """Assert every delivery report is a success; return the delivered messages."""
    errors = [(i, err) for i, (err, _) in enumerate(reports) if err is not None]
    assert not errors, f"delivery errors: {errors[:5]}"
    return [msg for _, msg in reports]


def consume_messages(
    bootstrap: str,
    topic: str,
    n: int,
    partition: int = 0,
    offset: int | None = None,
    timeout: float = 30.0,
    config: dict[str, Any] | None = None,
    extra_wait: float = 0.0,
    only_fatal: bool = False,
) -> list[Any]:
    """assign() one partition at `offset` (default: beginning) and poll until `n` messages arrived.

    Raises AssertionError on timeout or on a message-level error event (with `only_fatal`, only on a
    fatal one: transient errors, e.g. a client reconnecting, are skipped). With `extra_wait` > 0 it keeps
    polling that long after reaching `n`, so unexpected extra messages are returned too.
    """
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(consumer_config(bootstrap, **(config or {})))
    try:
        consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING if offset is None else offset)])
        return poll_n(consumer, n, timeout=timeout, extra_wait=extra_wait, only_fatal=only_fatal)
    finally:
        consumer.close()


def poll_n(consumer: Any, n: int, timeout: float = 30.0, extra_wait: float = 0.0,
           only_fatal: bool = False) -> list[Any]:
    """Poll an assigned confluent consumer until `n` data messages (see `consume_messages`)."""
    from confluent_kafka import KafkaError

    out: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(out) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"got {len(out)} of {n} messages within {timeout}s")
        batch = consumer.consume(num_messages=min(1000, n - len(out)), timeout=min(1.0, left))
        for m in batch:
            err = m.error()
            if err is None:
                out.append(m)
            elif err.code() == KafkaError._PARTITION_EOF or (only_fatal and not err.fatal()):
                continue
            else:
                raise AssertionError(f"consumer error after {len(out)} messages: {err}")
    if extra_wait > 0:
        end = time.monotonic() + extra_wait
        while time.monotonic() < end:
            for m in consumer.consume(num_messages=1000, timeout=min(0.5, max(0.0, end - time.monotonic()))):
                if m.error() is None:
                    out.append(m)
    return out


def roundtrip(bootstrap: str, topic: str, count: int = 3, timeout: float = 30.0, partition: int = 0) -> None:
    """Produce `count` fresh messages to one partition of `topic` and read them back: the broker serves."""
    from confluent_kafka import Consumer, TopicPartition

    stamp = f"{time.monotonic_ns()}"
    payloads = [f"roundtrip-{stamp}-{i}".encode() for i in range(count)]
    specs = [{"value": p, "partition": partition} for p in payloads]
    msgs = assert_delivered(produce_messages(bootstrap, topic, specs, timeout=timeout))
    first = msgs[0].offset()
    assert [m.offset() for m in msgs] == list(range(first, first + count))
    consumer = Consumer(consumer_config(bootstrap))
    try:
        consumer.assign([TopicPartition(topic, msgs[0].partition(), first)])
        got = poll_n(consumer, count, timeout=timeout)
    finally:
        consumer.close()
    assert [m.value() for m in got] == payloads
    assert [m.offset() for m in got] == list(range(first, first + count))


def java_value(prefix: str, i: int) -> str:
    """Mirror of OdradekClient.value() (java/OdradekClient.java): the values the Java harness produces."""
    return f"{prefix}value-{i}-" + "abc" * (i % 20)


# ---------------------------------------------------------------------------------------------------
# Raw Kafka frames
# ---------------------------------------------------------------------------------------------------

API_VERSIONS = 18


def request_header_v1(api_key: int, api_version: int, correlation_id: int, client_id: str | None = "interop") -> bytes:
    """Request header v1: int16 api_key, int16 api_version, int32 correlation_id, nullable string client_id."""
    head = struct.pack(">hhi", api_key, api_version, correlation_id)
    if client_id is None:
        return head + struct.pack(">h", -1)
    cid = client_id.encode()
    return head + struct.pack(">h", len(cid)) + cid


def frame(payload: bytes) -> bytes:
    """Prefix `payload` with its int32 size."""
    return struct.pack(">i", len(payload)) + payload


def api_versions_request(correlation_id: int, version: int = 0, client_id: str | None = "interop") -> bytes:
    """A whole framed ApiVersions request. v0-v2 have an empty body; v3+ use the flexible header v2."""
    if version < 3:
        return frame(request_header_v1(API_VERSIONS, version, correlation_id, client_id))
    # Header v2 = header v1 + empty tagged fields; body: compact client_software_name/version + tags.
    body = bytes([len(b"interop") + 1]) + b"interop" + bytes([len(b"1") + 1]) + b"1" + b"\x00"
    return frame(request_header_v1(API_VERSIONS, version, correlation_id, client_id) + b"\x00" + body)


def resident_bytes(path: str | os.PathLike) -> int:
    """How much of a file is in the page cache (util-linux's fincore, part of every Debian system)."""
    out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", os.fspath(path)],
                         capture_output=True, text=True, check=True).stdout
    return int(out.strip())


# /proc/net/tcp's socket states
TCP_ESTABLISHED = "01"
TCP_LISTEN = "0A"


def process_tcp_ports(pid: int, state: str) -> list[tuple[int, int]]:
    """(local port, remote port) of the process's TCP sockets in `state` (TCP_LISTEN, TCP_ESTABLISHED): its
    socket inodes from /proc/PID/fd, looked up in /proc/PID/net/tcp and tcp6 (no tools needed)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = []
    for table in ("tcp", "tcp6"):
        with open(f"/proc/{pid}/net/{table}") as f:
            next(f)
            for line in f:
                fields = line.split()
                if fields[3] == state and fields[9] in inodes:
                    found.append((int(fields[1].rsplit(":", 1)[1], 16), int(fields[2].rsplit(":", 1)[1], 16)))
    return found


def connect(address: str, timeout: float = 10.0) -> socket.socket:
    host, port = address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def recv_exact(sock: socket.socket, n: int, timeout: float = 10.0) -> bytes:
    """Read exactly `n` bytes; raises EOFError if the peer closes first, socket.timeout on timeout."""
    deadline = time.monotonic() + timeout
    chunks: list[bytes] = []
    got = 0
    while got < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout(f"read {got} of {n} bytes within {timeout}s")
        sock.settimeout(left)
        chunk = sock.recv(min(n - got, 1 << 20))
        if not chunk:
            raise EOFError(f"connection closed after {got} of {n} bytes")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_frame(sock: socket.socket, timeout: float = 10.0, max_size: int = 64 << 20) -> bytes:
    """Read one size-prefixed response and return its payload (correlation id first)."""
    (size,) = struct.unpack(">i", recv_exact(sock, 4, timeout))
    assert 0 <= size <= max_size, f"implausible response size {size}"
    return recv_exact(sock, size, timeout)


def wait_closed(sock: socket.socket, timeout: float = 5.0) -> bool:
    """True if the peer closes (EOF or reset) within `timeout`; any bytes received are discarded."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        sock.settimeout(left)
        try:
            data = sock.recv(65536)
        except socket.timeout:
            return False
        except (ConnectionResetError, BrokenPipeError):
            return True
        if not data:
            return True


def parse_api_versions_v0(payload: bytes) -> tuple[int, int, dict[int, tuple[int, int]]]:
    """Parse an ApiVersions v0 response payload: (correlation_id, error_code, {api_key: (min, max)})."""
    correlation_id, error_code, count = struct.unpack_from(">ihi", payload, 0)
    assert 0 <= count <= 1000, f"implausible api count {count}"
    pos = 10
    ranges: dict[int, tuple[int, int]] = {}
    for _ in range(count):
        key, lo, hi = struct.unpack_from(">hhh", payload, pos)
        pos += 6
        ranges[key] = (lo, hi)
    return correlation_id, error_code, ranges


# ---------------------------------------------------------------------------------------------------
# Hand-built record batches and Produce / Metadata requests (for malformed-input tests)
# ---------------------------------------------------------------------------------------------------

PRODUCE = 0
FETCH = 1
METADATA = 3


def varint(n: int) -> bytes:
    """Zigzag varint, as used inside records."""
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        byte = z & 0x7F
        z >>= 7
        if z:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def encode_record(offset_delta: int, key: bytes | None, value: bytes | None, timestamp_delta: int = 0) -> bytes:
    def blob(b: bytes | None) -> bytes:
        return varint(-1) if b is None else varint(len(b)) + b

    body = b"\x00" + varint(timestamp_delta) + varint(offset_delta) + blob(key) + blob(value) + varint(0)
    return varint(len(body)) + body


def record_batch(
    values: list[bytes | None],
    base_offset: int = 0,
    base_timestamp: int | None = None,
    attributes: int = 0,
    records_blob: bytes | None = None,
    record_count: int | None = None,
    magic: int = 2,
    fix_crc: bool = True,
) -> bytes:
    """A RecordBatch (magic 2). `records_blob` replaces the encoded records (e.g. junk "compressed" data)."""
    from crc32c import crc32c

    if base_timestamp is None:
        base_timestamp = int(time.time() * 1000)
    if records_blob is None:
        records_blob = b"".join(encode_record(i, None, v) for i, v in enumerate(values))
    count = len(values) if record_count is None else record_count
    after_crc = struct.pack(
        ">hiqqqhii", attributes, max(count - 1, 0), base_timestamp, base_timestamp, -1, -1, -1, count
    ) + records_blob
    crc = crc32c(after_crc) if fix_crc else 0xDEADBEEF
    body = struct.pack(">ibI", 0, magic, crc) + after_crc  # partition_leader_epoch, magic, crc
    return struct.pack(">qi", base_offset, len(body)) + body


def produce_request_v3(
    correlation_id: int, topic: str, partition: int, records: bytes, acks: int = -1, timeout_ms: int = 10000
) -> bytes:
    """A whole framed Produce v3 request for one partition."""
    t = topic.encode()
    body = (
        struct.pack(">hhi", -1, acks, timeout_ms)  # transactional_id null, acks, timeout
        + struct.pack(">ih", 1, len(t)) + t
        + struct.pack(">iii", 1, partition, len(records)) + records
    )
    return frame(request_header_v1(PRODUCE, 3, correlation_id) + body)


def parse_produce_response_v3(payload: bytes) -> tuple[int, list[tuple[str, int, int, int]]]:
    """(correlation_id, [(topic, partition, error_code, base_offset)])."""
    (cid, ntopics) = struct.unpack_from(">ii", payload, 0)
    pos = 8
    out = []
    for _ in range(ntopics):
        (tlen,) = struct.unpack_from(">h", payload, pos)
        name = payload[pos + 2 : pos + 2 + tlen].decode()
        pos += 2 + tlen
        (nparts,) = struct.unpack_from(">i", payload, pos)
        pos += 4
        for _ in range(nparts):
            partition, error, base_offset, _log_append_time = struct.unpack_from(">ihqq", payload, pos)
            pos += 22
            out.append((name, partition, error, base_offset))
    return cid, out


def metadata_request_v1(correlation_id: int, topics: list[str] | None) -> bytes:
    """A whole framed Metadata v1 request (None = all topics); auto-creation follows the broker's setting."""
    if topics is None:
        body = struct.pack(">i", -1)
    else:
        body = struct.pack(">i", len(topics))
        for name in topics:
            raw = name.encode()
            body += struct.pack(">h", len(raw)) + raw
    return frame(request_header_v1(METADATA, 1, correlation_id) + body)


def parse_metadata_response_v1(payload: bytes) -> tuple[int, dict[str, tuple[int, int]]]:
    """(correlation_id, {topic: (error_code, partition_count)})."""
    pos = 0

    def take(fmt: str):
        nonlocal pos
        vals = struct.unpack_from(fmt, payload, pos)
        pos += struct.calcsize(fmt)
        return vals

    def string() -> str | None:
        nonlocal pos
        (n,) = take(">h")
        if n < 0:
            return None
        s = payload[pos : pos + n].decode()
        pos += n
        return s

    (cid,) = take(">i")
    (nbrokers,) = take(">i")
    for _ in range(nbrokers):
        take(">i")
        string()
        take(">i")
        string()
    take(">i")  # controller id
    (ntopics,) = take(">i")
    topics = {}
    for _ in range(ntopics):
        (err,) = take(">h")
        name = string()
        take(">b")
        (nparts,) = take(">i")
        for _ in range(nparts):
            take(">hii")
            (nrep,) = take(">i")
            take(">%di" % nrep)
            (nisr,) = take(">i")
            take(">%di" % nisr)
        topics[name or ""] = (err, nparts)
    return cid, topics


def fetch_request_v4(
    correlation_id: int, topic: str, partition: int, offset: int, max_bytes: int = 1 << 20, max_wait_ms: int = 0
) -> bytes:
    """A whole framed Fetch v4 request for one partition (read_uncommitted)."""
    t = topic.encode()
    body = (
        struct.pack(">iiiib", -1, max_wait_ms, 1, max_bytes, 0)
        + struct.pack(">ih", 1, len(t)) + t
        + struct.pack(">iiqi", 1, partition, offset, max_bytes)
    )
    return frame(request_header_v1(FETCH, 4, correlation_id) + body)
