"""A three-broker cluster upgraded from odradek's old coordinator placement (`hash & 0x7FFFFFFF`,
tests/interop/legacy_placement_broker.py) to Kafka's: groups whose old and new `__consumer_offsets` partitions
differ (and are led by different brokers, as it happens) keep their committed offsets; the leader of the new
partition reads the old one from its own replica (docs/coordinator-placement.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from odradek.coordinator.placement import legacy_partition_for, partition_for
from tests.cluster.common import REPLICATED, create_topic
from tests.interop.helpers import wait_until

LAUNCHER = Path(__file__).resolve().parents[1] / "interop" / "legacy_placement_broker.py"
PARTITIONS = int(REPLICATED["offsets.topic.num.partitions"])
GROUPS = {"my-group": 11, "orders-consumer": 22}  # 6 partitions: my-group 2 -> 0, orders-consumer 0 -> 2


def consumer(cluster, group: str) -> Consumer:
    return Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False,
                     "broker.address.family": "v4"})


def commit(cluster, group: str, topic: str, offset: int) -> None:
    def attempt() -> bool:
        c = consumer(cluster, group)
        try:
            (tp,) = c.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
            return tp.error is None
        finally:
            c.close()

    wait_until(attempt, timeout=60, message=f"a commit of {group}")


def committed(cluster, group: str, topic: str) -> int | None:
    c = consumer(cluster, group)
    try:
        (tp,) = c.committed([TopicPartition(topic, 0)], timeout=15)
        return tp.offset
    finally:
        c.close()


@pytest.mark.timeout(300)
def test_a_cluster_upgrade_keeps_the_offsets_stored_under_the_old_placement(cluster_factory, topic_name):
    for group in GROUPS:
        assert partition_for(group, PARTITIONS) != legacy_partition_for(group, PARTITIONS)
    cluster = cluster_factory(3, settings=REPLICATED)
    for broker in cluster.brokers.values():
        broker.command_prefix = [sys.executable, str(LAUNCHER)]
    cluster.start()
    cluster.wait_ready()
    create_topic(cluster, topic_name, partitions=1)
    for group, offset in GROUPS.items():
        commit(cluster, group, topic_name, offset)
    cluster.stop_all()

    for broker in cluster.brokers.values():
        broker.command_prefix = []
    cluster.start()
    cluster.wait_ready()
    for group, offset in GROUPS.items():
        wait_until(lambda: committed(cluster, group, topic_name) == offset, timeout=60,
                   message=f"{group}'s offset {offset} after the upgrade")
        commit(cluster, group, topic_name, offset + 5)
    cluster.stop_all()
    cluster.start()
    cluster.wait_ready()
    for group, offset in GROUPS.items():
        wait_until(lambda: committed(cluster, group, topic_name) == offset + 5, timeout=60,
                   message=f"{group}'s offset {offset + 5} after a restart")
    logs = cluster.logs(200_000)
    assert "Traceback" not in logs and "have no replica here" not in logs, logs[-3000:]
