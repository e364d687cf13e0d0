"""Consumer groups with the other clients: kafka-python, aiokafka, kcat -G, the Java consumer (classic
protocol), and static membership (group.instance.id) with confluent-kafka."""

from __future__ import annotations

import asyncio
import shutil
import subprocess

import pytest

from .helpers import bounded
from .test_groups_confluent import create_topic, group_consumer, poll_all, produce_spread


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "broker.address.family": "v4"})
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=15)
        return {tp.partition: tp.offset for tp in tps if tp.offset >= 0}
    finally:
        c.close()


def test_kafka_python_group_subscribe_consume_commit(broker, topic_name):
    kafka = pytest.importorskip("kafka")
    create_topic(broker.bootstrap, topic_name, 3)
    expected = produce_spread(broker.bootstrap, topic_name, 3, 5)
    group = f"g-{topic_name}"
    consumer = kafka.KafkaConsumer(topic_name, bootstrap_servers=broker.bootstrap, group_id=group,
                                   auto_offset_reset="earliest", enable_auto_commit=False,
                                   session_timeout_ms=6000, heartbeat_interval_ms=1000)
    seen = []
    try:
        for _ in bounded(200, 60):
            for records in consumer.poll(timeout_ms=500).values():
                seen.extend((r.partition, r.value) for r in records)
            if len(seen) >= len(expected):
                break
        assert set(seen) == expected and len(seen) == len(expected)
        consumer.commit()
        assert len(consumer.assignment()) == 3
    finally:
        consumer.close()
    assert committed_offsets(broker.bootstrap, group, topic_name, 3) == {0: 5, 1: 5, 2: 5}


def test_aiokafka_group_subscribe_consume_commit(broker, topic_name):
    aiokafka = pytest.importorskip("aiokafka")
    create_topic(broker.bootstrap, topic_name, 2)
    expected = produce_spread(broker.bootstrap, topic_name, 2, 6)
    group = f"g-{topic_name}"

    async def run() -> list:
        consumer = aiokafka.AIOKafkaConsumer(topic_name, bootstrap_servers=broker.bootstrap, group_id=group,
                                             auto_offset_reset="earliest", enable_auto_commit=False,
                                             session_timeout_ms=6000, heartbeat_interval_ms=1000)
        await consumer.start()
        seen = []
        try:
            for _ in bounded(200, 60):
                batches = await consumer.getmany(timeout_ms=500)
                for records in batches.values():
                    seen.extend((r.partition, r.value) for r in records)
                if len(seen) >= len(expected):
                    break
            await consumer.commit()
        finally:
            await consumer.stop()
        return seen

    seen = asyncio.run(asyncio.wait_for(run(), 90))
    assert set(seen) == expected and len(seen) == len(expected)
    assert committed_offsets(broker.bootstrap, group, topic_name, 2) == {0: 6, 1: 6}


def test_kcat_balanced_consumer(broker, topic_name):
    kcat = shutil.which("kcat")
    if kcat is None:
        pytest.skip("kcat not installed")
    create_topic(broker.bootstrap, topic_name, 2)
    expected = produce_spread(broker.bootstrap, topic_name, 2, 4)
    group = f"g-{topic_name}"
    proc = subprocess.run([kcat, "-b", broker.bootstrap, "-G", group, "-o", "beginning", "-c", str(len(expected)),
                           "-f", "%p %s\\n", "-X", "broker.address.family=v4", topic_name],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    seen = {(int(p), v.encode()) for p, v in (line.split(" ", 1) for line in proc.stdout.splitlines() if line)}
    assert seen == expected
    committed = committed_offsets(broker.bootstrap, group, topic_name, 2)
    assert all(0 <= o <= 4 for o in committed.values())  # kcat auto-commits what it stored


def test_java_consumer_in_group(broker, topic_name, java_client):
    create_topic(broker.bootstrap, topic_name, 3)
    expected = produce_spread(broker.bootstrap, topic_name, 3, 4)
    group = f"g-{topic_name}"
    lines = java_client.run("group-consume", broker.bootstrap, topic_name, group, len(expected), 60000)
    seen = {(int(p), v.encode()) for p, _, v in (line.split("\t") for line in lines)}
    assert seen == expected
    assert committed_offsets(broker.bootstrap, group, topic_name, 3) == {0: 4, 1: 4, 2: 4}
    # a second Java member of the same group resumes after the commits: nothing left to read
    more = produce_spread(broker.bootstrap, topic_name, 3, 1, tag="more-")
    lines = java_client.run("group-consume", broker.bootstrap, topic_name, group, len(more), 60000)
    assert {(int(p), v.encode()) for p, _, v in (line.split("\t") for line in lines)} == more


def test_static_member_restart_gets_its_partitions_back_without_rebalance(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 4)
    group = f"g-{topic_name}"
    assigns = {"a": 0, "b": 0}

    def counting(name):
        def on_assign(consumer, parts):
            assigns[name] += 1
        return on_assign

    a = group_consumer(broker.bootstrap, group, **{"group.instance.id": "inst-a"})
    b = group_consumer(broker.bootstrap, group, **{"group.instance.id": "inst-b"})
    a.subscribe([topic_name], on_assign=counting("a"))
    b.subscribe([topic_name], on_assign=counting("b"))
    try:
        poll_all([a, b], lambda got: sorted([len(a.assignment()), len(b.assignment())]) == [2, 2])
        a_parts = {p.partition for p in a.assignment()}
        b_parts = {p.partition for p in b.assignment()}
        b_assigns = assigns["b"]
        a.close()  # a static member does not send LeaveGroup
        a = group_consumer(broker.bootstrap, group, **{"group.instance.id": "inst-a"})
        a.subscribe([topic_name], on_assign=counting("a"))
        poll_all([a, b], lambda got: len(a.assignment()) == 2)
        assert {p.partition for p in a.assignment()} == a_parts
        for _ in bounded(20, 2):  # give a rebalance, if any, the chance to show up
            b.consume(10, 0.05)
        assert assigns["b"] == b_assigns, "the other member went through a rebalance"
        assert {p.partition for p in b.assignment()} == b_parts
    finally:
        a.close()
        b.close()
