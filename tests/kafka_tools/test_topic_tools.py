"""kafka-topics, kafka-configs, kafka-get-offsets, kafka-delete-records, kafka-log-dirs, kafka-acls,
kafka-features and kafka-cluster (Apache Kafka 4.4's own tools) against a three-broker odradek cluster and
against Kafka 4.4 in the same run: the same commands, the same exit codes and, normalised, the same output.

What differs by nature is normalised away (addresses, ids, three replicas against one) or named where it is
asserted: the single-node KRaft reference sets a cluster-wide `min.insync.replicas=1` when it enables eligible
leader replicas (KIP-966, which a ZooKeeper-mode odradek does not claim), so its broker defaults list one
config more; `kafka-features` lists what each side implements (k18_api_versions.py).
"""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Producer

from odradek.broker.handlers import load_handlers
from odradek.broker.handlers.k18_api_versions import metadata_version_level, metadata_version_name

from .tools import assert_converges, assert_same, normalise, without_assignment

pytestmark = pytest.mark.timeout(240)


def bootstrap(side) -> list[str]:
    return ["--bootstrap-server", side.bootstrap]


def produce(side, topic: str, count: int, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": side.bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(count):
        producer.produce(topic, key=b"k%d" % i, value=b"value-%d" % i, partition=i % partitions)
    assert producer.flush(30) == 0


def create(runner, sides, topic: str, partitions: int, *extra: str) -> None:
    assert_same(runner.run_both(sides, "kafka-topics", lambda s: [
        *bootstrap(s), "--create", "--topic", topic, "--partitions", str(partitions),
        "--replication-factor", str(s.replication), *extra]), sides)


def test_kafka_topics_create_describe_alter_delete(runner, sides, odradek_cluster):
    topic = "tools-topics"
    create(runner, sides, topic, 3, "--config", "retention.ms=3600000")
    describe = lambda s: [*bootstrap(s), "--describe", "--topic", topic]
    out = runner.run_both(sides, "kafka-topics", describe)
    assert_same(out, sides, without_assignment)
    # three replicas, all in sync, on odradek: what the normalisation hid
    rows = [line for line in out["odradek"].out.splitlines() if "Partition:" in line]
    assert len(rows) == 3 and all("Replicas: " in r and len(r.split("Replicas: ")[1].split()[0].split(",")) == 3
                                  for r in rows), out["odradek"].out
    assert_same(runner.run_both(sides, "kafka-topics", lambda s: [
        *bootstrap(s), "--alter", "--topic", topic, "--partitions", "5"]), sides)
    described = assert_converges(runner, sides, "kafka-topics", describe, without_assignment)
    assert "PartitionCount: 5" in described and "Partition: 4" in described
    # fewer partitions than it has: refused on both
    assert_same(runner.run_both(sides, "kafka-topics", lambda s: [
        *bootstrap(s), "--alter", "--topic", topic, "--partitions", "2"]), sides)
    listed = assert_same(runner.run_both(sides, "kafka-topics", lambda s: [*bootstrap(s), "--list"]), sides)
    assert topic in listed.splitlines()
    # an existing topic again; an unknown one described
    assert_same(runner.run_both(sides, "kafka-topics", lambda s: [
        *bootstrap(s), "--create", "--topic", topic, "--partitions", "1", "--replication-factor", "1"]), sides)
    assert_same(runner.run_both(sides, "kafka-topics", lambda s: [
        *bootstrap(s), "--describe", "--topic", "no-such-topic"]), sides)
    assert_same(runner.run_both(sides, "kafka-topics", lambda s: [*bootstrap(s), "--delete", "--topic", topic]),
                sides)
    assert_converges(runner, sides, "kafka-topics", lambda s: [*bootstrap(s), "--describe", "--topic", topic])


def test_kafka_get_offsets_and_delete_records(runner, sides, tmp_path):
    topic = "tools-offsets"
    create(runner, sides, topic, 2)
    for side in sides:
        produce(side, topic, 20, 2)
    got = assert_same(runner.run_both(sides, "kafka-get-offsets", lambda s: [*bootstrap(s), "--topic", topic]),
                      sides)
    assert got.splitlines() == [f"{topic}:0:10", f"{topic}:1:10"]
    plan = tmp_path / "delete.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "offset": 4},
                                                             {"topic": topic, "partition": 1, "offset": -1}]}))
    # the tool prints the partitions in no fixed order (seen both ways on odradek's three brokers)
    deleted = assert_same(runner.run_both(sides, "kafka-delete-records", lambda s: [
        *bootstrap(s), "--offset-json-file", str(plan)]), sides,
        fix=lambda text, side: "\n".join(sorted(text.splitlines())))
    assert f"partition: {topic}-0 low_watermark: 4" in deleted and f"partition: {topic}-1 low_watermark: 10" in deleted
    earliest = assert_same(runner.run_both(sides, "kafka-get-offsets", lambda s: [
        *bootstrap(s), "--topic", topic, "--time", "earliest"]), sides)
    assert earliest.splitlines() == [f"{topic}:0:4", f"{topic}:1:10"]
    # beyond the high watermark: OFFSET_OUT_OF_RANGE on both
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "offset": 99}]}))
    assert_same(runner.run_both(sides, "kafka-delete-records", lambda s: [
        *bootstrap(s), "--offset-json-file", str(plan)]), sides)


