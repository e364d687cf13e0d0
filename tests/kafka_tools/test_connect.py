"""Kafka Connect (a distributed worker with the FileStream connectors) and MirrorMaker 2 (dedicated mode) against
a three-broker odradek cluster and against Apache Kafka 4.4 in the same run.

Connect: one worker per cluster, in parallel. The FileStreamSource connector reads a file of lines into a topic
it creates (topic.creation.default.*), the FileStreamSink connector writes that topic to a file, both set up
through the REST API. Once every line is in the sink file the worker is stopped, lines are appended to the
source file and the worker is started again: it must read its connectors back from its config topic and go on
from the source offset it stored (GET /connectors/NAME/offsets) and the sink group's committed offset, so the
sink file ends up the source file exactly, and the topic holds each line once. The worker's internal topics
(config, offsets, status) must exist compacted with the partitions and replication the worker was given.

MirrorMaker 2: one process (org.apache.kafka.connect.mirror.MirrorMaker) with the flows odradek->kafka and
kafka->odradek, each copying one two-partition topic of records with keys and headers. Every record must
arrive once, in its partition, in order, with its key, value and headers; the checkpoint, offset-sync,
heartbeat and MirrorMaker's own Connect topics must be created on the clusters Kafka's layout puts them on;
the committed offsets of a consumer group that read every record on the source must appear on the target,
translated (sync.group.offsets) to the copy's end.

Connect and MirrorMaker are 4.3.1 (connect-pom.xml: connect-mirror and connect-file have no 4.4.0 on Maven
Central), the same client against both brokers.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from tests.conftest import free_port
from tests.interop.helpers import wait_until

from .connect import CONNECT_DISTRIBUTED, MIRROR_MAKER, ConnectRest, JvmProcess, connect_classpath
from .tools import Side, ToolRunner

pytestmark = pytest.mark.timeout(300)

FIRST_LINES, MORE_LINES = 40, 25
WORKER_START_S = 120.0
# The worker's internal topics and what it is told to create them with: name, partitions (the config topic
# must have one; Kafka refuses the worker more).
INTERNAL_TOPICS = {"config": ("connect-configs", 1), "offset": ("connect-offsets", 3),
                   "status": ("connect-status", 2)}
STRING = "org.apache.kafka.connect.storage.StringConverter"


def admin(side: Side) -> AdminClient:
    return AdminClient({"bootstrap.servers": side.bootstrap})


def describe_topics(side: Side, names: list[str]) -> dict[str, dict[str, Any]]:
    """Each topic's partition count, replication factor and cleanup.policy."""
    client = admin(side)
    metadata = client.list_topics(timeout=20)
    found: dict[str, dict[str, Any]] = {}
    for name in names:
        topic = metadata.topics.get(name)
        if topic is None or topic.error is not None:
            continue
        resource = ConfigResource(ConfigResource.Type.TOPIC, name)
        configs = client.describe_configs([resource])[resource].result(timeout=20)
        found[name] = {"partitions": len(topic.partitions),
                       "replicas": {len(p.replicas) for p in topic.partitions.values()},
                       "cleanup.policy": configs["cleanup.policy"].value}
    return found


def topic_config(side: Side, topic: str, name: str) -> str | None:
    resource, client = ConfigResource(ConfigResource.Type.TOPIC, topic), admin(side)
    return client.describe_configs([resource])[resource].result(timeout=20)[name].value


def end_offsets(side: Side, topic: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": side.bootstrap, "group.id": "end-offsets", "enable.auto.commit": False})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=20)[1] for p in range(partitions)]
    finally:
        consumer.close()


def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def worker_settings(side: Side, port: int) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "bootstrap.servers": side.bootstrap, "group.id": f"connect-{side.name}",
        "key.converter": STRING, "value.converter": STRING,
        "listeners": f"http://127.0.0.1:{port}", "rest.advertised.host.name": "127.0.0.1",
        "plugin.discovery": "service_load",  # the connectors are on the classpath: no scan of 95 jars
        "offset.flush.interval.ms": 500, "scheduled.rebalance.max.delay.ms": 0,
    }
    for kind, (topic, partitions) in INTERNAL_TOPICS.items():
        settings[f"{kind}.storage.topic"] = topic
        settings[f"{kind}.storage.replication.factor"] = side.replication
        if kind != "config":
            settings[f"{kind}.storage.partitions"] = partitions
    return settings


