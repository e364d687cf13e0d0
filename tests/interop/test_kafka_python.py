"""Interop tests: kafka-python 3.x (new and legacy protocol versions) and confluent-kafka against odradek.

Groups, idempotence and transactions are not implemented by the broker: producers disable
idempotence explicitly and consumers use assign() without a group.
"""

from __future__ import annotations

import time
import uuid

import pytest

kafka = pytest.importorskip("kafka")
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
from kafka import codec as kafka_codec  # noqa: E402
from kafka import errors as kafka_errors  # noqa: E402

from .helpers import consume_messages  # noqa: E402

API_V0 = (0, 9)  # Produce v1 / Fetch v1: magic 0 message sets, no timestamps
API_V1 = (0, 10)  # Produce v2 / Fetch v2: magic 1 message sets, timestamps
CONSUME_TIMEOUT_S = 30.0
SEND_TIMEOUT_S = 30.0
# An hour ago: recent enough that the 7-day retention never deletes a rolled segment mid-test.
BASE_TS = (int(time.time()) - 3600) * 1000

CODEC_AVAILABLE = {
    "gzip": kafka_codec.has_gzip(),
    "snappy": kafka_codec.has_snappy(),
    "lz4": kafka_codec.has_lz4(),
    "zstd": kafka_codec.has_zstd(),
}


# ---------------------------------------------------------------------------------------- utilities


def make_producer(bootstrap: str, api_version=None, **kw) -> KafkaProducer:
    cfg = dict(
        bootstrap_servers=bootstrap,
        enable_idempotence=False,
        acks="all",
        linger_ms=20,
        request_timeout_ms=15000,
        max_block_ms=20000,
        retries=2,
    )
    if api_version is not None:
        cfg["api_version"] = api_version
    cfg.update(kw)
    return KafkaProducer(**cfg)


def produce(bootstrap: str, topic: str, records: list[dict], partition: int = 0, api_version=None, **kw) -> list[int]:
    """Send `records` (dicts with key/value/headers/timestamp_ms) and return the acked offsets in order."""
    producer = make_producer(bootstrap, api_version=api_version, **kw)
    # Guard against the client silently negotiating a different protocol than the test intends.
    if api_version is not None:
        assert tuple(producer.config["api_version"][:2]) == tuple(api_version[:2]), producer.config["api_version"]
    else:
        assert producer.config["api_version"] >= (0, 11), producer.config["api_version"]
    try:
        futures = []
        for rec in records:
            args = dict(key=rec.get("key"), value=rec.get("value"), partition=partition)
            if rec.get("headers") is not None:
                args["headers"] = rec["headers"]
            if rec.get("timestamp_ms") is not None:
                args["timestamp_ms"] = rec["timestamp_ms"]
            futures.append(producer.send(topic, **args))
        producer.flush(timeout=SEND_TIMEOUT_S)
        offsets = []
        for f in futures:
            md = f.get(timeout=SEND_TIMEOUT_S)
            assert md.topic == topic and md.partition == partition
            offsets.append(md.offset)
        return offsets
    finally:
        producer.close(timeout=10)


def consume(bootstrap: str, topic: str, n: int, partition: int = 0, api_version=None,
            timeout_s: float = CONSUME_TIMEOUT_S, start_offset: int | None = None, **kw) -> list:
    """Read `n` records from the beginning of topic/partition by assign(); bounded in polls and time."""
    cfg = dict(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        request_timeout_ms=15000,
        fetch_max_wait_ms=200,
    )
    if api_version is not None:
        cfg["api_version"] = api_version
    cfg.update(kw)
    consumer = KafkaConsumer(**cfg)
    if api_version is not None:
        assert tuple(consumer.config["api_version"][:2]) == tuple(api_version[:2]), consumer.config["api_version"]
    out: list = []
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        if start_offset is None:
            consumer.seek_to_beginning(tp)
        else:
            consumer.seek(tp, start_offset)
        deadline = time.monotonic() + timeout_s
        polls = 0
        while len(out) < n and time.monotonic() < deadline and polls < 500:
            polls += 1
            batch = consumer.poll(timeout_ms=500)
            for recs in batch.values():
                out.extend(recs)
    finally:
        consumer.close()
    return out


