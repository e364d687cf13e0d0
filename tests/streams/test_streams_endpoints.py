"""Kafka Streams 4.4 interactive-query metadata (`application.server`) with group.protocol=streams, on
odradek and on Apache Kafka 4.4.

Two instances of java/EndpointMetadata.java (a per-key count over a 4-partition topic: four stateful tasks),
with endpoints localhost:7101 and localhost:7102, run until each instance's
`KafkaStreams.metadataForAllStreamsClients()` names both endpoints, each with some of the input partitions,
none with the same one, all four covered: the heartbeat's PartitionsByUserEndpoint, kept current through
its EndpointInformationEpoch. Which instance holds which partitions is the assignor's choice; the shape of
the answer must be the same on both brokers.
"""

from __future__ import annotations

import os
import queue
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Callable, Iterator

import pytest

from tests.interop.helpers import wait_until
from tests.streams.conftest import StreamsInstance, _unavailable, resolve_jars

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

SOURCE = Path(__file__).resolve().parent / "java" / "EndpointMetadata.java"
PARTITIONS = 4
ENDPOINTS = ("localhost:7101", "localhost:7102")
RUN_TIMEOUT_S = 120


@pytest.fixture(scope="module")
def endpoint_classpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    javac = shutil.which("javac")
    if javac is None or shutil.which("java") is None:
        _unavailable("javac/java not found (tools/install-system-deps.sh installs a JDK)")
    cp = os.pathsep.join(str(j) for j in resolve_jars())
    out = tmp_path_factory.mktemp("endpoint-classes")
    proc = subprocess.run([javac, "-nowarn", "-d", str(out), "-cp", cp, str(SOURCE)],
                          capture_output=True, text=True, timeout=180)
    if proc.returncode != 0:
        pytest.fail(f"javac failed on EndpointMetadata.java:\n{proc.stdout}\n{proc.stderr}")
    return os.pathsep.join([str(out), cp])


@pytest.fixture
def launch(endpoint_classpath: str, tmp_path: Path) -> Iterator[Callable[..., StreamsInstance]]:
    started: list[StreamsInstance] = []

    def start(name: str, bootstrap: str, app_id: str, source: str, endpoint: str) -> StreamsInstance:
        err = tmp_path / f"{name}.stderr"
        proc = subprocess.Popen(
            [shutil.which("java") or "java", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp",
             endpoint_classpath, "EndpointMetadata", bootstrap, app_id, source, "streams",
             str(tmp_path / f"state-{name}"), endpoint],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err.open("w"), text=True)
        instance = StreamsInstance(name, proc, err)

        def read() -> None:
            for line in proc.stdout:  # type: ignore[union-attr]
                instance.lines.put(line.rstrip("\n"))

        threading.Thread(target=read, daemon=True).start()
        started.append(instance)
        return instance

    yield start
    for instance in started:
        instance.close(timeout=30)


def latest_clients(instance: StreamsInstance, views: dict[str, dict[str, frozenset[str]]]) -> dict:
    """The instance's last CLIENTS line as {endpoint: its partitions} (kept in `views` between calls)."""
    assert instance.proc.poll() is None, f"{instance.name} exited:\n{instance.stderr_tail()}"
    while True:
        try:
            line = instance.lines.get_nowait()
        except queue.Empty:
            return views.get(instance.name, {})
        if line.startswith("CLIENTS "):
            views[instance.name] = {
                k: frozenset(p for p in v.split(",") if p)
                for k, v in (entry.split("=", 1) for entry in line[8:].split(";") if entry)}


def run(bootstrap: str, start: Callable[..., StreamsInstance], prefix: str) -> dict[str, frozenset[str]]:
    source, app = f"{prefix}-in", f"{prefix}-app"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(source, PARTITIONS, 1)]).values():
        future.result(30)
    instances = [start(f"{prefix}-{i}", bootstrap, app, source, e) for i, e in enumerate(ENDPOINTS)]
    every = {f"{source}-{p}" for p in range(PARTITIONS)}
    views: dict[str, dict[str, frozenset[str]]] = {}

    def settled() -> bool:
        seen = [latest_clients(i, views) for i in instances]
        first = seen[0]
        return (all(s == first for s in seen) and sorted(first) == sorted(ENDPOINTS)
                and all(first[e] for e in ENDPOINTS) and not (first[ENDPOINTS[0]] & first[ENDPOINTS[1]])
                and set().union(*first.values()) == every)

    wait_until(settled, RUN_TIMEOUT_S, 0.2, "both instances seeing both endpoints with the partitions split")
    for i in instances:
        assert i.close() == 0, f"{i.name} did not close cleanly:\n{i.stderr_tail()}"
    return views[instances[0].name]


@pytest.mark.timeout(600)
def test_metadata_for_all_streams_clients(broker, kafka_reference, launch):
    token = os.urandom(3).hex()
    ours = run(broker.bootstrap, launch, f"ep-{token}-o")
    theirs = run(kafka_reference.bootstrap, launch, f"ep-{token}-k")
    assert sorted(ours) == sorted(theirs) == sorted(ENDPOINTS)
    assert sorted(len(v) for v in ours.values()) == sorted(len(v) for v in theirs.values())