def source_position(rest: ConnectRest, name: str) -> int | None:
    """The byte position FileStreamSource stored for its file (KIP-875's GET /connectors/NAME/offsets)."""
    status, body = rest.call("GET", f"/connectors/{name}/offsets")
    if status != 200 or not body["offsets"]:
        return None
    return body["offsets"][0]["offset"]["position"]


@pytest.fixture(scope="module")
def classpath() -> str:
    return connect_classpath()


def file_connectors_on(side: Side, runner: ToolRunner, classpath: str, work: Path) -> dict[str, Any]:
    """The FileStream round trip with a worker restart on one cluster; what it saw, for the comparison."""
    work.mkdir(parents=True, exist_ok=True)
    source, sink, topic = work / "source.txt", work / "sink.txt", "connect-lines"
    first = [f"line {i:03d} from {side.name}: {'x' * (i % 7)}" for i in range(FIRST_LINES)]
    more = [f"line {i:03d} from {side.name}, after the restart" for i in range(FIRST_LINES, FIRST_LINES + MORE_LINES)]
    source.write_text("".join(f"{line}\n" for line in first))
    port = free_port()
    rest = ConnectRest(port)
    worker = JvmProcess(runner, classpath, f"connect-{side.name}", CONNECT_DISTRIBUTED, worker_settings(side, port),
                        work)
    try:
        worker.start()
        info = rest.wait_up(worker, WORKER_START_S)
        rest.put_connector("file-source", {
            "connector.class": "FileStreamSource", "tasks.max": "1", "file": str(source), "topic": topic,
            "topic.creation.default.partitions": "1",
            "topic.creation.default.replication.factor": str(side.replication)})
        rest.put_connector("file-sink", {"connector.class": "FileStreamSink", "tasks.max": "1", "file": str(sink),
                                         "topics": topic})
        for name in ("file-source", "file-sink"):
            rest.wait_running(name, 1, WORKER_START_S)
        wait_until(lambda: len(lines_of(sink)) >= FIRST_LINES, timeout=60, interval=0.5,
                   message=f"{side.name}: {FIRST_LINES} lines in the sink file")
        assert lines_of(sink) == first, f"{side.name}: sink file before the restart\n{worker.log()}"
        size = source.stat().st_size
        wait_until(lambda: source_position(rest, "file-source") == size, timeout=30, interval=0.5,
                   message=f"{side.name}: the source offset at the file's end ({size})")
        worker.stop()

        with source.open("a") as f:
            f.write("".join(f"{line}\n" for line in more))
        worker.start()
        rest.wait_up(worker, WORKER_START_S)
        listed = wait_until(lambda: sorted(rest.call("GET", "/connectors")[1] or []) or None, timeout=60,
                            interval=0.5, message=f"{side.name}: connectors read back from the config topic")
        for name in ("file-source", "file-sink"):
            rest.wait_running(name, 1, WORKER_START_S)
        wait_until(lambda: len(lines_of(sink)) >= FIRST_LINES + MORE_LINES, timeout=60, interval=0.5,
                   message=f"{side.name}: {FIRST_LINES + MORE_LINES} lines in the sink file")
        final_size = source.stat().st_size
        wait_until(lambda: source_position(rest, "file-source") == final_size, timeout=30, interval=0.5,
                   message=f"{side.name}: the source offset at the file's new end ({final_size})")
        sink_lines = lines_of(sink)
        internal = describe_topics(side, [t for t, _ in INTERNAL_TOPICS.values()] + [topic])
        return {"version": info["version"], "connectors": listed, "sink": sink_lines, "expected": first + more,
                "topic_records": end_offsets(side, topic, 1), "topics": internal, "worker": worker}
    finally:
        worker.stop()


def test_connect_distributed_file_source_and_sink(runner, classpath, odradek, kafka, tmp_path):
    sides = [odradek, kafka]
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {s.name: pool.submit(file_connectors_on, s, runner, classpath, tmp_path / s.name) for s in sides}
        seen = {name: f.result() for name, f in futures.items()}
    for side in sides:
        got = seen[side.name]
        log = got["worker"].log()
        assert got["connectors"] == ["file-sink", "file-source"], log
        # Every line once, in order: a lost line, a line read again from the file (source offset lost) or a
        # record delivered again to the sink (sink offset lost) all show here.
        assert got["sink"] == got["expected"], f"{side.name}: the sink file differs from the source\n{log}"
        assert got["topic_records"] == [FIRST_LINES + MORE_LINES], f"{side.name}: records in the topic {got}"
        for kind, (topic, partitions) in INTERNAL_TOPICS.items():
            assert got["topics"].get(topic) == {"partitions": partitions, "replicas": {side.replication},
                                                "cleanup.policy": "compact"}, f"{side.name} {kind}: {got['topics']}"
        assert got["topics"]["connect-lines"] == {"partitions": 1, "replicas": {side.replication},
                                                  "cleanup.policy": "delete"}, got["topics"]
    assert seen["odradek"]["version"] == seen["kafka"]["version"]


