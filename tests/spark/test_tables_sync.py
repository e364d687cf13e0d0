"""`odradek tables sync`: topics kept as Delta Lake tables, read back with Spark SQL.

Real processes: the module's broker, `odradek registry` as a subprocess, records produced with confluent-kafka
(Avro through AvroSerializer). The sync's queries run either in the shared SparkSession (odradek.tables.sync's
own functions, availableNow) or as the real command in its own process group, killed with SIGKILL mid-stream
and started again from its checkpoint.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("delta")
pytest.importorskip("fastavro")

from confluent_kafka import Producer  # noqa: E402
from interop.helpers import flush_fully, producer_config  # noqa: E402
from interop.test_schema_registry import RegistryProcess  # noqa: E402

from odradek.tables.sync import SourceOptions, TableSpec, start_query  # noqa: E402

from .test_avro_registry import produce_avro  # noqa: E402
from .util import create_topic, wait_until  # noqa: E402

EVENT_V1 = json.dumps({"type": "record", "name": "Event", "namespace": "shop", "fields": [
    {"name": "name", "type": "string"}, {"name": "n", "type": "long"}]})
EVENT_V2 = json.dumps({"type": "record", "name": "Event", "namespace": "shop", "fields": [
    {"name": "name", "type": "string"}, {"name": "n", "type": "long"},
    {"name": "region", "type": "string", "default": "none"}]})
ROOT = Path(__file__).resolve().parents[2]


def sync_once(spark, broker, topic: str, path: Path, mode: str, registry: RegistryProcess | None = None) -> None:
    """One availableNow run of the sync's query in the shared session (what `--available-now` runs)."""
    spec = TableSpec.of(topic, str(path), mode)
    query = start_query(spark, spec, SourceOptions(broker.bootstrap, registry.url if registry else None),
                        {"availableNow": True})
    assert query.awaitTermination(240), "the sync did not finish within 240 s"
    assert query.exception() is None, query.exception()


def table(spark, path: Path) -> list[dict[str, Any]]:
    return [r.asDict() for r in spark.sql(f"SELECT * FROM delta.`{path}` ORDER BY partition, offset").collect()]


def test_append_mode_lands_every_record_with_its_columns(delta, spark, broker, registry, tmp_path):
    topic = "tables-events"
    create_topic(broker.bootstrap, topic, partitions=2)
    produce_avro(broker, registry, topic, EVENT_V1, [{"name": f"e{i}", "n": i} for i in range(10)] + [None],
                 keys=[f"k{i % 3}".encode() for i in range(11)])
    path = tmp_path / "events"
    sync_once(spark, broker, topic, path, "append", registry)

    rows = table(spark, path)
    assert [(r["key"], r["name"], r["n"], r["offset"]) for r in rows] == \
        [(f"k{i % 3}", f"e{i}", i, i) for i in range(10)] + [("k1", None, None, 10)]
    assert list(rows[0]) == ["key", "name", "n", "topic", "partition", "offset", "timestamp", "date"]
    assert {r["topic"] for r in rows} == {topic} and {r["partition"] for r in rows} == {0}
    assert all(r["date"] == r["timestamp"].date() for r in rows)
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()[0]
    assert detail.format == "delta" and list(detail.partitionColumns) == ["date"]
    assert spark.sql(f"SELECT count(*) AS c FROM delta.`{path}` WHERE n >= 5").collect()[0].c == 5

    # a second run adds only what came after the first
    produce_avro(broker, registry, topic, EVENT_V1, [{"name": "late", "n": 99}], keys=[b"k9"])
    sync_once(spark, broker, topic, path, "append", registry)
    assert [(r["name"], r["offset"]) for r in table(spark, path)][-2:] == [(None, 10), ("late", 11)]
    assert len(table(spark, path)) == 12


