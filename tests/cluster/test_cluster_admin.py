"""Topic administration in a cluster: what the controller takes (CreateTopics, DeleteTopics,
CreatePartitions, ElectLeaders), what any broker takes (config changes, auto-creation), and leadership
moving back to preferred replicas."""

from __future__ import annotations

import pytest
from confluent_kafka import ElectionType, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions, NewTopic, ResourceType

from tests.cluster.common import REPLICATED, create_topic
from tests.interop.helpers import wait_until
from tests.interop.test_broker_semantics import request

CREATE_TOPICS, DELETE_TOPICS = 19, 20
NOT_CONTROLLER, INVALID_REPLICATION_FACTOR = 41, 38


@pytest.mark.timeout(120)
def test_topics_are_created_spread_and_refused_like_kafka(cluster_factory, topic_name):
    cluster = cluster_factory(3, settings=REPLICATED).start()
    view = cluster.wait_ready()
    admin = cluster.admin()
    with pytest.raises(KafkaException) as info:
        admin.create_topics([NewTopic(topic_name, 3, 4)])[topic_name].result(30)
    assert info.value.args[0].code() == INVALID_REPLICATION_FACTOR
    admin.create_topics([NewTopic(topic_name, 6, 2)])[topic_name].result(30)

    def known_states():
        states = [cluster.partition_state(topic_name, p) for p in range(6)]
        return states if all(len(s.replicas) == 2 for s in states) else None

    states = wait_until(known_states, timeout=15, message="every broker knowing the new partitions")
    assert all(len(s.replicas) == 2 and len(set(s.replicas)) == 2 for s in states)
    assert {s.leader for s in states} == {1, 2, 3}  # leadership spread over every broker
    # an explicit assignment is kept as given
    placed = topic_name + "-placed"
    admin.create_topics([NewTopic(placed, num_partitions=2, replica_assignment=[[3, 1], [2, 3]])])[placed].result(30)
    # (every broker learns it from the controller's UpdateMetadata, a moment after the controller itself)
    wait_until(lambda: [tuple(cluster.partition_state(placed, p).replicas) for p in range(2)] == [(3, 1), (2, 3)],
               timeout=15, message="the assignment as given")
    # only the controller takes CreateTopics, as a ZooKeeper-mode Kafka broker answers
    other = next(b for b in cluster.ids if b != view.controller_id)
    body = {"topics": [{"name": topic_name + "-elsewhere", "num_partitions": 1, "replication_factor": 1,
                        "assignments": [], "configs": []}], "timeout_ms": 5000, "validate_only": False}
    response = request(cluster.broker(other).bootstrap, CREATE_TOPICS, 5, body)
    assert response["topics"][0]["error_code"] == NOT_CONTROLLER
    response = request(cluster.broker(view.controller_id).bootstrap, CREATE_TOPICS, 5, body)
    assert response["topics"][0]["error_code"] == 0 and response["topics"][0]["num_partitions"] == 1


@pytest.mark.timeout(120)
def test_auto_created_topics_get_the_default_replication_factor(cluster_factory, topic_name):
    cluster = cluster_factory(3, settings={**REPLICATED, "num.partitions": "2"}).start()
    view = cluster.wait_ready()
    other = next(b for b in cluster.ids if b != view.controller_id)
    producer = Producer({"bootstrap.servers": cluster.broker(other).bootstrap, "acks": "all",
                         "broker.address.family": "v4"})
    producer.produce(topic_name, value=b"auto")  # Metadata auto-creates it, through a non-controller
    assert producer.flush(30) == 0
    wait_until(lambda: all(len(cluster.partition_state(topic_name, p).replicas) == 3 for p in range(2)),
               timeout=15, message="both partitions with three replicas")


@pytest.mark.timeout(120)
def test_deleted_topics_leave_every_broker(cluster_factory, topic_name):
    cluster = cluster_factory(3, settings=REPLICATED).start()
    cluster.wait_ready()
    create_topic(cluster, topic_name)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "broker.address.family": "v4"})
    for i in range(30):
        producer.produce(topic_name, value=b"x", partition=i % 3)
    assert producer.flush(30) == 0
    dirs = [cluster.broker(b).data_dir / f"{topic_name}-{p}" for b in cluster.ids for p in range(3)]
    assert all(d.is_dir() for d in dirs)
    admin = cluster.admin()  # the client must outlive its futures
    admin.delete_topics([topic_name], operation_timeout=30)[topic_name].result(30)
    for b in cluster.ids:
        wait_until(lambda: topic_name not in cluster.metadata(b).topics, timeout=30,
                   message=f"broker {b} forgetting {topic_name}")
    wait_until(lambda: not any(d.exists() for d in dirs), timeout=30, message="every replica's log deleted")
    # the name can be used again: a new topic, with new replicas
    create_topic(cluster, topic_name, partitions=1)


