"""Batch and streaming writers: rows with `value` (and optional `key`, `topic`, `partition`, `headers`)
are produced to Kafka with confluent-kafka.

Exactly-once streaming writes (option `exactlyOnce`, default true for streaming)
--------------------------------------------------------------------------------
Spark's driver-side `commit(messages, batchId)` cannot commit a Kafka transaction opened by an executor
(a transaction belongs to the producer that began it), so every write task commits its own transaction,
and what makes a replay harmless is stored *inside* that transaction:

* transactional.id = `<transactionalIdPrefix><queryId>-<partitionId>`. The query id is the one Spark keeps
  in the checkpoint, so the restarted query reuses the same ids; `init_transactions()` fences any zombie
  producer of an earlier attempt (its open transaction is aborted, its late commit fails).
* In the same transaction the task commits, as consumer-group offset, `batchId + 1` for the group named
  like the transactional id on partition 0 of a small marker topic (`exactlyOnce.markerTopic`). The
  output records and the marker become visible atomically.
* Before writing batch N, a task reads its marker (read_committed). If it is already past N, the batch was
  committed by an earlier run whose driver died before Spark recorded the batch in its commit log: the
  task drops its input and writes nothing. A replayed batch is recomputed from the same offsets (the
  offset log) and the same state, so partition p of batch N holds the same rows as before.

If some tasks commit and another fails for good, the committed part stays visible; the restarted query
replays the batch and only the missing partitions are written. Consumers of the output must use
`isolation.level=read_committed` to never see aborted attempts.

`exactlyOnce=false` writes without transactions (at least once: a replayed batch is written again).
`exactlyOnce=auto` probes the broker when the query starts and falls back to at-least-once, with a warning,
when it does not support transactions. Batch (non-streaming) writes are always at least once.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Iterator, List, Optional

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from odradek.spark.options import OptionError, WriteOptions

log = logging.getLogger("odradek.spark")

QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"


@dataclass
class KafkaCommitMessage(WriterCommitMessage):
    partition_id: int
    records: int
    batch_id: Optional[int] = None
    skipped: bool = False  # exactly-once: this batch was already committed by an earlier run
    transactional: bool = False


def validate_input_schema(schema: StructType, opts: WriteOptions) -> None:
    """The sink's input columns, as Spark's Kafka sink checks them."""
    types = {f.name: f.dataType for f in schema.fields}
    if "value" not in types:
        raise OptionError("the DataFrame to write to Kafka needs a 'value' column (string or binary)")
    for name in ("value", "key"):
        if name in types and not isinstance(types[name], (StringType, BinaryType)):
            raise OptionError(f"column '{name}' must be string or binary, not {types[name].simpleString()}")
    if "topic" in types and not isinstance(types["topic"], StringType):
        raise OptionError(f"column 'topic' must be a string, not {types['topic'].simpleString()}")
    if "topic" not in types and opts.topic is None:
        raise OptionError("no topic: give the option 'topic' or a 'topic' column")
    if "partition" in types and not isinstance(types["partition"], IntegerType):
        raise OptionError(f"column 'partition' must be an int, not {types['partition'].simpleString()}")
    if "headers" in types:
        h = types["headers"]
        ok = (isinstance(h, ArrayType) and isinstance(h.elementType, StructType)
              and [f.name for f in h.elementType.fields] == ["key", "value"]
              and isinstance(h.elementType["key"].dataType, StringType)
              and isinstance(h.elementType["value"].dataType, BinaryType))
        if not ok:
            raise OptionError("column 'headers' must be array<struct<key:string,value:binary>>")


def producer_config(opts: WriteOptions, **overrides: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {"linger.ms": 5, "batch.size": 1_000_000, "message.timeout.ms": int(opts.timeout_s * 1000)}
    cfg.update(opts.client)
    cfg.update(overrides)
    return cfg


class _Produce:
    """Produce Arrow batches with one Producer; delivery errors are collected and raised at the end."""

    def __init__(self, producer: Any, opts: WriteOptions) -> None:
        self.producer = producer
        self.opts = opts
        self.errors: list[str] = []
        self.count = 0

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None and len(self.errors) < 10:
            self.errors.append(f"{msg.topic()}-{msg.partition()}: {err}")

    def batches(self, batches: Iterator[Any]) -> None:
        produce = self.producer.produce
        poll = self.producer.poll
        for batch in batches:
            cols = {name: batch.column(i).to_pylist() for i, name in enumerate(batch.schema.names)}
            n = batch.num_rows
            values = cols["value"]
            keys = cols.get("key") or [None] * n
            parts = cols.get("partition")
            headers = cols.get("headers")
            topics = [self.opts.topic] * n if self.opts.topic else cols["topic"]
            for i in range(n):
                topic = topics[i]
                if topic is None:
                    raise ValueError("null topic in a row and no 'topic' option")
                kwargs: dict[str, Any] = {"value": values[i], "key": keys[i], "on_delivery": self._on_delivery}
                if parts is not None and parts[i] is not None:
                    kwargs["partition"] = parts[i]
                if headers is not None and headers[i]:
                    kwargs["headers"] = [(h["key"], h["value"]) for h in headers[i]]
                while True:
                    try:
                        produce(topic, **kwargs)
                        break
                    except BufferError:
                        poll(0.05)
                self.count += 1
                if self.count % 1000 == 0:
                    poll(0)

    def flush(self) -> None:
        deadline = time.monotonic() + self.opts.timeout_s
        while self.producer.flush(1.0) > 0:
            if time.monotonic() > deadline:
                raise TimeoutError(f"Kafka producer could not deliver every record within {self.opts.timeout_s} s")
        self.check()

    def check(self) -> None:
        if self.errors:
            raise RuntimeError("Kafka delivery failed: " + "; ".join(self.errors))


def write_at_least_once(opts: WriteOptions, batches: Iterator[Any], partition_id: int,
                        batch_id: Optional[int] = None) -> KafkaCommitMessage:
    from confluent_kafka import Producer

    p = _Produce(Producer(producer_config(opts)), opts)
    p.batches(batches)
    p.flush()
    return KafkaCommitMessage(partition_id=partition_id, records=p.count, batch_id=batch_id)


def transactional_id(opts: WriteOptions, query_id: str, partition_id: int) -> str:
    return f"{opts.transactional_id_prefix}{query_id}-{partition_id}"


def committed_batch(opts: WriteOptions, txn_id: str) -> Optional[int]:
    """The last batch id committed by `txn_id` (read_committed), or None."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({**opts.client, "group.id": txn_id, "isolation.level": "read_committed",
                         "enable.auto.commit": False})
    try:
        [tp] = consumer.committed([TopicPartition(opts.marker_topic, 0)], timeout=opts.timeout_s)
        if tp.error is not None:
            raise RuntimeError(f"cannot read the exactly-once marker of {txn_id}: {tp.error}")
        return tp.offset - 1 if tp.offset >= 1 else None
    finally:
        consumer.close()


