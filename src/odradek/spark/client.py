"""confluent-kafka access for the connector: topic metadata and offset lookups on the driver, exact offset
range reads into Arrow batches on executors.

Only the public Kafka protocol is used (through librdkafka), so this works against any Kafka-compatible
broker. Every wait is bounded.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any, Iterator

from odradek.spark.options import EARLIEST, LATEST, OffsetSpec, ReadOptions, TopicPartitionKey

log = logging.getLogger("odradek.spark")

METADATA_TIMEOUT_S = 30.0
# One offset lookup's wait before it is asked again: a request sent to a leader that just died waits for
# that broker until its timeout, while the partition has a new leader after a few seconds.
LOOKUP_ATTEMPT_S = 5.0


class DataLossError(RuntimeError):
    """Offsets the query needs are no longer in Kafka (retention, DeleteRecords, deleted topic)."""


DATA_LOSS_HINT = (
    "Some data may have been lost because it is not available in Kafka any more: either it was aged out "
    "by retention or removed with DeleteRecords, or the topic was deleted. If you want the query to "
    "continue, skipping the missing data, set the option 'failOnDataLoss' to 'false'."
)


def report_data_loss(fail: bool, message: str) -> None:
    """Raise (failOnDataLoss=true) or log a warning and carry on (false)."""
    if fail:
        raise DataLossError(f"{message}. {DATA_LOSS_HINT}")
    log.warning("%s. Skipping the missing data because failOnDataLoss is false.", message)


def _transient(exc: BaseException) -> bool:
    """An offset lookup's failure that a leader change or a broker restart explains: worth asking again."""
    from confluent_kafka import KafkaError

    err = exc.args[0] if exc.args else None
    return isinstance(err, KafkaError) and err.code() in (
        KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._TIMED_OUT, KafkaError._RESOLVE,
        KafkaError._DESTROY_BROKER,  # the dead leader's handle, dropped once the metadata no longer lists it
        KafkaError.LEADER_NOT_AVAILABLE, KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.REQUEST_TIMED_OUT,
        KafkaError.BROKER_NOT_AVAILABLE, KafkaError.FENCED_LEADER_EPOCH, KafkaError.UNKNOWN_LEADER_EPOCH,
        KafkaError.OFFSET_NOT_AVAILABLE, KafkaError.NOT_ENOUGH_REPLICAS)


def watermark_offsets(consumer: Any, topic: str, partition: int,
                      timeout_s: float = METADATA_TIMEOUT_S) -> tuple[int, int]:
    """(earliest, latest) of one partition, asked again after transient failures until `timeout_s`.

    While a partition's leader is being replaced, the lookup goes to the dead broker (librdkafka's cached
    metadata) and fails or times out; asking again after a metadata refresh reaches the new leader. A
    driver that gave up would fail the whole query, a task would count a failure towards Spark's limit.
    """
    from confluent_kafka import KafkaException, TopicPartition

    deadline = time.monotonic() + timeout_s
    while True:
        attempt = max(0.5, min(LOOKUP_ATTEMPT_S, deadline - time.monotonic()))
        try:
            return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=attempt, cached=False)
        except KafkaException as exc:
            if not _transient(exc) or time.monotonic() >= deadline:
                raise
            log.info("offsets of %s-%d: %s; asking again", topic, partition, exc.args[0])
        try:
            consumer.list_topics(topic, timeout=max(0.5, min(LOOKUP_ATTEMPT_S, deadline - time.monotonic())))
        except KafkaException:
            pass  # the next lookup says what is wrong
        time.sleep(0.2)


def consumer_config(client: dict[str, str], **overrides: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        # Defaults that match Spark's Kafka source (Java client default isolation is read_uncommitted;
        # librdkafka's is read_committed) and keep librdkafka from pausing fetches for a second after
        # each full local queue.
        "isolation.level": "read_uncommitted",
        "fetch.wait.max.ms": 50,
        "fetch.queue.backoff.ms": 10,
        "queued.min.messages": 200_000,
        "max.partition.fetch.bytes": 8 << 20,
        "fetch.max.bytes": 64 << 20,
        "socket.timeout.ms": 30_000,
    }
    cfg.update(client)
    cfg.setdefault("group.id", f"odradek-spark-{uuid.uuid4()}")  # never joined, never committed
    cfg.update({"enable.auto.commit": False, "enable.auto.offset.store": False, "auto.offset.reset": "error"})
    cfg.update(overrides)
    return cfg