def test_upsert_mode_keeps_the_latest_value_per_key_and_deletes_on_tombstones(delta, spark, broker, registry,
                                                                                tmp_path):
    topic = "tables-users"
    create_topic(broker.bootstrap, topic)
    path = tmp_path / "users"
    # first batch: k0..k3 twice (the later one wins), k3 deleted at the end; the batch creates the table
    values: list[Any] = [{"name": f"a{i}", "n": i} for i in range(8)] + [None]
    produce_avro(broker, registry, topic, EVENT_V1, values, keys=[f"k{i % 4}".encode() for i in range(8)] + [b"k3"])
    sync_once(spark, broker, topic, path, "upsert", registry)
    assert {r["key"]: (r["name"], r["offset"]) for r in table(spark, path)} == \
        {"k0": ("a4", 4), "k1": ("a5", 5), "k2": ("a6", 6)}

    # second batch, through MERGE: k1 updated, k0 deleted, k3 back, k9 new; a keyless record is skipped
    produce_avro(broker, registry, topic, EVENT_V1, [{"name": "b1", "n": 1}, None, {"name": "b3", "n": 3},
                                                     {"name": "b9", "n": 9}, {"name": "nokey", "n": 0}],
                 keys=[b"k1", b"k0", b"k3", b"k9", None])
    sync_once(spark, broker, topic, path, "upsert", registry)
    assert {r["key"]: r["name"] for r in table(spark, path)} == {"k1": "b1", "k2": "a6", "k3": "b3", "k9": "b9"}
    history = [r.operation for r in spark.sql(f"DESCRIBE HISTORY delta.`{path}`").orderBy("version").collect()]
    assert history[0] == "WRITE" and history[1:] == ["MERGE", "MERGE"]


def test_a_field_added_under_backward_compatibility_becomes_a_column(delta, spark, broker, registry, tmp_path):
    topic = "tables-evolving"
    create_topic(broker.bootstrap, topic)
    produce_avro(broker, registry, topic, EVENT_V1, [{"name": "old", "n": 1}], keys=[b"a"])
    for mode in ("append", "upsert"):
        sync_once(spark, broker, topic, tmp_path / mode, mode, registry)
    client = registry.client()
    assert client.get_compatibility() == "BACKWARD"
    produce_avro(broker, registry, topic, EVENT_V2, [{"name": "new", "n": 2, "region": "eu"}], keys=[b"b"])
    assert [v for v in client.get_versions(f"{topic}-value")] == [1, 2]
    for mode in ("append", "upsert"):
        sync_once(spark, broker, topic, tmp_path / mode, mode, registry)
        rows = {r["key"]: r for r in table(spark, tmp_path / mode)}
        assert "region" in spark.read.format("delta").load(str(tmp_path / mode)).columns
        # the old row was written before the column existed; the new one carries its value
        assert (rows["a"]["name"], rows["a"]["region"]) == ("old", None)
        assert (rows["b"]["name"], rows["b"]["region"]) == ("new", "eu")


# ---------------------------------------------------------------------------------------------------
# The command, as a user runs it
# ---------------------------------------------------------------------------------------------------


def sync_command(broker, *args: str) -> list[str]:
    return [sys.executable, "-m", "odradek", "tables", "sync", "--bootstrap", broker.bootstrap,
            "--master", "local[2]", "--conf", "spark.ui.enabled=false", *args]


def run_command(cmd: list[str], log: Path, timeout: float = 300) -> None:
    with open(log, "w") as out:
        rc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, timeout=timeout,
                            env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}).returncode
    assert rc == 0, log.read_text()[-4000:]


def commits(path: Path) -> int:
    return len(list((path / "_delta_log").glob("*.json")))


