"""`odradek tables sync`: a Spark streaming job that keeps Delta Lake tables in step with topics.

Each topic is one streaming query: it reads the topic through `format("odradek")` and writes the table at
its path. The table's columns:

    key        the record key as a string (UTF-8)
    <fields>   with --schema-registry: the fields of the latest schema of `<topic>-value`, one column each,
               whatever its schemaType (AVRO, JSON, PROTOBUF: the connector's valueFormat avro, json or
               protobuf; records written under older compatible versions read as the latest, so added
               Avro fields come with their defaults; a schema that is not a record/object/message gives
               one column `value` of its type); without it, `value`, the value as a string
    topic, partition, offset, timestamp   where the record came from, and its timestamp
    date       the timestamp's UTC date: the table is partitioned by it

Modes:
* append: every record is a row, through Delta's streaming sink, which records each micro-batch in the
  table's transaction log under the query's id: after a crash Spark replays the batch from its checkpoint
  and Delta skips what it already committed, so every record lands exactly once.
* upsert: one row per key, the latest (by timestamp, then offset), and a tombstone (null value) deletes the
  key's row. Each micro-batch keeps the latest record of each key and applies it with two MERGEs (the
  deletes, then the updates and inserts); records without a key are skipped. foreachBatch is at least once,
  so each MERGE carries Delta's idempotent-write identity (`spark.databricks.delta.write.txnAppId` = the
  sync's id, kept in its checkpoint directory, and `txnVersion` = 2 x batch id, + 1 for the second MERGE):
  replayed after a crash, a MERGE already committed is skipped.

Schema evolution: columns come from the latest schema when a query starts. A running sync asks the registry
every --check-seconds for the subject's latest id and, when a new version appeared, restarts that topic's
query from its checkpoint: the new columns are added to the table (`mergeSchema` in append mode, MERGE's
schema evolution in upsert mode); earlier rows hold null in them.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger("odradek.tables.sync")

METADATA_COLUMNS = ("key", "topic", "partition", "offset", "timestamp", "date")
CHECKPOINT_DIR = "_odradek_checkpoint"  # inside the table's directory: Delta ignores names starting with _
SYNC_ID_FILE = "odradek-sync.json"
# Session settings of the job: Delta's snapshot state in few partitions (the default 50 tasks per table
# read is made for large tables on large clusters). Schema evolution is asked for per write instead of with
# the session-wide spark.databricks.delta.schema.autoMerge.enabled, which also makes Spark's V2 writes of
# other formats in the same session fail (an internal error merging write options, Spark 4.2 + Delta 4.4).
SESSION_DEFAULTS = {"spark.databricks.delta.snapshotPartitions": "4"}


class SyncError(RuntimeError):
    """A sync that cannot start (the message says why)."""


@dataclass(frozen=True)
class TableSpec:
    """One topic and where its table and checkpoint live."""

    topic: str
    path: str
    checkpoint: str
    mode: str  # append | upsert

    @classmethod
    def of(cls, topic: str, path: str, mode: str, checkpoint: str | None = None) -> "TableSpec":
        # Executors write the table's files and the driver the checkpoint: only an absolute path names the
        # same place for both.
        path = os.path.abspath(path)
        return cls(topic, path, os.path.abspath(checkpoint or os.path.join(path, CHECKPOINT_DIR)), mode)


@dataclass(frozen=True)
class SourceOptions:
    bootstrap: str
    registry_url: str | None = None
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = None
    client: dict[str, str] = field(default_factory=dict)  # Kafka client settings, without the kafka. prefix


# ---------------------------------------------------------------------------------------------------
# The rows
# ---------------------------------------------------------------------------------------------------


def latest_value_schema(registry_url: str, topic: str) -> tuple[int, str]:
    """(id, the connector's valueFormat) of the latest schema of `<topic>-value`; raises SyncError when there
    is none or its schemaType is none the connector reads."""
    from odradek.spark.registry_schemas import FORMAT_OF_SCHEMA_TYPE, RegistryError, fetch_latest

    subject = f"{topic}-value"
    try:
        latest = fetch_latest(registry_url, subject)
    except RegistryError as exc:
        raise SyncError(str(exc)) from None
    value_format = FORMAT_OF_SCHEMA_TYPE.get(latest.schema_type)
    if value_format is None:
        raise SyncError(f"the latest schema of {subject!r} (id {latest.id}) is a {latest.schema_type} schema, "
                        f"which the connector does not read")
    return latest.id, value_format


def latest_schema_id(registry_url: str, topic: str) -> int:
    """The id of the latest schema of `<topic>-value` (SyncError as latest_value_schema)."""
    return latest_value_schema(registry_url, topic)[0]


def table_rows(spark: Any, topic: str, source: SourceOptions) -> Any:
    """The streaming DataFrame of `topic`'s records as table rows (the columns of the module docstring),
    plus `_tombstone` (the value is null) for the upsert mode to use and drop."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    reader = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", source.bootstrap)
              .option("subscribe", topic).option("startingOffsets", source.starting_offsets))
    for key, value in source.client.items():
        reader = reader.option(f"kafka.{key}", value)
    if source.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(source.max_offsets_per_trigger))
    if source.registry_url:
        # the format follows the registered schema's schemaType (AVRO, JSON, PROTOBUF)
        _, value_format = latest_value_schema(source.registry_url, topic)
        reader = reader.option("valueFormat", value_format).option("schema.registry.url", source.registry_url)
    records = reader.load()
    value_type = records.schema["value"].dataType
    if source.registry_url and not isinstance(value_type, StructType):
        # a schema of one value (an Avro "string", a JSON Schema array, ...) has no fields: one column `value`
        values = [F.col("value")]
    elif source.registry_url:
        fields = [f.name for f in value_type.fields]
        clash = sorted(set(fields) & set(METADATA_COLUMNS))
        if clash:
            raise SyncError(f"the value schema of {topic!r} has fields named {', '.join(clash)}, which the table "
                            f"uses for the record's own {', '.join(clash)}")
        values = [F.col(f"value.`{name}`").alias(name) for name in fields]
    else:
        values = [F.col("value").cast("string").alias("value")]
    return records.select(
        F.col("key").cast("string").alias("key"), *values, "topic", "partition", "offset", "timestamp",
        F.to_date("timestamp").alias("date"), F.col("value").isNull().alias("_tombstone"))


