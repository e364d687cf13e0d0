"""confluent-kafka (librdkafka) against a real odradek broker: produce, consume, admin, offsets."""

from __future__ import annotations

import os
import time

import pytest

pytest.importorskip("confluent_kafka")

from confluent_kafka import (  # noqa: E402
    OFFSET_BEGINNING,
    OFFSET_END,
    TIMESTAMP_CREATE_TIME,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from .helpers import (  # noqa: E402
    assert_delivered,
    bounded,
    consume_messages,
    consumer_config,
    flush_fully,
    poll_n,
    produce_messages,
    producer_config,
    roundtrip,
    wait_until,
)

# Explicit timestamps an hour in the past: old enough to be distinct from "now", recent enough that
# time-based retention (7 days by default) never deletes them while a test runs.
BASE_TS = (int(time.time()) - 3600) * 1000


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4", "socket.timeout.ms": 10000})


def create_topic_error(client: AdminClient, new_topic: NewTopic, **kwargs) -> KafkaError | None:
    """Create one topic and return the KafkaError it failed with, or None on success."""
    futures = client.create_topics([new_topic], operation_timeout=10, request_timeout=15, **kwargs)
    try:
        futures[new_topic.topic].result(timeout=20)
    except KafkaException as exc:
        return exc.args[0]
    return None


def all_topics(client: AdminClient) -> dict:
    # No topic argument: a Metadata request for all topics, which never auto-creates one.
    return client.list_topics(timeout=10).topics


def sample_messages(partition: int | None = 0) -> list[dict]:
    """Keys, values, headers and timestamps covering the awkward cases."""
    blob = bytes(range(256)) * 8
    compressible = b"odradek " * 2000
    cases = [
        dict(key=b"k0", value=b"v0", headers=[("h", b"1")]),
        dict(key=None, value=b"no key"),
        dict(key=b"null value", value=None),
        dict(key=b"", value=b""),
        dict(key=None, value=None),
        dict(key=b"dup", value=b"dup headers", headers=[("h", b"1"), ("h", b"2"), ("h", b"1")]),
        dict(key=b"nullhdr", value=b"none header value", headers=[("n", None), ("e", b""), ("", b"empty name")]),
        dict(key=blob, value=blob, headers=[("bin", blob)]),
        dict(key=b"big", value=compressible),
        dict(key="unicode-\u00e9\u4e2d".encode(), value="\u2603 snow".encode(), headers=[("\u00fcml", "\u00e4".encode())]),
    ]
    cases += [dict(key=b"seq-%d" % i, value=b"value-%d" % i) for i in range(40)]
    out = []
    for i, c in enumerate(cases):
        c = dict(c)
        c["timestamp"] = BASE_TS + 1000 * i + (i % 3)
        if partition is not None:
            c["partition"] = partition
        out.append(c)
    return out


def headers_of(spec: dict) -> list | None:
    h = spec.get("headers")
    return list(h) if h else None


def assert_same(spec: dict, msg, offset: int) -> None:
    assert msg.offset() == offset
    assert msg.key() == spec.get("key"), f"offset {offset}: key"
    assert msg.value() == spec.get("value"), f"offset {offset}: value"
    got_headers = msg.headers()
    assert (list(got_headers) if got_headers else None) == headers_of(spec), f"offset {offset}: headers"
    assert msg.timestamp() == (TIMESTAMP_CREATE_TIME, spec["timestamp"]), f"offset {offset}: timestamp"


@pytest.mark.timeout(90)
@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_produce_consume_roundtrip(broker, topic_name, compression):
    specs = sample_messages()
    reports = produce_messages(
        broker.bootstrap, topic_name, specs, config={"compression.type": compression, "linger.ms": 50}
    )
    delivered = assert_delivered(reports)
    assert [m.offset() for m in delivered] == list(range(len(specs)))
    assert all(m.partition() == 0 for m in delivered)

    got = consume_messages(broker.bootstrap, topic_name, len(specs), extra_wait=0.5, config={"check.crcs": True})
    assert len(got) == len(specs), "unexpected extra messages"
    for i, (spec, msg) in enumerate(zip(specs, got)):
        assert msg.topic() == topic_name and msg.partition() == 0
        assert_same(spec, msg, i)


@pytest.mark.timeout(60)
def test_consume_from_middle_offset(broker, topic_name):
    specs = sample_messages()
    assert_delivered(produce_messages(broker.bootstrap, topic_name, specs, config={"compression.type": "lz4"}))
    # Start inside a batch: the broker returns whole batches, the client must skip the earlier records.
    start = 23
    got = consume_messages(broker.bootstrap, topic_name, len(specs) - start, offset=start, extra_wait=0.3)
    assert len(got) == len(specs) - start
    for i, msg in enumerate(got):
        assert_same(specs[start + i], msg, start + i)


@pytest.mark.timeout(60)
def test_multi_partition_topic(broker, topic_name):
    client = admin(broker.bootstrap)
    assert create_topic_error(client, NewTopic(topic_name, 3, 1)) is None
    md = wait_until(lambda: all_topics(client).get(topic_name), message="topic in metadata")
    assert sorted(md.partitions) == [0, 1, 2]
    assert md.error is None

    specs = []
    for p in range(3):
        for i in range(5 + p):
            specs.append(dict(partition=p, key=b"p%d" % p, value=b"p%d-m%d" % (p, i), timestamp=BASE_TS + i))
    delivered = assert_delivered(produce_messages(broker.bootstrap, topic_name, specs))
    for p in range(3):
        offsets = [m.offset() for m in delivered if m.partition() == p]
        assert offsets == list(range(5 + p)), f"partition {p}"

    for p in range(3):
        want = [s for s in specs if s["partition"] == p]
        got = consume_messages(broker.bootstrap, topic_name, len(want), partition=p, extra_wait=0.3)
        assert [(m.partition(), m.offset(), m.value()) for m in got] == [
            (p, i, s["value"]) for i, s in enumerate(want)
        ]


@pytest.mark.timeout(60)
def test_admin_create_validate_only(broker, topic_name):
    client = admin(broker.bootstrap)
    assert create_topic_error(client, NewTopic(topic_name, 2, 1), validate_only=True) is None
    time.sleep(0.5)
    assert topic_name not in all_topics(client), "validate_only must not create the topic"
    # ...and a real create afterwards still succeeds.
    assert create_topic_error(client, NewTopic(topic_name, 2, 1)) is None
    md = wait_until(lambda: all_topics(client).get(topic_name), message="topic in metadata")
    assert len(md.partitions) == 2


@pytest.mark.timeout(60)
def test_admin_create_with_configs(broker, topic_name):
    client = admin(broker.bootstrap)
    nt = NewTopic(topic_name, 1, 1, config={"retention.ms": "3600000", "cleanup.policy": "delete"})
    assert create_topic_error(client, nt) is None
    wait_until(lambda: topic_name in all_topics(client), message="topic in metadata")
    roundtrip(broker.bootstrap, topic_name)


@pytest.mark.timeout(60)
def test_admin_create_with_replica_assignment(broker, topic_name):
    client = admin(broker.bootstrap)
    md = client.list_topics(timeout=10)
    assert len(md.brokers) == 1
    node_id = next(iter(md.brokers))
    assert create_topic_error(client, NewTopic(topic_name, num_partitions=2, replica_assignment=[[node_id], [node_id]])) is None
    tmd = wait_until(lambda: all_topics(client).get(topic_name), message="topic in metadata")
    assert sorted(tmd.partitions) == [0, 1]
    for p in tmd.partitions.values():
        assert p.leader == node_id
        assert list(p.replicas) == [node_id]


@pytest.mark.timeout(60)
def test_admin_create_existing(broker, topic_name):
    client = admin(broker.bootstrap)
    assert create_topic_error(client, NewTopic(topic_name, 1, 1)) is None
    err = create_topic_error(client, NewTopic(topic_name, 1, 1))
    assert err is not None and err.code() == KafkaError.TOPIC_ALREADY_EXISTS, err


@pytest.mark.timeout(60)
@pytest.mark.parametrize("bad_name", ["bad name!", "slash/name", "..", "x" * 250])
def test_admin_create_invalid_name(broker, bad_name):
    client = admin(broker.bootstrap)
    err = create_topic_error(client, NewTopic(bad_name, 1, 1))
    assert err is not None and err.code() == KafkaError.TOPIC_EXCEPTION, err


@pytest.mark.timeout(60)
def test_admin_create_zero_partitions(broker, topic_name):
    client = admin(broker.bootstrap)
    err = create_topic_error(client, NewTopic(topic_name, 0, 1))
    assert err is not None and err.code() == KafkaError.INVALID_PARTITIONS, err
    assert topic_name not in all_topics(client)


@pytest.mark.timeout(60)
def test_admin_create_replication_factor_too_large(broker, topic_name):
    client = admin(broker.bootstrap)
    err = create_topic_error(client, NewTopic(topic_name, 1, 3))
    assert err is not None and err.code() == KafkaError.INVALID_REPLICATION_FACTOR, err
    assert topic_name not in all_topics(client)


@pytest.mark.timeout(60)
def test_admin_delete_topic(broker, topic_name):
    client = admin(broker.bootstrap)
    assert create_topic_error(client, NewTopic(topic_name, 2, 1)) is None
    wait_until(lambda: topic_name in all_topics(client), message="topic in metadata")
    futures = client.delete_topics([topic_name], operation_timeout=10, request_timeout=15)
    futures[topic_name].result(timeout=20)
    wait_until(lambda: topic_name not in all_topics(client), message="topic gone from metadata")
    # Deleting it again: UNKNOWN_TOPIC_OR_PARTITION.
    futures = client.delete_topics([topic_name], operation_timeout=10, request_timeout=15)
    with pytest.raises(KafkaException) as info:
        futures[topic_name].result(timeout=20)
    assert info.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


@pytest.mark.timeout(60)
def test_delete_then_recreate_starts_empty(broker, topic_name):
    client = admin(broker.bootstrap)
    assert create_topic_error(client, NewTopic(topic_name, 1, 1)) is None
    assert_delivered(produce_messages(broker.bootstrap, topic_name, [{"value": b"old"}] * 3))
    client.delete_topics([topic_name], operation_timeout=10)[topic_name].result(timeout=20)
    wait_until(lambda: topic_name not in all_topics(client), message="topic gone from metadata")
    assert create_topic_error(client, NewTopic(topic_name, 1, 1)) is None
    delivered = assert_delivered(produce_messages(broker.bootstrap, topic_name, [{"value": b"new"}]))
    assert delivered[0].offset() == 0
    got = consume_messages(broker.bootstrap, topic_name, 1, extra_wait=0.3)
    assert [m.value() for m in got] == [b"new"]


@pytest.mark.timeout(60)
def test_offsets_for_times_and_watermarks(broker, topic_name):
    n = 10
    specs = [dict(partition=0, value=b"m%d" % i, timestamp=BASE_TS + 1000 * i) for i in range(n)]
    # Two producers so the records land in more than one batch.
    assert_delivered(produce_messages(broker.bootstrap, topic_name, specs[:4]))
    assert_delivered(produce_messages(broker.bootstrap, topic_name, specs[4:], config={"compression.type": "gzip"}))

    consumer = Consumer(consumer_config(broker.bootstrap))
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=10) == (0, n)
        assert consumer.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=10, cached=False) == (0, n)

        def lookup(ts: int) -> int:
            res = consumer.offsets_for_times([TopicPartition(topic_name, 0, ts)], timeout=10)
            assert res[0].error is None, res[0].error
            return res[0].offset

        assert lookup(BASE_TS + 4500) == 5  # first record with ts >= 4500 is m5
        assert lookup(BASE_TS + 4000) == 4  # exact match
        assert lookup(BASE_TS) == 0
        assert lookup(BASE_TS - 10_000) == 0
        assert lookup(BASE_TS + 9000) == 9
        assert lookup(BASE_TS + 9001) in (-1, OFFSET_END)  # nothing that late: end
    finally:
        consumer.close()


