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
a consumer group's committed offsets on the source must appear translated on the target (sync.group.offsets),
never past the offset committed upstream.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

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
    worker = JvmProcess(runner, classpath, f"connect-{side.name}", CONNECT_DISTRIBUTED, worker_settings(side, port), work)
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
