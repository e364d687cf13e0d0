"""Dynamic broker configs applied at run time, without a restart (issue 40, broker/dynamic_configs.py), on a
single node driven by real clients (confluent-kafka's AdminClient and Producer) and raw sockets:

* `message.max.bytes` set for this broker, then for every broker (`<default>`): a produce over it is refused
  with MESSAGE_TOO_LARGE at once, accepted again once deleted; the per-broker value wins over the default;
* `log.retention.ms` set cluster-wide: a topic without an override loses its old segments, and DescribeConfigs
  lists the topic's `retention.ms` as DYNAMIC_DEFAULT_BROKER_CONFIG;
* `max.connections.per.ip`: connections over the new limit are refused, and taken again once deleted;
* a stored value survives a restart and is applied at start;
* `listeners` / `advertised.listeners` are described with their addresses, `--listen` as a static config.
The three-broker case (a `<default>` change through one broker reaching another) is in
tests/cluster/test_cluster_configs.py; Kafka's answers to the requests themselves in
tests/reference/scenarios_configs.py.
"""

from __future__ import annotations

import socket
import time

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from odradek.protocol import codec
from odradek.protocol.api_keys import ApiKey
from tests.interop.helpers import connect, read_frame, wait_until
from tests.interop.test_broker_semantics import create_topic, request, watermarks

NODE = "1"
DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT = 2, 3, 4, 5


def alter_broker(bootstrap: str, resource: str, changes: dict[str, str | None]) -> None:
    """kafka-configs --entity-type brokers [--entity-default] --alter: through confluent-kafka's AdminClient for
    this broker's id; the cluster-wide default ("", which that client refuses to name) as kafka-configs sends it."""
    if resource == "":
        body = request(bootstrap, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"validate_only": False, "resources": [
            {"resource_type": 4, "resource_name": "", "configs": [
                {"name": k, "config_operation": 0 if v is not None else 1, "value": v} for k, v in changes.items()]}]})
        assert body["responses"][0]["error_code"] == 0, body
        return
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = [ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET if value is not None
                           else AlterConfigOpType.DELETE) for name, value in changes.items()]
    target = ConfigResource(ResourceType.BROKER, resource, incremental_configs=entries)
    admin.incremental_alter_configs([target])[target].result(timeout=15)


def produce_one(bootstrap: str, topic: str, size: int, partition: int = 0) -> KafkaError | None:
    """One record of ``size`` bytes; the delivery error, or None when it was written."""
    reports: list[KafkaError | None] = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "message.max.bytes": 10_000_000,
                         "retries": 0, "message.timeout.ms": 15000})
    producer.produce(topic, b"x" * size, partition=partition, on_delivery=lambda err, _msg: reports.append(err))
    producer.flush(20)
    assert len(reports) == 1, "no delivery report"
    return reports[0]


def too_large(error: KafkaError | None) -> bool:
    return error is not None and error.code() == KafkaError.MSG_SIZE_TOO_LARGE


def topic_config(bootstrap: str, topic: str, name: str) -> tuple[str | None, int]:
    body = request(bootstrap, ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
        {"resource_type": 2, "resource_name": topic, "configuration_keys": [name]}],
        "include_synonyms": False, "include_documentation": False})
    (entry,) = body["results"][0]["configs"]
    return entry["value"], entry["config_source"]


@pytest.mark.timeout(120)
def test_message_max_bytes_applies_without_restart(broker_factory, topic_name):
    b = broker_factory({"node.id": NODE})
    create_topic(b.bootstrap, topic_name)
    assert produce_one(b.bootstrap, topic_name, 5000) is None
    alter_broker(b.bootstrap, NODE, {"message.max.bytes": "2000"})
    assert too_large(produce_one(b.bootstrap, topic_name, 5000))
    assert produce_one(b.bootstrap, topic_name, 500) is None
    assert topic_config(b.bootstrap, topic_name, "max.message.bytes") == ("2000", DYNAMIC_BROKER)
    # the cluster-wide default is under the broker's own value: the own one rules until it is deleted
    alter_broker(b.bootstrap, "", {"message.max.bytes": "100000"})
    assert too_large(produce_one(b.bootstrap, topic_name, 5000))
    alter_broker(b.bootstrap, NODE, {"message.max.bytes": None})
    assert produce_one(b.bootstrap, topic_name, 5000) is None
    assert too_large(produce_one(b.bootstrap, topic_name, 200_000))
    assert topic_config(b.bootstrap, topic_name, "max.message.bytes") == ("100000", DYNAMIC_DEFAULT)
    # a topic's own override still wins over every broker-level value
    other = f"{topic_name}-own"
    create_topic(b.bootstrap, other, config={"max.message.bytes": "300000"})
    assert produce_one(b.bootstrap, other, 200_000) is None
    # kept across a restart, and applied at start
    b.restart()
    assert too_large(produce_one(b.bootstrap, topic_name, 200_000))
    alter_broker(b.bootstrap, "", {"message.max.bytes": None})
    assert produce_one(b.bootstrap, topic_name, 200_000) is None
    assert topic_config(b.bootstrap, topic_name, "max.message.bytes")[1] == DEFAULT


