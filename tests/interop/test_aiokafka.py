"""Interop tests: aiokafka against odradek by assign() without commits (its groups: test_groups_clients.py)."""

from __future__ import annotations

import asyncio
import time

import pytest

aiokafka = pytest.importorskip("aiokafka")
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition  # noqa: E402
from aiokafka import codec as aio_codec  # noqa: E402

BASE_TS = 1_710_000_000_000
CONSUME_TIMEOUT_S = 30.0

CODEC_AVAILABLE = {
    "gzip": aio_codec.has_gzip(),
    "snappy": aio_codec.has_snappy(),
    "lz4": aio_codec.has_lz4(),
    "zstd": aio_codec.has_zstd(),
}


def run(coro, timeout: float = 90.0):
    return asyncio.run(asyncio.wait_for(coro, timeout))


def make_producer(bootstrap: str, **kw) -> AIOKafkaProducer:
    cfg = dict(bootstrap_servers=bootstrap, enable_idempotence=False, acks="all",
               request_timeout_ms=15000, linger_ms=10)
    cfg.update(kw)
    return AIOKafkaProducer(**cfg)


def make_consumer(bootstrap: str, **kw) -> AIOKafkaConsumer:
    cfg = dict(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
               auto_offset_reset="earliest", request_timeout_ms=15000, fetch_max_wait_ms=200)
    cfg.update(kw)
    return AIOKafkaConsumer(**cfg)


async def consume_all(bootstrap: str, topic: str, n: int, partition: int = 0,
                      timeout_s: float = CONSUME_TIMEOUT_S, **kw) -> list:
    """Assign + seek to beginning + getmany() until n records, a time bound or a poll bound."""
    consumer = make_consumer(bootstrap, **kw)
    await consumer.start()
    out: list = []
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        deadline = time.monotonic() + timeout_s
        polls = 0
        while len(out) < n and time.monotonic() < deadline and polls < 500:
            polls += 1
            batch = await consumer.getmany(tp, timeout_ms=500)
            out.extend(batch.get(tp, []))
    finally:
        await consumer.stop()
    return out


def records(n: int, prefix: str) -> list[dict]:
    return [
        {
            "key": f"{prefix}-k{i}".encode(),
            "value": (f"{prefix}-v{i}-" + "q" * (i % 23)).encode(),
            "headers": [("i", str(i).encode())],
            "timestamp_ms": BASE_TS + i * 10,
        }
        for i in range(n)
    ]


def check(got: list, expected: list[dict], first_offset: int = 0) -> None:
    assert len(got) == len(expected), f"expected {len(expected)}, got {len(got)}"
    for i, (r, e) in enumerate(zip(got, expected)):
        assert r.offset == first_offset + i, f"record {i}: offset {r.offset}"
        assert r.key == e["key"], f"record {i}: key {r.key!r}"
        assert r.value == e["value"], f"record {i}: value {r.value!r}"
        assert r.timestamp == e["timestamp_ms"], f"record {i}: timestamp {r.timestamp}"
        assert list(r.headers) == e["headers"], f"record {i}: headers {r.headers!r}"


@pytest.mark.timeout(120)
def test_send_and_wait_roundtrip(broker, topic_name):
    recs = records(25, "sw")

    async def scenario():
        producer = make_producer(broker.bootstrap)
        await producer.start()
        try:
            offsets = []
            for r in recs:
                md = await producer.send_and_wait(topic_name, value=r["value"], key=r["key"], partition=0,
                                                  timestamp_ms=r["timestamp_ms"], headers=r["headers"])
                offsets.append(md.offset)
        finally:
            await producer.stop()
        return offsets, await consume_all(broker.bootstrap, topic_name, len(recs))

    offsets, got = run(scenario())
    assert offsets == list(range(len(recs)))
    check(got, recs)


@pytest.mark.timeout(120)
def test_explicit_batches(broker, topic_name):
    """send_batch(): several client-built batches land back to back with contiguous offsets."""
    recs = records(60, "bt")

    async def scenario():
        producer = make_producer(broker.bootstrap)
        await producer.start()
        bases = []
        try:
            i = 0
            for _ in range(20):  # bounded: each batch holds at least one record
                if i >= len(recs):
                    break
                batch = producer.create_batch()
                start = i
                while i < len(recs) and i - start < 25:
                    r = recs[i]
                    md = batch.append(key=r["key"], value=r["value"], timestamp=r["timestamp_ms"],
                                      headers=r["headers"])
                    if md is None:
                        break
                    i += 1
                assert i > start, "batch accepted no record"
                batch.close()
                fut = await producer.send_batch(batch, topic_name, partition=0)
                bases.append((start, (await fut).offset))
            assert i == len(recs)
        finally:
            await producer.stop()
        return bases, await consume_all(broker.bootstrap, topic_name, len(recs))

    bases, got = run(scenario())
    assert [base for _, base in bases] == [start for start, _ in bases]
    check(got, recs)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_roundtrip(broker, topic_name, codec):
    if not CODEC_AVAILABLE[codec]:
        pytest.skip(f"aiokafka has no {codec} support in this venv")
    recs = records(150, f"z{codec}")

    async def scenario():
        producer = make_producer(broker.bootstrap, compression_type=codec, linger_ms=50)
        await producer.start()
        try:
            futs = [
                await producer.send(topic_name, value=r["value"], key=r["key"], partition=0,
                                    timestamp_ms=r["timestamp_ms"], headers=r["headers"])
                for r in recs
            ]
            offsets = [(await f).offset for f in futs]
        finally:
            await producer.stop()
        return offsets, await consume_all(broker.bootstrap, topic_name, len(recs))

    offsets, got = run(scenario())
    assert offsets == list(range(len(recs)))
    check(got, recs)


