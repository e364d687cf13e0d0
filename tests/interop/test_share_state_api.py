"""The share coordinator's APIs (83-87), FindCoordinator key type SHARE, and AlterShareGroupOffsets (91) /
DeleteShareGroupOffsets (92), as raw requests to one broker (its own share coordinator: the local path)."""

from __future__ import annotations

import pytest
from confluent_kafka import AcknowledgeType

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from tests.interop.helpers import wait_until
from tests.interop.test_broker_semantics import request
from tests.interop.test_share_groups import close_quietly, poll_records, prepared_group, share_consumer

TOPIC_ID = b"\x01" * 16  # the share coordinator keeps states by key; the topic need not exist


def one(body: dict) -> dict:
    """The only partition result of a share-state response."""
    (topic,) = body["results"]
    (partition,) = topic["partitions"]
    return partition


def state_call(bootstrap: str, api_key: int, version: int, group: str, **fields) -> dict:
    return one(request(bootstrap, api_key, version, {"group_id": group, "topics": [
        {"topic_id": TOPIC_ID, "partitions": [{"partition": 0, **fields}]}]}))


def write(bootstrap: str, group: str, state_epoch: int, leader_epoch: int, start: int, batches: list) -> int:
    return state_call(bootstrap, ApiKey.WRITE_SHARE_GROUP_STATE, 0, group, state_epoch=state_epoch,
                      leader_epoch=leader_epoch, start_offset=start, state_batches=[
                          {"first_offset": f, "last_offset": la, "delivery_state": s, "delivery_count": c}
                          for f, la, s, c in batches])["error_code"]


@pytest.mark.timeout(60)
def test_share_state_write_read_merge_fence_initialize_delete(broker):
    b, group = broker.bootstrap, "state-api"
    read = state_call(b, ApiKey.READ_SHARE_GROUP_STATE, 0, group, leader_epoch=0)
    assert (read["error_code"], read["start_offset"], read["state_batches"]) == (0, -1, [])  # nothing stored
    assert write(b, group, 0, 3, 10, [(10, 12, 2, 1), (13, 14, 0, 2)]) == ErrorCode.NONE
    # a later write moves the start and replaces what its batches cover
    assert write(b, group, 0, 3, 11, [(13, 13, 4, 5)]) == ErrorCode.NONE
    read = state_call(b, ApiKey.READ_SHARE_GROUP_STATE, 0, group, leader_epoch=4)
    assert (read["error_code"], read["state_epoch"], read["start_offset"]) == (0, 0, 11)
    assert [(x["first_offset"], x["last_offset"], x["delivery_state"], x["delivery_count"])
            for x in read["state_batches"]] == [(11, 12, 2, 1), (13, 13, 4, 5), (14, 14, 0, 2)]
    # the read by leader epoch 4 fences leader 3, and a read by an older leader is refused
    assert write(b, group, 0, 3, 15, []) == ErrorCode.FENCED_LEADER_EPOCH
    assert state_call(b, ApiKey.READ_SHARE_GROUP_STATE, 0, group, leader_epoch=2)["error_code"] == \
        ErrorCode.FENCED_LEADER_EPOCH
    summary = state_call(b, ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 1, group, leader_epoch=-1)
    assert (summary["state_epoch"], summary["leader_epoch"], summary["start_offset"],
            summary["delivery_complete_count"]) == (0, 4, 11, 3)  # 11, 12 acknowledged, 13 archived
    # a new state epoch starts afresh and fences writes of the old one
    init = lambda epoch, start: state_call(b, ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0, group,  # noqa: E731
                                           state_epoch=epoch, start_offset=start)["error_code"]
    assert init(0, 20) == ErrorCode.FENCED_STATE_EPOCH
    assert init(1, 20) == ErrorCode.NONE
    assert write(b, group, 0, 4, 21, []) == ErrorCode.FENCED_STATE_EPOCH
    read = state_call(b, ApiKey.READ_SHARE_GROUP_STATE, 0, group, leader_epoch=4)
    assert (read["state_epoch"], read["start_offset"], read["state_batches"]) == (1, 20, [])
    assert state_call(b, ApiKey.DELETE_SHARE_GROUP_STATE, 0, group)["error_code"] == ErrorCode.NONE
    assert state_call(b, ApiKey.READ_SHARE_GROUP_STATE, 0, group, leader_epoch=0)["start_offset"] == -1
    assert state_call(b, ApiKey.DELETE_SHARE_GROUP_STATE, 0, group)["error_code"] == ErrorCode.NONE  # gone already


