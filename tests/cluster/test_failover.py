"""A three-broker cluster under failures: a partition leader killed under load, a controlled shutdown, the
controller killed, ZooKeeper restarted, and too few in-sync replicas for acks=all.

Every test drives real brokers (kill -9, SIGTERM) with real clients and checks what the clients were told
against what the cluster holds afterwards (checker.py): nothing acknowledged is lost, nothing is written
twice, nothing is reordered.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, Producer

from tests.cluster.checker import LoadProducer, check_history, read_partitions
from tests.cluster.common import REPLICATED, create_topic, full_isr, kill_leader_under_load
from tests.interop.helpers import wait_until

@pytest.mark.timeout(180)
def test_leader_killed_under_load_loses_nothing_and_rejoins(cluster_factory, topic_name):
    cluster = cluster_factory(3, settings=REPLICATED).start()
    cluster.wait_ready()
    create_topic(cluster, topic_name)
    victim, ledger = kill_leader_under_load(cluster, topic_name, LoadProducer(cluster.bootstrap, topic_name, 3).start())

    # the killed broker comes back, truncates whatever was never committed, catches up, rejoins the ISR...
    cluster.broker(victim).start()
    wait_until(lambda: full_isr(cluster, topic_name, 3), timeout=60, message="the restarted broker back in every ISR")
    # ...and holds every acknowledged record: with the other two gone, it alone serves them
    for other in [b for b in cluster.ids if b != victim]:
        cluster.kill(other)
    wait_until(lambda: all(cluster.partition_state(topic_name, p, broker_id=victim).leader == victim
                           for p in range(3)), timeout=30, message=f"broker {victim} leading every partition")
    history = check_history(ledger.acked, read_partitions(cluster.broker(victim).bootstrap, topic_name, 3))
    assert history.ok, str(history)


@pytest.mark.timeout(120)
def test_controlled_shutdown_moves_leaders_first(cluster_factory, topic_name):
    cluster = cluster_factory(3, settings=REPLICATED).start()
    cluster.wait_ready()
    create_topic(cluster, topic_name)
    leaders = {cluster.partition_state(topic_name, p).leader for p in range(3)}
    victim = sorted(leaders)[0]
    load = LoadProducer(cluster.bootstrap, topic_name, 3).start()
    load.wait_acked(200)
    stopped_at = time.monotonic()
    assert cluster.stop(victim) == 0
    wait_until(lambda: all(victim != (s := cluster.partition_state(topic_name, p)).leader and victim not in s.isr
                           for p in range(3)), timeout=15, message=f"broker {victim} out of every leadership and ISR")
    before = load.ledger.count()
    load.wait_acked(before + 200)
    ledger = load.stop()
    assert not ledger.errors, ledger.errors[:5]  # only retriable errors reached the client: it never failed
    assert ledger.longest_gap_after(stopped_at) < 10.0
    history = check_history(ledger.acked, read_partitions(cluster.bootstrap, topic_name, 3))
    assert history.ok, str(history)
    assert f"controlled shutdown of broker {victim} done" in cluster.broker(victim).log_tail(20000)


@pytest.mark.timeout(120)
def test_controller_killed_a_new_one_takes_over(cluster_factory, topic_name):
    cluster = cluster_factory(3, settings=REPLICATED).start()
    old = cluster.wait_ready().controller_id
    cluster.kill(old)
    view = wait_until(lambda: (v := cluster.metadata()).controller_id not in (-1, old) and v, timeout=30,
                      message="a new controller")
    assert view.controller_id in cluster.running_ids()
    # the new controller creates topics and elects their leaders; the cluster serves
    create_topic(cluster, topic_name, replication=2)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "broker.address.family": "v4"})
    for i in range(10):
        producer.produce(topic_name, value=f"v-{i}".encode(), partition=i % 3)
    assert producer.flush(30) == 0
    read = read_partitions(cluster.bootstrap, topic_name, 3)
    assert sorted(v for records in read.values() for _, v in records) == sorted(f"v-{i}".encode() for i in range(10))
    # the old controller comes back as an ordinary broker
    cluster.broker(old).start()
    wait_until(lambda: old in cluster.metadata().brokers, timeout=30, message="the old controller back as a broker")
    assert cluster.metadata().controller_id == view.controller_id


@pytest.mark.timeout(120)
def test_zookeeper_restart_brokers_reconnect(cluster_factory, zookeeper, topic_name):
    cluster = cluster_factory(3, settings=REPLICATED).start()
    cluster.wait_ready()
    create_topic(cluster, topic_name)
    zookeeper.restart()
    # the brokers reconnect (their sessions live on) and keep serving; the registrations are all there
    cluster.wait_ready()
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=zookeeper.connect_string + cluster.chroot)
    zk.start(timeout=10)
    try:
        assert sorted(int(b) for b in zk.get_children("/brokers/ids")) == [1, 2, 3]
        assert zk.exists("/controller") is not None
    finally:
        zk.stop()
        zk.close()
    create_topic(cluster, topic_name + "-after")
    load = LoadProducer(cluster.bootstrap, topic_name + "-after", 3, max_records=100, interval_s=0).start()
    load.wait_acked(100)
    assert check_history(load.stop().acked, read_partitions(cluster.bootstrap, topic_name + "-after", 3)).ok
    # the controller watches the brokers again: one that dies now leaves every ISR
    victim = next(b for b in (1, 2, 3) if b != cluster.metadata().controller_id)
    cluster.kill(victim)
    wait_until(lambda: all(victim not in cluster.partition_state(topic_name, p).isr for p in range(3)), timeout=30,
               message=f"broker {victim}, killed after ZooKeeper's restart, out of every ISR")


@pytest.mark.timeout(180)
def test_min_insync_replicas_refuses_acks_all_and_loses_nothing(cluster_factory, topic_name):
    cluster = cluster_factory(3, settings=REPLICATED).start()
    cluster.wait_ready()
    create_topic(cluster, topic_name, partitions=1)
    load = LoadProducer(cluster.bootstrap, topic_name, 1, max_records=200, interval_s=0).start()
    load.wait_acked(200)
    acked = load.stop().acked
    leader = cluster.partition_state(topic_name, 0).leader
    others = [b for b in cluster.ids if b != leader]
    for broker_id in others:
        cluster.kill(broker_id)
    wait_until(lambda: list(cluster.partition_state(topic_name, 0).isr) == [leader], timeout=30,
               message="the ISR shrunk to the leader alone")
    refused = Producer({"bootstrap.servers": cluster.broker(leader).bootstrap, "acks": "all", "retries": 0,
                        "broker.address.family": "v4", "message.timeout.ms": 10000})
    reports = []
    refused.produce(topic_name, value=b"refused", partition=0, on_delivery=lambda err, msg: reports.append(err))
    refused.flush(15)
    assert [e.code() for e in reports] == [KafkaError.NOT_ENOUGH_REPLICAS], reports
    # acks=1 is still taken by the leader alone
    single = Producer({"bootstrap.servers": cluster.broker(leader).bootstrap, "acks": 1,
                       "broker.address.family": "v4"})
    single.produce(topic_name, value=b"single-0", partition=0)
    assert single.flush(15) == 0
    for broker_id in others:
        cluster.broker(broker_id).start()
    wait_until(lambda: full_isr(cluster, topic_name, 1), timeout=60, message="the ISR full again")
    read = read_partitions(cluster.bootstrap, topic_name, 1)
    assert check_history(acked, read).ok
    assert b"refused" not in [v for _, v in read[0]]
