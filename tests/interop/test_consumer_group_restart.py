"""A consumer-protocol group (KIP-848) across a restart of its coordinator: the group's state is read back
from `__consumer_offsets`, so its members carry on with their member ids, epochs and partitions instead of
being fenced and rejoining."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.interop.test_broker_semantics import request

SETTINGS = {"group.consumer.heartbeat.interval.ms": "500", "group.consumer.min.heartbeat.interval.ms": "100",
            "group.consumer.session.timeout.ms": "10000", "group.consumer.min.session.timeout.ms": "1000"}


def describe(bootstrap: str, group: str) -> dict:
    body = request(bootstrap, 69, 1, {"group_ids": [group], "include_authorized_operations": False})
    return body["groups"][0]


def poll_all(consumers: list[Consumer], seconds: float, got: dict) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for c in consumers:
            m = c.poll(0.05)
            if m is not None and m.error() is None:
                got.setdefault(id(c), []).append((m.partition(), m.offset()))


@pytest.mark.timeout(120)
def test_members_keep_their_epochs_and_partitions_across_a_coordinator_restart(broker_factory, topic_name):
    b = broker_factory(SETTINGS)
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic_name, 4, 1)])[topic_name].result(20)
    group = f"g-{uuid.uuid4().hex[:8]}"
    consumers = [Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "group.protocol": "consumer",
                           "auto.offset.reset": "earliest", "enable.auto.commit": False}) for _ in range(2)]
    for c in consumers:
        c.subscribe([topic_name])
    try:
        got: dict = {}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (describe(b.bootstrap, group)["group_state"] != "Stable"
                                               or sorted(len(c.assignment()) for c in consumers) != [2, 2]):
            poll_all(consumers, 0.3, got)
        # a member that comes and goes moves the group epoch past what a fresh join of two would give
        extra = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "group.protocol": "consumer"})
        extra.subscribe([topic_name])
        for _ in range(100):
            extra.poll(0.1)
            poll_all(consumers, 0.05, got)
            if extra.assignment():
                break
        extra.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (describe(b.bootstrap, group)["group_state"] != "Stable"
                                               or sorted(len(c.assignment()) for c in consumers) != [2, 2]):
            poll_all(consumers, 0.3, got)
        before = describe(b.bootstrap, group)
        assert before["group_state"] == "Stable", before
        assert before["group_epoch"] > 3 and len(before["members"]) == 2, before
        members = {m["member_id"]: (m["member_epoch"], m["assignment"]) for m in before["members"]}
        owned = [sorted(tp.partition for tp in c.assignment()) for c in consumers]

        b.restart()  # SIGTERM, then the same port and data directory

        producer = Producer({"bootstrap.servers": b.bootstrap})
        for i in range(40):
            producer.produce(topic_name, value=str(i).encode(), partition=i % 4)
        assert producer.flush(20) == 0
        got.clear()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and sum(len(v) for v in got.values()) < 40:
            poll_all(consumers, 0.3, got)
        assert sum(len(v) for v in got.values()) == 40
        for c, mine in zip(consumers, owned):
            assert sorted(tp.partition for tp in c.assignment()) == mine
            assert {p for p, _ in got.get(id(c), [])} <= set(mine)
        after = describe(b.bootstrap, group)
        assert after["group_epoch"] == before["group_epoch"], "no member rejoined"
        assert {m["member_id"]: (m["member_epoch"], m["assignment"]) for m in after["members"]} == members
    finally:
        for c in consumers:
            c.close()