def confluent_consume(bootstrap: str, topic: str, n: int, legacy: str | None = None) -> list:
    """librdkafka consumer by assign(); `legacy="0.9.0"`/`"0.10.0"` pins it to the old Fetch versions."""
    extra = {"api.version.request": False, "broker.version.fallback": legacy} if legacy else {}
    return consume_messages(bootstrap, topic, n, timeout=CONSUME_TIMEOUT_S, config=extra, only_fatal=True)


def b(s: str | None) -> bytes | None:
    return None if s is None else s.encode()


def sample_records(n: int, prefix: str, headers: bool = True, ts: bool = True) -> list[dict]:
    recs = []
    for i in range(n):
        rec = {"key": b(f"{prefix}-key-{i}"), "value": b(f"{prefix}-value-{i}-" + "xyz" * (i % 17))}
        if headers:
            rec["headers"] = [("idx", b(str(i))), ("src", b(prefix))]
        if ts:
            rec["timestamp_ms"] = BASE_TS + i
        recs.append(rec)
    return recs


def assert_records(got: list, expected: list[dict], first_offset: int = 0, check_headers: bool = True,
                   check_ts: bool = True) -> None:
    assert len(got) == len(expected), f"expected {len(expected)} records, got {len(got)}"
    for i, (r, e) in enumerate(zip(got, expected)):
        assert r.offset == first_offset + i, f"record {i}: offset {r.offset}"
        assert r.key == e.get("key"), f"record {i}: key {r.key!r} != {e.get('key')!r}"
        assert r.value == e.get("value"), f"record {i}: value {r.value!r} != {e.get('value')!r}"
        if check_headers:
            assert list(r.headers or []) == list(e.get("headers") or []), f"record {i}: headers {r.headers!r}"
        if check_ts and e.get("timestamp_ms") is not None:
            assert r.timestamp == e["timestamp_ms"], f"record {i}: timestamp {r.timestamp}"


# ---------------------------------------------------------------------------------------- tests


@pytest.mark.timeout(120)
def test_default_roundtrip_keys_values_headers(broker, topic_name):
    recs = sample_records(40, "d")
    # Edge cases: null key, null value (tombstone), empty value, empty header value, binary data.
    recs.append({"key": None, "value": b"no-key", "headers": [], "timestamp_ms": BASE_TS + 100})
    recs.append({"key": b"tombstone", "value": None, "headers": [("h", b"")], "timestamp_ms": BASE_TS + 101})
    recs.append({"key": b"empty", "value": b"", "headers": [("a", b"1"), ("a", b"2")], "timestamp_ms": BASE_TS + 102})
    recs.append({"key": bytes(range(256)), "value": bytes(range(255, -1, -1)) * 40, "timestamp_ms": BASE_TS + 103})
    offsets = produce(broker.bootstrap, topic_name, recs)
    assert offsets == list(range(len(recs)))
    got = consume(broker.bootstrap, topic_name, len(recs))
    assert_records(got, recs)
    # Nothing beyond what was produced.
    assert all(r.topic == topic_name and r.partition == 0 for r in got)
    # Legacy readers get the same keys/values (null/empty preserved) via down-conversion, without headers.
    for api in (API_V0, API_V1):
        got = consume(broker.bootstrap, topic_name, len(recs), api_version=api)
        assert_records(got, recs, check_headers=False, check_ts=api == API_V1)
        assert all(not r.headers for r in got)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compression_roundtrip(broker, topic_name, codec):
    if not CODEC_AVAILABLE[codec]:
        pytest.skip(f"kafka-python has no {codec} library in this venv")
    recs = sample_records(200, f"c-{codec}")
    offsets = produce(broker.bootstrap, topic_name, recs, compression_type=codec, linger_ms=50)
    assert offsets == list(range(len(recs)))
    got = consume(broker.bootstrap, topic_name, len(recs))
    assert_records(got, recs)
    # librdkafka decodes the same batches.
    cgot = confluent_consume(broker.bootstrap, topic_name, len(recs))
    assert [(m.offset(), m.key(), m.value()) for m in cgot] == [
        (i, r["key"], r["value"]) for i, r in enumerate(recs)
    ]


@pytest.mark.timeout(10)
def test_gzip_is_available():
    assert CODEC_AVAILABLE["gzip"]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("codec", [None, "gzip"])
