"""Batch and streaming readers: plan `{topic: {partition: offset}}` ranges on the driver, read them on
executors into Arrow batches with the row schema of Spark's Kafka source."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from odradek.spark.client import Metadata, read_range, report_data_loss
from odradek.spark.options import ReadOptions, TopicPartitionKey

if TYPE_CHECKING:
    from odradek.spark.registry_formats import RegistryPlan

Offsets = dict[TopicPartitionKey, int]


def kafka_schema(include_headers: bool) -> StructType:
    """The row schema of Spark's Kafka source."""
    fields = [
        StructField("key", BinaryType(), True),
        StructField("value", BinaryType(), True),
        StructField("topic", StringType(), True),
        StructField("partition", IntegerType(), True),
        StructField("offset", LongType(), True),
        StructField("timestamp", TimestampType(), True),
        StructField("timestampType", IntegerType(), True),
    ]
    if include_headers:
        header = StructType([StructField("key", StringType(), True), StructField("value", BinaryType(), True)])
        fields.append(StructField("headers", ArrayType(header, True), True))
    return StructType(fields)


def offsets_to_json(offsets: Offsets) -> dict[str, dict[str, int]]:
    """{topic: {"partition": offset}} with topics and partitions in a stable order (Spark compares them)."""
    out: dict[str, dict[str, int]] = {}
    for (t, p) in sorted(offsets):
        out.setdefault(t, {})[str(p)] = int(offsets[(t, p)])
    return out


def offsets_from_json(value: dict[str, Any] | None) -> Offsets:
    return {(t, int(p)): int(o) for t, ps in (value or {}).items() for p, o in ps.items()}


class KafkaInputPartition(InputPartition):
    """One Spark task: offsets [start, end) of one Kafka partition."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((topic, partition, start, end))
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end

    def __repr__(self) -> str:
        return f"KafkaInputPartition({self.topic}-{self.partition} [{self.start}, {self.end}))"


def plan_ranges(start: Offsets, end: Offsets, min_partitions: int | None) -> list[KafkaInputPartition]:
    """One input partition per non-empty range; with `minPartitions` larger than that, large ranges are
    split into pieces in proportion to their size."""
    ranges = [(tp, start[tp], end[tp]) for tp in sorted(end) if tp in start and end[tp] > start[tp]]
    if not min_partitions or len(ranges) >= min_partitions:
        return [KafkaInputPartition(t, p, s, e) for (t, p), s, e in ranges]
    total = sum(e - s for _, s, e in ranges)
    out = []
    for (t, p), s, e in ranges:
        size = e - s
        pieces = max(1, min(size, math.ceil(size * min_partitions / total)))
        for i in range(pieces):
            lo, hi = s + size * i // pieces, s + size * (i + 1) // pieces
            if hi > lo:
                out.append(KafkaInputPartition(t, p, lo, hi))
    return out


def limit_offsets(begin: Offsets, latest: Offsets, max_rows: int) -> Offsets:
    """End offsets admitting at most `max_rows` records, shared in proportion to each partition's backlog
    (largest remainders get the leftover records, so the total is exactly `max_rows` when enough is there)."""
    sizes = {tp: max(0, latest[tp] - begin[tp]) for tp in latest}
    total = sum(sizes.values())
    if total <= max_rows:
        return dict(latest)
    alloc = {tp: size * max_rows // total for tp, size in sizes.items()}
    leftover = max_rows - sum(alloc.values())
    order = sorted(sizes, key=lambda tp: (-((sizes[tp] * max_rows) % total), tp))
    for tp in order:
        if leftover <= 0:
            break
        if alloc[tp] < sizes[tp]:
            alloc[tp] += 1
            leftover -= 1
    return {tp: begin[tp] + alloc[tp] if sizes[tp] else latest[tp] for tp in latest}


class _MetadataMixin:
    """Lazily created driver-side client, dropped when the reader is pickled to executors."""

    opts: ReadOptions
    schema: StructType
    registry: RegistryPlan | None
    _md: Metadata | None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_md"] = None
        return state

    def metadata(self) -> Metadata:
        if self._md is None:
            self._md = Metadata(self.opts.client)
        return self._md

    def current_partitions(self) -> list[TopicPartitionKey]:
        cluster = self.metadata().topics()
        sub = self.opts.subscription
        if sub.kind == "assign":
            return [(t, p) for t, p in sub.partitions if p < cluster.get(t, 0)]
        return sub.select(cluster)

    def arrow_schema(self, schema: StructType) -> Any:
        from pyspark.sql.pandas.types import to_arrow_schema

        return to_arrow_schema(schema, timezone="UTC")

    def read_batches(self, partition: InputPartition) -> Iterator[Any]:
        """Kafka's columns as read; with registry-decoded columns, decoded from the binary ones afterwards (a
        decoding failure then knows the record's topic, partition and offset from the batch)."""
        assert isinstance(partition, KafkaInputPartition)
        if self.registry is None:
            yield from read_range(self.opts, partition.topic, partition.partition, partition.start, partition.end,
                                  self.arrow_schema(self.schema))
            return
        from odradek.spark.registry_formats import RegistryDecoder

        decoder = RegistryDecoder(self.registry, self.arrow_schema(self.schema))
        binary = self.arrow_schema(kafka_schema(self.opts.include_headers))
        for batch in read_range(self.opts, partition.topic, partition.partition, partition.start, partition.end,
                                binary):
            yield decoder.decode_batch(batch)