@pytest.mark.timeout(60)
def test_watermarks_empty_topic(broker, topic_name):
    client = admin(broker.bootstrap)
    assert create_topic_error(client, NewTopic(topic_name, 1, 1)) is None
    consumer = Consumer(consumer_config(broker.bootstrap))
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=10, cached=False) == (0, 0)
    finally:
        consumer.close()


@pytest.mark.timeout(60)
def test_out_of_range_offset_reset_error(broker, topic_name):
    assert_delivered(produce_messages(broker.bootstrap, topic_name, [{"value": b"a"}, {"value": b"b"}]))
    consumer = Consumer(consumer_config(broker.bootstrap, **{"auto.offset.reset": "error"}))
    try:
        consumer.assign([TopicPartition(topic_name, 0, 100)])
        error = None
        for _ in bounded(100, 20):
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is not None, f"unexpected message at offset {msg.offset()}"
            error = msg.error()
            break
        assert error is not None, "no error event for an out-of-range fetch offset"
        assert error.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE), error
    finally:
        consumer.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("reset,expected", [("earliest", [b"a", b"b", b"c"]), ("latest", [b"d"])])
def test_out_of_range_offset_resets(broker, topic_name, reset, expected):
    assert_delivered(produce_messages(broker.bootstrap, topic_name, [{"value": v} for v in (b"a", b"b", b"c")]))
    consumer = Consumer(consumer_config(broker.bootstrap, **{"auto.offset.reset": reset}))
    try:
        consumer.assign([TopicPartition(topic_name, 0, 100)])
        if reset == "latest":
            # Give the consumer time to fetch, get OFFSET_OUT_OF_RANGE and reset to the end (nothing to read).
            early = [m for m in (consumer.poll(0.2) for _ in bounded(10, 5)) if m is not None and m.error() is None]
            assert early == []
            assert_delivered(produce_messages(broker.bootstrap, topic_name, [{"value": b"d"}]))
        got = poll_n(consumer, len(expected), timeout=20, extra_wait=0.3)
        assert [m.value() for m in got] == expected
    finally:
        consumer.close()