def test_magic1_producer_and_consumer(broker, topic_name, codec):
    recs = sample_records(30, "m1", headers=False)
    offsets = produce(broker.bootstrap, topic_name, recs, api_version=API_V1, compression_type=codec)
    assert offsets == list(range(len(recs)))
    got = consume(broker.bootstrap, topic_name, len(recs), api_version=API_V1)
    assert_records(got, recs, check_headers=False)
    # The new-protocol consumer sees the up-converted records with their timestamps.
    got = consume(broker.bootstrap, topic_name, len(recs))
    assert_records(got, recs, check_headers=True)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("codec", [None, "gzip"])
def test_magic0_producer_and_consumer(broker, topic_name, codec):
    recs = sample_records(30, "m0", headers=False, ts=False)
    offsets = produce(broker.bootstrap, topic_name, recs, api_version=API_V0, compression_type=codec)
    assert offsets == list(range(len(recs)))
    got = consume(broker.bootstrap, topic_name, len(recs), api_version=API_V0)
    assert_records(got, recs, check_headers=False, check_ts=False)
    assert all(r.timestamp in (None, -1) for r in got), [r.timestamp for r in got]
    got = consume(broker.bootstrap, topic_name, len(recs))
    assert_records(got, recs, check_ts=False)
    assert all(r.timestamp in (None, -1) for r in got), [r.timestamp for r in got]


@pytest.mark.timeout(120)
def test_mixed_topic_all_consumers(broker, topic_name):
    r0 = sample_records(10, "v0", headers=False, ts=False)
    r1 = sample_records(10, "v1", headers=False)
    r2 = sample_records(10, "v2", headers=True)
    for rec in r1:
        rec["timestamp_ms"] += 1000
    for rec in r2:
        rec["timestamp_ms"] += 2000
    assert produce(broker.bootstrap, topic_name, r0, api_version=API_V0) == list(range(0, 10))
    assert produce(broker.bootstrap, topic_name, r1, api_version=API_V1, compression_type="gzip") == list(range(10, 20))
    assert produce(broker.bootstrap, topic_name, r2) == list(range(20, 30))
    everything = r0 + r1 + r2

    for api in (API_V0, API_V1, None):
        got = consume(broker.bootstrap, topic_name, 30, api_version=api)
        assert [r.offset for r in got] == list(range(30)), f"api_version={api}"
        assert [(r.key, r.value) for r in got] == [(e["key"], e["value"]) for e in everything], f"api_version={api}"
        # v0 records carry no timestamp whoever reads them; magic-0 readers see no timestamps at all.
        for r in got[:10]:
            assert r.timestamp in (None, -1), f"api_version={api} offset {r.offset}: {r.timestamp}"
        for r, e in zip(got[10:], everything[10:]):
            if api == API_V0:
                assert r.timestamp in (None, -1), f"api_version={api} offset {r.offset}: {r.timestamp}"
            else:
                assert r.timestamp == e["timestamp_ms"], f"api_version={api} offset {r.offset}: {r.timestamp}"
        if api is None:
            assert [list(r.headers or []) for r in got] == [list(e.get("headers") or []) for e in everything]
        else:
            assert all(not r.headers for r in got), f"api_version={api}: headers on legacy records"

    # Pinned to old versions librdkafka skips ApiVersions and also sends FindCoordinator (groups are not
    # implemented, so the broker closes that connection); the fetches are retried on a new connection.
    for legacy in ("0.9.0", "0.10.0"):
        cgot = confluent_consume(broker.bootstrap, topic_name, 30, legacy=legacy)
        assert [(m.offset(), m.key(), m.value()) for m in cgot] == [
            (i, e["key"], e["value"]) for i, e in enumerate(everything)
        ], f"librdkafka broker.version.fallback={legacy}"
        if legacy == "0.10.0":
            assert [m.timestamp()[1] for m in cgot[10:]] == [e["timestamp_ms"] for e in everything[10:]]

    cgot = confluent_consume(broker.bootstrap, topic_name, 30)
    assert [(m.offset(), m.key(), m.value()) for m in cgot] == [
        (i, e["key"], e["value"]) for i, e in enumerate(everything)
    ]
    for m in cgot[:10]:
        assert m.timestamp()[1] == -1 or m.timestamp()[0] == 0, m.timestamp()
    for m, e in zip(cgot[10:], everything[10:]):
        assert m.timestamp()[1] == e["timestamp_ms"], (m.offset(), m.timestamp())
    for m, e in zip(cgot[20:], everything[20:]):
        assert list(m.headers() or []) == e["headers"]


