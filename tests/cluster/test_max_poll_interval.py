"""librdkafka's 0089 (max_poll_interval) as our test, on a three-broker cluster and on Apache Kafka 4.4 in
the same run (issue 40 item 11).

Two consumers of one group share a one-partition topic (session.timeout.ms 6 s, max.poll.interval.ms 10 s).
The one that gets the first record stops polling ("processing" for 20 s): its client leaves the group once
max.poll.interval.ms passes (committing, with auto commit, the record it was given), the other consumer is
given the partition and reads on from there, and the stalled consumer's next poll reports _MAX_POLL_EXCEEDED. Every wait is a
deadline, not a timing assertion.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Iterator

import pytest

pytest.importorskip("confluent_kafka")

from confluent_kafka import Consumer, KafkaError, Producer  # noqa: E402
from confluent_kafka.admin import NewTopic  # noqa: E402

from odradek.tools.common import bootstrap_admin  # noqa: E402
from tests.cluster.common import REPLICATED, create_topic  # noqa: E402
from tests.reference.conftest import installed_launcher  # noqa: E402

MAX_POLL_MS = 10_000
PROCESSING_S = 20.0  # how long the stalled consumer does not poll, as in 0089
DEADLINE_S = 90.0


@pytest.fixture(scope="module")
def kafka() -> Iterator[Any]:
    ref, libs = installed_launcher()
    with ref.KafkaReference(libs) as broker:
        yield broker


def _max_poll_outcome(bootstrap: str, topic: str, protocol: str) -> dict[str, Any]:
    producer = Producer({"bootstrap.servers": bootstrap, "broker.address.family": "v4"})
    for i in range(10):
        producer.produce(topic, value=f"m{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    config = {"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}", "broker.address.family": "v4",
              "max.poll.interval.ms": MAX_POLL_MS, "auto.offset.reset": "earliest", "group.protocol": protocol,
              # the consumer protocol takes the session timeout from the group (group.consumer.session.timeout.ms)
              **({"session.timeout.ms": 6000} if protocol == "classic" else {})}
    consumers = [Consumer(dict(config)), Consumer(dict(config))]
    for c in consumers:
        c.subscribe([topic])
    stalled = -1
    stalled_until = 0.0
    other_offset = None
    errors: list[str] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while other_offset is None and time.monotonic() < deadline:
            for i, c in enumerate(consumers):
                if i == stalled and time.monotonic() < stalled_until:
                    continue  # "processing": not polling
                msg = c.poll(0.1)
                if msg is None:
                    continue
                if msg.error() is not None:
                    errors.append(f"{i}: {msg.error().name()}")
                    continue
                if stalled < 0:
                    stalled, stalled_until = i, time.monotonic() + PROCESSING_S
                elif i != stalled:
                    other_offset = msg.offset()  # the partition moved to it after the stalled one left
                    break
        stalled_error = None
        if stalled >= 0:
            for _ in range(30):  # the stalled consumer's next polls: the error comes first
                msg = consumers[stalled].poll(1.0)
                if msg is not None and msg.error() is not None:
                    stalled_error = msg.error().name()
                    if msg.error().code() == KafkaError._MAX_POLL_EXCEEDED:
                        break
        return {"other_got_the_partition_from": other_offset, "stalled_consumer_error": stalled_error,
                "other_errors": [e for e in errors if not e.startswith(f"{stalled}:")]}
    finally:
        for c in consumers:
            c.close()


@pytest.mark.parametrize("protocol", ["classic"])
def test_a_consumer_past_max_poll_interval_leaves_and_learns_it(cluster_factory, kafka, protocol: str) -> None:
    cluster = cluster_factory(3, settings=REPLICATED).start()
    cluster.wait_ready()
    topic = f"maxpoll-{uuid.uuid4().hex[:8]}"
    create_topic(cluster, topic, partitions=1, replication=3)
    ours = _max_poll_outcome(cluster.bootstrap, topic, protocol)

    admin = bootstrap_admin(kafka.bootstrap)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    theirs = _max_poll_outcome(kafka.bootstrap, topic, protocol)

    # the other consumer goes on from what the stalled one's client committed as it left (auto commit: 1)
    expected = {"other_got_the_partition_from": 1, "stalled_consumer_error": "_MAX_POLL_EXCEEDED", "other_errors": []}
    assert theirs == expected, f"Kafka 4.4: {theirs}"
    assert ours == theirs, f"odradek {ours}\n{cluster.logs()}"
