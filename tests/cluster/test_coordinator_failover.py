"""Coordinators follow the leadership of their internal partitions: when the broker coordinating a group or a
transaction dies, the leader of that `__consumer_offsets` / `__transaction_state` partition elected next
loads the state from the replicated log and carries on."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from tests.cluster.checker import read_partitions
from tests.cluster.common import REPLICATED, create_topic
from tests.interop.helpers import wait_until


def group_coordinator(cluster, group: str) -> int:
    admin = cluster.admin()
    description = admin.describe_consumer_groups([group])[group].result(15)
    return description.coordinator.id


def consume(consumer: Consumer, count: int, timeout: float = 60.0) -> list[tuple[int, int, bytes]]:
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None or msg.error():
            continue
        out.append((msg.partition(), msg.offset(), bytes(msg.value())))
    return out


@pytest.mark.timeout(180)
def test_group_coordinator_killed_group_moves_with_its_offsets(cluster_factory, topic_name):
    cluster = cluster_factory(3, settings=REPLICATED).start()
    cluster.wait_ready()
    create_topic(cluster, topic_name)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "broker.address.family": "v4"})
    for i in range(300):
        producer.produce(topic_name, value=f"v-{i}".encode(), partition=i % 3)
    assert producer.flush(30) == 0
    group = f"g-{topic_name}"
    config = {"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False,
              "auto.offset.reset": "earliest", "session.timeout.ms": 10000, "broker.address.family": "v4"}
    consumer = Consumer(config)
    consumer.subscribe([topic_name])
    first = consume(consumer, 150)
    assert len(first) == 150
    consumer.commit(asynchronous=False)
    committed_before = {tp.partition: tp.offset for tp in consumer.committed(
        [TopicPartition(topic_name, p) for p in range(3)], timeout=15)}
    victim = group_coordinator(cluster, group)
    cluster.kill(victim)
    # the consumer goes on; its group's coordinator is now another broker, loaded from the replicated log
    rest = consume(consumer, 150, timeout=90)
    consumer.commit(asynchronous=False)
    consumer.close()
    new = wait_until(lambda: (c := group_coordinator(cluster, group)) != victim and c, timeout=30,
                     message="a new group coordinator")
    assert new in cluster.running_ids()
    seen = [v for _, _, v in first + rest]
    assert set(seen) == {f"v-{i}".encode() for i in range(300)}
    # anything read twice lies past the last commit before the failover (a rebalance may replay it)
    replayed = {(p, o) for p, o, _ in first} & {(p, o) for p, o, _ in rest}
    assert all(o >= committed_before[p] for p, o in replayed), replayed
    # a new member of the group starts where the group committed: the end of every partition
    again = Consumer(config)
    committed = again.committed([TopicPartition(topic_name, p) for p in range(3)], timeout=30)
    assert sorted(tp.offset for tp in committed) == [100, 100, 100]
    again.close()


@pytest.mark.timeout(240)
def test_transaction_completes_after_its_coordinator_dies_in_prepare_commit(cluster_factory, topic_name):
    cluster = cluster_factory(3, settings=REPLICATED).start()
    cluster.wait_ready()
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": f"txn-{topic_name}",
                         "broker.address.family": "v4", "transaction.timeout.ms": 60000,
                         "message.timeout.ms": 60000})
    producer.init_transactions(30)
    coordinator = cluster.partition_state("__transaction_state", 0).leader
    lone = next(b for b in cluster.ids if b != coordinator)  # the only replica of one data partition
    admin = cluster.admin()
    lone_topic, replicated = topic_name, topic_name + "-rf3"
    admin.create_topics([NewTopic(lone_topic, num_partitions=1, replica_assignment=[[lone]],
                                  config={"min.insync.replicas": "1"})])[lone_topic].result(30)
    create_topic(cluster, replicated, partitions=1)
    wait_until(lambda: cluster.partition_state(lone_topic, 0).leader == lone, timeout=30, message="a leader")
    producer.begin_transaction()
    for i in range(50):
        producer.produce(lone_topic if i % 2 else replicated, value=f"t-{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    # the lone replica of one partition dies: its marker cannot be written, so the transaction stays in
    # PrepareCommit on its coordinator...
    cluster.kill(lone)
    wait_until(lambda: cluster.partition_state(lone_topic, 0).leader == -1, timeout=30,
               message=f"{lone_topic} offline")
    producer.commit_transaction(60)  # decided: PrepareCommit is stored and replicated
    # ...and then the coordinator dies too; the next leader of its partition must finish the commit
    cluster.kill(coordinator)
    cluster.broker(lone).start()
    survivor = next(b for b in cluster.ids if b not in (lone, coordinator))
    wait_until(lambda: cluster.partition_state("__transaction_state", 0).leader in (survivor, lone), timeout=60,
               message="a new transaction coordinator")
    seen = wait_until(lambda: len(s := _read_committed(cluster.bootstrap, [lone_topic, replicated])) == 50 and s,
                      timeout=90, message="the whole transaction visible to read_committed")
    assert sorted(seen) == sorted(f"t-{i}".encode() for i in range(50))
    # the next coordinator really found the transaction in PrepareCommit and finished it
    assert any("was PrepareCommit when its coordinator changed" in cluster.broker(b).log_tail(200_000)
               for b in cluster.ids if b != coordinator)
    with pytest.raises(KafkaException):
        producer.abort_transaction(5)  # nothing open any more
    producer.flush(5)


def _read_committed(bootstrap: str, topics: list[str]) -> list[bytes]:
    """The values read_committed consumers see in partition 0 of each topic ([] while one is unreadable)."""
    values = []
    for topic in topics:
        try:
            read = read_partitions(bootstrap, topic, 1, timeout=10, **{"isolation.level": "read_committed"})
        except AssertionError:
            return []
        values += [v for _, v in read[0]]
    return values


def _stored_group_epoch(cluster, group: str) -> int | None:
    """The group epoch of the last state record of a KIP-848 group below the high watermark of its
    `__consumer_offsets` partition, i.e. held by every in-sync replica."""
    from odradek.coordinator.persistence import consumer_group_key, decode_consumer_group_value, partition_for

    partition = partition_for(group, int(REPLICATED["offsets.topic.num.partitions"]))
    reader = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"reader-{time.monotonic_ns()}",
                       "enable.auto.commit": False, "broker.address.family": "v4"})
    try:
        low, high = reader.get_watermark_offsets(TopicPartition("__consumer_offsets", partition), timeout=10)
        reader.assign([TopicPartition("__consumer_offsets", partition, low)])
        key, epoch, position = consumer_group_key(group), None, low
        deadline = time.monotonic() + 20
        while position < high and time.monotonic() < deadline:
            msg = reader.poll(0.5)
            if msg is None or msg.error():
                continue
            position = msg.offset() + 1
            if msg.key() == key:
                epoch = None if msg.value() is None else decode_consumer_group_value(group, msg.value()).group_epoch
        return epoch
    finally:
        reader.close()


def _describe_consumer_group(cluster, broker_id: int, group: str) -> dict:
    from tests.interop.test_broker_semantics import request

    body = request(cluster.broker(broker_id).bootstrap, 69, 1, {"group_ids": [group],
                                                                 "include_authorized_operations": False})
    return body["groups"][0]


@pytest.mark.timeout(240)
def test_consumer_protocol_group_keeps_its_members_when_its_coordinator_dies(cluster_factory, topic_name):
    """KIP-848 members go on through a kill -9 of their coordinator: the next leader of the group's
    `__consumer_offsets` partition restores the group (same member ids, epochs and partitions, no rejoin)."""
    settings = {**REPLICATED, "group.consumer.heartbeat.interval.ms": "500",
                "group.consumer.min.heartbeat.interval.ms": "100", "group.consumer.session.timeout.ms": "15000",
                "group.consumer.min.session.timeout.ms": "1000"}
    cluster = cluster_factory(3, settings=settings).start()
    cluster.wait_ready()
    create_topic(cluster, topic_name, partitions=4)
    group = f"g-{topic_name}"
    config = {"bootstrap.servers": cluster.bootstrap, "group.id": group, "group.protocol": "consumer",
              "enable.auto.commit": False, "auto.offset.reset": "earliest", "broker.address.family": "v4"}
    consumers = [Consumer(config) for _ in range(2)]
    for c in consumers:
        c.subscribe([topic_name])
    try:
        def stable() -> dict | None:
            for c in consumers:
                c.poll(0.1)
            described = _describe_consumer_group(cluster, group_coordinator(cluster, group), group)
            if described["group_state"] != "Stable" or sorted(len(c.assignment()) for c in consumers) != [2, 2]:
                return None
            return described

        before = wait_until(stable, timeout=60, message="a stable group of two, two partitions each")
        wait_until(lambda: _stored_group_epoch(cluster, group) == before["group_epoch"], timeout=30,
                   message="the group's state replicated")
        owned = [sorted(tp.partition for tp in c.assignment()) for c in consumers]
        victim = group_coordinator(cluster, group)
        cluster.kill(victim)
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "broker.address.family": "v4"})
        for i in range(80):
            producer.produce(topic_name, value=f"v-{i}".encode(), partition=i % 4)
        assert producer.flush(60) == 0
        seen: dict[int, set[int]] = {0: set(), 1: set()}  # partitions each member reads after the kill
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            for i, c in enumerate(consumers):
                msg = c.poll(0.1)
                if msg is not None and msg.error() is None:
                    seen[i].add(msg.partition())
                    assert msg.partition() in owned[i], f"member {i} read partition {msg.partition()}"
            if all(seen[i] == set(owned[i]) for i in seen):
                break
        assert all(seen[i] == set(owned[i]) for i in seen), (seen, owned)
        new = wait_until(lambda: (c := group_coordinator(cluster, group)) != victim and c, timeout=30,
                         message="a new group coordinator")
        after = _describe_consumer_group(cluster, new, group)
        assert after["group_epoch"] == before["group_epoch"], "a member rejoined"
        assert {m["member_id"]: m["member_epoch"] for m in after["members"]} == \
            {m["member_id"]: m["member_epoch"] for m in before["members"]}
        assert [sorted(tp.partition for tp in c.assignment()) for c in consumers] == owned
    finally:
        for c in consumers:
            c.close()