# ---------------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------------


def sync_id(checkpoint: str) -> str:
    """The sync's identity in Delta's idempotent writes, made once and kept beside Spark's checkpoint: a new
    checkpoint (batch ids from 0 again) gets a new identity, so Delta never skips its batches as done."""
    marker = Path(checkpoint) / SYNC_ID_FILE
    try:
        return str(json.loads(marker.read_text())["sync_id"])
    except (OSError, ValueError, KeyError):
        pass
    marker.parent.mkdir(parents=True, exist_ok=True)
    made = f"odradek-tables-sync-{uuid.uuid4()}"
    tmp = marker.with_suffix(".tmp")
    tmp.write_text(json.dumps({"sync_id": made}) + "\n")
    os.replace(tmp, marker)
    return made


def _exists(spark: Any, path: str) -> bool:
    from delta.tables import DeltaTable

    return DeltaTable.isDeltaTable(spark, path)


def _idempotent(spark: Any, app_id: str, version: int) -> Any:
    """Session settings that make the next Delta commit skip itself if `app_id` already committed `version`."""
    spark.conf.set("spark.databricks.delta.write.txnAppId", app_id)
    spark.conf.set("spark.databricks.delta.write.txnVersion", str(version))


def _clear_idempotent(spark: Any) -> None:
    spark.conf.unset("spark.databricks.delta.write.txnAppId")
    spark.conf.unset("spark.databricks.delta.write.txnVersion")


