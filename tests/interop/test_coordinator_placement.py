"""Coordinator placement across an upgrade: a data directory written by a broker that places coordinator keys
as odradek did before issue 37 (`hash & 0x7FFFFFFF`, legacy_placement_broker.py) is served by this version,
which places them as Kafka does (`Utils.abs(hashCode) % partitions`) and moves what it finds under the old
partition. Committed offsets, a transactional id's producer id and epoch, and a share partition's state all
survive; a new commit lands in Kafka's partition, and the old partition keeps only tombstones of the key."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from odradek.coordinator.persistence import decode_key, decode_offset_value
from odradek.coordinator.placement import legacy_partition_for, partition_for
from odradek.coordinator.share_state import key_text
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from tests.conftest import BrokerProcess
from tests.interop.helpers import assert_delivered, bounded, consumer_config, produce_messages, wait_until
from tests.interop.test_broker_semantics import create_topic, request

LAUNCHER = Path(__file__).with_name("legacy_placement_broker.py")
PARTITIONS = 10
SETTINGS = {"offsets.topic.num.partitions": str(PARTITIONS),
            "transaction.state.log.num.partitions": str(PARTITIONS),
            "share.coordinator.state.topic.num.partitions": str(PARTITIONS)}
GROUP = "my-group"  # Java hashCode -1906497762: Kafka's partition 2 of 10, the old rule's 6
TXN_ID = "txn-neg"  # -885220435: Kafka's 5 of 10, the old rule's 3
SHARE_GROUP = "sg"
SHARE_TOPIC_ID = bytes(16)
SHARE_PARTITION = 3  # key "sg:AAAAAAAAAAAAAAAAAAAAAA:3", -1176519937: Kafka's 7 of 10, the old rule's 1


def _moved(key: str) -> tuple[int, int]:
    old, new = legacy_partition_for(key, PARTITIONS), partition_for(key, PARTITIONS)
    assert old != new, f"{key!r} must be placed differently by the two rules"
    return old, new


def _retry(call, message: str):
    """A coordinator request, asked again while the coordinator is loading or its topic being created."""
    retriable = {ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                 ErrorCode.NOT_COORDINATOR}

    def attempt():
        response = call()
        return None if response["error_code"] in retriable else response

    return wait_until(attempt, timeout=30, message=message)


def init_producer_id(bootstrap: str) -> tuple[int, int]:
    response = _retry(lambda: request(bootstrap, ApiKey.INIT_PRODUCER_ID, 1, {
        "transactional_id": TXN_ID, "transaction_timeout_ms": 60_000}), "InitProducerId")
    assert response["error_code"] == ErrorCode.NONE
    return response["producer_id"], response["producer_epoch"]


def share_state_call(bootstrap: str, api_key: int, **fields) -> dict:
    def call() -> dict:
        body = request(bootstrap, api_key, 0, {"group_id": SHARE_GROUP, "topics": [
            {"topic_id": SHARE_TOPIC_ID, "partitions": [{"partition": SHARE_PARTITION, **fields}]}]})
        return body["results"][0]["partitions"][0]

    return _retry(call, f"share-state api {api_key}")


def committed(bootstrap: str, topic: str) -> int:
    consumer = Consumer(consumer_config(bootstrap, **{"group.id": GROUP}))
    try:
        (tp,) = consumer.committed([TopicPartition(topic, 0)], timeout=30)
        return tp.offset
    finally:
        consumer.close()


def commit(bootstrap: str, topic: str, offset: int) -> None:
    consumer = Consumer(consumer_config(bootstrap, **{"group.id": GROUP}))
    try:
        (tp,) = consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
        assert tp.error is None, tp.error
    finally:
        consumer.close()


def offsets_records(bootstrap: str, partition: int) -> list[tuple[tuple, int | None]]:
    """The offset-commit records of GROUP in one partition of `__consumer_offsets`, read by a consumer:
    ((group, topic, partition), committed offset or None for a tombstone)."""
    consumer = Consumer(consumer_config(bootstrap, **{"group.id": "placement-reader", "enable.auto.commit": False}))
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition("__consumer_offsets", partition), timeout=10)
        consumer.assign([TopicPartition("__consumer_offsets", partition, 0)])
        found: list[tuple[tuple, int | None]] = []
        position = 0
        for _ in bounded(200, 30):
            if position >= high:
                break
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            position = message.offset() + 1
            key = decode_key(message.key())
            if key is not None and key[0] == "offset" and key[1] == GROUP:
                value = message.value()
                found.append((key[1:], None if value is None else decode_offset_value(value).offset))
        assert position >= high, f"__consumer_offsets-{partition} not read to its end {high}"
        return found
    finally:
        consumer.close()


@pytest.mark.timeout(180)
def test_an_upgrade_finds_and_moves_what_the_old_placement_stored(tmp_path: Path, topic_name: str):
    old_group, new_group = _moved(GROUP)
    _moved(TXN_ID)
    _moved(key_text(SHARE_GROUP, SHARE_TOPIC_ID, SHARE_PARTITION))

    before = BrokerProcess(tmp_path / "data", SETTINGS, command_prefix=[sys.executable, str(LAUNCHER)])
    before.start()
    try:
        create_topic(before.bootstrap, topic_name)
        assert_delivered(produce_messages(before.bootstrap, topic_name, [{"value": b"v%d" % i} for i in range(10)]))
        commit(before.bootstrap, topic_name, 7)
        producer_id, epoch = init_producer_id(before.bootstrap)
        written = share_state_call(before.bootstrap, ApiKey.WRITE_SHARE_GROUP_STATE, state_epoch=0, leader_epoch=2,
                                   start_offset=4, state_batches=[{"first_offset": 4, "last_offset": 5,
                                                                   "delivery_state": 2, "delivery_count": 1}])
        assert written["error_code"] == ErrorCode.NONE
        # the old broker put the commit in the old rule's partition
        assert offsets_records(before.bootstrap, old_group) == [((GROUP, topic_name, 0), 7)]
        assert offsets_records(before.bootstrap, new_group) == []
    finally:
        before.stop()

    after = BrokerProcess(tmp_path / "data", SETTINGS, port=before.port)
    after.start()
    try:
        assert committed(after.bootstrap, topic_name) == 7
        # the transactional id keeps its producer id: InitProducerId bumps the epoch
        assert init_producer_id(after.bootstrap) == (producer_id, epoch + 1)
        read = share_state_call(after.bootstrap, ApiKey.READ_SHARE_GROUP_STATE, leader_epoch=2)
        assert (read["error_code"], read["state_epoch"], read["start_offset"]) == (0, 0, 4)
        assert [(b["first_offset"], b["last_offset"], b["delivery_state"], b["delivery_count"])
                for b in read["state_batches"]] == [(4, 5, 2, 1)]
        # the load moved the group's record to Kafka's partition and tombstoned it in the old one
        wait_until(lambda: offsets_records(after.bootstrap, old_group)[-1:] == [((GROUP, topic_name, 0), None)],
                   timeout=30, message="the old partition's tombstone")
        assert offsets_records(after.bootstrap, new_group) == [((GROUP, topic_name, 0), 7)]
        commit(after.bootstrap, topic_name, 9)
        assert offsets_records(after.bootstrap, new_group)[-1] == ((GROUP, topic_name, 0), 9)
        assert offsets_records(after.bootstrap, old_group)[-1] == ((GROUP, topic_name, 0), None)
    finally:
        after.stop()

    # and once more: what the upgrade wrote is what a later start reads
    again = BrokerProcess(tmp_path / "data", SETTINGS, port=before.port)
    again.start()
    try:
        assert committed(again.bootstrap, topic_name) == 9
        assert init_producer_id(again.bootstrap) == (producer_id, epoch + 2)
        read = share_state_call(again.bootstrap, ApiKey.READ_SHARE_GROUP_STATE, leader_epoch=2)
        assert (read["start_offset"], len(read["state_batches"])) == (4, 1)
    finally:
        again.stop()