MM2_RECORDS, MM2_PARTITIONS = 60, 2
MM2_RETENTION_MS = "7200000"  # a topic config of the source, which MirrorMaker gives the copy (sync.topic.configs)
# What each direction copies: the source cluster's alias, its topic and the group whose offsets get translated.
FLOWS = {"odradek": ("mm2-orders", "mm2-orders-readers"), "kafka": ("mm2-payments", "mm2-payments-readers")}


def produce_records(side: Side, topic: str) -> list[list[tuple]]:
    """MM2_RECORDS records with keys, values and a header over MM2_PARTITIONS partitions; per partition, in order."""
    producer = Producer({"bootstrap.servers": side.bootstrap, "acks": "all", "enable.idempotence": True})
    sent: list[list[tuple]] = [[] for _ in range(MM2_PARTITIONS)]
    for i in range(MM2_RECORDS):
        record = (b"key-%d" % i, f"{topic} record {i} from {side.name}".encode(), [("seq", str(i).encode())])
        producer.produce(topic, key=record[0], value=record[1], headers=record[2], partition=i % MM2_PARTITIONS)
        sent[i % MM2_PARTITIONS].append(record)
    assert producer.flush(30) == 0
    return sent


def read_records(side: Side, topic: str, expected: int, timeout: float) -> list[list[tuple]]:
    """Every record of `topic` from the beginning until `expected` arrived or `timeout` passed; per partition."""
    consumer = Consumer({"bootstrap.servers": side.bootstrap, "group.id": f"check-{topic}",
                         "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 1000})
    got: list[list[tuple]] = [[] for _ in range(MM2_PARTITIONS)]
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(MM2_PARTITIONS)])
        deadline = time.monotonic() + timeout
        while sum(map(len, got)) < expected and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=200, timeout=0.5):
                if msg.error() is None:
                    got[msg.partition()].append((msg.key(), msg.value(), list(msg.headers() or [])))
    finally:
        consumer.close()
    return got


def commit_offsets(side: Side, group: str, topic: str, offsets: list[int]) -> None:
    consumer = Consumer({"bootstrap.servers": side.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in enumerate(offsets)], asynchronous=False)
    finally:
        consumer.close()