@pytest.mark.timeout(60)
def test_large_message(broker, topic_name):
    value = os.urandom(900 * 1024)
    key = os.urandom(1000)
    delivered = assert_delivered(produce_messages(broker.bootstrap, topic_name, [{"key": key, "value": value}]))
    assert delivered[0].offset() == 0
    got = consume_messages(broker.bootstrap, topic_name, 1)
    assert got[0].key() == key
    assert got[0].value() == value


@pytest.mark.timeout(60)
def test_message_larger_than_broker_limit(broker_factory, topic_name):
    b = broker_factory({"message.max.bytes": "100000"})
    reports = produce_messages(
        b.bootstrap, topic_name, [{"value": os.urandom(200_000)}], config={"message.send.max.retries": 0}
    )
    err, _ = reports[0]
    assert err is not None and err.code() == KafkaError.MSG_SIZE_TOO_LARGE, err
    # Something under the limit still goes through, and the refused record took no offset.
    delivered = assert_delivered(produce_messages(b.bootstrap, topic_name, [{"value": os.urandom(50_000)}]))
    assert delivered[0].offset() == 0
    roundtrip(b.bootstrap, topic_name)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_acks(broker, topic_name, acks):
    values = [b"acks-%s-%d" % (acks.encode(), i) for i in range(5)]
    delivered = assert_delivered(
        produce_messages(broker.bootstrap, topic_name, [{"value": v, "partition": 0} for v in values],
                         config={"acks": acks})
    )
    if acks != "0":
        assert [m.offset() for m in delivered] == list(range(5))
    got = consume_messages(broker.bootstrap, topic_name, len(values), extra_wait=0.3)
    assert [m.value() for m in got] == values
    assert [m.offset() for m in got] == list(range(5))


