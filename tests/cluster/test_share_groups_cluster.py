"""Share groups in a cluster (KIP-932): the share-partition leader keeps a group's in-flight window and stores
it at the share coordinator of the key (the leader of its `__share_group_state` partition, another broker
here). Killing either one loses nothing: the new share-partition leader reads the state from the share
coordinator (ReadShareGroupState), and a new share coordinator replays its partition from the replicated
log. Accepted records are never delivered again; released, held and never-delivered ones all are."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import AcknowledgeType

from odradek.coordinator.persistence import partition_for
from odradek.coordinator.share_state import SHARE_STATE_TOPIC, key_text
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from tests.cluster.common import REPLICATED, create_topic
from tests.interop.helpers import wait_until
from tests.interop.test_broker_semantics import request
from tests.interop.test_share_groups import (close_quietly, kill, member_output, poll_records, produce,
                                             share_consumer, start_member)

STATE_PARTITIONS = 3
SETTINGS = {**REPLICATED, "share.coordinator.state.topic.num.partitions": str(STATE_PARTITIONS),
            "share.coordinator.state.topic.replication.factor": "3"}
RECORDS, ACCEPT, RELEASE = 12, 4, 7  # the member accepts offsets 0-3, releases 4-6 and holds the rest


def one_broker(cluster) -> str:
    """The address of a running broker, for a raw request."""
    return cluster.broker(cluster.running_ids()[0]).bootstrap


def topic_id(bootstrap: str, topic: str) -> bytes:
    body = request(bootstrap, ApiKey.METADATA, 12, {"topics": [{"topic_id": bytes(16), "name": topic}],
                                                    "allow_auto_topic_creation": False,
                                                    "include_topic_authorized_operations": False})
    return body["topics"][0]["topic_id"]


def share_coordinator(cluster, key: str) -> int:
    """The share coordinator of ``key`` (FindCoordinator key type SHARE), once there is one."""
    def ask():
        body = request(one_broker(cluster), ApiKey.FIND_COORDINATOR, 6, {"key_type": 2, "coordinator_keys": [key]})
        (found,) = body["coordinators"]
        return found["node_id"] if found["error_code"] == 0 else None
    return wait_until(ask, timeout=30, interval=0.2, message=f"a share coordinator for {key}")


def summary(bootstrap: str, group: str, tid: bytes) -> tuple[int, int]:
    """(error, start offset) of partition 0's state at the share coordinator ``bootstrap``."""
    body = request(bootstrap, ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 1, {"group_id": group, "topics": [
        {"topic_id": tid, "partitions": [{"partition": 0, "leader_epoch": -1}]}]})
    answer = body["results"][0]["partitions"][0]
    return answer["error_code"], answer["start_offset"]


def stored_start(cluster, node: int, group: str, tid: bytes, want: int) -> None:
    seen = []

    def stored() -> bool:
        seen.append(summary(cluster.broker(node).bootstrap, group, tid))
        return seen[-1] == (ErrorCode.NONE, want)

    try:
        wait_until(stored, timeout=30, interval=0.2, message=f"start offset {want} stored at broker {node}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; last (error, start): {seen[-1:]}\n{cluster.logs()}") from None


def prepared(cluster, topic: str) -> tuple[str, bytes, int, int]:
    """A cluster with ``topic`` (one partition, RF 3) and a group whose share coordinator is not the
    partition's leader: (group, topic id, leader, share coordinator)."""
    cluster.start()
    cluster.wait_ready()
    create_topic(cluster, topic, partitions=1)
    tid = topic_id(one_broker(cluster), topic)
    share_coordinator(cluster, key_text("warm-up", tid, 0))  # creates __share_group_state
    wait_until(lambda: all(len(cluster.partition_state(SHARE_STATE_TOPIC, p).isr) == 3
                           for p in range(STATE_PARTITIONS)), timeout=30, message="the state topic's full ISR")
    leader = cluster.partition_state(topic, 0).leader
    for i in range(50):
        group = f"{topic}-g{i}"
        state_partition = partition_for(key_text(group, tid, 0), STATE_PARTITIONS)
        coordinator = cluster.partition_state(SHARE_STATE_TOPIC, state_partition).leader
        if coordinator != leader:
            assert share_coordinator(cluster, key_text(group, tid, 0)) == coordinator
            return group, tid, leader, coordinator
    raise AssertionError("every group's share coordinator is the partition's leader")


