"""Committed offsets and group state survive a broker crash (SIGKILL) and restart."""

from __future__ import annotations

import pytest

from .helpers import bounded
from .test_groups_clients import committed_offsets
from .test_groups_confluent import create_topic, group_consumer, poll_all, produce_spread

pytest.importorskip("confluent_kafka")
from confluent_kafka import TopicPartition  # noqa: E402


def test_acknowledged_commits_survive_kill_and_consumer_resumes_exactly(broker_factory, topic_name):
    b = broker_factory({"offsets.topic.num.partitions": "5"})
    create_topic(b.bootstrap, topic_name, 2)
    produce_spread(b.bootstrap, topic_name, 2, 10)
    group = f"g-{topic_name}"
    c = group_consumer(b.bootstrap, group)
    c.subscribe([topic_name])
    got = poll_all([c], lambda got: len(got[0]) >= 20)[0]
    # commit several times (the last one wins), each acknowledged before the next
    for upto in (3, 5, 7):
        c.commit(offsets=[TopicPartition(topic_name, p, upto) for p in range(2)], asynchronous=False)
    assert len(got) == 20
    b.kill()  # no flush, no close: only what was fsynced before each acknowledgement is there
    c.close()
    b.start()
    assert committed_offsets(b.bootstrap, group, topic_name, 2) == {0: 7, 1: 7}
    c2 = group_consumer(b.bootstrap, group)
    c2.subscribe([topic_name])
    try:
        rest = poll_all([c2], lambda got: len(got[0]) >= 6)[0]
        assert sorted((m.partition(), m.offset()) for m in rest) == [(p, o) for p in range(2) for o in range(7, 10)]
    finally:
        c2.close()


def test_simple_commits_and_deletes_survive_restart(broker_factory, topic_name):
    b = broker_factory()
    create_topic(b.bootstrap, topic_name, 1)
    from confluent_kafka import Consumer

    def commit(group: str, offset: int) -> None:
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "broker.address.family": "v4",
                      "enable.auto.commit": False})
        try:
            c.commit(offsets=[TopicPartition(topic_name, 0, offset)], asynchronous=False)
        finally:
            c.close()

    for i in range(50):  # many records for the same keys: replay keeps the last
        commit("keep", i + 1)
    commit("gone", 9)
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": b.bootstrap, "broker.address.family": "v4"})
    admin.delete_consumer_groups(["gone"])["gone"].result(15)
    b.kill()
    b.start()
    assert committed_offsets(b.bootstrap, "keep", topic_name, 1) == {0: 50}
    assert committed_offsets(b.bootstrap, "gone", topic_name, 1) == {}
    b.restart()  # a clean restart too
    assert committed_offsets(b.bootstrap, "keep", topic_name, 1) == {0: 50}


def test_running_group_keeps_consuming_across_broker_restart(broker_factory, topic_name):
    b = broker_factory()
    create_topic(b.bootstrap, topic_name, 2)
    group = f"g-{topic_name}"
    c = group_consumer(b.bootstrap, group)
    c.subscribe([topic_name])
    try:
        poll_all([c], lambda got: len(c.assignment()) == 2)
        b.kill()
        b.start()
        expected = produce_spread(b.bootstrap, topic_name, 2, 3)
        seen = set()
        for _ in bounded(600, 60):
            for m in c.consume(100, 0.1):
                if m.error() is None:
                    seen.add((m.partition(), m.value()))
            if seen >= expected:
                break
        assert seen >= expected
        assert len(c.assignment()) == 2
    finally:
        c.close()
