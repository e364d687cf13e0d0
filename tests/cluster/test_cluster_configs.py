"""Configs that belong to the cluster, not to one broker (issues 37 and 40), in a three-broker cluster:

* a group's configs (KIP-848/KIP-932) are altered and described through ANY broker, as Kafka takes them,
  and the coordinator applies them (the broker that does not coordinate the group asks the one that does);
* a broker's dynamic configs are stored in ZooKeeper (/config/brokers/<id>, /config/brokers/<default>),
  described by that broker as DYNAMIC_BROKER_CONFIG / DYNAMIC_DEFAULT_BROKER_CONFIG, and refused for
  another broker's id (Kafka answers for its own id only: a client sends a broker's configs to it);
* kafka-reassign-partitions --verify's cleanup (DELETE of the three throttles on every broker) succeeds;
* a cluster-wide dynamic default set through one broker is applied by another without a restart.
"""

from __future__ import annotations

import json

import pytest
from kazoo.client import KazooClient

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from tests.cluster.common import REPLICATED, create_topic
from tests.interop.helpers import wait_until
from odradek.protocol import codec
from tests.interop.test_broker_semantics import connect, read_frame, request

GROUP, BROKER, TOPIC = 32, 4, 2
SET, DELETE = 0, 1
THROTTLES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
             "replica.alter.log.dirs.io.max.bytes.per.second")


def alter(bootstrap: str, kind: int, name: str, changes: dict[str, str | None]) -> dict:
    body = request(bootstrap, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"validate_only": False, "resources": [
        {"resource_type": kind, "resource_name": name, "configs": [
            {"name": k, "config_operation": SET if v is not None else DELETE, "value": v}
            for k, v in changes.items()]}]})
    return body["responses"][0]


def described(bootstrap: str, kind: int, name: str, keys: list[str] | None = None) -> dict[str, tuple]:
    body = request(bootstrap, ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
        {"resource_type": kind, "resource_name": name, "configuration_keys": keys}],
        "include_synonyms": False, "include_documentation": False})
    (result,) = body["results"]
    assert result["error_code"] == 0, result
    return {c["name"]: (c["value"], c["config_source"]) for c in result["configs"]}


def coordinator_of(cluster, group: str) -> int:
    def ask():
        body = request(cluster.broker(cluster.ids[0]).bootstrap, ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]})
        found = body["coordinators"][0]
        return found["node_id"] if found["error_code"] == 0 else None
    return wait_until(ask, timeout=30, interval=0.2, message=f"a coordinator for {group}")


@pytest.mark.timeout(180)
def test_group_configs_through_any_broker(cluster_factory, topic_name):
    cluster = cluster_factory(3, settings=REPLICATED).start()
    cluster.wait_ready()
    group = f"{topic_name}-group"
    coordinator = coordinator_of(cluster, group)
    others = [b for b in cluster.ids if b != coordinator]
    # set through one broker that does not coordinate the group, described through the other and the coordinator
    answer = wait_until(lambda: (lambda a: a if a["error_code"] != ErrorCode.COORDINATOR_NOT_AVAILABLE else None)(
        alter(cluster.broker(others[0]).bootstrap, GROUP, group,
              {"share.auto.offset.reset": "earliest", "consumer.session.timeout.ms": "50000"})),
        timeout=30, interval=0.3, message="the coordinator taking the change")
    assert answer["error_code"] == 0, answer
    for node in (others[1], coordinator, others[0]):
        configs = described(cluster.broker(node).bootstrap, GROUP, group)
        assert configs["share.auto.offset.reset"] == ("earliest", 8), (node, configs)
        assert configs["consumer.session.timeout.ms"] == ("50000", 8), (node, configs)
        assert configs["share.isolation.level"][1] == 5  # not set: the default
    # checked where it arrives: an unknown name or a bad value is refused by a non-coordinator too
    assert alter(cluster.broker(others[1]).bootstrap, GROUP, group, {"no.such.group.config": "1"})[
        "error_code"] == ErrorCode.INVALID_CONFIG
    assert alter(cluster.broker(others[1]).bootstrap, GROUP, group, {"share.auto.offset.reset": "sometimes"})[
        "error_code"] == ErrorCode.INVALID_CONFIG
    # deleted through the other non-coordinator: back to the default everywhere
    assert alter(cluster.broker(others[1]).bootstrap, GROUP, group, {"share.auto.offset.reset": None})[
        "error_code"] == 0
    configs = described(cluster.broker(coordinator).bootstrap, GROUP, group)
    assert configs["share.auto.offset.reset"][1] == 5 and configs["consumer.session.timeout.ms"][1] == 8
    # a request that claims to come from another broker is answered where it lands, never sent on again
    with connect(cluster.broker(others[0]).bootstrap) as sock:
        sock.sendall(codec.encode_request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, 7, "broker-9-group-configs", {
            "validate_only": False, "resources": [{"resource_type": GROUP, "resource_name": group, "configs": [
                {"name": "share.auto.offset.reset", "config_operation": SET, "value": "latest"}]}]}))
        _, body = codec.decode_response(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, read_frame(sock))
    assert body["responses"][0]["error_code"] == ErrorCode.NOT_COORDINATOR