@pytest.mark.timeout(120)
def test_multi_partition_produce_consume(broker, topic_name):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15000)
    try:
        admin.create_topics({topic_name: {"num_partitions": 3, "replication_factor": 1}})
        admin.wait_for_topics([topic_name], timeout_ms=15000)
    finally:
        admin.close()
    per_part = {}
    for p in range(3):
        recs = sample_records(5 + p, f"p{p}")
        assert produce(broker.bootstrap, topic_name, recs, partition=p) == list(range(len(recs)))
        per_part[p] = recs
    for p, recs in per_part.items():
        got = consume(broker.bootstrap, topic_name, len(recs), partition=p)
        assert_records(got, recs)
        assert all(r.partition == p for r in got)


@pytest.mark.timeout(120)
def test_admin_create_list_delete(broker, topic_name):
    names = [f"{topic_name}-a", f"{topic_name}-b"]
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15000)
    try:
        res = admin.create_topics({names[0]: {"num_partitions": 2, "replication_factor": 1},
                                   names[1]: {"num_partitions": 1, "replication_factor": 1}})
        assert {t["name"]: t["error_code"] for t in res["topics"]} == {names[0]: 0, names[1]: 0}
        admin.wait_for_topics(names, timeout_ms=15000)

        listed = admin.list_topics()
        assert set(names) <= set(listed)
        described = {t["name"]: t for t in admin.describe_topics(names)}
        assert len(described[names[0]]["partitions"]) == 2
        assert len(described[names[1]]["partitions"]) == 1

        with pytest.raises(kafka_errors.TopicAlreadyExistsError):
            admin.create_topics({names[0]: {"num_partitions": 1, "replication_factor": 1}})

        # The created topic is usable.
        recs = sample_records(3, "adm")
        assert produce(broker.bootstrap, names[0], recs, partition=1) == [0, 1, 2]

        res = admin.delete_topics(names)
        assert {t["name"]: t["error_code"] for t in res["topics"]} == {names[0]: 0, names[1]: 0}
        deadline = time.monotonic() + 20
        for _ in range(100):
            listed = admin.list_topics()
            if not set(names) & set(listed) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert not set(names) & set(listed), f"deleted topics still listed: {set(names) & set(listed)}"

        with pytest.raises(kafka_errors.UnknownTopicOrPartitionError):
            admin.delete_topics([f"{topic_name}-never-{uuid.uuid4().hex[:8]}"])
    finally:
        admin.close()


ALL_APIS = [API_V0, API_V1, None]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("api", ALL_APIS, ids=["magic0", "magic1", "default"])
def test_seek_into_compressed_v2_batch(broker, topic_name, api):
    """Consumers of every format that seek into the middle of a compressed v2 batch start exactly there."""
    recs = sample_records(50, "sk")
    assert produce(broker.bootstrap, topic_name, recs, compression_type="gzip", linger_ms=100) == list(range(50))
    got = consume(broker.bootstrap, topic_name, 27, api_version=api, start_offset=23)
    assert [r.offset for r in got] == list(range(23, 50))
    assert [(r.key, r.value) for r in got] == [(e["key"], e["value"]) for e in recs[23:]]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("api", ALL_APIS, ids=["magic0", "magic1", "default"])
def test_small_fetch_size_many_fetches(broker, topic_name, api):
    """Many small batches read with a small per-partition fetch size: every format makes progress."""
    recs = sample_records(120, "sf", headers=False, ts=False)
    offsets = []
    for i in range(0, 120, 10):  # 12 separate produce calls -> at least 12 batches
        offsets += produce(broker.bootstrap, topic_name, recs[i:i + 10], api_version=api, linger_ms=0)
    assert offsets == list(range(120))
    got = consume(broker.bootstrap, topic_name, 120, api_version=api, max_partition_fetch_bytes=2048)
    assert [r.offset for r in got] == list(range(120))
    assert [(r.key, r.value) for r in got] == [(e["key"], e["value"]) for e in recs]


@pytest.mark.timeout(120)
def test_large_values_all_formats(broker, topic_name):
    big = [{"key": f"big-{i}".encode(), "value": bytes([65 + i]) * (300_000 + i)} for i in range(3)]
    assert produce(broker.bootstrap, topic_name, big, api_version=API_V1) == [0, 1, 2]
    assert produce(broker.bootstrap, topic_name, big, compression_type="gzip") == [3, 4, 5]
    for api in ALL_APIS:
        got = consume(broker.bootstrap, topic_name, 6, api_version=api)
        assert [r.offset for r in got] == list(range(6)), f"api_version={api}"
        assert [(r.key, r.value) for r in got] == [(e["key"], e["value"]) for e in big + big], f"api_version={api}"