class Metadata:
    """Driver-side lookups through one Consumer (it never subscribes or commits). Not picklable: create
    lazily and drop before pickling."""

    def __init__(self, client: dict[str, str]) -> None:
        from confluent_kafka import Consumer

        self._consumer = Consumer(consumer_config(client, **{"enable.partition.eof": False}))

    def close(self) -> None:
        try:
            self._consumer.close()
        except Exception:  # noqa: BLE001 - closing twice or after a broker loss
            pass

    def topics(self) -> dict[str, int]:
        """{topic: partition count} of the whole cluster (no auto-creation: no topic is named)."""
        md = self._consumer.list_topics(timeout=METADATA_TIMEOUT_S)
        out = {}
        for name, t in md.topics.items():
            if t.error is not None and not t.partitions:
                continue
            out[name] = len(t.partitions)
        return out

    def watermarks(self, partitions: list[TopicPartitionKey]) -> dict[TopicPartitionKey, tuple[int, int]]:
        """{(topic, partition): (earliest, latest)} — latest is the LSO under read_committed."""
        deadline = time.monotonic() + METADATA_TIMEOUT_S  # for all of them: a failover moves many at once
        return {(t, p): watermark_offsets(self._consumer, t, p, max(1.0, deadline - time.monotonic()))
                for t, p in partitions}

    def offsets_for_times(self, wanted: dict[TopicPartitionKey, int]) -> dict[TopicPartitionKey, int]:
        """{tp: first offset whose timestamp >= ts}, -1 where there is none."""
        from confluent_kafka import TopicPartition

        if not wanted:
            return {}
        result = self._consumer.offsets_for_times(
            [TopicPartition(t, p, ts) for (t, p), ts in wanted.items()], timeout=METADATA_TIMEOUT_S
        )
        out = {}
        for tp in result:
            if tp.error is not None:
                raise RuntimeError(f"offset lookup by timestamp failed for {tp.topic}-{tp.partition}: {tp.error}")
            out[(tp.topic, tp.partition)] = tp.offset
        return out

    def resolve(
        self,
        spec: OffsetSpec,
        partitions: list[TopicPartitionKey],
        which: str,
        strict: bool = True,
        by_timestamp_strategy: str = "error",
    ) -> dict[TopicPartitionKey, int]:
        """Concrete offsets of `partitions` for a starting/ending spec.

        `strict`: per-partition specs must name exactly the subscribed partitions (as Spark requires).
        """
        marks = self.watermarks(partitions)
        if spec.kind == "earliest":
            return {tp: marks[tp][0] for tp in partitions}
        if spec.kind == "latest":
            return {tp: marks[tp][1] for tp in partitions}
        given = spec.mapping()
        if spec.kind in ("offsets", "timestamps") and strict and set(given) != set(partitions):
            missing = sorted(set(partitions) - set(given))
            extra = sorted(set(given) - set(partitions))
            raise ValueError(
                f"'{which}Offsets{'ByTimestamp' if spec.kind == 'timestamps' else ''}' must name every subscribed "
                f"partition and no other: missing {missing}, not subscribed {extra}"
            )
        if spec.kind == "offsets":
            out = {}
            for tp in partitions:
                off = given.get(tp, EARLIEST if which == "starting" else LATEST)
                low, high = marks[tp]
                out[tp] = low if off == EARLIEST else high if off == LATEST else off
            return out
        stamps = {tp: (spec.timestamp if spec.kind == "timestamp" else given[tp]) for tp in partitions if
                  spec.kind == "timestamp" or tp in given}
        found = self.offsets_for_times(stamps)  # type: ignore[arg-type]
        out = {}
        for tp in partitions:
            off = found.get(tp, -1)
            if off is None or off < 0:
                if which == "starting" and by_timestamp_strategy == "error":
                    raise ValueError(
                        f"no offset in {tp[0]}-{tp[1]} has a timestamp >= {stamps.get(tp)} "
                        "(set startingOffsetsByTimestampStrategy=latest to start at the end instead)"
                    )
                off = marks[tp][1]
            out[tp] = off
        return out


# ---------------------------------------------------------------------------------------------------
# Executors: read one exact offset range into Arrow batches
# ---------------------------------------------------------------------------------------------------


