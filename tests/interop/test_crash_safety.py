"""Crash safety: SIGKILL during acks=all produce, and damaged segment files found at start-up."""

from __future__ import annotations

import os
import struct
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("confluent_kafka")

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402

from .helpers import (  # noqa: E402
    assert_delivered,
    bounded,
    consume_messages,
    consumer_config,
    produce_messages,
    producer_config,
    wait_until,
)

DURABLE = {"log.flush.interval.messages": "1"}


def exact_producer_config(bootstrap: str) -> dict:
    """acks=all, no retries: every message is sent at most once, so duplicates are bugs."""
    return producer_config(
        bootstrap,
        **{
            "acks": "all",
            "retries": 0,
            "message.send.max.retries": 0,
            "message.timeout.ms": 5000,
            "request.timeout.ms": 5000,
            "linger.ms": 2,
            "batch.num.messages": 50,
            "reconnect.backoff.ms": 100,
            "reconnect.backoff.max.ms": 500,
        },
    )


def high_watermark(bootstrap: str, topic: str, partition: int = 0) -> int:
    consumer = Consumer(consumer_config(bootstrap))
    try:
        def query():
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=5, cached=False)
            return (low, high) if high >= 0 else None

        low, high = wait_until(query, timeout=30, message="watermarks")
        assert low == 0
        return high
    finally:
        consumer.close()


def read_everything(bootstrap: str, topic: str, partition: int = 0) -> list:
    """Every record of one partition, CRC-checked by the client."""
    high = high_watermark(bootstrap, topic, partition)
    got = consume_messages(
        bootstrap, topic, high, partition=partition, timeout=60, extra_wait=0.5, config={"check.crcs": True}
    )
    offsets = [m.offset() for m in got]
    assert offsets == list(range(high)), "offsets must be dense from 0 and strictly increasing"
    return got


@pytest.mark.timeout(120)
@pytest.mark.parametrize("codec,partitions,segment_bytes", [
    ("none", 1, None), ("lz4", 1, None), ("zstd", 3, None),
    ("none", 1, 1024),  # a roll every batch or two: crashes land while the flusher syncs rolled segments
])
def test_sigkill_during_acks_all_produce(broker_factory, topic_name, codec, partitions, segment_bytes):
    segments = {} if segment_bytes is None else {"log.segment.bytes": str(segment_bytes)}
    b = broker_factory({**DURABLE, **segments, "num.partitions": str(partitions)})
    producer = Producer({**exact_producer_config(b.bootstrap), "compression.type": codec})
    acked: dict[bytes, tuple[int, int]] = {}
    failed: dict[bytes, str] = {}
    lock = threading.Lock()

    def on_delivery(err, msg):
        with lock:
            if err is None:
                acked[msg.value()] = (msg.partition(), msg.offset())
            else:
                failed[msg.value()] = str(err)

    killed = threading.Event()
    stop_killer = threading.Event()

    def killer():
        # Crash once a good number of messages are acknowledged (or after a few seconds regardless).
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline and not stop_killer.is_set():
            with lock:
                if len(acked) >= 1500:
                    break
            time.sleep(0.005)
        b.kill()
        killed.set()

    # The topic exists (auto-created) before the race starts.
    md = wait_until(lambda: producer.list_topics(topic_name, timeout=5).topics[topic_name].partitions,
                    timeout=20, message="topic created")
    assert len(md) == partitions
    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    produced = 0
    try:
        for i in bounded(20_000, 10):
            if killed.is_set():
                break
            try:
                producer.produce(topic_name, value=b"msg-%06d" % i, partition=i % partitions, on_delivery=on_delivery)
                produced += 1
            except BufferError:
                producer.poll(0.05)
                continue
            if i % 50 == 0:
                producer.poll(0.002)
    finally:
        stop_killer.set()
        thread.join(15)
    assert killed.is_set(), "killer thread did not run"
    # Collect every outstanding delivery report (failures come at the latest at message.timeout.ms).
    for _ in bounded(100, 30):
        if producer.flush(0.5) == 0:
            break
    with lock:
        assert len(acked) + len(failed) == produced, (len(acked), len(failed), produced)
        acked_snapshot = dict(acked)
    del producer

    assert acked_snapshot, "nothing was acknowledged before the crash"
    print(f"produced {produced}, acked {len(acked_snapshot)}, failed {len(failed)}")
    b.start()
    stored: dict[bytes, tuple[int, int]] = {}
    ends = []
    for p in range(partitions):
        got = read_everything(b.bootstrap, topic_name, p)
        ends.append(len(got))
        for m in got:
            v = m.value()
            assert v not in stored, f"duplicate of {v!r} at {stored[v]} and {(p, m.offset())}"
            stored[v] = (p, m.offset())
            assert v.startswith(b"msg-") and int(v[4:]) % partitions == p
        # Per-partition order is produce order (one producer, no retries).
        values = [int(m.value()[4:]) for m in got]
        assert values == sorted(values), f"partition {p} out of produce order"
    lost = [v for v in acked_snapshot if v not in stored]
    assert not lost, f"{len(lost)} acknowledged messages lost, e.g. {lost[:5]}"
    moved = [(v, o, stored[v]) for v, o in acked_snapshot.items() if stored[v] != o]
    assert not moved, f"acknowledged messages at other offsets than acked: {moved[:5]}"

    # New produces continue right after what survived.
    for p in range(partitions):
        delivered = assert_delivered(produce_messages(b.bootstrap, topic_name, [{"value": b"after", "partition": p}]))
        assert delivered[0].offset() == ends[p]
    if segment_bytes is not None:
        part_dir = b.data_dir / f"{topic_name}-0"
        assert len(list(part_dir.glob("*.log"))) > 10, "the workload was meant to roll many segments"
        assert (part_dir / "recovery-point").exists()