@pytest.mark.timeout(120)
def test_partitions_added_get_leaders_and_replicas(cluster_factory, topic_name):
    cluster = cluster_factory(3, settings=REPLICATED).start()
    cluster.wait_ready()
    create_topic(cluster, topic_name, partitions=2)
    admin = cluster.admin()
    admin.create_partitions([NewPartitions(topic_name, 5)])[topic_name].result(30)
    wait_until(lambda: all(len(cluster.partition_state(topic_name, p).isr) == 3 for p in range(5)), timeout=30,
               message="the new partitions in sync")
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "broker.address.family": "v4"})
    producer.produce(topic_name, value=b"p4", partition=4)
    assert producer.flush(30) == 0


@pytest.mark.timeout(120)
def test_config_changes_reach_every_broker(cluster_factory, topic_name):
    cluster = cluster_factory(3, settings=REPLICATED).start()
    cluster.wait_ready()
    create_topic(cluster, topic_name)
    resource = ConfigResource(ResourceType.TOPIC, topic_name,
                              incremental_configs=[ConfigEntry("retention.ms", "123456",
                                                               incremental_operation=AlterConfigOpType.SET)])
    admin = cluster.admin([1])
    admin.incremental_alter_configs([resource])[resource].result(30)

    def value_on(broker_id: int) -> str:
        client = cluster.admin([broker_id])
        described = client.describe_configs([ConfigResource(ResourceType.TOPIC, topic_name)])
        return next(iter(described.values())).result(15)["retention.ms"].value

    for b in cluster.ids:
        wait_until(lambda: value_on(b) == "123456", timeout=30, message=f"broker {b} seeing retention.ms")


@pytest.mark.timeout(180)
def test_leadership_returns_to_preferred_replicas(cluster_factory, topic_name):
    cluster = cluster_factory(3, settings={**REPLICATED, "auto.leader.rebalance.enable": "false"}).start()
    cluster.wait_ready()
    create_topic(cluster, topic_name, partitions=1)
    preferred = cluster.partition_state(topic_name, 0).replicas[0]
    cluster.stop(preferred)
    wait_until(lambda: cluster.partition_state(topic_name, 0).leader not in (-1, preferred), timeout=30,
               message="another leader")
    cluster.broker(preferred).start()
    wait_until(lambda: len(cluster.partition_state(topic_name, 0).isr) == 3, timeout=60, message="the ISR full")
    assert cluster.partition_state(topic_name, 0).leader != preferred  # nothing moves it back by itself
    admin = cluster.admin()
    tp = TopicPartition(topic_name, 0)
    results = admin.elect_leaders(ElectionType.PREFERRED, [tp]).result(30)
    assert results[tp] is None, results
    wait_until(lambda: cluster.partition_state(topic_name, 0).leader == preferred, timeout=30,
               message="the preferred replica leading again")
    # a second election is not needed: Kafka's ELECTION_NOT_NEEDED
    again = admin.elect_leaders(ElectionType.PREFERRED, [tp]).result(30)
    assert again[tp] is not None and again[tp].code() == 84


@pytest.mark.timeout(180)
def test_auto_leader_rebalance_moves_leaders_back(cluster_factory, topic_name):
    cluster = cluster_factory(3, settings={**REPLICATED, "leader.imbalance.check.interval.seconds": "1"}).start()
    cluster.wait_ready()
    create_topic(cluster, topic_name, partitions=3)
    preferred = {p: cluster.partition_state(topic_name, p).replicas[0] for p in range(3)}
    victim = preferred[0]
    cluster.stop(victim)
    wait_until(lambda: cluster.partition_state(topic_name, 0).leader not in (-1, victim), timeout=30,
               message="another leader")
    cluster.broker(victim).start()
    wait_until(lambda: all(cluster.partition_state(topic_name, p).leader == preferred[p] for p in range(3)),
               timeout=60, message="every partition led by its preferred replica again")