@pytest.mark.timeout(60)
def test_many_small_batches_one_producer(broker, topic_name):
    """Many produce requests in flight on one connection: offsets stay dense and ordered."""
    n = 2000
    producer = Producer(producer_config(broker.bootstrap, **{"linger.ms": 0, "batch.num.messages": 7,
                                                             "max.in.flight.requests.per.connection": 5,
                                                             "message.send.max.retries": 0}))
    reports: list = []
    for i in range(n):
        producer.produce(topic_name, value=b"%d" % i, partition=0,
                         on_delivery=lambda err, msg: reports.append((err, msg)))
        producer.poll(0)
    flush_fully(producer, 40)
    assert len(reports) == n
    delivered = assert_delivered(reports)
    by_value = {int(m.value()): m.offset() for m in delivered}
    assert sorted(by_value.values()) == list(range(n))
    got = consume_messages(broker.bootstrap, topic_name, n, timeout=40)
    assert [int(m.value()) for m in got] == list(range(n)), "order differs from produce order"


@pytest.mark.timeout(60)
def test_produce_to_missing_partition(broker, topic_name):
    client = admin(broker.bootstrap)
    assert create_topic_error(client, NewTopic(topic_name, 1, 1)) is None
    reports = produce_messages(broker.bootstrap, topic_name, [{"value": b"x", "partition": 5}],
                               config={"message.timeout.ms": 5000})
    err, _ = reports[0]
    assert err is not None
    assert err.code() in (KafkaError._UNKNOWN_PARTITION, KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._MSG_TIMED_OUT)


