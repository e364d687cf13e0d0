"""Admin APIs through confluent-kafka's AdminClient: configs, partitions, record deletion, cluster."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from tests.interop.helpers import assert_delivered, consume_messages, produce_messages
from tests.interop.test_broker_semantics import create_topic, request, watermarks


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def topic_configs(bootstrap: str, topic: str) -> dict:
    client = admin(bootstrap)  # the client must outlive its futures
    resource = ConfigResource(ResourceType.TOPIC, topic)
    return client.describe_configs([resource])[resource].result(timeout=15)


@pytest.mark.timeout(60)
def test_describe_configs_reports_overrides_and_defaults(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, config={"retention.ms": "12345"})
    configs = topic_configs(broker.bootstrap, topic_name)
    assert configs["retention.ms"].value == "12345"
    assert configs["retention.ms"].source == 1  # DYNAMIC_TOPIC_CONFIG
    assert configs["cleanup.policy"].value == "delete"
    assert configs["cleanup.policy"].is_default
    assert configs["max.message.bytes"].value == "1048588"


@pytest.mark.timeout(60)
def test_describe_configs_lists_kafkas_whole_topic_config_set(broker, topic_name):
    # message.format.version: deprecated, accepted by Kafka 3.9 with no effect, and so here
    create_topic(broker.bootstrap, topic_name, config={"message.format.version": "2.8", "preallocate": "true"})
    configs = topic_configs(broker.bootstrap, topic_name)
    kafka_39 = {
        "cleanup.policy", "compression.type", "compression.gzip.level", "compression.lz4.level",
        "compression.zstd.level", "delete.retention.ms", "file.delete.delay.ms", "flush.messages", "flush.ms",
        "follower.replication.throttled.replicas", "index.interval.bytes", "leader.replication.throttled.replicas",
        "local.retention.bytes", "local.retention.ms", "max.compaction.lag.ms", "max.message.bytes",
        "message.downconversion.enable", "message.format.version", "message.timestamp.after.max.ms",
        "message.timestamp.before.max.ms", "message.timestamp.difference.max.ms", "message.timestamp.type",
        "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "min.insync.replicas", "preallocate",
        "remote.log.copy.disable", "remote.log.delete.on.disable", "remote.storage.enable", "retention.bytes",
        "retention.ms", "segment.bytes", "segment.index.bytes", "segment.jitter.ms", "segment.ms",
        "unclean.leader.election.enable"}
    assert set(configs) == kafka_39
    assert (configs["message.format.version"].value, configs["message.format.version"].source) == ("2.8", 1)
    assert (configs["delete.retention.ms"].value, configs["min.cleanable.dirty.ratio"].value) == ("86400000", "0.5")
    assert configs["delete.retention.ms"].is_default and configs["unclean.leader.election.enable"].value == "false"


@pytest.mark.timeout(60)
def test_broker_passwords_are_never_described(broker_factory):
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="s3cret";'
    b = broker_factory({"plain.sasl.jaas.config": jaas, "ssl.key.password": "k3y-pw"})
    resource = ConfigResource(ResourceType.BROKER, "0")
    client = admin(b.bootstrap)  # alive until its future is done
    configs = client.describe_configs([resource])[resource].result(timeout=15)
    for name in ("plain.sasl.jaas.config", "ssl.key.password"):
        assert configs[name].is_sensitive and configs[name].value is None
    assert configs["advertised.listeners"].value is not None


@pytest.mark.timeout(60)
def test_describe_configs_unknown_topic_fails(broker, topic_name):
    resource = ConfigResource(ResourceType.TOPIC, topic_name + "-missing")
    with pytest.raises(KafkaException):
        client = admin(broker.bootstrap)
        client.describe_configs([resource])[resource].result(timeout=15)


@pytest.mark.timeout(60)
def test_incremental_alter_configs_set_delete_append(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, config={"retention.ms": "1000"})
    resource = ConfigResource(ResourceType.TOPIC, topic_name, incremental_configs=[
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ConfigEntry("segment.bytes", "1048576", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
    ])
    client = admin(broker.bootstrap)
    client.incremental_alter_configs([resource])[resource].result(timeout=15)
    configs = topic_configs(broker.bootstrap, topic_name)
    assert configs["retention.ms"].value == str(7 * 24 * 3600 * 1000)
    assert configs["segment.bytes"].value == "1048576"
    assert set(configs["cleanup.policy"].value.split(",")) == {"delete", "compact"}
    # The change survives a restart of the broker (persisted in the topic registry).
    broker.restart()
    configs = topic_configs(broker.bootstrap, topic_name)
    assert configs["segment.bytes"].value == "1048576"


@pytest.mark.timeout(60)
def test_alter_configs_rejects_bad_values(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    resource = ConfigResource(ResourceType.TOPIC, topic_name, incremental_configs=[
        ConfigEntry("retention.ms", "not-a-number", incremental_operation=AlterConfigOpType.SET)])
    client = admin(broker.bootstrap)
    with pytest.raises(KafkaException) as info:
        client.incremental_alter_configs([resource])[resource].result(timeout=15)
    assert info.value.args[0].code() == 40  # INVALID_CONFIG
    # Legacy AlterConfigs replaces every override.
    response = request(broker.bootstrap, 33, 1, {"resources": [{"resource_type": 2, "resource_name": topic_name,
                                                                 "configs": [{"name": "retention.ms", "value": "777"}]}]})
    assert response["responses"][0]["error_code"] == 0
    assert topic_configs(broker.bootstrap, topic_name)["retention.ms"].value == "777"


@pytest.mark.timeout(60)
def test_create_partitions_grows_topic(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=2)
    client = admin(broker.bootstrap)
    client.create_partitions([NewPartitions(topic_name, 5)])[topic_name].result(timeout=15)
    assert len(client.list_topics(topic_name, timeout=10).topics[topic_name].partitions) == 5
    assert_delivered(produce_messages(broker.bootstrap, topic_name, [{"value": b"p4", "partition": 4}]))
    assert [m.value() for m in consume_messages(broker.bootstrap, topic_name, 1, partition=4)] == [b"p4"]
    with pytest.raises(KafkaException) as info:
        client.create_partitions([NewPartitions(topic_name, 3)])[topic_name].result(timeout=15)
    assert info.value.args[0].code() == 37  # INVALID_PARTITIONS


@pytest.mark.timeout(60)
def test_delete_records_moves_log_start(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    assert_delivered(produce_messages(broker.bootstrap, topic_name, [{"value": b"%d" % i, "partition": 0} for i in range(10)]))
    tp = TopicPartition(topic_name, 0, 6)
    client = admin(broker.bootstrap)
    result = client.delete_records([tp])[tp].result(timeout=15)
    assert result.low_watermark == 6
    assert watermarks(broker.bootstrap, topic_name) == (6, 10)
    got = consume_messages(broker.bootstrap, topic_name, 4)
    assert [m.offset() for m in got] == [6, 7, 8, 9]
    broker.restart()
    assert watermarks(broker.bootstrap, topic_name) == (6, 10)


@pytest.mark.timeout(60)
def test_delete_records_answered_is_kept_through_sigkill(broker_factory, topic_name):
    """The answer comes once the new log start is checkpointed (by the flusher thread), so a SIGKILL right
    after it loses nothing; segments wholly below the start are gone."""
    b = broker_factory({"log.segment.bytes": "1024"})
    create_topic(b.bootstrap, topic_name)
    for _ in range(4):  # four batches of ten, each over segment.bytes: four segments
        assert_delivered(produce_messages(b.bootstrap, topic_name, [{"value": b"v" * 200, "partition": 0}] * 10))
    part_dir = b.data_dir / f"{topic_name}-0"
    segments_before = len(list(part_dir.glob("*.log")))
    tp = TopicPartition(topic_name, 0, 30)
    client = admin(b.bootstrap)
    assert client.delete_records([tp])[tp].result(timeout=15).low_watermark == 30
    b.kill()
    b.start()
    assert watermarks(b.bootstrap, topic_name) == (30, 40)
    assert [m.offset() for m in consume_messages(b.bootstrap, topic_name, 10)] == list(range(30, 40))
    assert len(list(part_dir.glob("*.log"))) < segments_before


@pytest.mark.timeout(60)
def test_describe_cluster(broker):
    client = admin(broker.bootstrap)
    cluster = client.describe_cluster().result(timeout=15)
    assert cluster.cluster_id
    assert [n.port for n in cluster.nodes] == [broker.port]
    response = request(broker.bootstrap, 60, 1, {"endpoint_type": 1})
    assert response["error_code"] == 0 and response["brokers"][0]["port"] == broker.port
