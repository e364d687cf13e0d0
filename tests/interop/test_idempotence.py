"""Idempotent producers: InitProducerId, sequence/epoch checks on Produce, duplicates, restarts.

Real clients with idempotence on (confluent-kafka, the Java producer with its default settings, kafka-python)
must deliver every record exactly once and in order; hand-built Produce v9 requests pin the broker's
answers to retries, gaps and zombie epochs, also across a graceful restart and a crash.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from odradek.protocol.codec import decode_response, encode_request
from odradek.records.batch import iter_batches
from odradek.records.codec import build_batch

from .helpers import assert_delivered, connect, consume_messages, java_value, produce_messages, read_frame

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

NONE = 0
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47
INVALID_REQUEST = 42
TS = 1_720_000_000_000


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4"})
    futures = admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=10)
    for f in futures.values():
        f.result(timeout=15)


def stored_batches(data_dir: Path, topic: str, partition: int) -> list:
    """Headers of every batch on disk for one partition (all segments, in offset order)."""
    pdir = data_dir / f"{topic}-{partition}"
    out = []
    for seg in sorted(pdir.glob("*.log")):
        out += [h for _, h in iter_batches(seg.read_bytes())]
    return out


class RawClient:
    """One connection speaking InitProducerId v4 and Produce v9 with hand-built batches."""

    def __init__(self, bootstrap: str) -> None:
        self.sock = connect(bootstrap)
        self.corr = 0

    def close(self) -> None:
        self.sock.close()

    def call(self, api_key: int, version: int, body: dict) -> dict:
        self.corr += 1
        self.sock.sendall(encode_request(api_key, version, self.corr, "idempotence-test", body))
        corr, resp = decode_response(api_key, version, read_frame(self.sock))
        assert corr == self.corr
        return resp

    def init_producer_id(self, transactional_id: str | None = None, version: int = 4, producer_id: int = -1,
                         producer_epoch: int = -1) -> tuple[int, int, int]:
        resp = self.call(22, version, {"transactional_id": transactional_id, "transaction_timeout_ms": 60000,
                                       "producer_id": producer_id, "producer_epoch": producer_epoch})
        return resp["error_code"], resp["producer_id"], resp["producer_epoch"]

    def produce(self, topic: str, raw: bytes, partition: int = 0) -> tuple[int, int]:
        resp = self.call(0, 9, {"transactional_id": None, "acks": -1, "timeout_ms": 10000, "topic_data": [
            {"name": topic, "partition_data": [{"index": partition, "records": raw}]}]})
        part = resp["responses"][0]["partition_responses"][0]
        return part["error_code"], part["base_offset"]


def idem_batch(pid: int, epoch: int, seq: int, count: int = 3, tag: str = "") -> bytes:
    recs = [(None, f"{tag}p{pid}-e{epoch}-s{seq + i}".encode(), None, TS + i) for i in range(count)]
    return build_batch(recs, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


# ----------------------------------------------------------------------------------- real clients


@pytest.mark.timeout(120)
def test_confluent_idempotent_producer_exactly_once_in_order(broker, topic_name):
    partitions, n = 4, 2000
    create_topic(broker.bootstrap, topic_name, partitions)
    specs = [{"value": f"m-{i}".encode(), "key": f"k-{i}".encode(), "partition": i % partitions} for i in range(n)]
    cfg = {"enable.idempotence": True, "acks": "all", "linger.ms": 2, "batch.num.messages": 50}
    msgs = assert_delivered(produce_messages(broker.bootstrap, topic_name, specs, config=cfg))
    for p in range(partitions):
        mine = [m for m in msgs if m.partition() == p]
        assert [m.offset() for m in mine] == list(range(n // partitions))
        got = consume_messages(broker.bootstrap, topic_name, n // partitions, partition=p, extra_wait=0.3)
        assert [m.value() for m in got] == [f"m-{i}".encode() for i in range(p, n, partitions)]
    headers = stored_batches(broker.data_dir, topic_name, 0)
    assert headers and all(h.producer_id >= 0 and h.producer_epoch == 0 for h in headers)
    assert headers[0].base_sequence == 0


@pytest.mark.timeout(150)
def test_java_default_producer_is_idempotent(broker, topic_name, java_client):
    partitions, n = 3, 300
    create_topic(broker.bootstrap, topic_name, partitions)
    lines = java_client.run("produce-default", broker.bootstrap, topic_name, n, partitions, "jd-")
    acked = [tuple(int(x) for x in line.split("\t")) for line in lines]
    assert [p for p, _ in acked] == [i % partitions for i in range(n)]
    for p in range(partitions):
        assert [o for q, o in acked if q == p] == list(range(len(range(p, n, partitions))))
        got = java_client.consume(broker.bootstrap, topic_name, len(range(p, n, partitions)), partition=p)
        assert [r["value"] for r in got] == [java_value("jd-", i) for i in range(p, n, partitions)]
        headers = stored_batches(broker.data_dir, topic_name, p)
        assert headers and all(h.producer_id >= 0 for h in headers), "the default Java producer is idempotent"


@pytest.mark.timeout(120)
def test_kafka_python_idempotent_producer(broker, topic_name):
    kafka = pytest.importorskip("kafka")
    partitions, n = 2, 400
    create_topic(broker.bootstrap, topic_name, partitions)
    producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=True, acks="all",
                                   linger_ms=5, request_timeout_ms=15000, max_block_ms=20000)
    try:
        futures = [producer.send(topic_name, value=f"kp-{i}".encode(), partition=i % partitions) for i in range(n)]
        producer.flush(timeout=30)
        metas = [f.get(timeout=30) for f in futures]
    finally:
        producer.close(timeout=10)
    for p in range(partitions):
        assert [m.offset for m in metas if m.partition == p] == list(range(n // partitions))
        got = consume_messages(broker.bootstrap, topic_name, n // partitions, partition=p, extra_wait=0.3)
        assert [m.value() for m in got] == [f"kp-{i}".encode() for i in range(p, n, partitions)]
        assert all(h.producer_id >= 0 for h in stored_batches(broker.data_dir, topic_name, p))


# ------------------------------------------------------------------------- hand-built requests


@pytest.mark.timeout(60)
def test_retry_gap_and_zombie_epoch(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    c = RawClient(broker.bootstrap)
    try:
        err, pid, epoch = c.init_producer_id()
        assert (err, epoch) == (NONE, 0) and pid >= 0
        first = idem_batch(pid, 0, 0)
        assert c.produce(topic_name, first) == (NONE, 0)
        assert c.produce(topic_name, first) == (NONE, 0)  # the retry: same base offset, not stored again
        assert c.produce(topic_name, idem_batch(pid, 0, 3)) == (NONE, 3)
        assert c.produce(topic_name, first) == (NONE, 0)  # still among the last five batches
        assert c.produce(topic_name, idem_batch(pid, 0, 5))[0] == OUT_OF_ORDER_SEQUENCE_NUMBER  # gap (6 expected)
        assert c.produce(topic_name, idem_batch(pid, 0, 6)) == (NONE, 6)
        # A new epoch restarts the sequence; the old epoch is now a zombie and is fenced.
        assert c.produce(topic_name, idem_batch(pid, 1, 0, tag="new-")) == (NONE, 9)
        assert c.produce(topic_name, idem_batch(pid, 0, 9))[0] == INVALID_PRODUCER_EPOCH
        assert c.produce(topic_name, idem_batch(pid, 1, 3, tag="new-")) == (NONE, 12)
        headers = stored_batches(broker.data_dir, topic_name, 0)
        assert [(h.base_offset, h.producer_epoch, h.base_sequence) for h in headers] == [
            (0, 0, 0), (3, 0, 3), (6, 0, 6), (9, 1, 0), (12, 1, 3)]
        got = consume_messages(broker.bootstrap, topic_name, 15, extra_wait=0.3)
        assert len(got) == 15
    finally:
        c.close()


@pytest.mark.timeout(30)
def test_init_producer_id_versions_and_transactional_ids(broker):
    c = RawClient(broker.bootstrap)
    try:
        ids = []
        for version in range(6):
            err, pid, epoch = c.init_producer_id(version=version)
            assert (err, epoch) == (NONE, 0)
            ids.append(pid)
        # v3+: an idempotent producer re-initialising with its id and epoch gets a fresh id (as in Kafka)
        err, pid, epoch = c.init_producer_id(version=4, producer_id=ids[-1], producer_epoch=0)
        assert (err, epoch) == (NONE, 0)
        ids.append(pid)
        assert len(set(ids)) == len(ids)
        assert c.init_producer_id(version=4, producer_id=ids[-1], producer_epoch=-1)[0] == INVALID_REQUEST
        # a transactional id keeps its producer id and gets the next epoch (tests/interop/test_transactions.py)
        err, txn_pid, epoch = c.init_producer_id("txn-1")
        assert (err, epoch) == (NONE, 0) and txn_pid not in ids
        assert c.init_producer_id("txn-1") == (NONE, txn_pid, 1)
        assert c.init_producer_id("", version=0)[0] == INVALID_REQUEST
    finally:
        c.close()


# ------------------------------------------------------------------------------------ restarts


@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", ["stop", "kill"])
def test_duplicate_detected_and_ids_not_reused_after_restart(broker_factory, how):
    b = broker_factory({"log.segment.bytes": "600"})  # several rolls, so roll snapshots are exercised too
    topic = f"idem-restart-{how}"
    create_topic(b.bootstrap, topic)
    c = RawClient(b.bootstrap)
    seen_ids = set()
    try:
        err, pid, _ = c.init_producer_id()
        assert err == NONE
        seen_ids.add(pid)
        seq = 0
        for i in range(8):
            assert c.produce(topic, idem_batch(pid, 0, seq)) == (NONE, seq)
            seq += 3
        last = idem_batch(pid, 0, seq)
        assert c.produce(topic, last) == (NONE, seq)
    finally:
        c.close()

    for round_ in range(2):
        if how == "stop" or round_ == 0:
            b.stop()
        else:
            b.kill()
        b.start()
        c = RawClient(b.bootstrap)
        try:
            assert c.produce(topic, last) == (NONE, seq), "the retry of the last batch is still a duplicate"
            assert c.produce(topic, idem_batch(pid, 0, seq + 7))[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
            err, new_pid, _ = c.init_producer_id()
            assert err == NONE and new_pid not in seen_ids and new_pid > max(seen_ids)
            seen_ids.add(new_pid)
            seq += 3
            last = idem_batch(pid, 0, seq)
            assert c.produce(topic, last) == (NONE, seq)
        finally:
            c.close()
        if how == "kill":
            b.kill()  # crash right after the last append: no snapshot of it, only the log
            b.start()
            c = RawClient(b.bootstrap)
            try:
                assert c.produce(topic, last) == (NONE, seq)
            finally:
                c.close()
    assert len(stored_batches(b.data_dir, topic, 0)) == seq // 3 + 1