@pytest.mark.timeout(60)
def test_fetch_limits_smaller_than_one_batch(broker, topic_name):
    """fetch.max.bytes / max.partition.fetch.bytes below one batch: the first batch is still returned."""
    big = os.urandom(300_000)
    assert_delivered(produce_messages(broker.bootstrap, topic_name, [{"value": big}, {"value": b"small"}]))
    got = consume_messages(
        broker.bootstrap,
        topic_name,
        2,
        config={"fetch.max.bytes": 1024, "message.max.bytes": 1000, "max.partition.fetch.bytes": 1024,
                "receive.message.max.bytes": 2000000},
    )
    assert [m.value() for m in got] == [big, b"small"]


@pytest.mark.timeout(60)
def test_long_poll_wakes_on_produce(broker, topic_name):
    assert_delivered(produce_messages(broker.bootstrap, topic_name, [{"value": b"first"}]))
    consumer = Consumer(consumer_config(broker.bootstrap, **{"fetch.wait.max.ms": 5000, "fetch.min.bytes": 1}))
    try:
        consumer.assign([TopicPartition(topic_name, 0, 1)])
        assert [m for m in (consumer.poll(0.2) for _ in bounded(5, 3)) if m is not None and m.error() is None] == []
        assert_delivered(produce_messages(broker.bootstrap, topic_name, [{"value": b"second"}]))
        got = poll_n(consumer, 1, timeout=20)
        assert (got[0].offset(), got[0].value()) == (1, b"second")
    finally:
        consumer.close()


@pytest.mark.timeout(60)
def test_one_consumer_many_partitions(broker, topic_name):
    client = admin(broker.bootstrap)
    assert create_topic_error(client, NewTopic(topic_name, 4, 1)) is None
    wait_until(lambda: topic_name in all_topics(client), message="topic in metadata")
    specs = [dict(partition=i % 4, value=b"%d" % i, key=b"k%d" % i) for i in range(200)]
    delivered = assert_delivered(produce_messages(broker.bootstrap, topic_name, specs, config={"compression.type": "zstd"}))
    consumer = Consumer(consumer_config(broker.bootstrap))
    try:
        consumer.assign([TopicPartition(topic_name, p, OFFSET_BEGINNING) for p in range(4)])
        got = poll_n(consumer, 200, timeout=30, extra_wait=0.3)
    finally:
        consumer.close()
    assert len(got) == 200
    where = {m.value(): (m.partition(), m.offset()) for m in delivered}
    assert {m.value(): (m.partition(), m.offset()) for m in got} == where
    for p in range(4):
        assert [m.offset() for m in got if m.partition() == p] == list(range(50))


@pytest.mark.timeout(60)
def test_keyed_partitioning_consistent(broker, topic_name):
    client = admin(broker.bootstrap)
    assert create_topic_error(client, NewTopic(topic_name, 3, 1)) is None
    wait_until(lambda: topic_name in all_topics(client), message="topic in metadata")
    specs = [dict(key=b"key-%d" % (i % 10), value=b"%d" % i) for i in range(100)]
    delivered = assert_delivered(produce_messages(broker.bootstrap, topic_name, specs))
    part_of: dict = {}
    for m in delivered:
        assert part_of.setdefault(m.key(), m.partition()) == m.partition()
    for p in range(3):
        want = [m.value() for m in delivered if m.partition() == p]
        got = consume_messages(broker.bootstrap, topic_name, len(want), partition=p, extra_wait=0.3) if want else []
        assert [m.value() for m in got] == want