class KafkaBatchReader(_MetadataMixin, DataSourceReader):
    def __init__(self, opts: ReadOptions, schema: StructType, registry: RegistryPlan | None = None) -> None:
        self.opts = opts
        self.schema = schema
        self.registry = registry
        self._md = None

    def partitions(self) -> Sequence[InputPartition]:
        try:
            parts = self.current_partitions()
            md = self.metadata()
            start = md.resolve(self.opts.starting, parts, "starting",
                               by_timestamp_strategy=self.opts.by_timestamp_strategy)
            assert self.opts.ending is not None
            end = md.resolve(self.opts.ending, parts, "ending")
        finally:
            if self._md is not None:
                self._md.close()
                self._md = None
        for tp in parts:
            if end[tp] < start[tp]:
                raise ValueError(
                    f"ending offset {end[tp]} of {tp[0]}-{tp[1]} is before its starting offset {start[tp]}"
                )
        return plan_ranges(start, end, self.opts.min_partitions)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        yield from self.read_batches(partition)


class KafkaStreamReader(_MetadataMixin, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader. Offsets are `{topic: {partition: offset}}`; partitions that appear later (new
    topics matching `subscribePattern`, added partitions) are read from their earliest offset."""

    def __init__(self, opts: ReadOptions, schema: StructType, registry: RegistryPlan | None = None) -> None:
        self.opts = opts
        self.schema = schema
        self.registry = registry
        self._md = None
        self._target: Offsets | None = None  # Trigger.AvailableNow: never read past these

    def initialOffset(self) -> dict:
        parts = self.current_partitions()
        start = self.metadata().resolve(self.opts.starting, parts, "starting",
                                        by_timestamp_strategy=self.opts.by_timestamp_strategy)
        return offsets_to_json(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        parts = self.current_partitions()
        self._target = {tp: high for tp, (_, high) in self.metadata().watermarks(parts).items()}

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        known = offsets_from_json(start)
        parts = self.current_partitions()
        gone = sorted(set(known) - set(parts))
        if gone:
            report_data_loss(self.opts.fail_on_data_loss,
                             "partitions " + ", ".join(f"{t}-{p}" for t, p in gone) + " have been deleted")
        marks = self.metadata().watermarks(parts)
        begin: Offsets = {}
        latest: Offsets = {}
        for tp in parts:
            low, high = marks[tp]
            b = known.get(tp, low)
            if high < b:
                report_data_loss(self.opts.fail_on_data_loss,
                                 f"{tp[0]}-{tp[1]} went back from offset {b} to {high} (topic recreated?)")
                b = high
            if self._target is not None:
                high = min(high, max(b, self._target.get(tp, b)))
            begin[tp], latest[tp] = b, max(high, b)
        if isinstance(limit, ReadMaxRows):
            latest = limit_offsets(begin, latest, limit.max_rows)
        return offsets_to_json(latest)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        s = offsets_from_json(start)
        e = offsets_from_json(end)
        new = [tp for tp in e if tp not in s]
        if new:
            for tp, (low, _) in self.metadata().watermarks(new).items():
                s[tp] = min(low, e[tp])
        return plan_ranges(s, e, self.opts.min_partitions)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        yield from self.read_batches(partition)

    def commit(self, end: dict) -> None:
        # Progress lives in Spark's checkpoint (offset log); nothing is committed to Kafka.
        pass

    def stop(self) -> None:
        if self._md is not None:
            self._md.close()
            self._md = None