@pytest.mark.timeout(120)
def test_admin_create_topic_errors(broker, topic_name):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15000)
    try:
        cases = {
            f"{topic_name}-zero": ({"num_partitions": 0, "replication_factor": 1}, 37),  # INVALID_PARTITIONS
            f"{topic_name}-rf3": ({"num_partitions": 1, "replication_factor": 3}, 38),  # INVALID_REPLICATION_FACTOR
            "bad name!": ({"num_partitions": 1, "replication_factor": 1}, 17),  # INVALID_TOPIC_EXCEPTION
        }
        for name, (spec, code) in cases.items():
            res = admin.create_topics({name: spec}, raise_errors=False)
            got = {t["name"]: t["error_code"] for t in res["topics"]}
            assert got == {name: code}, f"{name}: {res}"

        # validate_only creates nothing.
        vname = f"{topic_name}-validate"
        res = admin.create_topics({vname: {"num_partitions": 2, "replication_factor": 1}}, validate_only=True)
        assert {t["name"]: t["error_code"] for t in res["topics"]} == {vname: 0}
        listed = set(admin.list_topics())
        assert vname not in listed
        assert not {f"{topic_name}-zero", f"{topic_name}-rf3", "bad name!"} & listed
    finally:
        admin.close()


@pytest.mark.timeout(120)
def test_delete_then_recreate_starts_empty(broker, topic_name):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15000)
    try:
        admin.create_topics({topic_name: {"num_partitions": 1, "replication_factor": 1}})
        admin.wait_for_topics([topic_name], timeout_ms=15000)
        old = sample_records(7, "old")
        assert produce(broker.bootstrap, topic_name, old) == list(range(7))
        admin.delete_topics([topic_name])
        deadline = time.monotonic() + 20
        for _ in range(100):
            if topic_name not in admin.list_topics() or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert topic_name not in admin.list_topics()
        admin.create_topics({topic_name: {"num_partitions": 1, "replication_factor": 1}})
        admin.wait_for_topics([topic_name], timeout_ms=15000)
    finally:
        admin.close()
    new = sample_records(3, "new")
    assert produce(broker.bootstrap, topic_name, new) == [0, 1, 2]
    got = consume(broker.bootstrap, topic_name, 3, timeout_s=10)
    assert_records(got, new)
    # Nothing of the old incarnation survives past the new records.
    more = consume(broker.bootstrap, topic_name, 4, timeout_s=3)
    assert [r.offset for r in more] == [0, 1, 2]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("api", ALL_APIS, ids=["magic0", "magic1", "default"])
def test_acks_0(broker, topic_name, api):
    """acks=0: no response from the broker (offsets unknown), all records stored nonetheless."""
    recs = sample_records(20, "a0", headers=api is None, ts=api != API_V0)
    # kafka-python synthesises the acks=0 "responses" itself, so the returned offsets carry no information.
    produce(broker.bootstrap, topic_name, recs, api_version=api, acks=0)
    got = consume(broker.bootstrap, topic_name, 20, api_version=api)
    assert [r.offset for r in got] == list(range(20))
    assert [(r.key, r.value) for r in got] == [(e["key"], e["value"]) for e in recs]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("api", [(0, 10, 1), None], ids=["listoffsets-v1", "default"])
def test_list_offsets(broker, topic_name, api):
    recs = sample_records(12, "lo", headers=api is None)
    assert produce(broker.bootstrap, topic_name, recs, api_version=api, compression_type="gzip") == list(range(12))
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False,
                             request_timeout_ms=15000, **({"api_version": api} if api else {}))
    try:
        tp = TopicPartition(topic_name, 0)
        assert consumer.beginning_offsets([tp], timeout_ms=15000) == {tp: 0}
        assert consumer.end_offsets([tp], timeout_ms=15000) == {tp: 12}
        res = consumer.offsets_for_times({tp: BASE_TS + 4}, timeout_ms=15000)[tp]
        assert (res.offset, res.timestamp) == (4, BASE_TS + 4)
        assert consumer.offsets_for_times({tp: BASE_TS + 1000}, timeout_ms=15000)[tp] is None
    finally:
        consumer.close()


