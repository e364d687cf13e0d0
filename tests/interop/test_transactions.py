"""Transactions: the coordinator, markers, read_committed, fencing, transactional offsets, crashes.

Real transactional producers (confluent-kafka, kafka-python, the Java client) commit and abort; a
read_committed consumer sees only committed records, a read_uncommitted one sees aborted records too
(never the markers). A consume-transform-produce worker is SIGKILLed and restarted and must still produce
every input exactly once. Hand-built requests pin the coordinator's answers (fencing codes per version,
timeouts, staged offsets and require_stable, Describe/List APIs).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .helpers import bounded, java_value, wait_until
from .test_idempotence import RawClient, create_topic

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402

NONE = 0
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TRANSACTION_TIMEOUT = 50
UNKNOWN_TOPIC_OR_PARTITION = 3
OPERATION_NOT_ATTEMPTED = 55
UNSTABLE_OFFSET_COMMIT = 88
PRODUCER_FENCED = 90
TRANSACTIONAL_ID_NOT_FOUND = 105
WORKER = Path(__file__).parent / "txn_worker.py"


def txn_producer(bootstrap: str, txn_id: str, **extra) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "broker.address.family": "v4", "transactional.id": txn_id,
                  "linger.ms": 5, **extra})
    p.init_transactions(30)
    return p


def read_all(bootstrap: str, topic: str, isolation: str, partition: int = 0, idle_s: float = 1.0,
             max_s: float = 30.0) -> list[bytes]:
    """Every record of one partition, from the start, until nothing new arrives for ``idle_s``."""
    c = Consumer({"bootstrap.servers": bootstrap, "broker.address.family": "v4", "group.id": f"reader-{time.time()}",
                  "isolation.level": isolation, "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, partition, 0)])
    out: list[bytes] = []
    last = time.monotonic()
    for _ in bounded(10_000, max_s):
        m = c.poll(0.2)
        if m is None:
            if time.monotonic() - last > idle_s:
                break
            continue
        if m.error() is None:
            out.append(m.value())
            last = time.monotonic()
    c.close()
    return out


def watermarks(bootstrap: str, topic: str, isolation: str, partition: int = 0) -> tuple[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "broker.address.family": "v4", "group.id": "wm",
                  "isolation.level": isolation})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
    finally:
        c.close()


class TxnClient(RawClient):
    """Raw transaction APIs (hand-built requests through the project's codec)."""

    def init(self, txn_id: str, timeout_ms: int = 60000, version: int = 4, pid: int = -1, epoch: int = -1):
        r = self.call(22, version, {"transactional_id": txn_id, "transaction_timeout_ms": timeout_ms,
                                    "producer_id": pid, "producer_epoch": epoch})
        return r["error_code"], r["producer_id"], r["producer_epoch"]

    def add_partitions(self, txn_id: str, pid: int, epoch: int, topic: str, partitions: list[int],
                       version: int = 3) -> dict[int, int]:
        r = self.call(24, version, {"v3_and_below_transactional_id": txn_id, "v3_and_below_producer_id": pid,
                                    "v3_and_below_producer_epoch": epoch,
                                    "v3_and_below_topics": [{"name": topic, "partitions": partitions}]})
        return {p["partition_index"]: p["partition_error_code"]
                for t in r["results_by_topic_v3_and_below"] for p in t["results_by_partition"]}

    def add_offsets(self, txn_id: str, pid: int, epoch: int, group: str, version: int = 3) -> int:
        return self.call(25, version, {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch,
                                       "group_id": group})["error_code"]

    def txn_offset_commit(self, txn_id: str, group: str, pid: int, epoch: int, topic: str, offset: int) -> int:
        r = self.call(28, 3, {"transactional_id": txn_id, "group_id": group, "producer_id": pid,
                              "producer_epoch": epoch, "generation_id": -1, "member_id": "",
                              "group_instance_id": None, "topics": [{"name": topic, "partitions": [
                                  {"partition_index": 0, "committed_offset": offset, "committed_leader_epoch": -1,
                                   "committed_metadata": "m"}]}]})
        return r["topics"][0]["partitions"][0]["error_code"]

    def end(self, txn_id: str, pid: int, epoch: int, commit: bool, version: int = 3) -> int:
        return self.call(26, version, {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch,
                                       "committed": commit})["error_code"]

    def offset_fetch(self, group: str, topic: str, require_stable: bool) -> tuple[int, int]:
        r = self.call(9, 7, {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}],
                             "require_stable": require_stable})
        p = r["topics"][0]["partitions"][0]
        return p["error_code"], p["committed_offset"]

    def describe(self, txn_id: str) -> dict:
        return self.call(65, 0, {"transactional_ids": [txn_id]})["transaction_states"][0]

    def list(self, states: list[str] = (), pids: list[int] = ()) -> tuple[list[tuple[str, int, str]], list[str]]:
        r = self.call(66, 1, {"state_filters": list(states), "producer_id_filters": list(pids),
                              "duration_filter": -1})
        return ([(t["transactional_id"], t["producer_id"], t["transaction_state"]) for t in r["transaction_states"]],
                r["unknown_state_filters"])

    def producers(self, topic: str, partition: int = 0) -> list[dict]:
        r = self.call(61, 0, {"topics": [{"name": topic, "partition_indexes": [partition]}]})
        return r["topics"][0]["partitions"][0]["active_producers"]

    def list_offset(self, topic: str, isolation: int) -> int:
        r = self.call(2, 5, {"replica_id": -1, "isolation_level": isolation, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})
        return r["topics"][0]["partitions"][0]["offset"]


