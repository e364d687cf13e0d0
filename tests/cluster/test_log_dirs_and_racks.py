"""DescribeLogDirs on real brokers (sizes, lags, totals, what `odradek cluster describe` makes of them) and
rack awareness: `broker.rack` registered and served, and replicas of new partitions spread over racks."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewPartitions, NewTopic
from kazoo.client import KazooClient

from tests.cluster.common import REPLICATED
from tests.interop.helpers import wait_until
from tests.interop.test_broker_semantics import request

DESCRIBE_LOG_DIRS, METADATA = 35, 3
RACKS = {1: "r1", 2: "r1", 3: "r2"}
SETTINGS = {**REPLICATED, "default.replication.factor": "2", "num.partitions": "4", "min.insync.replicas": "1",
            "offsets.topic.replication.factor": "2", "transaction.state.log.replication.factor": "2",
            "auto.leader.rebalance.enable": "false"}


def log_dirs(cluster, broker: int, version: int = 4, topics: list | None = None) -> list[dict]:
    response = request(cluster.broker(broker).bootstrap, DESCRIBE_LOG_DIRS, version, {"topics": topics})
    return response["results"]


def sizes(results: list[dict]) -> dict[tuple[str, int], int]:
    return {(t["name"], p["partition_index"]): p["partition_size"] for r in results for t in r["topics"]
            for p in t["partitions"]}


def spread_over_racks(cluster, topic: str, partitions: int, replicas: int) -> bool:
    """Every partition has ``replicas`` distinct replicas on min(replicas, 2) racks."""
    view = cluster.metadata()
    if topic not in view.topics or len(view.topics[topic]) != partitions:
        return False
    for state in view.topics[topic].values():
        racks = {RACKS[b] for b in state.replicas}
        if len(set(state.replicas)) != replicas or len(racks) != min(replicas, 2):
            raise AssertionError(f"{topic}-{state.partition}: replicas {state.replicas} on racks {racks}")
    return True


@pytest.mark.timeout(240)
def test_racks_are_registered_served_and_spread_over(cluster_factory, topic_name):
    cluster = cluster_factory(3, settings=SETTINGS, per_broker={b: {"broker.rack": r} for b, r in RACKS.items()})
    cluster.start()
    cluster.wait_ready()
    zk = KazooClient(hosts=cluster.zk_connect)
    zk.start(10)
    try:
        assert {b: json.loads(zk.get(f"/brokers/ids/{b}")[0]).get("rack") for b in cluster.ids} == RACKS
    finally:
        zk.stop()
        zk.close()
    admin = cluster.admin()
    described = admin.describe_cluster(request_timeout=10).result(10)
    assert {n.id: n.rack for n in described.nodes} == RACKS
    metadata = request(cluster.broker(2).bootstrap, METADATA, 9, {"topics": [], "allow_auto_topic_creation": False,
                                                                    "include_topic_authorized_operations": False})
    assert {b["node_id"]: b["rack"] for b in metadata["brokers"]} == RACKS
    # CreateTopics: each partition's two replicas on both racks (so broker 3, alone on r2, holds them all)
    admin.create_topics([NewTopic(topic_name, 6, 2)])[topic_name].result(30)
    wait_until(lambda: spread_over_racks(cluster, topic_name, 6, 2), timeout=30, message="6 partitions over racks")
    # three replicas: every broker, racks repeat only once every rack has one
    admin.create_topics([NewTopic(topic_name + "-3", 3, 3)])[topic_name + "-3"].result(30)
    wait_until(lambda: spread_over_racks(cluster, topic_name + "-3", 3, 3), timeout=30, message="factor 3")
    # CreatePartitions: the new ones too
    admin.create_partitions([NewPartitions(topic_name, 10)])[topic_name].result(30)
    wait_until(lambda: spread_over_racks(cluster, topic_name, 10, 2), timeout=30, message="10 partitions over racks")
    # auto-creation (default.replication.factor 2, num.partitions 4)
    auto = topic_name + "-auto"
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "broker.address.family": "v4", "acks": "all"})
    producer.produce(auto, value=b"x")
    assert producer.flush(30) == 0
    wait_until(lambda: spread_over_racks(cluster, auto, 4, 2), timeout=30, message="auto-created topic over racks")


@pytest.mark.timeout(240)
def test_log_dirs_sizes_and_describe_summary(cluster_factory, topic_name):
    cluster = cluster_factory(3, settings=SETTINGS).start()
    cluster.wait_ready()
    admin = cluster.admin()
    admin.create_topics([NewTopic(topic_name, num_partitions=3, replica_assignment=[[1, 2], [2, 3], [3, 1]])])[
        topic_name].result(30)
    lonely = topic_name + "-lonely"
    admin.create_topics([NewTopic(lonely, num_partitions=1, replica_assignment=[[2]])])[lonely].result(30)
    wait_until(lambda: all(len(cluster.partition_state(topic_name, p).isr) == 2 for p in range(3)), timeout=30,
               message="full ISRs")
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "broker.address.family": "v4", "acks": "all"})
    for i in range(300):
        producer.produce(topic_name, value=b"v" * 500, partition=i % 3)
    assert producer.flush(30) == 0
    held = {1: {0, 2}, 2: {0, 1}, 3: {1, 2}}

    def replicas_agree() -> bool:
        by_broker = {b: sizes(log_dirs(cluster, b)) for b in cluster.ids}
        for p in range(3):
            values = {by_broker[b].get((topic_name, p)) for b in cluster.ids if p in held[b]}
            if len(values) != 1 or None in values or values == {0}:
                return False
        return True

    wait_until(replicas_agree, timeout=30, message="every replica of each partition the same size")
    for b in cluster.ids:
        results = log_dirs(cluster, b)
        assert len(results) == 1
        result = results[0]
        assert result["error_code"] == 0
        assert result["log_dir"] == os.path.abspath(cluster.broker(b).data_dir)
        assert result["total_bytes"] > 0 and 0 <= result["usable_bytes"] <= result["total_bytes"]
        mine = {p for (t, p) in sizes(results) if t == topic_name}
        assert mine == held[b]
        assert all(p["offset_lag"] == 0 and p["is_future_key"] is False
                   for t in result["topics"] for p in t["partitions"])
        # v1 has no totals; named partitions only (those not held here left out)
        named = log_dirs(cluster, b, 1, [{"topic": topic_name, "partitions": [0, 1, 2]}])
        assert {p for (_, p) in sizes(named)} == held[b]
        assert "total_bytes" not in named[0] or named[0]["total_bytes"] == -1
    # `odradek cluster describe`: racks, log sizes per broker, and the summary's counts
    cluster.stop(2)

    def described() -> subprocess.CompletedProcess | None:
        out = subprocess.run([sys.executable, "-m", "odradek", "cluster", "describe", "--bootstrap",
                              cluster.broker(1).bootstrap], capture_output=True, text=True, timeout=60,
                             env={**os.environ, "COLUMNS": "250"})
        assert out.returncode == 0, out.stderr
        # (every partition of broker 2 leaves the ISRs, or goes offline, a moment after it stops)
        return out if "4 partitions: 2 under-replicated, 1 offline" in out.stdout else None

    out = wait_until(described, timeout=30, interval=0.5, message="describe to count broker 2's partitions")
    assert "LOG SIZE" in out.stdout and "RACK" in out.stdout
    assert str(os.path.abspath(cluster.broker(1).data_dir)) in out.stdout
    assert str(os.path.abspath(cluster.broker(2).data_dir)) not in out.stdout  # stopped: not listed