def without_elr_default(text: str, side) -> str:
    """The reference's cluster-wide min.insync.replicas=1, set by KRaft when it enables ELR (KIP-966)."""
    if side.name != "kafka":
        return text
    return "\n".join(line for line in text.splitlines()
                     if not line.startswith("min.insync.replicas=1 sensitive=false synonyms={DYNAMIC_DEFAULT"))


def test_kafka_configs_topic_and_broker(runner, sides):
    topic = "tools-configs"
    create(runner, sides, topic, 1)
    topic_args = lambda s: [*bootstrap(s), "--entity-type", "topics", "--entity-name", topic]
    assert_same(runner.run_both(sides, "kafka-configs", lambda s: [
        *topic_args(s), "--alter", "--add-config", "retention.ms=100000,cleanup.policy=compact"]), sides)
    described = assert_converges(runner, sides, "kafka-configs", lambda s: [*topic_args(s), "--describe"])
    assert "cleanup.policy=compact" in described and "retention.ms=100000" in described
    assert_same(runner.run_both(sides, "kafka-configs", lambda s: [
        *topic_args(s), "--alter", "--delete-config", "retention.ms"]), sides)
    described = assert_converges(runner, sides, "kafka-configs", lambda s: [*topic_args(s), "--describe"])
    assert "retention.ms" not in described
    # a value Kafka refuses: the same error on both
    assert_same(runner.run_both(sides, "kafka-configs", lambda s: [
        *topic_args(s), "--alter", "--add-config", "cleanup.policy=sometimes"]), sides)

    default_args = lambda s: [*bootstrap(s), "--entity-type", "brokers", "--entity-default"]
    assert_same(runner.run_both(sides, "kafka-configs", lambda s: [
        *default_args(s), "--alter", "--add-config", "leader.replication.throttled.rate=1000000"]), sides)
    described = assert_converges(runner, sides, "kafka-configs", lambda s: [*default_args(s), "--describe"],
                                 without_elr_default)
    assert "leader.replication.throttled.rate=1000000" in described
    assert_same(runner.run_both(sides, "kafka-configs", lambda s: [
        *default_args(s), "--alter", "--delete-config", "leader.replication.throttled.rate"]), sides)
    assert_converges(runner, sides, "kafka-configs", lambda s: [*default_args(s), "--describe"],
                     without_elr_default)

    broker_args = lambda s: [*bootstrap(s), "--entity-type", "brokers", "--entity-name", str(s.broker_id)]
    one_broker = lambda text, side: text.replace(f"broker {side.broker_id}", "broker <id>")
    assert_same(runner.run_both(sides, "kafka-configs", lambda s: [
        *broker_args(s), "--alter", "--add-config", "follower.replication.throttled.rate=2000000"]), sides, one_broker)
    described = assert_converges(runner, sides, "kafka-configs", lambda s: [*broker_args(s), "--describe"],
                                 one_broker)
    assert "follower.replication.throttled.rate=2000000" in described
    assert_same(runner.run_both(sides, "kafka-configs", lambda s: [
        *broker_args(s), "--alter", "--delete-config", "follower.replication.throttled.rate"]), sides, one_broker)