def configure_group(cluster, group: str) -> None:
    """Earliest and a 3 s record lock, set at the group's coordinator (the share-partition leader asks it)."""
    def group_coordinator():
        body = request(one_broker(cluster), ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]})
        found = body["coordinators"][0]
        return found["node_id"] if found["error_code"] == 0 else None
    node = wait_until(group_coordinator, timeout=30, interval=0.2, message="a group coordinator")
    body = request(cluster.broker(node).bootstrap, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"validate_only": False,
        "resources": [{"resource_type": 32, "resource_name": group, "configs": [
            {"name": "share.auto.offset.reset", "config_operation": 0, "value": "earliest"},
            {"name": "share.record.lock.duration.ms", "config_operation": 0, "value": "3000"}]}]})
    assert body["responses"][0]["error_code"] == 0, body


def held_by_member(cluster, topic: str, group: str, tid: bytes, coordinator: int) -> tuple[set[int], list]:
    """A member process that accepts, releases and holds records, then is killed -9: (accepted offsets,
    what it held)."""
    configure_group(cluster, group)
    produce(cluster.bootstrap, topic, RECORDS)
    member = start_member(cluster.bootstrap, topic, group, ACCEPT, RELEASE)
    try:
        held, accepted = member_output(member, 45)
    finally:
        kill(member)
    accepted_offsets = {o for _, o, _ in held if o < ACCEPT}
    assert len(accepted_offsets) == accepted and accepted > 0, held
    if accepted_offsets == set(range(ACCEPT)):
        stored_start(cluster, coordinator, group, tid, ACCEPT)  # accepted means stored
    return accepted_offsets, held


def consume_the_rest(cluster, topic: str, group: str, accepted: set[int]) -> list:
    """Another member gets every record not accepted, once, and no accepted one."""
    consumer = share_consumer(cluster.bootstrap, group, explicit=True)
    try:
        consumer.subscribe([topic])
        want = RECORDS - len(accepted)
        got = poll_records(consumer, want, 40, explicit_ack=AcknowledgeType.ACCEPT)
        offsets = sorted(m.offset() for m in got)
        assert offsets == [o for o in range(RECORDS) if o not in accepted], offsets
        assert poll_records(consumer, 1, 1.0, explicit_ack=AcknowledgeType.ACCEPT) == []
        return got
    finally:
        close_quietly(consumer)


@pytest.mark.timeout(150)
def test_share_partition_leader_killed_new_leader_reads_the_state(cluster_factory, topic_name):
    cluster = cluster_factory(3, settings=SETTINGS)
    group, tid, leader, coordinator = prepared(cluster, topic_name)
    accepted, held = held_by_member(cluster, topic_name, group, tid, coordinator)
    cluster.kill(leader)
    new = wait_until(lambda: (n := cluster.partition_state(topic_name, 0).leader) not in (-1, leader) and n,
                     timeout=30, message="a new leader")
    got = consume_the_rest(cluster, topic_name, group, accepted)
    delivered_before = {o for _, o, _ in held}
    # released and held records come back with their delivery count kept (the lock did not survive)
    assert all(m.delivery_count() == (2 if m.offset() in delivered_before else 1) for m in got), \
        [(m.offset(), m.delivery_count()) for m in got]
    assert "read from the share coordinator" in cluster.broker(new).log_tail(200_000)
    stored_start(cluster, coordinator, group, tid, RECORDS)  # the new leader writes to the same coordinator


@pytest.mark.timeout(150)
def test_share_coordinator_killed_new_coordinator_loads_the_state(cluster_factory, topic_name):
    cluster = cluster_factory(3, settings=SETTINGS)
    group, tid, leader, coordinator = prepared(cluster, topic_name)
    accepted, _ = held_by_member(cluster, topic_name, group, tid, coordinator)
    cluster.kill(coordinator)
    key = key_text(group, tid, 0)
    new = wait_until(lambda: (n := share_coordinator(cluster, key)) != coordinator and n, timeout=30,
                     message="a new share coordinator")
    if accepted == set(range(ACCEPT)):
        stored_start(cluster, new, group, tid, ACCEPT)  # replayed from the replicated log
    started = time.monotonic()
    consume_the_rest(cluster, topic_name, group, accepted)
    assert time.monotonic() - started < 40
    stored_start(cluster, new, group, tid, RECORDS)  # and the leader's writes now go to it


def group_coordinator(cluster, group: str) -> int:
    def ask():
        body = request(one_broker(cluster), ApiKey.FIND_COORDINATOR, 6, {"key_type": 0, "coordinator_keys": [group]})
        (found,) = body["coordinators"]
        return found["node_id"] if found["error_code"] == 0 else None
    return wait_until(ask, timeout=30, interval=0.2, message=f"a group coordinator for {group}")