@pytest.mark.timeout(120)
def test_cluster_wide_retention_deletes_old_segments(broker_factory, topic_name):
    b = broker_factory({"node.id": NODE, "log.retention.check.interval.ms": "200"})
    create_topic(b.bootstrap, topic_name, config={"segment.bytes": "1024"})
    old_ts = int(time.time() * 1000) - 3_600_000
    producer = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0, "batch.num.messages": 1})
    for _ in range(12):
        producer.produce(topic_name, b"x" * 300, partition=0, timestamp=old_ts)
    assert producer.flush(20) == 0
    # a week's retention by default: nothing goes
    assert watermarks(b.bootstrap, topic_name) == (0, 12)
    alter_broker(b.bootstrap, "", {"log.retention.ms": "60000"})
    low = wait_until(lambda: watermarks(b.bootstrap, topic_name)[0] or None, timeout=30,
                     message="the log start to advance under the new retention")
    assert 0 < low < 12
    assert topic_config(b.bootstrap, topic_name, "retention.ms") == ("60000", DYNAMIC_DEFAULT)


def answered(bootstrap: str, sockets: list[socket.socket]) -> int:
    """How many of ``sockets`` (newly opened) get an ApiVersions answer; the broker closes those over a limit."""
    count = 0
    for i, sock in enumerate(sockets):
        try:
            sock.sendall(codec.encode_request(ApiKey.API_VERSIONS, 0, i, "limits", {}))
            read_frame(sock, timeout=5)
            count += 1
        except (OSError, ConnectionError, EOFError, AssertionError):
            pass
    return count


@pytest.mark.timeout(120)
def test_connection_limit_applies_to_new_connections(broker_factory):
    b = broker_factory({"node.id": NODE})
    alter_broker(b.bootstrap, NODE, {"max.connections.per.ip": "3"})
    opened = [connect(b.bootstrap) for _ in range(8)]
    try:
        assert answered(b.bootstrap, opened) <= 3
    finally:
        for sock in opened:
            sock.close()
    # the limit counts what the broker still holds open: the admin client gets in once the closed ones are gone
    wait_until(lambda: _try_alter(b.bootstrap, {"max.connections.per.ip": None}), timeout=20,
               message="the admin client admitted to delete the limit")
    opened = [connect(b.bootstrap) for _ in range(8)]
    try:
        assert answered(b.bootstrap, opened) == 8
    finally:
        for sock in opened:
            sock.close()


def _try_alter(bootstrap: str, changes: dict[str, str | None]) -> bool:
    try:
        alter_broker(bootstrap, NODE, changes)
        return True
    except Exception:
        return False


@pytest.mark.timeout(60)
def test_listeners_described_as_given(broker_factory):
    b = broker_factory({"node.id": NODE})
    body = request(b.bootstrap, ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
        {"resource_type": 4, "resource_name": NODE, "configuration_keys": ["listeners", "advertised.listeners"]}],
        "include_synonyms": True, "include_documentation": False})
    configs = {c["name"]: c for c in body["results"][0]["configs"]}
    listeners, advertised = configs["listeners"], configs["advertised.listeners"]
    # tests start brokers with --listen: a static config, as Kafka lists a listeners property
    assert (listeners["value"], listeners["config_source"]) == (f"PLAINTEXT://{b.bootstrap}", STATIC)
    assert [(s["name"], s["source"]) for s in listeners["synonyms"]] == [("listeners", STATIC), ("listeners", DEFAULT)]
    assert not listeners["read_only"]  # Kafka takes a per-broker change of its listeners
    assert (advertised["value"], advertised["config_source"], advertised["read_only"]) == (
        f"PLAINTEXT://{b.bootstrap}", DEFAULT, True)


@pytest.mark.timeout(60)
def test_describe_quorum_is_not_served_as_a_zookeeper_broker_would(broker):
    """DescribeQuorum (55) is KRaft's: a ZooKeeper-mode Kafka broker does not advertise it and closes the
    connection of a client that sends it anyway, as odradek does."""
    body = request(broker.bootstrap, ApiKey.API_VERSIONS, 3, {"client_software_name": "t",
                                                              "client_software_version": "1"})
    ranges = {k["api_key"]: (k["min_version"], k["max_version"]) for k in body["api_keys"]}
    assert 55 not in ranges
    assert ranges[34] == (1, 2) and ranges[74] == (0, 1) and ranges[35] == (0, 5)
    assert ranges[0][1] == 13 and ranges[2][1] == 11
    with connect(broker.bootstrap) as sock:
        sock.sendall(codec.encode_request(ApiKey.DESCRIBE_QUORUM, 0, 1, "quorum", {"topics": []}))
        sock.settimeout(10)
        assert sock.recv(1) == b""
