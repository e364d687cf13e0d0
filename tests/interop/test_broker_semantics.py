"""Broker behaviours driven end to end: retention, segment rolls, LogAppendTime topics, timestamp lookups,
fetch long-poll wake-ups and the advertised ApiVersions ranges."""

from __future__ import annotations

import socket
import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.broker.handlers.k18_api_versions import metadata_version_level
from odradek.protocol import codec
from tests.interop.helpers import (
    assert_delivered,
    connect,
    consume_messages,
    consumer_config,
    produce_messages,
    producer_config,
    resident_bytes,
    read_frame,
    wait_until,
)


def create_topic(bootstrap: str, name: str, partitions: int = 1, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=config or {})], operation_timeout=10)
    futures[name].result(timeout=15)


def watermarks(bootstrap: str, topic: str, partition: int = 0) -> tuple[int, int]:
    consumer = Consumer(consumer_config(bootstrap))
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
    finally:
        consumer.close()


def request(bootstrap: str, api_key: int, version: int, body: dict) -> dict:
    """One request over a raw socket, encoded and decoded with our codec."""
    with connect(bootstrap) as sock:
        sock.sendall(codec.encode_request(api_key, version, 1, "semantics-test", body))
        correlation_id, response = codec.decode_response(api_key, version, read_frame(sock))
        assert correlation_id == 1
        return response


@pytest.mark.timeout(60)
def test_retention_by_time_and_segment_roll(broker_factory, topic_name):
    b = broker_factory({"log.retention.check.interval.ms": "200"})
    create_topic(b.bootstrap, topic_name, config={"segment.bytes": "1024", "retention.ms": "1000"})
    old_ts = int(time.time() * 1000) - 60_000
    # Old timestamps put the first segments past retention at once; the active segment always stays.
    assert_delivered(produce_messages(b.bootstrap, topic_name, [
        {"value": b"x" * 300, "partition": 0, "timestamp": old_ts} for _ in range(12)
    ], config={"linger.ms": 0, "batch.num.messages": 1}))
    low, high = watermarks(b.bootstrap, topic_name)
    assert high == 12
    low = wait_until(lambda: watermarks(b.bootstrap, topic_name)[0] or None, timeout=20, message="log start to advance")
    assert 0 < low < 12
    # The log start moves at once; the flusher thread removes the segment files below it a moment later.
    directory = b.data_dir / f"{topic_name}-0"
    oldest = wait_until(lambda: [int(p.stem) for p in sorted(directory.glob("*.log"))][:1] == [low] or None,
                        timeout=20, message=f"segment files below the log start {low} to be removed")
    assert oldest
    got = consume_messages(b.bootstrap, topic_name, 12 - low, offset=low)
    assert [m.offset() for m in got] == list(range(low, 12))


@pytest.mark.timeout(60)
def test_page_cache_drop_behind(broker_factory, topic_name):
    # every append flushed, so each drop finds the bytes behind the window written back and can let them go
    b = broker_factory({"log.page.cache.drop.behind.bytes": str(1 << 20), "log.flush.interval.messages": "1"})
    create_topic(b.bootstrap, topic_name, partitions=1)
    values = [bytes([i]) * (60 << 10) for i in range(128)]  # about 7.5 MiB
    assert_delivered(produce_messages(b.bootstrap, topic_name, [{"value": v, "partition": 0} for v in values],
                                      config={"linger.ms": 0, "batch.num.messages": 1}))
    segment = next((b.data_dir / f"{topic_name}-0").glob("*.log"))
    wait_until(lambda: resident_bytes(segment) <= 2 << 20, timeout=20,
               message=f"the page cache to hold at most 2 MiB of {segment.name}")
    assert [m.value() for m in consume_messages(b.bootstrap, topic_name, 128)] == values


@pytest.mark.timeout(60)
def test_segment_roll_by_time(broker_factory, topic_name):
    b = broker_factory()
    create_topic(b.bootstrap, topic_name, config={"segment.ms": "300"})
    for i in range(3):
        assert_delivered(produce_messages(b.bootstrap, topic_name, [{"value": b"v%d" % i, "partition": 0}]))
        time.sleep(0.5)
    segments = sorted((b.data_dir / f"{topic_name}-0").glob("*.log"))
    assert len(segments) >= 2
    got = consume_messages(b.bootstrap, topic_name, 3)
    assert [m.value() for m in got] == [b"v0", b"v1", b"v2"]