@pytest.mark.timeout(60)
def test_auto_create_uses_num_partitions(broker_factory, topic_name):
    b = broker_factory({"num.partitions": "3"})
    producer = Producer(producer_config(b.bootstrap))
    md = wait_until(lambda: producer.list_topics(topic_name, timeout=5).topics[topic_name].partitions,
                    timeout=20, message="auto-created topic")
    assert sorted(md) == [0, 1, 2]
    roundtrip(b.bootstrap, topic_name)


@pytest.mark.timeout(60)
def test_auto_create_disabled(broker_factory, topic_name):
    b = broker_factory({"auto.create.topics.enable": "false"})
    reports = produce_messages(b.bootstrap, topic_name, [{"value": b"x"}],
                               config={"message.timeout.ms": 4000}, timeout=20)
    err, _ = reports[0]
    assert err is not None
    assert err.code() in (KafkaError._UNKNOWN_TOPIC, KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._MSG_TIMED_OUT), err
    assert topic_name not in all_topics(admin(b.bootstrap))
    # Explicit creation still works.
    assert create_topic_error(admin(b.bootstrap), NewTopic(topic_name, 1, 1)) is None
    roundtrip(b.bootstrap, topic_name)


@pytest.mark.timeout(60)
def test_data_survives_graceful_restart(broker_factory, topic_name):
    b = broker_factory()
    specs = sample_messages()
    assert_delivered(produce_messages(b.bootstrap, topic_name, specs, config={"compression.type": "snappy"}))
    b.restart()
    got = consume_messages(b.bootstrap, topic_name, len(specs), extra_wait=0.3)
    for i, (spec, msg) in enumerate(zip(specs, got)):
        assert_same(spec, msg, i)
    delivered = assert_delivered(produce_messages(b.bootstrap, topic_name, [{"value": b"after restart"}]))
    assert delivered[0].offset() == len(specs)


@pytest.mark.timeout(90)
def test_concurrent_producers_one_partition(broker, topic_name):
    """Several producers (own connections) write one partition at once: offsets dense, nothing lost."""
    import threading

    n_producers, per_producer = 6, 400
    results: dict[int, list] = {}

    def run(pid: int) -> None:
        specs = [dict(partition=0, key=b"p%d" % pid, value=b"%d:%d" % (pid, i),
                      timestamp=BASE_TS + i) for i in range(per_producer)]
        codec = ["none", "gzip", "snappy", "lz4", "zstd", "none"][pid]
        results[pid] = produce_messages(broker.bootstrap, topic_name, specs, timeout=60,
                                        config={"compression.type": codec, "linger.ms": pid})

    threads = [threading.Thread(target=run, args=(pid,)) for pid in range(n_producers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(80)
    assert len(results) == n_producers
    offsets = []
    for pid, reports in results.items():
        msgs = assert_delivered(reports)
        own = [m.offset() for m in msgs]
        assert own == sorted(own), f"producer {pid}: offsets not increasing"
        offsets += own
    total = n_producers * per_producer
    assert sorted(offsets) == list(range(total))
    got = consume_messages(broker.bootstrap, topic_name, total, timeout=60, extra_wait=0.3, config={"check.crcs": True})
    assert [m.offset() for m in got] == list(range(total))
    by_producer: dict[bytes, list[int]] = {}
    for m in got:
        pid, i = m.value().split(b":")
        by_producer.setdefault(pid, []).append(int(i))
    assert all(v == list(range(per_producer)) for v in by_producer.values()) and len(by_producer) == n_producers


@pytest.mark.timeout(90)
def test_many_segments(broker_factory, topic_name):
    """Small segments: reads across segment boundaries, from the middle, by time, and after restart."""
    b = broker_factory({"log.segment.bytes": "4096"})
    n = 600
    specs = [dict(partition=0, value=b"seg-%04d-" % i + b"x" * 40, timestamp=BASE_TS + 10 * i) for i in range(n)]
    for lo in range(0, n, 100):  # several produce requests, several batches
        assert_delivered(produce_messages(b.bootstrap, topic_name, specs[lo : lo + 100]))
    part_dir = b.data_dir / f"{topic_name}-0"
    assert len(list(part_dir.glob("*.log"))) > 3, "log.segment.bytes=4096 did not roll segments"

    def check() -> None:
        got = consume_messages(b.bootstrap, topic_name, n, extra_wait=0.3)
        assert [m.value() for m in got] == [s["value"] for s in specs]
        assert [m.offset() for m in got] == list(range(n))
        for start in (1, 99, 100, 101, 333, 599):
            got = consume_messages(b.bootstrap, topic_name, 1, offset=start)
            assert (got[0].offset(), got[0].value()) == (start, specs[start]["value"])
        consumer = Consumer(consumer_config(b.bootstrap))
        try:
            for i in (0, 150, 151, 400, 599):
                res = consumer.offsets_for_times([TopicPartition(topic_name, 0, BASE_TS + 10 * i - 5)], timeout=10)
                assert res[0].offset == i
            assert consumer.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=10, cached=False) == (0, n)
        finally:
            consumer.close()

    check()
    b.restart()
    check()
    b.kill()
    b.start()
    check()


@pytest.mark.timeout(90)
def test_retention_by_bytes_advances_log_start(broker_factory, topic_name):
    b = broker_factory({"log.segment.bytes": "2048", "log.retention.bytes": "4096",
                        "log.retention.check.interval.ms": "200"})
    n = 300
    for lo in range(0, n, 50):
        specs = [dict(partition=0, value=b"r-%04d-" % i + b"y" * 40) for i in range(lo, lo + 50)]
        assert_delivered(produce_messages(b.bootstrap, topic_name, specs))
    consumer = Consumer(consumer_config(b.bootstrap))
    try:
        def low():
            lo_, hi_ = consumer.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=5, cached=False)
            assert hi_ == n
            return lo_ if lo_ > 0 else None

        start = wait_until(low, timeout=40, interval=0.3, message="retention to delete old segments")
    finally:
        consumer.close()
    # OFFSET_BEGINNING now means the log start; offset 0 is out of range and resets to earliest.
    got = consume_messages(b.bootstrap, topic_name, n - start, extra_wait=0.3)
    assert got[0].offset() == start and got[-1].offset() == n - 1
    assert [m.value()[:6] for m in got] == [b"r-%04d" % i for i in range(start, n)]
    got = consume_messages(b.bootstrap, topic_name, 1, offset=0, config={"auto.offset.reset": "earliest"})
    assert got[0].offset() == start