@pytest.mark.timeout(90)
def test_sigkill_after_acks_keeps_everything(broker_factory, topic_name):
    b = broker_factory(DURABLE)
    specs = [{"value": b"m%d" % i, "key": b"k%d" % i, "partition": 0} for i in range(300)]
    delivered = assert_delivered(produce_messages(b.bootstrap, topic_name, specs, config={"acks": "all"}))
    assert [m.offset() for m in delivered] == list(range(300))
    b.kill()
    b.start()
    got = read_everything(b.bootstrap, topic_name)
    assert [(m.key(), m.value()) for m in got] == [(s["key"], s["value"]) for s in specs]
    b.kill()
    b.start()
    delivered = assert_delivered(produce_messages(b.bootstrap, topic_name, [{"value": b"next", "partition": 0}]))
    assert delivered[0].offset() == 300
    assert len(read_everything(b.bootstrap, topic_name)) == 301


# ---------------------------------------------------------------------------------------------------
# Damaged segment files
# ---------------------------------------------------------------------------------------------------

BATCH_COUNTS = [3, 3, 4]  # three batches: offsets 0-2, 3-5, 6-9


def last_segment(data_dir: Path, topic: str) -> Path:
    part_dir = data_dir / f"{topic}-0"
    segments = sorted(part_dir.glob("*.log"))
    assert segments, f"no *.log segment in {part_dir}: {list(part_dir.iterdir()) if part_dir.exists() else 'missing'}"
    return segments[-1]


def batch_spans(data: bytes) -> list[tuple[int, int, int, int]]:
    """(base_offset, last_offset, start, end) of each whole batch in a segment's bytes."""
    spans = []
    pos = 0
    while pos + 12 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        end = pos + 12 + length
        if length < 49 or end > len(data):
            break
        (last_delta,) = struct.unpack_from(">i", data, pos + 23)
        spans.append((base, base + last_delta, pos, end))
        pos = end
    return spans


def prepare_three_batches(broker_factory, topic: str, shutdown: str = "kill"):
    b = broker_factory(DURABLE)
    n = 0
    values = []
    for count in BATCH_COUNTS:
        specs = [{"value": b"v%d" % (n + i), "partition": 0} for i in range(count)]
        delivered = assert_delivered(produce_messages(b.bootstrap, topic, specs, config={"linger.ms": 200}))
        assert [m.offset() for m in delivered] == list(range(n, n + count))
        values += [s["value"] for s in specs]
        n += count
    # "kill": an unclean shutdown, the broker must run recovery; "stop": a clean one.
    b.kill() if shutdown == "kill" else b.stop()
    seg = last_segment(b.data_dir, topic)
    data = seg.read_bytes()
    spans = batch_spans(data)
    assert spans and spans[-1][1] == n - 1 and spans[-1][3] == len(data), (
        f"segment {seg.name} is not a plain sequence of record batches ending at offset {n - 1}: {spans}"
    )
    return b, seg, data, spans, values