@pytest.mark.timeout(60)
def test_log_append_time_topic(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, config={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    assert_delivered(produce_messages(broker.bootstrap, topic_name, [
        {"value": b"a", "partition": 0, "timestamp": 1000}, {"value": b"b", "partition": 0, "timestamp": 2000},
    ]))
    after = int(time.time() * 1000)
    got = consume_messages(broker.bootstrap, topic_name, 2)
    for m in got:
        ts_type, ts = m.timestamp()
        assert ts_type == 2  # TIMESTAMP_LOG_APPEND_TIME
        assert before - 5 <= ts <= after + 5


@pytest.mark.timeout(60)
def test_list_offsets_max_timestamp_and_by_time(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    stamps = [5000, 9000, 7000, 9000, 6000]
    assert_delivered(produce_messages(broker.bootstrap, topic_name, [
        {"value": b"%d" % i, "partition": 0, "timestamp": ts} for i, ts in enumerate(stamps)
    ]))
    response = request(broker.bootstrap, 2, 7, {"replica_id": -1, "topics": [{"name": topic_name, "partitions": [
        {"partition_index": 0, "timestamp": -3}, ]}]})
    part = response["topics"][0]["partitions"][0]
    assert (part["error_code"], part["offset"], part["timestamp"]) == (0, 1, 9000)
    response = request(broker.bootstrap, 2, 1, {"replica_id": -1, "topics": [{"name": topic_name, "partitions": [
        {"partition_index": 0, "timestamp": 6500}]}]})
    part = response["topics"][0]["partitions"][0]
    assert (part["offset"], part["timestamp"]) == (1, 9000)
    response = request(broker.bootstrap, 2, 0, {"replica_id": -1, "topics": [{"name": topic_name, "partitions": [
        {"partition_index": 0, "timestamp": -1, "max_num_offsets": 1}]}]})
    assert response["topics"][0]["partitions"][0]["old_style_offsets"] == [5]


@pytest.mark.timeout(60)
def test_fetch_long_poll_is_woken_by_produce(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    consumer = Consumer(consumer_config(broker.bootstrap, **{"fetch.wait.max.ms": 10000}))
    consumer.assign([TopicPartition(topic_name, 0, 0)])
    received: list[bytes] = []

    def consume() -> None:
        deadline = time.monotonic() + 20
        while not received and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                received.append(msg.value())

    thread = threading.Thread(target=consume)
    thread.start()
    time.sleep(1.0)  # let the consumer park a fetch on the empty partition
    producer = Producer(producer_config(broker.bootstrap))
    producer.produce(topic_name, b"wake", partition=0)
    producer.flush(10)
    thread.join(25)
    consumer.close()
    assert received == [b"wake"]


@pytest.mark.timeout(30)
def test_fetch_v13_by_topic_id_and_unknown_id(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    assert_delivered(produce_messages(broker.bootstrap, topic_name, [{"value": b"by-id", "partition": 0}]))
    meta = request(broker.bootstrap, 3, 12, {"topics": [{"name": topic_name}]})
    topic_id = meta["topics"][0]["topic_id"]
    assert topic_id != bytes(16)
    fetch = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "topics": [
        {"topic_id": topic_id, "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]},
        {"topic_id": b"\x01" * 16, "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]},
    ]}
    response = request(broker.bootstrap, 1, 13, fetch)
    known, unknown = response["responses"]
    assert known["topic_id"] == topic_id
    assert known["partitions"][0]["error_code"] == 0 and len(known["partitions"][0]["records"]) > 0
    assert unknown["partitions"][0]["error_code"] == 100  # UNKNOWN_TOPIC_ID


@pytest.mark.timeout(30)
def test_api_versions_advertise_implemented_ranges(broker):
    response = request(broker.bootstrap, 18, 3, {"client_software_name": "odradek-test", "client_software_version": "1"})
    ranges = {k["api_key"]: (k["min_version"], k["max_version"]) for k in response["api_keys"]}
    assert ranges[0] == (0, 13) and ranges[1] == (0, 17) and ranges[2] == (0, 11) and ranges[3] == (0, 13)
    assert ranges[18] == (0, 4) and ranges[19] == (0, 7) and ranges[20] == (0, 6)
    # transactions v2 (KIP-890) and the consumer group protocol (KIP-848): the features current clients look for;
    # share groups (KIP-932) at share.version 1; metadata.version at the level of the request versions advertised
    # (4.0-IV2, 24, with Fetch 17 and ListOffsets 9: k18_api_versions.py); nothing KRaft-only, no ELR, no streams
    mv = metadata_version_level({key: high for key, (_, high) in ranges.items()})
    assert mv >= 24
    assert response["finalized_features"] == [
        {"name": "group.version", "min_version_level": 1, "max_version_level": 1},
        {"name": "metadata.version", "min_version_level": mv, "max_version_level": mv},
        {"name": "share.version", "min_version_level": 1, "max_version_level": 1},
        {"name": "streams.version", "min_version_level": 1, "max_version_level": 1},
        {"name": "transaction.version", "min_version_level": 2, "max_version_level": 2}]
    assert {f["name"]: (f["min_version"], f["max_version"]) for f in response["supported_features"]} == {
        "group.version": (0, 1), "metadata.version": (7, mv), "share.version": (0, 1), "streams.version": (0, 1),
        "transaction.version": (0, 2)}
    assert ranges[68] == (0, 1) and ranges[69] == (0, 1)
    assert 71 not in ranges and 72 not in ranges  # telemetry: answered, not advertised (no plugin), as Kafka
    # librdkafka's feature detection needs these minimums at 0 (see docs/compatibility.md).
    for key in (0, 1, 2, 10, 11, 12, 13, 14, 22):
        if key in ranges:
            assert ranges[key][0] == 0, key


@pytest.mark.timeout(30)
def test_create_topics_validate_only_creates_nothing(broker, topic_name):
    response = request(broker.bootstrap, 19, 5, {"topics": [
        {"name": topic_name, "num_partitions": 3, "replication_factor": 1,
         "configs": [{"name": "retention.ms", "value": "1234"}]}], "validate_only": True, "timeout_ms": 5000})
    result = response["topics"][0]
    assert result["error_code"] == 0 and result["num_partitions"] == 3
    assert {c["name"]: c["value"] for c in result["configs"]}["retention.ms"] == "1234"
    meta = request(broker.bootstrap, 3, 4, {"topics": [{"name": topic_name}], "allow_auto_topic_creation": False})
    assert meta["topics"][0]["error_code"] == 3  # UNKNOWN_TOPIC_OR_PARTITION
    response = request(broker.bootstrap, 19, 5, {"topics": [
        {"name": topic_name, "num_partitions": 1, "replication_factor": 1,
         "configs": [{"name": "no.such.config", "value": "1"}]}], "timeout_ms": 5000})
    assert response["topics"][0]["error_code"] == 40  # INVALID_CONFIG


@pytest.mark.timeout(30)
def test_offset_for_leader_epoch(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    assert_delivered(produce_messages(broker.bootstrap, topic_name, [{"value": b"e", "partition": 0}] * 3))
    body = {"replica_id": -1, "topics": [{"topic": topic_name, "partitions": [
        {"partition": 0, "current_leader_epoch": 0, "leader_epoch": 0},
        {"partition": 0, "current_leader_epoch": 0, "leader_epoch": 5},
        {"partition": 0, "current_leader_epoch": 3, "leader_epoch": 0},
        {"partition": 9, "current_leader_epoch": -1, "leader_epoch": 0},
    ]}]}
    parts = request(broker.bootstrap, 23, 4, body)["topics"][0]["partitions"]
    assert [(p["error_code"], p["leader_epoch"], p["end_offset"]) for p in parts] == [
        (0, 0, 3), (0, -1, -1), (75, -1, -1), (3, -1, -1)]


@pytest.mark.timeout(60)
def test_broker_fetch_max_bytes_caps_responses(broker_factory, topic_name):
    b = broker_factory({"fetch.max.bytes": "50000"})
    create_topic(b.bootstrap, topic_name)
    big = b"b" * 80_000  # one batch larger than the broker's cap
    assert_delivered(produce_messages(b.bootstrap, topic_name, [{"value": big, "partition": 0}]))
    assert_delivered(produce_messages(b.bootstrap, topic_name, [{"value": b"s" * 10_000, "partition": 0}] * 12,
                                      config={"linger.ms": 0, "batch.num.messages": 1}))

    def fetch(offset: int) -> bytes:
        body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 10 << 20, "topics": [
            {"topic": topic_name, "partitions": [{"partition": 0, "fetch_offset": offset, "partition_max_bytes": 10 << 20}]}]}
        return bytes(request(b.bootstrap, 1, 11, body)["responses"][0]["partitions"][0]["records"])

    first = fetch(0)
    assert 80_000 < len(first) < 90_000  # the oversized first batch alone, whatever the cap
    rest = fetch(1)
    assert 0 < len(rest) <= 50_000  # several small batches, but never past the cap
    # A consumer asking for far more still reads everything, just in more round trips.
    assert [len(m.value()) for m in consume_messages(b.bootstrap, topic_name, 13)] == [80_000] + [10_000] * 12


@pytest.mark.timeout(120)
@pytest.mark.parametrize("event_loop", ["asyncio", "uvloop"])
def test_large_fetches_across_segments_come_back_byte_for_byte(broker_factory, topic_name, event_loop):
    # Spans of 256 KiB and more go out with sendfile, on either event loop; one response here crosses
    # several segments, so it interleaves response bytes, file regions and small in-memory spans. Every
    # client must read it whole, read_committed (librdkafka's default) or not.
    from kafka import KafkaConsumer, TopicPartition as KpTopicPartition

    broker = broker_factory(args=["--event-loop", event_loop])
    create_topic(broker.bootstrap, topic_name, config={"segment.bytes": str(600_000)})
    values = [(b"%06d" % i) * 250 for i in range(3000)]  # 1.5 KB each, every record different: 4.5 MB
    assert_delivered(produce_messages(broker.bootstrap, topic_name, [{"value": v, "partition": 0} for v in values],
                                      config={"linger.ms": 20}))
    assert len(list((broker.data_dir / f"{topic_name}-0").glob("*.log"))) >= 4
    big_fetches = {"fetch.max.bytes": 64 << 20, "max.partition.fetch.bytes": 16 << 20,
                   "receive.message.max.bytes": 100 << 20}
    for isolation in ("read_uncommitted", "read_committed"):
        got = consume_messages(broker.bootstrap, topic_name, len(values),
                               config={**big_fetches, "isolation.level": isolation})
        assert [m.value() for m in got] == values, isolation
        assert [m.offset() for m in got] == list(range(len(values)))

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False,
                             fetch_max_bytes=16 << 20, max_partition_fetch_bytes=8 << 20)
    try:
        tp = KpTopicPartition(topic_name, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        seen = []
        deadline = time.monotonic() + 60
        while len(seen) < len(values) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                seen.extend(r.value for r in records)
        assert seen == values
    finally:
        consumer.close()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("event_loop", ["asyncio", "uvloop"])
def test_pipelined_large_fetches_reach_a_slow_reader_whole_and_in_order(broker_factory, topic_name, event_loop):
    # Large fetch responses are written to the socket directly rather than through the transport. With
    # requests pipelined and a reader too slow to keep up, the broker must wait for the socket again and
    # again, and every response must still arrive whole, in request order, between the transport's own.
    from kafka.record.memory_records import MemoryRecords

    broker = broker_factory(args=["--event-loop", event_loop])
    create_topic(broker.bootstrap, topic_name, config={"segment.bytes": str(600_000)})
    values = [(b"%06d" % i) * 250 for i in range(3000)]
    assert_delivered(produce_messages(broker.bootstrap, topic_name, [{"value": v, "partition": 0} for v in values],
                                      config={"linger.ms": 20}))
    starts = [0, 700, 1400, 2100, 2999]
    requests = []
    for i, start in enumerate(starts):
        requests.append(codec.encode_request(18, 0, 2 * i, "slow-reader", {}))
        requests.append(codec.encode_request(1, 4, 2 * i + 1, "slow-reader", {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 16 << 20, "isolation_level": 0,
            "topics": [{"topic": topic_name, "partitions": [
                {"partition": 0, "fetch_offset": start, "partition_max_bytes": 8 << 20}]}]}))
    with connect(broker.bootstrap) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 << 10)
        sock.sendall(b"".join(requests))
        time.sleep(1.0)  # the broker fills the socket and has to wait for room
        for i, start in enumerate(starts):
            cid, versions = codec.decode_response(18, 0, read_frame(sock, timeout=30))
            assert (cid, versions["error_code"]) == (2 * i, 0)
            cid, fetched = codec.decode_response(1, 4, read_frame(sock, timeout=30))
            assert cid == 2 * i + 1
            partition = fetched["responses"][0]["partitions"][0]
            assert partition["error_code"] == 0 and partition["high_watermark"] == len(values)
            records, offsets, got = MemoryRecords(partition["records"]), [], []
            while (batch := records.next_batch()) is not None:
                assert batch.validate_crc()
                for record in batch:
                    offsets.append(record.offset)
                    got.append(record.value)
            first = offsets.index(start)  # a fetch starts at the batch holding its offset
            end = offsets[-1] + 1  # and stops at the broker's fetch.max.bytes (4 MiB), a whole batch at a time
            assert end == len(values) or end - start > 1000
            assert offsets[first:] == list(range(start, end))
            assert got[first:] == values[start:end]
