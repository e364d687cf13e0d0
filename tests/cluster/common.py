"""What the three-broker cluster tests share: the replicated settings and topic creation that waits for
every partition's ISR to be full."""

from __future__ import annotations

from typing import Any

from confluent_kafka.admin import NewTopic

from tests.cluster.checker import LoadProducer, check_history, read_partitions
from tests.interop.helpers import wait_until

# Everything replicated three ways, acks=all needing two in-sync copies; killed brokers' sessions expire
# (and the controller moves their leaders) within 4 s.
REPLICATED = {
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "6",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "zookeeper.session.timeout.ms": "4000",
    "replica.lag.time.max.ms": "4000",
}


def create_topic(cluster, name: str, partitions: int = 3, replication: int = 3, **configs: str) -> None:
    admin = cluster.admin()  # the client must outlive its futures
    admin.create_topics([NewTopic(name, partitions, replication, config=configs)])[name].result(30)
    wait_until(lambda: all(len(cluster.partition_state(name, p).isr) == replication for p in range(partitions)),
               timeout=30, message=f"{name}: every partition with a full ISR")


def full_isr(cluster, topic: str, partitions: int, replicas: int = 3) -> bool:
    return all(len(cluster.partition_state(topic, p).isr) == replicas for p in range(partitions))


def kill_leader_under_load(cluster, topic: str, load: LoadProducer) -> tuple[int, Any]:
    """Kill -9 partition 0's leader while `load` (started, writing to the 3 partitions of `topic`) runs; check
    that the load goes on on a new leader without errors and that every acknowledged record is there once and
    in order. Stops the load; the killed broker's id and the load's ledger."""
    load.wait_acked(300)
    victim = cluster.partition_state(topic, 0).leader
    cluster.kill(victim)
    wait_until(lambda: cluster.partition_state(topic, 0).leader not in (-1, victim), timeout=30,
               message="a new leader for partition 0")
    before = load.ledger.count()
    load.wait_acked(before + 300, timeout=60)
    ledger = load.stop()
    assert not ledger.errors, ledger.errors[:5]
    history = check_history(ledger.acked, read_partitions(cluster.bootstrap, topic, 3))
    assert history.ok, str(history)
    return victim, ledger