# ----------------------------------------------------------------------------------- real clients


@pytest.mark.timeout(90)
def test_confluent_commit_abort_and_isolation(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    p = txn_producer(broker.bootstrap, f"{topic_name}-tx")
    p.begin_transaction()
    for i in range(5):
        p.produce(topic_name, value=b"c%d" % i, partition=0)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(4):
        p.produce(topic_name, value=b"a%d" % i, partition=0)
    p.flush(30)  # the aborted records reach the log
    p.abort_transaction(30)
    # an open transaction holds the LSO back: read_committed "latest" stops at its first record
    p.begin_transaction()
    p.produce(topic_name, value=b"d0", partition=0)
    p.flush(30)
    assert watermarks(broker.bootstrap, topic_name, "read_uncommitted")[1] == 12
    assert watermarks(broker.bootstrap, topic_name, "read_committed")[1] == 11
    assert read_all(broker.bootstrap, topic_name, "read_committed", idle_s=0.5) == [b"c%d" % i for i in range(5)]
    p.produce(topic_name, value=b"d1", partition=0)
    p.commit_transaction(30)
    committed = [b"c%d" % i for i in range(5)] + [b"d0", b"d1"]
    assert read_all(broker.bootstrap, topic_name, "read_committed") == committed
    assert read_all(broker.bootstrap, topic_name, "read_uncommitted") == (
        committed[:5] + [b"a%d" % i for i in range(4)] + committed[5:])
    assert watermarks(broker.bootstrap, topic_name, "read_committed")[1] == 14


@pytest.mark.timeout(90)
def test_kafka_python_commit_and_abort(broker, topic_name):
    kafka = pytest.importorskip("kafka")
    create_topic(broker.bootstrap, topic_name)
    p = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=f"{topic_name}-kp")
    p.init_transactions()
    p.begin_transaction()
    for i in range(3):
        p.send(topic_name, b"c%d" % i, partition=0)
    p.commit_transaction()
    p.begin_transaction()
    for i in range(3):
        p.send(topic_name, b"a%d" % i, partition=0)
    p.flush()
    p.abort_transaction()
    p.close()
    assert read_all(broker.bootstrap, topic_name, "read_committed") == [b"c0", b"c1", b"c2"]
    assert read_all(broker.bootstrap, topic_name, "read_uncommitted") == [b"c0", b"c1", b"c2", b"a0", b"a1", b"a2"]
    c = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level="read_committed",
                            auto_offset_reset="earliest", consumer_timeout_ms=2000)
    c.assign([kafka.TopicPartition(topic_name, 0)])
    assert [m.value for m in c] == [b"c0", b"c1", b"c2"]
    c.close()


@pytest.mark.timeout(180)
def test_java_transactional_producer_and_read_committed_consumer(broker, topic_name, java_client):
    create_topic(broker.bootstrap, topic_name)
    out = java_client.run("produce-txn", broker.bootstrap, topic_name, 5, "commit", f"{topic_name}-j", "c")
    assert out == ["0", "1", "2", "3", "4", "committed"]
    out = java_client.run("produce-txn", broker.bootstrap, topic_name, 3, "abort", f"{topic_name}-j", "a")
    assert out == ["6", "7", "8", "aborted"]
    out = java_client.run("produce-txn", broker.bootstrap, topic_name, 2, "commit", f"{topic_name}-j", "d")
    assert out == ["10", "11", "committed"]
    got = java_client.consume(broker.bootstrap, topic_name, 7, isolation="read_committed")
    assert [r["value"] for r in got] == [java_value("c", i) for i in range(5)] + [java_value("d", i) for i in range(2)]
    assert [r["offset"] for r in got] == [0, 1, 2, 3, 4, 10, 11]
    got = java_client.consume(broker.bootstrap, topic_name, 10, isolation="read_uncommitted")
    assert [r["offset"] for r in got] == [0, 1, 2, 3, 4, 6, 7, 8, 10, 11]
    # the Java producer's epochs went 0, 1, 2 on one producer id
    c = TxnClient(broker.bootstrap)
    try:
        d = c.describe(f"{topic_name}-j")
        assert (d["error_code"], d["transaction_state"], d["producer_epoch"]) == (NONE, "CompleteCommit", 2)
    finally:
        c.close()