def set_group_config(bootstrap: str, group: str, value: str) -> int:
    body = request(bootstrap, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"validate_only": False, "resources": [
        {"resource_type": 32, "resource_name": group, "configs": [
            {"name": "share.auto.offset.reset", "config_operation": 0, "value": value}]}]})
    return body["responses"][0]["error_code"]


def group_config_at(bootstrap: str, group: str) -> tuple[str, int]:
    body = request(bootstrap, ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
        {"resource_type": 32, "resource_name": group, "configuration_keys": ["share.auto.offset.reset"]}],
        "include_synonyms": False, "include_documentation": False})
    (config,) = body["results"][0]["configs"]
    return config["value"], config["config_source"]


def test_share_group_admin_from_any_broker(cluster_factory, topic_name):
    """A fresh cluster (no `__share_group_state` yet): group configs are set and read at every broker, not
    only the group's coordinator (a bad value is still INVALID_CONFIG); AlterShareGroupOffsets at the
    coordinator sets all three partitions, whose share coordinators are spread over the brokers; and
    DescribeShareGroupOffsets of all topics lists the three."""
    cluster = cluster_factory(3, settings=SETTINGS)
    cluster.start()
    cluster.wait_ready()
    create_topic(cluster, topic_name, partitions=3)
    group = topic_name + "-g"
    coordinator = group_coordinator(cluster, group)
    for node in cluster.ids:
        bootstrap = cluster.broker(node).bootstrap
        assert set_group_config(bootstrap, group, "bogus") == ErrorCode.INVALID_CONFIG
        assert set_group_config(bootstrap, group, "earliest" if node % 2 else "latest") == ErrorCode.NONE
    last = "earliest" if cluster.ids[-1] % 2 else "latest"
    for node in cluster.ids:
        assert group_config_at(cluster.broker(node).bootstrap, group) == (last, 8)  # GROUP_CONFIG
    at_coordinator = cluster.broker(coordinator).bootstrap
    altered = request(at_coordinator, ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, {"group_id": group, "topics": [
        {"topic_name": topic_name, "partitions": [{"partition_index": p, "start_offset": 2} for p in range(3)]}]})
    assert altered["error_code"] == 0
    assert [(p["partition_index"], p["error_code"]) for p in altered["responses"][0]["partitions"]] == \
        [(0, 0), (1, 0), (2, 0)]
    described = request(at_coordinator, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1,
                        {"groups": [{"group_id": group, "topics": None}]})
    (topic,) = described["groups"][0]["topics"]
    assert sorted((p["partition_index"], p["start_offset"], p["leader_epoch"], p["error_code"])
                  for p in topic["partitions"]) == [(0, 2, 0, 0), (1, 2, 0, 0), (2, 2, 0, 0)]


@pytest.mark.timeout(240)
def test_share_consumers_read_everything_with_earliest_set_at_a_non_coordinator(cluster_factory, topic_name):
    """librdkafka's 0170-0177 on three brokers (issue 40 item 11): the group's share.auto.offset.reset=earliest
    is set through a broker that does not coordinate the group, records were produced before, and two share
    consumers of the group read every record of the three partitions (led by different brokers) exactly once."""
    cluster = cluster_factory(3, settings=SETTINGS)
    cluster.start()
    cluster.wait_ready()
    create_topic(cluster, topic_name, partitions=3)
    group = topic_name + "-g"
    produce(cluster.bootstrap, topic_name, 90, partitions=3)
    coordinator = group_coordinator(cluster, group)
    other = next(node for node in cluster.ids if node != coordinator)
    assert set_group_config(cluster.broker(other).bootstrap, group, "earliest") == ErrorCode.NONE
    consumers = [share_consumer(cluster.bootstrap, group) for _ in range(2)]
    seen: list[tuple[int, int]] = []
    try:
        for c in consumers:
            c.subscribe([topic_name])
        deadline = time.monotonic() + 120
        while len(seen) < 90 and time.monotonic() < deadline:
            for c in consumers:
                seen += [(m.partition(), m.offset()) for m in c.poll(0.5) if m.error() is None]
        for c in consumers:
            c.poll(0.5)  # the last implicit acknowledgements
    finally:
        for c in consumers:
            close_quietly(c)
    assert len(seen) == 90 and len(set(seen)) == 90, f"{len(seen)} records, {len(set(seen))} distinct"
    assert {p for p, _ in seen} == {0, 1, 2}