def test_kafka_log_dirs(runner, sides, odradek):
    topic = "tools-log-dirs"
    create(runner, sides, topic, 2)
    for side in sides:
        produce(side, topic, 10, 2)
    out = runner.run_both(sides, "kafka-log-dirs", lambda s: [*bootstrap(s), "--describe", "--topic-list", topic])
    assert {o.rc for o in out.values()} == {0}, out
    reports = {name: json.loads(o.out.strip().splitlines()[-1]) for name, o in out.items()}

    def partitions(broker: dict) -> list:
        (log_dir,) = broker["logDirs"]
        assert log_dir["error"] is None
        return sorted((p["partition"], p["size"], p["offsetLag"], p["isFuture"]) for p in log_dir["partitions"])

    (kafka_broker,) = reports["kafka"]["brokers"]
    # every odradek broker holds a replica of both partitions, each what Kafka's one broker holds, byte for byte
    assert sorted(b["broker"] for b in reports["odradek"]["brokers"]) == odradek.broker_ids
    for broker in reports["odradek"]["brokers"]:
        assert partitions(broker) == partitions(kafka_broker), reports


def acl_lines(text: str, side) -> str:
    """kafka-acls output with its lines sorted: the tool keeps resources and entries in hash sets whose order
    changes from one JVM to the next (enum hash codes), whichever broker it talks to."""
    return "\n".join(sorted(text.splitlines()))


def test_kafka_acls_add_list_remove(runner, sides):
    topic = "tools-acls"
    add = lambda s: [*bootstrap(s), "--add", "--allow-principal", "User:alice", "--operation", "Read",
                     "--operation", "Describe", "--topic", topic, "--group", "tools-acls-group"]
    assert_same(runner.run_both(sides, "kafka-acls", add), sides, acl_lines)
    listed = assert_converges(runner, sides, "kafka-acls", lambda s: [*bootstrap(s), "--list", "--topic", topic],
                              acl_lines)
    assert "principal=User:alice" in listed and "operation=READ" in listed
    assert_converges(runner, sides, "kafka-acls", lambda s: [*bootstrap(s), "--list", "--principal", "User:alice"],
                     acl_lines)
    assert_same(runner.run_both(sides, "kafka-acls", lambda s: [
        *bootstrap(s), "--remove", "--force", "--allow-principal", "User:alice", "--operation", "Read",
        "--operation", "Describe", "--topic", topic, "--group", "tools-acls-group"]), sides, acl_lines)
    assert_converges(runner, sides, "kafka-acls", lambda s: [*bootstrap(s), "--list"], acl_lines)


def features(text: str) -> dict[str, tuple[str, str, str]]:
    """kafka-features describe: name -> (supported min, supported max, finalized level)."""
    found = {}
    for line in text.splitlines():
        fields = dict(zip(line.split()[0::2], line.split()[1::2]))
        found[fields["Feature:"]] = (fields["SupportedMinVersion:"], fields["SupportedMaxVersion:"],
                                     fields["FinalizedVersionLevel:"])
    return found


def test_kafka_features_describe(runner, sides):
    out = runner.run_both(sides, "kafka-features", lambda s: [*bootstrap(s), "describe"])
    assert {o.rc for o in out.values()} == {0}, out
    odradek, kafka = features(out["odradek"].out), features(out["kafka"].out)
    # what odradek implements, at the level it implements (k18_api_versions.py), and nothing more
    assert sorted(odradek) == ["group.version", "metadata.version", "share.version", "streams.version",
                               "transaction.version"]
    assert odradek["group.version"] == kafka["group.version"] == ("0", "1", "1")
    assert odradek["transaction.version"] == kafka["transaction.version"] == ("0", "2", "2")
    assert odradek["share.version"] == ("0", "1", "1")  # Kafka 4.4: 2, the share groups' dead-letter queue
    assert odradek["streams.version"] == kafka["streams.version"] == ("0", "1", "1")
    load_handlers()  # the registry metadata_version_level reads, as the broker has it
    name = metadata_version_name(metadata_version_level())
    assert odradek["metadata.version"] == (kafka["metadata.version"][0], name, name)
    # KRaft's own and ELR: Kafka's alone
    assert {"kraft.version", "eligible.leader.replicas.version"} <= set(kafka) - set(odradek)


def test_kafka_cluster_cluster_id(runner, sides, odradek_cluster):
    out = runner.run_both(sides, "kafka-cluster", lambda s: ["cluster-id", *bootstrap(s)])
    assert_same(out, sides)
    cluster_id = out["odradek"].out.split("Cluster ID:")[1].strip()
    assert cluster_id == odradek_cluster.admin().list_topics(timeout=10).cluster_id
    assert normalise(out["odradek"].out, sides[0]) == "Cluster ID: <id>"
