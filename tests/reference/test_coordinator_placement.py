"""Coordinator placement, compared with Apache Kafka 4.4: the partition of `__consumer_offsets` a group's
offset commit is written to, and the partition of `__transaction_state` a transactional id's state is written
to, for ids whose Java hashCode is negative (where odradek's rule before issue 37 differed). FindCoordinator
cannot show it on one broker (every partition is led there), so the test reads the internal topics of both
brokers with a consumer and compares where the records went."""

from __future__ import annotations

import secrets
import time
from typing import Callable, Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition

from odradek.coordinator.persistence import decode_key as decode_offsets_key
from odradek.coordinator.placement import java_string_hash, legacy_partition_for, partition_for
from odradek.coordinator.txn_state import decode_key as decode_txn_key
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from tests.conftest import BrokerProcess
from tests.interop.helpers import bounded, consumer_config, wait_until
from tests.interop.test_broker_semantics import create_topic, request

from .conftest import ODRADEK_SETTINGS
from .test_differential import warm_up_coordinators

PARTITIONS = 50  # Kafka's default offsets.topic.num.partitions and transaction.state.log.num.partitions
TOKEN = secrets.token_hex(3)  # the reference runs for the whole session: fresh ids each run


def negative_id(prefix: str) -> str:
    """An id (unique to this run) with a negative Java hashCode, which the two rules place differently."""
    # the counter leads: the first characters carry the highest powers of 31, so the hash's sign varies with
    # it (a trailing counter moves the hash too little to change sign for most tokens)
    candidates = (f"{i}-{prefix}-{TOKEN}" for i in range(1000))
    return next(c for c in candidates
                if java_string_hash(c) < 0 and partition_for(c, PARTITIONS) != legacy_partition_for(c, PARTITIONS))


@pytest.fixture(scope="module")
def odradek_50(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """odradek with Kafka's partition counts for both internal topics (its own default for transactions is 1)."""
    broker = BrokerProcess(tmp_path_factory.mktemp("placement") / "data",
                           {**ODRADEK_SETTINGS, "transaction.state.log.num.partitions": str(PARTITIONS)})
    broker.start()
    yield broker
    broker.stop()


def holding(bootstrap: str, topic: str, candidates: set[int], owns: Callable[[bytes], bool]) -> set[int]:
    """Which of ``candidates`` (partitions of an internal topic) hold a record whose key ``owns`` accepts."""
    consumer = Consumer(consumer_config(bootstrap, **{"group.id": f"placement-reader-{TOKEN}",
                                                      "enable.auto.commit": False}))
    found = set()
    try:
        for partition in sorted(candidates):
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
            if high <= 0:
                continue
            consumer.assign([TopicPartition(topic, partition, 0)])
            position = 0
            for _ in bounded(400, 30):
                if position >= high:
                    break
                message = consumer.poll(0.5)
                if message is None or message.error():
                    continue
                position = message.offset() + 1
                if message.key() is not None and owns(message.key()):
                    found.add(partition)
            assert position >= high, f"{topic}-{partition} was not read to its end {high}"
    finally:
        consumer.close()
    return found


def commit_offset(bootstrap: str, group: str, topic: str) -> None:
    """A simple commit (no member), asked again while the coordinator loads; the last error is reported."""
    errors = []
    for _ in bounded(300, 60):
        response = request(bootstrap, ApiKey.OFFSET_COMMIT, 2, {
            "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "retention_time_ms": -1,
            "topics": [{"name": topic, "partitions": [
                {"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}]}]})
        errors.append(response["topics"][0]["partitions"][0]["error_code"])
        if errors[-1] == ErrorCode.NONE:
            return
        time.sleep(0.2)
    raise AssertionError(f"no offset commit of {group} on {bootstrap}: errors {errors[-3:]}")


def init_producer_id(bootstrap: str, txn_id: str) -> None:
    wait_until(lambda: request(bootstrap, ApiKey.INIT_PRODUCER_ID, 1, {
        "transactional_id": txn_id, "transaction_timeout_ms": 60_000})["error_code"] == ErrorCode.NONE,
        timeout=60, message=f"InitProducerId of {txn_id}")


@pytest.mark.timeout(240)
def test_a_group_and_a_transactional_id_land_in_kafkas_partition(kafka_reference, odradek_50):
    group, txn_id, topic = negative_id("placement-group"), negative_id("placement-txn"), f"placement-{TOKEN}"
    group_partitions = {partition_for(group, PARTITIONS), legacy_partition_for(group, PARTITIONS)}
    txn_partitions = {partition_for(txn_id, PARTITIONS), legacy_partition_for(txn_id, PARTITIONS)}

    def group_record(key: bytes) -> bool:
        decoded = decode_offsets_key(key)
        return decoded is not None and decoded[0] == "offset" and decoded[1] == group

    def txn_record(key: bytes) -> bool:
        try:
            return decode_txn_key(key) == txn_id
        except Exception:
            return False

    placed = {}
    for name, broker in (("kafka", kafka_reference), ("odradek", odradek_50)):
        warm_up_coordinators(broker.bootstrap)  # creates the internal topics, waits for their load
        create_topic(broker.bootstrap, topic)
        commit_offset(broker.bootstrap, group, topic)
        init_producer_id(broker.bootstrap, txn_id)
        placed[name] = (holding(broker.bootstrap, "__consumer_offsets", group_partitions, group_record),
                        holding(broker.bootstrap, "__transaction_state", txn_partitions, txn_record))
    assert placed["kafka"] == ({partition_for(group, PARTITIONS)}, {partition_for(txn_id, PARTITIONS)})
    assert placed["odradek"] == placed["kafka"]