def write_exactly_once(opts: WriteOptions, batches: Iterator[Any], query_id: str, batch_id: int,
                       partition_id: int) -> KafkaCommitMessage:
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    txn_id = transactional_id(opts, query_id, partition_id)
    producer = Producer(producer_config(opts, **{"transactional.id": txn_id, "enable.idempotence": True}))
    try:
        producer.init_transactions(opts.timeout_s)  # fences earlier attempts of this task
    except KafkaException as exc:
        raise RuntimeError(
            f"exactly-once Kafka write: init_transactions for {txn_id!r} failed ({exc.args[0]}). The broker must "
            "support transactions; set the option exactlyOnce=false (at least once) or exactlyOnce=auto otherwise"
        ) from exc
    last = committed_batch(opts, txn_id)
    if last is not None and last >= batch_id:
        for _ in batches:  # drain the input; this batch is already in Kafka
            pass
        log.warning("exactly-once: %s already committed batch %d (replay of batch %d); writing nothing",
                    txn_id, last, batch_id)
        return KafkaCommitMessage(partition_id=partition_id, records=0, batch_id=batch_id, skipped=True,
                                  transactional=True)
    group = Consumer({**opts.client, "group.id": txn_id, "enable.auto.commit": False})
    try:
        producer.begin_transaction()
        p = _Produce(producer, opts)
        try:
            p.batches(batches)
            p.flush()
            info = json.dumps({"query": query_id, "batch": batch_id, "partition": partition_id, "records": p.count})
            marker = TopicPartition(opts.marker_topic, 0, batch_id + 1, metadata=info)
            producer.send_offsets_to_transaction([marker], group.consumer_group_metadata(), opts.timeout_s)
            producer.commit_transaction(opts.timeout_s)
        except BaseException:
            try:
                producer.abort_transaction(opts.timeout_s)
            except KafkaException as exc:
                log.warning("exactly-once: aborting the transaction of %s failed: %s", txn_id, exc)
            raise
    finally:
        group.close()
    return KafkaCommitMessage(partition_id=partition_id, records=p.count, batch_id=batch_id, transactional=True)


