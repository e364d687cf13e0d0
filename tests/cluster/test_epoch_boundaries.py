"""Reads across leader epoch boundaries on a three-broker cluster: what a consumer is told at the last offset of
one epoch and the first of the next (the place where a fault test once reported an acknowledged record the
replicas all held as lost, after flapping leadership: docs/cluster.md, "Epoch boundaries").

The log is built with leadership moved twice (broker 1 → 2 by a controlled shutdown, back to 1 by a preferred
election), so it holds three epochs written by two leaders, the current leader having restarted in between.
The truth is read from the batch headers themselves; then, against the current leader:

- OffsetForLeaderEpoch (raw, with and without current_leader_epoch) answers, for every epoch, the epoch and
  the start of the next one (the log end for the latest), and UNDEFINED (-1, -1) above it, as Kafka's
  LeaderEpochFileCache.endOffsetFor does;
- a raw Fetch at every offset returns first the batch that holds that offset;
- librdkafka, assigned at each boundary with the leader epoch a consumer holds there (so it validates its
  position with OffsetForLeaderEpoch, KIP-320), returns exactly the offset it was placed at, and a consumer
  reading from the start returns every offset, also when leadership moves while it holds prefetched records.
"""

from __future__ import annotations

import logging
import time

import pytest
from confluent_kafka import Consumer, ElectionType, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from tests.cluster.common import REPLICATED
from tests.interop.helpers import wait_until
from tests.reference.differential import Connection, describe_records

PER_EPOCH = 6  # records per epoch: single-record batches, then one batch of several