@pytest.mark.timeout(90)
def test_many_partitions(broker, topic_name):
    parts = 64
    client = admin(broker.bootstrap)
    assert create_topic_error(client, NewTopic(topic_name, parts, 1)) is None
    wait_until(lambda: len(all_topics(client).get(topic_name).partitions) == parts, message="topic in metadata")
    specs = [dict(partition=p, value=b"%d-%d" % (p, i)) for i in range(5) for p in range(parts)]
    delivered = assert_delivered(produce_messages(broker.bootstrap, topic_name, specs, config={"linger.ms": 50}))
    assert sorted((m.partition(), m.offset()) for m in delivered) == [(p, i) for p in range(parts) for i in range(5)]
    consumer = Consumer(consumer_config(broker.bootstrap))
    try:
        consumer.assign([TopicPartition(topic_name, p, OFFSET_BEGINNING) for p in range(parts)])
        got = poll_n(consumer, len(specs), timeout=60, extra_wait=0.3)
    finally:
        consumer.close()
    assert sorted((m.partition(), m.offset(), m.value()) for m in got) == sorted(
        (p, i, b"%d-%d" % (p, i)) for i in range(5) for p in range(parts)
    )


@pytest.mark.timeout(60)
def test_delete_topic_while_consuming(broker, topic_name):
    client = admin(broker.bootstrap)
    assert create_topic_error(client, NewTopic(topic_name, 1, 1)) is None
    assert_delivered(produce_messages(broker.bootstrap, topic_name, [{"value": b"a"}]))
    consumer = Consumer(consumer_config(broker.bootstrap, **{"fetch.wait.max.ms": 200}))
    try:
        consumer.assign([TopicPartition(topic_name, 0, OFFSET_BEGINNING)])
        poll_n(consumer, 1, timeout=20)
        client.delete_topics([topic_name], operation_timeout=10)[topic_name].result(timeout=20)
        for _ in bounded(10, 5):
            consumer.poll(0.2)  # errors (unknown topic) are fine; the broker must just keep going
    finally:
        consumer.close()
    assert broker.is_running()
    roundtrip(broker.bootstrap, topic_name + "-after")