def probe_transactions(opts: WriteOptions, timeout_s: float = 15.0) -> Optional[str]:
    """None if the broker completes init_transactions(); otherwise why not."""
    from confluent_kafka import KafkaException, Producer

    producer = Producer(producer_config(opts, **{"transactional.id": f"{opts.transactional_id_prefix}probe-{uuid.uuid4()}",
                                                 "enable.idempotence": True}))
    try:
        producer.init_transactions(timeout_s)
        return None
    except KafkaException as exc:
        return str(exc.args[0])


def ensure_marker_topic(opts: WriteOptions) -> None:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(dict(opts.client))
    if opts.marker_topic in admin.list_topics(timeout=opts.timeout_s).topics:
        return
    futures = admin.create_topics([NewTopic(opts.marker_topic, num_partitions=1, replication_factor=-1,
                                            config={"cleanup.policy": "compact"})],
                                  request_timeout=opts.timeout_s)
    try:
        futures[opts.marker_topic].result(opts.timeout_s)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise


def _task_context() -> Any:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        raise RuntimeError("not running inside a Spark task")
    return ctx


class KafkaBatchWriter(DataSourceArrowWriter):
    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[Any]) -> KafkaCommitMessage:
        return write_at_least_once(self.opts, iterator, _task_context().partitionId())

    def commit(self, messages: List[Optional[WriterCommitMessage]]) -> None:
        total = sum(m.records for m in messages if isinstance(m, KafkaCommitMessage))
        log.info("wrote %d records to Kafka", total)

    def abort(self, messages: List[Optional[WriterCommitMessage]]) -> None:
        log.warning("batch write to Kafka failed; records of the tasks that finished stay in Kafka")


class KafkaStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, opts: WriteOptions, transactional: bool) -> None:
        self.opts = opts
        self.transactional = transactional

    def write(self, iterator: Iterator[Any]) -> KafkaCommitMessage:
        ctx = _task_context()
        pid = ctx.partitionId()
        raw_batch = ctx.getLocalProperty(BATCH_ID_PROPERTY)
        batch_id = int(raw_batch) if raw_batch is not None else None
        if not self.transactional:
            return write_at_least_once(self.opts, iterator, pid, batch_id)
        query_id = ctx.getLocalProperty(QUERY_ID_PROPERTY)
        if not query_id or batch_id is None:
            raise RuntimeError("exactly-once Kafka write needs Spark's streaming query id and batch id "
                               f"(task properties {QUERY_ID_PROPERTY!r}, {BATCH_ID_PROPERTY!r})")
        return write_exactly_once(self.opts, iterator, query_id, batch_id, pid)

    def commit(self, messages: List[Optional[WriterCommitMessage]], batchId: int) -> None:
        done = [m for m in messages if isinstance(m, KafkaCommitMessage)]
        log.info("batch %d: %d records written to Kafka, %d task(s) skipped as already committed",
                 batchId, sum(m.records for m in done), sum(1 for m in done if m.skipped))

    def abort(self, messages: List[Optional[WriterCommitMessage]], batchId: int) -> None:
        # info: a graceful stop aborts the batch it interrupts, and a real failure reaches the job as the query's
        # exception; this process (a Python worker) has no handler of its own for lower levels
        log.info("batch %d aborted; %s", batchId,
                    "tasks that committed keep their output and are skipped when the batch is replayed"
                    if self.transactional else "records of finished tasks stay in Kafka (at least once)")


def make_stream_writer(opts: WriteOptions, schema: StructType,
                       probe: Callable[[WriteOptions], Optional[str]] = probe_transactions) -> KafkaStreamWriter:
    validate_input_schema(schema, opts)
    transactional = opts.exactly_once == "true"
    if opts.exactly_once == "auto":
        why = probe(opts)
        transactional = why is None
        if why is not None:
            log.warning("exactlyOnce=auto: the broker does not complete transactions (%s); writing at least once",
                        why)
    if transactional:
        ensure_marker_topic(opts)
    return KafkaStreamWriter(opts, transactional)