def read_range(
    opts: ReadOptions, topic: str, partition: int, start: int, end: int, arrow_schema: Any
) -> Iterator[Any]:
    """Yield pyarrow.RecordBatch objects holding the records of [start, end) of one partition.

    Offsets may have gaps (compaction, transaction markers, aborted records under read_committed); the
    read ends at the first record at or past `end`, or at end-of-partition at or past `end`.
    """
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    if start >= end:
        return
    consumer = Consumer(consumer_config(opts.client, **{"enable.partition.eof": True}))
    try:
        where = f"{topic}-{partition}"
        try:
            low, high = watermark_offsets(consumer, topic, partition)
        except KafkaException as exc:
            if _transient(exc):  # the broker is unreachable, not the data gone: the task fails and is retried
                raise RuntimeError(f"cannot read the offsets of {where}: {exc.args[0]}") from exc
            report_data_loss(opts.fail_on_data_loss, f"cannot read {where} offsets [{start}, {end}): {exc.args[0]}")
            return
        if start < low:
            report_data_loss(
                opts.fail_on_data_loss,
                f"offsets [{start}, {min(low, end)}) of {where} were removed (earliest available is {low})",
            )
            start = low
            if start >= end:
                return
        if high < end:
            report_data_loss(
                opts.fail_on_data_loss,
                f"{where} ends at offset {high}, but offsets up to {end} were planned (topic recreated or truncated?)",
            )
            end = high
            if start >= end:
                return
        consumer.assign([TopicPartition(topic, partition, start)])
        builder = _BatchBuilder(topic, partition, opts.include_headers, arrow_schema)
        deadline = time.monotonic() + opts.poll_timeout_ms / 1000.0
        done = False
        while not done:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(
                    f"timed out after {opts.poll_timeout_ms} ms reading {where} [{start}, {end}) "
                    f"(reached offset {builder.last_offset}); see option kafkaConsumer.pollTimeoutMs"
                )
            msgs = consumer.consume(num_messages=10_000, timeout=min(1.0, left))
            for m in msgs:
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        if m.offset() >= end:
                            done = True
                            break
                        continue
                    if err.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                        report_data_loss(opts.fail_on_data_loss, f"offset out of range reading {where}: {err.str()}")
                        done = True
                        break
                    if err.code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION,
                                      KafkaError._UNKNOWN_TOPIC):
                        report_data_loss(opts.fail_on_data_loss, f"{where} disappeared while reading: {err.str()}")
                        done = True
                        break
                    if err.fatal() or not err.retriable():
                        raise KafkaException(err)
                    continue
                off = m.offset()
                if off >= end:
                    done = True
                    break
                builder.add(m)
                if off == end - 1:
                    done = True
                    break
                if builder.size >= opts.max_records_per_arrow_batch:
                    yield builder.flush()
                    deadline = time.monotonic() + opts.poll_timeout_ms / 1000.0
        if builder.size:
            yield builder.flush()
    finally:
        consumer.close()


_TS_TYPE = {1: 0, 2: 1}  # confluent TIMESTAMP_CREATE_TIME / LOG_APPEND_TIME -> Spark's 0 / 1


class _BatchBuilder:
    def __init__(self, topic: str, partition: int, include_headers: bool, schema: Any) -> None:
        self.topic = topic
        self.partition = partition
        self.include_headers = include_headers
        self.schema = schema
        self.last_offset = -1
        self._reset()

    def _reset(self) -> None:
        self.keys: list[Any] = []
        self.values: list[Any] = []
        self.offsets: list[int] = []
        self.stamps: list[int | None] = []
        self.types: list[int] = []
        self.headers: list[Any] = []

    @property
    def size(self) -> int:
        return len(self.offsets)

    def add(self, m: Any) -> None:
        off = m.offset()
        self.keys.append(m.key())
        self.values.append(m.value())
        self.offsets.append(off)
        self.last_offset = off
        ts_type, ts = m.timestamp()
        self.stamps.append(ts if ts_type else None)
        self.types.append(ts_type)
        if self.include_headers:
            h = m.headers()
            self.headers.append([{"key": k, "value": v} for k, v in h] if h else None)

    def flush(self) -> Any:
        import pyarrow as pa
        import pyarrow.compute  # noqa: F401 - pa.compute

        n = self.size
        s = self.schema
        cols = [
            pa.array(self.keys, type=s.field("key").type),
            pa.array(self.values, type=s.field("value").type),
            pa.array([self.topic] * n, type=s.field("topic").type),
            pa.array([self.partition] * n, type=s.field("partition").type),
            pa.array(self.offsets, type=s.field("offset").type),
            pa.compute.multiply(pa.array(self.stamps, type=pa.int64()), 1000).cast(s.field("timestamp").type),
            pa.array([_TS_TYPE.get(t, 0) for t in self.types] if any(t != 1 for t in self.types)
                     else [0] * n, type=s.field("timestampType").type),
        ]
        if self.include_headers:
            cols.append(pa.array(self.headers, type=s.field("headers").type))
        self._reset()
        return pa.RecordBatch.from_arrays(cols, schema=s)