def upsert_batch(spec: TableSpec, app_id: str) -> Any:
    """The foreachBatch function of the upsert mode (see the module docstring)."""

    def apply(batch: Any, batch_id: int) -> None:
        from delta.tables import DeltaTable
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        spark = batch.sparkSession
        latest = (batch.where(F.col("key").isNotNull())
                  .withColumn("_n", F.row_number().over(Window.partitionBy("key").orderBy(
                      F.col("timestamp").desc(), F.col("partition").desc(), F.col("offset").desc())))
                  .where("_n = 1").drop("_n"))
        latest.persist()
        try:
            deletes = latest.where("_tombstone").select("key")
            rows = latest.where("NOT _tombstone").drop("_tombstone")
            if not _exists(spark, spec.path):
                # the first batch makes the table (an idempotent append: replayed, Delta skips it)
                (rows.write.format("delta").mode("append").partitionBy("date")
                 .option("txnAppId", app_id).option("txnVersion", 2 * batch_id + 1).save(spec.path))
                return
            table = DeltaTable.forPath(spark, spec.path)
            try:
                _idempotent(spark, app_id, 2 * batch_id)
                (table.alias("t").merge(deletes.alias("s"), "t.key = s.key").whenMatchedDelete().execute())
                _idempotent(spark, app_id, 2 * batch_id + 1)
                (table.alias("t").merge(rows.alias("s"), "t.key = s.key").withSchemaEvolution()
                 .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
            finally:
                _clear_idempotent(spark)
        finally:
            latest.unpersist()

    return apply


def start_query(spark: Any, spec: TableSpec, source: SourceOptions, trigger: dict[str, Any]) -> Any:
    """Start the streaming query that keeps `spec`'s table in step with its topic."""
    rows = table_rows(spark, spec.topic, source)
    name = f"tables-sync-{spec.topic}"
    if spec.mode == "append":
        writer = (rows.drop("_tombstone").writeStream.format("delta").outputMode("append")
                  .option("mergeSchema", "true").partitionBy("date").option("path", spec.path))
    else:
        writer = rows.writeStream.foreachBatch(upsert_batch(spec, sync_id(spec.checkpoint)))
    return writer.queryName(name).option("checkpointLocation", spec.checkpoint).trigger(**trigger).start()


# ---------------------------------------------------------------------------------------------------
# Topics and queries
# ---------------------------------------------------------------------------------------------------


def matching_topics(bootstrap: str, pattern: str, client: dict[str, str]) -> list[str]:
    """The topics whose whole name matches `pattern`, without internal topics (`__...`) and `_schemas`."""
    from confluent_kafka.admin import AdminClient

    regex = re.compile(pattern)
    names = AdminClient({"bootstrap.servers": bootstrap, **client}).list_topics(timeout=30).topics
    return sorted(t for t in names if regex.fullmatch(t) and not t.startswith("__") and t != "_schemas")


class TopicSync:
    """One topic's query, restarted when its value schema gets a new version."""

    def __init__(self, spark: Any, spec: TableSpec, source: SourceOptions, trigger: dict[str, Any]) -> None:
        self.spark, self.spec, self.source, self.trigger = spark, spec, source, trigger
        self.query: Any = None
        self.schema_id: int | None = None

    def start(self) -> None:
        if self.source.registry_url:
            self.schema_id = latest_schema_id(self.source.registry_url, self.spec.topic)
        self.query = start_query(self.spark, self.spec, self.source, self.trigger)
        log.info("syncing %s -> %s (%s mode%s)", self.spec.topic, self.spec.path, self.spec.mode,
                 f", value schema id {self.schema_id}" if self.schema_id is not None else "")

    def restart_if_schema_changed(self) -> bool:
        if not self.source.registry_url or self.query is None or not self.query.isActive:
            return False
        try:
            latest = latest_schema_id(self.source.registry_url, self.spec.topic)
        except SyncError as exc:
            log.warning("%s: %s", self.spec.topic, exc)
            return False
        if latest == self.schema_id:
            return False
        log.info("%s: value schema id %s -> %s: restarting its query with the new columns", self.spec.topic,
                 self.schema_id, latest)
        from odradek.spark.job import stop_queries

        stop_queries([self.query])  # its batch in progress committed first, as at Ctrl-C
        self.start()
        return True

    def failure(self) -> Any:
        return None if self.query is None or self.query.isActive else self.query.exception()


def _session(args: argparse.Namespace) -> Any:
    from odradek.spark.packages import DELTA
    from odradek.spark.session import spark_session

    status = DELTA.resolve(quiet=True)
    if not status.installed:
        raise SyncError(f"Delta Lake's jars: {status.reason}; `python -m odradek.spark.packages delta` retries")
    if status.note:
        log.info("%s", status.note)
    return spark_session(args.master, "odradek-tables-sync", {**DELTA.spark_conf(status), **SESSION_DEFAULTS,
                                                              **dict(args.conf)})


def main(args: argparse.Namespace) -> int:
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)  # a line for every foreachBatch callback otherwise
    client = dict(args.client)
    source = SourceOptions(args.bootstrap, (args.schema_registry or "").rstrip("/") or None, args.starting_offsets,
                           args.max_offsets_per_trigger, client)
    trigger = {"availableNow": True} if args.available_now else {"processingTime": f"{args.trigger_seconds} seconds"}
    if args.topics_pattern is not None:
        try:
            re.compile(args.topics_pattern)
        except re.error as exc:
            print(f"odradek tables sync: --topics-pattern: {exc}", file=sys.stderr)
            return 2
        if args.checkpoint:
            print("odradek tables sync: --checkpoint names one query's checkpoint: with --topics-pattern each "
                  "table keeps its own inside its directory", file=sys.stderr)
            return 2

    def spec_of(topic: str) -> TableSpec:
        if args.topic is not None:
            return TableSpec.of(topic, args.path, args.mode, args.checkpoint)
        return TableSpec.of(topic, os.path.join(args.path, topic), args.mode)

    from odradek.spark.job import GracefulStop, ProgressReport, stop_queries, stop_spark

    # Ctrl-C and SIGTERM stop the queries between micro-batches, then Spark (status 0); a second one forces
    graceful = GracefulStop()
    graceful.install()
    stop = graceful.event
    report = ProgressReport("tables sync", "quiet" if getattr(args, "quiet", False) else "lines")
    try:
        spark = _session(args)
    except SyncError as exc:
        log.error("%s", exc)
        return 2
    graceful.install()  # again: SparkContext put PySpark's own SIGINT handler (cancel every job) in its place
    syncs: dict[str, TopicSync] = {}

    def add_new_topics() -> None:
        topics = [args.topic] if args.topic is not None else matching_topics(args.bootstrap, args.topics_pattern, client)
        for topic in topics:
            if topic in syncs:
                continue
            sync = TopicSync(spark, spec_of(topic), source, trigger)
            try:
                sync.start()
            except SyncError as exc:
                if args.topic is not None:
                    raise
                log.warning("%s: not synced yet: %s", topic, exc)  # tried again at the next check
                continue
            syncs[topic] = sync

    failed = False
    try:
        try:
            add_new_topics()
        except SyncError as exc:
            log.error("%s", exc)
            return 1
        if not syncs:
            log.warning("no topic matches %r", args.topics_pattern)
        deadline = time.monotonic() + args.duration if args.duration else None
        next_check = time.monotonic() + args.check_seconds
        # a pattern's sync runs on without queries, waiting for topics to appear
        waits = not args.available_now and args.topics_pattern is not None
        while not stop.is_set() and (waits or any(s.query.isActive for s in syncs.values())):
            if any(s.failure() is not None for s in syncs.values()):
                break
            if deadline is not None and time.monotonic() >= deadline:
                break
            if not args.available_now and time.monotonic() >= next_check:
                next_check = time.monotonic() + args.check_seconds
                for s in list(syncs.values()):
                    s.restart_if_schema_changed()
                if args.topics_pattern is not None:
                    add_new_topics()
            report.poll([s.query for s in syncs.values() if s.query is not None])
            stop.wait(0.5)
    finally:
        queries = [s.query for s in syncs.values() if s.query is not None]
        stop_queries(queries)
        report.poll(queries)
        for s in syncs.values():
            if s.failure() is not None:
                failed = True
                log.error("the sync of %s failed: %s", s.spec.topic, s.failure())
        stop_spark(spark)
    if not failed:
        for s in syncs.values():
            progress = s.query.lastProgress if s.query is not None else None
            log.info("%s: %s", s.spec.topic, f"last batch {progress['batchId']}" if progress else "no batch")
    how = "failed" if failed else "finished" if args.available_now and not graceful.signals else "stopped"
    print(report.summary(how), flush=True)
    return 1 if failed else 0