@pytest.mark.timeout(30)
def test_find_coordinator_of_a_share_partition_key(broker):
    key = "g:AQEBAQEBAQEBAQEBAQEBAQ:0"
    # The first ask creates __share_group_state and answers COORDINATOR_NOT_AVAILABLE meanwhile (as for
    # __consumer_offsets); clients ask again, so does this test, until a deadline.
    def ask() -> tuple[dict, dict] | None:
        found = request(broker.bootstrap, ApiKey.FIND_COORDINATOR, 6,
                        {"key_type": 2, "coordinator_keys": [key, "bad"]})["coordinators"]
        return None if found[0]["error_code"] == ErrorCode.COORDINATOR_NOT_AVAILABLE else found

    good, bad = wait_until(ask, timeout=15, message="the share coordinator of a key")
    assert good["error_code"] == 0 and good["port"] == int(broker.bootstrap.rsplit(":", 1)[1])
    assert bad["error_code"] == ErrorCode.INVALID_REQUEST
    old = request(broker.bootstrap, ApiKey.FIND_COORDINATOR, 5, {"key_type": 2, "coordinator_keys": [key]})
    assert old["coordinators"][0]["error_code"] == ErrorCode.INVALID_REQUEST  # SHARE needs v6


def alter(bootstrap: str, group: str, topic: str, partitions: list[tuple[int, int]]) -> dict:
    return request(bootstrap, ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, {"group_id": group, "topics": [
        {"topic_name": topic, "partitions": [{"partition_index": p, "start_offset": o} for p, o in partitions]}]})


def delete(bootstrap: str, group: str, topic: str) -> dict:
    return request(bootstrap, ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, {"group_id": group,
                                                                     "topics": [{"topic_name": topic}]})


def start_offset(bootstrap: str, group: str, topic: str) -> int:
    body = request(bootstrap, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, {"groups": [
        {"group_id": group, "topics": [{"topic_name": topic, "partitions": [0]}]}]})
    return body["groups"][0]["topics"][0]["partitions"][0]["start_offset"]


@pytest.mark.timeout(60)
def test_alter_and_delete_share_group_offsets(broker, topic_name):
    b = broker.bootstrap
    group = prepared_group(b, topic_name, 6)  # earliest, six records
    assert alter(b, "", topic_name, [(0, 1)])["error_code"] == ErrorCode.INVALID_GROUP_ID
    assert delete(b, "no-such-group", topic_name)["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND
    refused = alter(b, group, "no-such-topic", [(0, 1)])
    assert refused["error_code"] == 0
    assert refused["responses"][0]["partitions"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    checked = alter(b, group, topic_name, [(1, 0), (0, -5)])["responses"][0]["partitions"]
    assert [p["error_code"] for p in checked] == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.INVALID_REQUEST]
    # an empty group starts where it is told
    assert alter(b, group, topic_name, [(0, 3)])["responses"][0]["partitions"][0]["error_code"] == 0
    assert start_offset(b, group, topic_name) == 3
    consumer = share_consumer(b, group, explicit=True)
    try:
        consumer.subscribe([topic_name])
        got = poll_records(consumer, 3, 20, explicit_ack=AcknowledgeType.ACCEPT)
        assert sorted(m.offset() for m in got) == [3, 4, 5]
        # not while it has members
        assert alter(b, group, topic_name, [(0, 0)])["error_code"] == ErrorCode.NON_EMPTY_GROUP
        assert delete(b, group, topic_name)["error_code"] == ErrorCode.NON_EMPTY_GROUP
    finally:
        close_quietly(consumer)
    assert start_offset(b, group, topic_name) == 6
    deleted = delete(b, group, topic_name)
    assert deleted["error_code"] == 0 and deleted["responses"][0]["error_code"] == 0
    assert start_offset(b, group, topic_name) == -1  # no state: it starts afresh at its reset
    assert delete(b, group, "no-such-topic")["responses"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