@pytest.mark.timeout(180)
def test_broker_configs_stored_in_zookeeper(cluster_factory):
    cluster = cluster_factory(3, settings=REPLICATED).start()
    cluster.wait_ready()
    b2 = cluster.broker(2).bootstrap
    answer = alter(b2, BROKER, "2", {"log.cleaner.backoff.ms": "20000", "no.such.broker.config": "x",
                                     "follower.replication.throttled.rate": "1000000"})
    assert answer["error_code"] == 0, answer
    assert alter(b2, BROKER, "", {"log.retention.ms": "7200000"})["error_code"] == 0
    zk = KazooClient(hosts=cluster.zk_connect)
    zk.start(timeout=15)
    try:
        own = json.loads(zk.get("/config/brokers/2")[0])["config"]
        default = json.loads(zk.get("/config/brokers/<default>")[0])["config"]
    finally:
        zk.stop()
        zk.close()
    assert own == {"log.cleaner.backoff.ms": "20000", "no.such.broker.config": "x",
                   "follower.replication.throttled.rate": "1000000"}
    assert default == {"log.retention.ms": "7200000"}
    configs = described(b2, BROKER, "2", ["log.cleaner.backoff.ms", "no.such.broker.config", "log.retention.ms"])
    assert configs == {"log.cleaner.backoff.ms": ("20000", 2), "no.such.broker.config": (None, 2),
                       "log.retention.ms": ("7200000", 3)}
    # every broker sees the cluster-wide default; broker 3 holds no config of its own
    assert described(cluster.broker(3).bootstrap, BROKER, "", None) == {"log.retention.ms": ("7200000", 3)}
    assert "log.cleaner.backoff.ms" not in {n for n, (_, s) in described(
        cluster.broker(3).bootstrap, BROKER, "3", None).items() if s == 2}
    # a broker answers for its own id only, as Kafka does
    refused = alter(cluster.broker(3).bootstrap, BROKER, "2", {"log.cleaner.backoff.ms": "1"})
    assert (refused["error_code"], refused["error_message"]) == (
        ErrorCode.INVALID_REQUEST, "Unexpected broker id, expected 3, but received 2")
    # kafka-reassign-partitions --verify's cleanup on every broker, then the defaults' too
    for node in cluster.ids:
        assert alter(cluster.broker(node).bootstrap, BROKER, str(node), dict.fromkeys(THROTTLES))["error_code"] == 0
    assert alter(b2, BROKER, "", dict.fromkeys(THROTTLES))["error_code"] == 0
    after = described(b2, BROKER, "2", ["follower.replication.throttled.rate", "log.cleaner.backoff.ms"])
    assert after["follower.replication.throttled.rate"][1] != 2 and after["log.cleaner.backoff.ms"] == ("20000", 2)


@pytest.mark.timeout(240)
def test_dynamic_default_reaches_every_broker(cluster_factory, topic_name):
    """`message.max.bytes` set for every broker (`<default>`) through broker 1 is applied by broker 3 without a
    restart (the /config/changes notification, as Kafka's ZooKeeper mode told its brokers), and its deletion
    through broker 2 too."""
    from tests.interop.test_broker_configs_runtime import produce_one, too_large

    cluster = cluster_factory(3, settings=REPLICATED).start()
    cluster.wait_ready()
    create_topic(cluster, topic_name, partitions=3, replication=1, **{"min.insync.replicas": "1"})
    on_3 = [p for p in range(3) if cluster.partition_state(topic_name, p).leader == 3]
    assert on_3, "no partition led by broker 3"
    b3 = cluster.broker(3).bootstrap

    def refused_on_3() -> bool:
        return too_large(produce_one(b3, topic_name, 5000, partition=on_3[0]))

    assert produce_one(b3, topic_name, 5000, partition=on_3[0]) is None
    assert alter(cluster.broker(1).bootstrap, BROKER, "", {"message.max.bytes": "2000"})["error_code"] == 0
    wait_until(refused_on_3, timeout=30, interval=0.2, message="broker 3 applying message.max.bytes=2000")
    assert described(b3, BROKER, "", ["message.max.bytes"]) == {"message.max.bytes": ("2000", 3)}
    assert described(b3, TOPIC, topic_name, ["max.message.bytes"]) == {"max.message.bytes": ("2000", 3)}
    assert alter(cluster.broker(2).bootstrap, BROKER, "", {"message.max.bytes": None})["error_code"] == 0
    wait_until(lambda: not refused_on_3(), timeout=30, interval=0.2, message="broker 3 back to the static limit")