@pytest.mark.timeout(90)
def test_second_producer_fences_the_first(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    txn_id = f"{topic_name}-z"
    zombie = txn_producer(broker.bootstrap, txn_id)
    zombie.begin_transaction()
    zombie.produce(topic_name, value=b"zombie", partition=0)
    zombie.flush(30)
    successor = txn_producer(broker.bootstrap, txn_id)  # aborts the zombie's transaction, bumps the epoch
    successor.begin_transaction()
    successor.produce(topic_name, value=b"successor", partition=0)
    successor.commit_transaction(30)
    with pytest.raises(ck.KafkaException) as info:
        zombie.produce(topic_name, value=b"late", partition=0)
        zombie.commit_transaction(30)
    assert info.value.args[0].fatal()
    assert read_all(broker.bootstrap, topic_name, "read_committed") == [b"successor"]
    assert read_all(broker.bootstrap, topic_name, "read_uncommitted") == [b"zombie", b"successor"]


@pytest.mark.timeout(240)
def test_consume_transform_produce_exactly_once_across_kills(broker, topic_name):
    src, dst, total = f"{topic_name}-in", f"{topic_name}-out", 1000
    create_topic(broker.bootstrap, src, 2)
    create_topic(broker.bootstrap, dst, 2)
    p = Producer({"bootstrap.servers": broker.bootstrap, "broker.address.family": "v4", "linger.ms": 5})
    for i in range(total):
        p.produce(src, value=b"m%d" % i, partition=i % 2)
    assert p.flush(30) == 0
    cmd = [sys.executable, str(WORKER), broker.bootstrap, src, dst, f"{topic_name}-g", f"{topic_name}-w", str(total)]
    rng = random.Random(7)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    kills = 0
    for attempt in bounded(8, 200):
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if kills < 3:
            try:
                proc.wait(rng.uniform(0.5, 2.5))
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                kills += 1
                continue
        try:
            rc = proc.wait(120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            pytest.fail("worker did not finish")
        assert rc == 0, proc.stderr.read()[-3000:]
        break
    assert kills == 3
    expected = {i: b"out-m%d" % i for i in range(total)}
    for part in range(2):
        got = read_all(broker.bootstrap, dst, "read_committed", partition=part)
        assert sorted(got) == sorted(v for i, v in expected.items() if i % 2 == part)  # each once, none missing


# ----------------------------------------------------------------------------------- crashes


@pytest.mark.timeout(180)
def test_broker_crash_mid_transaction(broker_factory, topic_name):
    b = broker_factory({"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"})
    create_topic(b.bootstrap, topic_name)
    done = txn_producer(b.bootstrap, "crash-done")
    done.begin_transaction()
    for i in range(3):
        done.produce(topic_name, value=b"c%d" % i, partition=0)
    done.commit_transaction(30)
    open_ = txn_producer(b.bootstrap, "crash-open", **{"transaction.timeout.ms": 5000})
    open_.begin_transaction()
    for i in range(2):
        open_.produce(topic_name, value=b"o%d" % i, partition=0)
    open_.flush(30)
    c = TxnClient(b.bootstrap)
    try:
        pids_before = {e["producer_id"] for e in c.producers(topic_name)}
        assert c.describe("crash-open")["transaction_state"] == "Ongoing"
    finally:
        c.close()
    b.kill()
    b.start()
    c = TxnClient(b.bootstrap)
    try:
        # the open transaction keeps holding the LSO until its timeout aborts it (and bumps its epoch)
        wait_until(lambda: c.describe("crash-open")["transaction_state"] == "CompleteAbort", timeout=60)
        d = c.describe("crash-open")
        assert d["producer_epoch"] == 1
        assert c.list_offset(topic_name, 1) == c.list_offset(topic_name, 0) == 7
        assert c.describe("crash-done")["transaction_state"] == "CompleteCommit"
        err, pid, _ = c.init("crash-new")
        assert err == NONE and pid not in pids_before
        err, pid2, _ = c.init_producer_id(None)
        assert err == NONE and pid2 not in pids_before | {pid}
    finally:
        c.close()
    assert read_all(b.bootstrap, topic_name, "read_committed") == [b"c0", b"c1", b"c2"]
    assert read_all(b.bootstrap, topic_name, "read_uncommitted") == [b"c0", b"c1", b"c2", b"o0", b"o1"]
    # and again after a clean restart: the aborted-transaction index is read back from disk
    b.restart()
    assert read_all(b.bootstrap, topic_name, "read_committed") == [b"c0", b"c1", b"c2"]
    del open_


# ----------------------------------------------------------------------------------- protocol details


@pytest.mark.timeout(60)
def test_coordinator_answers(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    txn_id, group = f"{topic_name}-raw", f"{topic_name}-grp"
    c = TxnClient(broker.bootstrap)
    try:
        assert c.init(txn_id, timeout_ms=900_001)[0] == INVALID_TRANSACTION_TIMEOUT
        assert c.init(txn_id, timeout_ms=0)[0] == INVALID_TRANSACTION_TIMEOUT
        err, pid, epoch = c.init(txn_id)
        assert (err, epoch) == (NONE, 0)
        assert c.init(txn_id, version=4, pid=pid, epoch=0) == (NONE, pid, 1)
        assert c.init(txn_id, version=4, pid=pid, epoch=0) == (NONE, pid, 1)  # a retry of the last bump
        assert c.init(txn_id, version=4, pid=pid, epoch=1) == (NONE, pid, 2)
        assert c.init(txn_id, version=4, pid=pid, epoch=0)[0] == PRODUCER_FENCED  # stale epoch
        assert c.init(txn_id, version=3, pid=pid, epoch=0)[0] == INVALID_PRODUCER_EPOCH
        epoch = 2
        # stale epochs: fenced code by version; unknown ids; unknown partitions
        assert c.add_partitions(txn_id, pid, 0, topic_name, [0], version=0) == {0: INVALID_PRODUCER_EPOCH}
        assert c.add_partitions(txn_id, pid, 0, topic_name, [0], version=2) == {0: PRODUCER_FENCED}
        assert c.add_partitions(txn_id, pid + 1, epoch, topic_name, [0]) == {0: INVALID_PRODUCER_ID_MAPPING}
        assert c.add_partitions(txn_id, pid, epoch, topic_name, [0, 9]) == {
            0: OPERATION_NOT_ATTEMPTED, 9: UNKNOWN_TOPIC_OR_PARTITION}
        assert c.end(txn_id, pid, epoch, True) == INVALID_TXN_STATE  # nothing open
        # staged offsets are invisible until the commit; require_stable reports them
        assert c.add_partitions(txn_id, pid, epoch, topic_name, [0]) == {0: NONE}
        assert c.add_offsets(txn_id, pid, epoch, group) == NONE
        assert c.txn_offset_commit(txn_id, group, pid, epoch, topic_name, 42) == NONE
        assert c.offset_fetch(group, topic_name, require_stable=True) == (UNSTABLE_OFFSET_COMMIT, -1)
        assert c.offset_fetch(group, topic_name, require_stable=False) == (NONE, -1)
        d = c.describe(txn_id)
        assert d["transaction_state"] == "Ongoing" and d["transaction_start_time_ms"] > 0
        assert {t["topic"] for t in d["topics"]} == {topic_name, "__consumer_offsets"}
        listed, unknown = c.list(["Ongoing", "Bogus"], [pid])
        assert listed == [(txn_id, pid, "Ongoing")] and unknown == ["Bogus"]
        assert c.end(txn_id, pid, epoch, True) == NONE
        assert c.end(txn_id, pid, epoch, True) == NONE  # a retry
        assert c.end(txn_id, pid, epoch, False) == INVALID_TXN_STATE
        assert c.offset_fetch(group, topic_name, require_stable=True) == (NONE, 42)
        # an aborted transaction's offsets are dropped
        assert c.add_offsets(txn_id, pid, epoch, group) == NONE
        assert c.txn_offset_commit(txn_id, group, pid, epoch, topic_name, 99) == NONE
        assert c.end(txn_id, pid, epoch, False) == NONE
        assert c.offset_fetch(group, topic_name, require_stable=True) == (NONE, 42)
        assert c.describe(txn_id)["transaction_state"] == "CompleteAbort"
        assert c.describe("no-such-id")["error_code"] == TRANSACTIONAL_ID_NOT_FOUND
        # TxnOffsetCommit outside a transaction, and with a stale epoch
        assert c.txn_offset_commit(txn_id, group, pid, epoch, topic_name, 7) == INVALID_TXN_STATE
        assert c.txn_offset_commit(txn_id, group, pid, 0, topic_name, 7) == INVALID_PRODUCER_EPOCH
    finally:
        c.close()