@pytest.mark.timeout(10)
def test_gzip_is_available():
    assert CODEC_AVAILABLE["gzip"]


@pytest.mark.timeout(120)
def test_offsets_for_times_beginning_end(broker, topic_name):
    recs = records(20, "ot")  # timestamps BASE_TS, BASE_TS+10, ..., BASE_TS+190

    async def scenario():
        producer = make_producer(broker.bootstrap, compression_type="gzip")
        await producer.start()
        try:
            for r in recs[:10]:
                await producer.send_and_wait(topic_name, value=r["value"], key=r["key"], partition=0,
                                             timestamp_ms=r["timestamp_ms"], headers=r["headers"])
            # A second, compressed multi-record batch.
            futs = [await producer.send(topic_name, value=r["value"], key=r["key"], partition=0,
                                        timestamp_ms=r["timestamp_ms"], headers=r["headers"])
                    for r in recs[10:]]
            for f in futs:
                await f
        finally:
            await producer.stop()

        consumer = make_consumer(broker.bootstrap)
        await consumer.start()
        try:
            tp = TopicPartition(topic_name, 0)
            consumer.assign([tp])
            begin = await consumer.beginning_offsets([tp])
            end = await consumer.end_offsets([tp])
            probes = {
                "exact_first": BASE_TS,
                "before_all": BASE_TS - 5000,
                "exact_mid": BASE_TS + 50,
                "between": BASE_TS + 55,
                "inside_second_batch": BASE_TS + 125,
                "last": BASE_TS + 190,
                "after_all": BASE_TS + 10_000,
            }
            found = {}
            for name, ts in probes.items():
                found[name] = (await consumer.offsets_for_times({tp: ts}))[tp]
        finally:
            await consumer.stop()
        return tp, begin, end, found

    tp, begin, end, found = run(scenario())
    assert begin == {tp: 0}
    assert end == {tp: 20}

    def off(name):
        v = found[name]
        return None if v is None else (v.offset, v.timestamp)

    assert off("exact_first") == (0, BASE_TS)
    assert off("before_all") == (0, BASE_TS)
    assert off("exact_mid") == (5, BASE_TS + 50)
    assert off("between") == (6, BASE_TS + 60)
    assert off("inside_second_batch") == (13, BASE_TS + 130)
    assert off("last") == (19, BASE_TS + 190)
    assert off("after_all") is None


@pytest.mark.timeout(120)
def test_end_offsets_empty_topic_and_seek(broker, topic_name):
    """Fresh (auto-created) topic: beginning == end == 0; after producing, seek() into the middle works."""
    recs = records(10, "sk")

    async def scenario():
        producer = make_producer(broker.bootstrap)
        await producer.start()
        consumer = make_consumer(broker.bootstrap)
        await consumer.start()
        try:
            # Trigger auto-creation through producer metadata.
            assert await producer.partitions_for(topic_name) == {0}
            tp = TopicPartition(topic_name, 0)
            consumer.assign([tp])
            empty = (await consumer.beginning_offsets([tp]), await consumer.end_offsets([tp]))
            for r in recs:
                await producer.send_and_wait(topic_name, value=r["value"], key=r["key"], partition=0,
                                             timestamp_ms=r["timestamp_ms"], headers=r["headers"])
            consumer.seek(tp, 7)
            got: list = []
            deadline = time.monotonic() + CONSUME_TIMEOUT_S
            for _ in range(200):
                if len(got) >= 3 or time.monotonic() > deadline:
                    break
                batch = await consumer.getmany(tp, timeout_ms=500)
                got.extend(batch.get(tp, []))
            end = await consumer.end_offsets([tp])
        finally:
            await consumer.stop()
            await producer.stop()
        return tp, empty, got, end

    tp, empty, got, end = run(scenario())
    assert empty == ({tp: 0}, {tp: 0})
    check(got, recs[7:], first_offset=7)
    assert end == {tp: 10}


@pytest.mark.timeout(120)
def test_oversized_batch_with_tiny_fetch_size(broker, topic_name):
    """A batch larger than max_partition_fetch_bytes is still delivered (KIP-74), so the consumer progresses."""
    recs = records(80, "ov")

    async def scenario():
        producer = make_producer(broker.bootstrap, linger_ms=100)
        await producer.start()
        try:
            futs = [await producer.send(topic_name, value=r["value"], key=r["key"], partition=0,
                                        timestamp_ms=r["timestamp_ms"], headers=r["headers"]) for r in recs]
            offsets = [(await f).offset for f in futs]
        finally:
            await producer.stop()
        got = await consume_all(broker.bootstrap, topic_name, len(recs),
                                max_partition_fetch_bytes=256, fetch_max_bytes=256)
        return offsets, got

    offsets, got = run(scenario())
    assert offsets == list(range(len(recs)))
    check(got, recs)