def corrupt_copy_of_last_batch(data: bytes, spans) -> bytes:
    base, last, start, end = spans[-1]
    batch = bytearray(data[start:end])
    struct.pack_into(">q", batch, 0, last + 1)  # a plausible next base offset
    batch[-1] ^= 0xFF  # the CRC no longer matches
    return bytes(batch)


# Each damage returns (new segment bytes, number of records that must survive). Appended junk must cost
# nothing; a cut into or at the start of the last batch loses exactly that batch, whose base offset is then
# the number of survivors (the client decides how records are batched, so this is read from the spans).
DAMAGES = {
    "random-garbage": lambda data, spans: (data + os.urandom(333), spans[-1][1] + 1),
    "zero-fill": lambda data, spans: (data + bytes(4096), spans[-1][1] + 1),
    "partial-header": lambda data, spans: (data + struct.pack(">qi", spans[-1][1] + 1, 500) + b"\x00\x00", spans[-1][1] + 1),
    "huge-length": lambda data, spans: (data + struct.pack(">qi", spans[-1][1] + 1, 0x7FFFFFF0) + bytes(64), spans[-1][1] + 1),
    "bad-crc-batch": lambda data, spans: (data + corrupt_copy_of_last_batch(data, spans), spans[-1][1] + 1),
    "truncate-mid-batch": lambda data, spans: (data[:-5], spans[-1][0]),
    "truncate-mid-header": lambda data, spans: (data[: spans[-1][2] + 30], spans[-1][0]),
    "truncate-at-boundary": lambda data, spans: (data[: spans[-1][2]], spans[-1][0]),
}


@pytest.mark.timeout(90)
@pytest.mark.parametrize("damage", sorted(DAMAGES))
@pytest.mark.parametrize("shutdown", ["kill", "stop"])
def test_damaged_last_segment(broker_factory, topic_name, damage, shutdown):
    b, seg, data, spans, values = prepare_three_batches(broker_factory, topic_name, shutdown)
    new_data, survivors = DAMAGES[damage](data, spans)
    seg.write_bytes(new_data)

    b.start()
    got = read_everything(b.bootstrap, topic_name)
    assert [m.value() for m in got] == values[:survivors], f"spans {spans}; broker log: {b.log_tail(1500)}"
    # New produces continue at the right offset and read back whole.
    delivered = assert_delivered(
        produce_messages(b.bootstrap, topic_name, [{"value": b"new%d" % i, "partition": 0} for i in range(3)])
    )
    assert [m.offset() for m in delivered] == [survivors, survivors + 1, survivors + 2]
    got = read_everything(b.bootstrap, topic_name)
    assert [m.value() for m in got] == values[:survivors] + [b"new0", b"new1", b"new2"]
    # ...and survive one more restart.
    b.stop()
    b.start()
    got = read_everything(b.bootstrap, topic_name)
    assert [m.value() for m in got] == values[:survivors] + [b"new0", b"new1", b"new2"]


@pytest.mark.timeout(60)
def test_truncated_segment_rejects_fetch_past_end(broker_factory, topic_name):
    b, seg, data, spans, values = prepare_three_batches(broker_factory, topic_name)
    seg.write_bytes(data[:-5])
    b.start()
    consumer = Consumer(consumer_config(b.bootstrap, **{"auto.offset.reset": "error"}))
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=10)
        assert high == spans[-1][0], f"the damaged last batch {spans[-1]} should be gone; high watermark {high}"
        # An offset lost with the damaged batch (or, if that batch held one record, the first past the end).
        lost = spans[-1][1] if spans[-1][1] > high else high + 1
        consumer.assign([TopicPartition(topic_name, 0, lost)])
        error = None
        for _ in bounded(100, 20):
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is not None, f"served offset {msg.offset()} that was cut off"
            error = msg.error()
            break
        assert error is not None and error.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE)
    finally:
        consumer.close()
