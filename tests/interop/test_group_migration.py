"""Online migration of a live group between the classic and the consumer protocol (KIP-848's upgrade and
downgrade paths, Kafka 4.x's `group.consumer.migration.policy`), against odradek and Apache Kafka 4.4 in the
same run (issue 40 item 10).

A classic librdkafka member (`group.protocol=classic`) holds every partition of a topic and commits what it
reads; a `group.protocol=consumer` member joins the same, live group: the group becomes a consumer group
(ListGroups), the two share the partitions with no partition owned by both at once, the classic member keeps
consuming and committing through JoinGroup/SyncGroup/Heartbeat/OffsetCommit, and every record is read. When
the consumer-protocol member leaves, the group is classic again and the classic member takes every partition
back. The hostile part sends the classic requests a classic member of a consumer group can get wrong (another
generation, another member, a protocol the group does not support) and compares the error codes with Kafka's.
"""

from __future__ import annotations

from typing import Callable

import pytest

from tests.interop.test_broker_semantics import request
from tests.reference.conftest import kafka_reference  # noqa: F401 - the session fixture (skips without Kafka)

from .helpers import wait_until
from .test_consumer_protocol import (
    ConsumerGroupType,
    Tracked,
    cg_config,
    classic_config,
    close_all,
    create_topics,
    group_listing,
    ownership_overlaps,
    poll_until,
    produce_spread,
)

PARTITIONS = 4
JOIN_GROUP, HEARTBEAT, SYNC_GROUP = 11, 12, 14
ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, INCONSISTENT_GROUP_PROTOCOL = 22, 25, 23
SETTINGS = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.replication.factor": "1"}


@pytest.fixture(params=["odradek", "kafka"])
def bootstrap(request: pytest.FixtureRequest, broker_factory: Callable) -> str:
    if request.param == "kafka":
        return request.getfixturevalue("kafka_reference").bootstrap
    return broker_factory(SETTINGS).bootstrap


def everything(topic: str) -> set[tuple[str, int]]:
    return {(topic, p) for p in range(PARTITIONS)}


@pytest.mark.timeout(240)
def test_consumer_member_joins_a_live_classic_group_and_leaves_it_classic(bootstrap, topic_name):
    create_topics(bootstrap, {topic_name: PARTITIONS})
    group = f"g-{topic_name}"
    sent = produce_spread(bootstrap, topic_name, PARTITIONS, 10)
    classic = Tracked("classic", classic_config(bootstrap, group), [topic_name])
    members = [classic]
    try:
        poll_until(members, lambda: classic.assignment() == everything(topic_name), 60, "the classic member")
        assert group_listing(bootstrap, group)[0] == ConsumerGroupType.CLASSIC
        modern = Tracked("consumer", cg_config(bootstrap, group), [topic_name])
        members.append(modern)
        # the live classic group converted: both members hold partitions, together all of them
        poll_until(members, lambda: bool(modern.assignment()) and bool(classic.assignment())
                   and classic.assignment() | modern.assignment() == everything(topic_name)
                   and not classic.assignment() & modern.assignment(), 90, "the partitions shared")
        assert group_listing(bootstrap, group)[0] == ConsumerGroupType.CONSUMER
        more = produce_spread(bootstrap, topic_name, PARTITIONS, 10)
        wanted = {(p, o) for p, o in (*sent, *more)}
        poll_until(members, lambda: {(p, o) for m in members for p, o in m.read(topic_name)} >= wanted, 60,
                   "every record read")
        assert not classic.commit_errors and not modern.commit_errors
        assert classic.read(topic_name), "the classic member read nothing"
        assert not ownership_overlaps(members)
        # the consumer-protocol member leaves: classic again, the classic member takes everything back
        modern.close()
        members.remove(modern)
        poll_until(members, lambda: classic.assignment() == everything(topic_name), 90, "classic again")
        wait_until(lambda: (group_listing(bootstrap, group) or (None,))[0] == ConsumerGroupType.CLASSIC,
                   timeout=30, message="the group listed as classic")
        last = produce_spread(bootstrap, topic_name, PARTITIONS, 5)
        poll_until(members, lambda: {(p, o) for p, o in classic.read(topic_name)} >= set(last), 60,
                   "the classic member reads on")
        assert not classic.commit_errors
    finally:
        close_all(members)


@pytest.mark.timeout(240)
def test_classic_requests_to_a_converted_group(bootstrap, topic_name):
    """Hostile: a classic member of a converted group sends another generation, an unknown member id, a
    protocol type the group does not support, metadata that is no subscription; the codes are Kafka 4.4's
    (both brokers answer the same, checked against each in this run)."""
    create_topics(bootstrap, {topic_name: PARTITIONS})
    group = f"g-{topic_name}"
    classic = Tracked("classic", classic_config(bootstrap, group), [topic_name])
    members = [classic]
    try:
        poll_until(members, lambda: classic.assignment() == everything(topic_name), 60, "the classic member")
        modern = Tracked("consumer", cg_config(bootstrap, group), [topic_name])
        members.append(modern)
        poll_until(members, lambda: bool(modern.assignment()), 90, "the consumer member assigned")
        member_id = classic.consumer.memberid()
        answers = {
            "heartbeat-stale-generation": request(bootstrap, HEARTBEAT, 4, {
                "group_id": group, "generation_id": 10_000, "member_id": member_id,
                "group_instance_id": None})["error_code"],
            "heartbeat-unknown-member": request(bootstrap, HEARTBEAT, 4, {
                "group_id": group, "generation_id": 1, "member_id": "nobody", "group_instance_id": None})["error_code"],
            "sync-unknown-member": request(bootstrap, SYNC_GROUP, 5, {
                "group_id": group, "generation_id": 1, "member_id": "nobody", "group_instance_id": None,
                "protocol_type": "consumer", "protocol_name": "range", "assignments": []})["error_code"],
            "join-other-protocol-type": request(bootstrap, JOIN_GROUP, 7, {
                "group_id": group, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
                "member_id": "", "group_instance_id": None, "protocol_type": "connect",
                "protocols": [{"name": "default", "metadata": b"\x00\x00"}], "reason": None})["error_code"],
            "join-garbage-metadata": request(bootstrap, JOIN_GROUP, 7, {
                "group_id": group, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
                "member_id": "", "group_instance_id": "instance-x", "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": b"\xff"}], "reason": None})["error_code"],
        }
        assert answers == {"heartbeat-stale-generation": ILLEGAL_GENERATION,
                           "heartbeat-unknown-member": UNKNOWN_MEMBER_ID,
                           "sync-unknown-member": UNKNOWN_MEMBER_ID,
                           "join-other-protocol-type": INCONSISTENT_GROUP_PROTOCOL,
                           "join-garbage-metadata": INCONSISTENT_GROUP_PROTOCOL}, answers
        # the group still works for its members
        poll_until(members, lambda: classic.assignment() | modern.assignment() == everything(topic_name), 60,
                   "the members unaffected")
    finally:
        close_all(members)