def group_offsets(side: Side, group: str, topic: str) -> list[int] | None:
    """The group's committed offsets (OffsetFetch, without joining), or None while a partition has none."""
    consumer = Consumer({"bootstrap.servers": side.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        committed = consumer.committed([TopicPartition(topic, p) for p in range(MM2_PARTITIONS)], timeout=10)
    finally:
        consumer.close()
    offsets = [tp.offset for tp in sorted(committed, key=lambda tp: tp.partition)]
    return offsets if all(o >= 0 for o in offsets) else None


def mm2_settings(odradek: Side, kafka: Side) -> dict[str, Any]:
    sides = {"odradek": odradek, "kafka": kafka}
    settings: dict[str, Any] = {
        "clusters": "odradek, kafka", "tasks.max": 1, "sync.topic.acls.enabled": "false",
        "refresh.topics.interval.seconds": 1, "refresh.groups.interval.seconds": 1,
        "emit.checkpoints.interval.seconds": 1, "emit.heartbeats.interval.seconds": 1,
        "sync.group.offsets.enabled": "true", "sync.group.offsets.interval.seconds": 1,
        "offset.flush.interval.ms": 500,
        "offset.lag.max": 0,  # an offset sync for every record MirrorMaker copies, so the last one's too
    }
    for alias, side in sides.items():
        target = "kafka" if alias == "odradek" else "odradek"
        topic, _ = FLOWS[alias]
        settings[f"{alias}.bootstrap.servers"] = side.bootstrap
        # MirrorMaker's own Connect topics on each cluster, with that cluster's replication.
        for kind in ("config", "offset", "status"):
            settings[f"{alias}.{kind}.storage.replication.factor"] = side.replication
        settings[f"{alias}.offset.storage.partitions"] = 3
        settings[f"{alias}.status.storage.partitions"] = 2
        flow = f"{alias}->{target}"
        settings[f"{flow}.enabled"] = "true"
        settings[f"{flow}.topics"] = topic
        # Replicated topics, checkpoints and heartbeats go to the target; offset syncs stay on the source.
        for key in ("replication.factor", "checkpoints.topic.replication.factor",
                    "heartbeats.topic.replication.factor"):
            settings[f"{flow}.{key}"] = sides[target].replication
        settings[f"{flow}.offset-syncs.topic.replication.factor"] = side.replication
    return settings


def test_mirror_maker_2_both_ways(runner, classpath, odradek, kafka, tmp_path):
    sides = {"odradek": odradek, "kafka": kafka}
    sent: dict[str, list[list[tuple]]] = {}
    committed: dict[str, list[int]] = {}
    for alias, side in sides.items():
        topic, group = FLOWS[alias]
        new_topic = NewTopic(topic, MM2_PARTITIONS, side.replication, config={"retention.ms": MM2_RETENTION_MS})
        client = admin(side)  # held: a future of a client already destroyed fails
        client.create_topics([new_topic])[topic].result(timeout=30)
        sent[alias] = produce_records(side, topic)
        # A group that read every record: its offsets must reach the target translated exactly, which the offset
        # sync of each partition's last record proves. (An offset between two syncs is translated no further than
        # the older one proves, and which syncs MirrorMaker emits while it catches up varies from run to run.)
        committed[alias] = [len(records) for records in sent[alias]]
        commit_offsets(side, group, topic, committed[alias])

    mm2 = JvmProcess(runner, classpath, "mirror-maker", MIRROR_MAKER, mm2_settings(odradek, kafka), tmp_path)
    try:
        mm2.start()
        for alias in sides:
            target = sides["kafka" if alias == "odradek" else "odradek"]
            topic, group = FLOWS[alias]
            remote = f"{alias}.{topic}"
            copied = read_records(target, remote, MM2_RECORDS, timeout=120)
            assert mm2.running(), mm2.log()
            # Each record once, in its partition and order, with key, value and header.
            assert copied == sent[alias], f"{alias}->{target.name}: {list(map(len, copied))} records\n{mm2.log()}"
            assert end_offsets(target, remote, MM2_PARTITIONS) == [len(p) for p in sent[alias]]
            wait_until(lambda: topic_config(target, remote, "retention.ms") == MM2_RETENTION_MS, timeout=30,
                       interval=1.0, message=f"{remote}'s retention.ms synced from {alias}")
            try:
                wait_until(lambda: group_offsets(target, group, remote) == committed[alias], timeout=60,
                           interval=1.0, message=f"{group}'s offsets translated onto {target.name}")
            except AssertionError as exc:
                checkpoints = end_offsets(target, f"{alias}.checkpoints.internal", 1)
                syncs = end_offsets(sides[alias], f"mm2-offset-syncs.{target.name}.internal", 1)
                raise AssertionError(f"{exc}: {group_offsets(target, group, remote)} against {committed[alias]}; "
                                     f"{checkpoints} checkpoints, {syncs} offset syncs\n{mm2.log()}") from None
        # Where Kafka's layout puts MirrorMaker's topics: on each target the copy, the checkpoints of the other
        # cluster's groups, heartbeats and MirrorMaker's Connect topics; on each source the offset syncs.
        for alias, side in sides.items():
            other = "kafka" if alias == "odradek" else "odradek"
            expected = {f"{other}.{FLOWS[other][0]}": (MM2_PARTITIONS, "delete"),
                        f"{other}.checkpoints.internal": (1, "compact"), "heartbeats": (1, "compact"),
                        f"mm2-offset-syncs.{other}.internal": (1, "compact"),
                        f"mm2-configs.{other}.internal": (1, "compact"),
                        f"mm2-offsets.{other}.internal": (3, "compact"), f"mm2-status.{other}.internal": (2, "compact")}
            found = wait_until(lambda: (lambda d: d if len(d) == len(expected) else None)(
                describe_topics(side, list(expected))), timeout=30, interval=1.0, message=f"MM2 topics on {alias}")
            seen = {name: (t["partitions"], t["cleanup.policy"]) for name, t in found.items()}
            assert seen == expected, f"{alias}: {found}"
            assert all(t["replicas"] == {side.replication} for t in found.values()), found
    finally:
        mm2.stop()