def produce_epoch(bootstrap: str, topic: str, first: int) -> None:
    """PER_EPOCH acks=all records: PER_EPOCH - 3 batches of one record, then one batch of three."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 50,
                         "broker.address.family": "v4", "enable.idempotence": True})
    errors: list = []
    n = first
    for _ in range(PER_EPOCH - 3):
        producer.produce(topic, value=f"v-{n}".encode(), partition=0,
                         on_delivery=lambda err, _msg: errors.append(err) if err else None)
        n += 1
        assert producer.flush(30) == 0
    for _ in range(3):  # one linger: one batch
        producer.produce(topic, value=f"v-{n}".encode(), partition=0,
                         on_delivery=lambda err, _msg: errors.append(err) if err else None)
        n += 1
    assert producer.flush(30) == 0
    assert not errors, errors


def leader_and_epoch(conn: Connection, topic: str) -> tuple[int, int]:
    body = conn.request(ApiKey.METADATA, 9, {"topics": [{"name": topic}], "allow_auto_topic_creation": False,
                                             "include_cluster_authorized_operations": False,
                                             "include_topic_authorized_operations": False})
    part = body["topics"][0]["partitions"][0]
    return part["leader_id"], part["leader_epoch"]


def fetch(conn: Connection, topic: str, offset: int, current_epoch: int = -1, max_bytes: int = 1 << 20) -> dict:
    body = conn.request(ApiKey.FETCH, 12, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": max_bytes, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "rack_id": "",
        "topics": [{"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": current_epoch,
                                                    "fetch_offset": offset, "last_fetched_epoch": -1,
                                                    "log_start_offset": -1, "partition_max_bytes": max_bytes}]}],
        "forgotten_topics_data": []})
    return body["responses"][0]["partitions"][0]


def offset_for_epoch(conn: Connection, topic: str, epoch: int, current_epoch: int) -> tuple[int, int, int]:
    body = conn.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, {"replica_id": -1, "topics": [
        {"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": current_epoch,
                                         "leader_epoch": epoch}]}]})
    part = body["topics"][0]["partitions"][0]
    return part["error_code"], part["leader_epoch"], part["end_offset"]


def batches_of(records) -> list[dict]:
    data = bytes(records) if not isinstance(records, (bytes, bytearray)) else records
    described = describe_records(data)
    return [] if isinstance(described, str) else described


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def poll_first(consumer: Consumer, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            return msg
    return None


@pytest.mark.timeout(180)
def test_reads_across_leader_epoch_boundaries(cluster_factory, topic_name):
    cluster = cluster_factory(3, settings=REPLICATED).start()
    cluster.wait_ready()
    admin = cluster.admin()
    admin.create_topics([NewTopic(topic_name, num_partitions=1, replica_assignment=[[1, 2, 3]])])[topic_name].result(30)
    wait_until(lambda: len(cluster.partition_state(topic_name, 0).isr) == 3, timeout=30, message="a full ISR")

    produce_epoch(cluster.bootstrap, topic_name, 0)
    assert cluster.stop(1) == 0  # controlled shutdown: broker 2 or 3 leads in a new epoch
    wait_until(lambda: cluster.partition_state(topic_name, 0).leader in (2, 3), timeout=30, message="a new leader")
    produce_epoch(",".join(cluster.broker(b).bootstrap for b in (2, 3)), topic_name, PER_EPOCH)
    cluster.broker(1).start()
    wait_until(lambda: len(cluster.partition_state(topic_name, 0).isr) == 3, timeout=60,
               message="broker 1 back in the ISR")
    admin = cluster.admin()
    admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic_name, 0)]).result(30)
    wait_until(lambda: cluster.partition_state(topic_name, 0).leader == 1, timeout=30, message="broker 1 leading again")
    produce_epoch(cluster.bootstrap, topic_name, 2 * PER_EPOCH)
    total = 3 * PER_EPOCH
    wait_until(lambda: len(cluster.partition_state(topic_name, 0).isr) == 3, timeout=30, message="a full ISR")

    leader = cluster.broker(1)
    conn = Connection(leader.bootstrap)
    try:
        wait_until(lambda: leader_and_epoch(conn, topic_name)[0] == 1, timeout=30, message="broker 1 names itself")
        _, current = leader_and_epoch(conn, topic_name)
        # the truth: every batch's offsets and epoch, from the log itself
        whole = fetch(conn, topic_name, 0, current)
        assert whole["error_code"] == 0, whole
        assert whole["high_watermark"] == total, whole
        batches = batches_of(whole["records"])
        epoch_of = {}
        for b in batches:
            for o in range(b["base_offset"], b["base_offset"] + b["last_offset_delta"] + 1):
                epoch_of[o] = b["partition_leader_epoch"]
        assert sorted(epoch_of) == list(range(total)), f"offsets in the log: {sorted(epoch_of)}"
        epochs = sorted(set(epoch_of.values()))
        assert len(epochs) == 3, f"three epochs written, got {epochs}"
        starts = {e: min(o for o, x in epoch_of.items() if x == e) for e in epochs}

        # OffsetForLeaderEpoch: for each epoch, the start of the next one (the log end for the latest; the
        # leader's current epoch may be newer than the last epoch that wrote records, and then that one ends
        # where the current epoch started: the log end here)
        for current_epoch in (current, -1):
            for i, e in enumerate(epochs):
                end = starts[epochs[i + 1]] if i + 1 < len(epochs) else total
                assert offset_for_epoch(conn, topic_name, e, current_epoch) == (0, e, end), (e, current_epoch)
                # an epoch between two epochs that wrote records (no record of its own): the one below it
                if i + 1 < len(epochs) and epochs[i + 1] > e + 1:
                    assert offset_for_epoch(conn, topic_name, e + 1, current_epoch) == (0, e, end)
            assert offset_for_epoch(conn, topic_name, current, current_epoch) == (0, current, total)
            assert offset_for_epoch(conn, topic_name, current + 1, current_epoch) == (0, -1, -1)
        assert offset_for_epoch(conn, topic_name, epochs[0], current + 1)[0] == ErrorCode.UNKNOWN_LEADER_EPOCH
        assert offset_for_epoch(conn, topic_name, epochs[0], current - 1)[0] == ErrorCode.FENCED_LEADER_EPOCH

        # Fetch at every offset, also with a response limit of one byte: the first batch holds the offset
        for offset in range(total):
            for max_bytes in (1 << 20, 1):
                part = fetch(conn, topic_name, offset, current, max_bytes)
                assert part["error_code"] == 0, (offset, part)
                first = batches_of(part["records"])[0]
                assert first["base_offset"] <= offset <= first["base_offset"] + first["last_offset_delta"], \
                    (offset, max_bytes, first)
    finally:
        conn.close()

    # librdkafka placed at each boundary with the epoch it holds there: it validates the position with
    # OffsetForLeaderEpoch and returns the record at that very offset
    positions = []
    for e, nxt in zip(epochs, epochs[1:]):
        last = starts[nxt] - 1
        positions += [(last, e), (starts[nxt], e), (starts[nxt], nxt), (last - 1, e)]
    for offset, epoch in positions:
        lines = _Lines()
        client_log = logging.getLogger(f"{__name__}.librdkafka")
        client_log.propagate = False
        client_log.setLevel(logging.DEBUG)
        client_log.addHandler(lines)
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"{topic_name}-{offset}-{epoch}",
                             "enable.auto.commit": False, "broker.address.family": "v4",
                             "auto.offset.reset": "error", "debug": "fetch"}, logger=client_log)
        try:
            consumer.assign([TopicPartition(topic_name, 0, offset, leader_epoch=epoch)])
            msg = poll_first(consumer)
            assert msg is not None, f"nothing returned at offset {offset} (leader epoch {epoch})"
            assert msg.offset() == offset, f"placed at {offset} (leader epoch {epoch}), returned {msg.offset()}"
            assert msg.value() == f"v-{offset}".encode()
            # it did ask: the position was validated with OffsetForLeaderEpoch
            assert any("validation succeeded" in line for line in lines.lines), lines.lines[-20:]
        finally:
            consumer.close()
            client_log.removeHandler(lines)

    # from the start, with leadership moving while the consumer holds prefetched records it has not returned
    # yet: it validates its fetch position (ahead of what it returned) with the new leader, and returns every
    # offset once, in order, then a record of the new epoch
    lines = _Lines()
    client_log = logging.getLogger(f"{__name__}.librdkafka")
    client_log.addHandler(lines)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"{topic_name}-all",
                         "enable.auto.commit": False, "broker.address.family": "v4", "debug": "fetch"},
                        logger=client_log)
    try:
        consumer.assign([TopicPartition(topic_name, 0, 0)])
        seen = []
        deadline = time.monotonic() + 30
        while len(seen) < 2 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                seen.append(msg.offset())
        assert seen == [0, 1]
        assert cluster.stop(1) == 0
        wait_until(lambda: cluster.partition_state(topic_name, 0).leader in (2, 3), timeout=30,
                   message="a new leader")
        produce_epoch(",".join(cluster.broker(b).bootstrap for b in (2, 3)), topic_name, total)
        deadline = time.monotonic() + 60
        while len(seen) < total + PER_EPOCH and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                seen.append(msg.offset())
        assert seen == list(range(total + PER_EPOCH))
        assert any("validation succeeded" in line for line in lines.lines), lines.lines[-20:]
    finally:
        consumer.close()
        client_log.removeHandler(lines)