def test_killed_sync_restarts_without_losing_or_doubling_a_row(delta, spark, broker, registry, tmp_path):
    topic = "tables-killed"
    create_topic(broker.bootstrap, topic, partitions=2)
    total = 3000
    producer = Producer(producer_config(broker.bootstrap))
    for i in range(total):
        producer.produce(topic, key=f"u{i % 97}".encode(), value=f"v{i}".encode(), partition=i % 2)
    flush_fully(producer)
    path, log = tmp_path / "killed", tmp_path / "sync.log"
    cmd = sync_command(broker, "--topic", topic, "--path", str(path), "--mode", "append",
                       "--max-offsets-per-trigger", "200", "--trigger-seconds", "0.5")
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    try:
        wait_until(lambda: commits(path) >= 3 or proc.poll() is not None, timeout=240,
                   message="three commits of the sync")
        assert proc.poll() is None, log.read_text()[-4000:]
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and its JVM, mid-stream
        proc.wait(30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    landed = spark.read.format("delta").load(str(path)).count()
    assert 0 < landed < total, f"the kill came too late to test anything: {landed} rows"

    # started again from the same checkpoint (the command's query, in this session: one JVM start less)
    sync_once(spark, broker, topic, path, "append")
    rows = spark.read.format("delta").load(str(path))
    assert rows.count() == total
    assert rows.select("partition", "offset").distinct().count() == total
    assert sorted(r.value for r in rows.select("value").collect()) == sorted(f"v{i}" for i in range(total))


@pytest.mark.timeout(900)  # two runs of the command, each a JVM start
def test_ctrl_c_stops_the_sync_quietly_and_a_restart_continues(delta, spark, broker, tmp_path):
    """Ctrl-C as a terminal sends it (to the whole process group: the driver, its JVM, Spark's Python workers)
    mid-stream: the running micro-batch ends, exit 0, one summary line, nothing of Spark's on the screen; the
    next run from the same checkpoint lands every record once."""
    from .test_pipeline import NOISE

    topic = "tables-ctrl-c"
    create_topic(broker.bootstrap, topic, partitions=2)
    total = 3000
    producer = Producer(producer_config(broker.bootstrap))
    for i in range(total):
        producer.produce(topic, value=f"v{i}".encode(), partition=i % 2)
    flush_fully(producer)
    path, log = tmp_path / "table", tmp_path / "sync.log"
    cmd = sync_command(broker, "--topic", topic, "--path", str(path), "--mode", "append",
                       "--max-offsets-per-trigger", "200", "--trigger-seconds", "0.5")
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    try:
        wait_until(lambda: commits(path) >= 2 or proc.poll() is not None, timeout=420,
                   message="two commits of the sync")
        assert proc.poll() is None, log.read_text()[-4000:]
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
    output = log.read_text()
    assert proc.returncode == 0, output[-4000:]
    for word in NOISE:
        assert word not in output, f"{word!r} on the sync's screen:\n{output}"
    assert len([line for line in output.splitlines() if line.startswith("tables sync stopped:")]) == 1, output
    landed = spark.read.format("delta").load(str(path)).count()
    assert 0 < landed < total, f"the Ctrl-C came too late to test anything: {landed} rows"

    run_command(sync_command(broker, "--topic", topic, "--path", str(path), "--mode", "append", "--available-now"),
                tmp_path / "again.log")
    rows = spark.read.format("delta").load(str(path))
    assert rows.count() == total
    assert rows.select("partition", "offset").distinct().count() == total


def test_a_pattern_syncs_every_matching_topic_in_upsert_mode(delta, spark, broker, tmp_path):
    names = ["tables-cfg-a", "tables-cfg-b"]
    producer = Producer(producer_config(broker.bootstrap))
    for n, topic in enumerate(names):
        create_topic(broker.bootstrap, topic, config={"cleanup.policy": "compact"})
        for i in range(6):
            producer.produce(topic, key=f"key{i % 3}".encode(), value=f"{topic}:{i}".encode())
        producer.produce(topic, key=f"key{n}".encode(), value=None)
    create_topic(broker.bootstrap, "tables-other")
    flush_fully(producer)
    lake = tmp_path / "lake"
    run_command(sync_command(broker, "--topics-pattern", r"tables-cfg-.*", "--path", str(lake), "--mode",
                             "upsert", "--available-now"), tmp_path / "pattern.log")

    assert sorted(p.name for p in lake.iterdir()) == names
    for n, topic in enumerate(names):
        got = {r.key: r.value for r in spark.sql(f"SELECT key, value FROM delta.`{lake / topic}`").collect()}
        expected = {f"key{i}": f"{topic}:{i + 3}" for i in range(3) if i != n}
        assert got == expected
