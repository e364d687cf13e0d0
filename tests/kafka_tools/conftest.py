"""Fixtures of the Kafka tools suite: per module, a three-broker odradek cluster on a ZooKeeper of its own and
an Apache Kafka 4.4 reference, both with an ACL authorizer (super user ANONYMOUS, so every PLAINTEXT client
may do everything and `kafka-acls` has something to manage), and the runner of Kafka's tools.

Each module starts its pair once; the tools run in tool servers (tools.py), JVMs started once per session
that run one tool after another, rather than in a JVM each (1.5 to 4 s a tool run); tests name their
topics and groups after themselves. Without the reference install (`make reference`, which also brings
kafka-tools), java or ZooKeeper the tests skip with the reason; under CI (`CI` set) that is a failure.
"""

from __future__ import annotations

import os
import shutil
from typing import Iterator

import pytest

from odradek.tools.zookeeper import ZooKeeperServer, zookeeper_unavailable
from tests.cluster.conftest import Cluster
from tests.reference.conftest import installed_launcher

from .tools import Side, ToolRunner

AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "super.users": "User:ANONYMOUS"}
# Everything replicated three ways on odradek; transaction and offsets partitions kept few so that the
# transaction tools' listings stay small. The reference keeps reference/kafka.py's single-node settings.
ODRADEK_SETTINGS = {**AUTHORIZER, "default.replication.factor": "3", "min.insync.replicas": "2",
                    "offsets.topic.replication.factor": "3", "offsets.topic.num.partitions": "3",
                    "transaction.state.log.replication.factor": "3", "transaction.state.log.min.isr": "2",
                    "transaction.state.log.num.partitions": "3", "group.initial.rebalance.delay.ms": "0",
                    "num.partitions": "1"}
KAFKA_SETTINGS = {**AUTHORIZER, "transaction.state.log.num.partitions": "3", "offsets.topic.num.partitions": "3"}


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def runner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ToolRunner]:
    _, libs = installed_launcher()
    if not any(libs.glob("kafka-tools-[0-9]*.jar")):
        _unavailable(f"Kafka's tools (kafka-tools) are not in {libs}: run `make reference` again")
    if shutil.which("javac") is None:
        _unavailable("javac not found (tools/install-system-deps.sh installs a JDK)")
    runner = ToolRunner(libs, tmp_path_factory.mktemp("kafka-tools"))
    yield runner
    runner.close()


@pytest.fixture(scope="module")
def kafka(runner: ToolRunner) -> Iterator[Side]:
    """Apache Kafka 4.4, single-node KRaft (node 1), for this module."""
    ref, libs = installed_launcher()
    kafka = ref.KafkaReference(libs, settings=KAFKA_SETTINGS)
    try:
        kafka.start()
    except RuntimeError as exc:
        kafka.stop()
        pytest.fail(f"Apache Kafka {ref.kafka_version()} did not start: {exc}")
    yield Side("kafka", kafka.bootstrap, [1], replication=1, broker_id=1, addresses=[kafka.bootstrap])
    kafka.stop()


@pytest.fixture(scope="module")
def odradek_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    reason = zookeeper_unavailable()
    if reason is not None:
        _unavailable(reason)
    base = tmp_path_factory.mktemp("odradek-tools")
    zookeeper = ZooKeeperServer(base / "zookeeper").start()
    cluster = Cluster(base / "cluster", zookeeper, 3, ODRADEK_SETTINGS)
    try:
        cluster.start()
        cluster.wait_ready()
        yield cluster
    finally:
        cluster.stop_all()
        zookeeper.stop()


@pytest.fixture(scope="module")
def odradek(odradek_cluster: Cluster) -> Side:
    """The cluster as the tools see it; broker 2 is the one per-broker commands name."""
    return Side("odradek", odradek_cluster.bootstrap, odradek_cluster.ids, replication=3, broker_id=2,
                addresses=[odradek_cluster.broker(b).bootstrap for b in odradek_cluster.ids])


@pytest.fixture(scope="module")
def sides(odradek: Side, kafka: Side) -> list[Side]:
    return [odradek, kafka]