@pytest.mark.timeout(120)
def test_multi_topic_request_and_multi_partition_fetch(broker, topic_name):
    """One producer, one linger window, two topics x several partitions; one consumer assigned to all."""
    topics = {f"{topic_name}-x": 3, f"{topic_name}-y": 2}
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15000)
    try:
        admin.create_topics({t: {"num_partitions": n, "replication_factor": 1} for t, n in topics.items()})
        admin.wait_for_topics(list(topics), timeout_ms=15000)
    finally:
        admin.close()
    producer = make_producer(broker.bootstrap, linger_ms=200)
    expected: dict[tuple[str, int], list[tuple[bytes, bytes]]] = {}
    try:
        futs = []
        for i in range(60):
            for t, nparts in topics.items():
                p = i % nparts
                k, v = f"{t}-{p}-k{i}".encode(), f"v{i}".encode()
                expected.setdefault((t, p), []).append((k, v))
                futs.append(((t, p), producer.send(t, key=k, value=v, partition=p)))
        producer.flush(timeout=SEND_TIMEOUT_S)
        acked: dict[tuple[str, int], list[int]] = {}
        for tp, f in futs:
            acked.setdefault(tp, []).append(f.get(timeout=SEND_TIMEOUT_S).offset)
    finally:
        producer.close(timeout=10)
    for tp, offs in acked.items():
        assert offs == list(range(len(expected[tp]))), tp

    total = sum(len(v) for v in expected.values())
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False,
                             request_timeout_ms=15000, fetch_max_wait_ms=200)
    got: dict[tuple[str, int], list] = {}
    try:
        tps = [TopicPartition(t, p) for t, n in topics.items() for p in range(n)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        deadline = time.monotonic() + CONSUME_TIMEOUT_S
        for _ in range(500):
            if sum(len(v) for v in got.values()) >= total or time.monotonic() > deadline:
                break
            for tp, recs in consumer.poll(timeout_ms=500).items():
                got.setdefault((tp.topic, tp.partition), []).extend(recs)
    finally:
        consumer.close()
    assert set(got) == set(expected)
    for tp, recs in got.items():
        assert [r.offset for r in recs] == list(range(len(expected[tp]))), tp
        assert [(r.key, r.value) for r in recs] == expected[tp], tp


@pytest.mark.timeout(120)
def test_mixed_formats_survive_graceful_restart(broker_factory, topic_name):
    b = broker_factory()
    r0 = sample_records(5, "rv0", headers=False, ts=False)
    r1 = sample_records(5, "rv1", headers=False)
    r2 = sample_records(5, "rv2")
    assert produce(b.bootstrap, topic_name, r0, api_version=API_V0) == list(range(0, 5))
    assert produce(b.bootstrap, topic_name, r1, api_version=API_V1, compression_type="gzip") == list(range(5, 10))
    assert produce(b.bootstrap, topic_name, r2, compression_type="gzip") == list(range(10, 15))
    assert b.stop() == 0
    b.start()
    r3 = sample_records(5, "after")
    assert produce(b.bootstrap, topic_name, r3) == list(range(15, 20))
    everything = r0 + r1 + r2 + r3
    for api in ALL_APIS:
        got = consume(b.bootstrap, topic_name, 20, api_version=api)
        assert [r.offset for r in got] == list(range(20)), f"api_version={api}"
        assert [(r.key, r.value) for r in got] == [(e["key"], e["value"]) for e in everything], f"api={api}"
    got = consume(b.bootstrap, topic_name, 20)
    assert [list(r.headers or []) for r in got] == [list(e.get("headers") or []) for e in everything]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("api", ALL_APIS, ids=["magic0", "magic1", "default"])
def test_out_of_range_fetch_resets_to_earliest(broker, topic_name, api):
    """Seeking past the log end gets OFFSET_OUT_OF_RANGE; auto_offset_reset=earliest then reads everything."""
    recs = sample_records(8, "oor", headers=api is None, ts=api != API_V0)
    assert produce(broker.bootstrap, topic_name, recs, api_version=api) == list(range(8))
    got = consume(broker.bootstrap, topic_name, 8, api_version=api, start_offset=1000)
    assert [r.offset for r in got] == list(range(8))
    assert [(r.key, r.value) for r in got] == [(e["key"], e["value"]) for e in recs]
